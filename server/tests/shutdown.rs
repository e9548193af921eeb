//! Graceful shutdown over real sockets: SIGTERM to `hero serve` while a tab watches the
//! session's events and a reply streams. The event stream ends at once with a reconnect
//! hint, the reply ends with `message_complete`, the partial reply is stored marked aborted
//! by shutdown, and the process exits well inside its drain.

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{Value, json};
use support::process::{add_alice, serve};
use tokio_tungstenite::tungstenite::{Message, client::IntoClientRequest};

/// The SSE events in `text` (complete ones), as (name, data).
fn events(text: &str) -> Vec<(String, String)> {
    text.split("\n\n")
        .filter_map(|block| {
            let name = block.lines().find_map(|l| l.strip_prefix("event: "))?;
            let data = block.lines().find_map(|l| l.strip_prefix("data: "))?;
            Some((name.to_owned(), data.to_owned()))
        })
        .collect()
}

/// Appends what is left of `body` to `text` until it ends, for at most `limit`; answers
/// whether it ended in time.
async fn read_to_end<S>(mut body: S, text: &mut String, limit: Duration) -> bool
where
    S: futures::Stream<Item = reqwest::Result<bytes::Bytes>> + Unpin,
{
    tokio::time::timeout(limit, async {
        while let Some(Ok(chunk)) = body.next().await {
            text.push_str(&String::from_utf8_lossy(&chunk));
        }
    })
    .await
    .is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_ends_streams_keeps_the_partial_reply_and_exits_promptly() {
    let data = tempfile::tempdir().unwrap();
    add_alice(data.path());
    let mock = mock_llm::spawn(mock_llm::Config::default()).await.unwrap();
    let hero = serve(data.path(), &mock.addr().to_string()).await;
    let (c, token, base) = (hero.c.clone(), hero.token.clone(), hero.base.clone());
    let agent: Value = c
        .post(format!("{base}/api/agents"))
        .json(&json!({"name": "slow", "provider": "anthropic", "model": "m", "base_url": mock.url(), "api_key": "k"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let session: Value = c
        .post(format!("{base}/api/sessions"))
        .json(&json!({"name": "chat", "agent_id": agent["id"]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let sid = session["id"].as_i64().unwrap();

    // A tab on the WebSocket, a tab watching the session's events, and a reply that takes
    // 20 s to stream in full.
    let mut req = format!("ws{}/ws", base.trim_start_matches("http"))
        .into_client_request()
        .unwrap();
    req.headers_mut()
        .insert("cookie", format!("hero_token={token}").parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    let watching = c
        .get(format!("{base}/api/sessions/{sid}/events"))
        .send()
        .await
        .unwrap();
    assert!(watching.status().is_success());
    let words = "word ".repeat(200);
    let reply = c
        .post(format!("{base}/api/sessions/{sid}/messages/stream"))
        .json(&json!({"content": format!("[[mock text=\"{words}\" chunk=5 delay_ms=100]] go")}))
        .send()
        .await
        .unwrap();
    assert!(reply.status().is_success());
    let mut body = reply.bytes_stream();
    let mut posted = String::new();
    while !posted.contains("event: text") {
        let chunk = tokio::time::timeout(Duration::from_secs(10), body.next())
            .await
            .expect("the reply starts")
            .expect("the reply goes on")
            .unwrap();
        posted.push_str(&String::from_utf8_lossy(&chunk));
    }

    let signalled = Instant::now();
    let kill = Command::new("kill")
        .args(["-TERM", &hero.child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());

    // The poster's stream: the reply ends with an error that says why, then message_complete.
    let mut text = posted;
    let ended = read_to_end(body, &mut text, Duration::from_secs(5)).await;
    assert!(ended, "the reply did not end after SIGTERM: {text}");
    let posted_events = events(&text);
    let names: Vec<&str> = posted_events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.last(), Some(&"message_complete"), "{names:?}");
    let error = posted_events
        .iter()
        .find(|(n, _)| n == "error")
        .expect("an error event says why the reply stopped");
    assert!(error.1.contains("shutting down"), "{}", error.1);
    let complete: Value = serde_json::from_str(&posted_events.last().unwrap().1).unwrap();
    let partial = complete["content"].as_str().unwrap().to_owned();
    assert!(
        !partial.is_empty() && partial.len() < words.len() && words.starts_with(&partial),
        "{partial:?}"
    );

    // The watching tab's stream ends at once, telling its browser when to reconnect.
    let mut watched = String::new();
    let ended = read_to_end(
        watching.bytes_stream(),
        &mut watched,
        Duration::from_secs(5),
    )
    .await;
    assert!(ended, "the event stream did not end after SIGTERM");
    assert!(watched.ends_with("retry: 1000\n\n"), "{watched}");

    // The socket is closed with 1012, "service restart": reconnect.
    let close = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match ws.next().await {
                Some(Ok(Message::Close(frame))) => break frame,
                Some(Ok(_)) => continue,
                other => panic!("the socket ended without a close frame: {other:?}"),
            }
        }
    })
    .await
    .expect("the socket closed after SIGTERM")
    .expect("a close frame with a code");
    assert_eq!(u16::from(close.code), 1012, "{close:?}");

    // The process exits within its drain (10 s by default), and cleanly.
    let mut hero = hero;
    let status = loop {
        if let Some(s) = hero.child.try_wait().unwrap() {
            break s;
        }
        assert!(
            signalled.elapsed() < Duration::from_secs(10),
            "hero still running 10 s after SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(status.success(), "{status:?}");

    // Back up: the partial reply is in the log, marked aborted by shutdown.
    let again = serve(data.path(), &mock.addr().to_string()).await;
    let (c, base) = (again.c.clone(), again.base.clone());
    let page: Value = c
        .get(format!("{base}/api/sessions/{sid}/frames"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let frames = page["frames"].as_array().unwrap();
    let last = frames.last().expect("frames stored");
    let payload = &last["payload"];
    assert_eq!(payload["role"], "agent", "{last}");
    assert_eq!(payload["content"], partial.as_str());
    assert_eq!(payload["aborted"], true);
    assert_eq!(payload["aborted_by"], "shutdown");

    // A new message now is answered: nothing of the shutdown lingers.
    let r = c
        .post(format!("{base}/api/sessions/{sid}/messages"))
        .json(&json!({"content": "[[mock text=\"back\"]] hello"}))
        .send()
        .await
        .unwrap();
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["content"], "back", "{v}");
}
