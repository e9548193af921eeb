//! The Files page of an agent (`/agents/:id/files`): its context files (reference 002) as
//! the signed-in user's calls use them, each marked with the level it lives at, edited in
//! a text area with a live preview. Empty content deletes a file.

use hero_shared::api::{ContextFileContent, ContextFileDto};
use leptos::prelude::*;
use leptos_router::components::Redirect;
use leptos_router::hooks::use_params_map;

use crate::auth::{current_user, error_text};
use crate::chat::markdown::Markdown;
use crate::json::resource;

#[server(prefix = "/_fn")]
pub async fn list_files(agent_id: i64) -> Result<Vec<ContextFileDto>, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::context_files::list_files(&st, &user, agent_id)
        .await
        .map_err(fail)
}

#[server(prefix = "/_fn")]
pub async fn read_file(agent_id: i64, name: String) -> Result<ContextFileContent, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::context_files::read_file(&st, &user, agent_id, &name)
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
    hero_backend::context_files::write_file(&st, &user, agent_id, &name, &content)
        .await
        .map_err(fail)
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
    let agent_id = params
        .read_untracked()
        .get("id")
        .and_then(|s| s.parse::<i64>().ok())
        .unwrap_or_default();
    view! {
        <Suspense>
            {move || user.get().map(|u| match u {
                Ok(_) => view! { <Files agent_id/> }.into_any(),
                Err(_) => view! { <Redirect path="/login"/> }.into_any(),
            })}
        </Suspense>
    }
}

/// The agent's files, one island.
#[island]
fn Files(agent_id: i64) -> impl IntoView {
    let agent_id = move || agent_id;
    let save = ServerAction::<WriteFile>::new();
    let selected = RwSignal::new("SOUL.md".to_owned());
    let list = resource(
        move || (agent_id(), save.version().get()),
        |(id, _)| list_files(id),
    );
    let file = resource(
        move || (agent_id(), selected.get(), save.version().get()),
        |(id, name, _)| read_file(id, name),
    );
    let draft = RwSignal::new(String::new());
    Effect::new(move |_| {
        if let Some(Ok(f)) = file.get() {
            draft.set(f.content);
        }
    });
    let error = move || {
        save.value()
            .get()
            .and_then(Result::err)
            .map(|e| view! { <p class="form-error" role="alert">{error_text(&e)}</p> })
    };
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
                let n = (*name).to_owned();
                let current = n.clone();
                let attr = n.clone();
                view! {
                    <li class:current=move || selected.get() == current data-file=attr>
                        <button type="button" on:click=move |_| selected.set(n.clone())>{*name}</button>
                        <span class=format!("level level-{level}")>{level.clone()}</span>
                        <span class="muted">{size}</span>
                    </li>
                }
            })
            .collect_view()
    };
    let level = move || {
        file.get()
            .and_then(Result::ok)
            .map(|f| f.level)
            .unwrap_or_default()
    };
    let save_it = move |_| {
        save.dispatch(WriteFile {
            agent_id: agent_id(),
            name: selected.get_untracked(),
            content: draft.get_untracked(),
        });
    };
    view! {
        <main class="files-page">
            <p><a href="/agents">"← Back to agents"</a></p>
            <h1>"Context files"</h1>
            <p class="muted">"What the agent is told about itself and about you, in every call. Empty a file to delete it; an empty BOOTSTRAP.md ends the first-run ritual."</p>
            {error}
            <div class="files">
                <ul class="file-list">
                    <Transition>{rows}</Transition>
                </ul>
                <section class="file-editor">
                    <h2 data-testid="file-name">{move || selected.get()}</h2>
                    // In a Transition: the server renders it with the file's level, and the
                    // page hydrates that rather than fetching it again.
                    <Transition>
                        <p class="level-note" data-testid="level-note">{move || level_note(&level())}</p>
                    </Transition>
                    <textarea rows="16" aria-label=move || format!("Content of {}", selected.get())
                        prop:value=move || draft.get()
                        readonly=move || level() == "virtual"
                        on:input=move |ev| draft.set(event_target_value(&ev))></textarea>
                    <button type="button" class="save-file" disabled=move || level() == "virtual" on:click=save_it>"Save"</button>
                    {move || save.value().get().and_then(Result::ok).map(|f| view! { <span class="saved" role="status">{format!("Saved {}", f.name)}</span> })}
                    <h3>"Preview"</h3>
                    <div class="file-preview"><Markdown src=Signal::derive(move || draft.get())/></div>
                </section>
            </div>
        </main>
    }
}
