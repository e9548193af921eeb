//! Turns end to end on loopback: Hero's real HTTP routes, a real SQLite file, and the
//! repository's mock LLM speaking Anthropic's and OpenAI's wire formats.

mod support;

use hero_backend::store::testing;

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use hero_backend::execution::egress::EgressPolicy;
use hero_shared::api::{CreateAgentRequest, ProviderKind};
use mock_llm::{Answer, Config};
use reqwest::StatusCode;
use serde_json::{Value, json};
use support::*;

const ANSWER: &str = "Let me look. <thinking>checking files</thinking>\nHere: <bash cwd=\"/tmp\">ls -l > out.txt</bash> done.\n<progress value=\"1\" max=\"2\"/>";

async fn check_full_turn(provider: &str) {
    let mock = mock_llm::spawn(
        Config::default()
            .answers(vec![Answer::text(ANSWER)])
            .chunk_bytes(5)
            .api_key(Some(KEY.into())),
    )
    .await
    .unwrap();
    let h = hero(&[mock.addr()]).await;
    let (session, agent) = h.session_with(provider, &mock, KEY).await;
    let events = h.stream(session, "What is in /tmp?").await;
    let n = names(&events);
    assert_eq!(n.first(), Some(&"message_start"), "{n:?}");
    assert_eq!(n.last(), Some(&"message_complete"), "{n:?}");
    assert!(!n.contains(&"error"), "{events:?}");
    let start = last_data(&events, "message_start");
    assert_eq!(start["sessionId"], session);
    assert_eq!(start["agentName"], format!("{provider} agent"));
    let message_id = start["messageId"].as_str().unwrap().to_owned();
    // Elements recognised while streaming; the executable one asks before it runs.
    let starts: Vec<&str> = events
        .iter()
        .filter(|(n, _)| n == "element_start")
        .map(|(_, d)| d["type"].as_str().unwrap())
        .collect();
    assert_eq!(starts, vec!["thinking", "bash", "progress"]);
    let bash = events
        .iter()
        .find(|(n, d)| n == "element_complete" && d["type"] == "bash")
        .unwrap();
    assert_eq!(
        (bash.1["content"].as_str(), bash.1["executable"].as_bool()),
        (Some("ls -l > out.txt"), Some(true))
    );
    assert!(!n.contains(&"element_executing"));
    let complete = last_data(&events, "message_complete");
    assert_eq!(complete["content"], ANSWER);
    assert_eq!(complete["messageId"], message_id.as_str());
    let text: String = events
        .iter()
        .filter(|(n, _)| n == "text")
        .map(|(_, d)| d["text"].as_str().unwrap())
        .collect();
    assert!(
        text.starts_with("Let me look. ") && text.contains(" done."),
        "{text}"
    );

    // Both turns are frames: the user's, seq 2 (after the session's startup process), and
    // the agent's, seq 4; between them the bash command's request, stored as its element
    // closed while the reply streamed, waiting for approval (bash asks by default), its
    // parent the agent's reply.
    let frames = after_startup(h.frames(session).await);
    assert_eq!(frames.len(), 3);
    assert_eq!(
        (
            frames[1]["type"].as_str(),
            frames[1]["payload"]["function"].as_str(),
            frames[1]["payload"]["status"].as_str(),
            frames[1]["parent_id"].as_str(),
        ),
        (
            Some("request"),
            Some("bash"),
            Some("pending"),
            Some(message_id.as_str())
        )
    );
    assert_eq!(
        (frames[0]["seq"].as_i64(), frames[0]["author_type"].as_str()),
        (Some(2), Some("user"))
    );
    assert_eq!(frames[2]["id"], message_id.as_str());
    assert_eq!(frames[2]["payload"]["content"], ANSWER);
    assert_eq!(frames[2]["author_id"], agent);
    let usage = &frames[2]["payload"]["usage"];
    assert!(
        usage["input_tokens"].as_u64().unwrap() > 0 && usage["output_tokens"].as_u64().unwrap() > 0,
        "{usage}"
    );
    let rows = testing::int(
        &h.st.db,
        "SELECT COUNT(*) FROM usage WHERE output_tokens > 0",
        &[],
    )
    .await
    .unwrap();
    assert_eq!(rows, 1);

    // What the provider was sent: the agent's config merged in, the key in the right header.
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 1);
    let body = &reqs[0]["body"];
    assert_eq!(
        (
            body["max_tokens"].as_i64(),
            body["temperature"].as_f64(),
            body["stream"].as_bool()
        ),
        (Some(321), Some(0.25), Some(true))
    );
    assert_eq!(body["model"], "mock-model");
    let msgs = body["messages"].as_array().unwrap();
    // The session's startup process, merged into the user's first message, comes first.
    let first = msgs.last().unwrap()["content"].as_str().unwrap();
    assert!(
        first.starts_with("[System] You are starting a new session")
            && first.ends_with("\n\nWhat is in /tmp?"),
        "{first}"
    );
    if provider == "openai" {
        assert_eq!(body["stream_options"]["include_usage"], true);
        assert_eq!(msgs[0]["role"], "system");
    } else {
        assert!(body["system"].as_str().unwrap().contains("Hero"));
    }
    // The next turn reuses the provider connection: the reply was read to its end.
    let events = h.stream(session, "And now?").await;
    assert_eq!(names(&events).last(), Some(&"message_complete"));
    assert_eq!(mock.stats()["connections_total"], 1, "{}", mock.stats());
    assert_no_key_seen(&h);
}

fn assert_no_key_seen(h: &Hero) {
    for body in h.seen.lock().unwrap().iter() {
        assert!(
            !body.contains(KEY),
            "a response carried the API key: {body}"
        );
    }
}

#[tokio::test]
async fn anthropic_turn_streams_parses_and_stores_frames() {
    check_full_turn("anthropic").await;
}

/// Reference 000's reply events over many chunkings: the `text` events are the provider's
/// chunks, concatenating to `message_complete.content`; each element starts once and
/// completes once; each update's `content` is its deltas so far and the last is the
/// element's content, updates thinning out past 1 KiB; `duration` covers the mock's pauses
/// within the element.
#[tokio::test]
async fn reply_events_over_many_chunkings() {
    let long = "x".repeat(3000);
    let answer = format!(
        "Hi <thinking>{long}</thinking> then <copy label=\"c\">copied</copy> and <link href=\"https://example.com\">a link</link>."
    );
    for (chunk, tps) in [(1, None), (7, None), (50, Some(500.0)), (5000, None)] {
        let mut config = Config::default()
            .answers(vec![Answer::text(&answer)])
            .chunk_bytes(chunk);
        if let Some(tps) = tps {
            config = config.tokens_per_sec(tps);
        }
        let mock = mock_llm::spawn(config).await.unwrap();
        let h = hero(&[mock.addr()]).await;
        let (session, _) = h.session_with("anthropic", &mock, KEY).await;
        let events = h.stream(session, "go").await;
        let text: String = events
            .iter()
            .filter(|(n, _)| n == "text")
            .map(|(_, d)| d["text"].as_str().unwrap())
            .collect();
        assert_eq!(text, answer, "chunk {chunk}");
        assert_eq!(
            last_data(&events, "message_complete")["content"],
            answer.as_str()
        );
        let mut bodies: std::collections::BTreeMap<String, (usize, usize, String, usize)> =
            Default::default();
        for (name, d) in &events {
            let id = d["id"].as_str().unwrap_or_default().to_owned();
            match name.as_str() {
                "element_start" => bodies.entry(id).or_default().0 += 1,
                "element_update" => {
                    let b = bodies.entry(id).or_default();
                    b.2.push_str(d["delta"].as_str().unwrap());
                    assert_eq!(d["content"].as_str(), Some(b.2.as_str()), "chunk {chunk}");
                    b.3 += 1;
                }
                "element_complete" => {
                    let b = bodies.entry(id).or_default();
                    b.1 += 1;
                    assert_eq!(d["content"].as_str(), Some(b.2.as_str()), "chunk {chunk}");
                    assert!(d["duration"].is_u64(), "{d}");
                    if d["type"] == "thinking" && tps.is_some() {
                        // 3,000 bytes in 50-byte chunks at 500 a second: 2 ms apart.
                        let ms = d["duration"].as_u64().unwrap();
                        assert!(ms >= 100, "{ms} ms");
                    }
                }
                _ => {}
            }
        }
        assert_eq!(bodies.len(), 3, "{bodies:?}");
        for (id, (starts, completes, body, updates)) in &bodies {
            assert_eq!((starts, completes), (&1, &1), "{id}");
            if body.len() == long.len() && chunk == 1 {
                // Every byte below 1 KiB, then one per eighth of growth.
                assert!((1024..1040).contains(updates), "{updates} updates");
            }
        }
    }
}

#[tokio::test]
async fn a_reply_is_stored_even_when_its_usage_cannot_be() {
    let mock = mock_llm::spawn(Config::default().answers(vec![Answer::text("fine")]))
        .await
        .unwrap();
    let h = hero(&[mock.addr()]).await;
    let (session, _) = h.session_with("anthropic", &mock, KEY).await;
    // Each backend's own trigger refusing every usage row.
    let refuse: &[&str] = if h.st.db.sqlite_pool().is_some() {
        &[
            "CREATE TRIGGER usage_refused BEFORE INSERT ON usage BEGIN SELECT RAISE(ABORT, 'refused'); END",
        ]
    } else {
        &[
            "CREATE FUNCTION refuse_usage() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused'; END $$",
            "CREATE TRIGGER usage_refused BEFORE INSERT ON usage FOR EACH ROW EXECUTE FUNCTION refuse_usage()",
        ]
    };
    for sql in refuse {
        testing::execute(&h.st.db, sql, &[]).await.unwrap();
    }
    let events = h.stream(session, "hi").await;
    assert!(!names(&events).contains(&"error"), "{events:?}");
    let frames = after_startup(h.frames(session).await);
    assert_eq!(frames.len(), 2);
    assert_eq!(frames[1]["payload"]["content"], "fine");
    // And with the usage table writable again, both are recorded.
    let drop = if h.st.db.sqlite_pool().is_some() {
        "DROP TRIGGER usage_refused"
    } else {
        "DROP TRIGGER usage_refused ON usage"
    };
    testing::execute(&h.st.db, drop, &[]).await.unwrap();
    h.stream(session, "again").await;
    assert_eq!(after_startup(h.frames(session).await).len(), 4);
    let rows = testing::int(&h.st.db, "SELECT COUNT(*) FROM usage", &[])
        .await
        .unwrap();
    assert_eq!(rows, 1);
}

