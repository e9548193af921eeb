//! Reference 004's tasks, per user: teams (`{name, key}`; Personal, key PER, made on first
//! use), tasks (`KEY-n`, the number rising in its team; a status, a priority, a project,
//! labels, a due date) and each task's history: every change an event naming who made it
//! (the user, or an agent in a session) with each field before and after. Nothing is
//! deleted; a task no longer wanted is `canceled`.
//!
//! Titles, descriptions, projects, labels, team names and the history are sealed with the
//! user's data key, bound to their row; a team's key and a task's number, status, priority
//! and due date are plain (the board's columns and order, and `PER-123`).
//!
//! Used by the `tasks` capability (`execution::functions::tasks`) and the routes; a change
//! is heard on the user's sockets (`task_changed`). Uses the leaves, `store`, `accounts`
//! and the conversation's hub.

use hero_shared::api::{
    CreateTaskRequest, CreateTeamRequest, FieldChange, TASK_PRIORITIES, TASK_STATUSES, TaskDto,
    TaskEventDto, TeamDto, UpdateTaskRequest,
};
use serde::{Deserialize, Serialize};

use crate::crypto::{self, SecretKey};
use crate::store::{Conn, Write};
use crate::{AppState, Error, Result, now_text, store};

/// The most characters a title may have.
pub const MAX_TITLE_CHARS: usize = 500;
/// The most a description may hold.
pub const MAX_DESCRIPTION_BYTES: usize = 64 << 10;
/// The most characters of a project's name, a label and a team's name.
pub const MAX_NAME_CHARS: usize = 100;
/// The most labels a task may carry.
pub const MAX_LABELS: usize = 20;
/// The most tasks a user may have, and teams.
pub const MAX_TASKS: i64 = 10_000;
pub const MAX_TEAMS: i64 = 50;
/// The most events one task's history may hold: past it, the task takes no more changes
/// (make a new one).
pub const MAX_EVENTS: i64 = 1_000;
/// The team every user has, made on first use.
pub const PERSONAL: (&str, &str) = ("Personal", "PER");

/// Who changes a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Actor {
    User,
    /// An agent's call, in a session.
    Agent {
        agent_id: Option<i64>,
        session_id: i64,
    },
}

/// What a task's seal holds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Body {
    title: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    project: Option<String>,
    #[serde(default)]
    labels: Vec<String>,
}

fn seal_json<T: Serialize>(dk: &SecretKey, aad: &str, v: &T) -> Result<Vec<u8>> {
    let bytes = serde_json::to_vec(v).map_err(|e| Error::Internal(e.to_string()))?;
    Ok(crypto::seal(dk, aad.as_bytes(), &bytes))
}

fn open_json<T: for<'de> Deserialize<'de>>(dk: &SecretKey, aad: &str, sealed: &[u8]) -> Result<T> {
    let bytes = crypto::open(dk, aad.as_bytes(), sealed)?;
    serde_json::from_slice(&bytes).map_err(|_| Error::Internal("a task's row is unreadable".into()))
}

fn task_aad(user_id: i64, id: i64) -> String {
    format!("task:{user_id}:{id}")
}

fn team_aad(user_id: i64, id: i64) -> String {
    format!("task_team:{user_id}:{id}")
}

fn event_aad(user_id: i64, task_id: i64, n: i64) -> String {
    format!("task_event:{user_id}:{task_id}:{n}")
}

/// A team, opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Team {
    pub id: i64,
    pub key: String,
    pub name: String,
}

async fn teams_of(c: &mut Conn<'_>, dk: &SecretKey, user_id: i64) -> Result<Vec<Team>> {
    store::tasks::teams(c, user_id)
        .await?
        .into_iter()
        .map(|r| {
            Ok(Team {
                name: open_json(dk, &team_aad(user_id, r.id), &r.sealed)?,
                id: r.id,
                key: r.key,
            })
        })
        .collect()
}

/// Checks a team's name and key: a name of 1 to 100 characters, a key of 2 to 10 capital
/// letters or digits, starting with a letter.
fn check_team(name: &str, key: &str) -> Result<()> {
    let name_ok = !name.trim().is_empty() && name.chars().count() <= MAX_NAME_CHARS;
    if !name_ok {
        return Err(Error::Invalid(format!(
            "a team's name has 1 to {MAX_NAME_CHARS} characters"
        )));
    }
    let mut chars = key.chars();
    let key_ok = (2..=10).contains(&key.len())
        && chars.next().is_some_and(|c| c.is_ascii_uppercase())
        && chars.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit());
    if !key_ok {
        return Err(Error::Invalid(format!(
            "a team's key is 2 to 10 capital letters or digits, starting with a letter (PER), not {key:?}"
        )));
    }
    Ok(())
}

