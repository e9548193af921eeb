//! The workspace: a sidebar with the user's sessions (children indented under their parent,
//! archived in red, agent sessions in blue) and the page of the session the route names.

use std::collections::HashMap;

use hero_shared::api::{SessionDto, SessionStatus, UserDto};
use leptos::prelude::*;
use leptos_router::components::Redirect;
use leptos_router::hooks::use_params_map;

use leptos::server_fn::ServerFn;

use crate::auth::{Logout, current_user, error_text};
use crate::enhance::FnForm;
use crate::json::{Json, resource};

#[server(prefix = "/_fn")]
pub async fn list_sessions() -> Result<Vec<SessionDto>, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::conversation::sessions::list(&st.db, &user)
        .await
        .map_err(fail)
}

#[server(prefix = "/_fn")]
pub async fn create_session(
    name: String,
    parent_session_id: Option<i64>,
) -> Result<SessionDto, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    let req = hero_shared::api::CreateSessionRequest {
        name,
        parent_session_id,
        status: None,
        agent_id: None,
    };
    hero_backend::conversation::sessions::create(&st, &user, req)
        .await
        .map_err(fail)
}

#[server(prefix = "/_fn")]
pub async fn update_session(
    id: i64,
    name: Option<String>,
    status: Option<SessionStatus>,
) -> Result<SessionDto, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    let req = hero_shared::api::UpdateSessionRequest {
        name,
        status,
        ..Default::default()
    };
    hero_backend::conversation::sessions::update(&st.db, &user, id, req)
        .await
        .map_err(fail)
}

/// How many levels of sub-sessions the sidebar indents (`.depth-N` in the stylesheet).
const MAX_INDENT: usize = 8;

/// A session and its depth in the parent/child tree, in display order.
#[derive(Debug, Clone, PartialEq)]
pub struct TreeRow {
    pub session: SessionDto,
    pub depth: usize,
}

/// Orders sessions as a tree: each parent followed by its children, depth-first. A session
/// whose parent is not in the list is shown as a root, so nothing is ever hidden.
pub fn tree(sessions: &[SessionDto]) -> Vec<TreeRow> {
    let ids: std::collections::HashSet<i64> = sessions.iter().map(|s| s.id).collect();
    let mut children: HashMap<Option<i64>, Vec<&SessionDto>> = HashMap::new();
    for s in sessions {
        let parent = s
            .parent_session_id
            .filter(|p| ids.contains(p) && *p != s.id);
        children.entry(parent).or_default().push(s);
    }
    let mut out = Vec::with_capacity(sessions.len());
    let mut seen = std::collections::HashSet::new();
    // Explicit stack: a deep chain of sub-sessions must not overflow the wasm stack.
    let mut stack: Vec<(&SessionDto, usize)> = children
        .get(&None)
        .map(|v| v.iter().rev().map(|s| (*s, 0)).collect())
        .unwrap_or_default();
    while let Some((s, depth)) = stack.pop() {
        if !seen.insert(s.id) {
            continue;
        }
        out.push(TreeRow {
            session: s.clone(),
            depth,
        });
        if let Some(kids) = children.get(&Some(s.id)) {
            stack.extend(kids.iter().rev().map(|k| (*k, depth + 1)));
        }
    }
    // Sessions caught in a parent loop (the server refuses them; old data might hold one).
    for s in sessions {
        if !seen.contains(&s.id) {
            out.push(TreeRow {
                session: s.clone(),
                depth: 0,
            });
        }
    }
    out
}

/// Everything the workspace page loads. All of it is made once, at the top of the page: a
/// resource created inside a suspended part of the page, after that part resolved, can
/// leave the server's async render waiting for ever. The page is the server's: only its
/// islands (the forms, the chat) act in the browser, and what they change is shown by
/// loading the page again.
#[derive(Clone, Copy)]
struct PageData {
    sessions: Resource<Result<Vec<SessionDto>, ServerFnError>, Json>,
    chat: Resource<Result<Option<hero_shared::wire::CompiledView>, ServerFnError>, Json>,
    agents: Resource<Result<Vec<hero_shared::api::AgentDto>, ServerFnError>, Json>,
    current: Memo<Option<i64>>,
}

