//! The Config page (`/config`, reference 004): the keys an agent's behaviour is read from,
//! each with what it holds and its version; the key chosen (`?key=`, and `?agent=` for an
//! agent's keys) edited in place, with its history: each version's author, reason and
//! diff, and "Restore this version" (a new version with the old content).

use hero_shared::api::{AgentDto, ConfigDto, ConfigKeyDto, ConfigVersionDto};
use leptos::prelude::*;
use leptos_router::components::Redirect;
use leptos_router::hooks::use_query_map;

use crate::auth::{current_user, error_text};
use crate::enhance::FnForm;
use crate::json::resource;

#[server(prefix = "/_fn")]
pub async fn list_configs(agent_id: Option<i64>) -> Result<Vec<ConfigKeyDto>, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::agents::config::api::list(&st, &user, agent_id)
        .await
        .map_err(fail)
}

#[server(prefix = "/_fn")]
pub async fn read_config(key: String, agent_id: Option<i64>) -> Result<ConfigDto, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::agents::config::api::get(&st, &user, &key, agent_id)
        .await
        .map_err(fail)
}

#[server(prefix = "/_fn")]
pub async fn config_versions(
    key: String,
    agent_id: Option<i64>,
) -> Result<Vec<ConfigVersionDto>, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::agents::config::api::versions(&st, &user, &key, agent_id)
        .await
        .map_err(fail)
}

/// Writes the next version of a key, made against `base_version`.
#[server(prefix = "/_fn")]
pub async fn put_config(
    key: String,
    agent_id: Option<i64>,
    content: String,
    base_version: i64,
    reason: Option<String>,
) -> Result<ConfigDto, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    let req = hero_shared::api::PutConfigRequest {
        content,
        base_version,
        agent_id,
        reason: reason.filter(|r| !r.trim().is_empty()),
    };
    hero_backend::agents::config::api::put(&st, &user, &key, req)
        .await
        .map_err(fail)
}

/// Writes version `version`'s content again, as the next version.
#[server(prefix = "/_fn")]
pub async fn restore_config(
    key: String,
    agent_id: Option<i64>,
    version: i64,
) -> Result<ConfigDto, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::agents::config::api::restore(&st, &user, &key, agent_id, version)
        .await
        .map_err(fail)
}

/// Writes a capability's newer shipped instructions as its next version.
#[server(prefix = "/_fn")]
pub async fn adopt_default(key: String) -> Result<ConfigDto, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::agents::config::api::adopt(&st, &user, &key)
        .await
        .map_err(fail)
}

#[component]
pub fn ConfigPage() -> impl IntoView {
    let user = resource(|| (), |_| current_user());
    let query = use_query_map();
    let q = query.read_untracked();
    let key = q
        .get("key")
        .unwrap_or_else(|| "capability:config".to_owned());
    let agent = q.get("agent").and_then(|a| a.parse::<i64>().ok());
    view! {
        <Suspense>
            {move || user.get().map(|u| match u {
                Ok(_) => view! { <Config key=key.clone() agent/> }.into_any(),
                Err(_) => view! { <Redirect path=crate::base::href("/login")/> }.into_any(),
            })}
        </Suspense>
    }
}

/// One line of a diff, drawn as the chat's card draws it.
fn diff_lines(diff: Vec<hero_shared::api::DiffOp>) -> impl IntoView {
    diff.into_iter()
        .flat_map(|op| {
            let (class, mark) = match op.op.as_str() {
                "insert" => ("diff-line diff-insert", "+ "),
                "delete" => ("diff-line diff-delete", "- "),
                _ => ("diff-line diff-equal", "  "),
            };
            op.text
                .lines()
                .map(|l| view! { <div class=class>{format!("{mark}{l}")}</div> })
                .collect::<Vec<_>>()
        })
        .collect_view()
}

