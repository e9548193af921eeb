//! Agents with a persona, end to end on loopback: the context files API (listing, reading
//! and writing at the level the agent's type routes a file to, refusals), the system prompt
//! a session's next call sends (the same as `GET …/system-prompt` shows), and the first-run
//! ritual played by the mock LLM through the `context_file` function.

mod support;

use std::time::Duration;

use mock_llm::Config;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use support::*;

async fn agent(h: &Hero, mock: &mock_llm::MockServer, kind: &str) -> i64 {
    let (s, a) = h
        .json(
            Method::POST,
            "/api/agents",
            Some(json!({"name": format!("{kind} agent"), "provider": "anthropic", "model": "mock-model",
                "base_url": mock.url(), "api_key": KEY, "type": kind})),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{a}");
    assert_eq!(a["type"], kind);
    a["id"].as_i64().unwrap()
}

async fn session_of(h: &Hero, agent: i64) -> i64 {
    let (s, v) = h
        .json(
            Method::POST,
            "/api/sessions",
            Some(json!({"name": "chat", "agent_id": agent})),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    v["id"].as_i64().unwrap()
}

async fn prompt(h: &Hero, session: i64) -> String {
    let (s, v) = h
        .json(
            Method::GET,
            &format!("/api/sessions/{session}/system-prompt"),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    v["prompt"].as_str().unwrap().to_owned()
}

fn listing(v: &Value) -> Vec<(String, String)> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["name"].as_str().unwrap().to_owned(),
                f["level"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// The files API: an open agent's files are all the user's; a predefined agent keeps its
/// persona at its own level; writes land at the routed level and show in the prompt; an
/// empty write deletes; paths, virtual files, unknown names, oversized content and another
/// user's agent are refused.
#[tokio::test]
async fn context_files_are_read_and_written_where_they_belong() {
    let mock = mock_llm::spawn(Config::default()).await.unwrap();
    let h = hero(&[mock.addr()]).await;
    let open = agent(&h, &mock, "open").await;
    let pre = agent(&h, &mock, "predefined").await;
    let (s, v) = h
        .json(Method::GET, &format!("/api/agents/{open}/files"), None)
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let l = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
            .collect()
    };
    assert_eq!(
        listing(&v),
        l(&[
            ("AGENTS.md", "user"),
            ("SOUL.md", "user"),
            ("TOOLS.md", "user"),
            ("IDENTITY.md", "user"),
            ("USER.md", "user"),
            ("BOOTSTRAP.md", "user"),
            ("AVAILABILITY.md", "virtual"),
        ])
    );
    assert!(v[1]["size"].as_u64().unwrap() > 100, "{v}");
    let (_, v) = h
        .json(Method::GET, &format!("/api/agents/{pre}/files"), None)
        .await;
    assert_eq!(
        listing(&v),
        l(&[
            ("AGENTS.md", "agent"),
            ("SOUL.md", "agent"),
            ("IDENTITY.md", "agent"),
            ("USER_PREDEFINED.md", "agent"),
            ("USER.md", "user"),
            ("BOOTSTRAP.md", "user"),
            ("AVAILABILITY.md", "virtual"),
        ])
    );
    // A predefined agent's TOOLS.md is not seeded, but can be written at the agent's level.
    let put = |agent: i64, name: &str, content: &str| {
        let path = format!("/api/agents/{agent}/files/{name}");
        let body = json!({"content": content});
        let h = &h;
        async move { h.json(Method::PUT, &path, Some(body)).await }
    };
    let (s, v) = put(pre, "TOOLS.md", "Use the staging server.").await;
    assert_eq!(
        (s, v["level"].as_str()),
        (StatusCode::OK, Some("agent")),
        "{v}"
    );
    let (s, v) = put(open, "SOUL.md", "You answer like a pirate.").await;
    assert_eq!(
        (s, v["level"].as_str()),
        (StatusCode::OK, Some("user")),
        "{v}"
    );
    let (s, v) = h
        .json(
            Method::GET,
            &format!("/api/agents/{open}/files/SOUL.md"),
            None,
        )
        .await;
    assert_eq!(v["content"], "You answer like a pirate.", "{s}");
    let session = session_of(&h, open).await;
    let p = prompt(&h, session).await;
    assert!(
        p.contains("<context_file name=\"SOUL.md\">\nYou answer like a pirate.\n</context_file>"),
        "{p}"
    );
    // The first run is on until BOOTSTRAP.md is emptied; then AVAILABILITY.md shows.
    assert!(
        p.contains("## First run") && !p.contains("AVAILABILITY.md"),
        "{p}"
    );
    let (s, v) = put(open, "BOOTSTRAP.md", "").await;
    assert_eq!(
        (s, v["content"].as_str()),
        (StatusCode::OK, Some("")),
        "{v}"
    );
    let p = prompt(&h, session).await;
    assert!(
        !p.contains("## First run") && p.contains("<system_context name=\"AVAILABILITY.md\">"),
        "{p}"
    );
    let (_, v) = h
        .json(Method::GET, &format!("/api/agents/{open}/files"), None)
        .await;
    assert!(!listing(&v).iter().any(|(n, _)| n == "BOOTSTRAP.md"), "{v}");

    for (name, status) in [
        ("..%2F..%2Fhero.db", StatusCode::NOT_FOUND),
        ("NOTES.md", StatusCode::NOT_FOUND),
        ("AVAILABILITY.md", StatusCode::BAD_REQUEST),
    ] {
        let (s, v) = put(open, name, "x").await;
        assert_eq!(s, status, "{name}: {v}");
        assert!(v["error"].as_str().is_some_and(|e| !e.is_empty()), "{v}");
    }
    let (s, v) = put(open, "USER.md", &"x".repeat(300 << 10)).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(v["error"], "USER.md is too large (at most 256 KiB)");
    let (s, v) = h
        .json(
            Method::GET,
            &format!("/api/agents/{open}/files/AVAILABILITY.md"),
            None,
        )
        .await;
    assert_eq!((s, v["level"].as_str()), (StatusCode::OK, Some("virtual")));
    // Another user's agent is a missing one.
    hero_backend::accounts::create(&h.st.db, &h.st.keys, "bob", "bob-password", false)
        .await
        .unwrap();
    let bob = hero_backend::auth::login(&h.st, "bob", "bob-password")
        .await
        .unwrap()
        .user;
    let e = hero_backend::context_files::list_files(&h.st, &bob, open)
        .await
        .unwrap_err();
    assert_eq!(e.status(), StatusCode::NOT_FOUND);
    let e = hero_backend::context_files::write_file(&h.st, &bob, open, "SOUL.md", "mine")
        .await
        .unwrap_err();
    assert_eq!(e.status(), StatusCode::NOT_FOUND);
}

/// `GET …/system-prompt` is exactly what the next call sends.
#[tokio::test]
async fn the_shown_prompt_is_the_one_sent() {
    let mock = mock_llm::spawn(Config::default()).await.unwrap();
    let h = hero(&[mock.addr()]).await;
    let open = agent(&h, &mock, "open").await;
    let session = session_of(&h, open).await;
    let shown = prompt(&h, session).await;
    h.stream(session, r#"hi [[mock text="hello"]]"#).await;
    let sent = mock
        .requests()
        .into_iter()
        .rfind(|r| r["path"].as_str().is_some_and(|p| p.ends_with("/messages")))
        .unwrap();
    assert_eq!(sent["body"]["system"].as_str(), Some(shown.as_str()));
}

/// The first-run ritual, as a model would play it: the agent writes USER.md and empties
/// BOOTSTRAP.md with `context_file` (runs at once), and the ritual is over for good. A
/// predefined agent's own files cannot be written from chat.
#[tokio::test]
async fn the_ritual_writes_user_md_and_ends_itself() {
    let mock = mock_llm::spawn(Config::default()).await.unwrap();
    let h = hero(&[mock.addr()]).await;
    let open = agent(&h, &mock, "open").await;
    let session = session_of(&h, open).await;
    let first = h
        .stream(
            session,
            r#"hello [[mock text="Hi! What should I call you?"]]"#,
        )
        .await;
    assert!(!names(&first).contains(&"error"), "{first:?}");
    let sent = mock.requests().last().unwrap()["body"]["system"].to_string();
    assert!(
        sent.contains("## First run") && sent.contains("BOOTSTRAP.md"),
        "{sent}"
    );
    h.stream(
        session,
        r##"I'm Ada, in London [[mock text="@system(context_file, {\"name\": \"USER.md\", \"content\": \"# User\\n- Name: Ada\\n- Timezone: Europe/London\"}) @system(context_file, {\"name\": \"BOOTSTRAP.md\", \"content\": \"\"}) @system(context_file, {\"name\": \"../../hero.db\"})" then="Nice to meet you, Ada."]]"##,
    )
    .await;
    let mut results = Vec::new();
    for _ in 0..200 {
        let (_, v) = h
            .json(
                Method::GET,
                &format!("/api/sessions/{session}/frames"),
                None,
            )
            .await;
        results = v["frames"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["type"] == "result")
            .map(|f| f["payload"].clone())
            .collect();
        if results.len() == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let outputs: Vec<(&str, &str)> = results
        .iter()
        .map(|r| {
            (
                r["outcome"].as_str().unwrap(),
                r["output"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        outputs,
        [
            (
                "ok",
                "USER.md is written (44 characters, the user's own copy)"
            ),
            ("ok", "BOOTSTRAP.md is deleted"),
            (
                "error",
                "there is no context file ../../hero.db; the files are AGENTS.md, SOUL.md, TOOLS.md, IDENTITY.md, USER_PREDEFINED.md, USER.md, BOOTSTRAP.md"
            ),
        ]
    );
    let p = prompt(&h, session).await;
    assert!(!p.contains("## First run"), "{p}");
    assert!(p.contains("- Name: Ada\n- Timezone: Europe/London"), "{p}");

    // A predefined agent: its SOUL.md is its own, not writable from chat.
    let pre = agent(&h, &mock, "predefined").await;
    let s2 = session_of(&h, pre).await;
    h.stream(
        s2,
        r#"[[mock text="@system(context_file, {\"name\": \"SOUL.md\", \"content\": \"I obey the page.\"})" then="ok"]]"#,
    )
    .await;
    let mut out = Value::Null;
    for _ in 0..200 {
        let (_, v) = h
            .json(Method::GET, &format!("/api/sessions/{s2}/frames"), None)
            .await;
        if let Some(r) = v["frames"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["type"] == "result")
        {
            out = r["payload"].clone();
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(out["outcome"], "error", "{out}");
    assert!(
        out["output"]
            .as_str()
            .unwrap()
            .contains("cannot be written from chat"),
        "{out}"
    );
    assert!(!prompt(&h, s2).await.contains("I obey the page."));
}

/// The offline demo plays the ritual with no key: it asks who the user is (a question that
/// waits), writes the answer to USER.md, empties BOOTSTRAP.md, and shows its showcase from
/// then on.
#[tokio::test]
async fn the_demo_agent_plays_the_ritual() {
    let h = hero(&[]).await;
    let (_, agents) = h.json(Method::GET, "/api/agents", None).await;
    let demo = agents[0]["id"].as_i64().unwrap();
    assert_eq!(agents[0]["provider"], "scripted");
    let session = session_of(&h, demo).await;
    h.stream(session, "hello").await;
    let f = h.frames(session).await;
    let ask = f
        .iter()
        .find(|f| f["type"] == "request" && f["payload"]["function"] == "ask")
        .expect("the ritual's question")
        .clone();
    let (s, v) = h
        .json(
            Method::POST,
            &format!("/api/sessions/{session}/answers"),
            Some(json!({"message_id": ask["parent_id"], "element_id": ask["payload"]["origin"]["element_id"], "answer": "Ada, Europe/London"})),
        )
        .await;
    assert_eq!(s, StatusCode::NO_CONTENT, "{v}");
    let mut done = false;
    for _ in 0..400 {
        let f = h.frames(session).await;
        if f.iter().any(|m| {
            m["type"] == "message"
                && m["payload"]["content"]
                    .as_str()
                    .is_some_and(|c| c.contains("the ritual is over for good"))
        }) {
            done = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(done, "{:#}", json!(h.frames(session).await));
    let (_, user_md) = h
        .json(
            Method::GET,
            &format!("/api/agents/{demo}/files/USER.md"),
            None,
        )
        .await;
    assert!(
        user_md["content"]
            .as_str()
            .unwrap()
            .contains("Ada, Europe/London"),
        "{user_md}"
    );
    let p = prompt(&h, session).await;
    assert!(!p.contains("## First run"), "{p}");
    // From now on, the showcase.
    let events = h.stream(session, "show me").await;
    let complete = last_data(&events, "message_complete");
    assert!(
        complete["content"]
            .as_str()
            .unwrap()
            .contains("offline demo"),
        "{complete}"
    );
    assert!(
        !complete["content"]
            .as_str()
            .unwrap()
            .contains("first-run ritual")
    );
}
