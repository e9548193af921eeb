//! Long sessions, end to end on loopback: private messages the agent never receives,
//! hiding and showing messages again, and compaction (by `/compact`, by its agent's
//! threshold, after a restart, and when the summary fails: nothing is stored).

mod support;

use mock_llm::{Answer, Config};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use support::*;

const SUMMARY: &str = "Summary: the user asked about apples and pears.\n- [ ] compare prices";

/// A mock whose every answer (without a directive) is the summary.
async fn mock() -> mock_llm::MockServer {
    mock_llm::spawn(Config::default().answers(vec![Answer::text(SUMMARY)]))
        .await
        .unwrap()
}

/// The `messages` the mock was last sent, as text.
fn last_sent(mock: &mock_llm::MockServer) -> String {
    mock.requests()
        .into_iter()
        .rfind(|r| r["path"].as_str().is_some_and(|p| p.ends_with("/messages")))
        .map(|r| r["body"]["messages"].to_string())
        .unwrap_or_default()
}

async fn post(h: &Hero, session: i64, body: Value) -> Vec<(String, Value)> {
    h.stream_body(session, body).await
}

/// A private message is stored and shown (marked), answers with no reply, and is never
/// sent to the agent; nor are the `/stream` notes.
#[tokio::test]
async fn private_messages_never_reach_the_agent() {
    let mock = mock().await;
    let h = hero(&[mock.addr()]).await;
    let (session, _) = h.session_with("anthropic", &mock, KEY).await;
    let events = post(
        &h,
        session,
        json!({"content": "my secret plan", "private": true}),
    )
    .await;
    assert_eq!(names(&events), ["message_complete"]);
    assert_eq!(mock.requests().len(), 0, "no call for a private message");
    post(&h, session, json!({"content": "/stream off"})).await;
    h.stream(session, "hello [[mock text=\"hi\"]]").await;
    let sent = last_sent(&mock);
    assert!(sent.contains("hello"), "{sent}");
    assert!(
        !sent.contains("my secret plan") && !sent.contains("Streaming is off"),
        "{sent}"
    );
    let frames = h.frames(session).await;
    let private: Vec<&Value> = frames
        .iter()
        .filter(|f| f["payload"]["private"] == true)
        .collect();
    assert_eq!(private.len(), 2, "{frames:#?}");
    assert_eq!(private[0]["payload"]["content"], "my secret plan");
    assert_eq!(private[0]["author_type"], "user");
}

/// Hiding is an update frame; the view marks the message hidden (and still sends it to the
/// agent); showing it again is another update. Another user's message is a missing one.
#[tokio::test]
async fn messages_are_hidden_and_shown_again() {
    let mock = mock().await;
    let h = hero(&[mock.addr()]).await;
    let (session, _) = h.session_with("anthropic", &mock, KEY).await;
    h.stream(session, "remember the milk [[mock text=\"ok\"]]")
        .await;
    let frames = h.frames(session).await;
    let id = frames[0]["id"].as_str().unwrap().to_owned();
    let hide = |hidden: bool| {
        let (h, id) = (&h, id.clone());
        async move {
            h.json(
                Method::PUT,
                &format!("/api/sessions/{session}/frames/{id}/hidden"),
                Some(json!({ "hidden": hidden })),
            )
            .await
        }
    };
    assert_eq!(hide(true).await.0, StatusCode::NO_CONTENT);
    let (_, view) = h
        .json(Method::GET, &format!("/api/sessions/{session}/view"), None)
        .await;
    assert_eq!(view["messages"][0]["hidden"], true, "{view}");
    let update = h
        .frames(session)
        .await
        .into_iter()
        .rfind(|f| f["type"] == "update")
        .unwrap();
    assert_eq!(update["target_ids"], json!([format!("frame:{id}")]));
    h.stream(session, "and? [[mock text=\"ok\"]]").await;
    assert!(
        last_sent(&mock).contains("remember the milk"),
        "hidden, still sent"
    );
    assert_eq!(hide(false).await.0, StatusCode::NO_CONTENT);
    let (_, view) = h
        .json(Method::GET, &format!("/api/sessions/{session}/view"), None)
        .await;
    assert_eq!(view["messages"][0]["hidden"], false);
    let (s, _) = h
        .json(
            Method::PUT,
            &format!("/api/sessions/{session}/frames/nope/hidden"),
            Some(json!({"hidden": true})),
        )
        .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let bob = bob(&h).await;
    let e = hero_backend::conversation::frames::set_hidden(&h.st, &bob, session, &id, true)
        .await
        .unwrap_err();
    assert_eq!(e.status(), StatusCode::NOT_FOUND);
}