/// Makes a team; `None` when the user has one of that key.
async fn make_team(
    tx: &mut Write<'_>,
    dk: &SecretKey,
    user_id: i64,
    name: &str,
    key: &str,
) -> Result<Option<Team>> {
    if store::tasks::count_teams(tx, user_id).await? >= MAX_TEAMS {
        return Err(Error::Limit(format!(
            "a user has at most {MAX_TEAMS} teams"
        )));
    }
    let Some(id) = store::tasks::insert_team(tx, user_id, key, &now_text()).await? else {
        return Ok(None);
    };
    store::tasks::set_team_name(tx, id, &seal_json(dk, &team_aad(user_id, id), &name)?).await?;
    Ok(Some(Team {
        id,
        key: key.to_owned(),
        name: name.to_owned(),
    }))
}

/// The team `given` names (its key or its name, in any case); none given: Personal, made
/// on first use. An unknown one is refused, naming the teams there are.
async fn team_for(
    tx: &mut Write<'_>,
    dk: &SecretKey,
    user_id: i64,
    given: Option<&str>,
) -> Result<Team> {
    let teams = teams_of(tx, dk, user_id).await?;
    let given = given.map(str::trim).filter(|g| !g.is_empty());
    let wanted = given.unwrap_or(PERSONAL.1);
    if let Some(t) = teams
        .iter()
        .find(|t| t.key.eq_ignore_ascii_case(wanted) || t.name.eq_ignore_ascii_case(wanted))
    {
        return Ok(t.clone());
    }
    let personal =
        wanted.eq_ignore_ascii_case(PERSONAL.1) || wanted.eq_ignore_ascii_case(PERSONAL.0);
    if personal {
        if let Some(t) = make_team(tx, dk, user_id, PERSONAL.0, PERSONAL.1).await? {
            return Ok(t);
        }
        // Another first use made it meanwhile (it waited for that one's commit).
        if let Some(t) = teams_of(tx, dk, user_id)
            .await?
            .into_iter()
            .find(|t| t.key == PERSONAL.1)
        {
            return Ok(t);
        }
    }
    let mut names: Vec<String> = teams
        .iter()
        .map(|t| format!("{} ({})", t.name, t.key))
        .collect();
    if !teams.iter().any(|t| t.key == PERSONAL.1) {
        names.push(format!("{} ({})", PERSONAL.0, PERSONAL.1));
    }
    Err(Error::Invalid(format!(
        "there is no team {wanted:?}; the teams are {}",
        names.join(", ")
    )))
}

fn check_status(s: &str) -> Result<&'static str> {
    TASK_STATUSES
        .iter()
        .find(|t| **t == s)
        .copied()
        .ok_or_else(|| {
            Error::Invalid(format!(
                "there is no status {s:?}; the statuses are {}",
                TASK_STATUSES.join(", ")
            ))
        })
}

fn check_priority(p: i64) -> Result<i64> {
    if (0..TASK_PRIORITIES.len() as i64).contains(&p) {
        return Ok(p);
    }
    let listed: Vec<String> = TASK_PRIORITIES
        .iter()
        .enumerate()
        .map(|(i, n)| format!("{i} ({n})"))
        .collect();
    Err(Error::Invalid(format!(
        "there is no priority {p}; the priorities are {}",
        listed.join(", ")
    )))
}

fn check_title(t: &str) -> Result<String> {
    let t = t.trim();
    if t.is_empty() {
        return Err(Error::Invalid("a task needs a title".into()));
    }
    if t.chars().count() > MAX_TITLE_CHARS {
        return Err(Error::Invalid(format!(
            "a title has at most {MAX_TITLE_CHARS} characters"
        )));
    }
    Ok(t.to_owned())
}

fn check_description(d: &str) -> Result<String> {
    if d.len() > MAX_DESCRIPTION_BYTES {
        return Err(Error::Invalid(format!(
            "a description holds at most {} KiB",
            MAX_DESCRIPTION_BYTES >> 10
        )));
    }
    Ok(d.to_owned())
}

/// A project's name: `""` clears it.
fn check_project(p: &str) -> Result<Option<String>> {
    let p = p.trim();
    if p.chars().count() > MAX_NAME_CHARS {
        return Err(Error::Invalid(format!(
            "a project's name has at most {MAX_NAME_CHARS} characters"
        )));
    }
    Ok((!p.is_empty()).then(|| p.to_owned()))
}

