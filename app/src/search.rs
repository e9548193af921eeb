//! The Search page (`/search?q=…&sort=relevance|recent`): the user's messages and sessions
//! found by words and "quoted phrases", each with its session, when, whose words and a
//! snippet with the words marked; a result opens its session at that message
//! (`/s/{id}#m-{frame id}`). The sidebar's box sends here; Ctrl+K (or `/`) finds the box.

use hero_shared::api::SearchHitDto;
use leptos::prelude::*;
use leptos_router::components::Redirect;
use leptos_router::hooks::use_query_map;

use crate::auth::{current_user, error_text};
use crate::json::resource;

#[server(prefix = "/_fn")]
pub async fn search_sessions(
    q: String,
    sort: Option<String>,
) -> Result<Vec<SearchHitDto>, ServerFnError> {
    use crate::guard::{fail, require_user};
    use hero_backend::conversation::search::{self, Order};
    let (st, user) = require_user().await?;
    let order = sort
        .as_deref()
        .filter(|s| !s.is_empty())
        .map(Order::parse)
        .transpose()
        .map_err(fail)?
        .unwrap_or_default();
    let hits = search::search(&st, &user, &q, order, None)
        .await
        .map_err(fail)?;
    Ok(hits.into_iter().map(search::Hit::dto).collect())
}

/// `text` cut into runs, each marked or not, from `[start, end)` character ranges (sorted,
/// apart, as the server gives them; any out of range are dropped).
pub fn marked(text: &str, highlights: &[(usize, usize)]) -> Vec<(String, bool)> {
    let chars: Vec<char> = text.chars().collect();
    let mut runs = Vec::new();
    let mut at = 0;
    for &(start, end) in highlights {
        if start < at || end > chars.len() || start >= end {
            continue;
        }
        if start > at {
            runs.push((chars[at..start].iter().collect(), false));
        }
        runs.push((chars[start..end].iter().collect(), true));
        at = end;
    }
    if at < chars.len() {
        runs.push((chars[at..].iter().collect(), false));
    }
    runs
}

/// Where a result opens: its session, at its message when it is one.
pub fn result_href(hit: &SearchHitDto) -> String {
    match &hit.frame_id {
        Some(f) => format!("/s/{}#m-{f}", hit.session_id),
        None => format!("/s/{}", hit.session_id),
    }
}

#[component]
pub fn SearchPage() -> impl IntoView {
    let user = resource(|| (), |_| current_user());
    let query = use_query_map();
    let q = query.read_untracked().get("q").unwrap_or_default();
    let sort = query.read_untracked().get("sort").unwrap_or_default();
    view! {
        <Suspense>
            {move || user.get().map(|u| match u {
                Ok(_) => view! { <Search q=q.clone() sort=sort.clone()/> }.into_any(),
                Err(_) => view! { <Redirect path=crate::base::href("/login")/> }.into_any(),
            })}
        </Suspense>
    }
}

#[component]
fn Search(q: String, sort: String) -> impl IntoView {
    let recent = sort == "recent";
    let asked = !q.trim().is_empty();
    let (query, order) = (q.clone(), sort.clone());
    let found = resource(
        || (),
        move |_| {
            let (q, sort) = (query.clone(), order.clone());
            async move {
                if q.trim().is_empty() {
                    Ok(Vec::new())
                } else {
                    search_sessions(q, Some(sort)).await
                }
            }
        },
    );
    let enc = encode(&q);
    let by = |s: &str| crate::base::href(&format!("/search?q={enc}&sort={s}"));
    let (by_relevance, by_recent) = (by("relevance"), by("recent"));
    view! {
        <main class="search-page">
            <p><a href=crate::base::href("/")>"← Back to sessions"</a></p>
            <h1>"Search"</h1>
            <form class="search-form" method="get" action=crate::base::href("/search") role="search">
                <input type="search" name="q" value=q.clone() maxlength="500" aria-label="Search your sessions" data-search-box="" placeholder="Words, or \"a phrase\""/>
                <input type="hidden" name="sort" value=sort.clone()/>
                <button type="submit">"Search"</button>
            </form>
            {asked.then(|| view! {
                <p class="search-order">
                    "Order: "
                    <a href=by_relevance class:current=!recent aria-current=(!recent).then_some("true")>"most relevant"</a>
                    " · "
                    <a href=by_recent class:current=recent aria-current=recent.then_some("true")>"newest"</a>
                </p>
            })}
            <Suspense>
                {move || found.get().map(|r| match r {
                    Ok(hits) if hits.is_empty() && asked => view! {
                        <p class="muted search-none">"Nothing found in your sessions."</p>
                    }.into_any(),
                    Ok(hits) => view! {
                        <ol class="search-results" data-testid="search-results">
                            {hits.into_iter().map(|h| view! { <Result h/> }).collect_view()}
                        </ol>
                    }.into_any(),
                    Err(e) => view! { <p class="form-error">{error_text(&e)}</p> }.into_any(),
                })}
            </Suspense>
        </main>
    }
}

#[component]
fn Result(h: SearchHitDto) -> impl IntoView {
    let href = crate::base::href(&result_href(&h));
    let who = match h.kind.as_str() {
        "user" => "You",
        "agent" => "Agent",
        _ => "Session",
    };
    let when = hero_shared::api::to_the_minute(&h.created_at);
    let runs = marked(&h.snippet, &h.highlights);
    view! {
        <li class="search-result">
            <a href=href>
                <span class="search-session">{h.session_name.clone()}</span>
                <span class="muted">" · "{who}" · "{when}</span>
                <span class="search-snippet">
                    {runs.into_iter().map(|(text, mark)| if mark {
                        view! { <mark>{text}</mark> }.into_any()
                    } else {
                        text.into_any()
                    }).collect_view()}
                </span>
            </a>
        </li>
    }
}

/// `s` for a query string's value.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snippet_is_cut_into_marked_runs_by_characters() {
        assert_eq!(
            marked("é tomatoes here", &[(2, 10)]),
            vec![
                ("é ".into(), false),
                ("tomatoes".into(), true),
                (" here".into(), false)
            ]
        );
        // Out of range or overlapping: dropped, never a panic.
        assert_eq!(
            marked("abc", &[(1, 2), (1, 3), (2, 9)]),
            vec![("a".into(), false), ("b".into(), true), ("c".into(), false)]
        );
        assert_eq!(marked("", &[]), Vec::<(String, bool)>::new());
    }

    #[test]
    fn a_result_opens_its_session_at_its_message() {
        let mut h = SearchHitDto {
            session_id: 7,
            session_name: "s".into(),
            frame_id: Some("01a2-ff".into()),
            kind: "user".into(),
            snippet: String::new(),
            highlights: Vec::new(),
            score: 1.0,
            created_at: String::new(),
        };
        assert_eq!(result_href(&h), "/s/7#m-01a2-ff");
        h.frame_id = None;
        assert_eq!(result_href(&h), "/s/7");
        assert_eq!(encode("a \"b\"&c"), "a%20%22b%22%26c");
    }
}
