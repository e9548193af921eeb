//! A plugin for Hero's tests and benchmarks: an MCP server over stdio, built with the same
//! SDK Hero's client is (`rmcp`). Its tools do what a test needs a plugin to try: answer
//! (`echo`, `noop`), take long (`sleep`), reach for what it must not (`read`, `connect`),
//! keep state (`write`), and misbehave (`flood`, `garbage`, `crash`). One tool's name is too
//! long to become a function. Never installed by Hero itself.

use std::io::Write;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::{Value, json};

struct TestPlugin;

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
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let s = |d: &str| json!({"type": "string", "description": d});
        Ok(ListToolsResult::with_all_items(vec![
            tool(
                "echo",
                "Says its text back.",
                json!({"text": s("what to say")}),
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
            tool("crash", "Exits at once.", json!({})),
            tool(
                "a_tool_whose_name_is_far_too_long_to_become_a_function_of_hero",
                "Never offered.",
                json!({}),
            ),
        ]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
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
                tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
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
            "crash" => std::process::exit(3),
            other => return Err(ErrorData::invalid_params(format!("no tool {other}"), None)),
        })
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let Ok(service) = TestPlugin.serve(rmcp::transport::stdio()).await else {
        eprintln!("hero-test-plugin: the client did not initialise");
        std::process::exit(1);
    };
    let _ = service.waiting().await;
}
