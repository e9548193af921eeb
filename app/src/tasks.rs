//! The Tasks board (`/tasks`, reference 004): the user's tasks of one team in columns by
//! status (Triage, Backlog, Todo, In progress, Done; Canceled behind `?canceled=1`), a new
//! task made in place, and each card moved by its own small form (a keyboard's way) or by
//! dragging it onto a column (`enhance` submits that card's form with the column's status).
//! A card opens into its page (`/tasks/:id`): every field edited, and its history. The
//! board is read again when the user's socket says a task changed (an agent's too).

use hero_shared::api::{TASK_PRIORITIES, TASK_STATUSES, TaskDto, TaskEventDto, TeamDto};
use leptos::prelude::*;
use leptos_router::components::Redirect;
use leptos_router::hooks::{use_params_map, use_query_map};

use crate::auth::{current_user, error_text};
use crate::enhance::FnForm;
use crate::json::resource;

#[server(prefix = "/_fn")]
pub async fn list_teams() -> Result<Vec<TeamDto>, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::tasks::teams(&st, user.id())
        .await
        .map_err(fail)
}

#[server(prefix = "/_fn")]
pub async fn list_tasks(team: String) -> Result<Vec<TaskDto>, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    hero_backend::tasks::list(&st, user.id(), None, Some(&team))
        .await
        .map_err(fail)
}

#[server(prefix = "/_fn")]
pub async fn read_task(id: String) -> Result<(TaskDto, Vec<TaskEventDto>), ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    let task = hero_backend::tasks::get(&st, user.id(), &id)
        .await
        .map_err(fail)?;
    let history = hero_backend::tasks::history(&st, user.id(), &id)
        .await
        .map_err(fail)?;
    Ok((task, history))
}

/// Makes a task in the team shown.
#[server(prefix = "/_fn")]
pub async fn new_task(
    title: String,
    team: String,
    status: Option<String>,
) -> Result<TaskDto, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    let req = hero_shared::api::CreateTaskRequest {
        title,
        team: Some(team),
        status,
        ..Default::default()
    };
    hero_backend::tasks::create(&st, user.id(), hero_backend::tasks::Actor::User, req)
        .await
        .map_err(fail)
}

/// Makes a team (its key the prefix of its tasks' identifiers).
#[server(prefix = "/_fn")]
pub async fn new_team(name: String, key: String) -> Result<TeamDto, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    let req = hero_shared::api::CreateTeamRequest { name, key };
    hero_backend::tasks::create_team(&st, user.id(), req)
        .await
        .map_err(fail)
}

/// Moves a task to another column.
#[server(prefix = "/_fn")]
pub async fn move_task(id: i64, status: String) -> Result<TaskDto, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    let req = hero_shared::api::UpdateTaskRequest {
        status: Some(status),
        ..Default::default()
    };
    hero_backend::tasks::update(
        &st,
        user.id(),
        hero_backend::tasks::Actor::User,
        &id.to_string(),
        req,
    )
    .await
    .map_err(fail)
}

/// Changes a task's fields from its page's form (labels comma-separated; an empty project
/// or due date clears it); its status moves on the board.
#[server(prefix = "/_fn")]
pub async fn edit_task(
    id: i64,
    title: String,
    description: String,
    priority: i64,
    project: String,
    labels: String,
    due: String,
) -> Result<TaskDto, ServerFnError> {
    use crate::guard::{fail, require_user};
    let (st, user) = require_user().await?;
    let req = hero_shared::api::UpdateTaskRequest {
        title: Some(title),
        description: Some(description),
        status: None,
        priority: Some(priority),
        project: Some(project),
        labels: Some(
            labels
                .split(',')
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(str::to_owned)
                .collect(),
        ),
        due: Some(due),
        team: None,
    };
    hero_backend::tasks::update(
        &st,
        user.id(),
        hero_backend::tasks::Actor::User,
        &id.to_string(),
        req,
    )
    .await
    .map_err(fail)
}

/// A status as a column's title.
fn column_name(status: &str) -> &'static str {
    match status {
        "triage" => "Triage",
        "backlog" => "Backlog",
        "todo" => "Todo",
        "in_progress" => "In progress",
        "done" => "Done",
        _ => "Canceled",
    }
}

