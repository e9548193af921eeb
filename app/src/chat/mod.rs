//! The conversation of a session. The server renders it ([`ChatView`]): the agent picker,
//! the stored messages (each drawn as HTML by the shared renderer, [`hero_shared::html`]),
//! and the composer. In the browser, [`client`] takes that markup over with no component:
//! it reads the session's feed through [`events::use_session_events`] (the reactive state)
//! and keeps the DOM up to date from it by hand, each stored message redrawn only when its
//! HTML changed, the reply in flight block by block ([`live`]); what acts inside the
//! messages (prompts, questions, calls' cards, copy buttons) goes through one delegated
//! listener ([`actions`]). What the feed's events do to the page ([`reduce`]) and the plan
//! of a redraw of the stored messages ([`slots`]) are plain Rust, tested without a browser.
//! No view type of Leptos's reaches the wasm.

pub mod actions;
#[cfg(feature = "hydrate")]
pub mod client;
pub mod events;
pub mod live;
pub mod reduce;
pub mod slots;

use hero_shared::api::{AgentDto, SessionDto};
use hero_shared::wire::CompiledView;
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

#[server(prefix = "/_fn", input = leptos::server_fn::codec::Json)]
pub async fn session_view(
    session_id: i64,
    from_seq: Option<i64>,
) -> Result<CompiledView, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::conversation::frames::view(&st, &user, session_id, from_seq)
        .await
        .map_err(fail)
}

/// Starts a turn and returns its message id at once; the reply arrives on the event stream.
#[server(prefix = "/_fn", input = leptos::server_fn::codec::Json)]
pub async fn post_message(
    session_id: i64,
    content: String,
    private: bool,
    attachments: Vec<String>,
) -> Result<String, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    let req = hero_shared::api::PostMessageRequest {
        content,
        private,
        skill_filter: None,
        attachments,
    };
    let handle = hero_backend::conversation::turn::post(&st, &user, session_id, req)
        .await
        .map_err(fail)?;
    Ok(handle.message_id)
}

/// Hides a message (or shows it again): an update frame.
#[server(prefix = "/_fn", input = leptos::server_fn::codec::Json)]
pub async fn set_hidden(
    session_id: i64,
    frame_id: String,
    hidden: bool,
) -> Result<(), ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::conversation::frames::set_hidden(&st, &user, session_id, &frame_id, hidden)
        .await
        .map_err(fail)
}

/// Sends `content` as a new version of the user's message `frame_id`; the reply to it
/// streams through the feed.
#[server(prefix = "/_fn", input = leptos::server_fn::codec::Json)]
pub async fn edit_message(
    session_id: i64,
    frame_id: String,
    content: String,
) -> Result<(), ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::conversation::versions::edit(&st, &user, session_id, &frame_id, &content)
        .await
        .map(drop)
        .map_err(fail)
}

/// Asks the agent for a new version of its reply `frame_id`.
#[server(prefix = "/_fn", input = leptos::server_fn::codec::Json)]
pub async fn regenerate_reply(session_id: i64, frame_id: String) -> Result<(), ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::conversation::versions::regenerate(&st, &user, session_id, &frame_id)
        .await
        .map(drop)
        .map_err(fail)
}

/// Shows version `version` (from 1) of the message `frame_id` is a version of.
#[server(prefix = "/_fn", input = leptos::server_fn::codec::Json)]
pub async fn show_version(
    session_id: i64,
    frame_id: String,
    version: usize,
) -> Result<(), ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::conversation::versions::switch(&st, &user, session_id, &frame_id, version)
        .await
        .map_err(fail)
}

/// Whether `id` can be a frame's id (hex digits and hyphens, as the server makes them): what
/// the browser takes from its address before it goes in a selector.
pub fn is_frame_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
}

/// A code block's text as classed tokens (`hero_backend::highlight`), for the page to draw
/// with `hero_shared::html::highlighted_html`: asked only when a code block appears.
#[server(prefix = "/_fn", input = leptos::server_fn::codec::Json)]
pub async fn highlight_code(
    lang: String,
    code: String,
) -> Result<Vec<(hero_shared::html::Hl, String)>, ServerFnError> {
    use crate::guard::{fail, require_user};
    require_user().await?;
    hero_backend::highlight::tokens_apart(lang, code)
        .await
        .map_err(fail)
}

/// A new session with the conversation up to the message `frame_id`: its id.
#[server(prefix = "/_fn", input = leptos::server_fn::codec::Json)]
pub async fn branch_session(session_id: i64, frame_id: String) -> Result<i64, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::conversation::export::branch(&st, &user, session_id, &frame_id)
        .await
        .map(|s| s.id)
        .map_err(fail)
}

/// What the summary at `before_seq` stands for ("show earlier").
#[server(prefix = "/_fn", input = leptos::server_fn::codec::Json)]
pub async fn earlier_messages(
    session_id: i64,
    before_seq: i64,
) -> Result<(i64, CompiledView), ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::conversation::frames::earlier(&st, &user, session_id, before_seq)
        .await
        .map(|v| (before_seq, v))
        .map_err(fail)
}

/// Stops the session's reply in flight (what arrived is kept) and its calls.
#[server(prefix = "/_fn", input = leptos::server_fn::codec::Json)]
pub async fn abort_turn(session_id: i64) -> Result<usize, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::conversation::turn::stop(&st, &user, session_id)
        .await
        .map_err(fail)
}

#[server(prefix = "/_fn", input = leptos::server_fn::codec::Json)]
pub async fn list_agents() -> Result<Vec<AgentDto>, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::agents::list(&st.db, &st.keys, &user)
        .await
        .map_err(fail)
}

