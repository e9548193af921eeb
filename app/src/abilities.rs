//! The Abilities page (`/abilities`, reference 003's renamed "Processes"): every ability the
//! user has (reference 000: functions and processes, from Hero, the user or a plugin) with
//! its type, source, danger, whether it asks, and description, filtered by type and source
//! (a plain GET form). Hero's are read-only; the user's own processes are created, edited
//! (`?edit=user:N`, a text area with a live preview, and a preview rendered for a chosen
//! session, `&session=N`) and deleted here.

use hero_shared::api::{AbilityDto, AbilityType, SessionDto};
use leptos::prelude::*;
use leptos_router::components::Redirect;
use leptos_router::hooks::use_query_map;

use crate::auth::{current_user, error_text};
use crate::enhance::FnForm;
use crate::json::resource;

#[server(prefix = "/_fn")]
pub async fn list_abilities(
    kind: Option<String>,
    source: Option<String>,
) -> Result<Vec<AbilityDto>, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    // A choice of the filter's form ("" is all).
    fn read<T: serde::de::DeserializeOwned>(v: Option<String>) -> Option<T> {
        v.filter(|s| !s.is_empty())
            .and_then(|s| serde_json::from_value(serde_json::Value::String(s)).ok())
    }
    let filter = hero_backend::agents::abilities::Filter {
        kind: read(kind),
        source: read(source),
        category: None,
    };
    hero_backend::agents::abilities::list(&st, &user, &filter)
        .await
        .map_err(fail)
}

#[server(prefix = "/_fn")]
pub async fn get_ability(id: String) -> Result<AbilityDto, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::agents::abilities::get(&st, &user, &id)
        .await
        .map_err(fail)
}

#[server(prefix = "/_fn")]
pub async fn create_process(
    name: String,
    description: String,
    content: String,
) -> Result<AbilityDto, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    let req = hero_shared::api::CreateProcessRequest {
        name,
        description,
        content,
    };
    hero_backend::agents::abilities::create(&st, &user, req)
        .await
        .map_err(fail)
}

#[server(prefix = "/_fn")]
pub async fn update_process(
    id: String,
    name: String,
    description: String,
    content: String,
) -> Result<AbilityDto, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    let req = hero_shared::api::UpdateProcessRequest {
        name: Some(name),
        description: Some(description),
        content: Some(content),
    };
    hero_backend::agents::abilities::update(&st, &user, &id, req)
        .await
        .map_err(fail)
}

#[server(prefix = "/_fn")]
pub async fn delete_process(id: String) -> Result<(), ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::agents::abilities::delete(&st, &user, &id)
        .await
        .map_err(fail)
}

/// A process's text with its variables filled for `session_id` (none: no session's names).
#[server(prefix = "/_fn")]
pub async fn render_process(id: String, session_id: Option<i64>) -> Result<String, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    let req = hero_shared::api::RenderProcessRequest {
        session_id,
        args: None,
    };
    hero_backend::agents::abilities::render(&st, &user, &id, req)
        .await
        .map_err(fail)
}

#[component]
pub fn AbilitiesPage() -> impl IntoView {
    let user = resource(|| (), |_| current_user());
    let query = use_query_map();
    let q = |key: &str| query.read_untracked().get(key).unwrap_or_default();
    let (kind, source, edit) = (q("type"), q("source"), q("edit"));
    let session = q("session").parse::<i64>().ok();
    view! {
        <Suspense>
            {move || user.get().map(|u| match u {
                Ok(_) => view! {
                    <Abilities kind=kind.clone() source=source.clone() edit=edit.clone() session/>
                }.into_any(),
                Err(_) => view! { <Redirect path=crate::base::href("/login")/> }.into_any(),
            })}
        </Suspense>
    }
}

