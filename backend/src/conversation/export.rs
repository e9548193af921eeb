//! A session taken out of Hero and brought back: export as Markdown (for people: names,
//! times, elements as text) or as JSON (the frames, opened, in the versioned format below);
//! everything the user owns as one tar archive; import of a JSON export into a new
//! session; and a branch, a new session copied from one up to a message.
//!
//! An export streams: the frames are read a page at a time and written as they come, so a
//! session of any length costs one page of memory (and, for Markdown, which writes the
//! versions shown, one part of the conversation that holds versions, and the updates that
//! change messages: [`Shown`]). An import is read whole (its body is
//! bounded by the route), checked before anything is stored, and stored in one
//! transaction: a bad file stores nothing. It never runs anything it carries: a call
//! without its result gets one saying it came in an import and was not run, so no
//! recovery and no approval can ever start it.
//!
//! The JSON format (`format: "hero-session"`, `version: 1`):
//! `{format, version, exported_at, session: {name, created_at}, frames: [{id, parent_id,
//! target_ids, timestamp, type, author_type, payload}]}`, frames in the log's order.

use std::collections::{HashMap, HashSet};

use bytes::Bytes;
use futures::Stream;
use hero_shared::api::{CreateSessionRequest, SessionDto};
use hero_shared::frame::{AuthorType, Frame, FrameType, TargetId};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::frames::{self, NewFrame};
use crate::accounts::auth::AuthUser;
use crate::crypto::SecretKey;
use crate::{AppState, Error, Result, store};

/// The format's name, which an import checks first.
pub const FORMAT: &str = "hero-session";
/// The format's version this Hero writes, and the newest it reads.
pub const VERSION: u32 = 1;
/// The most bytes an import's body may hold (the route's bound).
pub const MAX_IMPORT_BYTES: usize = 32 << 20;
/// Frames read (and written) at a time while exporting.
const PAGE: i64 = 500;

/// One import or branch stores at a time: each holds the database's writer for its one
/// transaction (about 20 µs a frame on SQLite), and its frames in memory.
static STORING: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(1);

/// How a session is exported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Markdown,
    Json,
}

impl Format {
    pub fn parse(s: &str) -> Result<Format> {
        match s {
            "markdown" | "md" => Ok(Format::Markdown),
            "json" => Ok(Format::Json),
            _ => Err(Error::Invalid(format!(
                "{s:?} is no export format: markdown or json"
            ))),
        }
    }

    pub fn extension(self) -> &'static str {
        match self {
            Format::Markdown => "md",
            Format::Json => "json",
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Format::Markdown => "text/markdown; charset=utf-8",
            Format::Json => "application/json",
        }
    }
}

/// The export's head: everything but its frames.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportedSession {
    pub name: String,
    pub created_at: String,
}

/// One frame as exported.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportedFrame {
    pub id: String,
    #[serde(default)]
    pub parent_id: Option<String>,
    #[serde(default)]
    pub target_ids: Vec<TargetId>,
    pub timestamp: String,
    #[serde(rename = "type")]
    pub frame_type: FrameType,
    pub author_type: AuthorType,
    pub payload: Value,
}

impl From<Frame> for ExportedFrame {
    fn from(f: Frame) -> Self {
        ExportedFrame {
            id: f.id,
            parent_id: f.parent_id,
            target_ids: f.target_ids,
            timestamp: f.timestamp,
            frame_type: f.frame_type,
            author_type: f.author_type,
            payload: f.payload,
        }
    }
}

/// A whole JSON export, as an import reads it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Export {
    pub format: String,
    pub version: u32,
    #[serde(default)]
    pub exported_at: Option<String>,
    pub session: ExportedSession,
    pub frames: Vec<ExportedFrame>,
}

/// `name` for a path: lower-case ASCII letters and digits, a hyphen for each run of
/// anything else, at most about `max` characters; `fallback` when nothing is left.
fn slug(name: &str, max: usize, fallback: &str) -> String {
    let mut slug = String::new();
    for c in name.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_alphanumeric() {
            slug.push(c);
        } else if !slug.ends_with('-') && !slug.is_empty() {
            slug.push('-');
        }
        if slug.len() >= max {
            break;
        }
    }
    match slug.trim_end_matches('-') {
        "" => fallback.to_owned(),
        s => s.to_owned(),
    }
}

/// An attached file's name as a path in the archive: its stem as a [`slug`], and its
/// extension kept (`Plan B.md` → `plan-b.md`).
fn file_slug(name: &str) -> String {
    let (stem, ext) = match name.rsplit_once('.') {
        Some((stem, ext))
            if !ext.is_empty()
                && ext.len() <= 10
                && ext.bytes().all(|b| b.is_ascii_alphanumeric()) =>
        {
            (stem, format!(".{}", ext.to_ascii_lowercase()))
        }
        _ => (name, String::new()),
    };
    format!("{}{ext}", slug(stem, 60, "file"))
}

