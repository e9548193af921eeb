//! Two `hero serve` processes on one PostgreSQL database, as behind a load balancer with no
//! sticky sessions: a reply streaming on one is live in a tab on the other (and a tab that
//! opens mid-reply gets the reply so far), Stop and an approval given on one reach the
//! work of the other, a user's limits hold across both, and an instance killed mid-reply
//! has its reply stored by the other, its text so far kept, and its timed question answered
//! by its default once.

mod support;

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use hero_shared::feed::SessionEvent;
use hero_shared::wire::SseEvent;
use serde_json::{Value, json};
use support::process::{Served, add_alice_with, serve_with};
use support::{agent_messages, of_type, sse};

/// Two instances (`a`, `b`) on one fresh PostgreSQL schema and one master key, alice
/// signed in to each, the mock LLM reachable from both; `extra` settings for both.
struct Pair {
    _data: tempfile::TempDir,
    mock: mock_llm::MockServer,
    a: Served,
    b: Served,
}

async fn pair(extra: &[(&str, &str)]) -> Pair {
    let url = hero_backend::store::testing::postgres_url().await;
    let key = "33".repeat(32);
    let mut env = vec![
        ("HERO_DATABASE_URL", url.as_str()),
        ("HERO_MASTER_KEY", key.as_str()),
    ];
    env.extend_from_slice(extra);
    let data = tempfile::tempdir().unwrap();
    let mock = mock_llm::spawn(mock_llm::Config::default()).await.unwrap();
    let allow = mock.addr().to_string();
    add_alice_with(data.path(), &env);
    let a = serve_with(data.path(), &allow, &env).await;
    let b = serve_with(data.path(), &allow, &env).await;
    Pair {
        _data: data,
        mock,
        a,
        b,
    }
}

impl Pair {
    /// A session with an agent on the mock, made on `a`.
    async fn session(&self) -> i64 {
        self.a.mock_session(&self.mock).await
    }
}

type Events = std::pin::Pin<Box<dyn futures::Stream<Item = SessionEvent> + Send>>;

/// The session's live events as a tab on `h` reads them (from what is stored now).
async fn events(h: &Served, sid: i64) -> Events {
    let r =
        h.c.get(format!("{}/api/sessions/{sid}/events", h.base))
            .send()
            .await
            .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap_or_default());
    Box::pin(sse(r.bytes_stream()).filter_map(|ev| async move {
        let ev = ev.ok()?;
        SessionEvent::from_sse(&ev.event, &ev.data).ok()
    }))
}

/// Reads `events` until `want` holds of one (within 30 s); answers that one.
async fn until(events: &mut Events, want: impl Fn(&SessionEvent) -> bool) -> SessionEvent {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let ev = tokio::time::timeout_at(deadline, events.next())
            .await
            .expect("the event came within 30 s")
            .expect("the stream goes on");
        if want(&ev) {
            return ev;
        }
    }
}

fn is_phantom_with_text(ev: &SessionEvent) -> bool {
    matches!(ev, SessionEvent::Phantom(f) if f.payload["content"].as_str().is_some_and(|c| !c.is_empty()))
}

/// Posts `content` on `h` and reads the reply's events in a task of its own, until the
/// stream ends (or the server is killed).
fn post_in_background(h: &Served, sid: i64, content: &str) -> tokio::task::JoinHandle<String> {
    let (c, url) = (
        h.c.clone(),
        format!("{}/api/sessions/{sid}/messages/stream", h.base),
    );
    let body = json!({ "content": content });
    tokio::spawn(async move {
        let Ok(r) = c.post(url).json(&body).send().await else {
            return String::new();
        };
        let mut seen = String::new();
        let mut body = r.bytes_stream();
        while let Some(Ok(chunk)) = body.next().await {
            seen.push_str(&String::from_utf8_lossy(&chunk));
        }
        seen
    })
}

fn slow(words: usize) -> String {
    "and more words that keep the reply streaming ".repeat(words / 8 + 1)
}