fn check_labels(labels: &[String]) -> Result<Vec<String>> {
    if labels.len() > MAX_LABELS {
        return Err(Error::Invalid(format!(
            "a task carries at most {MAX_LABELS} labels"
        )));
    }
    let mut out: Vec<String> = Vec::new();
    for l in labels {
        let l = l.trim();
        if l.is_empty() || l.chars().count() > MAX_NAME_CHARS {
            return Err(Error::Invalid(format!(
                "a label has 1 to {MAX_NAME_CHARS} characters"
            )));
        }
        if !out.iter().any(|o| o == l) {
            out.push(l.to_owned());
        }
    }
    Ok(out)
}

/// A due date, `YYYY-MM-DD`: `""` clears it.
fn check_due(d: &str) -> Result<Option<String>> {
    let d = d.trim();
    if d.is_empty() {
        return Ok(None);
    }
    let format = time::macros::format_description!("[year]-[month]-[day]");
    time::Date::parse(d, &format)
        .map(|_| Some(d.to_owned()))
        .map_err(|_| Error::Invalid(format!("a due date is YYYY-MM-DD, not {d:?}")))
}

/// A task, opened.
struct Task {
    row: store::tasks::TaskRow,
    body: Body,
}

impl Task {
    fn identifier(&self) -> String {
        format!("{}-{}", self.row.key, self.row.number)
    }

    fn dto(&self) -> TaskDto {
        TaskDto {
            id: self.row.id,
            identifier: self.identifier(),
            team: self.row.key.clone(),
            title: self.body.title.clone(),
            description: self.body.description.clone(),
            status: self.row.status.clone(),
            priority: self.row.priority,
            project: self.body.project.clone(),
            labels: self.body.labels.clone(),
            due: self.row.due.clone(),
            created_at: self.row.created_at.clone(),
            updated_at: self.row.updated_at.clone(),
        }
    }

    /// Each field as history shows it.
    fn fields(&self) -> Vec<(&'static str, Option<String>)> {
        vec![
            ("title", Some(self.body.title.clone())),
            (
                "description",
                Some(self.body.description.clone()).filter(|d| !d.is_empty()),
            ),
            ("team", Some(self.row.key.clone())),
            ("status", Some(self.row.status.clone())),
            (
                "priority",
                Some(TASK_PRIORITIES[self.row.priority as usize].to_owned()),
            ),
            ("project", self.body.project.clone()),
            (
                "labels",
                Some(self.body.labels.join(", ")).filter(|l| !l.is_empty()),
            ),
            ("due", self.row.due.clone()),
        ]
    }
}

fn opened(dk: &SecretKey, user_id: i64, row: store::tasks::TaskRow) -> Result<Task> {
    let body = open_json(dk, &task_aad(user_id, row.id), &row.sealed)?;
    Ok(Task { row, body })
}

/// The user's task named `id`: its number, or its identifier (`PER-123`, in any case).
async fn find(c: &mut Conn<'_>, dk: &SecretKey, user_id: i64, id: &str) -> Result<Task> {
    let id = id.trim();
    let row = match id.parse::<i64>() {
        Ok(n) => store::tasks::get(c, user_id, n).await?,
        Err(_) => match id
            .rsplit_once('-')
            .map(|(k, n)| (k.to_ascii_uppercase(), n.parse::<i64>()))
        {
            Some((key, Ok(n))) => store::tasks::by_identifier(c, user_id, &key, n).await?,
            _ => None,
        },
    };
    opened(dk, user_id, row.ok_or(Error::NotFound("task"))?)
}

/// Appends an event to the task's history: the fields that changed.
async fn record(
    tx: &mut Write<'_>,
    dk: &SecretKey,
    user_id: i64,
    task_id: i64,
    actor: Actor,
    changes: &[FieldChange],
) -> Result<()> {
    let n = store::tasks::next_event(tx, task_id).await?;
    let sealed = seal_json(dk, &event_aad(user_id, task_id, n), &changes)?;
    let (who, agent_id, session_id) = match actor {
        Actor::User => ("user", None, None),
        Actor::Agent {
            agent_id,
            session_id,
        } => ("agent", agent_id, Some(session_id)),
    };
    store::tasks::add_event(
        tx,
        task_id,
        user_id,
        n,
        who,
        agent_id,
        session_id,
        &sealed,
        &now_text(),
    )
    .await
}