/// Whether an ability asks before it runs: at once, asks (the user may allow it always),
/// or asks every time (reference 003's "Ask Always").
fn asks(a: &AbilityDto) -> &'static str {
    use hero_shared::calls::Permission;
    match (a.kind, a.auto_approve_policy) {
        (AbilityType::Process, _) | (_, Permission::Always) => "at once",
        (_, Permission::Ask) => "asks",
        (_, Permission::Never) => "asks every time",
    }
}

fn type_str(t: AbilityType) -> &'static str {
    match t {
        AbilityType::Function => "function",
        AbilityType::Process => "process",
    }
}

#[component]
fn Abilities(kind: String, source: String, edit: String, session: Option<i64>) -> impl IntoView {
    use leptos::server_fn::ServerFn;
    let filter = (kind.clone(), source.clone());
    let list = resource(
        move || filter.clone(),
        |(k, s)| list_abilities(Some(k), Some(s)),
    );
    let choice = |value: &'static str, label: &'static str, current: &str| {
        view! { <option value=value selected=value == current>{label}</option> }
    };
    let editing = (!edit.is_empty()).then(|| {
        view! { <Editor id=edit.clone() session/> }
    });
    view! {
        <main class="abilities-page">
            <p><a href=crate::base::href("/")>"← Back to sessions"</a></p>
            <h1>"Abilities"</h1>
            <p class="muted">"What your agents can do: functions Hero runs, and processes, instructions in markdown with {{user.name}}, {{agent.name}}, {{session.name}}, {{date}}, {{time}} and {{args}}. A process named with underscores then onstart_ begins every session."</p>
            <span class="saved" role="status"></span>
            <form method="get" class="abilities-filter">
                <label>"Type "
                    <select name="type">
                        {choice("", "all", &kind)}
                        {choice("function", "functions", &kind)}
                        {choice("process", "processes", &kind)}
                    </select>
                </label>
                <label>"Source "
                    <select name="source">
                        {choice("", "all", &source)}
                        {choice("builtin", "builtin", &source)}
                        {choice("system", "system", &source)}
                        {choice("user", "yours", &source)}
                        {choice("plugin", "plugin", &source)}
                    </select>
                </label>
                <button type="submit">"Filter"</button>
            </form>
            {editing}
            <Suspense>
                {move || list.get().map(|r| match r {
                    Ok(list) => view! {
                        <table class="abilities">
                            <thead><tr><th>"Name"</th><th>"Type"</th><th>"Source"</th><th>"Danger"</th><th>"Runs"</th><th>"Description"</th></tr></thead>
                            <tbody>
                                {list.into_iter().map(|a| view! { <AbilityRow a/> }).collect_view()}
                            </tbody>
                        </table>
                    }.into_any(),
                    Err(e) => view! { <p class="form-error" role="alert">{error_text(&e)}</p> }.into_any(),
                })}
            </Suspense>
            <h2>"New process"</h2>
            <FnForm action=CreateProcess::PATH then="refresh" class="process-form new-process" done="Process created">
                <label>"Name" <input type="text" name="name" required maxlength="64" pattern="[A-Za-z0-9_\\-]{1,64}" placeholder="weekly-review"/></label>
                <label>"Description" <input type="text" name="description" maxlength="1000"/></label>
                <label>"Content (markdown)"
                    <textarea name="content" rows="8" required data-preview="new-process-preview"></textarea>
                </label>
                <button type="submit">"Create process"</button>
            </FnForm>
            <h3>"Preview"</h3>
            <div class="file-preview" id="new-process-preview"></div>
        </main>
    }
}

#[component]
fn AbilityRow(a: AbilityDto) -> impl IntoView {
    let runs = asks(&a);
    let danger = a.permissions.danger_level.as_str();
    let name = a.name.clone();
    let link = a
        .editable
        .then(|| crate::base::href(&format!("/abilities?edit={}", a.id)));
    let startup = a
        .startup
        .then_some(view! { <span class="badge">"startup"</span> });
    view! {
        <tr data-ability=a.id.clone()>
            <td>
                {match link {
                    Some(href) => view! { <a href=href class="edit-process">{name}</a> }.into_any(),
                    None => view! { <strong>{name}</strong> }.into_any(),
                }}
                " " {startup}
            </td>
            <td>{type_str(a.kind)}</td>
            <td><span class="badge">{a.source.as_str()}</span></td>
            <td class=format!("danger danger-{danger}")>{danger}</td>
            <td>{runs}</td>
            <td class="muted">{a.description.clone()}</td>
        </tr>
    }
}

