//! A message's versions on loopback with the mock LLM: the user's message edited and
//! answered again, the agent's reply regenerated from the conversation before it, a
//! switch back to the first version (the view, the next reply's context and the page all
//! following it), and every bad request a 4xx naming its problem with nothing stored.

mod support;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use support::*;

/// The session's view: each message's id, text and versions (`2/3` for the second of three).
async fn view(h: &Hero, session: i64) -> Vec<(String, String, String)> {
    let (s, v) = h
        .json(Method::GET, &format!("/api/sessions/{session}/view"), None)
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    v["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["type"] == "message" && m["payload"]["hidden"] != true)
        .map(|m| {
            let versions = match &m["versions"] {
                Value::Null => String::new(),
                v => format!("{}/{}", v["current"], v["count"]),
            };
            (
                m["frame_id"].as_str().unwrap().to_owned(),
                m["content"].as_str().unwrap().to_owned(),
                versions,
            )
        })
        .collect()
}

/// What the view shows, as `text [versions]` lines.
fn shown(v: &[(String, String, String)]) -> Vec<String> {
    v.iter()
        .map(|(_, text, versions)| match versions.is_empty() {
            true => text.clone(),
            false => format!("{text} [{versions}]"),
        })
        .collect()
}

/// Waits until the session's agent message `id` is stored.
async fn replied(h: &Hero, session: i64, id: &str) {
    frames_when(h, session, |f| f.iter().any(|f| f["id"] == id)).await;
    // And the turn is over: nothing runs for the session.
    for _ in 0..200 {
        if h.st.turns.is_idle(session) {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("the reply {id} never ended");
}

/// The user messages the mock was last sent, as text.
fn last_sent(mock: &mock_llm::MockServer) -> Vec<String> {
    let requests = mock.requests();
    let last = requests.last().expect("a request");
    last["body"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| match &m["content"] {
            Value::String(s) => s.clone(),
            blocks => blocks
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join(""),
        })
        .collect()
}

#[tokio::test]
async fn an_edit_and_a_regeneration_are_versions_and_a_switch_goes_back() {
    let mock = mock_llm::spawn(mock_llm::Config::default()).await.unwrap();
    let h = hero(&[mock.addr()]).await;
    let (session, _) = h.session_with("anthropic", &mock, KEY).await;
    h.stream(session, "hi [[mock text=hello]]").await;
    h.stream(session, "a wrod [[mock text=what?]]").await;
    let before = view(&h, session).await;
    let texts: Vec<&str> = before.iter().map(|(_, t, _)| t.as_str()).collect();
    assert_eq!(
        texts,
        [
            "hi [[mock text=hello]]",
            "hello",
            "a wrod [[mock text=what?]]",
            "what?"
        ]
    );
    let typo = before[2].0.clone();

    // The typo edited: the agent answers the edit, and the edit is version 2 of 2.
    let (s, started) = h
        .json(
            Method::PUT,
            &format!("/api/sessions/{session}/messages/{typo}"),
            Some(json!({"content": "a word [[mock text=fine]]"})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{started}");
    let reply = started["message_id"].as_str().unwrap().to_owned();
    replied(&h, session, &reply).await;
    let edited = view(&h, session).await;
    assert_eq!(
        shown(&edited),
        [
            "hi [[mock text=hello]]",
            "hello",
            "a word [[mock text=fine]] [2/2]",
            "fine"
        ]
    );
    assert_eq!(edited[3].0, reply);
    // The agent read the edit, not the typo.
    let sent = last_sent(&mock);
    assert!(sent.last().unwrap().contains("a word"), "{sent:?}");
    assert!(!sent.iter().any(|m| m.contains("wrod")), "{sent:?}");

    // The answer regenerated: the agent is sent the conversation before it, and the new
    // answer is version 2 of 2 of the answer.
    let (s, started) = h
        .json(
            Method::POST,
            &format!("/api/sessions/{session}/messages/{reply}/regenerate"),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{started}");
    let again = started["message_id"].as_str().unwrap().to_owned();
    replied(&h, session, &again).await;
    let sent = last_sent(&mock);
    assert_eq!(sent.len(), 3, "{sent:?}");
    assert!(sent[2].contains("a word"), "{sent:?}");
    let regenerated = view(&h, session).await;
    assert_eq!(
        shown(&regenerated),
        [
            "hi [[mock text=hello]]",
            "hello",
            "a word [[mock text=fine]] [2/2]",
            "fine [2/2]"
        ]
    );
    assert_eq!(regenerated[3].0, again);

    // Back to the typo, by the edit's own id: its first answer comes back.
    let (s, body) = h
        .json(
            Method::POST,
            &format!("/api/sessions/{session}/messages/{}/current", edited[2].0),
            Some(json!({"version": 1})),
        )
        .await;
    assert_eq!(s, StatusCode::NO_CONTENT, "{body}");
    assert_eq!(
        shown(&view(&h, session).await),
        [
            "hi [[mock text=hello]]",
            "hello",
            "a wrod [[mock text=what?]] [1/2]",
            "what?"
        ]
    );
    // The conversation goes on from the version shown.
    h.stream(session, "and then [[mock text=ok]]").await;
    let sent = last_sent(&mock);
    assert!(
        sent.iter().any(|m| m.contains("wrod")) && !sent.iter().any(|m| m.contains("a word")),
        "{sent:?}"
    );
    // Version 2 again: its own regenerated answer was kept.
    let (s, _) = h
        .json(
            Method::POST,
            &format!("/api/sessions/{session}/messages/{typo}/current"),
            Some(json!({"version": 2})),
        )
        .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    assert_eq!(view(&h, session).await, regenerated);
    // The Markdown export writes the versions shown, as the chat shows them; the JSON
    // export keeps every frame.
    let md = h
        .page(&format!("/api/sessions/{session}/export?format=markdown"))
        .await;
    assert!(md.contains("a word") && md.contains("fine"), "{md}");
    assert!(
        !md.contains("wrod") && !md.contains("what?") && !md.contains("and then"),
        "{md}"
    );
    let all = h
        .page(&format!("/api/sessions/{session}/export?format=json"))
        .await;
    assert!(all.contains("wrod") && all.contains("a word") && all.contains("and then"));
    // A branch from the regenerated answer, while the typo's version is shown again: the
    // new session holds the conversation up to the answer, as it was when written.
    let (s, _) = h
        .json(
            Method::POST,
            &format!("/api/sessions/{session}/messages/{typo}/current"),
            Some(json!({"version": 1})),
        )
        .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (s, branch) = h
        .json(
            Method::POST,
            &format!("/api/sessions/{session}/branch"),
            Some(json!({ "from_frame_id": again })),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{branch}");
    let branched = view(&h, branch["id"].as_i64().unwrap()).await;
    assert_eq!(shown(&branched)[..4], shown(&regenerated)[..]);
    assert!(branched[4].1.starts_with("Branched from"), "{branched:?}");
    // Nothing was deleted: every version is still a frame of the log.
    let frames = h.frames(session).await;
    assert!(frames.iter().any(|f| f["id"] == typo));
    assert!(frames.iter().any(|f| f["id"] == reply));
}

#[tokio::test]
async fn bad_version_requests_are_refused_and_change_nothing() {
    let mock = mock_llm::spawn(mock_llm::Config::default()).await.unwrap();
    let h = hero(&[mock.addr()]).await;
    let (session, _) = h.session_with("anthropic", &mock, KEY).await;
    h.stream(session, "hi [[mock text=hello]]").await;
    let v = view(&h, session).await;
    let (mine, theirs) = (v[0].0.clone(), v[1].0.clone());
    let count = h.frames(session).await.len();
    let edit = |frame: &str| {
        (
            Method::PUT,
            format!("/api/sessions/{session}/messages/{frame}"),
            Some(json!({"content": "changed"})),
        )
    };
    let regenerate = |frame: &str| {
        (
            Method::POST,
            format!("/api/sessions/{session}/messages/{frame}/regenerate"),
            None,
        )
    };
    let current = |frame: &str, version: u64| {
        (
            Method::POST,
            format!("/api/sessions/{session}/messages/{frame}/current"),
            Some(json!({ "version": version })),
        )
    };
    let cases = [
        (
            edit(&theirs),
            StatusCode::CONFLICT,
            "only your own messages",
        ),
        (
            regenerate(&mine),
            StatusCode::CONFLICT,
            "only an agent's reply",
        ),
        (current(&mine, 1), StatusCode::CONFLICT, "only one version"),
        (edit("no-such-frame"), StatusCode::NOT_FOUND, "message"),
        (
            regenerate("no-such-frame"),
            StatusCode::NOT_FOUND,
            "message",
        ),
        (
            (
                Method::PUT,
                format!("/api/sessions/{session}/messages/{mine}"),
                Some(json!({"content": "  "})),
            ),
            StatusCode::BAD_REQUEST,
            "the message is empty",
        ),
        (
            (
                Method::PUT,
                format!("/api/sessions/{session}/messages/{mine}"),
                Some(json!({"content": "/compact"})),
            ),
            StatusCode::BAD_REQUEST,
            "an edit is sent as a message",
        ),
    ];
    for ((method, path, body), status, said) in cases {
        let (s, e) = h.json(method, &path, body).await;
        assert_eq!(s, status, "{path}: {e}");
        assert!(e["error"].as_str().unwrap().contains(said), "{path}: {e}");
    }
    assert_eq!(h.frames(session).await.len(), count);

    // A version that does not exist.
    let (s, started) = h.json(Method::PUT, &edit(&mine).1, edit(&mine).2).await;
    assert_eq!(s, StatusCode::OK, "{started}");
    replied(&h, session, started["message_id"].as_str().unwrap()).await;
    let count = h.frames(session).await.len();
    let (method, path, body) = current(&mine, 3);
    let (s, e) = h.json(method, &path, body).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{e}");
    assert!(
        e["error"].as_str().unwrap().contains("versions 1 to 2"),
        "{e}"
    );
    // The first answer is in a version not shown now.
    let (method, path, body) = regenerate(&theirs);
    let (s, e) = h.json(method, &path, body).await;
    assert_eq!(s, StatusCode::CONFLICT, "{e}");
    assert!(
        e["error"].as_str().unwrap().contains("switch to it first"),
        "{e}"
    );

    // Another user's session and messages are missing ones.
    let bob = bob_client(&h).await;
    for (method, path, body) in [edit(&mine), regenerate(&theirs), current(&mine, 1)] {
        let mut req = bob.request(method, h.url(&path));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let r = req.send().await.unwrap();
        assert_eq!(r.status(), StatusCode::NOT_FOUND, "{path}");
    }
    assert_eq!(h.frames(session).await.len(), count, "Bob changed nothing");

    // While a reply is in flight: 409, and nothing stored.
    let slow = h
        .c
        .post(h.url(&format!("/api/sessions/{session}/messages/stream")))
        .json(&json!({"content": "[[mock text=\"a slow reply, one letter at a time\" chunk=1 delay_ms=40]]"}))
        .send()
        .await
        .unwrap();
    assert_eq!(slow.status(), StatusCode::OK);
    let mid = h.frames(session).await.len();
    let edited = view(&h, session).await[0].0.clone();
    let answer = view(&h, session).await[1].0.clone();
    // An edit, a regeneration and a switch alike.
    for (method, path, body) in [edit(&edited), regenerate(&answer), current(&edited, 1)] {
        let (s, e) = h.json(method, &path, body).await;
        assert_eq!(s, StatusCode::CONFLICT, "{path}: {e}");
        assert!(
            e["error"].as_str().unwrap().contains("in flight"),
            "{path}: {e}"
        );
    }
    assert_eq!(h.frames(session).await.len(), mid);
    slow.text().await.unwrap();
    assert!(h.frames(session).await.len() > count);

    // A regeneration in flight: no message is sent meanwhile (it would be filed in the
    // answer's first version, out of sight).
    let v = view(&h, session).await;
    let slow_reply = v.last().unwrap().0.clone();
    let (s, _) = h.json(Method::POST, &regenerate(&slow_reply).1, None).await;
    assert_eq!(s, StatusCode::OK);
    let (s, e) = h
        .json(
            Method::POST,
            &format!("/api/sessions/{session}/messages"),
            Some(json!({"content": "meanwhile"})),
        )
        .await;
    assert_eq!(s, StatusCode::CONFLICT, "{e}");
    assert!(
        e["error"].as_str().unwrap().contains("being written"),
        "{e}"
    );
    for _ in 0..500 {
        if h.st.turns.is_idle(session) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }

    // A call waiting for approval in the conversation shown: its decision would answer a
    // version no longer shown, so nothing changes versions until it is decided.
    h.stream(session, "[[mock text=\"<bash>ls</bash>\"]]").await;
    let v = view(&h, session).await;
    let asking = v.iter().rev().nth(1).unwrap().0.clone();
    let (method, path, body) = edit(&asking);
    let (s, e) = h.json(method, &path, body).await;
    assert_eq!(s, StatusCode::CONFLICT, "{e}");
    assert!(
        e["error"]
            .as_str()
            .unwrap()
            .contains("waits for your answer or approval"),
        "{e}"
    );
}
