//! Search across a user's sessions over the API, on loopback with the mock LLM: words and
//! phrases in the user's and the agent's messages and in sessions' names, by relevance or
//! newest first, a snippet with its marks; a message sent after a search is found by the
//! next; another user's words are never found; bad queries are a 400 that says why.

mod support;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use support::*;

async fn note(h: &Hero, session: i64, content: &str) {
    let (s, v) = h
        .json(
            Method::POST,
            &format!("/api/sessions/{session}/messages"),
            Some(json!({"content": content, "private": true})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
}

async fn new_session(h: &Hero, name: &str) -> i64 {
    let (s, v) = h
        .json(Method::POST, "/api/sessions", Some(json!({"name": name})))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    v["id"].as_i64().unwrap()
}

async fn search(h: &Hero, query: &str) -> Vec<Value> {
    let url = format!("/api/search?{}", serde_urlencoded(query));
    let (s, v) = h.json(Method::GET, &url, None).await;
    assert_eq!(s, StatusCode::OK, "{query}: {v}");
    v.as_array().unwrap().clone()
}

fn serde_urlencoded(query: &str) -> String {
    query
        .split('&')
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap();
            format!("{k}={}", urlencode(v))
        })
        .collect::<Vec<_>>()
        .join("&")
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn frames_of(hits: &[Value]) -> Vec<(i64, Option<&str>)> {
    hits.iter()
        .map(|h| (h["session_id"].as_i64().unwrap(), h["frame_id"].as_str()))
        .collect()
}

#[tokio::test]
async fn a_user_finds_their_words_in_every_session_and_nobody_elses() {
    let mock = mock_llm::spawn(mock_llm::Config::default()).await.unwrap();
    let h = hero(&[mock.addr()]).await;
    let garden = new_session(&h, "Garden plans").await;
    note(&h, garden, "The tomatoes need more sun this year.").await;
    note(
        &h,
        garden,
        "Plant the tomatoes near the fence, not the shed.",
    )
    .await;
    // The agent's words are found too.
    let (chat, _) = h.session_with("anthropic", &mock, KEY).await;
    h.stream(
        chat,
        "[[mock text=\"Cucumbers like the sun <thinking>warm</thinking> as well.\"]]",
    )
    .await;

    let hits = search(&h, "q=tomatoes").await;
    assert_eq!(hits.len(), 2, "{hits:?}");
    assert!(
        hits.iter()
            .all(|x| x["session_id"] == garden && x["kind"] == "user")
    );
    let first = &hits[0];
    assert_eq!(first["session_name"], "Garden plans");
    let snippet: Vec<char> = first["snippet"].as_str().unwrap().chars().collect();
    let (a, b) = (
        first["highlights"][0][0].as_u64().unwrap() as usize,
        first["highlights"][0][1].as_u64().unwrap() as usize,
    );
    assert_eq!(
        snippet[a..b].iter().collect::<String>().to_lowercase(),
        "tomatoes"
    );

    // The agent's reply, found by a word of it, its tags left out (the user's message that
    // asked the mock for it holds the word too).
    let hits = search(&h, "q=cucumbers").await;
    assert_eq!(hits.len(), 2, "{hits:?}");
    let reply = hits
        .iter()
        .find(|x| x["kind"] == "agent")
        .expect("the agent's reply");
    assert_eq!(reply["session_id"].as_i64(), Some(chat));
    assert_eq!(reply["snippet"], "Cucumbers like the sun warm as well.");

    // Newest first, and the limit.
    let recent = search(&h, "q=sun&sort=recent").await;
    assert_eq!(frames_of(&recent)[0].0, chat, "{recent:?}");
    assert_eq!(
        recent.len(),
        3,
        "two in the chat, one in the garden: {recent:?}"
    );
    assert_eq!(search(&h, "q=sun&limit=1").await.len(), 1);
    // A phrase as written.
    let phrase = search(&h, "q=\"near the fence\"").await;
    assert_eq!(phrase.len(), 1);
    assert!(
        phrase[0]["snippet"]
            .as_str()
            .unwrap()
            .contains("near the fence")
    );
    assert!(search(&h, "q=\"fence near\"").await.is_empty());

    // A session found by its name leads; a renamed one by its new name.
    let hits = search(&h, "q=garden").await;
    assert_eq!(
        (hits[0]["kind"].as_str(), hits[0]["frame_id"].as_str()),
        (Some("session"), None)
    );
    let (s, _) = h
        .json(
            Method::PATCH,
            &format!("/api/sessions/{garden}"),
            Some(json!({"name": "Allotment"})),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    assert!(search(&h, "q=garden").await.is_empty());
    assert_eq!(search(&h, "q=allotment").await.len(), 1);

    // A message sent after the index was built is found by the next search.
    note(&h, garden, "Courgettes everywhere by August.").await;
    let hits = search(&h, "q=courgettes").await;
    assert_eq!(hits.len(), 1);

    // Bob finds his own words only, never Alice's.
    let bob = bob_client(&h).await;
    let r = bob
        .get(h.url("/api/search?q=tomatoes"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.json::<Value>().await.unwrap(), json!([]));
    let r = bob
        .post(h.url("/api/sessions"))
        .json(&json!({"name": "Bob's tomatoes"}))
        .send()
        .await
        .unwrap();
    let bobs: i64 = r.json::<Value>().await.unwrap()["id"].as_i64().unwrap();
    let r = bob
        .get(h.url("/api/search?q=tomatoes"))
        .send()
        .await
        .unwrap();
    let found: Value = r.json().await.unwrap();
    assert_eq!(frames_of(found.as_array().unwrap()), vec![(bobs, None)]);
    assert_eq!(
        search(&h, "q=tomatoes").await.len(),
        2,
        "Alice's results are unchanged"
    );
}

#[tokio::test]
async fn a_bad_search_is_a_400_that_says_why() {
    let h = hero(&[]).await;
    let long = "word ".repeat(101);
    for (query, says) in [
        (format!("q={}", urlencode(&long)), "at most 500 characters"),
        ("q=".to_owned(), "at least one word"),
        ("q=%3F%21".to_owned(), "at least one word"),
        ("q=sun&sort=oldest".to_owned(), "relevance or recent"),
        ("q=sun&colour=red".to_owned(), "unknown field"),
        ("limit=3".to_owned(), "missing field"),
        ("q=sun&limit=many".to_owned(), "invalid"),
    ] {
        let (s, v) = h
            .json(Method::GET, &format!("/api/search?{query}"), None)
            .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{query}: {v}");
        assert!(v["error"].as_str().unwrap().contains(says), "{query}: {v}");
    }
    let r = reqwest::get(h.url("/api/search?q=sun")).await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
}