/// The keys (each a plain GET form's button, the agent chosen beside them), the key's
/// editor (a form sent by [`crate::enhance`], which reads the page again) and its history.
#[component]
fn Config(key: String, agent: Option<i64>) -> impl IntoView {
    use leptos::server_fn::ServerFn;
    let agents = resource(|| (), |_| crate::chat::list_agents());
    let keys = resource(move || agent, list_configs);
    let (k1, k2) = (key.clone(), key.clone());
    let current = resource(move || (k1.clone(), agent), |(k, a)| read_config(k, a));
    let history = resource(move || (k2.clone(), agent), |(k, a)| config_versions(k, a));
    let agent_value = agent.map(|a| a.to_string()).unwrap_or_default();
    let agent_choice = {
        let agent_value = agent_value.clone();
        move || {
            let list: Vec<AgentDto> = agents.get().and_then(Result::ok).unwrap_or_default();
            let chosen = agent_value.clone();
            view! {
                <select name="agent" aria-label="Agent">
                    <option value="" selected=chosen.is_empty()>"(no agent)"</option>
                    {list.into_iter().map(|a| {
                        let v = a.id.to_string();
                        let selected = v == chosen;
                        view! { <option value=v selected=selected>{a.name}</option> }
                    }).collect_view()}
                </select>
            }
        }
    };
    let shown = key.clone();
    let rows = {
        let agent_choice = agent_choice.clone();
        move || {
            let list = keys.get().map(|r| r.map_err(|e| error_text(&e)));
            match list {
                Some(Ok(list)) => view! {
                    <form method="get" class="config-keys">
                        <p><label>"Agent of "<code>"soul"</code>" and "<code>"agents"</code>": "{agent_choice.clone()}</label></p>
                        <ul class="config-key-list">
                            {list.into_iter().map(|k| {
                                let current = k.key == shown;
                                let testid = k.key.clone();
                                let version = if k.version == 0 { "never written".to_owned() } else { format!("v{}", k.version) };
                                view! {
                                    <li class:current=current data-key=testid>
                                        <button type="submit" name="key" value=k.key.clone()>{k.key.clone()}</button>
                                        <span class="muted">{version}</span>
                                        <div class="muted">{k.description}</div>
                                    </li>
                                }
                            }).collect_view()}
                        </ul>
                    </form>
                }.into_any(),
                Some(Err(e)) => view! { <p class="form-error" role="alert">{e}</p> }.into_any(),
                None => ().into_any(),
            }
        }
    };
    let key_for_editor = key.clone();
    let editor = move || {
        let key_for_editor = key_for_editor.clone();
        current.get().map(|r| match r {
            Ok(c) => {
                let label = format!("Content of {}", c.key);
                let offered = c.offered.clone().map(|ops| {
                    let key = c.key.clone();
                    view! {
                        <div class="offered" data-testid="offered">
                            <p>"Hero ships newer instructions for this key. What they would change:"</p>
                            <div class="diff">{diff_lines(ops)}</div>
                            <FnForm action=AdoptDefault::PATH then="refresh" class="adopt-form" done="Hero's newer default is the current version".to_owned()>
                                <input type="hidden" name="key" value=key/>
                                <button type="submit">"Use Hero's newer instructions"</button>
                            </FnForm>
                        </div>
                    }
                });
                view! {
                    {offered}
                    <p class="muted" data-testid="config-version">{format!("Version {}", c.version)}</p>
                    <FnForm action=PutConfig::PATH then="refresh" class="config-form" done=format!("Saved {}", c.key)>
                        <input type="hidden" name="key" value=key_for_editor/>
                        {agent.map(|a| view! { <input type="hidden" name="agent_id" value=a/> })}
                        <input type="hidden" name="base_version" value=c.version/>
                        <textarea name="content" rows="14" aria-label=label>{c.content}</textarea>
                        <input type="text" name="reason" placeholder="Why (shown in the history)" aria-label="Reason"/>
                        <button type="submit" class="save-config">"Save as a new version"</button>
                    </FnForm>
                }.into_any()
            }
            Err(e) => view! { <p class="form-error" role="alert">{error_text(&e)}</p> }.into_any(),
        })
    };
    let key_for_history = key.clone();
    let versions = move || {
        let key_for_history = key_for_history.clone();
        history.get().map(|r| match r {
            Ok(list) => {
                let newest = list.first().map(|v| v.version);
                view! {
                    <ol class="config-history">
                        {list.into_iter().map(|v| {
                            let head = format!("v{} · {} · {}", v.version, v.author, v.created_at);
                            let is_current = Some(v.version) == newest;
                            let key = key_for_history.clone();
                            view! {
                                <li data-version=v.version>
                                    <div class="config-version-head">{head}</div>
                                    {(!v.reason.is_empty()).then(|| view! { <p class="change-reason">{v.reason.clone()}</p> })}
                                    <div class="diff">{diff_lines(v.diff)}</div>
                                    {(!is_current).then(|| view! {
                                        <FnForm action=RestoreConfig::PATH then="refresh" class="restore-form" done=format!("Restored v{}", v.version)>
                                            <input type="hidden" name="key" value=key/>
                                            {agent.map(|a| view! { <input type="hidden" name="agent_id" value=a/> })}
                                            <input type="hidden" name="version" value=v.version/>
                                            <button type="submit">"Restore this version"</button>
                                        </FnForm>
                                    })}
                                </li>
                            }
                        }).collect_view()}
                    </ol>
                }.into_any()
            }
            Err(e) => view! { <p class="form-error" role="alert">{error_text(&e)}</p> }.into_any(),
        })
    };
    view! {
        <main class="config-page">
            <p><a href=crate::base::href("/")>"← Back to sessions"</a></p>
            <h1>"Configuration"</h1>
            <p class="muted">"What your agents' behaviour is read from. Every change, yours or one an agent proposed and you approved, is a new version; nothing is lost."</p>
            <span class="saved" role="status"></span>
            <div class="config">
                <section><Suspense>{rows}</Suspense></section>
                <section class="config-editor">
                    <h2 data-testid="config-key">{key.clone()}</h2>
                    <Suspense>{editor}</Suspense>
                    <h3>"History"</h3>
                    <Suspense>{versions}</Suspense>
                </section>
            </div>
        </main>
    }
}