async fn key_of(st: &AppState, user_id: i64) -> Result<SecretKey> {
    crate::accounts::users::data_key(&st.db, &st.keys, user_id).await
}

/// The user's sockets hear of a task made or changed.
fn changed(st: &AppState, user_id: i64, t: &TaskDto) {
    st.hub.publish_user(
        user_id,
        crate::conversation::hub::HubEvent::TaskChanged {
            task_id: t.id,
            identifier: t.identifier.clone(),
            status: t.status.clone(),
        },
    );
}

/// Makes a task (in Personal unless a team is named; `todo` unless a status is).
pub async fn create(
    st: &AppState,
    user_id: i64,
    actor: Actor,
    req: CreateTaskRequest,
) -> Result<TaskDto> {
    let body = Body {
        title: check_title(&req.title)?,
        description: check_description(req.description.as_deref().unwrap_or(""))?,
        project: check_project(req.project.as_deref().unwrap_or(""))?,
        labels: check_labels(req.labels.as_deref().unwrap_or(&[]))?,
    };
    let status = check_status(req.status.as_deref().unwrap_or("todo"))?;
    let priority = check_priority(req.priority.unwrap_or(0))?;
    let due = check_due(req.due.as_deref().unwrap_or(""))?;
    let dk = key_of(st, user_id).await?;
    let task =
        st.db
            .write_with(async |tx| {
                // One user's task changes take turns (PostgreSQL; SQLite has one writer).
                store::users::lock(tx, user_id).await?;
                if store::tasks::count(tx, user_id).await? >= MAX_TASKS {
                    return Err(Error::Limit(format!(
                        "a user has at most {MAX_TASKS} tasks"
                    )));
                }
                let team = team_for(tx, &dk, user_id, req.team.as_deref()).await?;
                let number = store::tasks::take_number(tx, team.id).await?;
                let now = now_text();
                let id = store::tasks::insert(
                    tx,
                    user_id,
                    team.id,
                    number,
                    status,
                    priority,
                    due.as_deref(),
                    &now,
                )
                .await?;
                let sealed = seal_json(&dk, &task_aad(user_id, id), &body)?;
                store::tasks::set(
                    tx,
                    user_id,
                    id,
                    team.id,
                    number,
                    status,
                    priority,
                    due.as_deref(),
                    &sealed,
                    &now,
                )
                .await?;
                let row = store::tasks::get(tx, user_id, id)
                    .await?
                    .ok_or(Error::NotFound("task"))?;
                let task = Task {
                    row,
                    body: body.clone(),
                };
                let mut changes = vec![FieldChange {
                    field: "created".into(),
                    from: None,
                    to: Some(task.identifier()),
                }];
                changes.extend(task.fields().into_iter().filter(|(_, v)| v.is_some()).map(
                    |(f, v)| FieldChange {
                        field: f.into(),
                        from: None,
                        to: v,
                    },
                ));
                record(tx, &dk, user_id, id, actor, &changes).await?;
                Ok(task.dto())
            })
            .await?;
    changed(st, user_id, &task);
    Ok(task)
}