#[server(prefix = "/_fn", input = leptos::server_fn::codec::Json)]
pub async fn set_session_agent(
    session_id: i64,
    agent_id: i64,
) -> Result<SessionDto, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    let req = hero_shared::api::UpdateSessionRequest {
        agent_id: Some(Some(agent_id)),
        ..Default::default()
    };
    hero_backend::conversation::sessions::update(&st.db, &user, session_id, req)
        .await
        .map_err(fail)
}

/// What the browser's [`client`] starts from, in the page's `#chat-data` block.
#[derive(Serialize, Deserialize)]
pub struct ChatData {
    pub session_id: i64,
    /// The session streams its replies (else the page says a reply is being written).
    pub streaming: bool,
    pub initial: CompiledView,
}

/// The conversation as the server renders it; [`client`] takes it over in the browser.
#[component]
pub fn ChatView(
    session: SessionDto,
    initial: CompiledView,
    agents: Vec<AgentDto>,
) -> impl IntoView {
    let session_id = session.id;
    let stored = hero_shared::html::stored_html(&hero_shared::html::messages_html(
        &initial.messages,
        false,
        |_| false,
    ));
    let data = hero_shared::html::json_for_script(
        &serde_json::to_string(&ChatData {
            session_id,
            streaming: session.streaming,
            initial,
        })
        .unwrap_or_default(),
    );
    let current = session.agent_id;
    let mut options: Vec<(String, String, bool)> = Vec::new();
    if current.is_none() {
        options.push((String::new(), "(choose an agent)".into(), true));
    }
    options.extend(
        agents
            .into_iter()
            .map(|a| (a.id.to_string(), a.name, current == Some(a.id))),
    );
    view! {
        // What the browser starts from: a data block, never run (its `<` written as \u003c).
        <script type="application/json" id="chat-data" inner_html=data></script>
        <div class="chat" data-chat="" data-connected="false">
            <div class="chat-agent">
                <span>"Agent"</span>
                <select aria-label="Agent" data-chat-agent="">
                    {options.into_iter().map(|(value, name, selected)| view! {
                        <option value=value selected=selected>{name}</option>
                    }).collect_view()}
                </select>
                <a href=crate::base::href("/agents") class="manage-agents">"Manage agents"</a>
                <a href=crate::base::href("/permissions") class="manage-permissions">"Permissions"</a>
                <a href=crate::base::href("/skills") class="manage-skills">"Skills"</a>
                <a href=crate::base::href("/abilities") class="manage-abilities">"Abilities"</a>
                <a href=crate::base::href("/config") class="manage-config">"Config"</a>
                <a href=crate::base::href("/tasks") class="manage-tasks">"Tasks"</a>
                <a href=crate::base::href("/mcp") class="manage-mcp">"MCP"</a>
                // Both always here, hidden when they do not apply: the client only shows them.
                <a href=crate::base::href(&current.map_or_else(|| "/agents".to_owned(), |a| format!("/agents/{a}/files"))) class="agent-files" hidden=current.is_none()>"Files"</a>
                <span class="badge batch" hidden=session.streaming>"batch mode"</span>
                <span class="spend" data-testid="spend"></span>
                <button type="button" class="view-prompt" data-chat-prompt="">"View system prompt"</button>
            </div>
            <label class="show-hidden"><input type="checkbox" data-chat-hidden=""/>"Show hidden messages"</label>
            <div class="messages" data-testid="messages">
                // "Show earlier messages" is the client's to draw (`html::show_earlier_top_html`):
                // it pages in only with the wasm.
                <div class="earlier-pages"></div>
                <div class="stored" inner_html=stored></div>
                <div class="live-slot"></div>
            </div>
            <button type="button" class="jump-down" aria-label="Jump to the newest message" hidden>"↓"</button>
            <form class="composer">
                // The `/` menu (`hooks::COMMAND_MENU`, each button's `hooks::COMMAND`): what each
                // command does, shown while a command's name is typed.
                <ul class="command-menu" role="listbox" aria-label="Commands" hidden>
                    {hero_shared::command::COMMANDS.iter().map(|c| view! {
                        <li role="option">
                            <button type="button" data-command=format!("/{} ", c.name)>{format!("/{}", c.name)}</button>
                            <span class="muted">{c.help}</span>
                        </li>
                    }).collect_view()}
                </ul>
                // The files chosen for the next message (`hooks::ATTACHED`), as chips.
                <div class="attached" data-attached="" hidden></div>
                <textarea aria-label="Message" placeholder=PLACEHOLDER rows="3" disabled></textarea>
                <label class="attach-button" title="Attach files: text, Markdown, code, CSV, JSON, PDF or images (or drop them here)">
                    <input type="file" multiple data-attach="" aria-label="Attach files"/>"Attach"
                </label>
                <label class="private-toggle" title="Stored and shown, never sent to the agent">
                    <input type="checkbox" data-chat-private=""/>"Private"
                </label>
                <button type="submit" class="send" disabled>"Send"</button>
                <button type="button" class="stop" hidden>"Stop"</button>
            </form>
        </div>
    }
}

/// What the message box says when it writes messages.
pub const PLACEHOLDER: &str = "Write a message (Enter sends, Shift+Enter adds a line)";

/// The spend lines of the session (reference 003).
#[server(prefix = "/_fn", input = leptos::server_fn::codec::Json)]
pub async fn spend_lines(session_id: i64) -> Result<hero_shared::api::SpendDto, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::agents::spend::lines(&st, &user, Some(session_id))
        .await
        .map_err(fail)
}

/// What the session's next call would send as its system prompt.
#[server(prefix = "/_fn", input = leptos::server_fn::codec::Json)]
pub async fn system_prompt(session_id: i64) -> Result<String, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::agents::persona::for_session(&st, &user, session_id)
        .await
        .map_err(fail)
}