#[component]
pub fn Workspace() -> impl IntoView {
    let user = resource(|| (), |_| current_user());
    let sessions = resource(|| (), |_| list_sessions());
    let params = use_params_map();
    let current = Memo::new(move |_| {
        params
            .read()
            .get("id")
            .and_then(|id| id.parse::<i64>().ok())
    });
    // The open session's conversation and the user's agents load with the page, beside the
    // session list (not inside its suspended view, see `ChatView`).
    let chat = resource(
        move || current.get(),
        |id| async move {
            match id {
                Some(id) => crate::chat::session_view(id, None).await.map(Some),
                None => Ok(None),
            }
        },
    );
    let agents = resource(|| (), |_| crate::chat::list_agents());
    let data = PageData {
        sessions,
        chat,
        agents,
        current,
    };
    view! {
        <Suspense fallback=|| view! { <p class="loading">"Loading…"</p> }>
            {move || user.get().map(|u| match u {
                Ok(u) => view! { <SignedIn user=u data/> }.into_any(),
                Err(_) => view! { <Redirect path=crate::base::href("/login")/> }.into_any(),
            })}
        </Suspense>
    }
}

#[component]
fn SignedIn(user: UserDto, data: PageData) -> impl IntoView {
    let PageData {
        sessions,
        chat,
        agents,
        current,
    } = data;

    view! {
        <div class="workspace">
            // On a phone the sidebar is a drawer: this box (its labels are the buttons) opens
            // it, with or without the wasm.
            <input type="checkbox" id="drawer" class="drawer-check" aria-label="Show the sessions"/>
            <aside class="sidebar">
                <header class="sidebar-head">
                    <a class="brand" href=crate::base::href("/")>"Hero"</a>
                    <span class="whoami" data-testid="whoami">{user.username.clone()}</span>
                    {user.is_admin.then(|| view! { <a href=crate::base::href("/admin") class="admin-link">"Users"</a> })}
                    <crate::theme::ThemeToggle/>
                    <SignOut/>
                    <label for="drawer" class="drawer-close" title="Close the sessions">"✕"</label>
                </header>
                <form class="sidebar-search" method="get" action=crate::base::href("/search") role="search">
                    <input type="search" name="q" maxlength="500" aria-label="Search your sessions" data-search-box="" placeholder="Search (Ctrl+K)"/>
                </form>
                <NewSession/>
                <nav class="session-list" aria-label="Sessions">
                    <Transition>
                        {move || sessions.get().map(|r| match r {
                            Ok(list) => view! { <SessionTree sessions=list current=current/> }.into_any(),
                            Err(e) => view! { <p class="form-error">{error_text(&e)}</p> }.into_any(),
                        })}
                    </Transition>
                </nav>
                <ImportExport/>
            </aside>
            <label for="drawer" class="drawer-backdrop" aria-hidden="true"></label>
            <main class="content">
                <label for="drawer" class="drawer-button">"☰ Sessions"</label>
                <Transition>
                    {move || {
                        // What failed to load is said, never left "Loading…".
                        let failed = |what: &str, e: &ServerFnError| {
                            let text = format!("{what} could not be loaded: {}", error_text(e));
                            view! { <p class="form-error" role="alert">{text}</p> }.into_any()
                        };
                        let loading = || view! { <p class="loading">"Loading…"</p> }.into_any();
                        let Some(id) = current.get() else {
                            return view! { <Welcome/> }.into_any();
                        };
                        let list = match sessions.get() {
                            None => return loading(),
                            Some(Err(e)) => return failed("Your sessions", &e),
                            Some(Ok(list)) => list,
                        };
                        let Some(s) = list.into_iter().find(|s| s.id == id) else {
                            return view! { <p class="not-found">"This session does not exist, or is not yours."</p> }.into_any();
                        };
                        let view = match chat.get() {
                            Some(Err(e)) => return failed("This conversation", &e),
                            Some(Ok(Some(view))) if view.session_id == id => view,
                            _ => return loading(),
                        };
                        match agents.get() {
                            None => loading(),
                            Some(Err(e)) => failed("Your agents", &e),
                            Some(Ok(agents)) => view! { <SessionPage session=s view agents/> }.into_any(),
                        }
                    }}
                </Transition>
            </main>
        </div>
    }
}

/// Signs out, then loads the sign-in page.
#[component]
fn SignOut() -> impl IntoView {
    view! {
        <FnForm action=Logout::PATH then="/login" class="logout">
            <button type="submit" class="link-button">"Sign out"</button>
        </FnForm>
    }
}

/// Creates a session, then opens it.
#[component]
fn NewSession() -> impl IntoView {
    view! {
        <FnForm action=CreateSession::PATH then="/s/{id}" class="new-session">
            <input type="text" name="name" placeholder="New session name" maxlength="200" required aria-label="New session name"/>
            <button type="submit">"New session"</button>
        </FnForm>
    }
}

