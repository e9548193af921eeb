//! An agent's memory (reference 002 §1, §14–§15) over the API, on loopback: files of both
//! scopes written, read, listed and searched (the user's copy hides the agent's and
//! outranks an equal match), the bounds answered with a 4xx and nothing stored, another
//! user's agent a missing one, the text sealed; the agent's `memory_write`, `memory_search`
//! and `memory_get`; and the vectors made once per chunk, with BM25 alone when the
//! endpoint fails.

mod support;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use support::*;

async fn put(h: &Hero, agent: i64, path: &str, body: Value) -> (StatusCode, Value) {
    h.json(
        Method::PUT,
        &format!("/api/agents/{agent}/memory/files/{path}"),
        Some(body),
    )
    .await
}

async fn search(h: &Hero, agent: i64, query: &str) -> (StatusCode, Value) {
    h.json(
        Method::POST,
        &format!("/api/agents/{agent}/memory/search"),
        Some(json!({ "query": query })),
    )
    .await
}

fn paths(found: &Value) -> Vec<(String, String)> {
    found["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["path"].as_str().unwrap().to_owned(),
                r["scope"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn memory_files_are_kept_by_scope_searched_bounded_and_sealed() {
    let mock = mock_llm::spawn(mock_llm::Config::default()).await.unwrap();
    let h = hero_with(&[mock.addr()], |s| s.max_memory_bytes = 1 << 20).await;
    let (_, agent) = h.session_with("anthropic", &mock, KEY).await;
    let marker = "OKAPI-MARKER-5521";

    // The agent's own MEMORY.md (its owner writes it), and a note of the user's.
    let (s, w) = put(
        &h,
        agent,
        "MEMORY.md",
        json!({"content": format!("# Memory\n\nThe user drinks green tea. {marker}\n"), "scope": "agent"}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{w}");
    assert_eq!(
        (w["path"].as_str(), w["scope"].as_str()),
        (Some("MEMORY.md"), Some("agent"))
    );
    let (s, w) = put(
        &h,
        agent,
        "memory/2026-11-24.md",
        json!({"content": "- Talked about the garden.\n- The user drinks green tea.\n"}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{w}");
    assert_eq!(w["scope"], "user");
    let (s, list) = h
        .json(
            Method::GET,
            &format!("/api/agents/{agent}/memory/files"),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{list}");
    let listed: Vec<(&str, &str)> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["path"].as_str().unwrap(), f["scope"].as_str().unwrap()))
        .collect();
    assert_eq!(
        listed,
        [("MEMORY.md", "agent"), ("memory/2026-11-24.md", "user")]
    );
    assert!(list[0]["size"].as_u64().unwrap() > 20 && list[0]["updated_at"].is_string());

    // Read back; a scope that has no such file is a missing one.
    let (s, file) = h
        .json(
            Method::GET,
            &format!("/api/agents/{agent}/memory/files/memory/2026-11-24.md"),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{file}");
    assert_eq!(
        file["content"],
        "- Talked about the garden.\n- The user drinks green tea.\n"
    );
    let (s, _) = h
        .json(
            Method::GET,
            &format!("/api/agents/{agent}/memory/files/memory/2026-11-24.md?scope=agent"),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::NOT_FOUND);

    // The search: the user's chunk outranks the agent's on an equal match (× 1.2); with
    // paths, lines and text.
    let (s, found) = search(&h, agent, "green tea").await;
    assert_eq!(s, StatusCode::OK, "{found}");
    assert_eq!(found["mode"], "bm25");
    assert_eq!(
        paths(&found),
        [
            ("memory/2026-11-24.md".to_owned(), "user".to_owned()),
            ("MEMORY.md".to_owned(), "agent".to_owned())
        ]
    );
    let top = &found["results"][0];
    assert_eq!(
        (top["start_line"].as_u64(), top["end_line"].as_u64()),
        (Some(1), Some(2))
    );
    assert!(top["text"].as_str().unwrap().contains("green tea"));
    // A write is seen by the next search; the user's copy of a path hides the agent's.
    put(
        &h,
        agent,
        "memory/projects/hero.md",
        json!({"content": "Hero is written in Rust.", "scope": "agent"}),
    )
    .await;
    let (_, found) = search(&h, agent, "rust").await;
    assert_eq!(
        paths(&found),
        [("memory/projects/hero.md".to_owned(), "agent".to_owned())]
    );
    put(
        &h,
        agent,
        "memory/projects/hero.md",
        json!({"content": "Hero is mine now."}),
    )
    .await;
    let (_, found) = search(&h, agent, "rust").await;
    assert!(paths(&found).is_empty(), "{found}");
    let (_, found) = search(&h, agent, "hero").await;
    assert_eq!(
        paths(&found),
        [("memory/projects/hero.md".to_owned(), "user".to_owned())]
    );
    // Emptied: deleted.
    let (s, w) = put(&h, agent, "memory/projects/hero.md", json!({"content": ""})).await;
    assert_eq!((s, w["size"].as_u64()), (StatusCode::OK, Some(0)));
    let (_, found) = search(&h, agent, "hero").await;
    assert_eq!(
        paths(&found),
        [("memory/projects/hero.md".to_owned(), "agent".to_owned())]
    );

    // Refused, saying why, and nothing stored.
    for (path, why) in [
        ("MEMORY.json", "deprecated; write MEMORY.md"),
        ("memory/notes.txt", "end in .md"),
        ("memory/a%20b.md", "letters, digits"),
        ("memory/node_modules/x.md", "never memory"),
        ("notes.md", "no memory file"),
    ] {
        let (s, body) = put(&h, agent, path, json!({"content": "x"})).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{path}: {body}");
        assert!(
            body["error"].as_str().unwrap().contains(why),
            "{path}: {body}"
        );
    }
    let (s, body) = put(
        &h,
        agent,
        "memory/big.md",
        json!({"content": "a".repeat((256 << 10) + 1)}),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("at most 256 KiB"),
        "{body}"
    );
    let (s, body) = put(
        &h,
        agent,
        "memory/a.md",
        json!({"content": "x", "scope": "team"}),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
    let (s, body) = search(&h, agent, &"q".repeat(1_001)).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
    // The user's total (1 MiB here): the write past it is 429, and not stored.
    for i in 0..4 {
        let (s, body) = put(
            &h,
            agent,
            &format!("memory/fill-{i}.md"),
            json!({"content": "b".repeat(250 << 10)}),
        )
        .await;
        assert_eq!(s, StatusCode::OK, "{body}");
    }
    let (s, body) = put(
        &h,
        agent,
        "memory/fill-4.md",
        json!({"content": "b".repeat(250 << 10)}),
    )
    .await;
    assert_eq!(s, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert!(body["error"].as_str().unwrap().contains("1 MiB"), "{body}");
    let (s, _) = h
        .json(
            Method::GET,
            &format!("/api/agents/{agent}/memory/files/memory/fill-4.md"),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::NOT_FOUND);

    // Another user's agent is a missing one, whatever is asked.
    let bob = bob_client(&h).await;
    for (method, path, body) in [
        (
            Method::GET,
            format!("/api/agents/{agent}/memory/files"),
            None,
        ),
        (
            Method::GET,
            format!("/api/agents/{agent}/memory/files/MEMORY.md"),
            None,
        ),
        (
            Method::PUT,
            format!("/api/agents/{agent}/memory/files/MEMORY.md"),
            Some(json!({"content": "mine"})),
        ),
        (
            Method::POST,
            format!("/api/agents/{agent}/memory/search"),
            Some(json!({"query": "tea"})),
        ),
    ] {
        let mut req = bob.request(method.clone(), h.url(&path));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let r = req.send().await.unwrap();
        assert_eq!(r.status(), StatusCode::NOT_FOUND, "{method} {path}");
        assert!(!r.text().await.unwrap().contains("green tea"));
    }

    // Sealed: the marker is nowhere in the database's files.
    if std::env::var("HERO_TEST_BACKEND").as_deref() != Ok("postgres") {
        for file in ["hero.db", "hero.db-wal"] {
            let bytes = std::fs::read(h._dir.path().join(file)).unwrap_or_default();
            assert!(
                !bytes.windows(marker.len()).any(|w| w == marker.as_bytes()),
                "{file} holds a memory file's text"
            );
        }
    }

    // A deleted agent's memory goes with it, and no longer counts against the total.
    let (s, _) = h
        .json(Method::DELETE, &format!("/api/agents/{agent}"), None)
        .await;
    assert!(s.is_success(), "{s}");
    let (_, other) = h.session_with("anthropic", &mock, KEY).await;
    let (s, body) = put(
        &h,
        other,
        "memory/fill-4.md",
        json!({"content": "b".repeat(250 << 10)}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{body}");
}

/// The agent keeps a note with `memory_write`, finds it with `memory_search` and reads its
/// lines with `memory_get`; its prompt tells it to.
#[tokio::test]
async fn the_agent_writes_searches_and_reads_its_memory() {
    let mock = mock_llm::spawn(mock_llm::Config::default()).await.unwrap();
    let h = hero(&[mock.addr()]).await;
    let (session, agent) = h.session_with("anthropic", &mock, KEY).await;
    let (_, prompt) = h
        .json(
            Method::GET,
            &format!("/api/sessions/{session}/system-prompt"),
            None,
        )
        .await;
    let prompt = prompt["prompt"].as_str().unwrap();
    assert!(prompt.contains("## Memory recall"), "{prompt}");
    assert!(!prompt.contains("NOT available here: memory"), "{prompt}");

    h.stream(
        session,
        r#"[[mock tool=memory_write input={"path": "memory/2026-11-24.md", "content": "- The user chose PostgreSQL for the project."} then="Noted."]]"#,
    )
    .await;
    let frames = frames_when(&h, session, |f| agent_messages(f).len() == 2).await;
    let result = of_type(&frames, "result").last().copied().unwrap();
    assert_eq!(
        result["payload"]["output"],
        "Saved to memory: memory/2026-11-24.md (44 bytes)."
    );
    h.stream(
        session,
        r#"[[mock tool=memory_write input={"path": "memory/2026-11-24.md", "content": "- Its name is Hero.", "append": true} then="Noted."]]"#,
    )
    .await;
    frames_when(&h, session, |f| agent_messages(f).len() == 4).await;
    // The user's scope, as the API sees it.
    let (s, file) = h
        .json(
            Method::GET,
            &format!("/api/agents/{agent}/memory/files/memory/2026-11-24.md?scope=user"),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{file}");
    assert_eq!(
        file["content"],
        "- The user chose PostgreSQL for the project.\n- Its name is Hero."
    );

    h.stream(
        session,
        r#"[[mock tool=memory_search input={"query": "postgresql"} then="Found."]]"#,
    )
    .await;
    let frames = frames_when(&h, session, |f| agent_messages(f).len() == 6).await;
    let result = of_type(&frames, "result").last().copied().unwrap();
    let output = result["payload"]["output"].as_str().unwrap();
    assert!(
        output.starts_with(
            "memory/2026-11-24.md:1-2 (your memory, score 1.20)\n- The user chose PostgreSQL"
        ),
        "{output}"
    );
    h.stream(
        session,
        r#"[[mock tool=memory_get input={"path": "memory/2026-11-24.md", "from_line": 2, "lines": 5} then="Read."]]"#,
    )
    .await;
    let frames = frames_when(&h, session, |f| agent_messages(f).len() == 8).await;
    let result = of_type(&frames, "result").last().copied().unwrap();
    assert_eq!(
        result["payload"]["output"],
        "memory/2026-11-24.md, lines 2-2 of 2:\n- Its name is Hero."
    );
    // Read whole, a long file is cut as every function's output is.
    let long: String = (0..300)
        .map(|i| format!("{i:04} {}\n", "x".repeat(94)))
        .collect();
    let (s, body) = h
        .json(
            Method::PUT,
            &format!("/api/agents/{agent}/memory/files/memory/long.md"),
            Some(json!({ "content": long })),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    h.stream(
        session,
        r#"[[mock tool=memory_get input={"path": "memory/long.md"} then="Read."]]"#,
    )
    .await;
    let frames = frames_when(&h, session, |f| agent_messages(f).len() == 10).await;
    let result = of_type(&frames, "result").last().copied().unwrap();
    let output = result["payload"]["output"].as_str().unwrap();
    assert!(
        output.ends_with("[… cut: the output was longer]"),
        "{}",
        &output[output.len() - 100..]
    );
    assert!(output.chars().count() <= 16_000 + 40);
    // Lines past any bound are refused by the schema, not a panic.
    h.stream(
        session,
        r#"[[mock tool=memory_get input={"path": "memory/long.md", "lines": 18446744073709551615} then="Refused."]]"#,
    )
    .await;
    let frames = frames_when(&h, session, |f| agent_messages(f).len() == 12).await;
    let result = of_type(&frames, "result").last().copied().unwrap();
    assert!(result.to_string().contains("100000"), "{result}");
    // A path it may not write is refused with the reason.
    h.stream(
        session,
        r#"[[mock tool=memory_write input={"path": "../etc/passwd.md", "content": "x"} then="Refused."]]"#,
    )
    .await;
    let frames = frames_when(&h, session, |f| agent_messages(f).len() == 14).await;
    let last = frames
        .iter()
        .rev()
        .find(|f| f["payload"]["error"].is_string() || f["payload"]["output"].is_string())
        .unwrap();
    assert!(last.to_string().contains("no memory file"), "{last}");
}

/// Vectors (reference 002 §14): a file's chunks are embedded when it is written, the same
/// content written again makes no call, one changed paragraph calls for its chunk alone;
/// a chunk is found by meaning; a failing endpoint leaves the search to BM25 with a note.
#[tokio::test]
async fn memory_chunks_are_embedded_once_and_found_by_meaning() {
    let mock = mock_llm::spawn(mock_llm::Config::default().embedding_dimensions(256))
        .await
        .unwrap();
    let url = format!("{}/v1", mock.url());
    let h = hero_with(&[mock.addr()], move |s| {
        s.embeddings = hero_backend::search::embed::Settings {
            model: Some("embed-mock".into()),
            url: Some(url),
            api_key: Some("sk-embed".into()),
        };
    })
    .await;
    let (_, agent) = h.session_with("anthropic", &mock, KEY).await;
    let embedded = || mock.stats()["embedded_inputs"].as_u64().unwrap();
    // Twenty paragraphs of about 600 characters: twenty chunks.
    let paragraph = |i: usize, topic: &str| {
        format!(
            "Paragraph {i} is about {topic}. {}",
            "filler words here ".repeat(32)
        )
    };
    let mut paragraphs: Vec<String> = (0..20).map(|i| paragraph(i, "the garden")).collect();
    paragraphs[7] = paragraph(7, "the deployment of the web application");
    let file = |ps: &[String]| ps.join("\n\n");
    let before = embedded();
    let (s, body) = put(
        &h,
        agent,
        "memory/notes.md",
        json!({"content": file(&paragraphs)}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    assert_eq!(embedded() - before, 20);
    // The same content again: no call.
    put(
        &h,
        agent,
        "memory/notes.md",
        json!({"content": file(&paragraphs)}),
    )
    .await;
    assert_eq!(embedded() - before, 20);
    // One paragraph changed: its chunk alone.
    paragraphs[3] = paragraph(3, "the invoices of November");
    put(
        &h,
        agent,
        "memory/notes.md",
        json!({"content": file(&paragraphs)}),
    )
    .await;
    let changed = embedded() - before - 20;
    assert!(
        (1..=2).contains(&changed),
        "{changed} texts embedded for one paragraph"
    );

    // Found by meaning: "release" shares no word with the paragraph on deployment.
    let calls = embedded();
    let (s, found) = search(&h, agent, "release").await;
    assert_eq!(s, StatusCode::OK, "{found}");
    assert_eq!(found["mode"], "hybrid");
    let top = &found["results"][0];
    assert!(
        top["text"].as_str().unwrap().starts_with("Paragraph 7 "),
        "{found}"
    );
    // The chunks' vectors were kept: the query alone was embedded.
    assert_eq!(embedded(), calls + 1);

    // The endpoint failing: BM25 alone, with a note.
    let (s, found) = search(&h, agent, "invoices [[mock fault=500]]").await;
    assert_eq!(s, StatusCode::OK, "{found}");
    assert_eq!(found["mode"], "bm25");
    assert!(
        found["note"].as_str().unwrap().contains("BM25 alone"),
        "{found}"
    );
    assert!(
        found["results"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("Paragraph 3 "),
        "{found}"
    );
}

/// Today's memory file, as a flush names it (UTC).
fn today_file() -> String {
    format!("memory/{}.md", time::OffsetDateTime::now_utc().date())
}

/// Every frame of the session, those before its last summary too.
async fn all_frames(h: &Hero, session: i64) -> Vec<Value> {
    let (s, page) = h
        .json(
            Method::GET,
            &format!("/api/sessions/{session}/frames?after=0"),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{page}");
    page["frames"].as_array().unwrap().clone()
}

/// [`all_frames`] once `done` holds for them.
async fn all_frames_when(h: &Hero, session: i64, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    for _ in 0..400 {
        let f = all_frames(h, session).await;
        if done(&f) {
            return f;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!(
        "frames never got there: {:#}",
        json!(all_frames(h, session).await)
    );
}

/// The flush notes among the frames (`memory_flush` in their payload).
fn flush_notes(frames: &[Value]) -> Vec<&Value> {
    frames
        .iter()
        .filter(|f| f["payload"].get("memory_flush").is_some())
        .collect()
}

/// The requests the mock was sent that asked for a memory flush.
fn flush_requests(mock: &mock_llm::MockServer) -> Vec<Value> {
    mock.requests()
        .into_iter()
        .filter(|r| {
            r["body"]["messages"]
                .to_string()
                .contains("Store durable memories now.")
        })
        .collect()
}

/// Reference 002 §16, driven by the mock's usage numbers (the test of compaction's token
/// trigger too): past the flush point (56,000 tokens with the defaults) the agent saves the
/// day's notes, offered the memory functions alone, its exchange private and hidden; a
/// second turn in the cycle does not flush; the summary (at 60,000) does not flush again;
/// the next cycle does.
#[tokio::test]
async fn a_long_conversation_is_flushed_to_memory_once_a_cycle_before_its_summary() {
    let mock = mock_llm::spawn(mock_llm::Config::default()).await.unwrap();
    let h = hero(&[mock.addr()]).await;
    let (session, agent) = h.session_with("anthropic", &mock, KEY).await;
    // The agent's context window: its own, checked, or the default back.
    let path = format!("/api/agents/{agent}");
    let (s, body) = h
        .json(Method::PATCH, &path, Some(json!({"context_window": 0})))
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
    let (s, body) = h
        .json(
            Method::PATCH,
            &path,
            Some(json!({"context_window": 200_000})),
        )
        .await;
    assert_eq!(
        (s, body["context_window"].as_u64()),
        (StatusCode::OK, Some(200_000))
    );
    let (_, body) = h
        .json(Method::PATCH, &path, Some(json!({"context_window": null})))
        .await;
    assert_eq!(body["context_window"], Value::Null);
    h.stream(
        session,
        r#"Plan the garden [[mock text="Noted." usage_input=56500 usage_output=10]]"#,
    )
    .await;
    let frames = all_frames_when(&h, session, |f| flush_notes(f).len() == 1).await;
    let note = flush_notes(&frames)[0];
    assert_eq!(
        note["payload"]["content"],
        format!("Saved to memory: {}", today_file())
    );
    assert_eq!(
        note["payload"]["memory_flush"]["files"],
        json!([today_file()])
    );
    assert_eq!(note["payload"]["private"], true);
    // The exchange: private and hidden, the call and its result in it.
    let exchange: Vec<&Value> = frames
        .iter()
        .filter(|f| f["payload"]["flush"] == true)
        .collect();
    assert_eq!(exchange.len(), 2, "{frames:#?}");
    assert!(
        exchange
            .iter()
            .all(|f| f["payload"]["private"] == true && f["payload"]["hidden"] == true)
    );
    assert!(
        exchange[0]["payload"]["content"]
            .as_str()
            .unwrap()
            .contains("Saved to memory")
    );
    let (s, file) = h
        .json(
            Method::GET,
            &format!("/api/agents/{agent}/memory/files/{}", today_file()),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{file}");
    assert_eq!(file["content"], "- Talked about: Plan the garden");
    // Only the memory functions were offered, and no summary was made (below 60,000).
    let asked = &flush_requests(&mock)[0];
    let mut tools: Vec<&str> = asked["body"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    tools.sort();
    assert_eq!(tools, ["memory_get", "memory_search", "memory_write"]);
    assert!(of_type(&frames, "compact").is_empty());

    // A second turn past the point, in the same cycle: no second flush. Then past the
    // summary's threshold: the summary, without flushing again.
    h.stream(
        session,
        r#"And the roses? [[mock text="Pruned." usage_input=57000 usage_output=10]]"#,
    )
    .await;
    h.stream(
        session,
        r#"And the beans? [[mock text="Sown." usage_input=61000 usage_output=10]]"#,
    )
    .await;
    let frames = all_frames_when(&h, session, |f| !of_type(f, "compact").is_empty()).await;
    assert_eq!(flush_notes(&frames).len(), 1);
    assert_eq!(
        flush_requests(&mock).len(),
        2,
        "the write, then its follow-up"
    );
    // The next cycle flushes again.
    h.stream(
        session,
        r#"Next year? [[mock text="Tulips." usage_input=56500 usage_output=10]]"#,
    )
    .await;
    all_frames_when(&h, session, |f| flush_notes(f).len() == 2).await;
    let (_, file) = h
        .json(
            Method::GET,
            &format!("/api/agents/{agent}/memory/files/{}", today_file()),
            None,
        )
        .await;
    // The second cycle began after the summary, with the next question.
    assert_eq!(
        file["content"],
        "- Talked about: Plan the garden\n- Talked about: Next year?"
    );
    // The flush's exchange is never sent to a later call.
    h.stream(session, r#"Anything else? [[mock text="No."]]"#)
        .await;
    let last = mock.requests().into_iter().last().unwrap();
    let sent = last["body"]["messages"].to_string();
    assert!(
        !sent.contains("Store durable memories") && !sent.contains("Saved to memory"),
        "{sent}"
    );
    // A restart between a flush and its summary does not flush again: the note is in the
    // log, not in memory.
    let before = flush_requests(&mock).len();
    let restarted = h.st.restarted();
    let user = hero_backend::accounts::auth::login(&restarted, "alice", "alice-password")
        .await
        .unwrap()
        .user;
    hero_backend::conversation::compact::compact(&restarted, &user, session, None)
        .await
        .unwrap();
    assert_eq!(
        flush_requests(&mock).len(),
        before,
        "flushed again after a restart"
    );
    let frames = all_frames(&h, session).await;
    assert_eq!(of_type(&frames, "compact").len(), 2);
    assert_eq!(flush_notes(&frames).len(), 2);
}

/// Two flushes of one session at once (a turn ending while one runs, a summary meanwhile):
/// one does the cycle's, the other waits and finds it done.
#[tokio::test]
async fn two_flushes_at_once_make_one() {
    let mock = mock_llm::spawn(mock_llm::Config::default()).await.unwrap();
    let h = hero(&[mock.addr()]).await;
    let (session, _) = h.session_with("anthropic", &mock, KEY).await;
    h.stream(session, r#"Plan the garden [[mock text="Noted."]]"#)
        .await;
    let user = hero_backend::accounts::auth::login(&h.st, "alice", "alice-password")
        .await
        .unwrap()
        .user;
    let flush = || hero_backend::conversation::flush::flush(&h.st, &user, session, None);
    let (a, b) = tokio::join!(flush(), flush());
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(a.files.len() + b.files.len(), 1, "{a:?} {b:?}");
    let frames = all_frames(&h, session).await;
    assert_eq!(flush_notes(&frames).len(), 1);
    assert_eq!(
        flush_requests(&mock).len(),
        2,
        "the write and its follow-up, once"
    );
}

/// `/compact` flushes first; a model that keeps calling stops at five calls, a slow one at
/// the timeout, and with `memory_write` at never no flush starts: each ends with its note,
/// and the summary is made all the same.
#[tokio::test]
async fn compact_flushes_first_and_a_flush_that_cannot_finish_leaves_a_note() {
    let mock = mock_llm::spawn(mock_llm::Config::default()).await.unwrap();
    let h = hero_with(&[mock.addr()], |s| {
        s.flush_timeout = std::time::Duration::from_secs(2);
    })
    .await;
    let compacted = |h: &'static Hero, session: i64| async move {
        let events = h.stream(session, "/compact").await;
        assert!(
            events.iter().any(|(n, _)| n == "message_complete"),
            "{events:?}"
        );
        let frames = all_frames(h, session).await;
        assert_eq!(of_type(&frames, "compact").len(), 1, "{frames:#?}");
        let note = flush_notes(&frames)
            .pop()
            .cloned()
            .unwrap_or_else(|| panic!("a flush note: {frames:#?}"));
        // The note comes before the summary.
        let at = |f: &Value| f["seq"].as_i64().unwrap();
        assert!(at(&note) < at(of_type(&frames, "compact")[0]));
        note
    };
    let h: &'static Hero = Box::leak(Box::new(h));

    let (session, _) = h.session_with("anthropic", &mock, KEY).await;
    h.stream(session, r#"Hello [[mock text="Hi."]]"#).await;
    let note = compacted(h, session).await;
    assert_eq!(
        note["payload"]["memory_flush"]["files"],
        json!([today_file()])
    );

    let (session, _) = h.session_with("anthropic", &mock, KEY).await;
    h.stream(session, r#"Hello [[mock text="Hi." flush=loop]]"#)
        .await;
    let before = flush_requests(&mock).len();
    let note = compacted(h, session).await;
    assert_eq!(flush_requests(&mock).len() - before, 5);
    assert!(
        note["payload"]["memory_flush"]["error"]
            .as_str()
            .unwrap()
            .contains("5 calls"),
        "{note}"
    );

    let (session, _) = h.session_with("anthropic", &mock, KEY).await;
    h.stream(session, r#"Hello [[mock text="Hi." flush=slow]]"#)
        .await;
    let note = compacted(h, session).await;
    assert!(
        note["payload"]["memory_flush"]["error"]
            .as_str()
            .unwrap()
            .contains("more than 2 s"),
        "{note}"
    );

    let (s, body) = h
        .json(
            Method::PUT,
            "/api/permissions/memory_write",
            Some(json!({"level": "never"})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    let (session, _) = h.session_with("anthropic", &mock, KEY).await;
    h.stream(session, r#"Hello [[mock text="Hi."]]"#).await;
    let before = flush_requests(&mock).len();
    let note = compacted(h, session).await;
    assert_eq!(flush_requests(&mock).len(), before, "no flush call");
    assert!(
        note["payload"]["content"]
            .as_str()
            .unwrap()
            .contains("set to never"),
        "{note}"
    );
}

/// The offline demo answers a flush as the mock does: a `memory_write` of the day's file, by
/// an `<interaction>` in its reply (no key, no network).
#[tokio::test]
async fn the_offline_demo_saves_memory_when_flushed() {
    let h = hero(&[]).await;
    let (_, agents) = h.json(Method::GET, "/api/agents", None).await;
    let demo = agents
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["provider"] == "scripted")
        .unwrap()["id"]
        .as_i64()
        .unwrap();
    let (s, session) = h
        .json(
            Method::POST,
            "/api/sessions",
            Some(json!({"name": "demo", "agent_id": demo})),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{session}");
    let session = session["id"].as_i64().unwrap();
    let user = hero_backend::accounts::auth::login(&h.st, "alice", "alice-password")
        .await
        .unwrap()
        .user;
    let flushed = hero_backend::conversation::flush::flush(&h.st, &user, session, None)
        .await
        .unwrap();
    assert_eq!(flushed.files, [today_file()], "{flushed:?}");
    let (s, file) = h
        .json(
            Method::GET,
            &format!("/api/agents/{demo}/memory/files/{}", today_file()),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{file}");
    assert!(
        file["content"]
            .as_str()
            .unwrap()
            .starts_with("- The conversation began with:"),
        "{file}"
    );
}
