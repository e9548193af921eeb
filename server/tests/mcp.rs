//! Users' MCP servers (reference 004: a capability source) on loopback, played by the test
//! plugin (`hero-test-plugin`, made with rmcp's server side): a stdio server the user keeps
//! in their workspace, run in their sandbox, and the same program serving streamable HTTP
//! behind the egress policy. Its tools are `mcp__<server>__<tool>` in the user's own chain:
//! gated (asking), run by the agent, listed on the Permissions page; what it cannot reach,
//! how it is restarted and then failed, killed when it hangs, told when a call is given up,
//! and listed again when it says its tools changed.

mod support;

use std::path::PathBuf;
use std::time::Duration;

use hero_backend::execution::mcp::host;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use support::*;

/// The signed-in user's id.
async fn me(h: &Hero) -> i64 {
    h.json(Method::GET, "/api/me", None).await.1["id"]
        .as_i64()
        .unwrap()
}

/// The user's workspace, with the test server in it as `mcp-server` (what a user puts
/// there with bash), readable by the sandbox's uid.
fn install(h: &Hero, user: i64) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let ws = h._dir.path().join("workspaces").join(user.to_string());
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::copy(
        env!("CARGO_BIN_EXE_hero-test-plugin"),
        ws.join("mcp-server"),
    )
    .unwrap();
    std::fs::set_permissions(
        ws.join("mcp-server"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    ws
}

fn stdio(name: &str) -> Value {
    json!({
        "name": name,
        "transport": "stdio",
        "command": "/workspace/mcp-server",
        "env": {"SECRET_TOKEN": "s3cret-value-1234"},
    })
}

fn names(list: &Value, field: &str) -> Vec<String> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|v| v[field].as_str().unwrap().to_owned())
        .collect()
}

