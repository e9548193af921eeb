//! The Agents page: a user's AI backends. Keys can be set or replaced, never read back.
// A server function's arguments are its form's fields (the new-agent form has eight), and
// the code `#[server]` generates for them carries no attribute of ours.
#![allow(clippy::too_many_arguments)]

use hero_shared::api::AgentDto;
#[cfg(feature = "ssr")]
use hero_shared::api::{
    AgentKind, CreateAgentRequest, ProviderKind, SummonRequest, UpdateAgentRequest,
};
use leptos::prelude::*;
use leptos_router::components::Redirect;

use leptos::server_fn::ServerFn;

use crate::auth::{current_user, error_text};
use crate::chat::list_agents;
use crate::enhance::{FnForm, agent_status_line};
use crate::json::resource;

/// Reads the config textarea: empty means `{}`.
#[cfg(feature = "ssr")]
fn parse_config(text: &str) -> Result<Option<serde_json::Value>, String> {
    if text.trim().is_empty() {
        return Ok(None);
    }
    serde_json::from_str(text)
        .map(Some)
        .map_err(|e| format!("config is not valid JSON: {e}"))
}

#[server(prefix = "/_fn")]
pub async fn create_agent(
    name: String,
    provider: String,
    model: String,
    base_url: String,
    api_key: String,
    config: String,
    kind: String,
    description: String,
) -> Result<AgentDto, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    let bad = |m: String| fail(hero_backend::Error::Invalid(m));
    let provider = ProviderKind::parse(&provider)
        .ok_or_else(|| bad(format!("unknown provider {provider:?}")))?;
    let kind =
        AgentKind::parse(&kind).ok_or_else(|| bad(format!("unknown agent type {kind:?}")))?;
    let req = CreateAgentRequest {
        name,
        provider,
        model,
        base_url: Some(base_url).filter(|u| !u.trim().is_empty()),
        api_key: Some(api_key).filter(|k| !k.trim().is_empty()),
        config: parse_config(&config).map_err(bad)?,
        kind,
        compact_after_messages: None,
        compact_after_tokens: None,
        context_window: None,
    };
    let agent = hero_backend::agents::create(&st.db, &st.keys, &st.settings.egress, &user, req)
        .await
        .map_err(fail)?;
    if description.trim().is_empty() {
        return Ok(agent);
    }
    // "New agent from a description": its own model writes its persona.
    summon_agent(agent.id, description).await
}

/// "Edit with AI": the agent's persona files written again from a description.
#[server(prefix = "/_fn")]
pub async fn summon_agent(id: i64, description: String) -> Result<AgentDto, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::agents::summon::summon(
        &st,
        &user,
        id,
        SummonRequest {
            description,
            with_agent_id: None,
        },
    )
    .await
    .map_err(fail)
}

/// Updates an agent; an empty key field keeps the stored key.
#[server(prefix = "/_fn")]
pub async fn update_agent(
    id: i64,
    name: String,
    model: String,
    base_url: String,
    api_key: String,
    config: String,
) -> Result<AgentDto, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    let bad = |m: String| fail(hero_backend::Error::Invalid(m));
    let req = UpdateAgentRequest {
        name: Some(name),
        model: Some(model),
        base_url: Some(Some(base_url).filter(|u| !u.trim().is_empty())),
        api_key: Some(api_key).filter(|k| !k.trim().is_empty()).map(Some),
        config: Some(
            parse_config(&config)
                .map_err(bad)?
                .unwrap_or_else(|| serde_json::json!({})),
        ),
        provider: None,
        compact_after_messages: None,
        compact_after_tokens: None,
        context_window: None,
        price: None,
        default_processes: None,
        skill_allow_list: None,
    };
    hero_backend::agents::update(&st.db, &st.keys, &st.settings.egress, &user, id, req)
        .await
        .map_err(fail)
}