/// A process of the user's own: its form (a live preview of what is typed), Delete, and its
/// text rendered for a session chosen in a plain GET form.
#[component]
fn Editor(id: String, session: Option<i64>) -> impl IntoView {
    use leptos::server_fn::ServerFn;
    let key = id.clone();
    let ability = resource(move || key.clone(), get_ability);
    let sessions = resource(|| (), |_| crate::sessions::list_sessions());
    let key = id.clone();
    let rendered = resource(
        move || (key.clone(), session),
        |(id, session)| async move {
            match session {
                Some(s) => render_process(id, Some(s)).await.map(Some),
                None => Ok(None),
            }
        },
    );
    let body = move || {
        ability.get().map(|r| match r {
            Ok(a) if a.editable => {
                let id = a.id.clone();
                let (id_form, id_render, id_delete) = (id.clone(), id.clone(), id.clone());
                let content = a.content.clone().unwrap_or_default();
                let preview = hero_shared::markdown::to_html(&content);
                let choose: Vec<SessionDto> = sessions.get().and_then(Result::ok).unwrap_or_default();
                let shown = rendered.get().and_then(Result::ok).flatten().map(|text| {
                    view! {
                        <h3>"Rendered for the session"</h3>
                        <div class="file-preview process-rendered" inner_html=hero_shared::markdown::to_html(&text)></div>
                    }
                });
                let failed = rendered.get().and_then(Result::err).map(|e| {
                    view! { <p class="form-error" role="alert">{error_text(&e)}</p> }
                });
                view! {
                    <section class="process-editor" data-process=id>
                        <h2>{format!("Edit {}", a.name)}</h2>
                        <FnForm action=UpdateProcess::PATH then="refresh" class="process-form edit-process-form" done=format!("Saved {}", a.name)>
                            <input type="hidden" name="id" value=id_form/>
                            <label>"Name" <input type="text" name="name" value=a.name.clone() required maxlength="64"/></label>
                            <label>"Description" <input type="text" name="description" value=a.description.clone() maxlength="1000"/></label>
                            <label>"Content (markdown)"
                                <textarea name="content" rows="10" data-preview="process-preview">{content}</textarea>
                            </label>
                            <button type="submit">"Save"</button>
                        </FnForm>
                        <h3>"Preview"</h3>
                        <div class="file-preview" id="process-preview" inner_html=preview></div>
                        <form method="get" class="render-for">
                            <input type="hidden" name="edit" value=id_render/>
                            <label>"Render for "
                                <select name="session">
                                    {choose.into_iter().map(|s| {
                                        let selected = session == Some(s.id);
                                        view! { <option value=s.id selected=selected>{s.name}</option> }
                                    }).collect_view()}
                                </select>
                            </label>
                            <button type="submit">"Render"</button>
                        </form>
                        {failed}
                        {shown}
                        <FnForm action=DeleteProcess::PATH then="/abilities" class="process-delete">
                            <input type="hidden" name="id" value=id_delete/>
                            <button type="submit" class="danger">"Delete"</button>
                        </FnForm>
                    </section>
                }
                .into_any()
            }
            Ok(_) => view! {
                <p class="form-error" role="alert">"This ability belongs to Hero; copy it into a process of your own to change it."</p>
            }
            .into_any(),
            Err(e) => view! { <p class="form-error" role="alert">{error_text(&e)}</p> }.into_any(),
        })
    };
    view! { <Suspense>{body}</Suspense> }
}