/// A file name made of a session's name: letters, digits and hyphens.
pub fn file_name(session: &SessionDto, format: Format) -> String {
    format!(
        "{}-{}.{}",
        session.id,
        slug(&session.name, 60, "session"),
        format.extension()
    )
}

/// The session (the user's, else 404) and its export as a stream of chunks.
pub async fn session(
    st: &AppState,
    user: &AuthUser,
    session_id: i64,
    format: Format,
) -> Result<(
    SessionDto,
    impl Stream<Item = Result<Bytes>> + Send + 'static,
)> {
    let dto = super::sessions::get(&st.db, user, session_id).await?;
    let dk = crate::accounts::users::data_key(&st.db, &st.keys, user.id()).await?;
    Ok((dto.clone(), stream(st.clone(), dk, dto, format)))
}

/// Where an export's stream is: its head to write, the seq read up to, or done.
enum Stage {
    Head,
    After(i64),
    Done,
}

/// What a Markdown export writes, as the chat shows the conversation: of the parts that
/// hold versions (an edit, a regeneration) the versions shown, not every version in the
/// log's order; a message as its later updates left it (hidden, or changed in place). The
/// JSON export keeps every frame as it is.
#[derive(Default)]
struct Shown {
    /// The parts holding versions, `(from, to)`, in order.
    parts: Vec<(i64, i64)>,
    /// The part read last and the ids of the frames its view shows (one part in memory).
    part: Option<((i64, i64), HashSet<String>)>,
    /// The updates of each frame that one changed (hidden or shown again, or replaced), in
    /// order: not an answer, not a switch of versions.
    updates: HashMap<String, Vec<Value>>,
}

impl Shown {
    /// What Markdown needs to know before its first frame.
    async fn read(st: &AppState, dk: &SecretKey, sid: i64) -> Result<Shown> {
        let mut updates: HashMap<String, Vec<Value>> = HashMap::new();
        let mut after = 0;
        loop {
            let rows = store::frames::list(&st.db, sid, after, Some("update"), PAGE).await?;
            let Some(last) = rows.last().map(|r| r.seq) else {
                break;
            };
            for row in rows {
                let f = row.open(dk)?;
                let answers = f.payload.get("answer").is_some()
                    && f.target_ids
                        .iter()
                        .any(|t| matches!(t, TargetId::Element(_)));
                if answers || hero_shared::frame::switch_to(&f.payload).is_some() {
                    continue;
                }
                for t in &f.target_ids {
                    if let TargetId::Frame(id) = t {
                        updates
                            .entry(id.clone())
                            .or_default()
                            .push(f.payload.clone());
                    }
                }
            }
            after = last;
        }
        Ok(Shown {
            parts: store::frames::versioned_parts(&st.db, sid).await?,
            part: None,
            updates,
        })
    }

    /// `frame` as its updates left it, as the chat's view applies them
    /// (`hero_shared::frame::apply_update`).
    fn updated(&self, mut frame: Frame) -> Frame {
        for u in self.updates.get(&frame.id).into_iter().flatten() {
            hero_shared::frame::apply_update(&mut frame.payload, u);
        }
        frame
    }

    /// Whether the frame at `seq` with `id` is written.
    async fn writes(
        &mut self,
        st: &AppState,
        dk: &SecretKey,
        sid: i64,
        seq: i64,
        id: &str,
    ) -> Result<bool> {
        let Some(&part) = self
            .parts
            .iter()
            .find(|(from, to)| *from <= seq && seq < *to)
        else {
            return Ok(true);
        };
        if self.part.as_ref().map(|(p, _)| *p) != Some(part) {
            // Read a page at a time, each frame kept without what a message or a request
            // says: which frames the view shows depends on the frames' types, parents and
            // the updates' and results' payloads alone, and the part may be long.
            // (The part's end may be past the log's: read until a page comes back short.)
            let mut frames: Vec<Frame> = Vec::new();
            let mut after = part.0 - 1;
            loop {
                let rows = store::frames::list(&st.db, sid, after, None, PAGE).await?;
                let last_page = (rows.len() as i64) < PAGE;
                let past = rows.last().is_some_and(|r| r.seq >= part.1);
                for row in rows.into_iter().take_while(|r| r.seq < part.1) {
                    after = row.seq;
                    let mut f = row.open(dk)?;
                    if matches!(f.frame_type, FrameType::Message | FrameType::Request) {
                        f.payload = Value::Null;
                    }
                    frames.push(f);
                }
                if last_page || past {
                    break;
                }
            }
            let ids = hero_shared::frame::compile_frames(&frames)
                .into_iter()
                .map(|m| m.frame_id)
                .collect();
            self.part = Some((part, ids));
        }
        Ok(self.part.as_ref().is_some_and(|(_, ids)| ids.contains(id)))
    }
}

