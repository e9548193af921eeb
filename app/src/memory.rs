//! The Memory page of an agent (`/agents/:id/memory`, reference 002 §1, §14–15): the
//! Markdown files it keeps between conversations (`MEMORY.md`, `memory/2026-11-24.md`, …),
//! each the agent's own (the same for everyone who uses it; its owner writes it here) or
//! yours (yours alone, and the agent writes it too), with its size and date; one opened
//! (`?file=PATH&scope=SCOPE`) in a text area with a live preview; a New file form; and a
//! search (a plain GET form, `?q=`) showing the chunks found with their lines and scores.
//!
//! Saving a file empty deletes it. The forms are [`FnForm`]s: they post without the wasm,
//! and in the browser [`crate::enhance`] sends them in place and reads `<main>` again. The
//! pure parts (a scope's words, a size, a date, lines, a query value) are tested natively.

use hero_shared::api::{
    MemoryFileContent, MemoryFileDto, MemoryHitDto, MemorySearchDto, MemoryWrittenDto,
};
use leptos::prelude::*;
use leptos::server_fn::ServerFn;
use leptos_router::components::Redirect;
use leptos_router::hooks::{use_params_map, use_query_map};

use crate::auth::{current_user, error_text};
use crate::enhance::FnForm;
use crate::json::resource;

#[server(prefix = "/_fn")]
pub async fn list_memory_files(agent_id: i64) -> Result<Vec<MemoryFileDto>, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::memory::list(&st, &user, agent_id)
        .await
        .map_err(fail)
}

/// The file `path` of `scope` (none: the copy a search uses); none when it is missing, as
/// after it was saved empty.
#[server(prefix = "/_fn")]
pub async fn read_memory_file(
    agent_id: i64,
    path: String,
    scope: Option<String>,
) -> Result<Option<MemoryFileContent>, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    let scope = scope.filter(|s| !s.is_empty());
    match hero_backend::memory::read_file(&st, &user, agent_id, &path, scope.as_deref()).await {
        Ok(file) => Ok(Some(file)),
        Err(hero_backend::Error::NotFound("memory file")) => Ok(None),
        Err(e) => Err(fail(e)),
    }
}

/// Writes the file `path` at `scope` (`user` or `agent`); empty content deletes it.
#[server(prefix = "/_fn")]
pub async fn write_memory_file(
    agent_id: i64,
    path: String,
    scope: String,
    content: String,
) -> Result<MemoryWrittenDto, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    let scope = Some(scope).filter(|s| !s.is_empty());
    hero_backend::memory::write_file(
        &st,
        &user,
        agent_id,
        path.trim(),
        &content,
        scope.as_deref(),
    )
    .await
    .map_err(fail)
}

#[server(prefix = "/_fn")]
pub async fn search_memory(agent_id: i64, query: String) -> Result<MemorySearchDto, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::memory::search_files(&st, &user, agent_id, &query, None)
        .await
        .map_err(fail)
}

/// Whose a file is, as the page says it.
pub fn whose(scope: &str) -> &'static str {
    match scope {
        "agent" => "the agent's",
        "user" => "yours",
        _ => "",
    }
}

fn scope_note(scope: &str) -> &'static str {
    match scope {
        "agent" => {
            "The agent's own memory, the same for everyone who uses it; only you, its owner, can change it."
        }
        "user" => {
            "Your memory with this agent: only your conversations use it, and it hides the agent's file of the same path."
        }
        _ => "",
    }
}

/// A file's size: bytes, then KiB with one decimal.
pub fn size_text(bytes: u64) -> String {
    if bytes < 1024 {
        format!("{bytes} B")
    } else {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    }
}

/// When a file changed, from its RFC 3339 time: the day and the minute, in UTC.
pub fn date_text(rfc3339: &str) -> String {
    let shaped = rfc3339.len() >= 16
        && rfc3339.is_char_boundary(16)
        && rfc3339.as_bytes().get(10) == Some(&b'T');
    if shaped {
        format!("{} {} UTC", &rfc3339[..10], &rfc3339[11..16])
    } else {
        rfc3339.to_owned()
    }
}

/// The lines a chunk spans (1-based, inclusive).
pub fn lines_text(start: u32, end: u32) -> String {
    if start == end {
        format!("line {start}")
    } else {
        format!("lines {start}–{end}")
    }
}

/// A score as the page shows it.
pub fn score_text(x: f64) -> String {
    format!("score {x:.2}")
}

