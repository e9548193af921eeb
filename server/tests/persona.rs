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

/// `POST /api/agents/{agent}/summon` with `description`.
async fn summon(h: &Hero, agent: i64, description: &str) -> (StatusCode, Value) {
    h.json(
        Method::POST,
        &format!("/api/agents/{agent}/summon"),
        Some(json!({ "description": description })),
    )
    .await
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
    let bob = bob(&h).await;
    let e = hero_backend::agents::context_files::list_files(&h.st, &bob, open)
        .await
        .unwrap_err();
    assert_eq!(e.status(), StatusCode::NOT_FOUND);
    let e = hero_backend::agents::context_files::write_file(&h.st, &bob, open, "SOUL.md", "mine")
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
        r##"I'm Ada, in London [[mock text="@system(context_file, {\"name\": \"USER.md\", \"content\": \"# User\\n- Name: Ada\\n- Timezone: Europe/London\"}) @system(context_file, {\"name\": \"BOOTSTRAP.md\", \"content\": \"\"}) @system(context_file, {\"name\": \"../../hero.db\"}) @system(context_file, {\"name\": \"AVAILABILITY.md\"})" then="Nice to meet you, Ada."]]"##,
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
        if results.len() == 4 {
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
            (
                "ok",
                "AVAILABILITY.md is already loaded in your system prompt"
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

/// Summoning with the mock: the agent is `summoning` at once (202), then `active` with its
/// four files written from the reply; the user's socket hears both. A reply without the
/// files, a provider error or a reply too slow writes nothing (its files stay), and the
/// agent is active anyway; a second summoning while one runs is a 409;
/// an empty description is a 400 and another user's agent a 404.
#[tokio::test]
async fn summoning_writes_the_persona_or_falls_back() {
    use futures::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let mock = mock_llm::spawn(Config::default()).await.unwrap();
    let h = hero_with(&[mock.addr()], |s| {
        s.summon_timeout = Duration::from_secs(2);
    })
    .await;
    let pre = agent(&h, &mock, "predefined").await;
    let (_, mut ws) = h.ws().await;
    // Any message makes the socket live; none is needed to hear the user's events.
    let _ = ws.send(Message::Ping(vec![].into())).await;
    let reply = r#"<file name=\"SOUL.md\">You are a sarcastic Rust reviewer.</file>\n<file name=\"IDENTITY.md\">- Name: Ferris the Critic</file>\n<file name=\"AGENTS.md\">Review code line by line.</file>\n<file name=\"TOOLS.md\">Run cargo clippy.</file>"#;
    let (s, v) = summon(
        &h,
        pre,
        &format!("a sarcastic Rust reviewer [[mock chunk=16 delay_ms=25 text=\"{reply}\"]]"),
    )
    .await;
    assert_eq!(s, StatusCode::ACCEPTED, "{v}");
    assert_eq!(v["status"], "summoning");
    // One at a time.
    let (s, v) = summon(&h, pre, "another").await;
    assert_eq!(s, StatusCode::CONFLICT, "{v}");
    let mut seen = Vec::new();
    while seen
        .last()
        .is_none_or(|(s, _): &(String, String)| s != "active")
    {
        let m = tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .expect("agent_status on the socket");
        if let Some(Ok(Message::Text(t))) = m {
            let v: Value = serde_json::from_str(&t).unwrap();
            if v["type"] == "agent_status" {
                assert_eq!(v["agentId"], pre);
                seen.push((
                    v["status"].as_str().unwrap().to_owned(),
                    v["detail"].as_str().unwrap().to_owned(),
                ));
            }
        }
    }
    assert_eq!(seen[0].0, "summoning");
    assert!(seen[0].1.starts_with("asking predefined agent"), "{seen:?}");
    assert_eq!(
        seen[1],
        ("active".into(), "written from the description".into())
    );
    let file = |name: &str| {
        let h = &h;
        let path = format!("/api/agents/{pre}/files/{name}");
        async move { h.json(Method::GET, &path, None).await.1 }
    };
    let soul = file("SOUL.md").await;
    assert_eq!(soul["content"], "You are a sarcastic Rust reviewer.\n");
    assert_eq!(soul["level"], "agent");
    assert_eq!(file("TOOLS.md").await["content"], "Run cargo clippy.\n");
    let (_, a) = h
        .json(Method::GET, &format!("/api/agents/{pre}"), None)
        .await;
    assert_eq!(a["status"], "active");

    // Faults: each falls back to the templates, and says why.
    for (directive, why) in [
        (
            "[[mock text=\"Sure! Here is a persona.\"]]",
            "the reply has no SOUL.md",
        ),
        ("[[mock fault=500]]", "the provider refused"),
        ("[[mock fault=stall after_bytes=4]]", "no reply within 2 s"),
    ] {
        let (s, v) = summon(&h, pre, &format!("a gardener {directive}")).await;
        assert_eq!(s, StatusCode::ACCEPTED, "{v}");
        let mut detail = String::new();
        for _ in 0..100 {
            let m = tokio::time::timeout(Duration::from_secs(10), ws.next())
                .await
                .unwrap();
            if let Some(Ok(Message::Text(t))) = m {
                let v: Value = serde_json::from_str(&t).unwrap();
                if v["type"] == "agent_status" && v["status"] == "active" {
                    detail = v["detail"].as_str().unwrap().to_owned();
                    break;
                }
            }
        }
        assert!(
            detail.starts_with("its files stay as they were: "),
            "{directive}: {detail}"
        );
        assert!(detail.contains(why), "{directive}: {detail}");
        // Nothing is lost: the persona written before stays.
        let soul = file("SOUL.md").await;
        assert_eq!(
            soul["content"], "You are a sarcastic Rust reviewer.\n",
            "{soul}"
        );
    }

    // Bad requests.
    assert_eq!(summon(&h, pre, "   ").await.0, StatusCode::BAD_REQUEST);
    assert_eq!(
        summon(&h, pre, &"x".repeat(2001)).await.0,
        StatusCode::BAD_REQUEST
    );
    let bob = bob(&h).await;
    let e = hero_backend::agents::summon::summon(
        &h.st,
        &bob,
        pre,
        serde_json::from_value(json!({"description": "mine now"})).unwrap(),
    )
    .await
    .unwrap_err();
    assert_eq!(e.status(), StatusCode::NOT_FOUND);
}

/// A summoning is a provider call like a reply: it takes one of the user's reply slots for as
/// long as it runs, so `turns_per_user` bounds it too (a 429 beyond), and gives it back.
#[tokio::test]
async fn summoning_takes_a_reply_slot() {
    let mock = mock_llm::spawn(Config::default()).await.unwrap();
    let h = hero_with(&[mock.addr()], |s| {
        s.limits.turns_per_user = 1;
    })
    .await;
    let a = agent(&h, &mock, "open").await;
    let b = agent(&h, &mock, "predefined").await;
    let (s, v) = summon(
        &h,
        a,
        "a slow one [[mock chunk=4 delay_ms=50 text=\"<file name=\\\"SOUL.md\\\">Slow.</file><file name=\\\"IDENTITY.md\\\">- Name: Slow</file>\"]]",
    )
    .await;
    assert_eq!(s, StatusCode::ACCEPTED, "{v}");
    let (s, v) = summon(&h, b, "another").await;
    assert_eq!(s, StatusCode::TOO_MANY_REQUESTS, "{v}");
    assert!(
        v["error"].as_str().unwrap().contains("replies in flight"),
        "{v}"
    );
    // Refused, it is left as it was, not summoning.
    let (_, v) = h.json(Method::GET, &format!("/api/agents/{b}"), None).await;
    assert_eq!(v["status"], "active", "{v}");
    // The one being summoned says so first.
    assert_eq!(summon(&h, a, "again").await.0, StatusCode::CONFLICT);
    // Given back when it ends: the agent is active again, and the next one may start.
    for _ in 0..200 {
        let (_, v) = h.json(Method::GET, &format!("/api/agents/{a}"), None).await;
        if v["status"] == "active" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut started = StatusCode::TOO_MANY_REQUESTS;
    for _ in 0..50 {
        started = summon(&h, b, "a gardener [[mock text=\"nothing useful\"]]")
            .await
            .0;
        if started != StatusCode::TOO_MANY_REQUESTS {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(started, StatusCode::ACCEPTED);
}

/// The offline demo summons with no key: the persona is made from the description's words.
#[tokio::test]
async fn the_demo_summons_offline() {
    let h = hero(&[]).await;
    let (_, agents) = h.json(Method::GET, "/api/agents", None).await;
    let demo = agents[0]["id"].as_i64().unwrap();
    let (s, v) = h
        .json(
            Method::POST,
            &format!("/api/agents/{demo}/summon"),
            Some(json!({"description": "a cheerful pirate"})),
        )
        .await;
    assert_eq!(s, StatusCode::ACCEPTED, "{v}");
    let mut soul = Value::Null;
    for _ in 0..200 {
        let (_, a) = h
            .json(Method::GET, &format!("/api/agents/{demo}"), None)
            .await;
        if a["status"] == "active" {
            soul = h
                .json(
                    Method::GET,
                    &format!("/api/agents/{demo}/files/SOUL.md"),
                    None,
                )
                .await
                .1;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(
        soul["content"]
            .as_str()
            .unwrap()
            .contains("You are a cheerful pirate."),
        "{soul}"
    );
}
