//! Frames: the immutable event log of a conversation, and its compilation into the
//! messages that the page shows and the agent reads (reference 003).
//!
//! # Payload conventions
//!
//! Payloads reach this module already decrypted, as JSON.
//! - `message`: `{ "role": "user" | "agent" | "system", "content": "...", "hidden"?: bool }`.
//!   Without `role`, the role is the author type. Other keys are kept and passed through.
//! - `request` / `result`: children (`parent_id`) of the agent message whose element or
//!   interaction they execute; `{ "content": "..." , ... }`. Without a string `content`
//!   the compiled content is the payload as JSON. They compile as `system` messages.
//! - `update`: targets `frame:<id>` and *replaces* that frame's payload wholly (no
//!   patches). One exception so that hiding never has to repeat a body: a payload whose
//!   only key is `hidden` sets or clears the flag and keeps the rest. A target that is not
//!   in view (before the last compact, or unknown) is ignored.
//! - Hiding is an update with `"hidden": true`; hidden messages are kept, marked.
//! - Versions: a `message` whose `parent_id` names another message (in view) is a new
//!   version of it (an edit of the user's, a regeneration of the agent's). The message and
//!   everything after it are version 1; the new message starts version 2, which becomes
//!   current, and what follows goes on from there. A version of a version is one more of
//!   the same message. The view is the current version of each, all the way down: what the
//!   page shows and the agent reads. The first message of each current version carries
//!   [`Versions`]. An `update` of a message's frame whose only key is `current` (1-based)
//!   switches to another of its versions (each keeps its own choices further down); it
//!   never replaces a payload. Nothing is deleted: every version stays in the log.
//! - `compact`: `{ "content": "summary ..." }` (or `"summary"`): the checkpoint; the view
//!   starts at the last one, which compiles as a `system` message.
//! - Prompt answers: an `update` or `result` frame targeting `element:<prompt id>` with
//!   `{ "answer": <string | array | any JSON> }`. Its `parent_id`, if set, names the
//!   message frame holding the prompt; otherwise the latest message holding an
//!   `hml-prompt` with that id gets it. The compiled content then reads
//!   `<hml-prompt id=".." answered>question<response>answer</response></hml-prompt>`
//!   (the answer entity-escaped), so the agent's context reads clean. A later answer wins.
//!
//! Order is `seq` (per session, strictly increasing), but for one thing: the calls an
//! agent's reply makes while it still streams are stored before the reply itself (their
//! `request` and `result` frames name the reply's id as parent before it is written), and a
//! frame stored before its parent compiles right after it. Frames with the same id are one
//! frame, so a frame delivered twice (a reconnect, a retry) changes nothing.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::hml::tag::{escape_text, write_start_tag};
use crate::hml::{self, ElementKind, Node};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum FrameType {
    Message,
    Request,
    Result,
    Update,
    Compact,
}

impl FrameType {
    pub const fn name(self) -> &'static str {
        match self {
            FrameType::Message => "message",
            FrameType::Request => "request",
            FrameType::Result => "result",
            FrameType::Update => "update",
            FrameType::Compact => "compact",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum AuthorType {
    User,
    Agent,
    System,
}

/// Who a compiled message speaks as.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Role {
    User,
    Agent,
    System,
}

/// One frame, as stored (payload decrypted) and as sent to the browser.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct Frame {
    pub id: String,
    pub session_id: i64,
    /// Per-session, strictly increasing: the order that is sacred. Phantom frames carry
    /// the seq they would follow.
    pub seq: i64,
    pub parent_id: Option<String>,
    #[serde(default)]
    pub target_ids: Vec<TargetId>,
    /// High-resolution UTC, RFC 3339.
    pub timestamp: String,
    #[serde(rename = "type")]
    pub frame_type: FrameType,
    pub author_type: AuthorType,
    pub author_id: Option<i64>,
    pub payload: Value,
}

/// What a frame addresses: `agent:123`, `user:456`, `frame:<id>`, `element:<id>`,
/// `system:<name>`; read with or without a leading `@`, printed without.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TargetId {
    Agent(String),
    User(String),
    Frame(String),
    Element(String),
    /// `system:websearch`; the bare `@system` of interactions has an empty name.
    System(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetIdError(pub String);

impl fmt::Display for TargetIdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "not a target id: {:?}", self.0)
    }
}

impl std::error::Error for TargetIdError {}

impl TargetId {
    pub fn prefix(&self) -> &'static str {
        match self {
            TargetId::Agent(_) => "agent",
            TargetId::User(_) => "user",
            TargetId::Frame(_) => "frame",
            TargetId::Element(_) => "element",
            TargetId::System(_) => "system",
        }
    }

    pub fn value(&self) -> &str {
        match self {
            TargetId::Agent(v)
            | TargetId::User(v)
            | TargetId::Frame(v)
            | TargetId::Element(v)
            | TargetId::System(v) => v,
        }
    }
}

impl FromStr for TargetId {
    type Err = TargetIdError;

    fn from_str(s: &str) -> Result<TargetId, TargetIdError> {
        let t = s.trim();
        let t = t.strip_prefix('@').unwrap_or(t);
        let (prefix, value) = match t.split_once(':') {
            Some((p, v)) => (p, v),
            None if t.eq_ignore_ascii_case("system") => return Ok(TargetId::System(String::new())),
            None => return Err(TargetIdError(s.to_owned())),
        };
        let value = value.trim();
        if value.is_empty() && !prefix.eq_ignore_ascii_case("system") {
            return Err(TargetIdError(s.to_owned()));
        }
        let v = value.to_owned();
        Ok(match prefix.to_ascii_lowercase().as_str() {
            "agent" => TargetId::Agent(v),
            "user" => TargetId::User(v),
            "frame" => TargetId::Frame(v),
            "element" => TargetId::Element(v),
            "system" => TargetId::System(v),
            _ => return Err(TargetIdError(s.to_owned())),
        })
    }
}