/// Changes the fields given of the user's task `id` (its number or identifier); every
/// change is an event of its history. A change to nothing records nothing.
pub async fn update(
    st: &AppState,
    user_id: i64,
    actor: Actor,
    id: &str,
    req: UpdateTaskRequest,
) -> Result<TaskDto> {
    let dk = key_of(st, user_id).await?;
    let task = st
        .db
        .write_with(async |tx| {
            store::users::lock(tx, user_id).await?;
            let before = find(tx, &dk, user_id, id).await?;
            if store::tasks::count_events(tx, before.row.id).await? >= MAX_EVENTS {
                return Err(Error::Limit(format!(
                    "{} has had {MAX_EVENTS} changes, the most a task's history keeps; make a new task",
                    before.identifier()
                )));
            }
            let mut body = before.body.clone();
            if let Some(t) = &req.title {
                body.title = check_title(t)?;
            }
            if let Some(d) = &req.description {
                body.description = check_description(d)?;
            }
            if let Some(p) = &req.project {
                body.project = check_project(p)?;
            }
            if let Some(l) = &req.labels {
                body.labels = check_labels(l)?;
            }
            let status = match &req.status {
                Some(s) => check_status(s)?.to_owned(),
                None => before.row.status.clone(),
            };
            let priority = match req.priority {
                Some(p) => check_priority(p)?,
                None => before.row.priority,
            };
            let due = match &req.due {
                Some(d) => check_due(d)?,
                None => before.row.due.clone(),
            };
            let team = match &req.team {
                Some(t) => team_for(tx, &dk, user_id, Some(t)).await?,
                None => Team {
                    id: before.row.team_id,
                    key: before.row.key.clone(),
                    name: String::new(),
                },
            };
            // A task moved to another team keeps its identifier's number only in its
            // history: it takes the next number there.
            let number = if team.id == before.row.team_id {
                before.row.number
            } else {
                store::tasks::take_number(tx, team.id).await?
            };
            let mut row = store::tasks::TaskRow {
                team_id: team.id,
                key: team.key.clone(),
                number,
                status,
                priority,
                due,
                ..before.row.clone()
            };
            let after = Task {
                row: row.clone(),
                body: body.clone(),
            };
            let changes: Vec<FieldChange> = before
                .fields()
                .into_iter()
                .zip(after.fields())
                .filter(|((_, a), (_, b))| a != b)
                .map(|((f, a), (_, b))| FieldChange {
                    field: f.into(),
                    from: a,
                    to: b,
                })
                .collect();
            if changes.is_empty() {
                return Ok((before.dto(), false));
            }
            let now = now_text();
            let sealed = seal_json(&dk, &task_aad(user_id, before.row.id), &body)?;
            store::tasks::set(
                tx,
                user_id,
                before.row.id,
                team.id,
                number,
                &row.status,
                priority,
                row.due.as_deref(),
                &sealed,
                &now,
            )
            .await?;
            record(tx, &dk, user_id, before.row.id, actor, &changes).await?;
            row.updated_at = now;
            Ok((Task { row, body }.dto(), true))
        })
        .await?;
    let (task, moved) = task;
    if moved {
        changed(st, user_id, &task);
    }
    Ok(task)
}

/// The user's task `id` (its number or identifier).
pub async fn get(st: &AppState, user_id: i64, id: &str) -> Result<TaskDto> {
    let dk = key_of(st, user_id).await?;
    st.db
        .read_with(async |c| Ok(find(c, &dk, user_id, id).await?.dto()))
        .await
}

/// The user's tasks, newest first: of one status (else all), of one team (its key or
/// name; else all).
pub async fn list(
    st: &AppState,
    user_id: i64,
    status: Option<&str>,
    team: Option<&str>,
) -> Result<Vec<TaskDto>> {
    let status = status.map(check_status).transpose()?;
    let dk = key_of(st, user_id).await?;
    st.db
        .read_with(async |c| {
            let team_id = match team.map(str::trim).filter(|t| !t.is_empty()) {
                Some(t) => {
                    let teams = teams_of(c, &dk, user_id).await?;
                    let found = teams
                        .iter()
                        .find(|x| x.key.eq_ignore_ascii_case(t) || x.name.eq_ignore_ascii_case(t));
                    match found {
                        Some(x) => Some(x.id),
                        // Personal is made on first use: before it, it holds nothing.
                        None if t.eq_ignore_ascii_case(PERSONAL.1)
                            || t.eq_ignore_ascii_case(PERSONAL.0) =>
                        {
                            return Ok(Vec::new());
                        }
                        None => {
                            let names: Vec<String> = teams
                                .iter()
                                .map(|x| format!("{} ({})", x.name, x.key))
                                .collect();
                            return Err(Error::Invalid(format!(
                                "there is no team {t:?}; the teams are {}",
                                if names.is_empty() {
                                    "none yet".to_owned()
                                } else {
                                    names.join(", ")
                                }
                            )));
                        }
                    }
                }
                None => None,
            };
            store::tasks::list(c, user_id, status, team_id)
                .await?
                .into_iter()
                .map(|r| Ok(opened(&dk, user_id, r)?.dto()))
                .collect()
        })
        .await
}

/// The history of the user's task `id`, oldest first.
pub async fn history(st: &AppState, user_id: i64, id: &str) -> Result<Vec<TaskEventDto>> {
    let dk = key_of(st, user_id).await?;
    st.db
        .read_with(async |c| {
            let task = find(c, &dk, user_id, id).await?;
            store::tasks::events(c, user_id, task.row.id)
                .await?
                .into_iter()
                .map(|e| {
                    Ok(TaskEventDto {
                        changes: open_json(&dk, &event_aad(user_id, task.row.id, e.n), &e.sealed)?,
                        actor: e.actor,
                        agent_id: e.agent_id,
                        session_id: e.session_id,
                        created_at: e.created_at,
                    })
                })
                .collect()
        })
        .await
}

