//! Plugins (reference 000 "Plugin system with ability exports") on loopback: directories
//! read at start-up, their processes as abilities, and their tools, run by the test plugin
//! (an MCP server made with rmcp, `hero-test-plugin`) in the sandbox, as gated functions:
//! what it may not reach, and how its process dies when it misbehaves.

mod support;

use std::path::Path;
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use support::*;

fn ids(list: &Value) -> Vec<&str> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap())
        .collect()
}

/// The signed-in user's id.
async fn me(h: &Hero) -> i64 {
    h.json(Method::GET, "/api/me", None).await.1["id"]
        .as_i64()
        .unwrap()
}

/// The test plugin copied to `root/<plugin>/bin/run`, everything readable by the sandbox's
/// uid (an administrator's install).
fn install_program(root: &Path, plugin: &str) {
    use std::os::unix::fs::PermissionsExt;
    let bin = root.join(plugin).join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_hero-test-plugin"), bin.join("run")).unwrap();
    for dir in [root.to_path_buf(), root.join(plugin), bin] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

/// `root/<plugin>/plugin.toml` with the test plugin as its program.
fn install(root: &Path, plugin: &str, more: &str) {
    install_program(root, plugin);
    std::fs::write(
        root.join(plugin).join("plugin.toml"),
        format!("name = \"{plugin}\"\nversion = \"0.1.0\"\ndescription = \"For tests\"\ncommand = \"bin/run\"\n{more}"),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        root.join(plugin).join("plugin.toml"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
}

/// Plugins an administrator installed: each directory read at start-up, a wrong manifest
/// `failed` with its reason (start-up goes on), a good one `ready` with the processes it
/// ships, which are abilities of source `plugin`, read-only, loaded by name.
#[tokio::test]
async fn plugins_are_read_at_start_up_and_their_processes_are_abilities() {
    let plugins = tempfile::tempdir().unwrap();
    let write = |path: &str, text: &str| {
        let p = plugins.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    write(
        "weather/plugin.toml",
        "name = \"weather\"\nversion = \"1.0.0\"\ndescription = \"Forecasts\"\ncommand = \"bin/run --stdio\"\nprocesses = [\"processes/*.md\"]\n",
    );
    install_program(plugins.path(), "weather");
    write(
        "weather/processes/brief.md",
        "Brief {{user.name}} on {{args}}.",
    );
    write("broken/plugin.toml", "name = \n");
    write(
        "outside/plugin.toml",
        "name = \"outside\"\nversion = \"1\"\ncommand = \"../weather/bin/run\"\n",
    );
    write(
        "misnamed/plugin.toml",
        "name = \"other\"\nversion = \"1\"\ncommand = \"run\"\n",
    );
    let dir = plugins.path().to_owned();
    let mock = mock_llm::spawn(mock_llm::Config::default()).await.unwrap();
    let h = hero_with(&[mock.addr()], move |s| s.plugins.dir = Some(dir)).await;
    let (s, list) = h.json(Method::GET, "/api/plugins", None).await;
    assert_eq!(s, StatusCode::OK, "{list}");
    let seen: Vec<(&str, &str)> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["name"].as_str().unwrap(), p["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        seen,
        [
            ("broken", "failed"),
            ("misnamed", "failed"),
            ("outside", "failed"),
            ("weather", "ready")
        ]
    );
    let error = |i: usize| list[i]["error"].as_str().unwrap().to_owned();
    assert!(error(0).contains("plugin.toml line 1"), "{}", error(0));
    assert!(error(1).contains("directory's name"), "{}", error(1));
    assert!(
        error(2).contains("outside the plugin's directory"),
        "{}",
        error(2)
    );
    let abilities = list[3]["abilities"].as_array().unwrap();
    assert_eq!(abilities[0], "plugin:weather__brief", "{abilities:?}");
    assert!(
        abilities.contains(&json!("plugin:weather__echo")),
        "{abilities:?}"
    );
    assert_eq!(list[3]["version"], "1.0.0");

    // Its process: an ability of source plugin, read-only, by name.
    let (_, found) = h
        .json(
            Method::GET,
            "/api/abilities?source=plugin&type=process",
            None,
        )
        .await;
    assert_eq!(ids(&found), ["plugin:weather__brief"]);
    assert_eq!(found[0]["name"], "weather__brief");
    assert_eq!(found[0]["editable"], false);
    let (_, one) = h
        .json(Method::GET, "/api/abilities/plugin:weather__brief", None)
        .await;
    assert_eq!(one["content"], "Brief {{user.name}} on {{args}}.");
    let (s, _) = h
        .json(
            Method::PATCH,
            "/api/abilities/plugin:weather__brief",
            Some(json!({"content": "mine"})),
        )
        .await;
    assert_eq!(s, StatusCode::CONFLICT);
    let (s, _) = h
        .json(
            Method::POST,
            "/api/abilities",
            Some(json!({"name": "weather__brief", "content": "mine"})),
        )
        .await;
    assert_eq!(s, StatusCode::CONFLICT, "its name is taken");
    let (session, _) = h.session_with("anthropic", &mock, KEY).await;
    h.stream(
        session,
        r#"[[mock text="\u0040system(process, {name: \"weather__brief\", args: \"rain\"})" then="Loaded."]]"#,
    )
    .await;
    let frames = frames_when(&h, session, |f| agent_messages(f).len() == 2).await;
    let result = of_type(&frames, "result")[0];
    assert_eq!(result["payload"]["output"], "Brief alice on rain.");
}

/// A plugin's tools are functions `<plugin>__<tool>` of source `plugin`: gated like any
/// other (asking by default, or as its manifest says), run by the agent in the user's own
/// process of the plugin, which is `running` until it has been idle long enough.
#[tokio::test]
async fn a_plugins_tools_are_gated_functions_the_agent_runs() {
    let plugins = tempfile::tempdir().unwrap();
    install(
        plugins.path(),
        "kit",
        "[functions.echo]\ndanger = \"safe\"\nauto_approve = true\n",
    );
    let dir = plugins.path().to_owned();
    let mock = mock_llm::spawn(mock_llm::Config::default()).await.unwrap();
    let h = hero_with(&[mock.addr()], move |s| {
        s.plugins.dir = Some(dir);
        s.plugins.idle = Duration::from_millis(400);
    })
    .await;
    let (_, list) = h.json(Method::GET, "/api/plugins", None).await;
    assert_eq!(list[0]["status"], "ready", "{list}");

    // Listed with source plugin; the tool whose name is too long is not.
    let (_, found) = h
        .json(
            Method::GET,
            "/api/abilities?source=plugin&type=function",
            None,
        )
        .await;
    let found_ids = ids(&found);
    for tool in ["echo", "noop", "sleep", "read", "write", "connect"] {
        assert!(
            found_ids.contains(&format!("plugin:kit__{tool}").as_str()),
            "{found_ids:?}"
        );
    }
    assert!(!found.to_string().contains("far_too_long"), "{found}");
    let echo = found
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "kit__echo")
        .unwrap();
    assert_eq!(echo["autoApprovePolicy"], "always");
    assert_eq!(echo["permissions"]["dangerLevel"], "safe");
    assert_eq!(echo["editable"], false);
    let (_, read) = h
        .json(Method::GET, "/api/abilities/plugin:kit__read", None)
        .await;
    assert_eq!(read["autoApprovePolicy"], "ask", "{read}");
    assert_eq!(read["permissions"]["dangerLevel"], "moderate");
    assert_eq!(read["schema"]["properties"]["path"]["type"], "string");
    let (s, _) = h
        .json(Method::DELETE, "/api/abilities/plugin:kit__read", None)
        .await;
    assert_eq!(s, StatusCode::CONFLICT, "it belongs to Hero");

    // Allowed always by its manifest: it runs at once.
    let (session, _) = h.session_with("anthropic", &mock, KEY).await;
    h.stream(
        session,
        r#"[[mock tool=kit__echo input={"text": "from the plugin"} then="Echoed."]]"#,
    )
    .await;
    let frames = frames_when(&h, session, |f| agent_messages(f).len() == 2).await;
    let result = of_type(&frames, "result")[0];
    assert_eq!(result["payload"]["outcome"], "ok", "{result}");
    assert_eq!(result["payload"]["output"], "from the plugin");
    let (_, list) = h.json(Method::GET, "/api/plugins", None).await;
    assert_eq!(list[0]["status"], "running", "{list}");

    // One that asks waits for the user; approved, it runs, in /state.
    h.stream(
        session,
        r#"[[mock tool=kit__write input={"path": "/state/note", "text": "kept"} then="Wrote."]]"#,
    )
    .await;
    let frames = h.frames(session).await;
    let request = of_type(&frames, "request").last().copied().unwrap().clone();
    assert_eq!(request["payload"]["function"], "kit__write");
    assert_eq!(request["payload"]["status"], "pending", "{request}");
    let rid = request["id"].as_str().unwrap();
    let (s, body) = decide(&h, session, rid, true).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    let frames = frames_when(&h, session, |f| {
        of_type(f, "result").iter().any(|r| r["parent_id"] == rid)
    })
    .await;
    let result = of_type(&frames, "result").last().copied().unwrap();
    assert_eq!(result["payload"]["output"], "written", "{result}");
    let state = h
        ._dir
        .path()
        .join("plugin-state/kit")
        .join(me(&h).await.to_string());
    assert_eq!(std::fs::read_to_string(state.join("note")).unwrap(), "kept");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&state).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "the user's state is its owner's alone");

    // Idle past its time, the process stops.
    let mut status = String::new();
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let (_, list) = h.json(Method::GET, "/api/plugins", None).await;
        status = list[0]["status"].as_str().unwrap().to_owned();
        if status == "ready" {
            break;
        }
    }
    assert_eq!(status, "ready");
    assert_eq!(h.st.plugins.processes_running(), 0);
}