impl fmt::Display for TargetId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TargetId::System(v) if v.is_empty() => f.write_str("system"),
            _ => write!(f, "{}:{}", self.prefix(), self.value()),
        }
    }
}

impl Serialize for TargetId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Written as text: `agent:123`, `frame:<id>`, … (see [`TargetId`]).
#[cfg(feature = "openapi")]
impl schemars::JsonSchema for TargetId {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "TargetId".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^@?(agent|user|frame|element|system)(:.*)?$",
            "description": "What a frame addresses: agent:123, user:456, frame:<id>, element:<id>, system:<name>",
        })
    }
}

impl<'de> Deserialize<'de> for TargetId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<TargetId, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// One entry of the compiled view.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct CompiledMessage {
    pub frame_id: String,
    pub seq: i64,
    #[serde(rename = "type")]
    pub frame_type: FrameType,
    pub parent_id: Option<String>,
    pub author_type: AuthorType,
    pub author_id: Option<i64>,
    pub role: Role,
    /// The text the page renders and the agent reads, prompts answered.
    pub content: String,
    /// Kept in the view and sent to the agent, but not shown by default.
    pub hidden: bool,
    /// An `update` replaced the original payload.
    pub edited: bool,
    pub timestamp: String,
    /// The effective payload (after updates).
    pub payload: Value,
    /// The first message of a version: which of how many (see "Versions" in the module doc).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub versions: Option<Versions>,
}

/// Where a message stands among the versions of the message it is one of.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct Versions {
    /// The first version's frame id: the message the versions are of.
    pub of: String,
    /// How many versions there are.
    pub count: usize,
    /// Which is shown, from 1.
    pub current: usize,
}

/// Counts over a session's frames (all of them, not only the view).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct FrameStats {
    pub total: u64,
    pub messages: u64,
    pub requests: u64,
    pub results: u64,
    pub updates: u64,
    pub compacts: u64,
    /// `message` frames after the last compact: what triggers compaction.
    pub messages_since_compact: u64,
    pub last_seq: Option<i64>,
    pub last_compact_seq: Option<i64>,
}

/// Frames in seq order, each id once.
fn ordered<F: std::borrow::Borrow<Frame>>(frames: &[F]) -> Vec<&Frame> {
    let mut v: Vec<&Frame> = frames.iter().map(F::borrow).collect();
    v.sort_by(|a, b| a.seq.cmp(&b.seq).then_with(|| a.id.cmp(&b.id)));
    let mut seen = std::collections::HashSet::new();
    v.retain(|f| seen.insert(f.id.as_str()));
    v
}

/// `frames` (in seq order) with each frame stored before its parent moved to just after
/// it: a call begun while its reply streamed is stored before the reply's message (see
/// "Order" in the module doc), and reads as the message's child like any other.
pub fn parents_first<'a>(frames: &[&'a Frame]) -> Vec<&'a Frame> {
    // By position in `frames` (one map from ids, the kind `compile_frames` uses: the wasm
    // carries one copy of its code).
    let at: HashMap<&str, usize> = frames
        .iter()
        .enumerate()
        .map(|(i, f)| (f.id.as_str(), i))
        .collect();
    let mut placed = vec![false; frames.len()];
    // The parent each frame waits for, and the children waiting for each, in seq order.
    let mut waits: Vec<Option<usize>> = vec![None; frames.len()];
    let mut waiting: Vec<Vec<usize>> = vec![Vec::new(); frames.len()];
    // Whether `p`'s line of waiting parents comes back to `me`: a circle of parents (no
    // log writes one), whose frames compile as seq says.
    let circle = |waits: &[Option<usize>], me: usize, mut p: usize| loop {
        if p == me {
            return true;
        }
        match waits[p] {
            Some(next) => p = next,
            None => return false,
        }
    };
    let mut out = Vec::with_capacity(frames.len());
    for (i, f) in frames.iter().enumerate() {
        // A frame waits for a parent still to come.
        let parent = f.parent_id.as_deref().and_then(|p| at.get(p).copied());
        match parent {
            Some(p) if !placed[p] && !circle(&waits, i, p) => {
                waits[i] = Some(p);
                waiting[p].push(i);
            }
            _ => {
                // The frame, then whatever waited for it (and for those), in seq order.
                let mut stack = vec![i];
                while let Some(i) = stack.pop() {
                    placed[i] = true;
                    out.push(frames[i]);
                    stack.extend(std::mem::take(&mut waiting[i]).into_iter().rev());
                }
            }
        }
    }
    // Every parent that a frame waits for comes later and is placed in turn.
    debug_assert_eq!(out.len(), frames.len());
    out
}

pub fn frame_stats(frames: &[Frame]) -> FrameStats {
    let mut st = FrameStats::default();
    for f in ordered(frames) {
        st.count(f);
    }
    st
}

impl FrameStats {
    /// Counts `f`, the frame after the last one counted.
    pub fn count(&mut self, f: &Frame) {
        self.total += 1;
        self.last_seq = Some(f.seq);
        match f.frame_type {
            FrameType::Message => {
                self.messages += 1;
                self.messages_since_compact += 1;
            }
            FrameType::Request => self.requests += 1,
            FrameType::Result => self.results += 1,
            FrameType::Update => self.updates += 1,
            FrameType::Compact => {
                self.compacts += 1;
                self.messages_since_compact = 0;
                self.last_compact_seq = Some(f.seq);
            }
        }
    }
}

fn role_of(frame_type: FrameType, author_type: AuthorType, payload: &Value) -> Role {
    match frame_type {
        FrameType::Request | FrameType::Result | FrameType::Compact => return Role::System,
        _ => {}
    }
    match payload.get("role").and_then(Value::as_str) {
        Some("user") => Role::User,
        Some("agent") | Some("assistant") => Role::Agent,
        Some("system") => Role::System,
        _ => match author_type {
            AuthorType::User => Role::User,
            AuthorType::Agent => Role::Agent,
            AuthorType::System => Role::System,
        },
    }
}