/// Sets an agent's default processes to those checked, in the order listed (none checked:
/// none). "Select all" sends every process the form listed, and only those.
#[server(prefix = "/_fn")]
pub async fn set_default_processes(
    id: i64,
    default_processes: Option<Vec<String>>,
) -> Result<AgentDto, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    let req = UpdateAgentRequest {
        default_processes: Some(default_processes.unwrap_or_default()),
        ..Default::default()
    };
    hero_backend::agents::update(&st.db, &st.keys, &st.settings.egress, &user, id, req)
        .await
        .map_err(fail)
}

/// Sets the skills an agent may use (reference 002 §12.5): `all` (every skill its user has,
/// now and later), `none`, or `chosen`, the names checked.
#[server(prefix = "/_fn")]
pub async fn set_agent_skills(
    id: i64,
    choice: String,
    skills: Option<Vec<String>>,
) -> Result<AgentDto, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    let allow = match choice.as_str() {
        "all" => None,
        "none" => Some(Vec::new()),
        "chosen" => Some(skills.unwrap_or_default()),
        other => {
            return Err(fail(hero_backend::Error::Invalid(format!(
                "{other:?} is not a choice of skills: all, none or chosen"
            ))));
        }
    };
    let req = UpdateAgentRequest {
        skill_allow_list: Some(allow),
        ..Default::default()
    };
    hero_backend::agents::update(&st.db, &st.keys, &st.settings.egress, &user, id, req)
        .await
        .map_err(fail)
}

#[server(prefix = "/_fn")]
pub async fn delete_agent(id: i64) -> Result<(), ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::agents::delete(&st.db, &user, id)
        .await
        .map_err(fail)
}

#[component]
pub fn AgentsPage() -> impl IntoView {
    let user = resource(|| (), |_| current_user());
    view! {
        <Suspense>
            {move || user.get().map(|u| match u {
                Ok(_) => view! { <Agents/> }.into_any(),
                Err(_) => view! { <Redirect path=crate::base::href("/login")/> }.into_any(),
            })}
        </Suspense>
    }
}

/// The agents and their forms, sent by [`crate::enhance`]: each success reads the page's
/// `<main>` again, and the user's WebSocket (`data-agent-feed`) updates each agent's status
/// line while it is summoned.
#[component]
fn Agents() -> impl IntoView {
    let agents = resource(|| (), |_| list_agents());
    // Read with the page, so a process made since is listed whenever the form opens.
    // Hero's system processes and the user's (a plugin's cannot be a default yet, nor a
    // conditional one, which Hero gives when it applies).
    let processes = resource(
        || (),
        |_| async {
            crate::abilities::list_abilities(Some("process".into()), None)
                .await
                .map(|list| {
                    list.into_iter()
                        .filter(|a| {
                            use hero_shared::api::AbilitySource::{System, User};
                            matches!(a.source, System | User)
                        })
                        .collect::<Vec<_>>()
                })
        },
    );
    // The skills an agent may be given a choice of: those in use (not a folder that is no
    // skill, nor one a higher tier hides).
    let skills = resource(
        || (),
        |_| async {
            crate::skills::list_skills().await.map(|l| {
                l.skills
                    .into_iter()
                    .filter(|s| s.error.is_none() && s.overridden_by.is_none())
                    .map(|s| s.name)
                    .collect::<Vec<_>>()
            })
        },
    );
    view! {
        <main class="agents-page" data-agent-feed="">
            <p><a href=crate::base::href("/")>"← Back to sessions"</a></p>
            <h1>"Agents"</h1>
            <p class="muted">"API keys are stored encrypted and never shown again; leave the key empty to keep the stored one."</p>
            <span class="saved" role="status"></span>
            <Suspense>
                {move || agents.get().map(|r| match r {
                    Ok(list) => {
                        let processes = processes.get().and_then(Result::ok).unwrap_or_default();
                        let skills = skills.get().and_then(Result::ok).unwrap_or_default();
                        list.into_iter().map(|a| view! { <AgentCard a processes=processes.clone() skills=skills.clone()/> }).collect_view().into_any()
                    }
                    Err(e) => view! { <p class="form-error">{error_text(&e)}</p> }.into_any(),
                })}
            </Suspense>
            <h2>"New agent"</h2>
            <FnForm action=CreateAgent::PATH then="refresh" class="agent-form new-agent">
                <label>"Name" <input type="text" name="name" required maxlength="100"/></label>
                <label>"Provider"
                    <select name="provider">
                        <option value="anthropic">"Anthropic"</option>
                        <option value="openai">"OpenAI"</option>
                        <option value="openai-compatible">"OpenAI-compatible (Ollama, vLLM, llama.cpp)"</option>
                        <option value="scripted">"Offline demo (scripted)"</option>
                    </select>
                </label>
                <label>"Type"
                    <select name="kind">
                        <option value="open">"Open: each user shapes its persona"</option>
                        <option value="predefined">"Predefined: one persona for every user"</option>
                    </select>
                </label>
                <label>"Model" <input type="text" name="model" required placeholder="claude-sonnet-4-5, gpt-4o, llama3…"/></label>
                <label>"Base URL" <input type="text" name="base_url" placeholder="optional; needed for OpenAI-compatible servers"/></label>
                <label>"API key" <input type="password" name="api_key" autocomplete="off"/></label>
                <label>"Config (JSON, merged into every request)" <textarea name="config" rows="3" placeholder="{\"max_tokens\": 4096, \"temperature\": 0.7}"></textarea></label>
                <label>"Describe it (optional: its persona is then written from this)" <textarea name="description" rows="2" maxlength="2000" placeholder="a sarcastic Rust reviewer"></textarea></label>
                <button type="submit">"Add agent"</button>
            </FnForm>
        </main>
    }
}