/// The user's teams, each with how many tasks it holds (Personal made on first use).
pub async fn teams(st: &AppState, user_id: i64) -> Result<Vec<TeamDto>> {
    let dk = key_of(st, user_id).await?;
    let (teams, counts) = st
        .db
        .write_with(async |tx| {
            team_for(tx, &dk, user_id, None).await?;
            let teams = teams_of(tx, &dk, user_id).await?;
            Ok((teams, store::tasks::per_team(tx, user_id).await?))
        })
        .await?;
    Ok(teams
        .into_iter()
        .map(|t| TeamDto {
            tasks: counts
                .iter()
                .find(|(id, _)| *id == t.id)
                .map_or(0, |(_, n)| *n),
            id: t.id,
            key: t.key,
            name: t.name,
        })
        .collect())
}

/// Makes a team: 409 when its key is taken.
pub async fn create_team(st: &AppState, user_id: i64, req: CreateTeamRequest) -> Result<TeamDto> {
    let name = req.name.trim().to_owned();
    let key = req.key.trim().to_owned();
    check_team(&name, &key)?;
    let dk = key_of(st, user_id).await?;
    let team = st
        .db
        .write_with(async |tx| {
            store::users::lock(tx, user_id).await?;
            make_team(tx, &dk, user_id, &name, &key).await
        })
        .await?
        .ok_or_else(|| Error::Conflict(format!("you have a team of key {key} already")))?;
    Ok(TeamDto {
        id: team.id,
        key: team.key,
        name: team.name,
        tasks: 0,
    })
}

/// What `get_team_context` tells: the teams, and the projects and labels tasks carry.
pub struct Context {
    pub teams: Vec<TeamDto>,
    pub projects: Vec<String>,
    pub labels: Vec<String>,
}

pub async fn context(st: &AppState, user_id: i64) -> Result<Context> {
    let teams = teams(st, user_id).await?;
    let all = list(st, user_id, None, None).await?;
    let mut projects: Vec<String> = all.iter().filter_map(|t| t.project.clone()).collect();
    projects.sort();
    projects.dedup();
    let mut labels: Vec<String> = all.iter().flat_map(|t| t.labels.clone()).collect();
    labels.sort();
    labels.dedup();
    Ok(Context {
        teams,
        projects,
        labels,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A task's history keeps at most MAX_EVENTS events: past it, a change is refused in
    /// words and nothing is written.
    #[tokio::test]
    async fn a_tasks_history_is_bounded() {
        let (_dir, st) = crate::test_support::state().await;
        let user = crate::test_support::signed_in(&st, "alice").await;
        let made = create(
            &st,
            user.id(),
            Actor::User,
            CreateTaskRequest {
                title: "t".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
        for i in 1..MAX_EVENTS {
            let req = UpdateTaskRequest {
                priority: Some(i % 2 + 1),
                ..Default::default()
            };
            update(&st, user.id(), Actor::User, &made.identifier, req)
                .await
                .unwrap();
        }
        let req = UpdateTaskRequest {
            title: Some("changed".into()),
            ..Default::default()
        };
        let past = update(&st, user.id(), Actor::User, &made.identifier, req)
            .await
            .unwrap_err();
        assert!(matches!(past, Error::Limit(_)), "{past}");
        assert_eq!(get(&st, user.id(), "PER-1").await.unwrap().title, "t");
        assert_eq!(
            history(&st, user.id(), "PER-1").await.unwrap().len() as i64,
            MAX_EVENTS
        );
    }

    #[test]
    fn team_keys_and_statuses_are_checked_in_words() {
        assert!(check_team("Work", "WRK").is_ok());
        for bad in ["w", "WORKWORKWORK", "1AB", "wrk"] {
            assert!(check_team("Work", bad).is_err(), "{bad}");
        }
        let e = check_status("doing").unwrap_err().to_string();
        assert!(
            e.contains("triage, backlog, todo, in_progress, done, canceled"),
            "{e}"
        );
        let e = check_priority(7).unwrap_err().to_string();
        assert!(
            e.contains("0 (none), 1 (urgent), 2 (high), 3 (medium), 4 (low)"),
            "{e}"
        );
        assert_eq!(
            check_due("2026-12-01").unwrap().as_deref(),
            Some("2026-12-01")
        );
        assert!(check_due("tomorrow").is_err());
        assert_eq!(
            check_labels(&["a".into(), " a ".into(), "b".into()]).unwrap(),
            ["a", "b"]
        );
    }
}