fn content_of(frame_type: FrameType, payload: &Value) -> String {
    let key = if frame_type == FrameType::Compact && payload.get("content").is_none() {
        "summary"
    } else {
        "content"
    };
    match payload.get(key) {
        Some(Value::String(s)) => s.clone(),
        _ if frame_type == FrameType::Message || frame_type == FrameType::Compact => String::new(),
        _ => payload.to_string(),
    }
}

/// A message's payload after an `update` of it (`update`: that frame's payload): one whose
/// only key is `hidden` hides or shows the message, any other replaces the payload.
pub fn apply_update(payload: &mut Value, update: &Value) {
    match is_hide_toggle(update) {
        Some(h) => {
            if let Some(obj) = payload.as_object_mut() {
                obj.insert("hidden".into(), Value::Bool(h));
            }
        }
        None => *payload = update.clone(),
    }
}

fn is_hide_toggle(payload: &Value) -> Option<bool> {
    let obj = payload.as_object()?;
    if obj.len() == 1 {
        obj.get("hidden").and_then(Value::as_bool)
    } else {
        None
    }
}

/// Renders an answer as the text inside `<response>`.
pub fn answer_text(answer: &Value) -> String {
    match answer {
        Value::String(s) => s.clone(),
        Value::Array(items) => items
            .iter()
            .map(|i| match i {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect::<Vec<_>>()
            .join(", "),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Replays frames into the view (see the module doc for the conventions). The frames may be
/// anything that borrows as one (the server compiles the conversations it keeps between
/// turns as they are).
pub fn compile_frames<F: std::borrow::Borrow<Frame>>(frames: &[F]) -> Vec<CompiledMessage> {
    let all = ordered(frames);
    let start = all
        .iter()
        .rposition(|f| f.frame_type == FrameType::Compact)
        .unwrap_or(0);
    let all = parents_first(&all[start..]);
    let tree = Tree::of(&all);
    // Frames off the current versions: their messages and whatever hangs from them.
    let mut off: std::collections::HashSet<&str> = std::collections::HashSet::new();
    let mut out: Vec<CompiledMessage> = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::new();
    // (scope frame id, prompt id, answer), in seq order.
    let mut answers: Vec<Answer<'_>> = Vec::new();
    for f in &all {
        if let Some(tree) = &tree {
            let gone = match f.frame_type {
                FrameType::Message => !tree.shown.contains(f.id.as_str()),
                _ => f.parent_id.as_deref().is_some_and(|p| off.contains(p)),
            };
            if gone {
                off.insert(f.id.as_str());
                continue;
            }
        }
        if f.frame_type == FrameType::Update && switch_to(&f.payload).is_some() {
            continue;
        }
        let element_targets = f.target_ids.iter().filter_map(|t| match t {
            TargetId::Element(e) => Some(e.as_str()),
            _ => None,
        });
        if matches!(f.frame_type, FrameType::Update | FrameType::Result)
            && let Some(answer) = f.payload.get("answer")
        {
            let mut any = false;
            for e in element_targets {
                answers.push(Answer {
                    scope: f.parent_id.as_deref(),
                    prompt: e,
                    answer,
                    by_agent: f.author_type == AuthorType::Agent,
                });
                any = true;
            }
            if any {
                continue;
            }
        }
        if f.frame_type == FrameType::Update {
            for t in &f.target_ids {
                let TargetId::Frame(target) = t else { continue };
                let Some(&i) = index.get(target.as_str()) else {
                    continue;
                };
                let m = &mut out[i];
                apply_update(&mut m.payload, &f.payload);
                m.edited = true;
            }
            continue;
        }
        index.insert(f.id.as_str(), out.len());
        out.push(CompiledMessage {
            frame_id: f.id.clone(),
            seq: f.seq,
            frame_type: f.frame_type,
            parent_id: f.parent_id.clone(),
            author_type: f.author_type,
            author_id: f.author_id,
            role: Role::System,
            content: String::new(),
            hidden: false,
            edited: false,
            timestamp: f.timestamp.clone(),
            payload: f.payload.clone(),
            versions: tree.as_ref().and_then(|t| t.versions_at(&f.id)),
        });
    }
    for m in out.iter_mut() {
        m.role = role_of(m.frame_type, m.author_type, &m.payload);
        m.content = content_of(m.frame_type, &m.payload);
        m.hidden = m
            .payload
            .get("hidden")
            .and_then(Value::as_bool)
            .unwrap_or(false);
    }
    // Always: a prompt the model wrote as answered is not, until an answer frame says so.
    apply_answers(&mut out, &answers);
    out
}

/// `payload` without the text read from its attachments (each `attachments[].text`): the
/// agent reads it, a page shows the attachments' names alone, and a message may carry
/// hundreds of thousands of characters of it. The feed and the view send frames so.
pub fn without_attached_text(payload: &mut Value) {
    let files = payload.get_mut("attachments").and_then(Value::as_array_mut);
    for f in files.into_iter().flatten() {
        if let Some(o) = f.as_object_mut() {
            o.remove("text");
        }
    }
}

/// The version an update switches its message to: its payload's only key, `current`.
pub fn switch_to(payload: &Value) -> Option<usize> {
    let obj = payload.as_object()?;
    if obj.len() != 1 {
        return None;
    }
    obj.get("current")?.as_u64().map(|n| n as usize)
}

/// The conversation's versions (see "Versions" in the module doc) as a tree: lists of
/// messages, each ending, if it branches, in a slot whose versions are lists again.
struct Tree<'a> {
    /// `lists[0]` is the conversation's top.
    lists: Vec<List<'a>>,
    slots: Vec<Slot<'a>>,
    /// Each message's list.
    list_of: HashMap<&'a str, usize>,
    /// The slot each version's first message opens.
    slot_of: HashMap<&'a str, usize>,
    /// The messages of the current versions, all the way down.
    shown: std::collections::HashSet<&'a str>,
}

#[derive(Default)]
struct List<'a> {
    messages: Vec<&'a str>,
    /// The message after the last one: its versions.
    slot: Option<usize>,
}

struct Slot<'a> {
    /// The first version's first message.
    of: &'a str,
    /// Each version's list.
    versions: Vec<usize>,
    current: usize,
}

impl<'a> Tree<'a> {
    /// The tree of `frames` (in the order they compile), or `None` when no message is a
    /// version of another: the usual conversation, which costs one look at each frame.
    fn of(frames: &[&'a Frame]) -> Option<Tree<'a>> {
        let is_version = |f: &&Frame| f.frame_type == FrameType::Message && f.parent_id.is_some();
        if !frames.iter().any(is_version) {
            return None;
        }
        let mut t = Tree {
            lists: vec![List::default()],
            slots: Vec::new(),
            list_of: HashMap::new(),
            slot_of: HashMap::new(),
            shown: Default::default(),
        };
        for f in frames {
            match f.frame_type {
                FrameType::Message => t.add(f),
                FrameType::Update => {
                    let Some(n) = switch_to(&f.payload) else {
                        continue;
                    };
                    for target in &f.target_ids {
                        if let TargetId::Frame(id) = target
                            && let Some(&s) = t.slot_of.get(id.as_str())
                            && (1..=t.slots[s].versions.len()).contains(&n)
                        {
                            t.slots[s].current = n - 1;
                        }
                    }
                }
                _ => {}
            }
        }
        let mut at = Some(0);
        while let Some(l) = at {
            t.shown.extend(t.lists[l].messages.iter().copied());
            at = t.lists[l]
                .slot
                .map(|s| t.slots[s].versions[t.slots[s].current]);
        }
        Some(t)
    }

    /// A message: a new version of its parent message, or the next of the current versions.
    fn add(&mut self, f: &'a Frame) {
        let id = f.id.as_str();
        let Some(slot) = f.parent_id.as_deref().and_then(|p| self.slot_for(p)) else {
            let l = self.end();
            self.lists[l].messages.push(id);
            self.list_of.insert(id, l);
            return;
        };
        let l = self.lists.len();
        self.lists.push(List {
            messages: vec![id],
            slot: None,
        });
        self.list_of.insert(id, l);
        self.slot_of.insert(id, slot);
        let s = &mut self.slots[slot];
        s.versions.push(l);
        s.current = s.versions.len() - 1;
    }

    /// The slot of the versions of message `id`, opened if it has one version so far: the
    /// message and what follows it in its list become the first version.
    fn slot_for(&mut self, id: &'a str) -> Option<usize> {
        if let Some(&s) = self.slot_of.get(id) {
            return Some(s);
        }
        let &l = self.list_of.get(id)?;
        let at = self.lists[l].messages.iter().position(|m| *m == id)?;
        let first = List {
            messages: self.lists[l].messages.split_off(at),
            slot: self.lists[l].slot.take(),
        };
        let v = self.lists.len();
        for m in &first.messages {
            self.list_of.insert(m, v);
        }
        self.lists.push(first);
        let s = self.slots.len();
        self.slots.push(Slot {
            of: id,
            versions: vec![v],
            current: 0,
        });
        self.lists[l].slot = Some(s);
        self.slot_of.insert(id, s);
        Some(s)
    }

    /// The list the current versions end in: where the next message goes.
    fn end(&self) -> usize {
        let mut l = 0;
        while let Some(s) = self.lists[l].slot {
            l = self.slots[s].versions[self.slots[s].current];
        }
        l
    }

    /// `Some` for the first message of a version: which of how many.
    fn versions_at(&self, id: &str) -> Option<Versions> {
        let s = &self.slots[*self.slot_of.get(id)?];
        Some(Versions {
            of: s.of.to_owned(),
            count: s.versions.len(),
            current: s.current + 1,
        })
    }
}

/// An answer frame to an `hml-prompt`.
struct Answer<'a> {
    /// The message holding the prompt (its parent).
    scope: Option<&'a str>,
    prompt: &'a str,
    answer: &'a Value,
    /// Recorded by the agent (`update_prompt`, from what the user said in chat), not by the
    /// user in the prompt itself.
    by_agent: bool,
}

/// Writes each prompt's state from the answer frames alone: the latest answer to a prompt
/// becomes its `<response>` (with `answered-by="agent"` when the agent recorded it), and a
/// prompt no frame answered loses whatever `answered`, `answered-by` or `<response>` its
/// author wrote into it: a model cannot answer its own prompt by writing the answer.
fn apply_answers(out: &mut [CompiledMessage], answers: &[Answer<'_>]) {
    // Which messages hold which prompts; parsed only if they mention one.
    let docs: Vec<Option<hml::Document>> = out
        .iter()
        .map(|m| {
            if m.content.contains("hml-prompt") {
                Some(hml::parse(&m.content))
            } else {
                None
            }
        })
        .collect();
    // (message index, prompt id) -> answer; later answers overwrite earlier ones.
    let mut chosen: HashMap<(usize, &str), &Answer<'_>> = HashMap::new();
    for a in answers {
        let holder = (0..out.len()).rev().find(|&i| {
            a.scope.is_none_or(|s| out[i].frame_id == s)
                && docs[i].as_ref().is_some_and(|d| {
                    d.elements()
                        .any(|e| e.kind == ElementKind::HmlPrompt && e.id == a.prompt)
                })
        });
        if let Some(i) = holder {
            chosen.insert((i, a.prompt), a);
        }
    }
    for (i, m) in out.iter_mut().enumerate() {
        if docs[i].is_none() {
            continue;
        }
        let mine: HashMap<&str, &Answer<'_>> = chosen
            .iter()
            .filter(|((at, _), _)| *at == i)
            .map(|((_, prompt), a)| (*prompt, *a))
            .collect();
        if let Some(text) = rewrite_prompts(&m.content, &mine) {
            m.content = text;
        }
    }
}

/// `text` with each of its prompts as the answer frames say (see [`apply_answers`]);
/// `None` when nothing changes. The outermost prompts are rewritten whole, and a prompt
/// inside one is rewritten within its copy.
fn rewrite_prompts(text: &str, answers: &HashMap<&str, &Answer<'_>>) -> Option<String> {
    let doc = hml::parse(text);
    let mut prompts = Vec::new();
    outermost_prompts(&doc.nodes, &mut prompts);
    let mut edits: Vec<(std::ops::Range<usize>, String)> = prompts
        .into_iter()
        .filter_map(|e| {
            // A prompt cut short can be answered by no frame, but claims nothing either.
            let answer = answers.get(e.id.as_str()).copied().filter(|_| !e.truncated);
            let rewrite = answer.is_some() || claims_answer(e) || holds_prompt(e);
            rewrite.then(|| {
                (
                    e.span.start as usize..e.span.end as usize,
                    answered_prompt(text, e, answer, answers),
                )
            })
        })
        .collect();
    if edits.is_empty() {
        return None;
    }
    // Outermost prompts do not overlap: from the last, each range is still where it was.
    edits.sort_by_key(|(r, _)| std::cmp::Reverse(r.start));
    let mut out = text.to_owned();
    for (r, new) in edits {
        if out.is_char_boundary(r.start) && r.end <= out.len() && out.is_char_boundary(r.end) {
            out.replace_range(r, &new);
        }
    }
    Some(out)
}

/// The prompts of `nodes` that are inside no other prompt.
fn outermost_prompts<'a>(nodes: &'a [Node], out: &mut Vec<&'a hml::Element>) {
    for n in nodes {
        if let Node::Element(e) = n {
            if e.kind == ElementKind::HmlPrompt {
                out.push(e);
            } else {
                outermost_prompts(&e.children, out);
            }
        }
    }
}

/// Whether a prompt holds another one, anywhere inside.
fn holds_prompt(e: &hml::Element) -> bool {
    e.children.iter().any(
        |c| matches!(c, Node::Element(x) if x.kind == ElementKind::HmlPrompt || holds_prompt(x)),
    )
}

/// An `hml-prompt` still waiting for its answer (what the `prompt_response_handler`
/// conditional ability of reference 000 looks for).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnansweredPrompt {
    pub frame_id: String,
    pub prompt_id: String,
    pub question: String,
}

/// The unanswered prompts of agent messages in a compiled view, oldest first.
pub fn unanswered_prompts(messages: &[CompiledMessage]) -> Vec<UnansweredPrompt> {
    let mut out = Vec::new();
    for m in messages
        .iter()
        .filter(|m| m.role == Role::Agent && m.content.contains("hml-prompt"))
    {
        let doc = hml::parse(&m.content);
        for p in doc.elements().filter_map(hml::Prompt::from_element) {
            if !p.answered {
                out.push(UnansweredPrompt {
                    frame_id: m.frame_id.clone(),
                    prompt_id: p.id,
                    question: p.question,
                });
            }
        }
    }
    out
}

/// Whether a prompt's own markup says it is answered (what only an answer frame may say).
fn claims_answer(e: &hml::Element) -> bool {
    e.has_attr("answered")
        || e.has_attr("answered-by")
        || e.children
            .iter()
            .any(|c| matches!(c, Node::Element(r) if r.kind == ElementKind::Response))
}

/// `<hml-prompt .. answered>question<response>answer</response></hml-prompt>` for an
/// answer (`answered-by="agent"` too when the agent recorded it); without one, the prompt
/// as it was asked: no `answered`, no `answered-by`, no `<response>` (and, cut short, still
/// without its end tag). Prompts inside it are rewritten the same way (`answers`).
fn answered_prompt(
    source: &str,
    e: &hml::Element,
    answer: Option<&Answer<'_>>,
    answers: &HashMap<&str, &Answer<'_>>,
) -> String {
    let mut attrs: Vec<(String, String)> = e
        .attributes
        .iter()
        .filter(|(k, _)| {
            !k.eq_ignore_ascii_case("answered") && !k.eq_ignore_ascii_case("answered-by")
        })
        .cloned()
        .collect();
    if let Some(a) = answer {
        attrs.push(("answered".into(), String::new()));
        if a.by_agent {
            attrs.push(("answered-by".into(), "agent".into()));
        }
    }
    let mut s = String::new();
    write_start_tag(ElementKind::HmlPrompt.name(), &attrs, &mut s);
    s.push('>');
    // The question and other children, without an earlier response.
    let (cs, ce) = (e.span.content_start as usize, e.span.content_end as usize);
    let mut inner = String::new();
    let mut at = cs;
    for c in &e.children {
        if let Node::Element(r) = c
            && r.kind == ElementKind::Response
        {
            inner.push_str(source.get(at..r.span.start as usize).unwrap_or(""));
            at = r.span.end as usize;
        }
    }
    inner.push_str(source.get(at..ce.max(at)).unwrap_or(""));
    match rewrite_prompts(&inner, answers) {
        Some(rewritten) => s.push_str(&rewritten),
        None => s.push_str(&inner),
    }
    if let Some(a) = answer {
        s.push_str("<response>");
        escape_text(&answer_text(a.answer), &mut s);
        s.push_str("</response>");
    }
    if !e.truncated {
        s.push_str("</hml-prompt>");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use expect_test::{Expect, expect};
    use serde_json::json;

    pub(crate) fn frame(
        seq: i64,
        id: &str,
        ty: FrameType,
        author: AuthorType,
        targets: &[&str],
        payload: Value,
    ) -> Frame {
        Frame {
            id: id.into(),
            session_id: 1,
            seq,
            parent_id: None,
            target_ids: targets.iter().map(|t| t.parse().unwrap()).collect(),
            timestamp: format!("2026-02-07T10:00:{seq:02}.000000Z"),
            frame_type: ty,
            author_type: author,
            author_id: None,
            payload,
        }
    }

    fn render(msgs: &[CompiledMessage]) -> String {
        msgs.iter()
            .map(|m| {
                format!(
                    "{} {} {:?}{}{} {:?}\n",
                    m.seq,
                    m.frame_id,
                    m.role,
                    if m.hidden { " hidden" } else { "" },
                    if m.edited { " edited" } else { "" },
                    m.content
                )
            })
            .collect()
    }

    fn check(frames: &[Frame], expect: Expect) {
        let got = compile_frames(frames);
        // Any duplication and any delivery order compile alike.
        let mut dup: Vec<Frame> = frames.iter().rev().cloned().collect();
        dup.extend(frames.iter().cloned());
        assert_eq!(compile_frames(&dup), got);
        expect.assert_eq(&render(&got));
    }

    use AuthorType::{Agent, System, User};
    use FrameType::{Compact, Message, Request, Result, Update};

    #[test]
    fn target_ids() {
        let got: Vec<String> = [
            "agent:123",
            "@user:456",
            "frame:ab-cd",
            "@element:prompt-1",
            "system:websearch",
            "@system",
            "SYSTEM:x",
        ]
        .iter()
        .map(|s| s.parse::<TargetId>().map(|t| format!("{t:?} {t}")).unwrap())
        .collect();
        expect![[r#"
            [
                "Agent(\"123\") agent:123",
                "User(\"456\") user:456",
                "Frame(\"ab-cd\") frame:ab-cd",
                "Element(\"prompt-1\") element:prompt-1",
                "System(\"websearch\") system:websearch",
                "System(\"\") system",
                "System(\"x\") system:x",
            ]
        "#]]
        .assert_debug_eq(&got);
        for bad in ["", "agent", "agent:", "bogus:1", "@"] {
            assert!(bad.parse::<TargetId>().is_err(), "{bad}");
        }
        let t: Vec<TargetId> = serde_json::from_value(json!(["agent:1", "@frame:x"])).unwrap();
        assert_eq!(
            serde_json::to_value(&t).unwrap(),
            json!(["agent:1", "frame:x"])
        );
    }

    /// A call begun while its reply streamed is stored before the reply: it compiles after
    /// it all the same (its result after it, in turn), and the frames after the reply stay
    /// where they are.
    #[test]
    fn a_call_stored_before_its_message_compiles_after_it() {
        let child = |mut f: Frame, parent: &str| {
            f.parent_id = Some(parent.into());
            f
        };
        check(
            &[
                frame(1, "u", Message, User, &[], json!({"content": "go"})),
                child(
                    frame(2, "q1", Request, System, &[], json!({"content": "help()"})),
                    "m",
                ),
                child(
                    frame(3, "r1", Result, System, &[], json!({"content": "ok"})),
                    "q1",
                ),
                child(
                    frame(
                        4,
                        "q2",
                        Request,
                        System,
                        &[],
                        json!({"content": "bash(ls)"}),
                    ),
                    "m",
                ),
                frame(
                    5,
                    "m",
                    Message,
                    Agent,
                    &[],
                    json!({"content": "<help/> and more"}),
                ),
                child(
                    frame(6, "r2", Result, System, &[], json!({"content": "files"})),
                    "q2",
                ),
                frame(7, "u2", Message, User, &[], json!({"content": "thanks"})),
            ],
            expect![[r#"
                1 u User "go"
                5 m Agent "<help/> and more"
                2 q1 System "help()"
                3 r1 System "ok"
                4 q2 System "bash(ls)"
                6 r2 System "files"
                7 u2 User "thanks"
            "#]],
        );
    }

    #[test]
    fn messages_updates_and_hiding() {
        check(
            &[
                frame(
                    1,
                    "a",
                    Message,
                    User,
                    &[],
                    json!({"role": "user", "content": "hi"}),
                ),
                frame(2, "b", Message, Agent, &[], json!({"content": "hello"})),
                frame(
                    3,
                    "c",
                    Update,
                    User,
                    &["frame:b"],
                    json!({"role": "agent", "content": "hello!"}),
                ),
                frame(4, "d", Update, User, &["frame:a"], json!({"hidden": true})),
                frame(
                    5,
                    "e",
                    Update,
                    User,
                    &["frame:gone"],
                    json!({"content": "x"}),
                ),
                frame(
                    6,
                    "f",
                    Request,
                    Agent,
                    &["system:websearch"],
                    json!({"query": "boots"}),
                ),
                frame(
                    7,
                    "g",
                    Result,
                    System,
                    &["agent:1"],
                    json!({"content": "3 results"}),
                ),
                frame(
                    8,
                    "h",
                    Message,
                    System,
                    &[],
                    json!({"role": "system", "content": "startup", "hidden": true}),
                ),
            ],
            expect![[r#"
                1 a User hidden edited "hi"
                2 b Agent edited "hello!"
                6 f System "{\"query\":\"boots\"}"
                7 g System "3 results"
                8 h System hidden "startup"
            "#]],
        );
    }

    #[test]
    fn compact_is_a_checkpoint() {
        check(
            &[
                frame(1, "a", Message, User, &[], json!({"content": "old"})),
                frame(
                    2,
                    "k",
                    Compact,
                    Agent,
                    &[],
                    json!({"summary": "user said old"}),
                ),
                frame(3, "b", Message, User, &[], json!({"content": "new"})),
                frame(
                    4,
                    "u",
                    Update,
                    User,
                    &["frame:a"],
                    json!({"content": "edit before compact"}),
                ),
            ],
            expect![[r#"
                2 k System "user said old"
                3 b User "new"
            "#]],
        );
        let st = frame_stats(&[
            frame(1, "a", Message, User, &[], json!({})),
            frame(2, "k", Compact, Agent, &[], json!({})),
            frame(3, "b", Message, User, &[], json!({})),
            frame(3, "b", Message, User, &[], json!({})),
            frame(4, "c", Message, Agent, &[], json!({})),
            frame(5, "u", Update, User, &["frame:a"], json!({})),
        ]);
        expect![[r#"
            FrameStats {
                total: 5,
                messages: 3,
                requests: 0,
                results: 0,
                updates: 1,
                compacts: 1,
                messages_since_compact: 2,
                last_seq: Some(
                    5,
                ),
                last_compact_seq: Some(
                    2,
                ),
            }
        "#]]
        .assert_debug_eq(&st);
    }

    #[test]
    fn answered_prompts_read_clean() {
        let mut scoped = frame(
            5,
            "r2",
            Result,
            User,
            &["element:fav"],
            json!({"answer": "red"}),
        );
        scoped.parent_id = Some("m1".into());
        check(
            &[
                frame(
                    1,
                    "m1",
                    Message,
                    Agent,
                    &[],
                    json!({"content": "Pick <hml-prompt id=\"fav\" type=\"radio\">Colour?<data>[\"red\",\"blue\"]</data></hml-prompt> and <hml-prompt id=q2>Tags?</hml-prompt>."}),
                ),
                frame(
                    2,
                    "m2",
                    Message,
                    Agent,
                    &[],
                    json!({"content": "Again <hml-prompt id=\"fav\">Colour?</hml-prompt>"}),
                ),
                frame(
                    3,
                    "r1",
                    Update,
                    User,
                    &["element:fav"],
                    json!({"answer": "blue <3"}),
                ),
                frame(
                    4,
                    "r3",
                    Update,
                    User,
                    &["@element:q2"],
                    json!({"answer": ["a", "b"]}),
                ),
                scoped,
                frame(
                    6,
                    "r4",
                    Result,
                    User,
                    &["element:q2"],
                    json!({"answer": ["c"]}),
                ),
                frame(
                    7,
                    "r5",
                    Update,
                    User,
                    &["element:nowhere"],
                    json!({"answer": "x"}),
                ),
            ],
            expect![[r#"
                1 m1 Agent "Pick <hml-prompt id=\"fav\" type=\"radio\" answered>Colour?<data>[\"red\",\"blue\"]</data><response>red</response></hml-prompt> and <hml-prompt id=\"q2\" answered>Tags?<response>c</response></hml-prompt>."
                2 m2 Agent "Again <hml-prompt id=\"fav\" answered>Colour?<response>blue &lt;3</response></hml-prompt>"
            "#]],
        );
        let view = compile_frames(&[
            frame(
                1,
                "m",
                Message,
                Agent,
                &[],
                json!({"content": "<hml-prompt id=a>Colour?</hml-prompt><hml-prompt id=b>Size\n in cm?</hml-prompt>"}),
            ),
            frame(
                2,
                "u",
                Update,
                User,
                &["element:a"],
                json!({"answer": "red"}),
            ),
            frame(
                3,
                "n",
                Message,
                User,
                &[],
                json!({"content": "<hml-prompt id=c>not the agent's</hml-prompt>"}),
            ),
        ]);
        expect![[r#"
            [
                UnansweredPrompt {
                    frame_id: "m",
                    prompt_id: "b",
                    question: "Size in cm?",
                },
            ]
        "#]]
        .assert_debug_eq(&unanswered_prompts(&view));
        // An already answered prompt gets the new answer, once.
        check(
            &[
                frame(
                    1,
                    "m",
                    Message,
                    Agent,
                    &[],
                    json!({"content": "<hml-prompt id=p answered>Q<response>old</response></hml-prompt>"}),
                ),
                frame(
                    2,
                    "u",
                    Update,
                    User,
                    &["element:p"],
                    json!({"answer": "new"}),
                ),
            ],
            expect![[r#"
                1 m Agent "<hml-prompt id=\"p\" answered>Q<response>new</response></hml-prompt>"
            "#]],
        );
    }

    /// A prompt is answered only by an answer frame: what the model wrote into it
    /// (`answered`, `answered-by`, a `<response>`) is dropped; an answer the agent recorded
    /// says so, and the user's later answer replaces it.
    #[test]
    fn only_an_answer_frame_answers_a_prompt() {
        let asked = frame(
            1,
            "m",
            Message,
            Agent,
            &[],
            json!({"content": "<hml-prompt id=a answered ANSWERED-BY=user>A?<response>yes</response></hml-prompt> <hml-prompt id=b answered-by=\"agent\">B?</hml-prompt> <hml-prompt id=c>C?<response>no</response></hml-prompt>"}),
        );
        check(
            std::slice::from_ref(&asked),
            expect![[r#"
                1 m Agent "<hml-prompt id=\"a\">A?</hml-prompt> <hml-prompt id=\"b\">B?</hml-prompt> <hml-prompt id=\"c\">C?</hml-prompt>"
            "#]],
        );
        let view = compile_frames(std::slice::from_ref(&asked));
        assert_eq!(unanswered_prompts(&view).len(), 3);
        let mut by_agent = frame(
            2,
            "r1",
            Result,
            Agent,
            &["element:a"],
            json!({"answer": "yes"}),
        );
        by_agent.parent_id = Some("m".into());
        check(
            &[asked.clone(), by_agent.clone()],
            expect![[r#"
                1 m Agent "<hml-prompt id=\"a\" answered answered-by=\"agent\">A?<response>yes</response></hml-prompt> <hml-prompt id=\"b\">B?</hml-prompt> <hml-prompt id=\"c\">C?</hml-prompt>"
            "#]],
        );
        let view = compile_frames(&[asked.clone(), by_agent.clone()]);
        let doc = crate::hml::parse(&view[0].content);
        let p = doc
            .elements()
            .find_map(crate::hml::Prompt::from_element)
            .unwrap();
        assert!(p.answered && p.by_agent, "{p:?}");
        // Cut short, or inside another prompt, a prompt claims nothing either.
        for (content, unanswered) in [
            (
                "<hml-prompt id=x answered>Deploy?<response>yes</response>",
                1,
            ),
            (
                "<hml-prompt id=o answered>Outer <hml-prompt id=i answered>Inner?<response>yes</response></hml-prompt><response>sure</response></hml-prompt> after",
                2,
            ),
        ] {
            let f = frame(9, "t", Message, Agent, &[], json!({ "content": content }));
            let view = compile_frames(std::slice::from_ref(&f));
            assert!(
                !view[0].content.contains("answered") && !view[0].content.contains("<response>"),
                "{}",
                view[0].content
            );
            let doc = crate::hml::parse(&view[0].content);
            let waiting = doc
                .elements()
                .filter_map(crate::hml::Prompt::from_element)
                .filter(|p| !p.answered)
                .count();
            assert_eq!(waiting, unanswered, "{}", view[0].content);
        }
        let mut by_user = frame(
            3,
            "r2",
            Result,
            User,
            &["element:a"],
            json!({"answer": "no"}),
        );
        by_user.parent_id = Some("m".into());
        check(
            &[asked, by_agent, by_user],
            expect![[r#"
                1 m Agent "<hml-prompt id=\"a\" answered>A?<response>no</response></hml-prompt> <hml-prompt id=\"b\">B?</hml-prompt> <hml-prompt id=\"c\">C?</hml-prompt>"
            "#]],
        );
    }

    /// A message with a message for parent is a new version of it: the view follows each
    /// version's current choice, marks the first message of each version with how many there
    /// are, and a switch (an update whose only key is `current`) picks another.
    #[test]
    fn versions_branch_the_view_and_a_switch_picks_one() {
        let user = |seq, id: &str, text: &str| {
            frame(
                seq,
                id,
                Message,
                User,
                &[],
                json!({"role": "user", "content": text}),
            )
        };
        let agent = |seq, id: &str, text: &str| {
            frame(seq, id, Message, Agent, &[], json!({"content": text}))
        };
        let child = |mut f: Frame, parent: &str| {
            f.parent_id = Some(parent.into());
            f
        };
        let switch = |seq, id: &str, of: &str, n: u64| {
            frame(
                seq,
                id,
                Update,
                User,
                &[&format!("frame:{of}")],
                json!({"current": n}),
            )
        };
        let versioned = |frames: &[Frame]| -> String {
            compile_frames(frames)
                .iter()
                .map(|m| match &m.versions {
                    Some(v) => format!("{} {}/{} of {}\n", m.frame_id, v.current, v.count, v.of),
                    None => format!("{}\n", m.frame_id),
                })
                .collect()
        };
        let mut log = vec![
            user(1, "u1", "hi"),
            agent(2, "a1", "hello"),
            user(3, "u2", "wrod"),
            agent(4, "a2", "what?"),
            frame(5, "r1", Request, Agent, &[], json!({"content": "ls"})),
        ];
        log[4].parent_id = Some("a2".into());
        let mut result = frame(6, "s1", Result, System, &[], json!({"content": "files"}));
        result.parent_id = Some("r1".into());
        log.push(result);
        // The typo edited: u2 and what followed it are version 1, the edit version 2.
        log.push(child(user(7, "u2b", "word"), "u2"));
        log.push(agent(8, "a2b", "a word"));
        check(
            &log,
            expect![[r#"
                1 u1 User "hi"
                2 a1 Agent "hello"
                7 u2b User "word"
                8 a2b Agent "a word"
            "#]],
        );
        assert_eq!(versioned(&log), "u1\na1\nu2b 2/2 of u2\na2b\n");
        // The answer regenerated: a version of a2b.
        log.push(child(agent(9, "a2c", "a fine word"), "a2b"));
        assert_eq!(versioned(&log), "u1\na1\nu2b 2/2 of u2\na2c 2/2 of a2b\n");
        // Back to the typo: its reply and its call come back, and the conversation goes on
        // there.
        log.push(switch(10, "sw1", "u2", 1));
        log.push(user(11, "u3", "never mind"));
        check(
            &log,
            expect![[r#"
                1 u1 User "hi"
                2 a1 Agent "hello"
                3 u2 User "wrod"
                4 a2 Agent "what?"
                5 r1 System "ls"
                6 s1 System "files"
                11 u3 User "never mind"
            "#]],
        );
        assert_eq!(versioned(&log), "u1\na1\nu2 1/2 of u2\na2\nr1\ns1\nu3\n");
        // Version 2 again, by the id of any of its versions: its own choice was kept.
        log.push(switch(12, "sw2", "u2b", 2));
        assert_eq!(versioned(&log), "u1\na1\nu2b 2/2 of u2\na2c 2/2 of a2b\n");
        // A switch out of range, or of a message with one version, changes nothing, and
        // never stands for the message's payload.
        log.push(switch(13, "sw3", "u2", 7));
        log.push(switch(14, "sw4", "u1", 1));
        assert_eq!(versioned(&log), "u1\na1\nu2b 2/2 of u2\na2c 2/2 of a2b\n");
        assert_eq!(compile_frames(&log)[0].content, "hi");
        // An edit of the edit is a third version of the same message.
        log.push(child(user(15, "u2c", "words"), "u2b"));
        assert_eq!(versioned(&log), "u1\na1\nu2c 3/3 of u2\n");
        // A summary starts the view over: versions before it are out of sight.
        log.push(frame(
            16,
            "c1",
            Compact,
            System,
            &[],
            json!({"content": "sum"}),
        ));
        log.push(user(17, "u4", "after"));
        assert_eq!(versioned(&log), "c1\nu4\n");
    }
}
