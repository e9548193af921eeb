//! A crash at any point of a reply whose calls run as their elements close leaves the log
//! whole (ARCHITECTURE.md, "The log's order"): `hero serve` is killed (SIGKILL, nothing
//! runs on the way out) before the reply's message is stored, after a call's request, and
//! after a call's result, then started again on the same data. No request is left without
//! its message, no call runs twice, and a call waiting for approval still waits.

mod support;

use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use support::process::{Served, add_alice, serve};
use support::{agent_messages, of_type};

/// A killed `hero serve` started again: signed in, the session's frames at hand.
async fn killed_and_back(mut hero: Served, data: &std::path::Path, allow: &str) -> Served {
    hero.child.kill().unwrap();
    hero.child.wait().unwrap();
    serve(data, allow).await
}

/// `hero serve` with alice signed in, an agent on the mock and a session with it.
async fn started(data: &std::path::Path, mock: &mock_llm::MockServer) -> (Served, i64) {
    add_alice(data);
    let hero = serve(data, &mock.addr().to_string()).await;
    let session = hero.mock_session(mock).await;
    (hero, session)
}

/// Posts `content` and reads the reply's events until `until` is seen; the reply goes on
/// (the server is about to be killed).
async fn post_until(hero: &Served, sid: i64, content: &str, until: &str) {
    let reply = hero
        .c
        .post(format!("{}/api/sessions/{sid}/messages/stream", hero.base))
        .json(&json!({ "content": content }))
        .send()
        .await
        .unwrap();
    assert!(reply.status().is_success());
    let mut body = reply.bytes_stream();
    let mut seen = String::new();
    while !seen.contains(&format!("event: {until}\n")) {
        let chunk = tokio::time::timeout(Duration::from_secs(15), body.next())
            .await
            .unwrap_or_else(|_| panic!("no {until} in {seen}"))
            .expect("the reply goes on")
            .unwrap();
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
}

/// Every request has its message in the log.
fn no_orphan(frames: &[Value]) {
    for r in of_type(frames, "request") {
        assert!(
            frames.iter().any(|f| f["id"] == r["parent_id"]),
            "a request without its message: {r}"
        );
    }
}

/// A slow tail after the call: the reply is still streaming when the server is killed.
fn tail() -> String {
    "and more words that keep the reply streaming ".repeat(30)
}

/// Killed while the reply streams, before anything of it is stored: after the restart
/// the user's message is there and nothing of the reply, no call of it either; the
/// session answers the next message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_before_the_reply_is_stored() {
    let data = tempfile::tempdir().unwrap();
    let mock = mock_llm::spawn(mock_llm::Config::default()).await.unwrap();
    let (hero, sid) = started(data.path(), &mock).await;
    let content = format!(
        r#"[[mock text="{} \u003cwebsearch>never closed in time</websearch>" tokens_per_sec=20]]"#,
        tail()
    );
    post_until(&hero, sid, &content, "text").await;
    let hero = killed_and_back(hero, data.path(), &mock.addr().to_string()).await;
    let frames = hero.frames(sid).await;
    assert_eq!(
        frames.len(),
        2,
        "only the startup process and the user's message: {frames:?}"
    );
    assert!(frames[0]["payload"]["startup"].is_string());
    assert_eq!(frames[1]["author_type"], "user");
    let v: Value = hero
        .post(
            &format!("/api/sessions/{sid}/messages"),
            json!({"content": "[[mock text=\"back\"]] hello"}),
        )
        .await;
    assert_eq!(v["content"], "back", "{v}");
}

/// Killed after a call's request (waiting for approval) and before its reply is stored:
/// after the restart the reply's message is written, saying what happened; the call still
/// waits; approved, it runs once and the agent answers with its result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_after_a_request() {
    let data = tempfile::tempdir().unwrap();
    let mock = mock_llm::spawn(mock_llm::Config::default()).await.unwrap();
    let (hero, sid) = started(data.path(), &mock).await;
    let content = format!(
        r#"[[mock text="\u003cwebsearch>after the crash</websearch> {}" then="Back." tokens_per_sec=20]]"#,
        tail()
    );
    post_until(&hero, sid, &content, "element_complete").await;
    // The request is stored (the approval it waits for is on its way to the page).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while of_type(&hero.frames(sid).await, "request").is_empty() {
        assert!(std::time::Instant::now() < deadline, "no request stored");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let hero = killed_and_back(hero, data.path(), &mock.addr().to_string()).await;
    let frames = hero.frames(sid).await;
    no_orphan(&frames);
    let reply = agent_messages(&frames)[0];
    assert!(
        reply["payload"]["content"]
            .as_str()
            .is_some_and(|e| e.contains("server stopped")),
        "{reply}"
    );
    assert_eq!(reply["payload"]["agent_name"], "Ada");
    let request = of_type(&frames, "request")[0];
    assert_eq!(request["payload"]["status"], "pending");
    assert!(of_type(&frames, "result").is_empty());
    let rid = request["id"].as_str().unwrap();
    let r = hero
        .c
        .post(format!("{}/api/sessions/{sid}/approvals/{rid}", hero.base))
        .json(&json!({"approved": true}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    let frames = hero
        .frames_when(sid, |f| agent_messages(f).len() == 2)
        .await;
    assert_eq!(agent_messages(&frames)[1]["payload"]["content"], "Back.");
    assert_eq!(of_type(&frames, "result").len(), 1);
    no_orphan(&frames);
    // The page shows the written reply with its card.
    let page = hero.page(&format!("/s/{sid}")).await;
    assert!(page.contains("server stopped while this reply"), "{page}");
    assert!(page.contains(&format!("data-call=\"{rid}\"")), "{page}");
}

/// Killed after a call's result, its reply still streaming: after the restart the reply's
/// message is written, the call has its one result, and nothing runs it again (another
/// message later still finds one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_after_a_result() {
    let data = tempfile::tempdir().unwrap();
    let mock = mock_llm::spawn(mock_llm::Config::default()).await.unwrap();
    let (hero, sid) = started(data.path(), &mock).await;
    let content = format!(
        r#"[[mock text="\u003cinteraction>\u0040system(help)</interaction> {}" tokens_per_sec=20]]"#,
        tail()
    );
    post_until(&hero, sid, &content, "element_result").await;
    let hero = killed_and_back(hero, data.path(), &mock.addr().to_string()).await;
    let frames = hero.frames(sid).await;
    no_orphan(&frames);
    assert_eq!(agent_messages(&frames).len(), 1, "{frames:?}");
    let results = of_type(&frames, "result");
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["payload"]["outcome"], "ok");
    let v: Value = hero
        .post(
            &format!("/api/sessions/{sid}/messages"),
            json!({"content": "[[mock text=\"again\"]] go on"}),
        )
        .await;
    assert_eq!(v["content"], "again", "{v}");
    let frames = hero.frames(sid).await;
    assert_eq!(of_type(&frames, "result").len(), 1, "the call ran once");
    no_orphan(&frames);
}
