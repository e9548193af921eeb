//! The Files page of an agent (`/agents/:id/files`): its context files (reference 002) as
//! the signed-in user's calls use them, each marked with the level it lives at, edited in
//! a text area with a live preview. Empty content deletes a file.

use hero_shared::api::{ContextFileContent, ContextFileDto};
use leptos::prelude::*;
use leptos_router::components::Redirect;
use leptos_router::hooks::{use_params_map, use_query_map};

use crate::auth::{current_user, error_text};
use crate::enhance::FnForm;
use crate::json::resource;

#[server(prefix = "/_fn")]
pub async fn list_files(agent_id: i64) -> Result<Vec<ContextFileDto>, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::agents::context_files::list_files(&st, &user, agent_id)
        .await
        .map_err(fail)
}

#[server(prefix = "/_fn")]
pub async fn read_file(agent_id: i64, name: String) -> Result<ContextFileContent, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::agents::context_files::read_file(&st, &user, agent_id, &name)
        .await
        .map_err(fail)
}

#[server(prefix = "/_fn")]
pub async fn write_file(
    agent_id: i64,
    name: String,
    content: String,
) -> Result<ContextFileContent, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    let written =
        hero_backend::agents::context_files::write_file(&st, &user, agent_id, &name, &content)
            .await
            .map_err(fail)?;
    // SOUL.md and AGENTS.md are configuration keys too: the edit is their next version.
    hero_backend::agents::config::api::file_written(&st, &user, agent_id, &name)
        .await
        .map_err(fail)?;
    Ok(written)
}

fn level_note(level: &str) -> &'static str {
    match level {
        "user" => "Your own copy: only your conversations with this agent use it.",
        "agent" => {
            "The agent's own file, the same for everyone who uses it; only you, its owner, can change it (the agent cannot, from chat)."
        }
        "virtual" => "Made by Hero for each call and already in the prompt; it cannot be edited.",
        _ => "",
    }
}

#[component]
pub fn FilesPage() -> impl IntoView {
    let user = resource(|| (), |_| current_user());
    let params = use_params_map();
    let query = use_query_map();
    let agent_id = params
        .read_untracked()
        .get("id")
        .and_then(|s| s.parse::<i64>().ok())
        .unwrap_or_default();
    // The file shown: `?file=`, one of the names an agent may have.
    let asked = query.read_untracked().get("file").unwrap_or_default();
    let selected = hero_shared::api::CONTEXT_FILES
        .iter()
        .chain(&hero_shared::api::VIRTUAL_CONTEXT_FILES)
        .find(|n| **n == asked)
        .copied()
        .unwrap_or("SOUL.md");
    view! {
        <Suspense>
            {move || user.get().map(|u| match u {
                Ok(_) => view! { <Files agent_id selected/> }.into_any(),
                Err(_) => view! { <Redirect path=crate::base::href("/login")/> }.into_any(),
            })}
        </Suspense>
    }
}

/// The list links each file (`?file=`, a plain GET form); the editor is a form sent by
/// [`crate::enhance`], which reads the page again and says it saved; the preview follows
/// what is typed (`data-preview`).
#[component]
fn Files(agent_id: i64, selected: &'static str) -> impl IntoView {
    use leptos::server_fn::ServerFn;
    let list = resource(move || agent_id, list_files);
    let file = resource(
        move || agent_id,
        move |id| read_file(id, selected.to_owned()),
    );
    let rows = move || {
        let listed = list.get().and_then(Result::ok).unwrap_or_default();
        // The files an agent may have, in prompt order, and the virtual one.
        hero_shared::api::CONTEXT_FILES
            .iter()
            .chain(&hero_shared::api::VIRTUAL_CONTEXT_FILES)
            .map(|name| {
                let found = listed.iter().find(|f| f.name == *name);
                let level = found.map_or("", |f| f.level.as_str()).to_owned();
                let size = found.map(|f| format!("{} B", f.size)).unwrap_or_else(|| "empty".into());
                view! {
                    <li class:current=*name == selected data-file=*name>
                        <form method="get"><button type="submit" name="file" value=*name>{*name}</button></form>
                        <span class=format!("level level-{level}")>{level.clone()}</span>
                        <span class="muted">{size}</span>
                    </li>
                }
            })
            .collect_view()
    };
    let editor = move || {
        file.get().map(|r| match r {
            Ok(f) => {
                let fixed = f.level == "virtual";
                let preview = hero_shared::markdown::to_html(&f.content);
                view! {
                    <p class="level-note" data-testid="level-note">{level_note(&f.level)}</p>
                    <FnForm action=WriteFile::PATH then="refresh" class="file-form" done=format!("Saved {selected}")>
                        <input type="hidden" name="agent_id" value=agent_id/>
                        <input type="hidden" name="name" value=selected/>
                        <textarea name="content" rows="16" aria-label=format!("Content of {selected}")
                            readonly=fixed data-preview="file-preview">{f.content}</textarea>
                        <button type="submit" class="save-file" disabled=fixed>"Save"</button>
                    </FnForm>
                    <h3>"Preview"</h3>
                    <div class="file-preview" id="file-preview" inner_html=preview></div>
                }
                .into_any()
            }
            Err(e) => view! { <p class="form-error" role="alert">{error_text(&e)}</p> }.into_any(),
        })
    };
    view! {
        <main class="files-page">
            <p><a href=crate::base::href("/agents")>"← Back to agents"</a></p>
            <h1>"Context files"</h1>
            <p class="muted">"What the agent is told about itself and about you, in every call. Empty a file to delete it; an empty BOOTSTRAP.md ends the first-run ritual."</p>
            <span class="saved" role="status"></span>
            <div class="files">
                <ul class="file-list">
                    <Suspense>{rows}</Suspense>
                </ul>
                <section class="file-editor">
                    <h2 data-testid="file-name">{selected}</h2>
                    <Suspense>{editor}</Suspense>
                </section>
            </div>
        </main>
    }
}

/// Markdown drawn once by the shared renderer (its own closed set of tags, every value
/// escaped): a text a page shows and does not edit (a skill's SKILL.md on the Skills page),
/// or, with the `id` a `textarea[data-preview]` names, the preview of one it edits (a
/// memory file on the Memory page), which the browser then redraws as it is typed.
#[component]
pub fn Rendered(
    text: String,
    class: &'static str,
    #[prop(optional)] id: Option<&'static str>,
) -> impl IntoView {
    let preview = hero_shared::markdown::to_html(&text);
    view! { <div class=class id=id inner_html=preview></div> }
}