#[component]
fn SessionTree(sessions: Vec<SessionDto>, current: Memo<Option<i64>>) -> impl IntoView {
    if sessions.is_empty() {
        return view! { <p class="empty">"No sessions yet."</p> }.into_any();
    }
    let rows = tree(&sessions);
    view! {
        <ul>
            {rows.into_iter().map(|row| {
                let id = row.session.id;
                // Indented by a class, not an inline style: the pages' policy applies the
                // stylesheet alone. Deeper than MAX_INDENT shows at MAX_INDENT.
                let class = format!(
                    "session status-{} depth-{}",
                    row.session.status.as_str(),
                    row.depth.min(MAX_INDENT)
                );
                view! {
                    <li class=class data-depth=row.depth data-session-id=id data-status=row.session.status.as_str()>
                        <a href=crate::base::href(&format!("/s/{id}")) aria-current=(current.get_untracked() == Some(id)).then_some("page")>
                            {row.session.name}
                        </a>
                    </li>
                }
            }).collect_view()}
        </ul>
    }
    .into_any()
}

#[component]
fn Welcome() -> impl IntoView {
    view! {
        <section class="welcome">
            <h1>"Welcome to Hero"</h1>
            <p>"Create a session in the sidebar, or pick one to continue."</p>
        </section>
    }
}

#[component]
fn SessionPage(
    session: SessionDto,
    view: hero_shared::wire::CompiledView,
    agents: Vec<hero_shared::api::AgentDto>,
) -> impl IntoView {
    let id = session.id;
    let for_chat = session.clone();
    let archived = session.status == SessionStatus::Archived;
    view! {
        <section class="session-page" data-session-id=id>
            <header class="session-head">
                <h1 class="session-title" data-testid="session-title">{session.name.clone()}</h1>
                <span class=format!("badge status-{}", session.status.as_str()) data-testid="session-status">
                    {session.status.as_str()}
                </span>
            </header>
            <SessionActions id name=session.name.clone() archived/>
            <crate::chat::ChatView session=for_chat initial=view agents/>
        </section>
    }
}

/// Rename, archive and restore; the page loads again with the change (the sidebar shows
/// the name too).
#[component]
fn SessionActions(id: i64, name: String, archived: bool) -> impl IntoView {
    let (next_status, toggle_label) = if archived {
        (SessionStatus::Active, "Restore")
    } else {
        (SessionStatus::Archived, "Archive")
    };
    view! {
        <div class="session-actions">
            <FnForm action=UpdateSession::PATH then="reload" class="rename">
                <input type="hidden" name="id" value=id/>
                <input type="text" name="name" value=name maxlength="200" required aria-label="Session name"/>
                <button type="submit">"Rename"</button>
            </FnForm>
            <FnForm action=UpdateSession::PATH then="reload" class="toggle-archive">
                <input type="hidden" name="id" value=id/>
                <input type="hidden" name="status" value=next_status.as_str()/>
                <button type="submit">{toggle_label}</button>
            </FnForm>
            <span class="session-export">
                "Export: "
                <a href=crate::base::href(&format!("/api/sessions/{id}/export?format=markdown")) download="">"Markdown"</a>
                " · "
                <a href=crate::base::href(&format!("/api/sessions/{id}/export?format=json")) download="">"JSON"</a>
            </span>
        </div>
    }
}

/// A session brought in from a JSON export (a plain form: the server sends the browser on
/// to the new session), and everything the user owns taken out as one archive.
#[component]
fn ImportExport() -> impl IntoView {
    view! {
        <details class="import-export">
            <summary>"Import and export"</summary>
            <form class="import" method="post" enctype="multipart/form-data" action=crate::base::href("/api/sessions/import")>
                <input type="file" name="file" accept=".json,application/json" required aria-label="A Hero session export (JSON)"/>
                <button type="submit">"Import a session"</button>
            </form>
            <a href=crate::base::href("/api/export") download="" class="export-all">"Export everything (.tar)"</a>
        </details>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(id: i64, parent: Option<i64>) -> SessionDto {
        SessionDto {
            id,
            name: format!("s{id}"),
            status: SessionStatus::Active,
            parent_session_id: parent,
            agent_id: None,
            streaming: true,
            created_at: String::new(),
            updated_at: String::new(),
        }
    }

    fn shape(rows: &[TreeRow]) -> Vec<(i64, usize)> {
        rows.iter().map(|r| (r.session.id, r.depth)).collect()
    }

    #[test]
    fn children_follow_their_parent_indented() {
        let list = vec![
            s(1, None),
            s(2, None),
            s(3, Some(1)),
            s(4, Some(3)),
            s(5, Some(2)),
        ];
        assert_eq!(
            shape(&tree(&list)),
            vec![(1, 0), (3, 1), (4, 2), (2, 0), (5, 1)]
        );
    }

    #[test]
    fn orphans_and_loops_are_still_shown() {
        let list = vec![s(1, Some(99)), s(2, Some(3)), s(3, Some(2)), s(4, Some(4))];
        let rows = tree(&list);
        assert_eq!(rows.len(), 4);
        assert_eq!(shape(&rows)[..2], [(1, 0), (4, 0)]);
    }
}