#[component]
pub fn TasksPage() -> impl IntoView {
    let user = resource(|| (), |_| current_user());
    let query = use_query_map();
    let q = query.read_untracked();
    let team = q.get("team").unwrap_or_else(|| "PER".to_owned());
    let canceled = q.get("canceled").is_some_and(|c| c == "1");
    view! {
        <Suspense>
            {move || user.get().map(|u| match u {
                Ok(_) => view! { <Board team=team.clone() canceled/> }.into_any(),
                Err(_) => view! { <Redirect path=crate::base::href("/login")/> }.into_any(),
            })}
        </Suspense>
    }
}

#[component]
fn Board(team: String, canceled: bool) -> impl IntoView {
    use leptos::server_fn::ServerFn;
    let teams = resource(|| (), |_| list_teams());
    let t1 = team.clone();
    let tasks = resource(move || t1.clone(), list_tasks);
    let shown_team = team.clone();
    let picker = move || {
        let list = teams.get().and_then(Result::ok).unwrap_or_default();
        let chosen = shown_team.clone();
        view! {
            <form method="get" class="board-filter">
                <label>"Team "
                    <select name="team" aria-label="Team">
                        {list.into_iter().map(|t| {
                            let selected = t.key == chosen;
                            view! { <option value=t.key.clone() selected=selected>{format!("{} ({})", t.name, t.key)}</option> }
                        }).collect_view()}
                    </select>
                </label>
                <label><input type="checkbox" name="canceled" value="1" checked=canceled/>" Show canceled"</label>
                <button type="submit">"Show"</button>
            </form>
        }
    };
    let columns: Vec<&'static str> = TASK_STATUSES
        .iter()
        .copied()
        .filter(|s| canceled || *s != "canceled")
        .collect();
    let board = move || {
        let columns = columns.clone();
        tasks.get().map(|r| match r {
            Ok(list) => view! {
                <div class="board" data-board="">
                    {columns.into_iter().map(|status| {
                        let cards: Vec<TaskDto> = list.iter().filter(|t| t.status == status).cloned().collect();
                        let count = cards.len();
                        view! {
                            <section class="board-column" data-column=status data-testid=format!("column-{status}")>
                                <h2>{column_name(status)}<span class="muted count">{count}</span></h2>
                                <ul class="cards">
                                    {cards.into_iter().map(|t| view! { <Card t/> }).collect_view()}
                                </ul>
                            </section>
                        }
                    }).collect_view()}
                </div>
            }.into_any(),
            Err(e) => view! { <p class="form-error" role="alert">{error_text(&e)}</p> }.into_any(),
        })
    };
    view! {
        <main class="tasks-page">
            <p><a href=crate::base::href("/")>"← Back to sessions"</a></p>
            <h1>"Tasks"</h1>
            <span class="saved" role="status"></span>
            <Suspense>{picker}</Suspense>
            <FnForm action=NewTask::PATH then="refresh" class="new-task" done="Task made".to_owned()>
                <input type="hidden" name="team" value=team.clone()/>
                <input type="text" name="title" required placeholder="A new task" aria-label="New task"/>
                <button type="submit">"Add"</button>
            </FnForm>
            <Suspense>{board}</Suspense>
            <details class="new-team">
                <summary>"New team"</summary>
                <FnForm action=NewTeam::PATH then="refresh" class="new-team-form" done="Team made".to_owned()>
                    <input type="text" name="name" required placeholder="Work" aria-label="Team name"/>
                    <input type="text" name="key" required placeholder="WRK" aria-label="Team key" pattern="[A-Z][A-Z0-9]{1,9}"/>
                    <button type="submit">"Make the team"</button>
                </FnForm>
            </details>
        </main>
    }
}

/// A task's card: its identifier (its page's link), title, priority and due date, and the
/// small form that moves it (what a drop onto a column submits too).
#[component]
fn Card(t: TaskDto) -> impl IntoView {
    use leptos::server_fn::ServerFn;
    let priority = TASK_PRIORITIES[t.priority.clamp(0, 4) as usize];
    let href = crate::base::href(&format!("/tasks/{}", t.identifier));
    let label = format!("Move {}", t.identifier);
    let current = t.status.clone();
    view! {
        <li class="task-card" draggable="true" data-task=t.id data-status=t.status.clone() data-testid=format!("task-{}", t.identifier)>
            <div class="task-head">
                <a href=href class="task-id">{t.identifier.clone()}</a>
                {(t.priority > 0).then(|| view! { <span class=format!("priority priority-{priority}")>{priority}</span> })}
            </div>
            <div class="task-title">{t.title.clone()}</div>
            {t.due.clone().map(|d| view! { <div class="muted task-due">{format!("due {d}")}</div> })}
            <FnForm action=MoveTask::PATH then="refresh" class="task-move">
                <input type="hidden" name="id" value=t.id/>
                <select name="status" aria-label=label>
                    {TASK_STATUSES.iter().map(|s| view! {
                        <option value=*s selected=*s == current>{column_name(s)}</option>
                    }).collect_view()}
                </select>
                <button type="submit">"Move"</button>
            </FnForm>
        </li>
    }
}

