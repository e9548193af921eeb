//! Reference 004 over loopback: the capability chain, configuration keys and their
//! versions, and the changes an agent proposes (the mock LLM calls
//! `propose_config_change`), approved, rejected, stale or stopped, each told to the agent;
//! an approved change is in the next request's system prompt, and no change of alice's
//! reaches bob.

mod support;

use std::time::Duration;

use futures::StreamExt;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use support::*;
use tokio_tungstenite::tungstenite::Message;

/// The next `config_change` the socket hears.
async fn config_change<S>(ws: &mut S) -> Value
where
    S: futures::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    loop {
        let m = tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .expect("config_change on the socket");
        if let Some(Ok(Message::Text(t))) = m {
            let v: Value = serde_json::from_str(&t).unwrap();
            if v["type"] == "config_change" {
                return v;
            }
        }
    }
}

/// The agent proposes `content` for `key` and the call waits: its request frame.
async fn propose(h: &Hero, session: i64, key: &str, content: &str) -> Value {
    let input = json!({"key": key, "content": content, "reason": "the user asked"});
    h.stream(
        session,
        &format!("[[mock tool=propose_config_change input={input} then=\"Noted.\"]]"),
    )
    .await;
    let frames = h.frames(session).await;
    of_type(&frames, "request").last().copied().unwrap().clone()
}

/// The result frame of the call `request`, once it is stored.
async fn result_of(h: &Hero, session: i64, request: &str) -> Value {
    let frames = frames_when(h, session, |f| {
        of_type(f, "result")
            .iter()
            .any(|r| r["parent_id"] == request)
    })
    .await;
    of_type(&frames, "result")
        .into_iter()
        .find(|r| r["parent_id"] == request)
        .unwrap()
        .clone()
}