fn stream(
    st: AppState,
    dk: SecretKey,
    session: SessionDto,
    format: Format,
) -> impl Stream<Item = Result<Bytes>> + Send + 'static {
    futures::stream::try_unfold(
        (Stage::Head, Shown::default()),
        move |(stage, mut shown)| {
            let (st, dk, session) = (st.clone(), dk.clone(), session.clone());
            async move {
                let after = match stage {
                    Stage::Done => return Ok(None),
                    Stage::Head => {
                        if format == Format::Markdown {
                            shown = Shown::read(&st, &dk, session.id).await?;
                        }
                        return Ok(Some((
                            Bytes::from(head(&session, format)?),
                            (Stage::After(0), shown),
                        )));
                    }
                    Stage::After(after) => after,
                };
                let rows = store::frames::list(&st.db, session.id, after, None, PAGE).await?;
                let Some(last) = rows.last().map(|r| r.seq) else {
                    return Ok(Some((Bytes::from(tail(format)), (Stage::Done, shown))));
                };
                let first = after == 0;
                let mut out = String::new();
                for (i, row) in rows.into_iter().enumerate() {
                    let frame = row.open(&dk)?;
                    match format {
                        Format::Json => {
                            if !(first && i == 0) {
                                out.push(',');
                            }
                            out.push_str(
                                &serde_json::to_string(&ExportedFrame::from(frame))
                                    .map_err(|e| Error::Internal(e.to_string()))?,
                            );
                        }
                        Format::Markdown => {
                            if shown
                                .writes(&st, &dk, session.id, frame.seq, &frame.id)
                                .await?
                            {
                                markdown(&shown.updated(frame), &mut out);
                            }
                        }
                    }
                }
                Ok(Some((Bytes::from(out), (Stage::After(last), shown))))
            }
        },
    )
}

fn head(session: &SessionDto, format: Format) -> Result<String> {
    let now = crate::now_text();
    Ok(match format {
        Format::Json => {
            let session = serde_json::to_string(&ExportedSession {
                name: session.name.clone(),
                created_at: session.created_at.clone(),
            })
            .map_err(|e| Error::Internal(e.to_string()))?;
            format!(
                "{{\"format\":\"{FORMAT}\",\"version\":{VERSION},\"exported_at\":\"{now}\",\"session\":{session},\"frames\":["
            )
        }
        Format::Markdown => format!(
            "# {}\n\n*Exported from Hero on {}; the session began {}.*\n\n",
            one_line(&session.name),
            day_and_time(&now),
            day_and_time(&session.created_at)
        ),
    })
}

