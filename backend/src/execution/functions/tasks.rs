//! The `tasks` capability (reference 004, "Tasks"): the agent lists, makes, changes and
//! reads the user's tasks ([`crate::tasks`]), as the agent of its session (each change in
//! the task's history names it). Reads run at once and are safe; writes run at once and
//! are moderate: the history keeps every change, and nothing is deleted.

use futures::future::BoxFuture;
use hero_shared::api::{CreateTaskRequest, TASK_PRIORITIES, TaskDto, UpdateTaskRequest};
use hero_shared::calls::{DangerLevel, FunctionPermissions, Permission};
use serde_json::{Value, json};

use super::{Capability, Ctx, Spec, ToolResult};
use crate::tasks::{self, Actor};

pub struct Tasks;

/// The capability's shipped instructions (the first version of `capability:tasks`).
pub const PROMPT: &str = "The user's tasks live on their board in Hero, in teams; Personal (key PER) is \
everyone's. list_tasks shows what is open (give a status or a team to narrow it); get_task reads one by its \
identifier (PER-12) with its history. create_task makes one: in Personal unless the user names a team, `todo` \
unless you give a status; put a task you only suggest in `triage`, where the user accepts or declines it. \
update_task changes its status (triage, backlog, todo, in_progress, done, canceled), priority (1 urgent, \
2 high, 3 medium, 4 low, 0 none), project, labels or due date (YYYY-MM-DD). get_team_context names the \
teams, projects and labels in use; get_suggested_tasks lists what waits in Triage. Nothing is deleted: a \
task no longer wanted is canceled.";

fn spec(
    name: &'static str,
    description: &'static str,
    danger: DangerLevel,
    schema: Value,
    example: Value,
) -> Spec {
    Spec {
        name: name.into(),
        description: description.into(),
        plugin: None,
        default: Permission::Always,
        permissions: FunctionPermissions::allowed(danger),
        answered_by_user: false,
        schema,
        examples: vec![example],
    }
}

/// The fields a task's tools take beside its title.
fn fields() -> Value {
    json!({
        "description": {"type": "string", "description": "what it is about, in Markdown"},
        "team": {"type": "string", "description": "the team's key or name (Personal if none)", "maxLength": 100},
        "status": {"type": "string", "enum": hero_shared::api::TASK_STATUSES},
        "priority": {"type": "integer", "description": "0 none, 1 urgent, 2 high, 3 medium, 4 low", "minimum": 0, "maximum": 4},
        "project": {"type": "string", "maxLength": 100},
        "labels": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 100}, "maxItems": 20},
        "due": {"type": "string", "description": "YYYY-MM-DD"}
    })
}

impl Capability for Tasks {
    fn name(&self) -> &str {
        "tasks"
    }

    fn tools(&self) -> Vec<Spec> {
        let mut create = fields();
        create["title"] =
            json!({"type": "string", "minLength": 1, "maxLength": tasks::MAX_TITLE_CHARS});
        let mut update = fields();
        update["id"] = json!({"type": "string", "description": "the task's identifier (PER-12)", "minLength": 1, "maxLength": 40});
        update["title"] =
            json!({"type": "string", "minLength": 1, "maxLength": tasks::MAX_TITLE_CHARS});
        vec![
            spec(
                "list_tasks",
                "Lists the user's open tasks (not done or canceled), or those of a status or team.",
                DangerLevel::Safe,
                json!({"type": "object", "properties": {
                    "status": {"type": "string", "enum": hero_shared::api::TASK_STATUSES},
                    "team": {"type": "string", "maxLength": 100}
                }}),
                json!({"team": "PER"}),
            ),
            spec(
                "create_task",
                "Makes a task on the user's board.",
                DangerLevel::Moderate,
                json!({"type": "object", "properties": create, "required": ["title"]}),
                json!({"title": "Renew the passport", "priority": 2, "due": "2026-12-15"}),
            ),
            spec(
                "update_task",
                "Changes a task: any of its title, description, team, status, priority, project, labels or due date.",
                DangerLevel::Moderate,
                json!({"type": "object", "properties": update, "required": ["id"]}),
                json!({"id": "PER-12", "status": "done"}),
            ),
            spec(
                "get_task",
                "Reads a task by its identifier (PER-12), with its history.",
                DangerLevel::Safe,
                json!({"type": "object", "properties": {
                    "id": {"type": "string", "minLength": 1, "maxLength": 40}
                }, "required": ["id"]}),
                json!({"id": "PER-12"}),
            ),
            spec(
                "get_team_context",
                "Names the user's teams, and the projects and labels their tasks carry.",
                DangerLevel::Safe,
                json!({"type": "object", "properties": {}}),
                json!({}),
            ),
            spec(
                "get_suggested_tasks",
                "Lists the tasks waiting in Triage for the user to accept or decline.",
                DangerLevel::Safe,
                json!({"type": "object", "properties": {}}),
                json!({}),
            ),
        ]
    }

    fn prompt(&self) -> &str {
        PROMPT
    }