/// A stdio server added, started and listed: its tools (bounded, hinted) in the user's
/// chain and on the Permissions page, its instructions the default of its capability's key,
/// its secret never shown back; called by the agent, asking first; an `isError` answer an
/// error; another user's chain untouched. Bad input is refused, saying what to change.
#[tokio::test]
async fn a_users_mcp_server_is_a_capability_of_their_own_chain() {
    let mock = mock_llm::spawn(mock_llm::Config::default()).await.unwrap();
    let h = hero(&[mock.addr()]).await;
    let alice = me(&h).await;
    let ws = install(&h, alice);

    // Bad input: each refused, saying what to change.
    for (body, status, says) in [
        (
            json!({"name": "Bad Name", "transport": "stdio", "command": "/usr/bin/true"}),
            400,
            "1 to 24",
        ),
        (
            json!({"name": "ok", "transport": "stdio", "command": "/bin/sh"}),
            400,
            "/usr or /workspace",
        ),
        (
            json!({"name": "ok", "transport": "stdio", "command": "/workspace/../etc/x"}),
            400,
            "/usr or /workspace",
        ),
        (
            json!({"name": "ok", "transport": "stdio", "command": "/usr/bin/true", "env": {"1X": "v"}}),
            400,
            "environment variable",
        ),
        (
            json!({"name": "ok", "transport": "stdio", "command": "/usr/bin/true", "timeout_secs": 601}),
            400,
            "timeout_secs",
        ),
        (
            json!({"name": "ok", "transport": "http", "url": "http://127.0.0.1:9/mcp"}),
            400,
            "HERO_EGRESS_ALLOW",
        ),
        (
            json!({"name": "ok", "transport": "ftp"}),
            422,
            "expected `stdio` or `http`",
        ),
        (
            json!({"name": "ok", "transport": "http", "url": "https://mcp.example.com/mcp", "headers": {"Host": "elsewhere"}}),
            400,
            "Hero's to set",
        ),
    ] {
        let (s, b) = h
            .json(Method::POST, "/api/mcp/servers", Some(body.clone()))
            .await;
        assert_eq!(s.as_u16(), status, "{body}: {b}");
        assert!(b.to_string().contains(says), "{body}: {b}");
    }

    let (s, kit) = h
        .json(Method::POST, "/api/mcp/servers", Some(stdio("kit")))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{kit}");
    assert_eq!(kit["status"], "running", "{kit}");
    assert_eq!(kit["secret_names"], json!(["SECRET_TOKEN"]));
    assert!(!kit.to_string().contains("s3cret"), "{kit}");
    let functions = names(&kit["tools"], "function");
    assert!(
        functions.contains(&"mcp__kit__echo".to_owned()),
        "{functions:?}"
    );
    let tool = |name: &str| {
        kit["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(tool("echo")["dangerLevel"], "safe", "readOnlyHint");
    assert_eq!(tool("crash")["dangerLevel"], "dangerous", "destructiveHint");
    assert_eq!(tool("read")["dangerLevel"], "moderate");
    assert!(kit["skipped"].to_string().contains("far_too_long"), "{kit}");
    assert_eq!(
        kit["instructions"],
        "Use the test server's echo to say things back."
    );
    let (s, again) = h
        .json(Method::POST, "/api/mcp/servers", Some(stdio("kit")))
        .await;
    assert_eq!(s, StatusCode::CONFLICT, "{again}");

    // In the user's chain: its capability, its key, its tools asking on Permissions.
    let (_, caps) = h.json(Method::GET, "/api/capabilities", None).await;
    let cap = caps
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "mcp-kit")
        .unwrap_or_else(|| panic!("{caps}"));
    assert_eq!(cap["source"], "mcp");
    assert_eq!(cap["prompt_key"], "capability:mcp-kit");
    let (s, key) = h
        .json(Method::GET, "/api/configs/capability:mcp-kit", None)
        .await;
    assert_eq!(s, StatusCode::OK, "{key}");
    assert_eq!(
        key["content"],
        "Use the test server's echo to say things back."
    );
    let (_, perms) = h.json(Method::GET, "/api/permissions", None).await;
    let echo = perms
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["function"] == "mcp__kit__echo")
        .unwrap_or_else(|| panic!("{perms}"));
    assert_eq!(echo["capability"], "mcp-kit");
    assert_eq!(echo["level"], "ask", "a hint never allows a tool always");

    // Another user's chain does not have it.
    let bob = bob_client(&h).await;
    let theirs: Value = bob
        .get(h.url("/api/permissions"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(!theirs.to_string().contains("mcp__kit"), "{theirs}");
    let r = bob
        .get(h.url(&format!("/api/mcp/servers/{}", kit["id"])))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);

    // The prompt lists it; the agent calls it, asking first.
    let (session, _) = h.session_with("anthropic", &mock, KEY).await;
    let (_, prompt) = h
        .json(
            Method::GET,
            &format!("/api/sessions/{session}/system-prompt"),
            None,
        )
        .await;
    let prompt = prompt.to_string();
    assert!(
        prompt.contains("<capability name=\\\"mcp-kit\\\">"),
        "{prompt}"
    );
    assert!(prompt.contains("mcp__kit__echo"), "{prompt}");
    h.stream(
        session,
        r#"[[mock tool=mcp__kit__echo input={"text": "from the server"} then="Echoed."]]"#,
    )
    .await;
    let frames = h.frames(session).await;
    let request = of_type(&frames, "request").last().copied().unwrap().clone();
    assert_eq!(request["payload"]["function"], "mcp__kit__echo");
    assert_eq!(request["payload"]["status"], "pending", "{request}");
    let rid = request["id"].as_str().unwrap().to_owned();
    let (s, body) = decide(&h, session, &rid, true).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    let frames = frames_when(&h, session, |f| {
        of_type(f, "result").iter().any(|r| r["parent_id"] == rid)
    })
    .await;
    let result = of_type(&frames, "result").last().copied().unwrap();
    assert_eq!(result["payload"]["outcome"], "ok", "{result}");
    assert_eq!(result["payload"]["output"], "from the server");

    // Its `isError` answer is the call's error.
    h.stream(
        session,
        r#"[[mock tool=mcp__kit__read input={"path": "/workspace/nothing-here"} then="Read."]]"#,
    )
    .await;
    let frames = h.frames(session).await;
    let request = of_type(&frames, "request").last().copied().unwrap().clone();
    let rid = request["id"].as_str().unwrap().to_owned();
    decide(&h, session, &rid, true).await;
    let frames = frames_when(&h, session, |f| {
        of_type(f, "result").iter().any(|r| r["parent_id"] == rid)
    })
    .await;
    let result = of_type(&frames, "result").last().copied().unwrap();
    assert_eq!(result["payload"]["outcome"], "error", "{result}");
    assert!(
        result["payload"]["output"]
            .as_str()
            .unwrap()
            .contains("cannot read"),
        "{result}"
    );

    // At most 20 servers a user.
    for i in 1..20 {
        let body = json!({"name": format!("off-{i}"), "transport": "stdio", "command": "/usr/bin/true", "enabled": false});
        let (s, b) = h.json(Method::POST, "/api/mcp/servers", Some(body)).await;
        assert_eq!(s, StatusCode::CREATED, "{b}");
        assert_eq!(b["status"], "disabled");
    }
    let (s, b) = h
        .json(Method::POST, "/api/mcp/servers", Some(stdio("one-more")))
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
    assert!(b.to_string().contains("20 MCP servers"), "{b}");
    let (_, list) = h.json(Method::GET, "/api/mcp/servers", None).await;
    for s in list
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["name"] != "kit")
    {
        let (status, _) = h
            .json(
                Method::DELETE,
                &format!("/api/mcp/servers/{}", s["id"]),
                None,
            )
            .await;
        assert_eq!(status, StatusCode::NO_CONTENT);
    }

    // Stop while an approved call runs: the call ends as stopped, and the server is told
    // (`notifications/cancelled`: the test server notes it in its working directory).
    h.stream(
        session,
        r#"[[mock tool=mcp__kit__sleep input={"ms": 10000} then="Slept."]]"#,
    )
    .await;
    let frames = h.frames(session).await;
    let request = of_type(&frames, "request").last().copied().unwrap().clone();
    assert_eq!(request["payload"]["function"], "mcp__kit__sleep");
    let rid = request["id"].as_str().unwrap().to_owned();
    let user = hero_backend::accounts::auth::login(&h.st, "alice", "alice-password")
        .await
        .unwrap()
        .user;
    let began = std::time::Instant::now();
    let (decided, _) = tokio::join!(decide(&h, session, &rid, true), async {
        tokio::time::sleep(Duration::from_millis(700)).await;
        hero_backend::conversation::turn::stop(&h.st, &user, session)
            .await
            .unwrap();
    });
    assert_eq!(decided.0, StatusCode::OK, "{}", decided.1);
    let frames = frames_when(&h, session, |f| {
        of_type(f, "result").iter().any(|r| r["parent_id"] == rid)
    })
    .await;
    assert!(
        began.elapsed() < Duration::from_secs(8),
        "the call was not stopped"
    );
    let result = of_type(&frames, "result").last().copied().unwrap();
    assert_ne!(result["payload"]["outcome"], "ok", "{result}");
    let mut told = false;
    for _ in 0..100 {
        if ws.join("cancelled").exists() {
            told = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        told,
        "Stop did not reach the server as notifications/cancelled"
    );

    // A level the user chose is forgotten with the server: one added again of the same name
    // asks again.
    let (s, b) = h
        .json(
            Method::PUT,
            "/api/permissions/mcp__kit__echo",
            Some(json!({"level": "always"})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");

    // Disabled, it leaves the chain; deleted, it is gone.
    let id = kit["id"].as_i64().unwrap();
    let (s, off) = h
        .json(
            Method::PATCH,
            &format!("/api/mcp/servers/{id}"),
            Some(json!({"enabled": false})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{off}");
    assert_eq!(off["status"], "disabled");
    let (_, perms) = h.json(Method::GET, "/api/permissions", None).await;
    assert!(!perms.to_string().contains("mcp__kit"), "{perms}");
    let (s, _) = h
        .json(Method::DELETE, &format!("/api/mcp/servers/{id}"), None)
        .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (_, list) = h.json(Method::GET, "/api/mcp/servers", None).await;
    assert_eq!(list, json!([]));
    let (s, again) = h
        .json(Method::POST, "/api/mcp/servers", Some(stdio("kit")))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{again}");
    let (_, perms) = h.json(Method::GET, "/api/permissions", None).await;
    let echo = perms
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["function"] == "mcp__kit__echo")
        .unwrap_or_else(|| panic!("{perms}"));
    assert_eq!(echo["level"], "ask", "the old server's level went with it");
    for seen in h.seen.lock().unwrap().iter() {
        assert!(
            !seen.contains("s3cret"),
            "an answer held the secret: {seen}"
        );
    }
}

/// The spec of alice's server `kit` as the host runs it.
fn spec(user: i64, id: i64, timeout: Duration) -> host::Spec {
    host::Spec {
        id,
        user_id: user,
        name: "kit".into(),
        target: host::Target::Stdio {
            argv: vec!["/workspace/mcp-server".into()],
            env: vec![("SECRET_TOKEN".into(), "s3cret-value-1234".into())],
        },
        timeout,
    }
}

/// A stdio server sees its environment and the user's workspace, and neither the data
/// directory nor the network; it is killed when it hangs, restarted when it breaks (up to
/// its budget, then failed with its last words until tested again), told when a call is
/// given up, listed again when it says its tools changed, and stopped when idle.
#[tokio::test]
async fn a_stdio_server_is_held_in_the_sandbox_and_restarted_within_its_budget() {
    let mock = mock_llm::spawn(mock_llm::Config::default()).await.unwrap();
    let h = hero_with(&[mock.addr()], |s| {
        s.mcp_idle = Duration::from_millis(600);
    })
    .await;
    let alice = me(&h).await;
    let ws = install(&h, alice);
    std::fs::write(ws.join("w.txt"), "in the workspace").unwrap();
    let (s, kit) = h
        .json(Method::POST, "/api/mcp/servers", Some(stdio("kit")))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{kit}");
    let id = kit["id"].as_i64().unwrap();
    let st = &h.st;
    let spec = spec(alice, id, Duration::from_secs(2));
    let call = |tool: &'static str, args: Value| {
        let spec = spec.clone();
        async move {
            st.mcp
                .hosts
                .call(&st.sandbox, &st.http, &spec, tool, &args)
                .await
        }
    };
    assert_eq!(
        call("env", json!({"name": "SECRET_TOKEN"})).await.unwrap(),
        "s3cret-value-1234"
    );
    assert_eq!(
        call("read", json!({"path": "/workspace/w.txt"}))
            .await
            .unwrap(),
        "in the workspace"
    );
    for path in [
        h._dir.path().join("hero.db"),
        h._dir.path().to_path_buf(),
        PathBuf::from("/root/.bashrc"),
    ] {
        let got = call("read", json!({"path": path.display().to_string()})).await;
        assert!(got.is_err(), "{} was read: {got:?}", path.display());
    }
    let err = call("connect", json!({"addr": mock.addr().to_string()}))
        .await
        .unwrap_err();
    assert!(err.contains("cannot connect"), "{err}");

    // Hung: killed at its timeout; the next call works in a fresh process.
    let err = call("sleep", json!({"ms": 10_000})).await.unwrap_err();
    assert!(err.contains("did not answer within 2 s"), "{err}");
    assert_eq!(st.mcp.hosts.count(), 0, "the hung server is gone");
    assert_eq!(call("echo", json!({"text": "a"})).await.unwrap(), "a");

    // Given up (Stop drops the call): the server is told, and goes on.
    let gave_up = tokio::time::timeout(
        Duration::from_millis(300),
        call("sleep", json!({"ms": 5_000})),
    )
    .await;
    assert!(gave_up.is_err());
    let mut told = false;
    for _ in 0..100 {
        if ws.join("cancelled").exists() {
            told = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(told, "the server never heard notifications/cancelled");
    // A call given up is counted out: the server is stopped when idle all the same.
    let mut stopped = false;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        if st.mcp.hosts.count() == 0 {
            stopped = true;
            break;
        }
    }
    assert!(
        stopped,
        "a server whose call was given up was never stopped when idle"
    );
    assert_eq!(call("echo", json!({"text": "b"})).await.unwrap(), "b");

    // Its tools changed: listed again and stored, in the user's chain.
    assert_eq!(call("grow", json!({})).await.unwrap(), "grown");
    let mut grown = Value::Null;
    for _ in 0..100 {
        let (_, s) = h
            .json(Method::GET, &format!("/api/mcp/servers/{id}"), None)
            .await;
        if s["tools"].to_string().contains("mcp__kit__grown") {
            grown = s;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_ne!(grown, Value::Null, "the changed tools were never stored");
    let (_, perms) = h.json(Method::GET, "/api/permissions", None).await;
    assert!(perms.to_string().contains("mcp__kit__grown"), "{perms}");

    // Broken output, one line each; each restart is counted.
    let err = call("garbage", json!({})).await.unwrap_err();
    assert!(err.contains("not JSON-RPC"), "{err}");
    assert!(!err.contains('\n'), "{err}");
    let err = call("flood", json!({})).await.unwrap_err();
    assert!(err.contains("longer than 1 MiB"), "{err}");
    let err = call("crash", json!({})).await.unwrap_err();
    assert!(err.contains("crashing as asked"), "its last words: {err}");
    assert!(
        err.contains("SECRET_TOKEN=[hidden]") && !err.contains("s3cret"),
        "a secret it said is hidden: {err}"
    );
    // The timeout above, garbage, flood and crash: four restarts in a minute, one past its
    // budget: failed, saying why, until tested again.
    let err = call("echo", json!({"text": "c"})).await.unwrap_err();
    assert!(err.contains("failed until it is tested again"), "{err}");
    assert!(
        err.contains("crashing as asked"),
        "with its last words: {err}"
    );
    assert!(!err.contains("s3cret"), "{err}");
    let (_, s) = h
        .json(Method::GET, &format!("/api/mcp/servers/{id}"), None)
        .await;
    assert_eq!(s["status"], "failed", "{s}");
    assert!(!s.to_string().contains("s3cret"), "{s}");
    let (status, tested) = h
        .json(Method::POST, &format!("/api/mcp/servers/{id}/test"), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{tested}");
    assert_eq!(tested["ok"], true, "{tested}");
    assert_eq!(call("echo", json!({"text": "d"})).await.unwrap(), "d");

    // A chain built before the server changed does not call it as it was.
    let before = st
        .db
        .read_with(async |c| hero_backend::execution::mcp::registry(st, c, alice).await)
        .await
        .unwrap();
    let (status, changed) = h
        .json(
            Method::PATCH,
            &format!("/api/mcp/servers/{id}"),
            Some(json!({"transport": {"transport": "stdio", "command": "/workspace/mcp-server", "env": {"SECRET_TOKEN": "a-new-s3cret"}}})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{changed}");
    let cx = hero_backend::execution::functions::Ctx {
        st,
        user_id: alice,
        session_id: 0,
        agent_id: None,
        registry: &before,
        request_id: "r",
    };
    let stale = before
        .handle_tool_call(&cx, "mcp__kit__env", &json!({"name": "SECRET_TOKEN"}))
        .await
        .unwrap()
        .unwrap_err();
    assert!(
        stale.contains("was changed, disabled or removed"),
        "{stale}"
    );
    let now = st
        .db
        .read_with(async |c| hero_backend::execution::mcp::registry(st, c, alice).await)
        .await
        .unwrap();
    let cx = hero_backend::execution::functions::Ctx {
        registry: &now,
        ..cx
    };
    let fresh = now
        .handle_tool_call(&cx, "mcp__kit__env", &json!({"name": "SECRET_TOKEN"}))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        fresh.result, "a-new-s3cret",
        "the new configuration's process"
    );

    // Idle past its time, it is stopped.
    let mut status = String::new();
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let (_, s) = h
            .json(Method::GET, &format!("/api/mcp/servers/{id}"), None)
            .await;
        status = s["status"].as_str().unwrap().to_owned();
        if status == "ready" {
            break;
        }
    }
    assert_eq!(status, "ready");
    assert_eq!(h.st.mcp.hosts.count(), 0);

    // A server that does not start is a result, saying why.
    let (s, broken) = h
        .json(
            Method::POST,
            "/api/mcp/servers",
            Some(json!({"name": "gone", "transport": "stdio", "command": "/workspace/missing"})),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{broken}");
    assert_eq!(broken["status"], "failed", "{broken}");
    assert!(
        broken["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{broken}"
    );
}

/// The test server serving streamable HTTP on loopback: its address.
async fn http_server() -> (tokio::process::Child, std::net::SocketAddr) {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_hero-test-plugin"))
        .args(["--http", "127.0.0.1:0"])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let mut line = String::new();
    tokio::io::BufReader::new(out)
        .read_line(&mut line)
        .await
        .unwrap();
    (child, line.trim().parse().unwrap())
}

/// An HTTP server is reached through the egress policy only: refused until an administrator
/// allows its address, then listed and called, its headers' values never shown back.
#[tokio::test]
async fn an_http_server_is_reached_through_the_egress_policy() {
    let (_server, addr) = http_server().await;
    let mock = mock_llm::spawn(mock_llm::Config::default()).await.unwrap();
    let body = json!({
        "name": "web",
        "transport": "http",
        "url": format!("http://{addr}/mcp"),
        "headers": {"Authorization": "Bearer hdr-s3cret"},
    });
    let closed = hero(&[mock.addr()]).await;
    let (s, refused) = closed
        .json(Method::POST, "/api/mcp/servers", Some(body.clone()))
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{refused}");
    assert!(refused.to_string().contains("egress_allow"), "{refused}");

    let h = hero(&[mock.addr(), addr]).await;
    let (s, web) = h.json(Method::POST, "/api/mcp/servers", Some(body)).await;
    assert_eq!(s, StatusCode::CREATED, "{web}");
    assert_eq!(web["status"], "running", "{web}");
    assert_eq!(web["secret_names"], json!(["Authorization"]));
    assert!(!web.to_string().contains("hdr-s3cret"), "{web}");
    assert!(
        names(&web["tools"], "function").contains(&"mcp__web__echo".to_owned()),
        "{web}"
    );
    let st = &h.st;
    let spec = host::Spec {
        id: web["id"].as_i64().unwrap(),
        user_id: me(&h).await,
        name: "web".into(),
        target: host::Target::Http {
            url: format!("http://{addr}/mcp"),
            headers: Vec::new(),
        },
        timeout: Duration::from_secs(5),
    };
    let got = st
        .mcp
        .hosts
        .call(
            &st.sandbox,
            &st.http,
            &spec,
            "echo",
            &json!({"text": "over HTTP"}),
        )
        .await;
    assert_eq!(got.unwrap(), "over HTTP");
    let err = st
        .mcp
        .hosts
        .call(
            &st.sandbox,
            &st.http,
            &spec,
            "read",
            &json!({"path": "/nothing"}),
        )
        .await
        .unwrap_err();
    assert!(err.contains("cannot read"), "{err}");
}