#[component]
pub fn TaskPage() -> impl IntoView {
    let user = resource(|| (), |_| current_user());
    let params = use_params_map();
    let id = params.read_untracked().get("id").unwrap_or_default();
    view! {
        <Suspense>
            {move || user.get().map(|u| match u {
                Ok(_) => view! { <TaskDetail id=id.clone()/> }.into_any(),
                Err(_) => view! { <Redirect path=crate::base::href("/login")/> }.into_any(),
            })}
        </Suspense>
    }
}

/// One history event in words: who, when, and each field before and after.
fn event_line(e: &TaskEventDto) -> String {
    let who = match (e.actor.as_str(), e.session_id) {
        ("agent", Some(s)) => format!("an agent (session {s})"),
        ("agent", None) => "an agent".to_owned(),
        _ => "you".to_owned(),
    };
    format!("{} · {who}", e.created_at)
}

fn change_line(c: &hero_shared::api::FieldChange) -> String {
    let show = |v: &Option<String>| v.clone().unwrap_or_else(|| "—".into());
    match c.field.as_str() {
        "created" => format!("made as {}", show(&c.to)),
        f if c.from.is_none() => format!("{f}: {}", show(&c.to)),
        f => format!("{f}: {} → {}", show(&c.from), show(&c.to)),
    }
}

#[component]
fn TaskDetail(id: String) -> impl IntoView {
    use leptos::server_fn::ServerFn;
    let task = resource(move || id.clone(), read_task);
    let body = move || {
        task.get().map(|r| match r {
            Ok((t, history)) => {
                let current = t.status.clone();
                let priority = t.priority;
                let back = crate::base::href(&format!("/tasks?team={}", t.team));
                view! {
                    <p><a href=back>"← Back to the board"</a></p>
                    <h1 data-testid="task-title">{format!("{} · {}", t.identifier, t.title)}</h1>
                    <span class="saved" role="status"></span>
                    <FnForm action=EditTask::PATH then="refresh" class="task-form" done=format!("Saved {}", t.identifier)>
                        <input type="hidden" name="id" value=t.id/>
                        <label>"Title"<input type="text" name="title" value=t.title.clone() required/></label>
                        <label>"Description"<textarea name="description" rows="6">{t.description.clone()}</textarea></label>
                        <p class="muted" data-testid="task-status">{format!("Status: {}", column_name(&current))}</p>
                        <label>"Priority"
                            <select name="priority">
                                {TASK_PRIORITIES.iter().enumerate().map(|(i, p)| view! { <option value=i selected=i as i64 == priority>{*p}</option> }).collect_view()}
                            </select>
                        </label>
                        <label>"Project"<input type="text" name="project" value=t.project.clone().unwrap_or_default()/></label>
                        <label>"Labels"<input type="text" name="labels" value=t.labels.join(", ") placeholder="comma-separated"/></label>
                        <label>"Due"<input type="date" name="due" value=t.due.clone().unwrap_or_default()/></label>
                        <button type="submit">"Save"</button>
                    </FnForm>
                    <h2>"History"</h2>
                    <ol class="task-history" data-testid="task-history">
                        {history.into_iter().map(|e| view! {
                            <li>
                                <div class="muted">{event_line(&e)}</div>
                                <ul>{e.changes.iter().map(|c| view! { <li>{change_line(c)}</li> }).collect_view()}</ul>
                            </li>
                        }).collect_view()}
                    </ol>
                }.into_any()
            }
            Err(e) => view! { <p class="form-error" role="alert">{error_text(&e)}</p> }.into_any(),
        })
    };
    view! {
        <main class="task-page">
            <Suspense>{body}</Suspense>
        </main>
    }
}