/// `/compact`: the agent's summary becomes a `compact` frame; the next call sends only the
/// summary and what follows it (after a restart too); the view starts at it, and "show
/// earlier" pages in what it covers. A second `/compact` with nothing new says so.
#[tokio::test]
async fn compact_summarises_and_the_next_call_starts_there() {
    let mock = mock().await;
    let h = hero(&[mock.addr()]).await;
    let (session, _) = h.session_with("anthropic", &mock, KEY).await;
    h.stream(session, "apples? [[mock text=\"red ones\"]]")
        .await;
    h.stream(session, "pears? [[mock text=\"green ones\"]]")
        .await;
    let events = post(&h, session, json!({"content": "/compact"})).await;
    assert_eq!(
        names(&events),
        ["message_start", "message_complete"],
        "{events:?}"
    );
    assert_eq!(last_data(&events, "message_complete")["content"], SUMMARY);
    // The compaction call carried the task and the whole conversation.
    let req = mock
        .requests()
        .into_iter()
        .rfind(|r| r["path"].as_str().is_some_and(|p| p.ends_with("/messages")))
        .unwrap();
    assert!(
        req["body"]["system"]
            .as_str()
            .unwrap()
            .contains("## Task\nSummarise the whole conversation")
    );
    assert!(req["body"]["messages"].to_string().contains("pears?"));
    let frames = h.frames(session).await;
    let compact = frames
        .iter()
        .find(|f| f["type"] == "compact")
        .expect("a compact frame");
    assert_eq!(compact["payload"]["content"], SUMMARY);
    assert_eq!(compact["payload"]["messages"], 4);
    assert!(
        !frames.iter().any(|f| f["payload"]["content"] == "/compact"),
        "the command is not a message"
    );

    h.stream(session, "and plums? [[mock text=\"purple\"]]")
        .await;
    let sent = last_sent(&mock);
    assert!(
        sent.contains("Summary: the user asked about apples") && sent.contains("and plums?"),
        "{sent}"
    );
    assert!(
        !sent.contains("apples?") && !sent.contains("red ones"),
        "only the summary: {sent}"
    );
    // The view starts at the summary; what it covers pages in.
    let (_, view) = h
        .json(Method::GET, &format!("/api/sessions/{session}/view"), None)
        .await;
    assert_eq!(view["messages"][0]["type"], "compact");
    let seq = view["messages"][0]["seq"].as_i64().unwrap();
    let (s, earlier) = h
        .json(
            Method::GET,
            &format!("/api/sessions/{session}/view/earlier?before_seq={seq}"),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    // The session's startup process first, hidden.
    assert_eq!(earlier["messages"][0]["hidden"], true, "{earlier}");
    let texts: Vec<&str> = earlier["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["hidden"] != true)
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert_eq!(
        texts,
        [
            "apples? [[mock text=\"red ones\"]]",
            "red ones",
            "pears? [[mock text=\"green ones\"]]",
            "green ones",
            // The summary flushed the agent's memory first (its exchange hidden).
            &format!(
                "Saved to memory: memory/{}.md",
                time::OffsetDateTime::now_utc().date()
            ),
        ]
    );

    // After a restart, the context still starts at the summary.
    let st = h.st.restarted();
    let user = hero_backend::accounts::auth::login(&st, "alice", "alice-password")
        .await
        .unwrap()
        .user;
    let mut handle = hero_backend::conversation::turn::post(
        &st,
        &user,
        session,
        serde_json::from_value(json!({"content": "after restart [[mock text=\"yes\"]]"})).unwrap(),
    )
    .await
    .unwrap();
    while futures::StreamExt::next(&mut handle.events).await.is_some() {}
    let sent = last_sent(&mock);
    assert!(
        sent.contains("Summary: the user asked") && !sent.contains("apples?"),
        "{sent}"
    );

    // Nothing new since the summary but messages: a summary again works; an empty session
    // has nothing to summarise.
    let (empty, _) = h.session_with("anthropic", &mock, KEY).await;
    let events = post(&h, empty, json!({"content": "/compact"})).await;
    assert_eq!(
        last_data(&events, "error")["error"],
        "there is nothing to summarise since the last summary"
    );
    assert!(h.frames(empty).await.is_empty());
}

/// Past its agent's threshold (here 4 messages), a session is summarised after the turn.
#[tokio::test]
async fn the_threshold_summarises_on_its_own() {
    let mock = mock().await;
    let h = hero(&[mock.addr()]).await;
    let (s, agent) = h
        .json(
            Method::POST,
            "/api/agents",
            Some(json!({"name": "short memory", "provider": "anthropic", "model": "m", "base_url": mock.url(),
                "api_key": KEY, "compact_after_messages": 4})),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{agent}");
    assert_eq!(agent["compact_after_messages"], 4);
    let (_, session) = h
        .json(
            Method::POST,
            "/api/sessions",
            Some(json!({"name": "s", "agent_id": agent["id"]})),
        )
        .await;
    let session = session["id"].as_i64().unwrap();
    h.stream(session, "one [[mock text=\"1\"]]").await;
    assert!(
        !h.frames(session)
            .await
            .iter()
            .any(|f| f["type"] == "compact")
    );
    h.stream(session, "two [[mock text=\"2\"]]").await;
    let frames = frames_when(&h, session, |f| f.iter().any(|f| f["type"] == "compact")).await;
    let compact = frames.iter().find(|f| f["type"] == "compact").unwrap();
    // The summary call's own directive source is the last user message: its text.
    assert_eq!(compact["payload"]["messages"], 4);
    // Bad thresholds are refused.
    let (s, v) = h
        .json(
            Method::PATCH,
            &format!("/api/agents/{}", agent["id"]),
            Some(json!({"compact_after_tokens": 0})),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
}

/// A summary that fails stores nothing and says why; the conversation goes on as before.
#[tokio::test]
async fn a_failed_summary_changes_nothing() {
    let mock = mock().await;
    let broken = mock_llm::spawn(Config::default().fault(Some(mock_llm::FaultKind::ServerError)))
        .await
        .unwrap();
    let h = hero(&[mock.addr(), broken.addr()]).await;
    let (session, agent) = h.session_with("anthropic", &mock, KEY).await;
    h.stream(session, "keep this [[mock text=\"kept\"]]").await;
    let (s, v) = h
        .json(
            Method::PATCH,
            &format!("/api/agents/{agent}"),
            Some(json!({"base_url": broken.url(), "api_key": KEY})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let events = post(&h, session, json!({"content": "/compact"})).await;
    let error = last_data(&events, "error")["error"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        error.starts_with("the summary failed: the provider refused"),
        "{error}"
    );
    assert!(error.ends_with("nothing was changed"), "{error}");
    assert!(
        !h.frames(session)
            .await
            .iter()
            .any(|f| f["type"] == "compact")
    );
    h.json(
        Method::PATCH,
        &format!("/api/agents/{agent}"),
        Some(json!({"base_url": mock.url(), "api_key": KEY})),
    )
    .await;
    h.stream(session, "still there? [[mock text=\"yes\"]]")
        .await;
    assert!(last_sent(&mock).contains("keep this"));
}

/// The view holds the latest 50 messages; earlier pages come 50 at a time, back to a
/// summary, whose own earlier part pages in the same way.
#[tokio::test]
async fn the_view_pages() {
    let mock = mock().await;
    let h = hero(&[mock.addr()]).await;
    let (session, _) = h.session_with("anthropic", &mock, KEY).await;
    let user = hero_backend::accounts::auth::login(&h.st, "alice", "alice-password")
        .await
        .unwrap()
        .user;
    let dk = hero_backend::conversation::frames::session_key(&h.st, &user, session)
        .await
        .unwrap();
    let write = |i: usize, compact: bool| {
        let mut f = hero_backend::conversation::frames::NewFrame::message(
            session,
            hero_shared::frame::AuthorType::User,
            Some(user.id()),
            json!({"role": "user", "content": format!("message {i}")}),
        );
        if compact {
            f.frame_type = hero_shared::frame::FrameType::Compact;
            f.payload = json!({"role": "system", "content": "summary", "messages": i});
        }
        let (st, dk) = (h.st.clone(), dk.clone());
        async move {
            hero_backend::conversation::frames::append(&st, &dk, f)
                .await
                .unwrap()
        }
    };
    // 30 messages, a summary, then 120 messages.
    for i in 0..30 {
        write(i, false).await;
    }
    write(30, true).await;
    for i in 31..151 {
        write(i, false).await;
    }
    let get = |path: String| {
        let h = &h;
        async move {
            let (s, v) = h.json(Method::GET, &path, None).await;
            assert_eq!(s, StatusCode::OK, "{v}");
            v
        }
    };
    let texts = |v: &Value| -> Vec<String> {
        v["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["content"].as_str().unwrap().to_owned())
            .collect()
    };
    let view = get(format!("/api/sessions/{session}/view")).await;
    let t = texts(&view);
    assert_eq!(
        (t.len(), t[0].as_str(), t[49].as_str()),
        (50, "message 101", "message 150")
    );
    assert_eq!(view["stats"]["total"], 151, "statistics count every frame");
    let mut before = view["earlier_before"].as_i64().expect("more before");
    // A message a page back is hidden after the fact: its page shows it hidden.
    let m60 = h
        .frames(session)
        .await
        .into_iter()
        .find(|f| f["payload"]["content"] == "message 60")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (s, _) = h
        .json(
            Method::PUT,
            &format!("/api/sessions/{session}/frames/{m60}/hidden"),
            Some(json!({"hidden": true})),
        )
        .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let page = get(format!(
        "/api/sessions/{session}/view/earlier?before_seq={before}"
    ))
    .await;
    let t = texts(&page);
    assert_eq!(
        (t.len(), t[0].as_str(), t[49].as_str()),
        (50, "message 51", "message 100")
    );
    let hidden: Vec<&str> = page["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["hidden"] == true)
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert_eq!(hidden, ["message 60"]);
    before = page["earlier_before"].as_i64().unwrap();
    // The rest of the part: 20 messages after the summary, and the summary itself.
    let page = get(format!(
        "/api/sessions/{session}/view/earlier?before_seq={before}"
    ))
    .await;
    let t = texts(&page);
    assert_eq!(t.len(), 21);
    assert_eq!(page["messages"][0]["type"], "compact");
    assert!(page.get("earlier_before").is_none(), "{page}");
    // Before the summary: what it stands for.
    let compact_seq = page["messages"][0]["seq"].as_i64().unwrap();
    let page = get(format!(
        "/api/sessions/{session}/view/earlier?before_seq={compact_seq}"
    ))
    .await;
    let t = texts(&page);
    assert_eq!(
        (t.len(), t[0].as_str(), t[29].as_str()),
        (30, "message 0", "message 29")
    );
    assert!(page.get("earlier_before").is_none());
    // Exactly 50 messages and nothing before them: no earlier page to offer.
    let (fifty, _) = h.session_with("anthropic", &mock, KEY).await;
    for i in 0..50 {
        h.stream_body(fifty, json!({"content": format!("n{i}"), "private": true}))
            .await;
    }
    let v = get(format!("/api/sessions/{fifty}/view")).await;
    assert_eq!(texts(&v).len(), 50);
    assert!(v.get("earlier_before").is_none(), "{}", v["earlier_before"]);
    // A view kept from a seq on holds everything from there.
    let from = get(format!("/api/sessions/{session}/view?from_seq={before}")).await;
    assert_eq!(texts(&from).len(), 100);
}

/// The agent's `command_compact` does not summarise its own turn midway: the summary comes
/// once the reply and its follow-up are over, after them in the log, and the startup
/// processes follow it.
#[tokio::test]
async fn the_agents_compact_comes_after_its_turn() {
    let mock = mock().await;
    let h = hero(&[mock.addr()]).await;
    let (session, _) = h.session_with("anthropic", &mock, KEY).await;
    h.stream(session, "apples? [[mock text=\"red ones\"]]")
        .await;
    h.stream(
        session,
        r#"[[mock tool=command_compact input={} then="Asked for a summary."]]"#,
    )
    .await;
    frames_when(&h, session, |f| f.iter().any(|x| x["type"] == "compact")).await;
    let (_, all) = h
        .json(
            Method::GET,
            &format!("/api/sessions/{session}/frames?all=true"),
            None,
        )
        .await;
    let frames = all["frames"].as_array().unwrap();
    let at = |want: &dyn Fn(&Value) -> bool| frames.iter().position(want).unwrap();
    let compact = at(&|f| f["type"] == "compact");
    // The follow-up reply (the mock's `then`) was stored before the summary.
    let done = at(&|f| f["type"] == "message" && f["payload"]["content"] == "Asked for a summary.");
    assert!(done < compact, "{frames:#?}");
    assert_eq!(frames.len(), compact + 2, "{frames:#?}");
    assert!(frames[compact + 1]["payload"]["startup"].is_string());
    let result = frames.iter().find(|f| f["type"] == "result").unwrap();
    assert_eq!(result["payload"]["function"], "command_compact");
    assert_eq!(result["payload"]["outcome"], "ok");
}
