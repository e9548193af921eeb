//! The `task_teams`, `tasks` and `task_events` tables: each user's teams, tasks and every
//! change to a task (reference 004's tasks). A team's key, a task's number, status,
//! priority and due date are plain; names, titles, descriptions, projects, labels and the
//! changes arrive and leave sealed ([`crate::tasks`] seals and opens them).

use super::{Conn, Write};
use crate::Result;

/// A team as stored.
pub struct TeamRow {
    pub id: i64,
    pub key: String,
    pub sealed: Vec<u8>,
    pub created_at: String,
}

fn read_team(r: &impl super::Columns) -> Result<TeamRow> {
    Ok(TeamRow {
        id: r.get(0)?,
        key: r.get(1)?,
        sealed: r.get(2)?,
        created_at: r.get(3)?,
    })
}

/// The user's teams, oldest first.
pub async fn teams(c: &mut Conn<'_>, user_id: i64) -> Result<Vec<TeamRow>> {
    let sql = "SELECT id, key, sealed, created_at FROM task_teams WHERE user_id = $1 ORDER BY id";
    rows!(c, read_team, sql, user_id)
}

/// A new team, its name still to be sealed ([`set_team_name`]: the seal is bound to its id);
/// `None` when the user has a team of that key.
pub async fn insert_team(
    c: &mut Write<'_>,
    user_id: i64,
    key: &str,
    now: &str,
) -> Result<Option<i64>> {
    let sql = "INSERT INTO task_teams (user_id, key, sealed, created_at) VALUES ($1, $2, $3, $4) \
         ON CONFLICT DO NOTHING RETURNING id";
    let empty: &[u8] = &[];
    scalar!(c, i64, sql, user_id, key, empty, now)
}

pub async fn set_team_name(c: &mut Write<'_>, id: i64, sealed: &[u8]) -> Result<()> {
    execute!(
        c,
        "UPDATE task_teams SET sealed = $1 WHERE id = $2",
        sealed,
        id
    )?;
    Ok(())
}

/// How many teams the user has.
pub async fn count_teams(c: &mut Conn<'_>, user_id: i64) -> Result<i64> {
    let sql = "SELECT COUNT(*) FROM task_teams WHERE user_id = $1";
    Ok(scalar!(c, i64, sql, user_id)?.unwrap_or(0))
}

/// The team's next number, taken (the row's lock serialises two creates).
pub async fn take_number(c: &mut Write<'_>, team_id: i64) -> Result<i64> {
    let sql = "UPDATE task_teams SET next_number = next_number + 1 WHERE id = $1 \
         RETURNING next_number - 1";
    scalar!(c, i64, sql, team_id)?
        .ok_or_else(|| crate::Error::Internal("a team vanished while a task was made".into()))
}

/// A task as stored, with its team's key.
#[derive(Clone)]
pub struct TaskRow {
    pub id: i64,
    pub team_id: i64,
    pub key: String,
    pub number: i64,
    pub status: String,
    pub priority: i64,
    pub due: Option<String>,
    pub sealed: Vec<u8>,
    pub created_at: String,
    pub updated_at: String,
}

const TASK_COLUMNS: &str = "t.id, t.team_id, k.key, t.number, t.status, t.priority, t.due, \
     t.sealed, t.created_at, t.updated_at FROM tasks t JOIN task_teams k ON k.id = t.team_id";

fn read_task(r: &impl super::Columns) -> Result<TaskRow> {
    Ok(TaskRow {
        id: r.get(0)?,
        team_id: r.get(1)?,
        key: r.get(2)?,
        number: r.get(3)?,
        status: r.get(4)?,
        priority: r.get(5)?,
        due: r.get(6)?,
        sealed: r.get(7)?,
        created_at: r.get(8)?,
        updated_at: r.get(9)?,
    })
}

/// The user's tasks, of one status and one team or all, newest first.
pub async fn list(
    c: &mut Conn<'_>,
    user_id: i64,
    status: Option<&str>,
    team_id: Option<i64>,
) -> Result<Vec<TaskRow>> {
    let sql = format!(
        "SELECT {TASK_COLUMNS} WHERE t.user_id = $1 AND ($2 IS NULL OR t.status = $2) \
         AND ($3 IS NULL OR t.team_id = $3) ORDER BY t.id DESC"
    );
    rows!(c, read_task, &sql, user_id, status, team_id)
}

/// The user's task `id`.
pub async fn get(c: &mut Conn<'_>, user_id: i64, id: i64) -> Result<Option<TaskRow>> {
    let sql = format!("SELECT {TASK_COLUMNS} WHERE t.user_id = $1 AND t.id = $2");
    row!(c, read_task, &sql, user_id, id)
}

