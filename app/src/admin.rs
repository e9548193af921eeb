//! The admin page (`/admin`, administrators only): every account with its use, a form to
//! make one, and per account: disable or enable, make or unmake an administrator, reset the
//! password (which ends their sign-ins). The same rules as `/api/admin/users`, from
//! `hero_backend::accounts::admin`; anyone else is told the page is not theirs.

use hero_shared::api::AdminUserDto;
use leptos::prelude::*;
use leptos_router::components::Redirect;

use crate::auth::{current_user, error_text};
use crate::enhance::FnForm;
use crate::json::resource;

#[server(prefix = "/_fn")]
pub async fn list_users() -> Result<Vec<AdminUserDto>, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    let rows = hero_backend::accounts::admin::list(&st, &user)
        .await
        .map_err(fail)?;
    Ok(rows
        .into_iter()
        .map(|(u, n)| hero_backend::accounts::admin::dto(u, n))
        .collect())
}

/// Makes an account; `is_admin` is a checkbox (present when ticked).
#[server(prefix = "/_fn")]
pub async fn create_user(
    username: String,
    password: String,
    is_admin: Option<String>,
) -> Result<(), ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::accounts::admin::create(&st, &user, &username, &password, is_admin.is_some())
        .await
        .map_err(fail)?;
    Ok(())
}

/// Changes account `id`: each field present is changed ("true" or "false" for the flags).
#[server(prefix = "/_fn")]
pub async fn update_user(
    id: i64,
    disabled: Option<String>,
    is_admin: Option<String>,
    password: Option<String>,
) -> Result<(), ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    let flag = |v: Option<String>| v.map(|v| v == "true");
    let change = hero_backend::accounts::admin::Change {
        disabled: flag(disabled),
        is_admin: flag(is_admin),
        password,
    };
    hero_backend::accounts::admin::update(&st, &user, id, change)
        .await
        .map_err(fail)?;
    Ok(())
}

#[component]
pub fn AdminPage() -> impl IntoView {
    let user = resource(|| (), |_| current_user());
    view! {
        <Suspense>
            {move || user.get().map(|u| match u {
                Ok(u) if u.is_admin => view! { <Admin me=u.id/> }.into_any(),
                Ok(_) => view! {
                    <main class="admin-page">
                        <p><a href=crate::base::href("/")>"← Back to sessions"</a></p>
                        <h1>"Users"</h1>
                        <p class="form-error" data-testid="not-admin">"Only an administrator manages users. Ask one to change your account."</p>
                    </main>
                }.into_any(),
                Err(_) => view! { <Redirect path=crate::base::href("/login")/> }.into_any(),
            })}
        </Suspense>
    }
}

#[component]
fn Admin(me: i64) -> impl IntoView {
    use leptos::server_fn::ServerFn;
    let list = resource(|| (), |_| list_users());
    view! {
        <main class="admin-page">
            <p><a href=crate::base::href("/")>"← Back to sessions"</a></p>
            <h1>"Users"</h1>
            <p class="muted">"Everything here is also what "<code>"hero user …"</code>" does. A new password or a disabling ends the account's sign-ins at once."</p>
            <Suspense>
                {move || list.get().map(|r| match r {
                    Ok(list) => view! {
                        <table class="admin-users">
                            <thead><tr>
                                <th>"User"</th><th>"Sessions"</th><th>"Agents"</th><th>"Spend"</th>
                                <th>"Tokens in / out"</th><th>"Last active"</th><th>"Change"</th>
                            </tr></thead>
                            <tbody>
                                {list.into_iter().map(|u| view! { <UserRow u me/> }).collect_view()}
                            </tbody>
                        </table>
                    }.into_any(),
                    Err(e) => view! { <p class="form-error">{error_text(&e)}</p> }.into_any(),
                })}
            </Suspense>
            <h2>"New user"</h2>
            <FnForm action=CreateUser::PATH then="refresh" class="admin-create" done="User created.">
                <input type="text" name="username" required maxlength="64" aria-label="Username" placeholder="Username"/>
                <input type="password" name="password" required autocomplete="new-password" aria-label="Password" placeholder="Password"/>
                <label><input type="checkbox" name="is_admin" value="true"/>" Administrator"</label>
                <button type="submit">"Create"</button>
            </FnForm>
            <p role="status" class="muted"></p>
        </main>
    }
}

#[component]
fn UserRow(u: AdminUserDto, me: i64) -> impl IntoView {
    use leptos::server_fn::ServerFn;
    let own = u.id == me;
    let n = &u.usage;
    let state = match (u.is_admin, u.disabled) {
        (_, true) => "disabled",
        (true, false) => "administrator",
        (false, false) => "user",
    };
    let tokens = format!("{} / {}", n.input_tokens, n.output_tokens);
    let spend = format!("${:.2} ({} calls)", n.cost_usd, n.calls);
    let last = n
        .last_active
        .as_deref()
        .map(hero_shared::api::to_the_minute)
        .unwrap_or_else(|| "never".into());
    let id = u.id.to_string();
    let (toggle_disabled, disable_label) = if u.disabled {
        ("false", "Enable")
    } else {
        ("true", "Disable")
    };
    let (toggle_admin, admin_label) = if u.is_admin {
        ("false", "Unmake administrator")
    } else {
        ("true", "Make administrator")
    };
    let password_label = format!("New password for {}", u.username);
    // One's own administration and enabling are another administrator's to change.
    let flags = (!own).then(|| {
        let (id, id2) = (id.clone(), id.clone());
        view! {
            <FnForm action=UpdateUser::PATH then="refresh" class="admin-disable">
                <input type="hidden" name="id" value=id2/>
                <input type="hidden" name="disabled" value=toggle_disabled/>
                <button type="submit">{disable_label}</button>
            </FnForm>
            <FnForm action=UpdateUser::PATH then="refresh" class="admin-admin">
                <input type="hidden" name="id" value=id/>
                <input type="hidden" name="is_admin" value=toggle_admin/>
                <button type="submit">{admin_label}</button>
            </FnForm>
        }
    });
    view! {
        <tr data-user=u.username.clone() class:disabled=u.disabled>
            <td><strong>{u.username.clone()}</strong>" "<span class=format!("badge user-{state}")>{state}</span></td>
            <td class="num">{n.sessions}</td>
            <td class="num">{n.agents}</td>
            <td class="num">{spend}</td>
            <td class="num">{tokens}</td>
            <td>{last}</td>
            <td class="admin-actions">
                {flags}
                <FnForm action=UpdateUser::PATH then="refresh" class="admin-password" done="Password changed; their sign-ins have ended.">
                    <input type="hidden" name="id" value=id/>
                    <input type="password" name="password" required autocomplete="new-password" aria-label=password_label placeholder="New password"/>
                    <button type="submit">"Reset password"</button>
                </FnForm>
            </td>
        </tr>
    }
}
