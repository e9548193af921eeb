//! Export and import on loopback with the mock LLM: a session as Markdown (people's words,
//! elements as text) and as JSON, imported back into a new session whose frames are the
//! same (new ids, parents and targets following) and whose waiting call can never run;
//! everything as a tar archive whose sessions import too; a form's file sent on to the new
//! session; another user's session a missing one; and every bad import a 4xx naming its
//! problem, with nothing stored.

mod support;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use support::*;

async fn get_text(h: &Hero, path: &str) -> (StatusCode, String, String) {
    let r = h.c.get(h.url(path)).send().await.unwrap();
    let status = r.status();
    let disposition = r
        .headers()
        .get("content-disposition")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (status, disposition, r.text().await.unwrap())
}

async fn import(h: &Hero, body: Vec<u8>) -> (StatusCode, Value) {
    let r =
        h.c.post(h.url("/api/sessions/import"))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
    let status = r.status();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn session_count(h: &Hero) -> usize {
    h.json(Method::GET, "/api/sessions", None)
        .await
        .1
        .as_array()
        .unwrap()
        .len()
}

/// A session with a note, a question answered by the agent, and a command waiting for
/// approval.
async fn conversation(h: &Hero, mock: &mock_llm::MockServer) -> i64 {
    let (session, _) = h.session_with("anthropic", mock, KEY).await;
    let (s, _) = h
        .json(
            Method::POST,
            &format!("/api/sessions/{session}/messages"),
            Some(json!({"content": "A private note about **tea**.", "private": true})),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    h.stream(
        session,
        r#"[[mock text="Let me look.\n\u003cthinking>the user wants files\u003c/thinking>\n\u003cbash>ls -la\u003c/bash>"]]"#,
    )
    .await;
    session
}

#[tokio::test]
async fn a_session_is_exported_and_imported_back_and_its_waiting_call_never_runs() {
    let mock = mock_llm::spawn(mock_llm::Config::default()).await.unwrap();
    let h = hero(&[mock.addr()]).await;
    let session = conversation(&h, &mock).await;
    let frames = h.frames(session).await;
    let request = of_type(&frames, "request")[0].clone();
    assert_eq!(request["payload"]["status"], "pending");

    // Markdown, for people.
    let (s, disposition, md) = get_text(
        &h,
        &format!("/api/sessions/{session}/export?format=markdown"),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{md}");
    assert_eq!(
        disposition,
        format!("attachment; filename=\"{session}-chat.md\"")
    );
    assert!(md.starts_with("# chat\n"), "{md}");
    assert!(
        md.contains("### You · ") && md.contains("(private)\n\nA private note about **tea**."),
        "{md}"
    );
    assert!(md.contains("> *Thinking:*\n> the user wants files"), "{md}");
    assert!(md.contains("```bash\nls -la\n```"), "{md}");
    assert!(md.contains("> **Call** `bash`"), "{md}");

    // JSON, for Hero: the frames in order, opened.
    let (s, disposition, text) =
        get_text(&h, &format!("/api/sessions/{session}/export?format=json")).await;
    assert_eq!(s, StatusCode::OK);
    assert!(disposition.ends_with(".json\""), "{disposition}");
    let export: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        (export["format"].as_str(), export["version"].as_u64()),
        (Some("hero-session"), Some(1))
    );
    assert_eq!(export["session"]["name"], "chat");
    let exported = export["frames"].as_array().unwrap();
    assert_eq!(exported.len(), frames.len());
    for (e, f) in exported.iter().zip(&frames) {
        assert_eq!(
            (&e["id"], &e["type"], &e["payload"], &e["timestamp"]),
            (&f["id"], &f["type"], &f["payload"], &f["timestamp"])
        );
    }

    // Imported: a new session with the same frames under new ids, and the waiting call
    // given a result that says it was not run.
    let (s, imported) = import(&h, text.clone().into_bytes()).await;
    assert_eq!(s, StatusCode::CREATED, "{imported}");
    let new = imported["id"].as_i64().unwrap();
    assert_ne!(new, session);
    assert_eq!(imported["name"], "chat");
    let copied = h.frames(new).await;
    assert_eq!(copied.len(), frames.len() + 1, "one result added");
    let originals: Vec<&Value> = frames.iter().map(|f| &f["payload"]).collect();
    let kept: Vec<&Value> = copied[..frames.len()]
        .iter()
        .map(|f| &f["payload"])
        .collect();
    assert_eq!(kept, originals, "in the same order, at the same seqs");
    let seqs = |fs: &[Value]| {
        fs.iter()
            .map(|f| f["seq"].as_i64().unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(seqs(&copied[..frames.len()]), seqs(&frames));
    assert!(
        copied
            .iter()
            .all(|f| frames.iter().all(|o| o["id"] != f["id"])),
        "fresh ids"
    );
    let new_request = of_type(&copied, "request")[0].clone();
    let result = of_type(&copied, "result")[0].clone();
    assert_eq!(result["parent_id"], new_request["id"]);
    assert_eq!(result["payload"]["outcome"], "stopped");
    assert_eq!(
        result["payload"]["content"],
        "The call bash was not run: it came in an import."
    );
    // The agent's reply keeps its place as the request's parent.
    let reply = agent_messages(&copied)[0];
    assert_eq!(new_request["parent_id"], reply["id"]);
    // It cannot be approved now: it is decided.
    let (s, v) = decide(&h, new, new_request["id"].as_str().unwrap(), true).await;
    assert_eq!(s, StatusCode::CONFLICT, "{v}");
    // Its page opens.
    let (s, view) = h
        .json(Method::GET, &format!("/api/sessions/{new}/view"), None)
        .await;
    assert_eq!(s, StatusCode::OK, "{view}");
    // And imported again, it is another session again.
    let (s, again) = import(&h, text.into_bytes()).await;
    assert_eq!(s, StatusCode::CREATED);
    assert_ne!(again["id"], imported["id"]);

    // Another user's session is a missing one to export.
    let bob = bob_client(&h).await;
    let r = bob
        .get(h.url(&format!("/api/sessions/{session}/export")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);

    // A message hidden later is left out, as the chat leaves it out; shown again, it is in.
    let note = &h.frames(session).await[0];
    assert!(note["payload"]["content"].as_str().unwrap().contains("tea"));
    let hide_at = format!(
        "/api/sessions/{session}/frames/{}/hidden",
        note["id"].as_str().unwrap()
    );
    let hide = |hidden: bool| h.json(Method::PUT, &hide_at, Some(json!({ "hidden": hidden })));
    assert_eq!(hide(true).await.0, StatusCode::NO_CONTENT);
    let export = format!("/api/sessions/{session}/export?format=markdown");
    let (_, _, hidden) = get_text(&h, &export).await;
    assert!(
        !hidden.contains("tea") && hidden.contains("ls -la"),
        "{hidden}"
    );
    assert_eq!(hide(false).await.0, StatusCode::NO_CONTENT);
    assert_eq!(get_text(&h, &export).await.2.matches("tea").count(), 1);
}

#[tokio::test]
async fn everything_is_one_archive_whose_sessions_import_and_a_form_is_sent_on() {
    let mock = mock_llm::spawn(mock_llm::Config::default()).await.unwrap();
    let h = hero(&[mock.addr()]).await;
    let session = conversation(&h, &mock).await;
    // The agent's files and memory go in the archive too, a long path whole.
    let agent = h
        .json(Method::GET, &format!("/api/sessions/{session}"), None)
        .await
        .1["agent_id"]
        .as_i64()
        .unwrap();
    let (s, v) = h
        .json(
            Method::PUT,
            &format!("/api/agents/{agent}/files/USER.md"),
            Some(json!({"content": "# User\n\n- Drinks: green tea\n"})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let long = format!("memory/{}/notes.md", "deep".repeat(30));
    let (s, v) = h
        .json(
            Method::PUT,
            &format!("/api/agents/{agent}/memory/files/{long}"),
            Some(json!({"content": "Remember the kettle."})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let skill =
        "---\nname: tea-notes\ndescription: How the user takes tea.\n---\nSee ref/how.md.\n";
    let (s, v) = h
        .json(
            Method::PUT,
            "/api/skills/tea-notes",
            Some(json!({"content": skill, "files": {"ref/how.md": "Green, no sugar."}})),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    // A file attached in the session goes in the archive, as it was.
    let boundary = "hero-test-boundary-a77c";
    let mut upload = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"Tea Log.md\"\r\n\
         Content-Type: text/markdown\r\n\r\n"
    )
    .into_bytes();
    upload.extend_from_slice(b"# Tea\n\n- sencha\n");
    upload.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    let r =
        h.c.post(h.url(&format!("/api/sessions/{session}/attachments")))
            .header(
                "content-type",
                format!("multipart/form-data; boundary={boundary}"),
            )
            .body(upload)
            .send()
            .await
            .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let attached = r.json::<Value>().await.unwrap()["attachment_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = h.c.get(h.url("/api/export")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()["content-type"], "application/x-tar");
    let bytes = r.bytes().await.unwrap();
    let mut archive = tar::Archive::new(&bytes[..]);
    let mut files = std::collections::BTreeMap::new();
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        let path = entry.path().unwrap().display().to_string();
        let mut data = Vec::new();
        std::io::Read::read_to_end(&mut entry, &mut data).unwrap();
        files.insert(path, data);
    }
    let agents: Value = serde_json::from_slice(&files["agents.json"]).unwrap();
    assert_eq!(
        agents.as_array().unwrap().len(),
        2,
        "the demo agent and the mock's"
    );
    assert!(
        !String::from_utf8_lossy(&files["agents.json"]).contains(KEY),
        "no key leaves"
    );
    let folder = files
        .keys()
        .find(|p| p.starts_with(&format!("agents/{agent}-")))
        .map(|p| p.split('/').take(2).collect::<Vec<_>>().join("/"))
        .expect("the agent's folder");
    assert_eq!(
        String::from_utf8_lossy(&files[&format!("{folder}/files/USER.md")]),
        "# User\n\n- Drinks: green tea\n"
    );
    assert_eq!(
        String::from_utf8_lossy(&files[&format!("{folder}/memory/user/{long}")]),
        "Remember the kettle."
    );
    assert_eq!(
        String::from_utf8_lossy(&files["skills/tea-notes/SKILL.md"]),
        skill
    );
    assert_eq!(
        String::from_utf8_lossy(&files["skills/tea-notes/ref/how.md"]),
        "Green, no sugar."
    );
    assert_eq!(
        String::from_utf8_lossy(&files[&format!("attachments/{session}/{attached}-tea-log.md")]),
        "# Tea\n\n- sencha\n"
    );
    let name = format!("sessions/{session}-chat.json");
    let export: Value = serde_json::from_slice(&files[&name]).unwrap();
    assert_eq!(
        export["frames"].as_array().unwrap().len(),
        h.frames(session).await.len()
    );

    // Bob's archive holds only what is his: none of Alice's sessions, files, memory, skills
    // or attachments.
    let bob = bob_client(&h).await;
    let r = bob.get(h.url("/api/export")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let bobs = r.bytes().await.unwrap();
    let mut archive = tar::Archive::new(&bobs[..]);
    let paths: Vec<String> = archive
        .entries()
        .unwrap()
        .map(|e| e.unwrap().path().unwrap().display().to_string())
        .collect();
    assert!(paths.contains(&"agents.json".to_owned()), "{paths:?}");
    assert!(
        !paths.iter().any(|p| p.starts_with("sessions/")
            || p.starts_with("attachments/")
            || p.starts_with("skills/")),
        "{paths:?}"
    );
    let text = String::from_utf8_lossy(&bobs);
    for alices in ["green tea", "kettle", "sencha", "Green, no sugar"] {
        assert!(!text.contains(alices), "{alices} in Bob's archive");
    }

    // A browser's form (no script needed) sends its file and is sent on to the new session.
    let boundary = "hero-test-boundary-7d41";
    let mut form = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"chat.json\"\r\n\
         Content-Type: application/json\r\n\r\n"
    )
    .into_bytes();
    form.extend_from_slice(&files[&name]);
    form.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    let c = reqwest::Client::builder()
        .cookie_store(true)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let r = c
        .post(h.url("/api/auth/login"))
        .json(&json!({"username": "alice", "password": "alice-password"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let r = c
        .post(h.url("/api/sessions/import"))
        .header(
            "content-type",
            format!("multipart/form-data; boundary={boundary}"),
        )
        .body(form)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let to = r.headers()["location"].to_str().unwrap().to_owned();
    assert!(to.starts_with("/s/"), "{to}");
    let id: i64 = to[3..].parse().unwrap();
    assert_eq!(h.frames(id).await.len(), h.frames(session).await.len() + 1);
}

#[tokio::test]
async fn a_bad_import_says_what_is_wrong_and_stores_nothing() {
    let mock = mock_llm::spawn(mock_llm::Config::default()).await.unwrap();
    let h = hero(&[mock.addr()]).await;
    let session = conversation(&h, &mock).await;
    let (_, _, text) = get_text(&h, &format!("/api/sessions/{session}/export")).await;
    let good: Value = serde_json::from_str(&text).unwrap();
    let before = session_count(&h).await;
    let with = |f: &dyn Fn(&mut Value)| {
        let mut v = good.clone();
        f(&mut v);
        serde_json::to_vec(&v).unwrap()
    };
    let cases: Vec<(Vec<u8>, StatusCode, &str)> = vec![
        (
            b"not json at all".to_vec(),
            StatusCode::BAD_REQUEST,
            "not JSON",
        ),
        (
            with(&|v| v["format"] = json!("chatgpt-export")),
            StatusCode::BAD_REQUEST,
            "not a Hero session export",
        ),
        (
            with(&|v| v["version"] = json!(2)),
            StatusCode::BAD_REQUEST,
            "made by a newer Hero (format version 2",
        ),
        (
            with(&|v| {
                v.as_object_mut().unwrap().remove("version");
            }),
            StatusCode::BAD_REQUEST,
            "no format version",
        ),
        (
            with(&|v| v["frames"][2]["parent_id"] = json!("nowhere")),
            StatusCode::BAD_REQUEST,
            "its parent \"nowhere\" is not a frame of this export",
        ),
        (
            with(&|v| v["frames"][1]["timestamp"] = json!("yesterday")),
            StatusCode::BAD_REQUEST,
            "is not RFC 3339",
        ),
        (
            with(&|v| {
                let id = v["frames"][0]["id"].clone();
                v["frames"][1]["id"] = id;
            }),
            StatusCode::BAD_REQUEST,
            "is used twice",
        ),
        (
            with(&|v| v["frames"][0]["colour"] = json!("red")),
            StatusCode::BAD_REQUEST,
            "unknown field",
        ),
        (
            with(&|v| v["session"]["name"] = json!("")),
            StatusCode::BAD_REQUEST,
            "name",
        ),
        (
            vec![b' '; 33 << 20],
            StatusCode::BAD_REQUEST,
            "an import is at most 32 MiB",
        ),
    ];
    for (body, want, says) in cases {
        let (s, v) = import(&h, body).await;
        assert_eq!(s, want, "{says}: {v}");
        assert!(
            v["error"].as_str().unwrap_or_default().contains(says),
            "{says}: {v}"
        );
    }
    assert_eq!(session_count(&h).await, before, "nothing was stored");
    let (s, v) = h
        .json(
            Method::GET,
            &format!("/api/sessions/{session}/export?format=pdf"),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(
        v["error"].as_str().unwrap().contains("markdown or json"),
        "{v}"
    );
}

async fn branch(h: &Hero, session: i64, from: &str) -> (StatusCode, Value) {
    h.json(
        Method::POST,
        &format!("/api/sessions/{session}/branch"),
        Some(json!({"from_frame_id": from})),
    )
    .await
}

#[tokio::test]
async fn a_branch_holds_the_conversation_up_to_its_message_and_leaves_the_original() {
    let mock = mock_llm::spawn(mock_llm::Config::default()).await.unwrap();
    let h = hero(&[mock.addr()]).await;
    let session = conversation(&h, &mock).await;
    let frames = h.frames(session).await;

    // From the first note: that note alone, and where it came from.
    let note = &frames[0];
    let (s, b) = branch(&h, session, note["id"].as_str().unwrap()).await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    assert_eq!(b["name"], "Branch of chat");
    let copied = h.frames(b["id"].as_i64().unwrap()).await;
    assert_eq!(copied.len(), 2, "{copied:?}");
    assert_eq!(copied[0]["payload"], note["payload"]);
    assert_ne!(copied[0]["id"], note["id"]);
    assert!(
        copied[1]["payload"]["content"]
            .as_str()
            .unwrap()
            .starts_with("Branched from “chat”")
    );
    assert_eq!(copied[1]["payload"]["branched_from"]["session_id"], session);

    // From the agent's reply: everything to it, its waiting call given a result in the
    // branch so that it never runs there, and the original unchanged.
    let reply = agent_messages(&frames)[0].clone();
    let (s, b) = branch(&h, session, reply["id"].as_str().unwrap()).await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    let new = b["id"].as_i64().unwrap();
    assert_eq!(
        b["agent_id"],
        h.json(Method::GET, &format!("/api/sessions/{session}"), None)
            .await
            .1["agent_id"]
    );
    let copied = h.frames(new).await;
    let payloads = |fs: &[Value], t: &str| {
        fs.iter()
            .filter(|f| f["type"] == t)
            .map(|f| f["payload"].clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        payloads(&copied, "message")[..frames.iter().filter(|f| f["type"] == "message").count()],
        payloads(&frames, "message")[..]
    );
    let results = of_type(&copied, "result");
    assert_eq!(results.len(), 1);
    assert!(
        results[0]["payload"]["content"]
            .as_str()
            .unwrap()
            .contains("not run")
    );
    assert_eq!(h.frames(session).await, frames, "the original is unchanged");
    let original_request = of_type(&frames, "request")[0]["payload"]["status"].clone();
    assert_eq!(
        original_request, "pending",
        "the original's call still waits for its user"
    );

    // What cannot be branched from.
    let request = of_type(&frames, "request")[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (s, v) = branch(&h, session, &request).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("starts from a message"),
        "{v}"
    );
    let (s, _) = branch(&h, session, "no-such-frame").await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let bob = bob_client(&h).await;
    let r = bob
        .post(h.url(&format!("/api/sessions/{session}/branch")))
        .json(&json!({"from_frame_id": reply["id"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
}

/// A call begun while its reply streamed is stored before the reply it names: a branch from
/// a message between the two leaves the call behind rather than fail.
#[tokio::test]
async fn a_branch_between_a_call_and_its_reply_leaves_the_call_behind() {
    let h = hero(&[]).await;
    let at = "2026-11-28T10:00:00Z";
    let frame = |id: &str, parent: Option<&str>, t: &str, author: &str, payload: Value| {
        json!({"id": id, "parent_id": parent, "target_ids": [], "timestamp": at,
               "type": t, "author_type": author, "payload": payload})
    };
    let export = json!({
        "format": "hero-session", "version": 1,
        "session": {"name": "Streaming", "created_at": at},
        "frames": [
            frame("u", None, "message", "user", json!({"role": "user", "content": "list files"})),
            frame("q", Some("r"), "request", "agent", json!({
                "function": "bash", "args": {"command": "ls"},
                "origin": {"form": "element", "element_id": "e1", "kind": "bash"},
                "status": "pending", "content": "bash: ls"})),
            frame("n", None, "message", "user", json!({"role": "user", "content": "a note meanwhile", "private": true})),
            frame("r", None, "message", "agent", json!({"role": "assistant", "content": "<bash>ls</bash>"})),
        ]
    });
    let (s, imported) = h
        .json(Method::POST, "/api/sessions/import", Some(export))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{imported}");
    let id = imported["id"].as_i64().unwrap();
    let frames = h.frames(id).await;
    let note = frames
        .iter()
        .find(|f| f["payload"]["content"] == "a note meanwhile")
        .unwrap();
    let (s, b) = branch(&h, id, note["id"].as_str().unwrap()).await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    let copied = h.frames(b["id"].as_i64().unwrap()).await;
    let types: Vec<&str> = copied.iter().map(|f| f["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["message", "message", "message"], "{copied:?}");
}

/// A native tool call copied without its result is answered by its id, as the provider
/// needs before the conversation can go on, and the result goes to the session's agent.
#[tokio::test]
async fn a_tool_call_copied_without_its_result_is_answered_by_its_id() {
    let h = hero(&[]).await;
    let at = "2026-11-28T10:00:00Z";
    let export = json!({
        "format": "hero-session", "version": 1,
        "session": {"name": "Tools", "created_at": at},
        "frames": [
            {"id": "u", "timestamp": at, "type": "message", "author_type": "user",
             "payload": {"role": "user", "content": "search"}},
            {"id": "r", "timestamp": at, "type": "message", "author_type": "agent",
             "payload": {"role": "assistant", "content": "Searching."}},
            {"id": "q", "parent_id": "r", "timestamp": at, "type": "request", "author_type": "agent",
             "payload": {"function": "websearch", "args": {"query": "tea"},
                         "origin": {"form": "tool", "tool_use_id": "toolu_01"},
                         "status": "pending", "content": "websearch: tea"}},
        ]
    });
    let (s, imported) = h
        .json(Method::POST, "/api/sessions/import", Some(export))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{imported}");
    let frames = h.frames(imported["id"].as_i64().unwrap()).await;
    let result = &of_type(&frames, "result")[0];
    assert_eq!(result["payload"]["tool_use_id"], "toolu_01");
    assert_eq!(result["payload"]["function"], "websearch");
    let agent = imported["agent_id"].as_i64().unwrap();
    assert_eq!(result["target_ids"], json!([format!("agent:{agent}")]));
}