/// A reply streaming on A is live on B, as it streams (its start, its chunks, its frame),
/// and a tab opened on B mid-reply gets the reply so far at once; a reply on B is live on A.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_on_one_instance_is_live_on_the_other_both_ways() {
    let p = pair(&[]).await;
    let sid = p.session().await;
    let mut on_b = events(&p.b, sid).await;
    let content = format!(
        r#"[[mock text="Hello from A. {}" tokens_per_sec=40]]"#,
        slow(40)
    );
    let posted = post_in_background(&p.a, sid, &content);
    // The session's startup process, the user's message, then the reply's start (an empty
    // phantom), then its text.
    let is_frame = |e: &SessionEvent| matches!(e, SessionEvent::Frame(_));
    let SessionEvent::Frame(startup) = until(&mut on_b, is_frame).await else {
        unreachable!()
    };
    assert!(startup.payload["startup"].is_string(), "{startup:?}");
    let SessionEvent::Frame(user_msg) = until(&mut on_b, is_frame).await else {
        unreachable!()
    };
    assert_eq!(user_msg.payload["content"], content);
    let SessionEvent::Phantom(start) =
        until(&mut on_b, |e| matches!(e, SessionEvent::Phantom(_))).await
    else {
        unreachable!()
    };
    let mut text = String::new();
    while text.len() < 20 {
        if let SessionEvent::Chunk(c) =
            until(&mut on_b, |e| matches!(e, SessionEvent::Chunk(_))).await
        {
            assert_eq!(c.message_id, start.id);
            text.push_str(&c.content);
        }
    }
    assert!(text.starts_with("Hello from A."), "{text}");
    // A tab opened on B now: the reply so far, at once.
    let mut late = events(&p.b, sid).await;
    let first = tokio::time::timeout(Duration::from_secs(10), late.next())
        .await
        .unwrap()
        .unwrap();
    assert!(is_phantom_with_text(&first), "{first:?}");
    let SessionEvent::Phantom(so_far) = first else {
        unreachable!()
    };
    assert_eq!(so_far.id, start.id);
    // The reply's frame reaches both tabs on B, whole.
    let done = |e: &SessionEvent| matches!(e, SessionEvent::Frame(f) if f.id == start.id);
    let SessionEvent::Frame(stored) = until(&mut on_b, done).await else {
        unreachable!()
    };
    let full = stored.payload["content"].as_str().unwrap().to_owned();
    assert!(full.starts_with(&text), "{full}");
    until(&mut late, done).await;
    until(&mut on_b, |e| {
        matches!(e, SessionEvent::Reply(SseEvent::MessageComplete(m)) if m.message_id == start.id)
    })
    .await;
    posted.await.unwrap();

    // The other way: a reply on B is live on A.
    let mut on_a = events(&p.a, sid).await;
    let v: Value =
        p.b.post(
            &format!("/api/sessions/{sid}/messages"),
            json!({"content": "[[mock text=\"pong from B\"]]"}),
        )
        .await;
    assert_eq!(v["content"], "pong from B", "{v}");
    let reply = |e: &SessionEvent| matches!(e, SessionEvent::Frame(f) if f.payload["content"] == "pong from B");
    until(&mut on_a, reply).await;
}