#[tokio::test]
async fn openai_turn_streams_parses_and_stores_frames() {
    check_full_turn("openai").await;
}

#[tokio::test]
async fn context_is_compiled_from_frames() {
    let mock = mock_llm::spawn(Config::default().answers(vec![Answer::text("first answer")]))
        .await
        .unwrap();
    let h = hero(&[mock.addr()]).await;
    let (session, _) = h.session_with("anthropic", &mock, KEY).await;
    h.stream(session, "first question").await;
    let events = h.stream(session, "second question [[mock echo]]").await;
    assert!(!names(&events).contains(&"error"), "{events:?}");
    let sent = &mock.requests()[1]["body"]["messages"];
    let roles: Vec<&str> = sent
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, vec!["user", "assistant", "user"]);
    assert_eq!(sent[1]["content"], "first answer");
}

/// A turn starts from the conversation the last one left in memory, unless a frame was
/// appended since by another path: then it reads the log again, and sees that frame.
#[tokio::test]
async fn context_follows_frames_appended_outside_turns() {
    use hero_backend::conversation::frames;
    use hero_shared::frame::AuthorType;
    let mock = mock_llm::spawn(Config::default().answers(vec![Answer::text("an answer")]))
        .await
        .unwrap();
    let h = hero(&[mock.addr()]).await;
    let (session, _) = h.session_with("anthropic", &mock, KEY).await;
    h.stream(session, "first").await;
    assert!(
        h.st.history.bytes() > 0,
        "the conversation is kept after a turn"
    );
    h.stream(session, "second").await;
    assert_eq!(
        h.st.history.hits(),
        1,
        "the second turn started from memory"
    );
    // A note appended straight to the log, past the turns.
    let (user_id, wrapped) = alice_key(&h).await;
    let dk = h.st.keys.unwrap_data_key(user_id, &wrapped).unwrap();
    let note = frames::NewFrame::message(
        session,
        AuthorType::System,
        None,
        json!({"role": "system", "content": "a note from elsewhere"}),
    );
    let sealed = frames::seal(&dk, note).unwrap();
    h.st.db
        .write_with(async |tx| sealed.insert(tx).await)
        .await
        .unwrap();
    h.stream(session, "third").await;
    assert_eq!(h.st.history.hits(), 1, "the third read the log");
    h.stream(session, "fourth").await;
    assert_eq!(
        h.st.history.hits(),
        2,
        "the fourth started from memory again"
    );
    let sent: Vec<Vec<(String, String)>> = mock
        .requests()
        .iter()
        .map(|r| {
            let m = r["body"]["messages"].as_array().unwrap().iter();
            m.map(|m| {
                // The session's startup process, merged into the first message, is not
                // what this test follows.
                let c = m["content"].as_str().unwrap();
                let c = match c.strip_prefix("[System] You are starting") {
                    Some(rest) => rest.split_once("\n\n\n").unwrap().1,
                    None => c,
                };
                (m["role"].as_str().unwrap().to_owned(), c.to_owned())
            })
            .collect()
        })
        .collect();
    let turn = |u: &str| {
        [
            ("user".to_owned(), u.to_owned()),
            ("assistant".to_owned(), "an answer".to_owned()),
        ]
    };
    let mut want: Vec<(String, String)> = [turn("first"), turn("second")].concat();
    want.push((
        "user".into(),
        "[System] a note from elsewhere\n\nthird".into(),
    ));
    assert_eq!(sent[2], want);
    want.push(("assistant".into(), "an answer".into()));
    want.push(("user".into(), "fourth".into()));
    assert_eq!(
        sent[3], want,
        "the fourth turn starts from memory, the note included"
    );
    assert_eq!(
        sent[1],
        [
            turn("first").to_vec(),
            vec![("user".to_owned(), "second".to_owned())]
        ]
        .concat()
    );
}