#[component]
fn AgentCard(
    a: AgentDto,
    processes: Vec<hero_shared::api::AbilityDto>,
    skills: Vec<String>,
) -> impl IntoView {
    let id = a.id;
    let config = if a.config.as_object().is_some_and(|m| m.is_empty()) {
        String::new()
    } else {
        a.config.to_string()
    };
    view! {
        <section class="agent-card" data-agent-id=id>
            <header>
                <strong class="agent-name">{a.name.clone()}</strong>
                <span class="badge">{a.provider.as_str()}</span>
                <span class="badge agent-type">{a.kind.as_str()}</span>
                <a class="agent-files" href=crate::base::href(&format!("/agents/{id}/files"))>"Files"</a>
                <a class="agent-memory" href=crate::base::href(&format!("/agents/{id}/memory"))>"Memory"</a>
                <span class="muted">{if a.has_api_key { "key set" } else { "no key" }}</span>
                <span class="agent-status" data-testid="agent-status" data-status=a.status.clone()>
                    {agent_status_line(&a.status, "")}
                </span>
            </header>
            <FnForm action=SummonAgent::PATH then="refresh" class="agent-form summon">
                <input type="hidden" name="id" value=id/>
                <label>"Edit with AI" <input type="text" name="description" maxlength="2000" placeholder="describe who it should be" required/></label>
                <button type="submit">"Rewrite its persona"</button>
            </FnForm>
            <FnForm action=UpdateAgent::PATH then="refresh" class="agent-form">
                <input type="hidden" name="id" value=id/>
                <label>"Name" <input type="text" name="name" value=a.name.clone() required/></label>
                <label>"Model" <input type="text" name="model" value=a.model.clone() required/></label>
                <label>"Base URL" <input type="text" name="base_url" value=a.base_url.clone().unwrap_or_default()/></label>
                <label>"New API key" <input type="password" name="api_key" autocomplete="off" placeholder="leave empty to keep"/></label>
                <label>"Config" <textarea name="config" rows="2">{config}</textarea></label>
                <button type="submit">"Save"</button>
            </FnForm>
            <DefaultProcesses id chosen=a.default_processes.clone() processes/>
            <SkillChoice id allow=a.skill_allow_list.clone() skills/>
            <FnForm action=DeleteAgent::PATH then="refresh" class="agent-delete">
                <input type="hidden" name="id" value=id/>
                <button type="submit" class="danger">"Delete"</button>
            </FnForm>
        </section>
    }
}