/// What a plugin's process cannot reach (the data directory, another user's state, a
/// workspace, the network, its own directory for writing), and how it dies alone when it
/// hangs, floods, writes what is not JSON-RPC, crashes, or is given up (Stop): the call
/// fails in one line, and the next call works in a fresh process.
#[tokio::test]
async fn a_plugin_is_held_in_the_sandbox_and_dies_alone() {
    let plugins = tempfile::tempdir().unwrap();
    install(plugins.path(), "kit", "");
    let dir = plugins.path().to_owned();
    let mock = mock_llm::spawn(mock_llm::Config::default()).await.unwrap();
    let h = hero_with(&[mock.addr()], move |s| {
        s.plugins.dir = Some(dir);
        s.plugins.timeout = Duration::from_secs(2);
    })
    .await;
    let st = &h.st;
    let call = |user: i64, tool: &'static str, args: Value| async move {
        st.plugins.call(&st.sandbox, "kit", user, tool, &args).await
    };
    let alice = me(&h).await;
    let bob = alice + 1000;
    assert_eq!(
        call(alice, "echo", json!({"text": "hi"})).await.unwrap(),
        "hi"
    );

    // Its own state, kept between calls; its directory read-only.
    call(
        alice,
        "write",
        json!({"path": "/state/secret", "text": "alice's"}),
    )
    .await
    .unwrap();
    assert_eq!(
        call(alice, "read", json!({"path": "/state/secret"}))
            .await
            .unwrap(),
        "alice's"
    );
    assert!(
        call(alice, "read", json!({"path": "/plugin/plugin.toml"}))
            .await
            .unwrap()
            .contains("name = \"kit\"")
    );
    let refused = call(
        alice,
        "write",
        json!({"path": "/plugin/plugin.toml", "text": "x"}),
    )
    .await;
    assert!(refused.is_err(), "{refused:?}");

    // Not another user's state, the data directory, a workspace, or the network.
    let alice_state = h
        ._dir
        .path()
        .join("plugin-state/kit")
        .join(alice.to_string());
    let err = call(bob, "read", json!({"path": "/state/secret"}))
        .await
        .unwrap_err();
    assert!(err.contains("cannot read"), "{err}");
    std::fs::create_dir_all(h._dir.path().join("workspaces/1")).unwrap();
    std::fs::write(h._dir.path().join("workspaces/1/w.txt"), "workspace").unwrap();
    for path in [
        alice_state.join("secret"),
        h._dir.path().join("workspaces/1/w.txt"),
        h._dir.path().to_path_buf(),
        Path::new("/workspace/w.txt").to_path_buf(),
        Path::new("/etc/hostname").to_path_buf(),
    ] {
        let got = call(bob, "read", json!({"path": path.display().to_string()})).await;
        assert!(got.is_err(), "{} was read: {got:?}", path.display());
    }
    let err = call(alice, "connect", json!({"addr": mock.addr().to_string()}))
        .await
        .unwrap_err();
    assert!(err.contains("cannot connect"), "{err}");

    // A hung call dies at its timeout; the next works.
    let err = call(alice, "sleep", json!({"ms": 10_000}))
        .await
        .unwrap_err();
    assert!(err.contains("did not answer within 2 s"), "{err}");
    assert_eq!(
        call(alice, "echo", json!({"text": "again"})).await.unwrap(),
        "again"
    );

    // Output that is not JSON-RPC, a line over 1 MiB, a crash: one line each.
    let err = call(alice, "garbage", json!({})).await.unwrap_err();
    assert!(err.contains("not JSON-RPC"), "{err}");
    assert_eq!(
        call(alice, "echo", json!({"text": "1"})).await.unwrap(),
        "1"
    );
    let err = call(alice, "flood", json!({})).await.unwrap_err();
    assert!(err.contains("longer than 1 MiB"), "{err}");
    assert_eq!(
        call(alice, "echo", json!({"text": "2"})).await.unwrap(),
        "2"
    );
    let err = call(alice, "crash", json!({})).await.unwrap_err();
    assert!(err.contains("kit__crash failed"), "{err}");
    assert!(!err.contains('\n'), "{err}");
    assert_eq!(
        call(alice, "echo", json!({"text": "3"})).await.unwrap(),
        "3"
    );

    // Given up (a Stop drops the call), the process dies with it.
    let running = st.plugins.processes_running();
    let gave_up = tokio::time::timeout(
        Duration::from_millis(300),
        call(alice, "sleep", json!({"ms": 10_000})),
    )
    .await;
    assert!(gave_up.is_err());
    assert_eq!(st.plugins.processes_running(), running - 1);
    assert_eq!(
        call(alice, "echo", json!({"text": "4"})).await.unwrap(),
        "4"
    );
}
