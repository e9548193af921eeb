//! The MCP servers page (`/mcp`, reference 004): the user's own MCP servers, each a program
//! in their sandbox (stdio: its command under `/usr` or `/workspace`, arguments, environment)
//! or a URL (streamable HTTP, with headers) that the egress policy must let through. A
//! server is added (and started, to list its tools), tested again, enabled or disabled, and
//! removed; its tools are then on the Permissions page, each asking first. Environment
//! values and headers are never shown back: only their names.

use hero_shared::api::{McpServerDto, McpTestResult};
use leptos::prelude::*;
use leptos_router::components::Redirect;

use crate::auth::{current_user, error_text};
use crate::enhance::FnForm;
use crate::json::resource;

#[server(prefix = "/_fn")]
pub async fn list_mcp_servers() -> Result<Vec<McpServerDto>, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::execution::mcp::list(&st, user.id())
        .await
        .map_err(fail)
}

/// `NAME=value` (environment) or `Name: value` (headers) lines, blank lines skipped; a line
/// of neither form is refused, naming it.
#[cfg(feature = "ssr")]
fn pairs(text: &str, sep: char) -> Result<std::collections::BTreeMap<String, String>, String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| match l.split_once(sep) {
            Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_owned(), v.trim().to_owned())),
            _ => Err(format!("{l:?} is not of the form name{sep}value")),
        })
        .collect()
}

/// Adds a server: `target` is its command (stdio) or its URL (http); `args` one a line;
/// `secrets` its environment (`NAME=value`) or headers (`Name: value`), one a line.
#[server(prefix = "/_fn")]
pub async fn add_mcp_server(
    name: String,
    transport: String,
    target: String,
    args: String,
    secrets: String,
    timeout_secs: Option<u32>,
) -> Result<McpServerDto, ServerFnError> {
    use crate::guard::{fail, require_user};
    use hero_shared::api::McpTransport;
    let (st, user) = require_user().await?;
    let bad = |why: String| fail(hero_backend::Error::Invalid(why));
    let transport = match transport.as_str() {
        "http" => McpTransport::Http {
            url: target.trim().to_owned(),
            headers: pairs(&secrets, ':').map_err(bad)?,
        },
        _ => McpTransport::Stdio {
            command: target.trim().to_owned(),
            args: args
                .lines()
                .map(str::trim)
                .filter(|a| !a.is_empty())
                .map(str::to_owned)
                .collect(),
            env: pairs(&secrets, '=').map_err(bad)?,
        },
    };
    let req = hero_shared::api::CreateMcpServerRequest {
        name: name.trim().to_owned(),
        transport,
        enabled: true,
        timeout_secs,
    };
    hero_backend::execution::mcp::create(&st, user.id(), req)
        .await
        .map_err(fail)
}

#[server(prefix = "/_fn")]
pub async fn test_mcp_server(id: i64) -> Result<McpTestResult, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::execution::mcp::test(&st, user.id(), id)
        .await
        .map_err(fail)
}

#[server(prefix = "/_fn")]
pub async fn enable_mcp_server(id: i64, enabled: bool) -> Result<McpServerDto, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    let req = hero_shared::api::UpdateMcpServerRequest {
        enabled: Some(enabled),
        ..Default::default()
    };
    hero_backend::execution::mcp::update(&st, user.id(), id, req)
        .await
        .map_err(fail)
}

#[server(prefix = "/_fn")]
pub async fn remove_mcp_server(id: i64) -> Result<(), ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::execution::mcp::delete(&st, user.id(), id)
        .await
        .map_err(fail)
}

#[component]
pub fn McpPage() -> impl IntoView {
    let user = resource(|| (), |_| current_user());
    view! {
        <Suspense>
            {move || user.get().map(|u| match u {
                Ok(_) => view! { <Servers/> }.into_any(),
                Err(_) => view! { <Redirect path=crate::base::href("/login")/> }.into_any(),
            })}
        </Suspense>
    }
}