fn tail(format: Format) -> String {
    match format {
        Format::Json => "]}\n".into(),
        Format::Markdown => String::new(),
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

use hero_shared::api::to_the_minute as day_and_time;

/// One frame as people read it: a message under its author and time, a call and its
/// result as quoted lines, a summary between rules; hidden messages (startup, a memory
/// flush) and updates are left out.
pub fn markdown(frame: &Frame, out: &mut String) {
    let p = &frame.payload;
    let text = |k: &str| p.get(k).and_then(Value::as_str).unwrap_or_default();
    let when = day_and_time(&frame.timestamp);
    match frame.frame_type {
        FrameType::Message => {
            if p.get("hidden").and_then(Value::as_bool) == Some(true) {
                return;
            }
            let private = p.get("private").and_then(Value::as_bool) == Some(true);
            let mark = if private { " (private)" } else { "" };
            match frame.author_type {
                AuthorType::User => {
                    out.push_str(&format!(
                        "### You · {when}{mark}\n\n{}\n\n",
                        text("content")
                    ));
                    let files = p.get("attachments").and_then(Value::as_array);
                    for f in files.into_iter().flatten() {
                        let name = f.get("name").and_then(Value::as_str).unwrap_or("a file");
                        let size = f.get("size").and_then(Value::as_u64).unwrap_or(0);
                        let size = hero_shared::html::size_text(size);
                        out.push_str(&format!("> *Attached:* {} ({size})\n", one_line(name)));
                    }
                    if files.is_some_and(|f| !f.is_empty()) {
                        out.push('\n');
                    }
                }
                AuthorType::Agent => {
                    let name = p
                        .get("agent_name")
                        .and_then(Value::as_str)
                        .unwrap_or("Agent");
                    out.push_str(&format!("### {} · {when}{mark}\n\n", one_line(name)));
                    out.push_str(&hml_as_markdown(text("content")));
                    out.push_str("\n\n");
                }
                AuthorType::System => {
                    out.push_str(&format!("> {} · {when}\n\n", one_line(text("content"))));
                }
            }
        }
        FrameType::Request => {
            if let Ok(r) = serde_json::from_value::<hero_shared::calls::CallRequest>(p.clone()) {
                out.push_str(&format!(
                    "> **Call** `{}`: {}\n\n",
                    r.function,
                    one_line(&r.content)
                ));
            }
        }
        FrameType::Result => {
            if let Ok(r) = serde_json::from_value::<hero_shared::calls::CallResult>(p.clone()) {
                let said = if r.output.is_empty() {
                    &r.content
                } else {
                    &r.output
                };
                out.push_str(&format!(
                    "> **Result** of `{}` ({:?}):\n\n{}\n\n",
                    r.function,
                    r.outcome,
                    fenced("", said)
                ));
            }
        }
        FrameType::Compact => {
            let summary = p
                .get("summary")
                .or_else(|| p.get("content"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            out.push_str(&format!(
                "---\n\n*Summary of what came before:* {summary}\n\n---\n\n"
            ));
        }
        FrameType::Update => {}
    }
}

/// `text` in a code fence longer than any run of backticks inside it.
fn fenced(lang: &str, text: &str) -> String {
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    format!("{fence}{lang}\n{}\n{fence}", text.trim_end_matches('\n'))
}

/// An agent's HML as Markdown: prose as it is, a command or code fenced, thinking quoted,
/// a question said, other elements by their text.
pub fn hml_as_markdown(content: &str) -> String {
    use hero_shared::hml::{ElementKind, Node};
    fn walk(nodes: &[Node], out: &mut String) {
        for n in nodes {
            match n {
                Node::Text(t) => out.push_str(t),
                Node::Element(e) => match e.kind {
                    ElementKind::Bash => {
                        out.push_str(&format!("\n{}\n", fenced("bash", &e.content)))
                    }
                    ElementKind::Thinking => {
                        let mut inner = String::new();
                        walk(&e.children, &mut inner);
                        let quoted: Vec<String> =
                            inner.trim().lines().map(|l| format!("> {l}")).collect();
                        out.push_str(&format!("\n> *Thinking:*\n{}\n", quoted.join("\n")));
                    }
                    ElementKind::Websearch => {
                        out.push_str(&format!("*Searches the web for:* {}", e.content.trim()))
                    }
                    ElementKind::Ask => out.push_str(&format!("*Asks:* {}", e.content.trim())),
                    _ if e.children.is_empty() => out.push_str(&e.content),
                    _ => walk(&e.children, out),
                },
            }
        }
    }
    let mut out = String::new();
    walk(&hero_shared::hml::parse(content).nodes, &mut out);
    out.trim().to_owned()
}

/// Everything the user owns as one tar archive, streamed: the agents as the API lists them
/// (`agents.json`, no key), each agent's context files and memory (`agents/<id>-<name>/`),
/// the personal skills (`skills/<name>/`), and each session as its JSON export
/// (`sessions/<id>-<name>.json`). Each session's chunks are gathered before they are written (a tar entry says its
/// size first), so the memory an export takes is one session's JSON, held once.
pub async fn everything(
    st: &AppState,
    user: &AuthUser,
) -> Result<impl Stream<Item = Result<Bytes>> + Send + 'static> {
    let sessions = super::sessions::list(&st.db, user).await?;
    let agents = crate::agents::list(&st.db, &st.keys, user).await?;
    let agents_json =
        serde_json::to_vec_pretty(&agents).map_err(|e| Error::Internal(e.to_string()))?;
    let dk = crate::accounts::users::data_key(&st.db, &st.keys, user.id()).await?;
    // Each attached file is read when its turn comes: one at a time in memory.
    let files = super::attachments::all_of(st, user).await?;
    let st = st.clone();
    let mut entries = vec![Entry::Bytes("agents.json".into(), agents_json)];
    entries.extend(
        agents
            .iter()
            .map(|a| Entry::AgentFiles(a.id, agent_folder(a.id, &a.name))),
    );
    entries.push(Entry::Skills);
    entries.extend(sessions.into_iter().map(Entry::Session));

    entries.extend(files.into_iter().map(|(id, s)| Entry::Attachment(id, s)));
    entries.push(Entry::End);
    let user = user.clone();
    use futures::TryStreamExt;
    Ok(futures::stream::iter(entries)
        .then(move |e| {
            let (st, dk, user) = (st.clone(), dk.clone(), user.clone());
            async move {
                match e {
                    Entry::AgentFiles(id, folder) => agent_files(&st, &user, id, &folder).await,
                    Entry::Skills => skill_files(&st, &dk, user.id()).await,
                    Entry::Bytes(path, data) => {
                        Ok::<_, Error>(tar_entry(&path, vec![Bytes::from(data)]))
                    }
                    Entry::Session(s) => {
                        let path = format!("sessions/{}", file_name(&s, Format::Json));
                        // The chunks as they were made: the session is held once.
                        let chunks: Vec<Bytes> =
                            stream(st, dk, s, Format::Json).try_collect().await?;
                        Ok(tar_entry(&path, chunks))
                    }
                    Entry::Attachment(id, session) => {
                        let (name, _, bytes) =
                            super::attachments::download(&st, &user, &id).await?;
                        let path = format!("attachments/{session}/{id}-{}", file_slug(&name));
                        Ok(tar_entry(&path, vec![Bytes::from(bytes)]))
                    }
                    Entry::End => Ok(vec![Bytes::from(vec![0u8; 1024])]),
                }
            }
        })
        .map_ok(|chunks| futures::stream::iter(chunks.into_iter().map(Ok)))
        .try_flatten())
}

/// The archive's file name: `hero-export-<today>.tar`.
pub fn archive_name() -> String {
    let now = crate::now_text();
    format!("hero-export-{}.tar", now.get(..10).unwrap_or("all"))
}

enum Entry {
    Bytes(String, Vec<u8>),
    /// An agent's context files and memory, under its folder.
    AgentFiles(i64, String),
    /// The user's personal skills, a folder each.
    Skills,
    Session(SessionDto),
    /// A file attached to a message (its id, its session).
    Attachment(String, i64),
    End,
}

use futures::StreamExt;

/// An agent's folder in the archive: `agents/<id>-<name>`.
fn agent_folder(id: i64, name: &str) -> String {
    format!("agents/{id}-{}", slug(name, 40, "agent"))
}

/// An agent's context files as the user's calls read them (`files/<NAME>`) and its memory
/// of both scopes (`memory/agent/<path>`, `memory/user/<path>`), as tar entries (a long
/// path through the format's own extension).
async fn agent_files(
    st: &AppState,
    user: &AuthUser,
    agent_id: i64,
    folder: &str,
) -> Result<Vec<Bytes>> {
    let mut out = Vec::new();
    for f in crate::agents::context_files::list_files(st, user, agent_id).await? {
        if f.level == "virtual" {
            continue;
        }
        let file = crate::agents::context_files::read_file(st, user, agent_id, &f.name).await?;
        if !file.content.is_empty() {
            out.push(tar_file(
                &format!("{folder}/files/{}", f.name),
                file.content.as_bytes(),
            )?);
        }
    }
    for m in crate::memory::list(st, user, agent_id).await? {
        let file =
            crate::memory::read_file(st, user, agent_id, &m.path, Some(m.scope.as_str())).await?;
        let path = format!("{folder}/memory/{}/{}", m.scope, m.path);
        out.push(tar_file(&path, file.content.as_bytes())?);
    }
    Ok(out)
}

/// The user's personal skills as folders (`skills/<name>/SKILL.md` and its files): what
/// the Skills page's import takes back.
async fn skill_files(st: &AppState, dk: &SecretKey, user_id: i64) -> Result<Vec<Bytes>> {
    let folders = st
        .db
        .read_with(async |c| crate::skills::personal::folders(c, dk, user_id).await)
        .await?;
    let mut out = Vec::new();
    for (name, skill_md, files) in folders {
        out.push(tar_file(
            &format!("skills/{name}/SKILL.md"),
            skill_md.as_bytes(),
        )?);
        for (path, text) in files {
            out.push(tar_file(&format!("skills/{name}/{path}"), text.as_bytes())?);
        }
    }
    Ok(out)
}

/// One small file of a tar archive, whatever its path's length (`tar::Builder` writes a
/// long name's extension entry first).
fn tar_file(path: &str, data: &[u8]) -> Result<Bytes> {
    let mut header = tar::Header::new_gnu();
    header.set_size(data.len() as u64);
    header.set_mode(0o600);
    header.set_mtime(time::OffsetDateTime::now_utc().unix_timestamp().max(0) as u64);
    header.set_entry_type(tar::EntryType::Regular);
    let mut b = tar::Builder::new(Vec::new());
    b.append_data(&mut header, path, data)
        .map_err(|e| Error::Internal(format!("{path} cannot go in the archive: {e}")))?;
    // The entry alone: the archive's end is written once, after everything.
    Ok(Bytes::from(std::mem::take(b.get_mut())))
}

/// One file of a tar archive, as chunks: its header, its bytes (`data`, not copied), and
/// the padding to 512.
fn tar_entry(path: &str, mut data: Vec<Bytes>) -> Vec<Bytes> {
    let size: usize = data.iter().map(Bytes::len).sum();
    let mut header = tar::Header::new_gnu();
    let _ = header.set_path(path);
    header.set_size(size as u64);
    header.set_mode(0o600);
    header.set_mtime(time::OffsetDateTime::now_utc().unix_timestamp().max(0) as u64);
    header.set_entry_type(tar::EntryType::Regular);
    header.set_cksum();
    data.insert(0, Bytes::copy_from_slice(header.as_bytes()));
    data.push(Bytes::from(vec![0u8; size.div_ceil(512) * 512 - size]));
    data
}

/// An export's first fields, read without keeping the rest.
#[derive(Deserialize)]
struct HeadOnly {
    #[serde(default)]
    format: Option<Value>,
    #[serde(default)]
    version: Option<Value>,
}

/// Reads an export and stores it as a new session of the user's, in one transaction; a
/// 400 naming the first problem, with nothing stored, when it is not one this Hero reads.
pub async fn import(st: &AppState, user: &AuthUser, body: &[u8]) -> Result<SessionDto> {
    if body.len() > MAX_IMPORT_BYTES {
        return Err(Error::Invalid(format!(
            "an import is at most {} MiB",
            MAX_IMPORT_BYTES >> 20
        )));
    }
    // The format is checked before the rest is read for its shape (the rest of the file
    // is skipped, not kept).
    let head: HeadOnly = serde_json::from_slice(body)
        .map_err(|e| Error::Invalid(format!("this file is not JSON: {e}")))?;
    if head.format.as_ref().and_then(Value::as_str) != Some(FORMAT) {
        return Err(Error::Invalid(format!(
            "this file is not a Hero session export (its \"format\" is not {FORMAT:?})"
        )));
    }
    match head.version.as_ref().map(Value::as_u64) {
        Some(Some(v)) if v > u64::from(VERSION) => {
            return Err(Error::Invalid(format!(
                "this export was made by a newer Hero (format version {v}; this one reads up to {VERSION})"
            )));
        }
        Some(Some(_)) => {}
        _ => {
            return Err(Error::Invalid(
                "this export has no format version (a whole number)".into(),
            ));
        }
    }
    let export: Export = serde_json::from_slice(body)
        .map_err(|e| Error::Invalid(format!("this export is not well formed: {e}")))?;
    let most = st.settings.limits.frames_per_session;
    if export.frames.len() as i64 > most {
        return Err(Error::Invalid(format!(
            "this export has {} frames; a session holds at most {most}",
            export.frames.len()
        )));
    }
    let frames = renumbered(export.frames, user, "it came in an import")?;
    if frames.len() as i64 > most {
        return Err(Error::Invalid(format!(
            "this export needs {} frames with the results its open calls are given; a session holds at most {most}",
            frames.len()
        )));
    }
    let req = CreateSessionRequest {
        name: export.session.name,
        parent_session_id: None,
        status: None,
        agent_id: None,
    };
    store_copy(st, user, req, frames, None).await
}

/// Stores a copied conversation as a new session in one transaction (then `notice` at its
/// end, if any); one copy at a time.
async fn store_copy(
    st: &AppState,
    user: &AuthUser,
    req: CreateSessionRequest,
    frames: Vec<(NewFrame, String)>,
    notice: Option<Value>,
) -> Result<SessionDto> {
    let _turn = STORING
        .acquire()
        .await
        .map_err(|_| Error::Unavailable("the server is stopping"))?;
    let dk = crate::accounts::users::data_key(&st.db, &st.keys, user.id()).await?;
    let mut tx = st.db.begin().await?;
    let row = super::sessions::create_in(st, &mut tx, user, req).await?;
    for (mut f, at) in frames {
        f.session_id = row.id;
        // A result given to a call that had none goes to the session's agent, as any.
        if f.frame_type == FrameType::Result && f.target_ids.is_empty() {
            f.target_ids = row
                .agent_id
                .map(|a| vec![TargetId::Agent(a.to_string())])
                .unwrap_or_default();
        }
        frames::seal_at(&dk, f, at)?.insert(&mut tx).await?;
    }
    if let Some(payload) = notice {
        let n = NewFrame::message(row.id, AuthorType::System, None, payload);
        frames::seal(&dk, n)?.insert(&mut tx).await?;
    }
    tx.commit().await?;
    Ok(row.dto())
}

/// A new session holding the conversation of `session_id` up to its message
/// `from_frame_id` (that message, what came before it, and the calls and results of what
/// is copied), under new ids; the original is unchanged. The new session is named for its
/// origin and ends with a notice saying where it branched; a call copied without its result
/// is given one, so it never runs in the branch.
pub async fn branch(
    st: &AppState,
    user: &AuthUser,
    session_id: i64,
    from_frame_id: &str,
) -> Result<SessionDto> {
    let origin = super::sessions::get(&st.db, user, session_id).await?;
    let dk = crate::accounts::users::data_key(&st.db, &st.keys, user.id()).await?;
    let at = store::frames::get(&st.db, session_id, from_frame_id)
        .await?
        .ok_or(Error::NotFound("message"))?;
    if at.frame_type != "message" {
        return Err(Error::Invalid(
            "a branch starts from a message; this frame is a call, a result or a change".into(),
        ));
    }
    let mut copied: Vec<ExportedFrame> = Vec::new();
    let mut kept: HashSet<String> = HashSet::new();
    let mut after = 0;
    loop {
        let rows = store::frames::list(&st.db, session_id, after, None, PAGE).await?;
        let Some(last) = rows.last().map(|r| r.seq) else {
            break;
        };
        for row in rows {
            // Up to the message; after it, only the results and changes of what is kept.
            let belongs = row.seq <= at.seq
                || (row.frame_type != "message"
                    && row.parent_id.as_deref().is_some_and(|p| kept.contains(p)));
            if belongs {
                let later = row.seq > at.seq;
                let f = ExportedFrame::from(row.open(&dk)?);
                // A later switch between versions would hide the message branched from.
                if later
                    && f.frame_type == FrameType::Update
                    && hero_shared::frame::switch_to(&f.payload).is_some()
                {
                    continue;
                }
                kept.insert(f.id.clone());
                copied.push(f);
            }
        }
        after = last;
    }
    // A call begun while a later reply streamed names that reply, which the branch does not
    // hold: such a call (and its result) stays behind.
    loop {
        let held: HashSet<String> = copied.iter().map(|f| f.id.clone()).collect();
        let before = copied.len();
        copied.retain(|f| f.parent_id.as_ref().is_none_or(|p| held.contains(p)));
        if copied.len() == before {
            break;
        }
    }
    let name: String = format!("Branch of {}", origin.name)
        .chars()
        .take(200)
        .collect();
    let frames = renumbered(copied, user, "it was copied into a branch")?;
    let when = day_and_time(&at.timestamp);
    let req = CreateSessionRequest {
        name,
        parent_session_id: None,
        status: None,
        agent_id: origin.agent_id,
    };
    let notice = serde_json::json!({
        "role": "system",
        "content": format!("Branched from “{}” at its message of {when}.", origin.name),
        "private": true,
        "notice": "info",
        "branched_from": {"session_id": session_id, "frame_id": from_frame_id},
    });
    store_copy(st, user, req, frames, Some(notice)).await
}

/// The export's frames checked and given new ids (parents and frame targets follow), each
/// with its time, in the export's order; a call without a result gets one saying it was not
/// run, after them all.
fn renumbered(
    frames: Vec<ExportedFrame>,
    user: &AuthUser,
    why: &str,
) -> Result<Vec<(NewFrame, String)>> {
    let bad = |i: usize, what: String| {
        Error::Invalid(format!("frame {} (the {}th): {what}", i + 1, i + 1))
    };
    // Every id first: a call begun while its reply streamed is stored before the reply it
    // names as its parent, so a parent may come later in the log.
    let mut ids: HashMap<String, String> = HashMap::with_capacity(frames.len());
    for (i, f) in frames.iter().enumerate() {
        if f.id.is_empty() || f.id.len() > 64 {
            return Err(bad(
                i,
                "its id is empty or longer than 64 characters".into(),
            ));
        }
        if ids.insert(f.id.clone(), frames::new_id()).is_some() {
            return Err(bad(i, format!("its id {:?} is used twice", f.id)));
        }
    }
    let results: HashSet<String> = frames
        .iter()
        .filter(|f| f.frame_type == FrameType::Result)
        .filter_map(|f| f.parent_id.clone())
        .collect();
    let unanswered: HashSet<String> = frames
        .iter()
        .filter(|f| f.frame_type == FrameType::Request && !results.contains(&f.id))
        .map(|f| f.id.clone())
        .collect();
    let mut out = Vec::with_capacity(frames.len());
    // The results given to calls that had none come last, so every frame keeps its seq
    // (a summary names the seq it covers).
    let mut not_run = Vec::new();
    for (i, f) in frames.into_iter().enumerate() {
        if time::OffsetDateTime::parse(&f.timestamp, &time::format_description::well_known::Rfc3339)
            .is_err()
        {
            return Err(bad(
                i,
                format!("its timestamp {:?} is not RFC 3339", f.timestamp),
            ));
        }
        if !f.payload.is_object() {
            return Err(bad(i, "its payload is not an object".into()));
        }
        let parent_id = match &f.parent_id {
            None => None,
            Some(p) => Some(ids.get(p).cloned().ok_or_else(|| {
                bad(i, format!("its parent {p:?} is not a frame of this export"))
            })?),
        };
        let target_ids = f
            .target_ids
            .iter()
            .map(|t| match t {
                TargetId::Frame(id) => ids.get(id).cloned().map(TargetId::Frame).ok_or_else(|| {
                    bad(
                        i,
                        format!("it names the frame {id:?}, which is not in this export"),
                    )
                }),
                other => Ok(other.clone()),
            })
            .collect::<Result<Vec<_>>>()?;
        let new_id = ids[&f.id].clone();
        if unanswered.contains(&f.id) {
            not_run.push((not_run_result(&f, &new_id, why)?, f.timestamp.clone()));
        }
        let author_id = (f.author_type == AuthorType::User).then(|| user.id());
        out.push((
            NewFrame {
                id: new_id,
                session_id: 0,
                parent_id,
                target_ids,
                frame_type: f.frame_type,
                author_type: f.author_type,
                author_id,
                payload: f.payload,
            },
            f.timestamp,
        ));
    }
    out.extend(not_run);
    Ok(out)
}

/// The result a copied call without one is given: it was not run, and (a native tool call)
/// it answers the tool call by its id, as the provider needs.
fn not_run_result(request: &ExportedFrame, request_id: &str, why: &str) -> Result<NewFrame> {
    let req =
        serde_json::from_value::<hero_shared::calls::CallRequest>(request.payload.clone()).ok();
    let function = req
        .as_ref()
        .map_or_else(|| "call".to_owned(), |r| r.function.clone());
    let tool_use_id = match req.map(|r| r.origin) {
        Some(hero_shared::calls::CallOrigin::Tool { tool_use_id }) => Some(tool_use_id),
        _ => None,
    };
    let result = hero_shared::calls::CallResult {
        content: format!("The call {function} was not run: {why}."),
        function,
        outcome: hero_shared::calls::Outcome::Stopped,
        output: format!("Not run: {why}."),
        tool_use_id,
    };
    let mut r = NewFrame::message(0, AuthorType::System, None, Value::Null);
    r.frame_type = FrameType::Result;
    r.parent_id = Some(request_id.to_owned());
    r.payload = serde_json::to_value(result).map_err(|e| Error::Internal(e.to_string()))?;
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agents_hml_reads_as_markdown() {
        let md = hml_as_markdown(
            "Looking.\n<thinking>the user wants files</thinking>\n<bash>ls -la</bash>\nDone.",
        );
        assert!(md.starts_with("Looking."), "{md}");
        assert!(md.contains("> *Thinking:*\n> the user wants files"), "{md}");
        assert!(md.contains("```bash\nls -la\n```"), "{md}");
        assert!(md.ends_with("Done."), "{md}");
        // A fence longer than the backticks inside.
        assert_eq!(fenced("", "a ``` b"), "````\na ``` b\n````");
    }

    /// A message's attachments are named under it, with their sizes.
    #[test]
    fn attachments_are_named_in_markdown() {
        let f = Frame {
            id: "m".into(),
            session_id: 1,
            seq: 1,
            parent_id: None,
            target_ids: Vec::new(),
            timestamp: "2026-11-29T10:00:00.000000Z".into(),
            frame_type: FrameType::Message,
            author_type: AuthorType::User,
            author_id: Some(1),
            payload: serde_json::json!({"role": "user", "content": "see", "attachments": [
                {"id": "a", "name": "plan.md", "kind": "text", "size": 1200, "text": "secret body"}
            ]}),
        };
        let mut out = String::new();
        markdown(&f, &mut out);
        assert!(
            out.contains("see\n\n> *Attached:* plan.md (1.2 KB)\n"),
            "{out}"
        );
        assert!(!out.contains("secret body"), "{out}");
    }

    #[test]
    fn a_file_name_is_made_of_the_sessions_name() {
        let s = |name: &str| SessionDto {
            id: 7,
            name: name.into(),
            status: hero_shared::api::SessionStatus::Active,
            parent_session_id: None,
            agent_id: None,
            streaming: true,
            created_at: String::new(),
            updated_at: String::new(),
        };
        assert_eq!(
            file_name(&s("Garden plans: 2027!"), Format::Markdown),
            "7-garden-plans-2027.md"
        );
        assert_eq!(file_name(&s("../../etc"), Format::Json), "7-etc.json");
        assert_eq!(file_name(&s("日本"), Format::Json), "7-session.json");
    }

    #[test]
    fn an_attached_files_path_keeps_its_extension() {
        assert_eq!(file_slug("Plan B.MD"), "plan-b.md");
        assert_eq!(file_slug("../../etc/passwd"), "etc-passwd");
        assert_eq!(file_slug("日本.pdf"), "file.pdf");
        assert_eq!(file_slug("noext"), "noext");
    }

    #[test]
    fn formats_are_named() {
        assert_eq!(Format::parse("markdown").unwrap(), Format::Markdown);
        assert_eq!(Format::parse("json").unwrap(), Format::Json);
        assert!(
            Format::parse("pdf")
                .unwrap_err()
                .to_string()
                .contains("markdown or json")
        );
    }
}