/// The user's task `KEY-number`.
pub async fn by_identifier(
    c: &mut Conn<'_>,
    user_id: i64,
    key: &str,
    number: i64,
) -> Result<Option<TaskRow>> {
    let sql =
        format!("SELECT {TASK_COLUMNS} WHERE t.user_id = $1 AND k.key = $2 AND t.number = $3");
    row!(c, read_task, &sql, user_id, key, number)
}

/// How many tasks each of the user's teams holds: (team, count).
pub async fn per_team(c: &mut Conn<'_>, user_id: i64) -> Result<Vec<(i64, i64)>> {
    let sql = "SELECT team_id, COUNT(*) FROM tasks WHERE user_id = $1 GROUP BY team_id";
    rows!(c, read_pair, sql, user_id)
}

fn read_pair(r: &impl super::Columns) -> Result<(i64, i64)> {
    Ok((r.get(0)?, r.get(1)?))
}

/// How many events a task's history holds.
pub async fn count_events(c: &mut Conn<'_>, task_id: i64) -> Result<i64> {
    let sql = "SELECT COUNT(*) FROM task_events WHERE task_id = $1";
    Ok(scalar!(c, i64, sql, task_id)?.unwrap_or(0))
}

/// How many tasks the user has.
pub async fn count(c: &mut Conn<'_>, user_id: i64) -> Result<i64> {
    let sql = "SELECT COUNT(*) FROM tasks WHERE user_id = $1";
    Ok(scalar!(c, i64, sql, user_id)?.unwrap_or(0))
}

/// A new task, its content still to be sealed ([`set`]: the seal is bound to its id).
#[allow(clippy::too_many_arguments)]
pub async fn insert(
    c: &mut Write<'_>,
    user_id: i64,
    team_id: i64,
    number: i64,
    status: &str,
    priority: i64,
    due: Option<&str>,
    now: &str,
) -> Result<i64> {
    let sql = "INSERT INTO tasks (user_id, team_id, number, status, priority, due, sealed, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8) RETURNING id";
    let empty: &[u8] = &[];
    scalar!(
        c, i64, sql, user_id, team_id, number, status, priority, due, empty, now
    )?
    .ok_or_else(|| crate::Error::Internal("an inserted task came back empty".into()))
}

/// Sets every field of the user's task `id` (its team and number together: a task moved
/// to another team takes its number there).
#[allow(clippy::too_many_arguments)]
pub async fn set(
    c: &mut Write<'_>,
    user_id: i64,
    id: i64,
    team_id: i64,
    number: i64,
    status: &str,
    priority: i64,
    due: Option<&str>,
    sealed: &[u8],
    now: &str,
) -> Result<()> {
    let sql = "UPDATE tasks SET team_id = $1, number = $2, status = $3, priority = $4, due = $5, \
         sealed = $6, updated_at = $7 WHERE id = $8 AND user_id = $9";
    execute!(
        c, sql, team_id, number, status, priority, due, sealed, now, id, user_id
    )?;
    Ok(())
}

/// An event of a task's history as stored.
pub struct EventRow {
    pub n: i64,
    pub actor: String,
    pub agent_id: Option<i64>,
    pub session_id: Option<i64>,
    pub sealed: Vec<u8>,
    pub created_at: String,
}

fn read_event(r: &impl super::Columns) -> Result<EventRow> {
    Ok(EventRow {
        n: r.get(0)?,
        actor: r.get(1)?,
        agent_id: r.get(2)?,
        session_id: r.get(3)?,
        sealed: r.get(4)?,
        created_at: r.get(5)?,
    })
}

/// The next event number of a task.
pub async fn next_event(c: &mut Conn<'_>, task_id: i64) -> Result<i64> {
    let sql = "SELECT COALESCE(MAX(n), 0) + 1 FROM task_events WHERE task_id = $1";
    Ok(scalar!(c, i64, sql, task_id)?.unwrap_or(1))
}

/// Appends an event to a task's history.
#[allow(clippy::too_many_arguments)]
pub async fn add_event(
    c: &mut Write<'_>,
    task_id: i64,
    user_id: i64,
    n: i64,
    actor: &str,
    agent_id: Option<i64>,
    session_id: Option<i64>,
    sealed: &[u8],
    now: &str,
) -> Result<()> {
    let sql = "INSERT INTO task_events (task_id, user_id, n, actor, agent_id, session_id, sealed, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)";
    execute!(
        c, sql, task_id, user_id, n, actor, agent_id, session_id, sealed, now
    )?;
    Ok(())
}

/// A task's history, oldest first.
pub async fn events(c: &mut Conn<'_>, user_id: i64, task_id: i64) -> Result<Vec<EventRow>> {
    let sql = "SELECT n, actor, agent_id, session_id, sealed, created_at FROM task_events \
         WHERE task_id = $1 AND user_id = $2 ORDER BY n";
    rows!(c, read_event, sql, task_id, user_id)
}