#[component]
fn Servers() -> impl IntoView {
    use leptos::server_fn::ServerFn;
    let list = resource(|| (), |_| list_mcp_servers());
    view! {
        <main class="mcp-page">
            <p><a href=crate::base::href("/")>"← Back to sessions"</a></p>
            <h1>"MCP servers"</h1>
            <p role="status" class="muted"></p>
            <p class="muted">
                "Servers whose tools your agents may call, each asking you first (the Permissions page changes that). "
                "A stdio server runs in your sandbox, as bash does: it sees your workspace at /workspace and /usr, and no network. "
                "An HTTP server is reached through the server's egress policy: an address inside your network needs an administrator's "
                <code>"egress_allow"</code>" entry."
            </p>
            <Suspense>
                {move || list.get().map(|r| match r {
                    Ok(list) if list.is_empty() => view! { <p class="muted mcp-none">"No MCP server yet."</p> }.into_any(),
                    Ok(list) => view! {
                        <ul class="mcp-servers">
                            {list.into_iter().map(|s| view! { <Server s/> }).collect_view()}
                        </ul>
                    }.into_any(),
                    Err(e) => view! { <p class="form-error">{error_text(&e)}</p> }.into_any(),
                })}
            </Suspense>
            <h2>"Add a server"</h2>
            <FnForm action=AddMcpServer::PATH then="refresh" class="mcp-add" done="Added.">
                <label>"Name " <input name="name" required pattern="[a-z0-9-]{1,24}" placeholder="files" aria-label="Name"/></label>
                <label>"Transport "
                    <select name="transport" aria-label="Transport">
                        <option value="stdio" selected>"stdio (a program in your sandbox)"</option>
                        <option value="http">"HTTP (a URL)"</option>
                    </select>
                </label>
                <label>"Command or URL " <input name="target" required placeholder="/workspace/server or https://…/mcp" aria-label="Command or URL"/></label>
                <label>"Arguments, one a line (stdio) " <textarea name="args" rows="2" aria-label="Arguments"></textarea></label>
                <label>"Environment (NAME=value) or headers (Name: value), one a line " <textarea name="secrets" rows="2" aria-label="Secrets"></textarea></label>
                <label>"Timeout of a call, seconds " <input name="timeout_secs" type="number" min="1" max="600" placeholder="60" aria-label="Timeout"/></label>
                <button type="submit">"Add and start"</button>
            </FnForm>
        </main>
    }
}

#[component]
fn Server(s: McpServerDto) -> impl IntoView {
    use leptos::server_fn::ServerFn;
    let (test_id, toggle_id, remove_id) = (s.id.to_string(), s.id.to_string(), s.id.to_string());
    let where_ = s
        .command
        .clone()
        .map(|c| {
            std::iter::once(c)
                .chain(s.args.iter().cloned())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .or(s.url.clone())
        .unwrap_or_default();
    let secrets = (!s.secret_names.is_empty()).then(|| {
        let what = if s.transport == "http" {
            "Headers"
        } else {
            "Environment"
        };
        format!("{what}: {} (values hidden)", s.secret_names.join(", "))
    });
    let status = s.status.clone();
    let enable = (!s.enabled).to_string();
    let toggle = if s.enabled { "Disable" } else { "Enable" };
    let skipped = (!s.skipped.is_empty()).then(|| s.skipped.join("; "));
    view! {
        <li class="mcp-server" data-server=s.name.clone()>
            <h3>{s.name.clone()} " " <span class=format!("mcp-status status-{status}")>{status.clone()}</span></h3>
            <p class="muted">{s.transport.clone()} ": " <code>{where_}</code></p>
            {secrets.map(|t| view! { <p class="muted mcp-secrets">{t}</p> })}
            {s.error.clone().map(|e| view! { <p class="form-error mcp-error">{e}</p> })}
            {s.instructions.clone().map(|i| view! { <p class="mcp-instructions">{i}</p> })}
            <ul class="mcp-tools">
                {s.tools.iter().map(|t| view! {
                    <li data-function=t.function.clone()>
                        <code>{t.function.clone()}</code>
                        " " <span class=format!("danger danger-{}", t.danger_level.as_str())>{t.danger_level.as_str()}</span>
                        " " <span class="muted">{t.description.clone()}</span>
                    </li>
                }).collect_view()}
            </ul>
            {skipped.map(|t| view! { <p class="muted mcp-skipped">"Not offered: " {t}</p> })}
            <div class="mcp-actions">
                <FnForm action=TestMcpServer::PATH then="refresh" class="mcp-test" done=format!("Tested {}.", s.name)>
                    <input type="hidden" name="id" value=test_id/>
                    <button type="submit">"Test"</button>
                </FnForm>
                <FnForm action=EnableMcpServer::PATH then="refresh" class="mcp-enable" done=format!("{} {}.", if s.enabled { "Disabled" } else { "Enabled" }, s.name)>
                    <input type="hidden" name="id" value=toggle_id/>
                    <input type="hidden" name="enabled" value=enable/>
                    <button type="submit">{toggle}</button>
                </FnForm>
                <FnForm action=RemoveMcpServer::PATH then="refresh" class="mcp-remove" done=format!("Removed {}.", s.name)>
                    <input type="hidden" name="id" value=remove_id/>
                    <button type="submit">"Remove"</button>
                </FnForm>
            </div>
        </li>
    }
}