/// Stop on B stops a reply streaming on A; an approval given on B runs the call waiting on A,
/// and an answer given on B answers the question A's reply asked: each once, and the agent
/// goes on once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_an_approval_and_an_answer_given_on_one_instance_reach_the_other() {
    let p = pair(&[]).await;
    let sid = p.session().await;
    let mut on_b = events(&p.b, sid).await;
    let posted = post_in_background(
        &p.a,
        sid,
        &format!(
            r#"[[mock text="Stop me. {}" tokens_per_sec=20]]"#,
            slow(200)
        ),
    );
    until(&mut on_b, |e| matches!(e, SessionEvent::Chunk(_))).await;
    // Stop, through B's WebSocket.
    use tokio_tungstenite::tungstenite::{Message, client::IntoClientRequest};
    let mut req = format!("ws{}/ws", p.b.base.trim_start_matches("http"))
        .into_client_request()
        .unwrap();
    req.headers_mut().insert(
        "cookie",
        format!("hero_token={}", p.b.token).parse().unwrap(),
    );
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    ws.send(Message::Text(
        json!({"type": "abort", "sessionId": sid})
            .to_string()
            .into(),
    ))
    .await
    .unwrap();
    let frames = p.a.frames_when(sid, |f| agent_messages(f).len() == 1).await;
    let reply = &agent_messages(&frames)[0]["payload"];
    assert_eq!(reply["aborted"], true, "{reply}");
    let kept = reply["content"].as_str().unwrap();
    assert!(
        kept.starts_with("Stop") && kept.len() < slow(200).len(),
        "{kept}"
    );
    posted.await.unwrap();

    // A call waiting for approval on A's reply, approved on B.
    let v: Value = p
        .a
        .post(
            &format!("/api/sessions/{sid}/messages"),
            json!({"content": r#"[[mock text="\u003cwebsearch>rust\u003c/websearch>" then="Back."]]"#}),
        )
        .await;
    assert!(v["content"].is_string(), "{v}");
    let frames = p.a.frames(sid).await;
    let requests = of_type(&frames, "request");
    assert_eq!(requests.len(), 1, "{frames:?}");
    assert_eq!(requests[0]["payload"]["status"], "pending");
    let rid = requests[0]["id"].as_str().unwrap().to_owned();
    let r =
        p.b.c
            .post(format!("{}/api/sessions/{sid}/approvals/{rid}", p.b.base))
            .json(&json!({"approved": true}))
            .send()
            .await
            .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    // A second decision, on A, is refused: it was decided.
    let again =
        p.a.c
            .post(format!("{}/api/sessions/{sid}/approvals/{rid}", p.a.base))
            .json(&json!({"approved": true}))
            .send()
            .await
            .unwrap();
    assert_eq!(again.status(), 409);
    let back = |f: &[Value]| {
        agent_messages(f)
            .iter()
            .any(|m| m["payload"]["content"] == "Back.")
    };
    p.a.frames_when(sid, back).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let frames = p.a.frames(sid).await;
    assert_eq!(of_type(&frames, "result").len(), 1, "the call ran once");
    let follow_ups = agent_messages(&frames)
        .iter()
        .filter(|m| m["payload"]["content"] == "Back.")
        .count();
    assert_eq!(follow_ups, 1, "the agent went on once: {frames:?}");

    // A question asked in a reply on A, answered in the tab on B (its WebSocket).
    let v: Value =
        p.a.post(
            &format!("/api/sessions/{sid}/messages"),
            json!({"content": r#"[[mock text="\u003cask>Ready?\u003c/ask>" then="Answered."]]"#}),
        )
        .await;
    assert!(v["content"].is_string(), "{v}");
    let frames = p.a.frames(sid).await;
    let asking = of_type(&frames, "request")
        .into_iter()
        .find(|r| r["payload"]["status"] == "asking")
        .expect("the question waits")["id"]
        .as_str()
        .unwrap()
        .to_owned();
    ws.send(Message::Text(
        json!({"type": "question_response", "assertionId": asking, "answer": "yes"})
            .to_string()
            .into(),
    ))
    .await
    .unwrap();
    let answered = |f: &[Value]| {
        agent_messages(f)
            .iter()
            .any(|m| m["payload"]["content"] == "Answered.")
    };
    p.a.frames_when(sid, answered).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let frames = p.a.frames(sid).await;
    let results = of_type(&frames, "result")
        .into_iter()
        .filter(|r| r["parent_id"] == asking.as_str())
        .count();
    assert_eq!(results, 1, "answered once");
    let after = agent_messages(&frames)
        .iter()
        .filter(|m| m["payload"]["content"] == "Answered.")
        .count();
    assert_eq!(after, 1, "the agent went on once: {frames:?}");
}

/// `max_turns` and `max_live_streams` are the user's across both instances.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_users_limits_hold_across_instances() {
    let p = pair(&[("HERO_MAX_TURNS", "1"), ("HERO_MAX_LIVE_STREAMS", "2")]).await;
    let sid = p.session().await;
    let mut on_a = events(&p.a, sid).await;
    let posted = post_in_background(
        &p.a,
        sid,
        &format!(r#"[[mock text="Busy. {}" tokens_per_sec=40]]"#, slow(40)),
    );
    until(&mut on_a, |e| matches!(e, SessionEvent::Chunk(_))).await;
    let second =
        p.b.c
            .post(format!("{}/api/sessions/{sid}/messages", p.b.base))
            .json(&json!({"content": "[[mock text=\"no\"]]"}))
            .send()
            .await
            .unwrap();
    assert_eq!(second.status(), 429);
    let why = second.text().await.unwrap();
    assert!(why.contains("replies in flight"), "{why}");
    posted.await.unwrap();
    // Given back when it ended: B's turn goes (once A has let go of the slot).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let r =
            p.b.c
                .post(format!("{}/api/sessions/{sid}/messages", p.b.base))
                .json(&json!({"content": "[[mock text=\"yes\"]]"}))
                .send()
                .await
                .unwrap();
        if r.status() == 200 {
            break;
        }
        assert_eq!(r.status(), 429);
        assert!(
            std::time::Instant::now() < deadline,
            "the slot never came back"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Two live streams: one on A (open above), one on B; a third on either is refused.
    let _on_b = events(&p.b, sid).await;
    for h in [&p.a, &p.b] {
        let r =
            h.c.get(format!("{}/api/sessions/{sid}/events", h.base))
                .send()
                .await
                .unwrap();
        assert_eq!(r.status(), 429);
    }
    drop(on_a);
}

/// A killed mid-reply (SIGKILL: nothing runs on its way out), with a timed question asked
/// early in the reply: within the heartbeat's expiry B stores the reply as interrupted,
/// keeping the text it had mirrored, tells its tabs; the question's default is recorded
/// once at its time, and the agent goes on once, on B.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_killed_mid_reply_has_its_work_taken_over() {
    let mut p = pair(&[]).await;
    let sid = p.session().await;
    let mut on_b = events(&p.b, sid).await;
    let content = format!(
        r#"[[mock text="Thinking it over. \u003cask timeout=\"3000\" default=\"later\">When?\u003c/ask> {}" then="Thanks." tokens_per_sec=20]]"#,
        slow(200)
    );
    let posted = post_in_background(&p.a, sid, &content);
    let SessionEvent::Phantom(start) =
        until(&mut on_b, |e| matches!(e, SessionEvent::Phantom(_))).await
    else {
        unreachable!()
    };
    until(&mut on_b, |e| matches!(e, SessionEvent::Question(_))).await;
    until(&mut on_b, |e| matches!(e, SessionEvent::Chunk(_))).await;
    p.a.child.kill().unwrap();
    p.a.child.wait().unwrap();
    let _ = posted.await;
    let killed = std::time::Instant::now();
    let stored = |e: &SessionEvent| matches!(e, SessionEvent::Frame(f) if f.id == start.id);
    let SessionEvent::Frame(reply) = until(&mut on_b, stored).await else {
        unreachable!()
    };
    let taken_over_in = killed.elapsed();
    let text = reply.payload["content"].as_str().unwrap();
    assert!(text.starts_with("Thinking it over."), "{text}");
    assert!(text.contains("server stopped"), "{text}");
    assert_eq!(reply.payload["aborted"], true);
    assert!(
        taken_over_in < Duration::from_secs(20),
        "taken over after {taken_over_in:?}"
    );
    let frames =
        p.b.frames_when(sid, |f| {
            agent_messages(f)
                .iter()
                .any(|m| m["payload"]["content"] == "Thanks.")
        })
        .await;
    let results = of_type(&frames, "result");
    assert_eq!(results.len(), 1, "recorded once: {frames:?}");
    assert!(
        results[0]["payload"]["output"]
            .as_str()
            .unwrap()
            .starts_with("later (the default"),
        "{}",
        results[0]
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let frames = p.b.frames(sid).await;
    assert_eq!(agent_messages(&frames).len(), 2, "{frames:?}");
}
