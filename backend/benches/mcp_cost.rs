//! What a user's MCP server costs (reference 004: a warm call on loopback at most 5 ms at p50
//! over the server's own time, p99 reported, stdio and HTTP; a stdio cold start reported),
//! on the test server (`hero-test-plugin`, made with rmcp's server side), whose `noop` takes
//! no time of its own:
//! - a stdio cold start: the sandbox, the spawn, `initialize` and `tools/list`;
//! - a warm `noop` on stdio, through the user's chain as a call runs it (the capability
//!   found, the server's connection, the call and its answer);
//! - a warm `noop` over streamable HTTP on loopback, through the egress policy.
//!
//! Prints p50 and p99; asserts nothing. Without a server given it says so and measures
//! nothing.
//!
//! `cargo build -p server --bin hero-test-plugin && cargo bench -p hero-backend --features
//! test-support --bench mcp_cost -- --server target/debug/hero-test-plugin`

use std::time::{Duration, Instant};

use hero_backend::execution::egress::EgressPolicy;
use hero_backend::execution::functions::Ctx;
use hero_backend::execution::mcp::{self, host};
use hero_backend::test_support;
use hero_shared::api::{CreateMcpServerRequest, McpTransport};
use serde_json::json;

const COLD: usize = 10;
const WARM: usize = 500;

fn quantiles(mut v: Vec<Duration>) -> (f64, f64) {
    v.sort();
    let at = |q: f64| v[((v.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e3;
    (at(0.5), at(0.99))
}

/// [`WARM`] calls of `tool` through the chain `cx` names, each timed.
async fn warm(cx: &Ctx<'_>, tool: &str) -> Vec<Duration> {
    let args = json!({});
    let mut took = Vec::with_capacity(WARM);
    for _ in 0..WARM {
        let t0 = Instant::now();
        let answer = cx.registry.handle_tool_call(cx, tool, &args).await;
        took.push(t0.elapsed());
        assert!(matches!(answer, Some(Ok(_))), "{answer:?}");
    }
    took
}

fn server_program() -> Option<std::path::PathBuf> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == "--server")
        .and_then(|i| args.get(i + 1))
        .map(Into::into)
}

#[tokio::main]
async fn main() {
    let Some(program) = server_program() else {
        println!("mcp: not measured (give `-- --server PATH`, the hero-test-plugin binary)");
        return;
    };
    let program = std::fs::canonicalize(program).expect("the server program");
    // The same program serving streamable HTTP on loopback.
    let mut http = tokio::process::Command::new(&program)
        .args(["--http", "127.0.0.1:0"])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the HTTP server starts");
    let addr: std::net::SocketAddr = {
        use tokio::io::AsyncBufReadExt;
        let mut line = String::new();
        tokio::io::BufReader::new(http.stdout.take().unwrap())
            .read_line(&mut line)
            .await
            .unwrap();
        line.trim().parse().unwrap()
    };
    let settings = hero_backend::Settings {
        egress: EgressPolicy::default().allowing(addr),
        ..Default::default()
    };
    let t = test_support::state_with(settings).await;
    let st = t.st.clone();
    let user = test_support::signed_in(&st, "bench").await;
    let ws = t.dir.path().join("workspaces").join(user.id().to_string());
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::copy(&program, ws.join("mcp-server")).unwrap();
    println!("sandbox: {}", st.sandbox.layers().describe());

    let stdio = mcp::create(
        &st,
        user.id(),
        CreateMcpServerRequest {
            name: "kit".into(),
            transport: McpTransport::Stdio {
                command: "/workspace/mcp-server".into(),
                args: Vec::new(),
                env: Default::default(),
            },
            enabled: true,
            timeout_secs: None,
        },
    )
    .await
    .expect("the stdio server is added");
    assert_eq!(stdio.status, "running", "{stdio:?}");
    let spec = host::Spec {
        id: stdio.id,
        user_id: user.id(),
        name: "kit".into(),
        target: host::Target::Stdio {
            argv: vec!["/workspace/mcp-server".into()],
            env: Vec::new(),
        },
        timeout: Duration::from_secs(60),
    };
    let mut cold = Vec::with_capacity(COLD);
    for _ in 0..COLD {
        let t0 = Instant::now();
        st.mcp
            .hosts
            .test(&st.sandbox, &st.http, &spec)
            .await
            .expect("started");
        cold.push(t0.elapsed());
    }
    let (p50, p99) = quantiles(cold);
    println!(
        "stdio cold start (sandbox, spawn, initialize, tools/list): p50 {p50:.1} ms, p99 {p99:.1} ms ({COLD} starts)"
    );

    let tools = st
        .db
        .read_with(async |c| mcp::registry(&st, c, user.id()).await)
        .await
        .unwrap();
    let cx = Ctx {
        st: &st,
        user_id: user.id(),
        session_id: 0,
        agent_id: None,
        registry: &tools,
        request_id: "bench",
    };
    let (p50, p99) = quantiles(warm(&cx, "mcp__kit__noop").await);
    println!(
        "stdio warm call (a no-op, through the user's chain): p50 {p50:.3} ms, p99 {p99:.3} ms ({WARM} calls)"
    );

    let web = mcp::create(
        &st,
        user.id(),
        CreateMcpServerRequest {
            name: "web".into(),
            transport: McpTransport::Http {
                url: format!("http://{addr}/mcp"),
                headers: Default::default(),
            },
            enabled: true,
            timeout_secs: None,
        },
    )
    .await
    .expect("the HTTP server is added");
    assert_eq!(web.status, "running", "{web:?}");
    let tools = st
        .db
        .read_with(async |c| mcp::registry(&st, c, user.id()).await)
        .await
        .unwrap();
    let cx = Ctx {
        registry: &tools,
        ..cx
    };
    let (p50, p99) = quantiles(warm(&cx, "mcp__web__noop").await);
    println!(
        "HTTP warm call (a no-op, loopback, through the egress policy and the user's chain): p50 {p50:.3} ms, p99 {p99:.3} ms ({WARM} calls)"
    );
}
