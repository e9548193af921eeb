//! The Permissions page: every function an agent may call, its default level (reference
//! 000: websearch asks, help runs at once) and the user's own, which they change here.

use hero_shared::api::{PermissionDto, WorkspaceDto};
use leptos::prelude::*;
use leptos_router::components::Redirect;

use crate::auth::{current_user, error_text};
use crate::json::resource;

#[server(prefix = "/_fn")]
pub async fn list_permissions() -> Result<Vec<PermissionDto>, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::execution::permissions::list(&st, &user)
        .await
        .map_err(fail)
}

#[server(prefix = "/_fn")]
pub async fn set_permission(
    function: String,
    level: String,
) -> Result<PermissionDto, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    let level = hero_shared::calls::Permission::parse(&level).ok_or_else(|| {
        fail(hero_backend::Error::Invalid(format!(
            "{level:?} is not a level: always, ask or never"
        )))
    })?;
    hero_backend::execution::permissions::set(&st, &user, &function, level)
        .await
        .map_err(fail)
}

#[server(prefix = "/_fn")]
pub async fn workspace_usage() -> Result<WorkspaceDto, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::execution::functions::bash::workspace(&st, &user)
        .await
        .map_err(fail)
}

#[server(prefix = "/_fn")]
pub async fn empty_workspace() -> Result<WorkspaceDto, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::execution::functions::bash::empty_workspace(&st, &user)
        .await
        .map_err(fail)
}

/// `bytes` in MiB, one decimal.
fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

#[component]
pub fn PermissionsPage() -> impl IntoView {
    let user = resource(|| (), |_| current_user());
    view! {
        <Suspense>
            {move || user.get().map(|u| match u {
                Ok(_) => view! { <Permissions/> }.into_any(),
                Err(_) => view! { <Redirect path=crate::base::href("/login")/> }.into_any(),
            })}
        </Suspense>
    }
}

/// The levels and their forms; a form sent by [`crate::enhance`] reads the page again.
#[component]
fn Permissions() -> impl IntoView {
    use leptos::server_fn::ServerFn;
    let list = resource(|| (), |_| list_permissions());
    let workspace = resource(|| (), |_| workspace_usage());
    view! {
        <main class="permissions-page">
            <p><a href=crate::base::href("/")>"← Back to sessions"</a></p>
            <h1>"Permissions"</h1>
            <p class="muted">"What your agents may run: always (at once), ask (a card in the chat waits for your approval) or never (the agent is told it was denied)."</p>
            <Suspense>
                {move || list.get().map(|r| match r {
                    Ok(list) => view! {
                        <table class="permissions">
                            <thead><tr><th>"Function"</th><th>"Danger"</th><th>"Default"</th><th>"Yours"</th></tr></thead>
                            <tbody>
                                {list.into_iter().map(|p| view! { <PermissionRow p/> }).collect_view()}
                            </tbody>
                        </table>
                    }.into_any(),
                    Err(e) => view! { <p class="form-error">{error_text(&e)}</p> }.into_any(),
                })}
            </Suspense>
            <h2>"Workspace"</h2>
            <Suspense>
                {move || workspace.get().map(|r| match r {
                    Ok(w) => {
                        let full = w.used_bytes >= w.quota_bytes;
                        let said = format!(
                            "Your bash workspace holds {} of its {} quota.{}",
                            mib(w.used_bytes),
                            mib(w.quota_bytes),
                            if full { " It is full: no command runs until files are removed from it." } else { "" }
                        );
                        view! {
                            <p class="workspace-usage" class:over=full>{said}</p>
                            <crate::enhance::FnForm action=EmptyWorkspace::PATH then="refresh" class="workspace-form">
                                <button type="submit">"Empty the workspace"</button>
                            </crate::enhance::FnForm>
                        }.into_any()
                    }
                    Err(e) => view! { <p class="form-error">{error_text(&e)}</p> }.into_any(),
                })}
            </Suspense>
        </main>
    }
}

#[component]
fn PermissionRow(p: PermissionDto) -> impl IntoView {
    use leptos::server_fn::ServerFn;
    let PermissionDto {
        function,
        description,
        default,
        auto_approve,
        danger_level,
        level,
        capability,
    } = p;
    // One that asks every time (reference 003's "Ask Always") cannot be set to always.
    let levels: &[&str] = match auto_approve {
        hero_shared::calls::AutoApprove::Always => &["always", "ask", "never"],
        hero_shared::calls::AutoApprove::Never => &["ask", "never"],
    };
    let danger = danger_level.as_str();
    let label = format!("Level of {function}");
    let current = level.as_str();
    let (row, name) = (function.clone(), function.clone());
    view! {
        <tr data-function=row>
            <td>
                <strong>{name}</strong>
                {capability.map(|c| view! { <span class="capability-tag">{c}</span> })}
                <div class="muted">{description}</div>
            </td>
            <td class=format!("danger danger-{danger}")>{danger}</td>
            <td class="level-default">{default.as_str()}</td>
            <td>
                <crate::enhance::FnForm action=SetPermission::PATH then="refresh" class="permission-form">
                    <input type="hidden" name="function" value=function/>
                    <select name="level" aria-label=label>
                        {levels.iter().copied().map(|l| view! {
                            <option value=l selected=l == current>{l}</option>
                        }).collect_view()}
                    </select>
                    <button type="submit">"Save"</button>
                </crate::enhance::FnForm>
            </td>
        </tr>
    }
}