/// One fault: what the events say, and what the stored agent frame kept.
async fn check_fault(provider: &str, directive: &str, want_error: &str, want_partial: bool) {
    let mock = mock_llm::spawn(
        Config::default()
            .answers(vec![Answer::text("abcdefghij".repeat(10))])
            .chunk_bytes(5),
    )
    .await
    .unwrap();
    let h = hero(&[mock.addr()]).await;
    let (session, _) = h.session_with(provider, &mock, KEY).await;
    let events = h.stream(session, &format!("go {directive}")).await;
    let n = names(&events);
    assert_eq!(n.last(), Some(&"message_complete"), "{directive}: {n:?}");
    let err = last_data(&events, "error")["error"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(err.contains(want_error), "{directive}: {err}");
    let frames = h.frames(session).await;
    let agent = &frames.last().unwrap()["payload"];
    assert_eq!(agent["error"].as_str(), Some(err.as_str()));
    let kept = agent["content"].as_str().unwrap();
    assert_eq!(!kept.is_empty(), want_partial, "{directive}: kept {kept:?}");
    assert!("abcdefghij".repeat(10).starts_with(kept));
}

#[tokio::test]
async fn each_fault_ends_the_turn_with_a_clear_message() {
    for provider in ["anthropic", "openai"] {
        check_fault(
            provider,
            "[[mock fault=500]]",
            "the provider failed (500)",
            false,
        )
        .await;
        check_fault(
            provider,
            "[[mock fault=cut after_bytes=20 delay_ms=5]]",
            "cut mid-reply",
            true,
        )
        .await;
        check_fault(
            provider,
            "[[mock fault=stall after_bytes=10 delay_ms=5]]",
            "went silent",
            true,
        )
        .await;
        check_fault(
            provider,
            "[[mock fault=overloaded_midstream after_bytes=10 delay_ms=5]]",
            "mid-reply",
            true,
        )
        .await;
        check_fault(
            provider,
            "[[mock fault=429 times=5 retry_after=0]]",
            "rate-limiting",
            false,
        )
        .await;
    }
}

#[tokio::test]
async fn a_rejected_key_is_explained() {
    let mock = mock_llm::spawn(Config::default().api_key(Some("the-right-key".into())))
        .await
        .unwrap();
    let h = hero(&[mock.addr()]).await;
    for provider in ["anthropic", "openai"] {
        let (session, _) = h.session_with(provider, &mock, KEY).await;
        let events = h.stream(session, "hello").await;
        let err = last_data(&events, "error")["error"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(err.contains("refused the API key (401)"), "{err}");
        assert_eq!(names(&events).last(), Some(&"message_complete"));
    }
}

#[tokio::test]
async fn a_429_is_retried_before_the_first_byte() {
    let mock = mock_llm::spawn(Config::default().answers(vec![Answer::text("after the wait")]))
        .await
        .unwrap();
    let h = hero(&[mock.addr()]).await;
    let (session, _) = h.session_with("openai", &mock, KEY).await;
    let events = h
        .stream(session, "hi [[mock fault=429 times=1 retry_after=1]]")
        .await;
    assert!(!names(&events).contains(&"error"), "{events:?}");
    assert_eq!(
        last_data(&events, "message_complete")["content"],
        "after the wait"
    );
    assert_eq!(mock.requests().len(), 2);
}

#[tokio::test]
async fn batch_mode_and_the_stream_switch() {
    let mock = mock_llm::spawn(Config::default().answers(vec![Answer::text("whole answer")]))
        .await
        .unwrap();
    let h = hero(&[mock.addr()]).await;
    let (session, _) = h.session_with("anthropic", &mock, KEY).await;
    let path = format!("/api/sessions/{session}/messages");
    let (s, r) = h
        .json(reqwest::Method::POST, &path, Some(json!({"content": "hi"})))
        .await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(
        (r["content"].as_str(), r["error"].is_null()),
        (Some("whole answer"), true)
    );
    let (_, r) = h
        .json(
            reqwest::Method::POST,
            &path,
            Some(json!({"content": "/stream off"})),
        )
        .await;
    assert!(r["content"].as_str().unwrap().contains("off"), "{r}");
    let (_, sess) = h
        .json(
            reqwest::Method::GET,
            &format!("/api/sessions/{session}"),
            None,
        )
        .await;
    assert_eq!(sess["streaming"], false);
    h.json(
        reqwest::Method::POST,
        &path,
        Some(json!({"content": "/stream on"})),
    )
    .await;
    let (_, sess) = h
        .json(
            reqwest::Method::GET,
            &format!("/api/sessions/{session}"),
            None,
        )
        .await;
    assert_eq!(sess["streaming"], true);
    // The switches are not sent to the agent; they are system notes in the log.
    assert_eq!(mock.requests().len(), 1);
    let frames = after_startup(h.frames(session).await);
    assert_eq!(frames.len(), 4);
    assert_eq!(frames[2]["author_type"], "system");
}

/// True batch mode (reference 000, "Dual Message Modes"): after `/stream off` each reply is
/// asked for whole (`"stream": false`, in both formats) and parsed once (`duration` 0); the
/// session's messages are answered one at a time, in the order they are stored, each POST
/// with its own reply; a fault still ends with `error` and `message_complete`; the same
/// script stores the same frames twice.
#[tokio::test]
async fn batch_mode_asks_for_whole_replies_one_message_at_a_time() {
    for provider in ["anthropic", "openai"] {
        let mock = mock_llm::spawn(Config::default().tokens_per_sec(200.0))
            .await
            .unwrap();
        let h = hero(&[mock.addr()]).await;
        let (session, _) = h.session_with(provider, &mock, KEY).await;
        let path = format!("/api/sessions/{session}/messages");
        h.json(
            reqwest::Method::POST,
            &path,
            Some(json!({"content": "/stream off"})),
        )
        .await;
        // The stream route follows the mode: the whole reply, parsed at once.
        let events = h
            .stream(
                session,
                r#"one [[mock text="First \u003cthinking>hm\u003c/thinking> reply."]]"#,
            )
            .await;
        let complete = events
            .iter()
            .find(|(n, _)| n == "element_complete")
            .unwrap();
        assert_eq!(complete.1["duration"], 0, "{provider}: {complete:?}");
        assert_eq!(
            last_data(&events, "message_complete")["content"],
            "First <thinking>hm</thinking> reply."
        );
        let texts = events.iter().filter(|(n, _)| n == "text").count();
        assert_eq!(texts, 1, "one text event: the whole reply");
        // Three posted at once: three replies, each to its own message, in order.
        let post = |n: usize| {
            h.json(
                reqwest::Method::POST,
                &path,
                Some(json!({"content": format!("m{n} [[mock text=\"r{n}\" delay_ms=150]]")})),
            )
        };
        let (a, b, c) = tokio::join!(post(1), post(2), post(3));
        for (n, (s, r)) in [a, b, c].into_iter().enumerate() {
            assert_eq!(s, StatusCode::OK, "{r}");
            assert_eq!(r["content"], format!("r{}", n + 1), "{provider}: {r}");
        }
        let frames = h.frames(session).await;
        let said: Vec<String> = frames
            .iter()
            .filter(|f| f["type"] == "message" && f["author_type"] != "system")
            .map(|f| {
                f["payload"]["content"]
                    .as_str()
                    .unwrap()
                    .split(' ')
                    .next()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        // Whatever order the three arrived in, each reply follows its own message.
        for pair in said[2..].chunks(2) {
            assert_eq!(pair[1], pair[0].replace('m', "r"), "{provider}: {said:?}");
        }
        let bodies: Vec<Value> = mock
            .requests()
            .into_iter()
            .map(|r| r["body"].clone())
            .collect();
        assert!(bodies.iter().all(|b| b["stream"] == false), "{provider}");
        assert!(
            bodies.iter().all(|b| b.get("stream_options").is_none()),
            "{provider}"
        );
        // Calls go on the WebSocket as in streaming mode.
        let (_, mut ws) = h.ws().await;
        let subscribe = json!({"type": "subscribe", "sessionId": session});
        ws.send(tokio_tungstenite::tungstenite::Message::Text(
            subscribe.to_string().into(),
        ))
        .await
        .unwrap();
        h.json(
            reqwest::Method::POST,
            &path,
            Some(json!({"content": r#"help [[mock text="\u0040system(help)" then="done"]]"#})),
        )
        .await;
        let mut seen = Vec::new();
        while !seen.contains(&"operation_complete".to_owned()) {
            let m = ws_next(&mut ws).await;
            let kind = m["type"].as_str().unwrap().to_owned();
            if kind == "assertion_update" {
                seen.push(format!("assertion {}", m["status"].as_str().unwrap()));
            }
            seen.push(kind);
        }
        for want in [
            "operation_start",
            "assertion running",
            "assertion completed",
        ] {
            assert!(
                seen.contains(&want.to_owned()),
                "{provider}: {want} in {seen:?}"
            );
        }
        // A fault ends the reply as a streamed one would.
        let events = h.stream(session, r#"[[mock fault=500]]"#).await;
        let n = names(&events);
        assert!(
            n.contains(&"error") && n.last() == Some(&"message_complete"),
            "{n:?}"
        );
    }
    // The same script twice: the same frames.
    let mut runs = Vec::new();
    for _ in 0..2 {
        let mock = mock_llm::spawn(Config::default()).await.unwrap();
        let h = hero(&[mock.addr()]).await;
        let (session, _) = h.session_with("anthropic", &mock, KEY).await;
        let path = format!("/api/sessions/{session}/messages");
        for content in [
            "/stream off",
            r#"a [[mock text="A"]]"#,
            r#"b [[mock text="B \u003ctodo>\u003citem>x\u003c/item>\u003c/todo>"]]"#,
        ] {
            h.json(
                reqwest::Method::POST,
                &path,
                Some(json!({"content": content})),
            )
            .await;
        }
        let frames = h.frames(session).await;
        runs.push(
            frames
                .iter()
                .map(|f| {
                    (
                        f["seq"].clone(),
                        f["type"].clone(),
                        f["author_type"].clone(),
                        f["payload"]["content"].clone(),
                    )
                })
                .collect::<Vec<_>>(),
        );
    }
    assert_eq!(runs[0], runs[1]);
}

/// What calls cost (reference 003): priced at the agent's own price, exactly; two agents on
/// one key share the Service line; `/update_usage` makes Service and Global match the bill;
/// the scalar changes only later calls; bad amounts are refused; the demo costs nothing.
#[tokio::test]
async fn spend_is_priced_shared_by_key_and_corrected_to_the_bill() {
    let mock = mock_llm::spawn(Config::default()).await.unwrap();
    let h = hero(&[mock.addr()]).await;
    let spend = |session: i64| {
        let h = &h;
        async move {
            let (s, v) = h
                .json(
                    reqwest::Method::GET,
                    &format!("/api/spend?session_id={session}"),
                    None,
                )
                .await;
            assert_eq!(s, StatusCode::OK, "{v}");
            v
        }
    };
    let price = json!({"input": 3.0, "output": 15.0, "cache_read": 0.30, "cache_write": 3.75});
    let (one, agent_one) = h.session_with("anthropic", &mock, KEY).await;
    let (two, agent_two) = h.session_with("openai", &mock, KEY).await;
    for agent in [agent_one, agent_two] {
        let (s, a) = h
            .json(
                reqwest::Method::PATCH,
                &format!("/api/agents/{agent}"),
                Some(json!({"price": price})),
            )
            .await;
        assert_eq!((s, &a["price"]), (StatusCode::OK, &price), "{a}");
    }
    let call = r#"go [[mock usage_input=1000 usage_output=500 usage_cache_read=2000]]"#;
    h.stream(one, call).await;
    let v = spend(one).await;
    assert_eq!(v["session"]["cost_micros"], 11_100, "{v}");
    assert_eq!(v["session"]["cache_read_tokens"], 2000, "{v}");
    assert_eq!(v["global"]["cost_micros"], 11_100, "{v}");
    // OpenAI counts the cached tokens in its prompt tokens: the same call costs the same.
    h.stream(two, call).await;
    let v = spend(two).await;
    assert_eq!(v["session"]["cost_micros"], 11_100, "{v}");
    assert_eq!(
        v["service"]["cost_micros"], 22_200,
        "both agents on one key: {v}"
    );
    assert_eq!(v["service"]["calls"], 2, "{v}");
    // A third agent on another key has a Service line of its own.
    let (three, _) = h
        .session_with("anthropic", &mock, "sk-another-key-0123456789")
        .await;
    h.stream(three, r#"[[mock usage_input=1 usage_output=1]]"#)
        .await;
    let v = spend(three).await;
    assert_eq!(
        (
            v["service"]["calls"].as_i64(),
            v["service"]["unpriced_calls"].as_i64()
        ),
        (Some(1), Some(1)),
        "{v}"
    );
    assert_eq!(v["global"]["calls"], 3, "{v}");

    // The bill for the key says $12.34: Service and Global match it.
    let events = h.stream(one, "/update_usage 12.34").await;
    let note = last_data(&events, "message_complete")["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(note.contains("$12.34"), "{note}");
    let v = spend(one).await;
    assert_eq!(v["service"]["cost_micros"], 12_340_000, "{v}");
    assert_eq!(v["global"]["cost_micros"], 12_340_000, "{v}");
    assert_eq!(
        v["session"]["cost_micros"], 11_100,
        "a session keeps its calls' cost: {v}"
    );
    let events = h.stream(one, "/update_usage lots").await;
    let note = last_data(&events, "message_complete")["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(note.starts_with("Usage: /update_usage"), "{note}");
    let frames = h.frames(one).await;
    assert!(
        frames
            .iter()
            .filter(|f| f["payload"]["private"] == true)
            .count()
            >= 2
    );
    let (s, _) = h
        .json(
            reqwest::Method::POST,
            "/api/spend/corrections",
            Some(json!({"agent_id": agent_one, "actual_usd": 20})),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED);
    let (_, list) = h
        .json(reqwest::Method::GET, "/api/spend/corrections", None)
        .await;
    assert_eq!(list.as_array().unwrap().len(), 2, "{list}");

    // The scalar applies to later calls only.
    let (s, v) = h
        .json(
            reqwest::Method::PUT,
            "/api/spend/settings",
            Some(json!({"token_scalar": 2})),
        )
        .await;
    assert_eq!((s, v["token_scalar"].as_f64()), (StatusCode::OK, Some(2.0)));
    let before = spend(one).await["session"]["cost_micros"].as_i64().unwrap();
    h.stream(one, call).await;
    let after = spend(one).await["session"]["cost_micros"].as_i64().unwrap();
    assert_eq!((before, after - before), (11_100, 22_200));

    // Refused, clearly.
    for (method, path, body) in [
        (
            reqwest::Method::POST,
            "/api/spend/corrections".to_owned(),
            json!({"agent_id": agent_one, "actual_usd": -1}),
        ),
        (
            reqwest::Method::PUT,
            "/api/spend/settings".to_owned(),
            json!({"token_scalar": 0.001}),
        ),
        (
            reqwest::Method::PUT,
            "/api/spend/settings".to_owned(),
            json!({"token_scalar": 101}),
        ),
        (
            reqwest::Method::PATCH,
            format!("/api/agents/{agent_one}"),
            json!({"price": {"input": -3, "output": 1}}),
        ),
    ] {
        let (s, e) = h.json(method, &path, Some(body)).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{path}: {e}");
        assert!(!e["error"].as_str().unwrap().is_empty());
    }
    let (_, prices) = h.json(reqwest::Method::GET, "/api/prices", None).await;
    assert!(prices["table"].as_array().unwrap().len() > 5, "{prices}");
}

#[tokio::test]
async fn concurrent_posts_keep_seq_strictly_increasing() {
    let mock = mock_llm::spawn(
        Config::default()
            .answers(vec![Answer::text("ok")])
            .chunk_bytes(1),
    )
    .await
    .unwrap();
    let h = std::sync::Arc::new(hero(&[mock.addr()]).await);
    let (session, _) = h.session_with("openai", &mock, KEY).await;
    let mut tasks = Vec::new();
    for i in 0..6 {
        let h = h.clone();
        tasks.push(tokio::spawn(async move {
            h.stream(session, &format!("message {i}")).await
        }));
    }
    for t in tasks {
        assert_eq!(names(&t.await.unwrap()).last(), Some(&"message_complete"));
    }
    let seqs: Vec<i64> = h
        .frames(session)
        .await
        .iter()
        .map(|f| f["seq"].as_i64().unwrap())
        .collect();
    // The session's startup process first, then six exchanges.
    assert_eq!(seqs, (1..=13).collect::<Vec<_>>());
}

/// Sign-in checks and turns go through a connection of their own, not the pool: a pool
/// taken up by other work (long reads, a busy admin) does not hold up a reply.
#[tokio::test]
async fn turns_do_not_wait_for_the_pool() {
    let mock = mock_llm::spawn(
        Config::default()
            .answers(vec![Answer::text("ok")])
            .chunk_bytes(1),
    )
    .await
    .unwrap();
    let h = hero(&[mock.addr()]).await;
    let (session, _) = h.session_with("anthropic", &mock, KEY).await;
    // SQLite's hot connection, out of the pool (on PostgreSQL, turns use the pool).
    let Some(pool) = h.st.db.sqlite_pool() else {
        return;
    };
    let mut taken = Vec::new();
    for _ in 0..pool.options().get_max_connections() {
        taken.push(pool.acquire().await.unwrap());
    }
    let events = tokio::time::timeout(Duration::from_secs(5), h.stream(session, "hello"))
        .await
        .expect("the turn went on while the pool was taken");
    assert_eq!(last_data(&events, "message_complete")["content"], "ok");
    drop(taken);
    let frames = after_startup(h.frames(session).await);
    assert_eq!(frames.len(), 2);
    assert_eq!(frames[1]["payload"]["content"], "ok");
}

#[tokio::test]
async fn a_watcher_that_falls_behind_is_told_and_dropped() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // A long reply in one-byte pieces, as fast as the mock can: two events per piece on
    // `/events`, 6 MB in all, more than the sockets hold (the server's send buffer grows
    // to 4 MB) and then far more events than the hub keeps for a reader that does not read.
    let answer = "x".repeat(30_000);
    let mock = mock_llm::spawn(
        Config::default()
            .answers(vec![Answer::text(answer)])
            .chunk_bytes(1),
    )
    .await
    .unwrap();
    let h = hero(&[mock.addr()]).await;
    let (session, _) = h.session_with("anthropic", &mock, KEY).await;
    let (_, login) = h
        .json(
            reqwest::Method::POST,
            "/api/auth/login",
            Some(json!({"username": "alice", "password": "alice-password"})),
        )
        .await;
    let token = login["token"].as_str().unwrap();

    // A tab with a tiny receive window that reads its response head, then nothing.
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.set_recv_buffer_size(2048).unwrap();
    let mut tab = sock
        .connect(h.base.trim_start_matches("http://").parse().unwrap())
        .await
        .unwrap();
    let request = format!(
        "GET /api/sessions/{session}/events HTTP/1.1\r\nHost: hero\r\nAuthorization: Bearer {token}\r\n\r\n"
    );
    tab.write_all(request.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(10), tab.read(&mut buf))
            .await
            .unwrap()
            .unwrap();
        assert!(n > 0, "the server closed the stream");
        got.extend_from_slice(&buf[..n]);
    }
    assert!(
        got.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&got)
    );

    // The reply is not held up by the tab that does not read: its poster gets all of it.
    let events = h.stream(session, "go").await;
    assert_eq!(names(&events).last(), Some(&"message_complete"));
    assert_eq!(
        last_data(&events, "message_complete")["content"]
            .as_str()
            .map(str::len),
        Some(30_000)
    );

    // The tab, reading at last, is told it fell behind, and its stream ends.
    let told = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let n = tab.read(&mut buf).await.unwrap();
            got.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&got);
            if n == 0 || text.ends_with("0\r\n\r\n") {
                return text.into_owned();
            }
        }
    })
    .await
    .expect("the stream ends");
    assert!(
        told.contains("event: error\ndata: {\"error\":\"this stream fell "),
        "{}",
        &told[told.len().saturating_sub(400)..]
    );
    assert!(told.contains("events behind and was closed"));
}

#[tokio::test]
async fn the_event_stream_resumes_without_gap_or_duplicate() {
    let mock = mock_llm::spawn(
        Config::default()
            .answers(vec![Answer::text("live answer")])
            .chunk_bytes(3),
    )
    .await
    .unwrap();
    let h = hero(&[mock.addr()]).await;
    let (session, _) = h.session_with("anthropic", &mock, KEY).await;
    h.stream(session, "one").await; // frames 1 (the startup process), 2, 3
    let message = |ev: &Ev| {
        serde_json::from_str::<Value>(&ev.data)
            .ok()
            .and_then(|v| v["messageId"].as_str().map(str::to_owned))
    };

    // A tab subscribed before a turn, but not read until it is over. It has read its frame
    // from the log first or live last; if from the log, the turn's live events, queued
    // meanwhile, are not sent after it (the tab has the whole message).
    let resp =
        h.c.get(h.url(&format!("/api/sessions/{session}/events")))
            .send()
            .await
            .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let mut tab = sse(resp.bytes_stream());
    h.stream(session, "/stream on").await; // frame 4 (1 is the startup process)
    let note = loop {
        let ev = tokio::time::timeout(Duration::from_secs(10), tab.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        if ev.event == "frame" {
            assert_eq!(ev.id, "4");
            break serde_json::from_str::<Value>(&ev.data).unwrap()["id"]
                .as_str()
                .unwrap()
                .to_owned();
        }
    };

    // Caught up with the log now: the next turn comes live, then its frames.
    h.stream(session, "two").await; // frames 5, 6
    let mut seen = Vec::new();
    let mut phantom_id = None;
    let at_phantom = |seen: &[(String, String)]| seen.iter().position(|(e, _)| e == "phantom");
    loop {
        let ev = tokio::time::timeout(Duration::from_secs(10), tab.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        // After the note's frame, at most its `message_complete` (sent when the frame came
        // live, before it).
        if message(&ev).as_deref() == Some(note.as_str()) {
            assert_eq!(ev.event, "message_complete", "{ev:?}");
            continue;
        }
        // The reply in flight comes first as a phantom frame (no seq of its own).
        if ev.event == "frame" && ev.data.contains("\"phantom\":true") {
            seen.push(("phantom".to_owned(), message(&ev).unwrap_or_default()));
            let v: Value = serde_json::from_str(&ev.data).unwrap();
            phantom_id = v["id"].as_str().map(str::to_owned);
            continue;
        }
        let last = ev.event == "frame" && ev.id == "6";
        if last {
            let v: Value = serde_json::from_str(&ev.data).unwrap();
            assert_eq!(
                v["id"].as_str(),
                phantom_id.as_deref(),
                "the stored frame replaces the phantom"
            );
        }
        seen.push((ev.event, ev.id));
        if last {
            break;
        }
    }
    assert!(
        at_phantom(&seen).is_some()
            && at_phantom(&seen) < seen.iter().position(|(e, _)| e == "text"),
        "{seen:?}"
    );
    let frame_ids: Vec<&str> = seen
        .iter()
        .filter(|(e, _)| e == "frame")
        .map(|(_, id)| id.as_str())
        .collect();
    assert_eq!(frame_ids, vec!["5", "6"]);
    let at = |name: &str| seen.iter().position(|(e, _)| e == name);
    assert!(
        at("message_start") < at("text") && at("text").is_some(),
        "{seen:?}"
    );

    // Reconnecting after seq 1: frames 2 to 6 from the log, each once, in order.
    let resp =
        h.c.get(h.url(&format!("/api/sessions/{session}/events")))
            .header("Last-Event-ID", "1")
            .send()
            .await
            .unwrap();
    let mut again = sse(resp.bytes_stream());
    let mut ids = Vec::new();
    while ids.len() < 5 {
        let ev = tokio::time::timeout(Duration::from_secs(10), again.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(ev.event, "frame");
        ids.push(ev.id);
    }
    assert_eq!(ids, vec!["2", "3", "4", "5", "6"]);
}

#[tokio::test]
async fn abort_over_the_websocket_keeps_the_partial_answer() {
    use tokio_tungstenite::tungstenite::{Message, client::IntoClientRequest};
    let mock = mock_llm::spawn(
        Config::default()
            .answers(vec![Answer::text("x".repeat(10_000))])
            .chunk_bytes(10)
            .delay(Duration::from_millis(20)),
    )
    .await
    .unwrap();
    let h = hero(&[mock.addr()]).await;
    let (session, _) = h.session_with("anthropic", &mock, KEY).await;
    // The WebSocket authenticates with the same cookie.
    let login: Value =
        h.c.post(h.url("/api/auth/login"))
            .json(&json!({"username": "alice", "password": "alice-password"}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    let mut req = format!("ws{}/ws", h.base.trim_start_matches("http"))
        .into_client_request()
        .unwrap();
    req.headers_mut().insert(
        "cookie",
        format!("hero_token={}", login["token"].as_str().unwrap())
            .parse()
            .unwrap(),
    );
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();

    let resp =
        h.c.post(h.url(&format!("/api/sessions/{session}/messages/stream")))
            .json(&json!({"content": "long please"}))
            .send()
            .await
            .unwrap();
    let mut events = sse(resp.bytes_stream());
    // Wait for some text, seen both on the poster's stream and mirrored on the WebSocket.
    loop {
        let ev = events.next().await.unwrap().unwrap();
        if ev.event == "text" {
            break;
        }
    }
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        if let Message::Text(t) = msg
            && serde_json::from_str::<Value>(&t).unwrap()["type"] == "stream_text"
        {
            break;
        }
    }
    ws.send(Message::Text(
        json!({"type": "abort", "sessionId": session})
            .to_string()
            .into(),
    ))
    .await
    .unwrap();
    let mut rest = Vec::new();
    while let Some(ev) = tokio::time::timeout(Duration::from_secs(10), events.next())
        .await
        .unwrap()
    {
        let ev = ev.unwrap();
        let done = ev.event == "message_complete";
        rest.push(ev.event);
        if done {
            break;
        }
    }
    assert_eq!(rest.last().map(String::as_str), Some("message_complete"));
    let frames = h.frames(session).await;
    let agent = &frames.last().unwrap()["payload"];
    assert_eq!(agent["aborted"], true);
    let kept = agent["content"].as_str().unwrap();
    assert!(
        !kept.is_empty() && kept.len() < 10_000,
        "kept {} bytes",
        kept.len()
    );
    // An unreadable message gets a clear error, not a dropped connection.
    ws.send(Message::Text("not json".into())).await.unwrap();
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        if let Message::Text(t) = msg {
            let v: Value = serde_json::from_str(&t).unwrap();
            if v["type"] == "error" && v["error"].as_str().unwrap().contains("unreadable") {
                break;
            }
        }
    }
}

/// The poster's stream drives the reply while it reads; a poster that leaves hands the reply
/// to a task of its own, which finishes and stores it whole.
#[tokio::test]
async fn a_poster_that_leaves_mid_reply_does_not_stop_it() {
    let answer = "steady words ".repeat(40);
    let mock = mock_llm::spawn(
        Config::default()
            .answers(vec![Answer::text(answer.clone())])
            .chunk_bytes(13)
            .delay(Duration::from_millis(10)),
    )
    .await
    .unwrap();
    let h = hero(&[mock.addr()]).await;
    let (session, _) = h.session_with("anthropic", &mock, KEY).await;
    let resp =
        h.c.post(h.url(&format!("/api/sessions/{session}/messages/stream")))
            .json(&json!({"content": "go on"}))
            .send()
            .await
            .unwrap();
    let mut events = sse(resp.bytes_stream());
    loop {
        let ev = tokio::time::timeout(Duration::from_secs(10), events.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        if ev.event == "text" {
            break;
        }
    }
    drop(events);
    assert_eq!(
        h.st.turns.count(session),
        1,
        "the reply goes on without its poster"
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while h.st.turns.count(session) > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the reply never finished"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let frames = h.frames(session).await;
    let agent = &frames.last().unwrap()["payload"];
    assert_eq!(agent["role"], "agent");
    assert_eq!(agent["content"], answer.as_str());
    assert!(
        agent.get("aborted").is_none() && agent.get("error").is_none(),
        "{agent}"
    );
}

/// Signing out ends the live streams opened with that sign-in: the event stream and the
/// WebSocket each say so and close, within the re-check period.
#[tokio::test]
async fn signing_out_ends_live_streams() {
    use tokio_tungstenite::tungstenite::{Message, client::IntoClientRequest};
    let mock = mock_llm::spawn(Config::default()).await.unwrap();
    let h = hero(&[mock.addr()]).await;
    let (session, _) = h.session_with("anthropic", &mock, KEY).await;
    let login: Value =
        h.c.post(h.url("/api/auth/login"))
            .json(&json!({"username": "alice", "password": "alice-password"}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    let token = login["token"].as_str().unwrap().to_owned();
    let events =
        h.c.get(h.url(&format!("/api/sessions/{session}/events")))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
    assert_eq!(events.status(), StatusCode::OK);
    let mut events = sse(events.bytes_stream());
    let mut req = format!("ws{}/ws", h.base.trim_start_matches("http"))
        .into_client_request()
        .unwrap();
    req.headers_mut()
        .insert("cookie", format!("hero_token={token}").parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    // Still valid: a few re-checks pass and nothing ends.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let r =
        h.c.post(h.url("/api/auth/logout"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    let ev = tokio::time::timeout(Duration::from_secs(5), events.next())
        .await
        .expect("the event stream said nothing")
        .unwrap()
        .unwrap();
    assert_eq!(
        (ev.event.as_str(), ev.data.contains("sign-in has ended")),
        ("error", true),
        "{ev:?}"
    );
    assert!(
        tokio::time::timeout(Duration::from_secs(5), events.next())
            .await
            .unwrap()
            .is_none(),
        "the event stream ends"
    );
    loop {
        match tokio::time::timeout(Duration::from_secs(5), ws.next())
            .await
            .expect("the socket said nothing")
        {
            Some(Ok(Message::Text(t))) => {
                let v: Value = serde_json::from_str(&t).unwrap();
                if v["type"] == "error" {
                    assert!(
                        v["error"].as_str().unwrap().contains("sign-in has ended"),
                        "{v}"
                    );
                    break;
                }
            }
            Some(Ok(_)) => {}
            other => panic!("the socket closed without saying why: {other:?}"),
        }
    }
}

#[tokio::test]
async fn bad_chat_input_is_refused_clearly() {
    let mock = mock_llm::spawn(Config::default()).await.unwrap();
    let h = hero(&[mock.addr()]).await;
    let (session, agent) = h.session_with("openai", &mock, KEY).await;
    let post = |content: &str| json!({"content": content});
    let path = format!("/api/sessions/{session}/messages/stream");
    let (s, r) = h
        .json(reqwest::Method::POST, &path, Some(post("   ")))
        .await;
    assert_eq!(
        (s, r["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("the message is empty"))
    );
    let (s, _) = h
        .json(
            reqwest::Method::POST,
            "/api/sessions/999/messages/stream",
            Some(post("hi")),
        )
        .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (s, r) = h
        .json(
            reqwest::Method::PATCH,
            &format!("/api/agents/{agent}"),
            Some(json!({"config": {"stream": false}})),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .contains("may not set \"stream\"")
    );
    let (s, _) = h
        .json(
            reqwest::Method::DELETE,
            &format!("/api/agents/{agent}"),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (s, r) = h.json(reqwest::Method::POST, &path, Some(post("hi"))).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(
        r["error"].as_str().unwrap().contains("agent was deleted"),
        "{r}"
    );
    assert_eq!(h.frames(session).await.len(), 0);
    // A session with no agent at all is told to choose one; its stream switch still works.
    let (s, _) = h
        .json(
            reqwest::Method::PATCH,
            &format!("/api/sessions/{session}"),
            Some(json!({"agent_id": null})),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    let (s, r) = h.json(reqwest::Method::POST, &path, Some(post("hi"))).await;
    assert_eq!(
        (s, r["error"].as_str()),
        (
            StatusCode::BAD_REQUEST,
            Some("this session has no agent; choose one for it first")
        )
    );
    let events = h.stream(session, "/stream off").await;
    assert!(
        last_data(&events, "message_complete")["content"]
            .as_str()
            .unwrap()
            .contains("Streaming is off"),
        "{events:?}"
    );
    h.stream(session, "/stream on").await;
    assert_eq!(h.frames(session).await.len(), 2);
    // A session that is not there is not found, whatever the message.
    let (s, _) = h
        .json(
            reqwest::Method::POST,
            "/api/sessions/999/messages/stream",
            Some(post("/stream on")),
        )
        .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    // The demo agent answers with no key and no network.
    let (_, agents) = h.json(reqwest::Method::GET, "/api/agents", None).await;
    let demo = agents
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["provider"] == "scripted")
        .unwrap()["id"]
        .clone();
    h.json(
        reqwest::Method::PATCH,
        &format!("/api/sessions/{session}"),
        Some(json!({"agent_id": demo})),
    )
    .await;
    // Past its first-run ritual, the demo shows its showcase.
    let (s, _) = h
        .json(
            reqwest::Method::PUT,
            &format!("/api/agents/{demo}/files/BOOTSTRAP.md"),
            Some(json!({"content": ""})),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    let events = h.stream(session, "show me").await;
    let done = last_data(&events, "message_complete")["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        done.contains("offline demo") && done.contains("<todo"),
        "{done}"
    );
    assert_no_key_seen(&h);
}

#[tokio::test]
async fn a_provider_that_never_answers_times_out() {
    // Accepts connections and never answers a byte.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = silent.local_addr().unwrap();
    let h = hero(&[addr]).await;
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((sock, _)) = silent.accept().await {
            held.push(sock);
        }
    });
    let (s, agent) = h
        .json(reqwest::Method::POST, "/api/agents", Some(json!({
            "name": "silent", "provider": "openai-compatible", "model": "m", "base_url": format!("http://{addr}/v1")
        })))
        .await;
    assert_eq!(s, StatusCode::CREATED);
    let (_, session) = h
        .json(
            reqwest::Method::POST,
            "/api/sessions",
            Some(json!({"name": "t", "agent_id": agent["id"]})),
        )
        .await;
    let events = h
        .stream(session["id"].as_i64().unwrap(), "anyone there?")
        .await;
    let err = last_data(&events, "error")["error"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(err.contains("did not answer within 2 seconds"), "{err}");
    assert_eq!(names(&events).last(), Some(&"message_complete"));
}

impl Hero {
    /// An agent at `base_url` and a session with it; the error event of one turn.
    async fn turn_error(&self, provider: &str, base_url: &str) -> String {
        let (s, agent) = self
            .json(reqwest::Method::POST, "/api/agents", Some(json!({
                "name": "elsewhere", "provider": provider, "model": "m", "base_url": base_url, "api_key": KEY
            })))
            .await;
        assert_eq!(s, StatusCode::CREATED, "{agent}");
        let (_, session) = self
            .json(
                reqwest::Method::POST,
                "/api/sessions",
                Some(json!({"name": "t", "agent_id": agent["id"]})),
            )
            .await;
        let events = self.stream(session["id"].as_i64().unwrap(), "hello").await;
        assert_eq!(names(&events).last(), Some(&"message_complete"));
        last_data(&events, "error")["error"]
            .as_str()
            .unwrap()
            .to_owned()
    }
}

/// The same setup as every turn test, without the allowance: refused when the agent is
/// saved, with the setting that would allow it named; and an agent saved while it was
/// allowed is refused at its next call once the allowance is gone, before any connection.
#[tokio::test]
async fn the_mock_on_loopback_is_refused_without_the_allowance() {
    let mock = mock_llm::spawn(Config::default()).await.unwrap();
    let h = hero(&[]).await;
    let refusal = format!(
        "{} is a loopback address; an administrator can allow it with HERO_EGRESS_ALLOW",
        mock.addr()
    );
    let (status, body) = h
        .json(reqwest::Method::POST, "/api/agents", Some(json!({
            "name": "here", "provider": "anthropic", "model": "m", "base_url": mock.url(), "api_key": KEY
        })))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"], format!("base_url: {refusal}"));
    // Saved under an administrator's allowance that the running server no longer has.
    let metadata: std::net::SocketAddr = "169.254.169.254:80".parse().unwrap();
    let then = EgressPolicy::default()
        .allowing(mock.addr())
        .allowing(metadata);
    let alice = hero_backend::accounts::auth::login(&h.st, "alice", "alice-password")
        .await
        .unwrap()
        .user;
    for (provider, base, want) in [
        (ProviderKind::Anthropic, mock.url(), refusal.clone()),
        (ProviderKind::OpenAi, format!("{}/v1", mock.url()), refusal.clone()),
        // The cloud metadata address, in decimal.
        (
            ProviderKind::Anthropic,
            "http://2852039166".into(),
            "169.254.169.254:80 is a link-local address; an administrator can allow it with HERO_EGRESS_ALLOW".into(),
        ),
    ] {
        let agent = hero_backend::agents::create(
            &h.st.db,
            &h.st.keys,
            &then,
            &alice,
            CreateAgentRequest {
                name: "then".into(),
                provider,
                model: "m".into(),
                base_url: Some(base),
                api_key: Some(KEY.into()),
                config: None,
                kind: Default::default(),
                compact_after_messages: None,
                compact_after_tokens: None,
                context_window: None,
            },
        )
        .await
        .unwrap();
        let (_, session) = h
            .json(
                reqwest::Method::POST,
                "/api/sessions",
                Some(json!({"name": "t", "agent_id": agent.id})),
            )
            .await;
        let events = h.stream(session["id"].as_i64().unwrap(), "hello").await;
        assert_eq!(names(&events).last(), Some(&"message_complete"));
        assert_eq!(last_data(&events, "error")["error"], want.as_str());
    }
    assert!(mock.requests().is_empty(), "{:?}", mock.requests());
}

/// Allowing 127.0.0.1:PORT does not allow `localhost:PORT`: the name is refused by the
/// client's resolver, on the address it resolves to, at connect time.
#[tokio::test]
async fn a_name_that_resolves_to_loopback_is_refused_at_connect_time() {
    let mock = mock_llm::spawn(Config::default()).await.unwrap();
    let h = hero(&[mock.addr()]).await;
    let err = h
        .turn_error(
            "anthropic",
            &format!("http://localhost:{}", mock.addr().port()),
        )
        .await;
    assert_eq!(
        err,
        "localhost resolves to a loopback address; an administrator can allow it with HERO_EGRESS_ALLOW"
    );
    assert!(mock.requests().is_empty(), "{:?}", mock.requests());
}

#[tokio::test]
async fn base_urls_with_credentials_queries_or_fragments_are_refused() {
    let h = hero(&[]).await;
    for (url, want) in [
        ("http://me:pw@example.com/v1", "user name or password"),
        ("https://example.com/v1?key=k", "must not contain a query"),
        ("https://example.com/v1#top", "must not contain a fragment"),
        ("file:///etc/passwd", "http:// or https://"),
    ] {
        let (s, body) = h
            .json(
                reqwest::Method::POST,
                "/api/agents",
                Some(json!({
                    "name": "x", "provider": "openai-compatible", "model": "m", "base_url": url
                })),
            )
            .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{url}");
        let err = body["error"].as_str().unwrap();
        assert!(err.contains(want), "{url}: {err}");
    }
}

/// What answers at an allowed address is not shown unless it is a provider's JSON error
/// message; a refused connection is one line, whatever the cause.
#[tokio::test]
async fn only_a_providers_json_error_message_reaches_the_user() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let other = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let other_addr = other.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = other.accept().await {
            let mut buf = vec![0u8; 64 * 1024];
            let _ = sock.read(&mut buf).await;
            let body = "<html><title>Router admin</title>secret-page</html>";
            let _ = sock
                .write_all(
                    format!(
                        "HTTP/1.1 404 Not Found\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    )
                    .as_bytes(),
                )
                .await;
        }
    });
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let h = hero(&[other_addr, closed]).await;
    let err = h
        .turn_error("openai-compatible", &format!("http://{other_addr}/v1"))
        .await;
    assert_eq!(
        err,
        "the provider rejected the request (404): no error message came with it"
    );
    let err = h
        .turn_error("openai-compatible", &format!("http://{closed}/v1"))
        .await;
    assert_eq!(
        err,
        format!("could not connect to the provider at {closed}")
    );
}

#[tokio::test]
async fn frames_routes_filter_and_stay_private() {
    let mock = mock_llm::spawn(Config::default().answers(vec![Answer::text("fine")]))
        .await
        .unwrap();
    let h = hero(&[mock.addr()]).await;
    let (session, _) = h.session_with("anthropic", &mock, KEY).await;
    h.stream(session, "one").await;
    h.stream(session, "two").await;
    let (_, page) = h
        .json(
            reqwest::Method::GET,
            &format!("/api/sessions/{session}/frames?after=1&limit=2"),
            None,
        )
        .await;
    let seqs: Vec<i64> = page["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["seq"].as_i64().unwrap())
        .collect();
    // Seq 1 is the session's startup process.
    assert_eq!((seqs, page["last_seq"].as_i64()), (vec![2, 3], Some(5)));
    let (_, only) = h
        .json(
            reqwest::Method::GET,
            &format!("/api/sessions/{session}/frames?type=compact"),
            None,
        )
        .await;
    assert_eq!(only["frames"], json!([]));
    let (s, bad) = h
        .json(
            reqwest::Method::GET,
            &format!("/api/sessions/{session}/frames?type=nonsense"),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{bad}");
    let (_, stats) = h
        .json(
            reqwest::Method::GET,
            &format!("/api/sessions/{session}/frames/stats"),
            None,
        )
        .await;
    assert_eq!(
        (
            stats["total"].as_u64(),
            stats["messages"].as_u64(),
            stats["messages_since_compact"].as_u64()
        ),
        // Two exchanges and the session's startup process, a message of Hero's.
        (Some(5), Some(5), Some(5))
    );
    let first_id = page["frames"][0]["id"].as_str().unwrap().to_owned();
    let (s, one) = h
        .json(
            reqwest::Method::GET,
            &format!("/api/sessions/{session}/frames/{first_id}"),
            None,
        )
        .await;
    assert_eq!((s, one["seq"].as_i64()), (StatusCode::OK, Some(2)));
    let (_, view) = h
        .json(
            reqwest::Method::GET,
            &format!("/api/sessions/{session}/view"),
            None,
        )
        .await;
    // The startup process is in the view too, marked hidden.
    assert_eq!(view["messages"].as_array().unwrap().len(), 5);
    assert_eq!(view["messages"][0]["hidden"], true);

    // Bob sees none of it.
    let bob = bob_client(&h).await;
    for path in [
        format!("/api/sessions/{session}/frames"),
        format!("/api/sessions/{session}/frames/stats"),
        format!("/api/sessions/{session}/frames/{first_id}"),
        format!("/api/sessions/{session}/view"),
        format!("/api/sessions/{session}/events"),
    ] {
        let r = bob.get(h.url(&path)).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::NOT_FOUND, "{path}");
    }
    let r = bob
        .post(h.url(&format!("/api/sessions/{session}/messages")))
        .json(&json!({"content": "hi"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let r = bob.get(h.url("/api/agents")).send().await.unwrap();
    let agents: Value = r.json().await.unwrap();
    assert!(
        agents
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["provider"] == "scripted"),
        "{agents}"
    );
}

/// The next JSON message of a WebSocket (text messages only).
async fn ws_next<S>(ws: &mut S) -> Value
where
    S: futures::Stream<
            Item = Result<
                tokio_tungstenite::tungstenite::Message,
                tokio_tungstenite::tungstenite::Error,
            >,
        > + Unpin,
{
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .expect("a WebSocket message")
            .expect("the socket is open")
            .unwrap();
        if let tokio_tungstenite::tungstenite::Message::Text(t) = msg {
            return serde_json::from_str(&t).unwrap();
        }
    }
}

#[tokio::test]
async fn a_websocket_subscription_replays_the_log_then_goes_live() {
    use tokio_tungstenite::tungstenite::Message;
    let mock = mock_llm::spawn(Config::default().answers(vec![Answer::text("an answer")]))
        .await
        .unwrap();
    let h = hero(&[mock.addr()]).await;
    let (session, _) = h.session_with("anthropic", &mock, KEY).await;
    h.stream(session, "one").await; // frames 1 (the startup process), 2, 3
    h.stream(session, "two").await; // frames 4, 5
    let (_, mut ws) = h.ws().await;
    let send = |v: Value| Message::Text(v.to_string().into());
    ws.send(send(
        json!({"type": "subscribe", "sessionId": session, "afterSeq": 1}),
    ))
    .await
    .unwrap();
    // The log after seq 1, in order, as persisted frames.
    for want in 2..=5 {
        let m = ws_next(&mut ws).await;
        assert_eq!(
            (m["type"].as_str(), m["phantom"].as_bool()),
            (Some("frame"), Some(false)),
            "{m}"
        );
        assert_eq!(m["frame"]["seq"], want);
    }
    // Then live: the next turn's user frame, its reply as a phantom, the stored reply. Each
    // once: the mirror of every session does not repeat a subscribed one.
    h.stream(session, "three").await; // frames 6, 7
    let mut frames = Vec::new();
    loop {
        let m = ws_next(&mut ws).await;
        if m["type"] == "frame" {
            frames.push((
                m["frame"]["seq"].as_i64().unwrap(),
                m["phantom"].as_bool().unwrap(),
            ));
            if frames.last() == Some(&(7, false)) {
                break;
            }
        }
    }
    assert_eq!(
        frames,
        vec![(6, false), (6, true), (7, false)],
        "user frame, phantom reply after it, stored reply"
    );

    // Another user's session, or one that does not exist, is refused in words.
    ws.send(send(json!({"type": "subscribe", "sessionId": 999_999})))
        .await
        .unwrap();
    let m = loop {
        // The last turn's `message_end` may come first.
        let m = ws_next(&mut ws).await;
        if m["type"] != "message_end" {
            break m;
        }
    };
    assert_eq!(m["type"], "error", "{m}");
    assert!(m["error"].as_str().unwrap().contains("not found"), "{m}");

    // Unsubscribed, the session's frames come through the mirror again, once each.
    ws.send(send(json!({"type": "unsubscribe", "sessionId": session})))
        .await
        .unwrap();
    h.stream(session, "four").await; // frames 8, 9
    let mut frames = Vec::new();
    loop {
        let m = ws_next(&mut ws).await;
        if m["type"] == "frame" && m["phantom"] == false {
            frames.push(m["frame"]["seq"].as_i64().unwrap());
            if frames.last() == Some(&9) {
                break;
            }
        }
    }
    assert_eq!(frames, vec![8, 9]);
}

#[tokio::test]
async fn a_tab_opened_mid_reply_gets_the_reply_so_far_at_once() {
    let mock = mock_llm::spawn(
        Config::default()
            .answers(vec![Answer::text(
                "one two three four five six seven eight nine ten",
            )])
            .chunk_bytes(4)
            .delay(Duration::from_millis(30)),
    )
    .await
    .unwrap();
    let h = hero(&[mock.addr()]).await;
    let (session, _) = h.session_with("anthropic", &mock, KEY).await;
    let resp =
        h.c.post(h.url(&format!("/api/sessions/{session}/messages/stream")))
            .json(&json!({"content": "count"}))
            .send()
            .await
            .unwrap();
    let mut poster = sse(resp.bytes_stream());
    let mut texts = 0;
    while texts < 3 {
        let ev = poster.next().await.unwrap().unwrap();
        texts += usize::from(ev.event == "text");
    }
    // A new tab, caught up with the log (the user's message is frame 2, after the startup
    // process).
    let resp =
        h.c.get(h.url(&format!("/api/sessions/{session}/events?after=2")))
            .send()
            .await
            .unwrap();
    let mut tab = sse(resp.bytes_stream());
    let first = tokio::time::timeout(Duration::from_secs(10), tab.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let phantom: Value = serde_json::from_str(&first.data).unwrap();
    assert_eq!(
        (first.event.as_str(), phantom["phantom"].as_bool()),
        ("frame", Some(true)),
        "{first:?}"
    );
    let so_far = phantom["payload"]["content"].as_str().unwrap().to_owned();
    assert!(so_far.len() >= 12, "the reply so far: {so_far:?}");
    // Then the rest, chunk by chunk, with nothing the phantom held sent again.
    let mut text = so_far;
    let stored = loop {
        let ev = tokio::time::timeout(Duration::from_secs(10), tab.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let v: Value = serde_json::from_str(&ev.data).unwrap();
        match ev.event.as_str() {
            "message_chunk" => text.push_str(v["content"].as_str().unwrap()),
            "frame" => break v,
            _ => {}
        }
    };
    assert_eq!(text, "one two three four five six seven eight nine ten");
    assert_eq!(stored["payload"]["content"], text.as_str());
    assert_eq!(
        stored["id"], phantom["id"],
        "the stored frame replaces the phantom"
    );
}

#[tokio::test]
async fn the_frame_list_starts_at_the_last_compact_unless_asked_for_all() {
    use hero_backend::conversation::frames;
    use hero_shared::frame::{AuthorType, FrameType};
    let mock = mock_llm::spawn(Config::default().answers(vec![Answer::text("an answer")]))
        .await
        .unwrap();
    let h = hero(&[mock.addr()]).await;
    let (session, _) = h.session_with("anthropic", &mock, KEY).await;
    h.stream(session, "first").await; // frames 1 (the startup process), 2, 3
    h.stream(session, "second").await; // frames 4, 5
    let dk = h.st.keys.clone();
    let (user_id, wrapped) = alice_key(&h).await;
    let dk = dk.unwrap_data_key(user_id, &wrapped).unwrap();
    let mut compact = frames::NewFrame::message(
        session,
        AuthorType::Agent,
        None,
        json!({"role": "system", "content": "Summary: two questions, two answers."}),
    );
    compact.frame_type = FrameType::Compact;
    frames::append(&h.st, &dk, compact).await.unwrap(); // frame 6
    h.stream(session, "third").await; // frames 7, 8

    let seqs = |page: &Value| -> Vec<i64> {
        page["frames"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["seq"].as_i64().unwrap())
            .collect()
    };
    let get = |q: &'static str| {
        let path = format!("/api/sessions/{session}/frames{q}");
        let h = &h;
        async move { h.json(reqwest::Method::GET, &path, None).await }
    };
    let (s, page) = get("").await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(seqs(&page), vec![6, 7, 8], "from the compact on");
    assert_eq!(page["last_seq"], 8);
    assert_eq!(seqs(&get("?all=true").await.1), (1..=8).collect::<Vec<_>>());
    assert_eq!(seqs(&get("?after=2").await.1), (3..=8).collect::<Vec<_>>());
    assert_eq!(seqs(&get("?type=compact&all=true").await.1), vec![6]);
    // And the agent was sent the summary and what follows it, nothing before.
    let requests = mock.requests();
    let text = requests.last().unwrap()["body"]["messages"].to_string();
    assert!(
        text.contains("Summary: two questions") && !text.contains("first"),
        "{text}"
    );
}

/// A reply paced to outlast the turn's deadline ends at the deadline, keeping what came.
#[tokio::test]
async fn a_reply_ends_at_the_turn_deadline_with_what_arrived() {
    let mock = mock_llm::spawn(Config::default()).await.unwrap();
    let h = hero_with(&[mock.addr()], |s| {
        s.call_options.turn_deadline = Duration::from_secs(1)
    })
    .await;
    let (session, _) = h.session_with("anthropic", &mock, KEY).await;
    let slow = format!(
        "[[mock chunk=4 delay_ms=100 text={:?}]]",
        "word ".repeat(200)
    );
    let events = h.stream(session, &slow).await;
    let err = last_data(&events, "error")["error"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(err, "the reply took longer than 1 seconds and was ended");
    assert_eq!(names(&events).last(), Some(&"message_complete"));
    let done = last_data(&events, "message_complete");
    let kept = done["content"].as_str().unwrap_or_default().to_owned();
    assert!(
        kept.starts_with("word word"),
        "what arrived is kept: {done}"
    );
    assert!(kept.len() < 1000, "{}", kept.len());
}

/// Thinking past its cap ends the reply with a message of its own.
#[tokio::test]
async fn thinking_past_its_cap_ends_the_reply() {
    let mock = mock_llm::spawn(Config::default().answers(vec![Answer {
        text: "never reached".into(),
        thinking: Some("t".repeat(hero_backend::conversation::turn::MAX_THINKING_BYTES + 1)),
        chunk_bytes: Some(64 * 1024),
        ..Answer::default()
    }]))
    .await
    .unwrap();
    let h = hero(&[mock.addr()]).await;
    let (session, _) = h.session_with("anthropic", &mock, KEY).await;
    let events = h.stream(session, "think hard").await;
    let err = last_data(&events, "error")["error"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        err,
        "the model's thinking grew past 1 MiB and the reply was ended"
    );
    assert_eq!(names(&events).last(), Some(&"message_complete"));
}

/// Each per-user limit answers 429 in words, and what it refuses leaves nothing behind.
#[tokio::test]
async fn per_user_limits_refuse_clearly_and_store_nothing() {
    let mock = mock_llm::spawn(Config::default().answers(vec![Answer::text("ok")]))
        .await
        .unwrap();
    let h = hero_with(&[mock.addr()], |s| {
        s.limits.frames_per_session = 5;
        s.limits.sessions_per_user = 3;
        s.limits.turns_per_user = 1;
    })
    .await;
    // Frames: the startup process and two exchanges fill the session; the third message is
    // refused and not stored.
    let (session, _) = h.session_with("anthropic", &mock, KEY).await;
    let path = format!("/api/sessions/{session}/messages");
    let batch = |content: &str| {
        h.json(
            reqwest::Method::POST,
            &path,
            Some(json!({"content": content})),
        )
    };
    for m in ["one", "two"] {
        assert_eq!(batch(m).await.0, StatusCode::OK);
    }
    let (status, body) = batch("three").await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("this session holds 5 frames"),
        "{body}"
    );
    let (_, frames) = h
        .json(
            reqwest::Method::GET,
            &format!("/api/sessions/{session}/frames"),
            None,
        )
        .await;
    assert_eq!(frames["frames"].as_array().unwrap().len(), 5);
    assert_eq!(frames["last_seq"], 5);
    // Nor does switching streaming, whose note is a frame too.
    assert_eq!(batch("/stream off").await.0, StatusCode::TOO_MANY_REQUESTS);

    // Replies in flight: a second one while the first streams is refused.
    let (other, _) = h.session_with("anthropic", &mock, KEY).await;
    let slow = h
        .c
        .post(h.url(&format!("/api/sessions/{other}/messages/stream")))
        .json(&json!({"content": "[[mock chunk=2 delay_ms=50 text=\"a slow and steady reply\"]]"}))
        .send()
        .await
        .unwrap();
    assert_eq!(slow.status(), StatusCode::OK);
    let mut slow = slow.bytes_stream();
    let _first = slow.next().await;
    let (status, body) = h
        .json(
            reqwest::Method::POST,
            &format!("/api/sessions/{other}/messages"),
            Some(json!({"content": "me too"})),
        )
        .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("limit of replies in flight (1 at once)"),
        "{body}"
    );
    while slow.next().await.is_some() {}
    // The first ended: its place is free again.
    assert_eq!(
        h.json(
            reqwest::Method::POST,
            &format!("/api/sessions/{other}/messages"),
            Some(json!({"content": "now"})),
        )
        .await
        .0,
        StatusCode::OK
    );

    // Sessions: the third exists; a fourth is refused.
    let (status, body) = h
        .json(
            reqwest::Method::POST,
            "/api/sessions",
            Some(json!({"name": "x"})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, body) = h
        .json(
            reqwest::Method::POST,
            "/api/sessions",
            Some(json!({"name": "y"})),
        )
        .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("3 sessions"),
        "{body}"
    );
}

/// A provider that answers a streaming request with the whole message as one JSON body (a
/// compatible proxy's way) is read as that message, in both wire formats.
#[tokio::test]
async fn a_whole_json_answer_to_a_streaming_request_is_read_as_the_message() {
    let mock = mock_llm::spawn(Config::default()).await.unwrap();
    let h = hero(&[mock.addr()]).await;
    for provider in ["anthropic", "openai"] {
        let (session, _) = h.session_with(provider, &mock, KEY).await;
        let events = h
            .stream(
                session,
                "[[mock whole thinking=\"first this\" text=\"The **whole** answer.\"]]",
            )
            .await;
        assert!(
            events.iter().all(|(n, _)| n != "error"),
            "{provider}: {events:?}"
        );
        let done = last_data(&events, "message_complete");
        assert_eq!(done["content"], "The **whole** answer.", "{provider}");
        let (_, frames) = h
            .json(
                reqwest::Method::GET,
                &format!("/api/sessions/{session}/frames"),
                None,
            )
            .await;
        let reply = &frames["frames"][2]["payload"];
        assert_eq!(reply["content"], "The **whole** answer.", "{provider}");
        assert!(
            reply["usage"]["output_tokens"].as_u64().unwrap() > 0,
            "{reply}"
        );
    }
    // The requests were streaming ones: the mock answered them whole, as told.
    assert!(
        mock.requests().iter().all(|r| r["body"]["stream"] == true),
        "{:?}",
        mock.requests()
    );
}

/// Tool-call arguments past their cap end the reply with a message of their own.
#[tokio::test]
async fn tool_arguments_past_their_cap_end_the_reply() {
    let big = "a".repeat(hero_backend::conversation::turn::MAX_TOOL_INPUT_BYTES + 1);
    let mock = mock_llm::spawn(Config::default().answers(vec![Answer {
        text: "calling".into(),
        tool_calls: vec![mock_llm::ToolCall {
            name: "f".into(),
            input: json!({"blob": big}),
        }],
        chunk_bytes: Some(64 * 1024),
        ..Answer::default()
    }]))
    .await
    .unwrap();
    let h = hero(&[mock.addr()]).await;
    for provider in ["anthropic", "openai"] {
        let (session, _) = h.session_with(provider, &mock, KEY).await;
        let events = h.stream(session, "use the tool").await;
        let err = last_data(&events, "error")["error"]
            .as_str()
            .unwrap()
            .to_owned();
        assert_eq!(
            err, "the model's tool-call arguments grew past 1 MiB and the reply was ended",
            "{provider}"
        );
        assert_eq!(names(&events).last(), Some(&"message_complete"));
    }
}

/// One user's WebSocket subscribing to many sessions at once, each with a long log to
/// replay, and then reading nothing, stalls nobody else: another user's sessions list and
/// streamed reply answer as they did before (a stall waits out the pool's 30 s), and once
/// the socket closes nothing of it stays held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_users_subscriptions_stall_no_other_user() {
    use hero_backend::conversation::frames::{self, NewFrame};
    use hero_shared::frame::AuthorType;
    use tokio_tungstenite::tungstenite::Message;
    let h = hero(&[]).await;
    let alice = hero_backend::accounts::auth::login(&h.st, "alice", "alice-password")
        .await
        .unwrap()
        .user;
    let mut sessions = Vec::new();
    // Half of them with 500 frames each to replay, half with one.
    for i in 0..64 {
        let frames_each = if i < 32 { 500 } else { 1 };
        let s = hero_backend::conversation::sessions::create(
            &h.st,
            &alice,
            hero_shared::api::CreateSessionRequest {
                name: format!("s{i}"),
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .id;
        let dk = frames::session_key(&h.st, &alice, s).await.unwrap();
        for j in 0..frames_each {
            let f = NewFrame::message(
                s,
                AuthorType::User,
                Some(alice.id()),
                json!({"role": "user", "content": format!("message {j} {}", "x".repeat(200))}),
            );
            frames::append(&h.st, &dk, f).await.unwrap();
        }
        sessions.push(s);
    }

    // Bob, with a client of his own, and what his requests take before alice's socket.
    let bob = bob_client(&h).await;
    let r = bob
        .post(h.url("/api/sessions"))
        .json(&json!({"name": "bob's"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let bob_session = r.json::<Value>().await.unwrap()["id"].as_i64().unwrap();
    let bobs_requests = || async {
        let started = std::time::Instant::now();
        let r = bob.get(h.url("/api/sessions")).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{}", r.text().await.unwrap());
        let listed = started.elapsed();
        let started = std::time::Instant::now();
        let r = bob
            .post(h.url(&format!("/api/sessions/{bob_session}/messages/stream")))
            .json(&json!({"content": "hello"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{}", r.text().await.unwrap());
        let body = r.text().await.unwrap();
        assert!(body.contains("message_complete"), "{body}");
        assert!(!body.contains("event: error"), "{body}");
        (listed, started.elapsed())
    };
    let before = bobs_requests().await;

    // Alice subscribes to all 64 at once and reads nothing.
    let (_, mut ws) = h.ws().await;
    for s in &sessions {
        let m = json!({"type": "subscribe", "sessionId": s, "afterSeq": 0}).to_string();
        ws.send(Message::Text(m.into())).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    // A stalled pool answers after its 30 s acquire timeout, with 500: bounded well below.
    let during = tokio::time::timeout(Duration::from_secs(10), bobs_requests())
        .await
        .expect("bob's requests were stalled by alice's socket");
    println!("bob's list and reply: before {before:?}, during alice's replays {during:?}");

    // Alice's socket still works: a 65th subscription is refused in words.
    let (_, more) = h
        .json(
            reqwest::Method::POST,
            "/api/sessions",
            Some(json!({"name": "65th"})),
        )
        .await;
    let m = json!({"type": "subscribe", "sessionId": more["id"], "afterSeq": 0}).to_string();
    ws.send(Message::Text(m.into())).await.unwrap();
    let mut refused = false;
    for _ in 0..64 * 600 {
        let v = ws_next(&mut ws).await;
        if v["type"] == "error" {
            assert!(
                v["error"].as_str().unwrap().contains("at most 64 sessions"),
                "{v}"
            );
            refused = true;
            break;
        }
    }
    assert!(refused, "the 65th subscription was not refused");

    // Closed, nothing of it stays held: every pool connection comes back, no stream is
    // counted, no channel kept.
    drop(ws);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (open, idle) = h.st.db.pool_use();
        let held = h.st.hub.streams_held(alice.id());
        let listened = sessions
            .iter()
            .filter(|&&s| h.st.hub.has_listeners(0, s))
            .count();
        if idle == open as usize && held == 0 && listened == 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still held after the socket closed: {} of {} connections idle, {held} streams, {listened} channels",
            idle,
            open
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn the_chat_page_carries_every_hook_the_client_finds_it_by() {
    let mock = mock_llm::spawn(Config::default().api_key(Some(KEY.into())))
        .await
        .unwrap();
    let h = hero(&[mock.addr()]).await;
    let (session, _) = h.session_with("anthropic", &mock, KEY).await;
    let page = h.page(&format!("/s/{session}")).await;
    let missing: Vec<String> = hero_shared::hooks::CHAT_PAGE
        .iter()
        .filter(|hook| !hook.is_in(&page))
        .map(|hook| hook.selector())
        .collect();
    assert!(
        missing.is_empty(),
        "the chat page lacks {missing:?}: {page}"
    );
    // The check itself tells a hook that is there from one that is not.
    assert!(!hero_shared::hooks::Hook::Class("no-such-part").is_in(&page));
    assert!(!hero_shared::hooks::Hook::Attr("data-no-such-part").is_in(&page));
}

/// `/metrics` from the metrics address's router, read as a scraper reads it.
async fn scrape(h: &Hero) -> Vec<Metric> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = server::ops::metrics_router(h.st.clone());
    let served = tokio::spawn(async move { axum::serve(listener, router).await });
    let r = reqwest::get(format!("http://{addr}/metrics"))
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let content_type = r.headers()["content-type"].to_str().unwrap().to_owned();
    assert!(
        content_type.starts_with("application/openmetrics-text"),
        "{content_type}"
    );
    let text = r.text().await.unwrap();
    served.abort();
    metric_samples(&text)
}

#[tokio::test]
async fn a_turn_is_counted_in_the_metrics() {
    let mock = mock_llm::spawn(
        Config::default()
            .answers(vec![Answer::text("Counted.")])
            .api_key(Some(KEY.into())),
    )
    .await
    .unwrap();
    let h = hero(&[mock.addr()]).await;
    let (session, _) = h.session_with("anthropic", &mock, KEY).await;
    let events = h.stream(session, "Count this").await;
    assert!(names(&events).contains(&"message_complete"));
    // A tab's event stream, open while the metrics are read; a file of the site.
    let feed =
        h.c.get(h.url(&format!("/api/sessions/{session}/events")))
            .send()
            .await
            .unwrap();
    assert_eq!(feed.status(), StatusCode::OK);
    let file = h.c.get(h.url("/pkg/hero.css")).send().await.unwrap();
    let samples = scrape(&h).await;
    assert_eq!(
        metric(&samples, "hero_live_streams", &[]),
        Some(1.0),
        "{samples:?}"
    );
    let site = [("route", "/pkg/{*file}"), ("method", "GET")];
    assert_eq!(
        metric(&samples, "hero_http_requests", &site),
        Some(1.0),
        "{file:?}"
    );
    drop(feed);
    let anthropic = [("provider", "anthropic")];
    assert_eq!(
        metric(&samples, "hero_provider_first_token_seconds", &anthropic),
        Some(1.0),
        "{samples:?}"
    );
    assert_eq!(
        metric(&samples, "hero_provider_reply_seconds", &anthropic),
        Some(1.0)
    );
    let output = [("provider", "anthropic"), ("kind", "output")];
    assert!(metric(&samples, "hero_tokens", &output).is_some_and(|n| n > 0.0));
    let input = [("provider", "anthropic"), ("kind", "input")];
    assert!(metric(&samples, "hero_tokens", &input).is_some_and(|n| n > 0.0));
    let posted = [
        ("route", "/api/sessions/{id}/messages/stream"),
        ("method", "POST"),
        ("status", "200"),
    ];
    assert_eq!(
        metric(&samples, "hero_http_requests", &posted),
        Some(1.0),
        "{samples:?}"
    );
    assert_eq!(metric(&samples, "hero_turns_in_flight", &[]), Some(0.0));
    assert!(metric(&samples, "hero_db_pool_connections", &[("state", "idle")]).is_some());
}

#[tokio::test]
async fn readiness_says_what_is_wrong_with_the_database() {
    let h = hero(&[]).await;
    let r = h.c.get(h.url("/readyz")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let r = h.c.get(h.url("/healthz")).send().await.unwrap();
    assert_eq!(
        (r.status(), r.text().await.unwrap()),
        (StatusCode::OK, "ok\n".into())
    );
    // A migration this build knows, missing from the database.
    testing::execute(
        &h.st.db,
        "DELETE FROM _sqlx_migrations WHERE version = (SELECT MAX(version) FROM _sqlx_migrations)",
        &[],
    )
    .await
    .unwrap();
    let r = h.c.get(h.url("/readyz")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    let why = r.text().await.unwrap();
    assert!(
        why.contains("1 of the database's migrations are not applied"),
        "{why}"
    );
    // The database gone: still an answer, and it says so.
    h.st.db.close().await;
    let r = h.c.get(h.url("/readyz")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    let why = r.text().await.unwrap();
    assert!(why.contains("the database does not answer"), "{why}");
    // The process itself is up.
    let r = h.c.get(h.url("/healthz")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
}

#[tokio::test]
async fn a_server_shutting_down_is_not_ready() {
    let h = hero(&[]).await;
    let r = h.c.get(h.url("/readyz")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    h.st.shutdown();
    let r = h.c.get(h.url("/readyz")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(r.text().await.unwrap().contains("shutting down"));
}

/// Alice's id and wrapped data key, as stored.
async fn alice_key(h: &support::Hero) -> (i64, Vec<u8>) {
    let name = [testing::Arg::Text("alice".into())];
    let id = testing::int(&h.st.db, "SELECT id FROM users WHERE username = $1", &name)
        .await
        .unwrap();
    let key = testing::bytes(
        &h.st.db,
        "SELECT data_key FROM users WHERE username = $1",
        &name,
    )
    .await
    .unwrap();
    (id, key)
}