/// The agent's default processes (reference 003): the user's processes and Hero's as a
/// checklist, the chosen ones first in their order; "Select all" chooses every process
/// listed here, and no process made later.
#[component]
fn DefaultProcesses(
    id: i64,
    chosen: Vec<String>,
    processes: Vec<hero_shared::api::AbilityDto>,
) -> impl IntoView {
    use leptos::server_fn::ServerFn;
    let mut listed: Vec<&hero_shared::api::AbilityDto> = chosen
        .iter()
        .filter_map(|c| processes.iter().find(|p| p.id == *c))
        .collect();
    listed.extend(processes.iter().filter(|p| !chosen.contains(&p.id)));
    let boxes = listed
        .iter()
        .map(|p| {
            let checked = chosen.contains(&p.id);
            view! {
                <label class="default-process">
                    <input type="checkbox" name="default_processes[]" value=p.id.clone() checked=checked/>
                    {p.name.clone()}
                    <span class="muted">{p.description.clone()}</span>
                </label>
            }
        })
        .collect_view();
    let all = listed
        .iter()
        .map(|p| view! { <input type="hidden" name="default_processes[]" value=p.id.clone()/> })
        .collect_view();
    let summary = format!("Default processes ({} of {})", chosen.len(), listed.len());
    view! {
        <details class="default-processes">
            <summary>{summary}</summary>
            <p class="muted">"Given in full in every system prompt of this agent's, in this order; the others are listed by name."</p>
            <FnForm action=SetDefaultProcesses::PATH then="refresh" class="agent-form processes-form" done="Default processes saved">
                <input type="hidden" name="id" value=id/>
                {boxes}
                <button type="submit">"Save default processes"</button>
            </FnForm>
            <FnForm action=SetDefaultProcesses::PATH then="refresh" class="select-all-processes" done="Every process listed is a default">
                <input type="hidden" name="id" value=id/>
                {all}
                <button type="submit">"Select all"</button>
            </FnForm>
        </details>
    }
}

/// The skills the agent may use (reference 002 §12.5): all of the user's (the default, and
/// skills made later too), none, or those chosen from the list of the user's skills in use.
/// A chosen name no longer listed (its skill deleted) stays checked, so saving keeps it.
#[component]
fn SkillChoice(id: i64, allow: Option<Vec<String>>, skills: Vec<String>) -> impl IntoView {
    use leptos::server_fn::ServerFn;
    let choice = match &allow {
        None => "all",
        Some(names) if names.is_empty() => "none",
        Some(_) => "chosen",
    };
    let chosen = allow.unwrap_or_default();
    let mut listed: Vec<String> = chosen.clone();
    listed.extend(skills.into_iter().filter(|s| !chosen.contains(s)));
    let summary = match choice {
        "all" => "Skills: all".to_owned(),
        "none" => "Skills: none".to_owned(),
        _ => format!("Skills: {} chosen", chosen.len()),
    };
    let radio = move |value: &'static str, label: &'static str| {
        view! {
            <label class="skill-choice">
                <input type="radio" name="choice" value=value checked=value == choice/>
                {label}
            </label>
        }
    };
    let boxes = listed
        .into_iter()
        .map(|name| {
            let checked = chosen.contains(&name);
            view! {
                <label class="skill-choice">
                    <input type="checkbox" name="skills[]" value=name.clone() checked=checked/>
                    {name.clone()}
                </label>
            }
        })
        .collect_view();
    view! {
        <details class="agent-skills">
            <summary>{summary}</summary>
            <FnForm action=SetAgentSkills::PATH then="refresh" class="skills-form" done="Skills saved">
                <input type="hidden" name="id" value=id/>
                <fieldset>
                    <legend>"Skills it may use"</legend>
                    {radio("all", "All skills")}
                    {radio("none", "No skills")}
                    {radio("chosen", "Chosen")}
                    <div class="skill-choices">{boxes}</div>
                </fieldset>
                <button type="submit">"Save skills"</button>
            </FnForm>
        </details>
    }
}