/// A value in a query string: all but the unreserved characters (and `/`, which a query
/// may hold) percent-encoded.
pub fn query_value(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The page that opens `path` of `scope` in the editor.
fn open_href(agent_id: i64, path: &str, scope: &str) -> String {
    crate::base::href(&format!(
        "/agents/{agent_id}/memory?file={}&scope={}",
        query_value(path),
        query_value(scope)
    ))
}

#[component]
pub fn MemoryPage() -> impl IntoView {
    let user = resource(|| (), |_| current_user());
    let params = use_params_map();
    let query = use_query_map();
    let agent_id = params
        .read_untracked()
        .get("id")
        .and_then(|s| s.parse::<i64>().ok())
        .unwrap_or_default();
    let q = |key: &str| query.read_untracked().get(key).unwrap_or_default();
    let opened = Opened {
        path: q("file"),
        scope: q("scope"),
    };
    let search = q("q");
    view! {
        <Suspense>
            {move || user.get().map(|u| match u {
                Ok(_) => view! { <Memory agent_id opened=opened.clone() search=search.clone()/> }.into_any(),
                Err(_) => view! { <Redirect path=crate::base::href("/login")/> }.into_any(),
            })}
        </Suspense>
    }
}

/// The file the page opens (`?file=&scope=`; no scope: the copy a search uses).
#[derive(Clone, Debug, PartialEq)]
struct Opened {
    path: String,
    scope: String,
}

/// The page's parts: the search and its results, the files, the opened file's editor, and
/// the New file form. Each form's success reads the page's `<main>` again.
#[component]
fn Memory(agent_id: i64, opened: Opened, search: String) -> impl IntoView {
    let agents = resource(|| (), |_| crate::chat::list_agents());
    let list = resource(move || agent_id, list_memory_files);
    let query = search.clone();
    let hits = resource(
        move || query.clone(),
        move |q| async move {
            if q.trim().is_empty() {
                return Ok(None);
            }
            search_memory(agent_id, q).await.map(Some)
        },
    );
    let name = move || {
        agents
            .get()
            .and_then(Result::ok)
            .and_then(|l| l.into_iter().find(|a| a.id == agent_id))
            .map(|a| view! { <p class="muted memory-agent">{format!("Agent: {}", a.name)}</p> })
    };
    let results = move || {
        hits.get().map(|r| match r {
            Ok(None) => ().into_any(),
            Ok(Some(found)) => view! { <Hits agent_id found/> }.into_any(),
            Err(e) => view! { <p class="form-error" role="alert">{error_text(&e)}</p> }.into_any(),
        })
    };
    let files = move || {
        list.get().map(|r| match r {
            Ok(files) if files.is_empty() => view! {
                <p class="muted memory-empty">"No memory yet: the agent writes here as it learns, and you can write files below."</p>
            }
            .into_any(),
            Ok(files) => view! {
                <table class="memory-files" aria-label="Memory files">
                    <thead><tr><th>"Path"</th><th>"Whose"</th><th>"Size"</th><th>"Changed"</th></tr></thead>
                    <tbody>
                        {files.into_iter().map(|f| view! { <FileRow agent_id f/> }).collect_view()}
                    </tbody>
                </table>
            }
            .into_any(),
            Err(e) => view! { <p class="form-error" role="alert">{error_text(&e)}</p> }.into_any(),
        })
    };
    let editor = (!opened.path.is_empty()).then(|| view! { <Editor agent_id opened/> });
    view! {
        <main class="memory-page">
            <p><a href=crate::base::href("/agents")>"← Back to agents"</a></p>
            <h1>"Memory"</h1>
            <Suspense>{name}</Suspense>
            <p class="muted">"What the agent keeps between conversations: MEMORY.md for lasting facts, memory/YYYY-MM-DD.md for a day's notes, and Markdown files under memory/. Save a file empty to delete it."</p>
            <span class="saved" role="status"></span>
            <form method="get" class="memory-search" role="search">
                <label>"Search memory " <input type="search" name="q" value=search maxlength="1000"/></label>
                <button type="submit">"Search"</button>
            </form>
            <Suspense>{results}</Suspense>
            <h2>"Files"</h2>
            <Suspense>{files}</Suspense>
            {editor}
            <h2>"New file"</h2>
            <FnForm action=WriteMemoryFile::PATH then="refresh" class="memory-form new-memory" done="File saved">
                <input type="hidden" name="agent_id" value=agent_id/>
                <label>"Path" <input type="text" name="path" required maxlength="255" placeholder="memory/2026-11-24.md"/></label>
                <label>"Whose"
                    <select name="scope">
                        <option value="user" selected>"yours: only your conversations use it"</option>
                        <option value="agent">"the agent's: the same for everyone who uses it"</option>
                    </select>
                </label>
                <label>"Content (markdown)"
                    <textarea name="content" rows="8" required data-preview="new-memory-preview"></textarea>
                </label>
                <button type="submit">"Save file"</button>
            </FnForm>
            <h3>"Preview"</h3>
            <div class="file-preview" id="new-memory-preview"></div>
        </main>
    }
}

/// One file of the list: its path (a link that opens it), whose it is, its size and date.
#[component]
fn FileRow(agent_id: i64, f: MemoryFileDto) -> impl IntoView {
    let href = open_href(agent_id, &f.path, &f.scope);
    view! {
        <tr data-path=f.path.clone() data-scope=f.scope.clone()>
            <td><a href=href class="memory-open">{f.path.clone()}</a></td>
            <td><span class=format!("level level-{}", f.scope)>{whose(&f.scope)}</span></td>
            <td class="memory-size">{size_text(f.size)}</td>
            <td class="muted"><time datetime=f.updated_at.clone()>{date_text(&f.updated_at)}</time></td>
        </tr>
    }
}

/// What a search found: its mode and note, then each chunk with its file, lines, score
/// and text.
#[component]
fn Hits(agent_id: i64, found: MemorySearchDto) -> impl IntoView {
    let note = found
        .note
        .map(|n| view! { <p class="muted memory-note" data-testid="search-note">{n}</p> });
    let list = if found.results.is_empty() {
        view! { <p class="muted memory-hits">"Nothing in memory matches."</p> }.into_any()
    } else {
        view! {
            <ol class="memory-hits" aria-label="Search results">
                {found.results.into_iter().map(|h| view! { <Hit agent_id h/> }).collect_view()}
            </ol>
        }
        .into_any()
    };
    view! {
        <p class="muted" data-testid="search-mode">{format!("Search mode: {}", found.mode)}</p>
        {note}
        {list}
    }
}

#[component]
fn Hit(agent_id: i64, h: MemoryHitDto) -> impl IntoView {
    let href = open_href(agent_id, &h.path, &h.scope);
    view! {
        <li class="memory-hit" data-path=h.path.clone() data-scope=h.scope.clone()>
            <div class="memory-hit-head">
                <a href=href>{h.path.clone()}</a>
                <span class=format!("level level-{}", h.scope)>{whose(&h.scope)}</span>
                <span class="memory-lines">{lines_text(h.start_line, h.end_line)}</span>
                <span class="memory-score">{score_text(h.score)}</span>
            </div>
            <pre class="memory-chunk">{h.text}</pre>
        </li>
    }
}

/// The opened file: whose it is, its form (a live preview of what is typed) and the preview;
/// a file not (or no longer) there says so.
#[component]
fn Editor(agent_id: i64, opened: Opened) -> impl IntoView {
    let Opened { path, scope } = opened;
    let key = (path.clone(), scope.clone());
    let file = resource(
        move || key.clone(),
        move |(path, scope)| read_memory_file(agent_id, path, Some(scope)),
    );
    let label = path.clone();
    let body = move || {
        let (path, scope) = (path.clone(), scope.clone());
        file.get().map(|r| match r {
            Ok(Some(f)) => {
                let MemoryFileContent {
                    path,
                    scope,
                    content,
                } = f;
                let level = format!("level level-{scope}");
                let (note, whose) = (scope_note(&scope), whose(&scope));
                let (done, label) = (format!("Saved {path}"), format!("Content of {path}"));
                // The form's fields are built in a closure of their own.
                let text = content.clone();
                view! {
                    <p class="level-note">
                        <span class=level>{whose}</span>
                        " " {note}
                    </p>
                    <FnForm action=WriteMemoryFile::PATH then="refresh" class="file-form memory-form" done>
                        <input type="hidden" name="agent_id" value=agent_id/>
                        <input type="hidden" name="path" value=path/>
                        <input type="hidden" name="scope" value=scope/>
                        <textarea name="content" rows="14" aria-label=label
                            data-preview="memory-preview">{text}</textarea>
                        <button type="submit">"Save"</button>
                    </FnForm>
                    <h3>"Preview"</h3>
                    <crate::files::Rendered text=content class="file-preview" id="memory-preview"/>
                }
                .into_any()
            }
            Ok(None) => {
                let said = match whose(&scope) {
                    "" => format!("{path} is not in this agent's memory"),
                    w => format!("{path} ({w}) is not in this agent's memory"),
                };
                view! {
                    <p class="muted memory-missing" data-testid="memory-missing">
                        {format!("{said}: a file saved empty is deleted.")}
                    </p>
                }
                .into_any()
            }
            Err(e) => view! { <p class="form-error" role="alert">{error_text(&e)}</p> }.into_any(),
        })
    };
    view! {
        <section class="memory-editor file-editor" aria-label=format!("File {label}")>
            <h2 data-testid="memory-file">{label.clone()}</h2>
            <Suspense>{body}</Suspense>
        </section>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whose_a_file_is_said_in_words() {
        assert_eq!(whose("agent"), "the agent's");
        assert_eq!(whose("user"), "yours");
        assert_eq!(whose("other"), "");
    }

    #[test]
    fn a_size_a_date_lines_and_a_score() {
        assert_eq!(size_text(0), "0 B");
        assert_eq!(size_text(1023), "1023 B");
        assert_eq!(size_text(1536), "1.5 KiB");
        assert_eq!(
            date_text("2026-11-24T09:05:33.123456Z"),
            "2026-11-24 09:05 UTC"
        );
        assert_eq!(date_text("yesterday"), "yesterday");
        assert_eq!(lines_text(1, 2), "lines 1–2");
        assert_eq!(lines_text(4, 4), "line 4");
        assert_eq!(score_text(1.23456), "score 1.23");
        assert_eq!(score_text(0.5), "score 0.50");
    }

    #[test]
    fn a_query_value_keeps_a_path_readable_and_escapes_the_rest() {
        assert_eq!(query_value("memory/2026-11-24.md"), "memory/2026-11-24.md");
        assert_eq!(query_value("a&b=c#d e"), "a%26b%3Dc%23d%20e");
        assert_eq!(query_value("é"), "%C3%A9");
    }
}
