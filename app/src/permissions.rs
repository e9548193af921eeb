//! The Permissions page: every function an agent may call, its default level (reference
//! 000: websearch asks, help runs at once) and the user's own, which they change here.

use hero_shared::api::PermissionDto;
use leptos::prelude::*;
use leptos_router::components::Redirect;

use crate::auth::{current_user, error_text};
use crate::chat::elements::ClientOnly;
use crate::json::resource;

#[server(prefix = "/_fn")]
pub async fn list_permissions() -> Result<Vec<PermissionDto>, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::permissions::list(&st, &user)
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
    hero_backend::permissions::set(&st, &user, &function, level)
        .await
        .map_err(fail)
}

#[component]
pub fn PermissionsPage() -> impl IntoView {
    let user = resource(|| (), |_| current_user());
    view! {
        <Suspense>
            {move || user.get().map(|u| match u {
                Ok(_) => view! { <Permissions/> }.into_any(),
                Err(_) => view! { <Redirect path="/login"/> }.into_any(),
            })}
        </Suspense>
    }
}

/// The levels and their forms, one island.
#[island]
fn Permissions() -> impl IntoView {
    let set = ServerAction::<SetPermission>::new();
    let list = resource(move || set.version().get(), |_| list_permissions());
    let error = move || {
        set.value()
            .get()
            .and_then(Result::err)
            .map(|e| view! { <p class="form-error" role="alert">{error_text(&e)}</p> })
    };
    view! {
        <main class="permissions-page">
            <p><a href="/">"← Back to sessions"</a></p>
            <h1>"Permissions"</h1>
            <p class="muted">"What your agents may run: always (at once), ask (a card in the chat waits for your approval) or never (the agent is told it was denied)."</p>
            {error}
            <Transition>
                {move || list.get().map(|r| match r {
                    Ok(list) => view! {
                        <table class="permissions">
                            <thead><tr><th>"Function"</th><th>"Default"</th><th>"Yours"</th></tr></thead>
                            <tbody>
                                {list.into_iter().map(|p| view! { <PermissionRow p set/> }).collect_view()}
                            </tbody>
                        </table>
                    }.into_any(),
                    Err(e) => view! { <p class="form-error">{error_text(&e)}</p> }.into_any(),
                })}
            </Transition>
        </main>
    }
}

#[component]
fn PermissionRow(p: PermissionDto, set: ServerAction<SetPermission>) -> impl IntoView {
    let PermissionDto {
        function,
        description,
        default,
        level,
    } = p;
    let label = format!("Level of {function}");
    let current = level.as_str();
    let (row, name) = (function.clone(), function.clone());
    view! {
        <tr data-function=row>
            <td><strong>{name}</strong><div class="muted">{description}</div></td>
            <td class="level-default">{default.as_str()}</td>
            <td>
                <ActionForm action=set attr:class="permission-form">
                    <input type="hidden" name="function" value=function/>
                    // Made in the browser: a server-rendered <select> does not hydrate.
                    <ClientOnly fallback=move || view! { <span class="level-now">{current}</span> }>
                        <select name="level" aria-label=label.clone()>
                            {["always", "ask", "never"].into_iter().map(|l| view! {
                                <option value=l selected=l == current>{l}</option>
                            }).collect_view()}
                        </select>
                    </ClientOnly>
                    <button type="submit">"Save"</button>
                </ActionForm>
            </td>
        </tr>
    }
}
