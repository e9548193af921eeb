//! A plugin for Hero's tests and benchmarks: an MCP server over stdio, built with the same
//! SDK Hero's client is (`rmcp`). Its tools do what a test needs a plugin to try: answer
//! (`echo`, `noop`), take long (`sleep`), reach for what it must not (`read`, `connect`),
//! keep state (`write`), and misbehave (`flood`, `garbage`, `crash`). One tool's name is too
//! long to become a function. As a user's MCP server it also says what its environment holds
//! (`env`), grows a tool and says so (`grow`, then `notifications/tools/list_changed`), notes
//! a cancelled `sleep` in its working directory (`cancelled`), and with `--http ADDR` serves
//! streamable HTTP on ADDR (printing the address it bound, `127.0.0.1:0` for any port).
//! Never installed by Hero itself.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::{Value, json};

struct TestPlugin;

/// Whether `grow` has added its tool (one process, every session).
static GROWN: AtomicBool = AtomicBool::new(false);

fn hinted(t: Tool, read_only: bool, destructive: bool) -> Tool {
    let mut a = ToolAnnotations::default();
    a.read_only_hint = Some(read_only);
    a.destructive_hint = Some(destructive);
    t.with_annotations(a)
}

fn tool(name: &'static str, description: &'static str, properties: Value) -> Tool {
    let schema = json!({"type": "object", "properties": properties});
    let Value::Object(schema) = schema else {
        unreachable!("an object")
    };
    Tool::new(name, description, schema)
}

fn text(t: impl Into<String>) -> CallToolResponse {
    CallToolResponse::Complete(CallToolResult::success(vec![ContentBlock::text(t)]))
}

fn failed(t: impl Into<String>) -> CallToolResponse {
    CallToolResponse::Complete(CallToolResult::error(vec![ContentBlock::text(t)]))
}

fn arg<'a>(args: &'a Option<serde_json::Map<String, Value>>, name: &str) -> &'a str {
    args.as_ref()
        .and_then(|a| a.get(name))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

impl ServerHandler for TestPlugin {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_instructions("Use the test server's echo to say things back.")
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let s = |d: &str| json!({"type": "string", "description": d});
        let mut tools = vec![
            hinted(
                tool(
                    "echo",
                    "Says its text back.",
                    json!({"text": s("what to say")}),
                ),
                true,
                false,
            ),
            tool("noop", "Does nothing.", json!({"n": {"type": "integer"}})),
            tool(
                "sleep",
                "Waits `ms` milliseconds.",
                json!({"ms": {"type": "integer"}}),
            ),
            tool("read", "Reads a file.", json!({"path": s("its path")})),
            tool(
                "write",
                "Writes a file.",
                json!({"path": s("its path"), "text": s("what it holds")}),
            ),
            tool(
                "connect",
                "Opens a TCP connection to `addr`.",
                json!({"addr": s("host:port")}),
            ),
            tool("flood", "Writes a line of 2 MiB.", json!({})),
            tool("garbage", "Writes a line that is not JSON.", json!({})),
            hinted(tool("crash", "Exits at once.", json!({})), false, true),
            tool(
                "a_tool_whose_name_is_far_too_long_to_become_a_function_of_hero",
                "Never offered.",
                json!({}),
            ),
            tool(
                "env",
                "Says an environment variable's value.",
                json!({"name": s("its name")}),
            ),
            tool(
                "grow",
                "Adds the tool `grown` and says the tools changed.",
                json!({}),
            ),
        ];
        if GROWN.load(Ordering::SeqCst) {
            tools.push(tool("grown", "Grown by `grow`.", json!({})));
        }
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let a = &request.arguments;
        Ok(match &*request.name {
            "echo" => text(arg(a, "text")),
            "noop" => text(""),
            "sleep" => {
                let ms = a
                    .as_ref()
                    .and_then(|a| a.get("ms"))
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
                tokio::select! {
                    () = tokio::time::sleep(std::time::Duration::from_millis(ms)) => {}
                    () = context.ct.cancelled() => {
                        let _ = std::fs::write("cancelled", format!("{ms}"));
                    }
                }
                text(format!("slept {ms} ms"))
            }
            "read" => match std::fs::read_to_string(arg(a, "path")) {
                Ok(t) => text(t),
                Err(e) => failed(format!("cannot read {}: {e}", arg(a, "path"))),
            },
            "write" => match std::fs::write(arg(a, "path"), arg(a, "text")) {
                Ok(()) => text("written"),
                Err(e) => failed(format!("cannot write {}: {e}", arg(a, "path"))),
            },
            "connect" => match std::net::TcpStream::connect(arg(a, "addr")) {
                Ok(_) => text("connected"),
                Err(e) => failed(format!("cannot connect: {e}")),
            },
            "flood" => {
                let mut out = std::io::stdout().lock();
                let _ = out.write_all(&vec![b'x'; 2 << 20]);
                let _ = out.write_all(b"\n");
                let _ = out.flush();
                text("flooded")
            }
            "garbage" => {
                let mut out = std::io::stdout().lock();
                let _ = out.write_all(b"this is not JSON-RPC\n");
                let _ = out.flush();
                text("written")
            }
            "crash" => {
                // What it knows goes with it: Hero hides a secret a server says.
                let token = std::env::var("SECRET_TOKEN").unwrap_or_default();
                eprintln!("hero-test-plugin: crashing as asked (SECRET_TOKEN={token})");
                std::process::exit(3)
            }
            "env" => text(std::env::var(arg(a, "name")).unwrap_or_default()),
            "grow" => {
                GROWN.store(true, Ordering::SeqCst);
                let _ = context.peer.notify_tool_list_changed().await;
                text("grown")
            }
            "grown" => text("I grew"),
            other => return Err(ErrorData::invalid_params(format!("no tool {other}"), None)),
        })
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let [_, flag, addr] = &args[..]
        && flag == "--http"
    {
        return serve_http(addr).await;
    }
    let Ok(service) = TestPlugin.serve(rmcp::transport::stdio()).await else {
        eprintln!("hero-test-plugin: the client did not initialise");
        std::process::exit(1);
    };
    let _ = service.waiting().await;
}

/// Serves streamable HTTP at `/mcp` on `addr`, printing the address bound.
async fn serve_http(addr: &str) {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
    let service = StreamableHttpService::new(
        || Ok(TestPlugin),
        LocalSessionManager::default().into(),
        StreamableHttpServerConfig::default().disable_allowed_hosts(),
    );
    let app = axum::Router::new().nest_service("/mcp", service);
    let Ok(listener) = tokio::net::TcpListener::bind(addr).await else {
        eprintln!("hero-test-plugin: cannot bind {addr}");
        std::process::exit(1);
    };
    if let Ok(bound) = listener.local_addr() {
        println!("{bound}");
        let _ = std::io::stdout().flush();
    }
    // As Hero's own listener: an answer is not held back for the client's ACK.
    use axum::serve::ListenerExt;
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    let _ = axum::serve(listener, app).await;
}