async fn system_prompt(h: &Hero, session: i64) -> String {
    let (s, body) = h
        .json(
            Method::GET,
            &format!("/api/sessions/{session}/system-prompt"),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    body["prompt"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_proposed_change_waits_for_the_user_and_an_approved_one_is_the_next_prompts() {
    let mock = mock_llm::spawn(mock_llm::Config::default()).await.unwrap();
    let h = hero(&[mock.addr()]).await;
    let (session, _) = h.session_with("anthropic", &mock, KEY).await;

    // The chain: Hero's functions, then `config` with its instructions' key.
    let (s, caps) = h.json(Method::GET, "/api/capabilities", None).await;
    assert_eq!(s, StatusCode::OK, "{caps}");
    assert_eq!(caps[0]["name"], "functions");
    assert_eq!(caps[0]["prompt_key"], Value::Null);
    let config = caps
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "config")
        .unwrap();
    assert_eq!(config["source"], "builtin");
    assert_eq!(config["prompt_key"], "capability:config");
    assert_eq!(
        config["tools"],
        json!(["list_configs", "read_config", "propose_config_change"])
    );

    // A first turn stores the capability's default as v1; the prompt gives it.
    h.stream(session, "[[mock text=\"Hi.\"]] hello").await;
    let (s, cfg) = h
        .json(Method::GET, "/api/configs/capability:config", None)
        .await;
    assert_eq!(s, StatusCode::OK, "{cfg}");
    assert_eq!(cfg["version"], 1);
    assert!(
        cfg["content"].as_str().unwrap().contains("read_config"),
        "{cfg}"
    );
    let prompt = system_prompt(&h, session).await;
    assert!(
        prompt.contains("## Available Capabilities")
            && prompt.contains("<capability name=\"config\">"),
        "{prompt}"
    );
    let safety = prompt.find("## Safety").unwrap();
    assert!(prompt.find("## Available Capabilities").unwrap() > safety);

    // The agent reads a key: told its content and version, shown open on its card.
    h.stream(
        session,
        r#"[[mock tool=read_config input={"key": "capability:config"} then="Read it."]]"#,
    )
    .await;
    let frames = frames_when(&h, session, |f| {
        of_type(f, "result")
            .iter()
            .any(|r| r["payload"]["function"] == "read_config")
    })
    .await;
    let read = of_type(&frames, "result")
        .into_iter()
        .find(|r| r["payload"]["function"] == "read_config")
        .unwrap();
    let told = read["payload"]["output"].as_str().unwrap();
    assert!(
        told.starts_with("capability:config (v1):\n") && told.contains("read_config"),
        "{told}"
    );
    let page = h.page(&format!("/s/{session}")).await;
    assert!(page.contains(r#"data-testid="config-read" open"#), "{page}");
    frames_when(&h, session, |f| {
        agent_messages(f)
            .last()
            .is_some_and(|m| m["payload"]["content"] == "Read it.")
    })
    .await;

    // The agent proposes; the call waits, its card shows the change, the user's sockets
    // hear of it, and it is listed with its diff.
    let (_, mut ws) = h.ws().await;
    let wanted = "Always put my personal tasks in Personal.\n";
    let request = propose(&h, session, "capability:config", wanted).await;
    assert_eq!(request["payload"]["status"], "pending", "{request}");
    let id = request["id"].as_str().unwrap().to_owned();
    let shown = &request["payload"]["change"];
    assert_eq!(shown["pendingChangeId"], json!(id), "{request}");
    assert_eq!(
        (&shown["key"], &shown["base_version"], &shown["reason"]),
        (
            &json!("capability:config"),
            &json!(1),
            &json!("the user asked")
        )
    );
    let heard = config_change(&mut ws).await;
    assert_eq!(
        (&heard["changeId"], &heard["status"], &heard["sessionId"]),
        (&json!(id), &json!("pending"), &json!(session))
    );
    let page = h.page(&format!("/s/{session}")).await;
    assert!(
        page.contains("call-waiting call-proposal")
            && page.contains(&format!("data-change-id=\"{id}\""))
            && page.contains("Proposed change to capability:config (from v1)")
            && page.contains(">Reject</button>")
            && !page.contains("Always allow propose_config_change"),
        "{page}"
    );
    let (s, pending) = h
        .json(Method::GET, "/api/configs/changes?status=pending", None)
        .await;
    assert_eq!(s, StatusCode::OK, "{pending}");
    assert_eq!(pending.as_array().unwrap().len(), 1, "{pending}");
    let (_, change) = h
        .json(Method::GET, &format!("/api/configs/changes/{id}"), None)
        .await;
    assert_eq!(change["key"], "capability:config");
    assert_eq!(change["base_version"], 1);
    assert_eq!(change["reason"], "the user asked");
    assert_eq!(change["status"], "pending");
    let ops = change["diff"].as_array().unwrap();
    assert!(
        ops.iter()
            .any(|o| o["op"] == "insert" && o["text"] == wanted),
        "{change}"
    );
    assert!(ops.iter().any(|o| o["op"] == "delete"), "{change}");

    // Approved: v2, told to the agent; a second decision is a 409.
    let (s, decided) = h
        .json(
            Method::POST,
            &format!("/api/configs/changes/{id}"),
            Some(json!({"approved": true})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{decided}");
    assert_eq!(decided, json!({"status": "approved", "version": 2}));
    let heard = config_change(&mut ws).await;
    assert_eq!(
        (&heard["changeId"], &heard["status"], &heard["version"]),
        (&json!(id), &json!("approved"), &json!(2))
    );
    let (s, again) = h
        .json(
            Method::POST,
            &format!("/api/configs/changes/{id}"),
            Some(json!({"approved": false})),
        )
        .await;
    assert_eq!(s, StatusCode::CONFLICT, "{again}");
    let result = result_of(&h, session, &id).await;
    assert_eq!(result["payload"]["outcome"], "ok", "{result}");
    assert_eq!(
        result["payload"]["output"],
        "approved: capability:config is now v2"
    );

    // The next request's system prompt holds it (the mock echoes what it was sent).
    frames_when(&h, session, |f| {
        agent_messages(f)
            .last()
            .is_some_and(|m| m["payload"]["content"] == "Noted.")
    })
    .await;
    let echoed = h.stream(session, "[[mock echo]] what are you told?").await;
    let told = last_data(&echoed, "message_complete")["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        told.contains("Always put my personal tasks in Personal."),
        "{told}"
    );

    // The key's history: v2 by the agent with its reason and change, v1 the default.
    let (_, versions) = h
        .json(Method::GET, "/api/configs/capability:config/versions", None)
        .await;
    let v = versions.as_array().unwrap();
    assert_eq!(v.len(), 2, "{versions}");
    assert_eq!(
        (
            &v[0]["version"],
            &v[0]["author"],
            &v[0]["reason"],
            &v[0]["change_id"]
        ),
        (
            &json!(2),
            &json!("agent"),
            &json!("the user asked"),
            &json!(id)
        )
    );
    assert_eq!(
        (&v[1]["version"], &v[1]["author"]),
        (&json!(1), &json!("hero"))
    );
    let (_, v1) = h
        .json(
            Method::GET,
            "/api/configs/capability:config/versions/1",
            None,
        )
        .await;
    assert_eq!(v1["content"], cfg["content"]);

    // Rejected, through the chat's own approval: recorded, and the agent told.
    let request = propose(&h, session, "capability:config", "Never mind.\n").await;
    let rid = request["id"].as_str().unwrap().to_owned();
    let (s, _) = decide(&h, session, &rid, false).await;
    assert_eq!(s, StatusCode::OK);
    let result = result_of(&h, session, &rid).await;
    assert_eq!(result["payload"]["outcome"], "denied", "{result}");
    let (_, change) = h
        .json(Method::GET, &format!("/api/configs/changes/{rid}"), None)
        .await;
    assert_eq!(change["status"], "rejected");
    let (_, cfg) = h
        .json(Method::GET, "/api/configs/capability:config", None)
        .await;
    assert_eq!(cfg["version"], 2);

    // Stale: the user wrote v3 meanwhile; the approval is a 409 and the agent is told.
    frames_when(&h, session, |f| {
        agent_messages(f)
            .last()
            .is_some_and(|m| m["payload"]["content"] == "Noted.")
            && of_type(f, "result")
                .iter()
                .any(|r| r["parent_id"] == rid.as_str())
    })
    .await;
    let request = propose(&h, session, "capability:config", "Late.\n").await;
    let sid = request["id"].as_str().unwrap().to_owned();
    let (s, body) = h
        .json(
            Method::PUT,
            "/api/configs/capability:config",
            Some(json!({"content": "Mine.\n", "base_version": 2, "reason": "edited by hand"})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    assert_eq!(body["version"], 3);
    let (s, body) = h
        .json(
            Method::POST,
            &format!("/api/configs/changes/{sid}"),
            Some(json!({"approved": true})),
        )
        .await;
    assert_eq!(s, StatusCode::CONFLICT, "{body}");
    assert!(
        body["error"].as_str().unwrap().starts_with("stale"),
        "{body}"
    );
    let result = result_of(&h, session, &sid).await;
    assert_eq!(result["payload"]["outcome"], "error", "{result}");
    assert!(
        result["payload"]["output"]
            .as_str()
            .unwrap()
            .starts_with("stale"),
        "{result}"
    );
    let (_, cfg) = h
        .json(Method::GET, "/api/configs/capability:config", None)
        .await;
    assert_eq!(
        (&cfg["version"], &cfg["content"]),
        (&json!(3), &json!("Mine.\n"))
    );
}

#[tokio::test]
async fn bad_changes_are_refused_in_words_and_no_change_crosses_users() {
    let mock = mock_llm::spawn(mock_llm::Config::default()).await.unwrap();
    let h = hero(&[mock.addr()]).await;
    let (session, agent) = h.session_with("anthropic", &mock, KEY).await;

    // An unknown key: the agent's call is invalid, told which keys there are.
    let request = propose(&h, session, "mood", "cheerful").await;
    assert_eq!(request["payload"]["status"], "invalid", "{request}");
    let problem = request["payload"]["problem"].as_str().unwrap();
    assert!(
        problem.contains("no config key `mood`")
            && problem.contains("soul, agents, processes, system_prompt, capability:config"),
        "{problem}"
    );
    let (_, none) = h.json(Method::GET, "/api/configs/changes", None).await;
    assert_eq!(none, json!([]));

    // The routes: each refusal says why.
    for (method, path, body, status, says) in [
        (
            Method::GET,
            "/api/configs/mood",
            None,
            StatusCode::NOT_FOUND,
            "the keys are",
        ),
        (
            Method::GET,
            "/api/configs/soul",
            None,
            StatusCode::BAD_REQUEST,
            "agent_id",
        ),
        (
            Method::PUT,
            "/api/configs/system_prompt",
            Some(json!({"content": "x".repeat(65 * 1024), "base_version": 0})),
            StatusCode::BAD_REQUEST,
            "at most 64 KiB",
        ),
        (
            Method::PUT,
            "/api/configs/system_prompt",
            Some(json!({"content": "x", "base_version": 4})),
            StatusCode::CONFLICT,
            "changed since version 4",
        ),
        (
            Method::GET,
            "/api/configs/changes?status=maybe",
            None,
            StatusCode::BAD_REQUEST,
            "pending, approved, rejected, stale",
        ),
        (
            Method::GET,
            "/api/configs/changes/nope",
            None,
            StatusCode::NOT_FOUND,
            "not found",
        ),
        (
            Method::GET,
            "/api/configs/capability:config/versions/9",
            None,
            StatusCode::NOT_FOUND,
            "not found",
        ),
    ] {
        let (s, b) = h.json(method, path, body).await;
        assert_eq!(s, status, "{path}: {b}");
        assert!(b["error"].as_str().unwrap().contains(says), "{path}: {b}");
    }

    // The user's standing instructions are the prompt's extra context.
    let (s, b) = h
        .json(
            Method::PUT,
            "/api/configs/system_prompt",
            Some(json!({"content": "Always answer in French.", "base_version": 0})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let prompt = system_prompt(&h, session).await;
    assert!(
        prompt.contains("<extra_context>\nAlways answer in French.\n</extra_context>"),
        "{prompt}"
    );

    // `soul` is the agent's SOUL.md: v1 the file as first read, v2 written with the file.
    let soul = format!("/api/configs/soul?agent_id={agent}");
    let (s, first) = h.json(Method::GET, &soul, None).await;
    assert_eq!(s, StatusCode::OK, "{first}");
    assert_eq!(first["version"], 1);
    let (s, b) = h
        .json(
            Method::PUT,
            "/api/configs/soul",
            Some(json!({"content": "# Soul\nCalm and brief.\n", "base_version": 1, "agent_id": agent})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["version"], 2);
    let (_, file) = h
        .json(
            Method::GET,
            &format!("/api/agents/{agent}/files/SOUL.md"),
            None,
        )
        .await;
    assert_eq!(file["content"], "# Soul\nCalm and brief.\n");
    // A change on the Files page is a version too, when the key is next read.
    let (s, _) = h
        .json(
            Method::PUT,
            &format!("/api/agents/{agent}/files/SOUL.md"),
            Some(json!({"content": "# Soul\nEdited on the page.\n"})),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    let (_, now) = h.json(Method::GET, &soul, None).await;
    assert_eq!(
        (&now["version"], &now["content"]),
        (&json!(3), &json!("# Soul\nEdited on the page.\n"))
    );

    // `processes` is the agent's default processes, one id a line; an unknown one is named.
    let processes = format!("/api/configs/processes?agent_id={agent}");
    let (s, first) = h.json(Method::GET, &processes, None).await;
    assert_eq!(s, StatusCode::OK, "{first}");
    let (s, b) = h
        .json(
            Method::PUT,
            "/api/configs/processes",
            Some(json!({"content": "system:__onstart_\nuser:999\n", "base_version": first["version"], "agent_id": agent})),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
    assert!(b["error"].as_str().unwrap().contains("\"user:999\""), "{b}");
    let (s, b) = h
        .json(
            Method::PUT,
            "/api/configs/processes",
            Some(json!({"content": "system:__onstart_\n", "base_version": first["version"], "agent_id": agent})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let (_, row) = h
        .json(Method::GET, &format!("/api/agents/{agent}"), None)
        .await;
    assert_eq!(
        row["default_processes"],
        json!(["system:__onstart_"]),
        "{row}"
    );
    // Written without its last newline, it reads back as the same version.
    let (s, b) = h
        .json(
            Method::PUT,
            "/api/configs/processes",
            Some(json!({"content": "  system:__onstart_", "base_version": b["version"], "agent_id": agent})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let (_, read) = h.json(Method::GET, &processes, None).await;
    assert_eq!(
        (&read["version"], &read["content"]),
        (&b["version"], &json!("system:__onstart_\n"))
    );

    // Alice's pending change: bob cannot see or decide it, and his prompt keeps the default.
    let request = propose(&h, session, "capability:config", "Alice's way.\n").await;
    let id = request["id"].as_str().unwrap().to_owned();
    let bob = bob_client(&h).await;
    for (method, body) in [
        (Method::GET, None),
        (Method::POST, Some(json!({"approved": true}))),
    ] {
        let mut r = bob.request(method, h.url(&format!("/api/configs/changes/{id}")));
        if let Some(b) = body {
            r = r.json(&b);
        }
        assert_eq!(r.send().await.unwrap().status(), StatusCode::NOT_FOUND);
    }
    let (s, _) = h
        .json(
            Method::POST,
            &format!("/api/configs/changes/{id}"),
            Some(json!({"approved": true})),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    let bobs: Value = bob
        .get(h.url("/api/configs/capability:config"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(bobs["version"], 1, "{bobs}");
    assert!(!bobs["content"].as_str().unwrap().contains("Alice's way"));
    let bobs_changes: Value = bob
        .get(h.url("/api/configs/changes"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(bobs_changes, json!([]));
}

/// Stop decides a waiting change: rejected.
#[tokio::test]
async fn stop_rejects_a_waiting_change() {
    let mock = mock_llm::spawn(mock_llm::Config::default()).await.unwrap();
    let h = hero(&[mock.addr()]).await;
    let (session, _) = h.session_with("anthropic", &mock, KEY).await;
    let request = propose(&h, session, "system_prompt", "Be terse.").await;
    let id = request["id"].as_str().unwrap().to_owned();
    let alice = hero_backend::accounts::auth::login(&h.st, "alice", "alice-password")
        .await
        .unwrap()
        .user;
    hero_backend::conversation::turn::stop(&h.st, &alice, session)
        .await
        .unwrap();
    let result = result_of(&h, session, &id).await;
    assert_eq!(result["payload"]["outcome"], "stopped", "{result}");
    let (_, change) = h
        .json(Method::GET, &format!("/api/configs/changes/{id}"), None)
        .await;
    assert_eq!(change["status"], "rejected", "{change}");
    let (s, _) = h
        .json(
            Method::POST,
            &format!("/api/configs/changes/{id}"),
            Some(json!({"approved": true})),
        )
        .await;
    assert_eq!(s, StatusCode::CONFLICT);
}

/// A change waiting for the user outlives a restart of the server, and is decided after it.
#[tokio::test]
async fn a_waiting_change_outlives_a_restart() {
    use support::process::{add_alice, serve};
    let data = tempfile::tempdir().unwrap();
    add_alice(data.path());
    let mock = mock_llm::spawn(mock_llm::Config::default()).await.unwrap();
    let mut hero = serve(data.path(), &mock.addr().to_string()).await;
    let session = hero.mock_session(&mock).await;
    let input = json!({"key": "system_prompt", "content": "Be brief.", "reason": "asked"});
    let sent = hero
        .post(
            &format!("/api/sessions/{session}/messages"),
            json!({"content": format!("[[mock tool=propose_config_change input={input} then=\"Ok.\"]]")}),
        )
        .await;
    assert!(sent["error"].is_null(), "{sent}");
    let frames = hero
        .frames_when(session, |f| f.iter().any(|x| x["type"] == "request"))
        .await;
    let id = frames.iter().find(|x| x["type"] == "request").unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &hero.child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    assert!(hero.child.wait().unwrap().success());

    let again = serve(data.path(), &mock.addr().to_string()).await;
    let pending: Value = again
        .c
        .get(format!("{}/api/configs/changes?status=pending", again.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(pending[0]["id"], id.as_str(), "{pending}");
    let decided = again
        .post(
            &format!("/api/configs/changes/{id}"),
            json!({"approved": true}),
        )
        .await;
    assert_eq!(decided, json!({"status": "approved", "version": 1}));
    let frames = again
        .frames_when(session, |f| {
            f.iter()
                .any(|x| x["type"] == "result" && x["parent_id"] == id.as_str())
        })
        .await;
    let result = frames
        .iter()
        .find(|x| x["type"] == "result" && x["parent_id"] == id.as_str())
        .unwrap();
    assert_eq!(
        result["payload"]["output"],
        "approved: system_prompt is now v1"
    );
}