    fn handle<'a>(
        &'a self,
        cx: &'a Ctx<'a>,
        tool: &'a str,
        input: &'a Value,
    ) -> BoxFuture<'a, Option<Result<ToolResult, String>>> {
        Box::pin(async move {
            let answer = match tool {
                "list_tasks" => list(cx, input).await,
                "create_task" => create(cx, input).await,
                "update_task" => update(cx, input).await,
                "get_task" => get(cx, input).await,
                "get_team_context" => context(cx).await,
                "get_suggested_tasks" => suggested(cx).await,
                _ => return None,
            };
            Some(answer.map(|result| ToolResult {
                result,
                pending_change_id: None,
            }))
        })
    }
}

fn told(e: crate::Error) -> String {
    e.public_message()
}

fn actor(cx: &Ctx<'_>) -> Actor {
    Actor::Agent {
        agent_id: cx.agent_id,
        session_id: cx.session_id,
    }
}

/// A task in one line, as the agent reads a list.
fn line(t: &TaskDto) -> String {
    let mut out = format!("- {} [{}] {}", t.identifier, t.status, t.title);
    if t.priority > 0 {
        out.push_str(&format!(
            " (priority: {})",
            TASK_PRIORITIES[t.priority as usize]
        ));
    }
    if let Some(p) = &t.project {
        out.push_str(&format!(" · project {p}"));
    }
    if !t.labels.is_empty() {
        out.push_str(&format!(" · labels {}", t.labels.join(", ")));
    }
    if let Some(d) = &t.due {
        out.push_str(&format!(" · due {d}"));
    }
    out.push('\n');
    out
}

fn lines(list: &[TaskDto], none: &str) -> String {
    if list.is_empty() {
        return none.to_owned();
    }
    list.iter().map(line).collect()
}

fn arg<'v>(input: &'v Value, k: &str) -> Option<&'v str> {
    input.get(k).and_then(Value::as_str)
}

async fn list(cx: &Ctx<'_>, input: &Value) -> Result<String, String> {
    let status = arg(input, "status");
    let all = tasks::list(cx.st, cx.user_id, status, arg(input, "team"))
        .await
        .map_err(told)?;
    let shown: Vec<TaskDto> = all
        .into_iter()
        .filter(|t| status.is_some() || !matches!(t.status.as_str(), "done" | "canceled"))
        .collect();
    Ok(lines(&shown, "No tasks."))
}

/// The tool's arguments as the request they spell (the schema checked them; the names are
/// the API's).
fn request<T: serde::de::DeserializeOwned>(input: &Value) -> Result<T, String> {
    serde_json::from_value(input.clone()).map_err(|e| format!("the arguments do not fit: {e}"))
}

/// A task that is not the user's is told by the name the agent gave.
fn missing(id: &str) -> impl Fn(crate::Error) -> String + '_ {
    move |e| match e {
        crate::Error::NotFound(_) => format!("there is no task {id:?}"),
        e => told(e),
    }
}

async fn create(cx: &Ctx<'_>, input: &Value) -> Result<String, String> {
    let req: CreateTaskRequest = request(input)?;
    let t = tasks::create(cx.st, cx.user_id, actor(cx), req)
        .await
        .map_err(told)?;
    Ok(format!("Made {}:\n{}", t.identifier, line(&t)))
}

async fn update(cx: &Ctx<'_>, input: &Value) -> Result<String, String> {
    let id = arg(input, "id").unwrap_or_default();
    let req: UpdateTaskRequest = request(input)?;
    let t = tasks::update(cx.st, cx.user_id, actor(cx), id, req)
        .await
        .map_err(missing(id))?;
    Ok(format!("Changed {}:\n{}", t.identifier, line(&t)))
}

async fn get(cx: &Ctx<'_>, input: &Value) -> Result<String, String> {
    let id = arg(input, "id").unwrap_or_default();
    let t = tasks::get(cx.st, cx.user_id, id)
        .await
        .map_err(missing(id))?;
    let history = tasks::history(cx.st, cx.user_id, id)
        .await
        .map_err(missing(id))?;
    let mut out = line(&t);
    if !t.description.is_empty() {
        out.push_str(&format!("\n{}\n", t.description));
    }
    out.push_str("\nHistory:\n");
    for e in history {
        let fields: Vec<&str> = e.changes.iter().map(|c| c.field.as_str()).collect();
        out.push_str(&format!(
            "- {} by {}: {}\n",
            e.created_at,
            e.actor,
            fields.join(", ")
        ));
    }
    Ok(out)
}

async fn context(cx: &Ctx<'_>) -> Result<String, String> {
    let c = tasks::context(cx.st, cx.user_id).await.map_err(told)?;
    let teams: Vec<String> = c
        .teams
        .iter()
        .map(|t| format!("{} ({}, {} tasks)", t.name, t.key, t.tasks))
        .collect();
    let or_none = |v: &[String]| {
        if v.is_empty() {
            "none".to_owned()
        } else {
            v.join(", ")
        }
    };
    Ok(format!(
        "Teams: {}\nProjects: {}\nLabels: {}\n",
        teams.join(", "),
        or_none(&c.projects),
        or_none(&c.labels)
    ))
}

async fn suggested(cx: &Ctx<'_>) -> Result<String, String> {
    let list = tasks::list(cx.st, cx.user_id, Some("triage"), None)
        .await
        .map_err(told)?;
    Ok(lines(&list, "Nothing waits in Triage."))
}
