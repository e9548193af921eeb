//! Request and response bodies of the JSON API and the server functions, shared by the
//! server and the browser so both sides agree on one definition.
//!
//! No type here can hold a secret: API keys, password hashes and data keys never leave the
//! server, so they have no field to travel in.

use serde::{Deserialize, Serialize};

/// Longest session name accepted, in characters.
pub const MAX_SESSION_NAME_CHARS: usize = 200;

/// The signed-in user, as the browser and API clients see them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct UserDto {
    pub id: i64,
    pub username: String,
    pub is_admin: bool,
}

/// A stored time (RFC 3339) to the minute, as pages and exports show it:
/// `2026-11-28T21:33:54.466Z` is `2026-11-28 21:33`.
pub fn to_the_minute(t: &str) -> String {
    t.get(..16).unwrap_or(t).replace('T', " ")
}

/// An account as an administrator sees it (`GET /api/admin/users`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct AdminUserDto {
    pub id: i64,
    pub username: String,
    pub is_admin: bool,
    pub disabled: bool,
    pub created_at: String,
    pub usage: UserUsageDto,
}

/// One account's use: its sessions and agents, when it was last active, and its spend
/// (reference 003's global line).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct UserUsageDto {
    pub sessions: i64,
    pub agents: i64,
    pub last_active: Option<String>,
    pub cost_usd: f64,
    pub calls: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
}

/// `POST /api/admin/users`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct AdminCreateUserRequest {
    pub username: String,
    pub password: String,
    #[serde(default)]
    pub is_admin: bool,
}

/// `PATCH /api/admin/users/{id}`: absent fields stay as they are.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct AdminUpdateUserRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_admin: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
}

/// One result of a search across the user's sessions (`GET /api/search`): a message
/// (`frame_id`), or a session found by its name (`kind` `session`, no `frame_id`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct SearchHitDto {
    pub session_id: i64,
    pub session_name: String,
    pub frame_id: Option<String>,
    /// `user`, `agent` or `session`.
    pub kind: String,
    /// Plain text, cut around the first match ("…" where cut).
    pub snippet: String,
    /// Where the query's words are in `snippet`: `[start, end)` in characters.
    pub highlights: Vec<(usize, usize)>,
    pub score: f64,
    pub created_at: String,
}

/// Where a session stands. `Agent` sessions are opened by agents (sub-sessions).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum SessionStatus {
    Active,
    Archived,
    Agent,
}

impl SessionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            SessionStatus::Active => "active",
            SessionStatus::Archived => "archived",
            SessionStatus::Agent => "agent",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "active" => Some(SessionStatus::Active),
            "archived" => Some(SessionStatus::Archived),
            "agent" => Some(SessionStatus::Agent),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct SessionDto {
    pub id: i64,
    pub name: String,
    pub status: SessionStatus,
    pub parent_session_id: Option<i64>,
    /// The agent this session talks to.
    pub agent_id: Option<i64>,
    /// Replies stream (SSE) when true; batch otherwise. `/stream on|off` switches it.
    pub streaming: bool,
    pub created_at: String,
    pub updated_at: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct LoginRequest {
    pub username: String,
    pub password: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct LoginResponse {
    pub user: UserDto,
    /// The same JWT the cookie carries, for clients that send `Authorization: Bearer`.
    pub token: String,
    /// Unix seconds.
    pub expires_at: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ChangePasswordRequest {
    pub current_password: String,
    pub new_password: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateSessionRequest {
    pub name: String,
    #[serde(default)]
    pub parent_session_id: Option<i64>,
    #[serde(default)]
    pub status: Option<SessionStatus>,
    /// Omitted: the user's first agent (the offline demo for a new user).
    #[serde(default)]
    pub agent_id: Option<i64>,
}

/// A partial update: absent fields stay as they are. `parent_session_id: null` detaches the
/// session from its parent, which is why it is a double option.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct UpdateSessionRequest {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub status: Option<SessionStatus>,
    #[serde(default, with = "double_option")]
    #[cfg_attr(feature = "openapi", schemars(with = "Option<i64>"))]
    pub parent_session_id: Option<Option<i64>>,
    #[serde(default, with = "double_option")]
    #[cfg_attr(feature = "openapi", schemars(with = "Option<i64>"))]
    pub agent_id: Option<Option<i64>>,
}

/// An agent's type (reference 002, table 4): where its context files live. An `open` agent
/// keeps every file per user; a `predefined` one keeps its persona at the agent's level and
/// only USER.md and BOOTSTRAP.md per user.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum AgentKind {
    #[default]
    Open,
    Predefined,
}

impl AgentKind {
    pub const fn as_str(self) -> &'static str {
        match self {
            AgentKind::Open => "open",
            AgentKind::Predefined => "predefined",
        }
    }

    pub fn parse(s: &str) -> Option<AgentKind> {
        match s {
            "open" => Some(AgentKind::Open),
            "predefined" => Some(AgentKind::Predefined),
            _ => None,
        }
    }
}

/// An agent's stored context files, in the order the system prompt gives them.
pub const CONTEXT_FILES: [&str; 7] = [
    "AGENTS.md",
    "SOUL.md",
    "TOOLS.md",
    "IDENTITY.md",
    "USER_PREDEFINED.md",
    "USER.md",
    "BOOTSTRAP.md",
];

/// Context files Hero makes for each prompt: shown, never stored or written.
pub const VIRTUAL_CONTEXT_FILES: [&str; 1] = ["AVAILABILITY.md"];

/// One of an agent's context files as `GET /api/agents/{id}/files` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct ContextFileDto {
    pub name: String,
    /// `agent` (the agent's own), `user` (the signed-in user's copy) or `virtual` (made by
    /// Hero for each call).
    pub level: String,
    /// In bytes.
    pub size: u64,
}

/// `GET /api/agents/{id}/files/{name}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct ContextFileContent {
    pub name: String,
    pub level: String,
    pub content: String,
}

/// `PUT /api/agents/{id}/files/{name}`: empty content deletes the file.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct PutContextFileRequest {
    pub content: String,
}

fn active() -> String {
    "active".into()
}

/// `POST /api/agents/{id}/summon`: write the agent's persona files from a description.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SummonRequest {
    /// What the agent should be ("a sarcastic Rust reviewer").
    pub description: String,
    /// Another of the user's agents whose provider writes the files; the agent's own when
    /// omitted.
    #[serde(default)]
    pub with_agent_id: Option<i64>,
}

/// `GET /api/sessions/{id}/system-prompt`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct SystemPromptDto {
    pub prompt: String,
}

/// Which wire format and service an agent talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub enum ProviderKind {
    #[serde(rename = "anthropic")]
    Anthropic,
    #[serde(rename = "openai")]
    OpenAi,
    /// Any server speaking OpenAI's Chat Completions (Ollama, vLLM, llama.cpp); needs a base URL.
    #[serde(rename = "openai-compatible")]
    OpenAiCompatible,
    /// Plays a built-in script in-process: the offline demo, no key, no network.
    #[serde(rename = "scripted")]
    Scripted,
}

impl ProviderKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::OpenAi => "openai",
            ProviderKind::OpenAiCompatible => "openai-compatible",
            ProviderKind::Scripted => "scripted",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [
            Self::Anthropic,
            Self::OpenAi,
            Self::OpenAiCompatible,
            Self::Scripted,
        ]
        .into_iter()
        .find(|k| k.as_str() == s)
    }
}

/// An agent as clients see it: whether a key is set, never the key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct AgentDto {
    pub id: i64,
    pub name: String,
    pub provider: ProviderKind,
    pub model: String,
    pub base_url: Option<String>,
    pub has_api_key: bool,
    /// Merged into every provider request (max_tokens, temperature, …).
    pub config: serde_json::Value,
    #[serde(rename = "type", default)]
    pub kind: AgentKind,
    /// `active`, or `summoning` while its files are written from a description.
    #[serde(default = "active")]
    pub status: String,
    /// Its sessions are summarised past this many messages, or tokens, since the last
    /// summary (null: Hero's defaults, 200 and 60,000).
    #[serde(default)]
    pub compact_after_messages: Option<u64>,
    #[serde(default)]
    pub compact_after_tokens: Option<u64>,
    /// Its model's context window in tokens (null: 128,000): its memory flush comes 24,000
    /// tokens before it fills, or before the summary if that comes first.
    #[serde(default)]
    pub context_window: Option<u64>,
    /// Its own price (null: Hero's table or the server's `[prices]`).
    #[serde(default)]
    pub price: Option<Price>,
    /// Its default processes (reference 003): ability ids in order, whose text is in every
    /// system prompt of its.
    #[serde(default)]
    pub default_processes: Vec<String>,
    /// The skills it may use (reference 002 §12.5): null, every skill its user has; else
    /// those named (`[]`: none).
    #[serde(default)]
    pub skill_allow_list: Option<Vec<String>>,
    pub created_at: String,
    pub updated_at: String,
}

/// A model's price, USD per million tokens (reference 003's spend).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    #[serde(default)]
    pub cache_read: f64,
    #[serde(default)]
    pub cache_write: f64,
}

/// What one spend line adds up (`GET /api/spend`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct SpendTotals {
    pub cost_micros: i64,
    pub calls: i64,
    pub unpriced_calls: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cache_read_tokens: i64,
    pub cache_write_tokens: i64,
}

/// `GET /api/spend?session_id=`: the three lines of reference 003. `service`: the user's
/// agents on the session's agent's API key (null without a key); `session`: null without
/// a session.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct SpendDto {
    pub global: SpendTotals,
    pub service: Option<SpendTotals>,
    pub session: Option<SpendTotals>,
}

/// The chat header's spend lines (reference 003), `Global $4.21 · Service $3.90 · Session
/// $0.12` (Service when the session's agent has a key), and their tokens, for a hover.
pub fn spend_line(s: &SpendDto) -> (String, String) {
    let mut parts = vec![("Global", &s.global)];
    parts.extend(s.service.as_ref().map(|t| ("Service", t)));
    parts.extend(s.session.as_ref().map(|t| ("Session", t)));
    let line = parts
        .iter()
        .map(|(name, t)| format!("{name} {}", format_cost(t.cost_micros)))
        .collect::<Vec<_>>()
        .join(" · ");
    let tokens = parts
        .iter()
        .map(|(name, t)| {
            let unpriced = if t.unpriced_calls > 0 {
                format!(", {} unpriced", t.unpriced_calls)
            } else {
                String::new()
            };
            format!(
                "{name}: {} input, {} output, {} cache read, {} cache write tokens; {} calls{unpriced}",
                t.input_tokens, t.output_tokens, t.cache_read_tokens, t.cache_write_tokens, t.calls
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    (line, tokens)
}

/// A cost in micro-dollars as the spend lines show it: `$4.21`, `$0.0042` under a cent.
pub fn format_cost(micros: i64) -> String {
    let sign = if micros < 0 { "-" } else { "" };
    let m = micros.unsigned_abs();
    if m != 0 && m < 10_000 {
        // Hundredths of a cent, by integers (no float formatting in the wasm).
        format!("{sign}$0.{:04}", (m + 50) / 100)
    } else {
        let cents = (m + 5_000) / 10_000;
        format!("{sign}${}.{:02}", cents / 100, cents % 100)
    }
}

#[cfg(test)]
mod cost_tests {
    #[test]
    fn costs_read_as_dollars() {
        let shown: Vec<String> = [0, 11_100, 4_209_999, 3_900_000, 120_000, 4_999, -2_500_000]
            .into_iter()
            .map(super::format_cost)
            .collect();
        assert_eq!(
            shown,
            [
                "$0.00", "$0.01", "$4.21", "$3.90", "$0.12", "$0.0050", "-$2.50"
            ]
        );
        let totals = |cost_micros, calls| super::SpendTotals {
            cost_micros,
            calls,
            ..Default::default()
        };
        let lines = super::SpendDto {
            global: totals(4_210_000, 9),
            service: Some(totals(3_900_000, 7)),
            session: Some(totals(120_000, 2)),
        };
        let (line, tokens) = super::spend_line(&lines);
        assert_eq!(line, "Global $4.21 · Service $3.90 · Session $0.12");
        assert!(tokens.starts_with("Global: 0 input, 0 output"), "{tokens}");
        let demo = super::SpendDto {
            session: Some(totals(0, 1)),
            ..Default::default()
        };
        assert_eq!(super::spend_line(&demo).0, "Global $0.00 · Session $0.00");
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateAgentRequest {
    pub name: String,
    pub provider: ProviderKind,
    pub model: String,
    #[serde(default)]
    pub base_url: Option<String>,
    #[serde(default)]
    pub api_key: Option<String>,
    #[serde(default)]
    pub config: Option<serde_json::Value>,
    /// Where its context files live; `open` when not given. Chosen once, at creation.
    #[serde(rename = "type", default)]
    pub kind: AgentKind,
    /// When its sessions are summarised (omitted: Hero's defaults).
    #[serde(default)]
    pub compact_after_messages: Option<u64>,
    #[serde(default)]
    pub compact_after_tokens: Option<u64>,
    /// Its model's context window in tokens (omitted: 128,000).
    #[serde(default)]
    pub context_window: Option<u64>,
}

/// A partial update; `api_key: null` removes the key, `base_url: null` the URL.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct UpdateAgentRequest {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub provider: Option<ProviderKind>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default, with = "double_option")]
    #[cfg_attr(feature = "openapi", schemars(with = "Option<String>"))]
    pub base_url: Option<Option<String>>,
    #[serde(default, with = "double_option")]
    #[cfg_attr(feature = "openapi", schemars(with = "Option<String>"))]
    pub api_key: Option<Option<String>>,
    #[serde(default)]
    pub config: Option<serde_json::Value>,
    /// `null` returns to Hero's default.
    #[serde(default, with = "double_option")]
    #[cfg_attr(feature = "openapi", schemars(with = "Option<u64>"))]
    pub compact_after_messages: Option<Option<u64>>,
    #[serde(default, with = "double_option")]
    #[cfg_attr(feature = "openapi", schemars(with = "Option<u64>"))]
    pub compact_after_tokens: Option<Option<u64>>,
    /// `null` returns to the default, 128,000.
    #[serde(default, with = "double_option")]
    #[cfg_attr(feature = "openapi", schemars(with = "Option<u64>"))]
    pub context_window: Option<Option<u64>>,
    /// The agent's own price; `null` returns to Hero's.
    #[serde(default, with = "double_option")]
    #[cfg_attr(feature = "openapi", schemars(with = "Option<Price>"))]
    pub price: Option<Option<Price>>,
    /// Its default processes, in order: processes' ids (`system:act`, `user:17`).
    #[serde(default)]
    pub default_processes: Option<Vec<String>>,
    /// The skills it may use: `null`, all; a list of names, those alone (`[]`: none).
    #[serde(default, with = "double_option")]
    #[cfg_attr(feature = "openapi", schemars(with = "Option<Vec<String>>"))]
    pub skill_allow_list: Option<Option<Vec<String>>>,
}

/// `POST /api/sessions/{id}/attachments`: a file stored for the session's next message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct AttachmentDto {
    pub attachment_id: String,
    pub name: String,
    /// Bytes.
    pub size: u64,
    /// `text`, `pdf` or `image`.
    pub kind: String,
    pub media_type: String,
}

/// `POST /api/sessions/{id}/messages[/stream]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct PostMessageRequest {
    pub content: String,
    /// The skills the agent may use for this turn and its follow-ups, over its allow list:
    /// a list of names (`[]`: none).
    #[serde(default)]
    pub skill_filter: Option<Vec<String>>,
    /// Stored and shown, never sent to the agent (no reply).
    #[serde(default)]
    pub private: bool,
    /// The attachments the message carries, by the ids their upload answered.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<String>,
}

/// The batch answer of `POST /api/sessions/{id}/messages`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct PostMessageResponse {
    pub message_id: String,
    pub content: String,
    /// Set when the turn ended early (provider error, abort); `content` is what arrived.
    pub error: Option<String>,
}

/// One function of `GET /api/permissions`: its default level and the signed-in user's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct PermissionDto {
    pub function: String,
    pub description: String,
    pub default: crate::calls::Permission,
    /// Whether it may be set to `always` (reference 000's `autoApprove`).
    #[serde(rename = "autoApprove")]
    pub auto_approve: crate::calls::AutoApprove,
    /// How dangerous it is (reference 000's `dangerLevel`).
    #[serde(rename = "dangerLevel")]
    pub danger_level: crate::calls::DangerLevel,
    /// The user's own level: their override, else the default.
    pub level: crate::calls::Permission,
    /// The capability it belongs to when it is not one of Hero's own functions (`config`,
    /// `tasks`, `mcp-<server>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capability: Option<String>,
}

/// What an ability is (reference 000, "Abilities").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum AbilityType {
    /// Something the system runs (the function registry).
    Function,
    /// Instructions in markdown, with variables ([`crate::process`]).
    Process,
}

/// Where an ability comes from: its id starts with it (`builtin:bash`, `system:act`,
/// `user:17`, `plugin:weather__forecast`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum AbilitySource {
    Builtin,
    System,
    User,
    Plugin,
}

impl AbilitySource {
    pub fn as_str(self) -> &'static str {
        match self {
            AbilitySource::Builtin => "builtin",
            AbilitySource::System => "system",
            AbilitySource::User => "user",
            AbilitySource::Plugin => "plugin",
        }
    }
}

/// `GET /api/abilities` (and, with `content`, `schema` and `examples`, `GET
/// /api/abilities/{id}`): one ability as the user's list shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct AbilityDto {
    pub id: String,
    pub name: String,
    #[serde(rename = "type")]
    pub kind: AbilityType,
    pub source: AbilitySource,
    pub description: String,
    pub category: String,
    pub permissions: crate::calls::FunctionPermissions,
    /// The level it has for a user who has not chosen one.
    #[serde(rename = "autoApprovePolicy")]
    pub auto_approve_policy: crate::calls::Permission,
    /// A process a session begins with ([`crate::process::startup_rank`]).
    pub startup: bool,
    /// The user may change or delete it (their own processes only).
    pub editable: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub examples: Option<Vec<serde_json::Value>>,
}

/// A plugin's state (`GET /api/plugins`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum PluginStatus {
    /// Its manifest is good and it may run.
    Ready,
    /// A process of it runs now.
    Running,
    /// Its manifest is wrong (`error` says where).
    Failed,
    /// This server cannot run it (`error` says why: no bubblewrap, say).
    Unavailable,
}

impl PluginStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            PluginStatus::Ready => "ready",
            PluginStatus::Running => "running",
            PluginStatus::Failed => "failed",
            PluginStatus::Unavailable => "unavailable",
        }
    }
}

/// A plugin an administrator installed (`GET /api/plugins`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct PluginDto {
    pub name: String,
    pub version: String,
    pub description: String,
    pub status: PluginStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The ids of the abilities it exports (`plugin:weather__brief`).
    pub abilities: Vec<String>,
}

/// A skill as `GET /api/skills` lists it (reference 002 §8), and with its details as
/// `GET /api/skills/{name}` gives it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct SkillDto {
    pub name: String,
    pub description: String,
    /// `workspace`, `project`, `personal`, `global` or `builtin`.
    pub tier: String,
    /// `public`, `internal` or `private`.
    pub visibility: String,
    pub version: String,
    /// The tier of the skill of the same name that hides this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overridden_by: Option<String>,
    /// Why its folder is no skill (then it is not used).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Its details, beside the fields above (`GET /api/skills/{name}` only).
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<SkillDetail>,
}

/// What `GET /api/skills/{name}` adds to a skill.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct SkillDetail {
    pub license: Option<String>,
    pub compatibility: Option<String>,
    pub metadata: std::collections::BTreeMap<String, String>,
    pub allowed_tools: Option<String>,
    /// `SKILL.md`'s body, `{baseDir}` filled in.
    pub content: String,
    pub files: Vec<SkillFile>,
}

/// One file of a skill's folder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct SkillFile {
    pub path: String,
    pub size: u64,
}

/// `GET /api/skills`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct SkillsDto {
    /// `bm25`, or `hybrid` where embeddings are on.
    pub search_mode: String,
    pub skills: Vec<SkillDto>,
}

/// `GET /api/agents/{id}/skills`: the skills an agent may use, and how its prompt gives
/// them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct AgentSkillsDto {
    /// `inline` (listed in the prompt) or `search` (the agent is told to search).
    pub prompt_mode: String,
    /// The names' and descriptions' characters, over 4.
    pub estimated_tokens: usize,
    pub skills: Vec<SkillDto>,
}

/// `GET /api/skills/{name}/files/{path}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct SkillFileText {
    pub path: String,
    pub content: String,
}

/// `PUT /api/skills/{name}`: a personal skill, its SKILL.md and the text files beside it
/// (a folder imported from the browser).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct PutSkillRequest {
    pub content: String,
    #[serde(default)]
    pub files: Option<std::collections::BTreeMap<String, String>>,
    /// `personal` (the only tier written here).
    #[serde(default)]
    pub tier: Option<String>,
}

/// `POST /api/skills/search`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SkillSearchRequest {
    pub query: String,
    #[serde(default)]
    pub agent_id: Option<i64>,
    #[serde(default)]
    pub limit: Option<usize>,
}

/// `PUT /api/skills/{name}/visibility` (administrators): a global skill's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SkillVisibilityRequest {
    /// `public` or `internal`.
    pub visibility: String,
}

/// `POST /api/skills/{name}/grants` (administrators): an internal global skill to a user
/// (by name) or to an agent, which may be pinned to one of its versions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SkillGrantRequest {
    #[serde(default)]
    pub user: Option<String>,
    #[serde(default)]
    pub agent_id: Option<i64>,
    #[serde(default)]
    pub pinned_version: Option<i64>,
}

/// One grant of an internal skill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct SkillGrantDto {
    /// `user-<n>` or `agent-<n>`, as `DELETE /api/skills/{name}/grants/{id}` takes it.
    pub id: String,
    /// The user it is granted to...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// ...or the agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned_version: Option<i64>,
    /// The administrator who granted it.
    pub granted_by: String,
    pub created_at: String,
}

/// `GET /api/skills/{name}/grants`: a global skill's visibility and grants.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct SkillGrantsDto {
    pub visibility: String,
    /// Its version now, and those kept for pinned agents, newest first.
    pub version: i64,
    pub versions: Vec<i64>,
    pub grants: Vec<SkillGrantDto>,
}

/// One skill found, with its score and its parts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct SkillHitDto {
    pub name: String,
    pub description: String,
    pub tier: String,
    pub score: f64,
    pub bm25: f64,
    pub vector: Option<f64>,
}

/// What `POST /api/skills/search` answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct SkillSearchDto {
    pub mode: String,
    /// Why the search was BM25 alone though vectors were wanted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    pub results: Vec<SkillHitDto>,
}

/// `POST /api/abilities`: a process of the user's own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateProcessRequest {
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub content: String,
}

/// `PATCH /api/abilities/{id}`: absent fields stay as they are.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct UpdateProcessRequest {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub content: Option<String>,
}

/// `POST /api/abilities/{id}/render`: a process as it would be loaded in a session.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct RenderProcessRequest {
    #[serde(default)]
    pub session_id: Option<i64>,
    #[serde(default)]
    pub args: Option<String>,
}

/// `GET /api/workspace`: what the signed-in user's `bash` workspace holds on disk, and
/// the most it may.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct WorkspaceDto {
    pub used_bytes: u64,
    pub quota_bytes: u64,
}

/// `PUT /api/permissions/{function}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SetPermissionRequest {
    pub level: crate::calls::Permission,
}

/// `POST /api/sessions/{id}/answers`: the answer to a question in a message.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct AnswerRequest {
    pub message_id: String,
    pub element_id: String,
    pub answer: serde_json::Value,
}

/// `POST /api/sessions/{id}/approvals/{request_frame_id}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ApprovalRequest {
    pub approved: bool,
}

/// The body of every 4xx and 5xx answer of the JSON API.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct ErrorBody {
    pub error: String,
}

/// A field that can be absent (leave as is), `null` (clear) or a value (set).
mod double_option {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<T: Serialize, S: Serializer>(
        v: &Option<Option<T>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match v {
            None => s.serialize_none(),
            Some(inner) => inner.serialize(s),
        }
    }

    pub fn deserialize<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Option<T>>, D::Error> {
        Option::<T>::deserialize(d).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parent_absent_null_and_set_are_three_different_updates() {
        let absent: UpdateSessionRequest = serde_json::from_str(r#"{"name":"x"}"#).unwrap();
        assert_eq!(absent.parent_session_id, None);
        let null: UpdateSessionRequest =
            serde_json::from_str(r#"{"parent_session_id":null}"#).unwrap();
        assert_eq!(null.parent_session_id, Some(None));
        let set: UpdateSessionRequest = serde_json::from_str(r#"{"parent_session_id":7}"#).unwrap();
        assert_eq!(set.parent_session_id, Some(Some(7)));
    }

    #[test]
    fn unknown_fields_and_statuses_are_refused() {
        assert!(serde_json::from_str::<UpdateSessionRequest>(r#"{"nam":"x"}"#).is_err());
        assert!(serde_json::from_str::<UpdateSessionRequest>(r#"{"status":"gone"}"#).is_err());
    }
}

/// One of an agent's memory files (`GET /api/agents/{id}/memory/files`): `scope` is
/// `agent` (written by its owner, used with it by whoever it works for) or `user`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct MemoryFileDto {
    pub path: String,
    pub scope: String,
    pub size: u64,
    pub updated_at: String,
}

/// `GET /api/agents/{id}/memory/files/{*path}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct MemoryFileContent {
    pub path: String,
    pub scope: String,
    pub content: String,
}

/// `PUT /api/agents/{id}/memory/files/{*path}`: empty content deletes the file; `scope` is
/// `user` unless given (`agent`, for the agent's own).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct PutMemoryFileRequest {
    pub content: String,
    #[serde(default)]
    pub scope: Option<String>,
}

/// What `PUT /api/agents/{id}/memory/files/{*path}` answers (`size` 0: deleted).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct MemoryWrittenDto {
    pub path: String,
    pub scope: String,
    pub size: u64,
}

/// `POST /api/agents/{id}/memory/search`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct MemorySearchRequest {
    pub query: String,
    #[serde(default)]
    pub limit: Option<usize>,
}

/// One chunk a memory search found: its file, lines (1-based, inclusive), score and text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct MemoryHitDto {
    pub path: String,
    pub scope: String,
    pub start_line: u32,
    pub end_line: u32,
    pub score: f64,
    pub text: String,
}

/// What `POST /api/agents/{id}/memory/search` answers: `mode` is `bm25` or `hybrid`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct MemorySearchDto {
    pub mode: String,
    /// Why the search was BM25 alone though vectors were wanted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    pub results: Vec<MemoryHitDto>,
}

/// One capability of `GET /api/capabilities` (reference 004): where it comes from, its
/// tools, and the config key of its instructions with that key's current version (none for
/// Hero's functions, whose instructions are the prompt's Tooling).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct CapabilityDto {
    pub name: String,
    /// `builtin`, `mcp` or `plugin`.
    pub source: String,
    pub tools: Vec<String>,
    pub prompt_key: Option<String>,
    pub version: Option<i64>,
}

/// One key of `GET /api/configs`: what it holds and its current version (0: never written).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct ConfigKeyDto {
    pub key: String,
    pub description: String,
    /// Whether it is an agent's (`soul`, `agents`: `agent_id` names which).
    pub agent: bool,
    pub version: i64,
    pub updated_at: Option<String>,
}

/// A key's content at a version (`GET /api/configs/{key}`, and each version of its history).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct ConfigDto {
    pub key: String,
    pub version: i64,
    pub content: String,
    /// A capability whose shipped instructions are newer than those it started from: the
    /// change they would make to the current version, offered, never applied by itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offered: Option<Vec<DiffOp>>,
}

/// One version of a key (`GET /api/configs/{key}/versions`, newest first): who wrote it
/// (`hero`: the shipped default or the file as first read; `user`; `agent`), why, and the
/// change that made it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct ConfigVersionDto {
    pub version: i64,
    pub author: String,
    pub reason: String,
    pub change_id: Option<String>,
    pub created_at: String,
    /// The lines changed from the version before (the first version: all inserted).
    pub diff: Vec<DiffOp>,
}

/// `PUT /api/configs/{key}`: a new version written by the user, made against `base_version`
/// (a key changed since answers 409).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct PutConfigRequest {
    pub content: String,
    pub base_version: i64,
    #[serde(default)]
    pub agent_id: Option<i64>,
    /// Why (shown in the key's history).
    #[serde(default)]
    pub reason: Option<String>,
}

pub use crate::calls::DiffOp;

/// A change an agent proposed (`GET /api/configs/changes/{id}`): by its call's request id,
/// the key and agent, the version it was made against, why, what the user decided
/// (`pending`, `approved`, `rejected`, `stale`) and the version an approval wrote.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct ConfigChangeDto {
    pub id: String,
    pub session_id: i64,
    pub key: String,
    pub agent_id: Option<i64>,
    pub base_version: i64,
    pub reason: String,
    pub status: String,
    pub version: Option<i64>,
    pub created_at: String,
    pub diff: Vec<DiffOp>,
}

/// `POST /api/configs/changes/{id}`: the user's decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct DecideChangeRequest {
    pub approved: bool,
}

/// What a decision did: the change's status and, approved, the version it wrote.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct DecidedChangeDto {
    pub status: String,
    pub version: Option<i64>,
}

/// A task's statuses (reference 004), in the board's order.
pub const TASK_STATUSES: [&str; 6] = [
    "triage",
    "backlog",
    "todo",
    "in_progress",
    "done",
    "canceled",
];

/// A task's priorities, 0 to 4.
pub const TASK_PRIORITIES: [&str; 5] = ["none", "urgent", "high", "medium", "low"];

/// A team of the user's tasks: its key (an identifier's prefix, `PER`) and name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct TeamDto {
    pub id: i64,
    pub key: String,
    pub name: String,
    /// How many tasks it holds.
    pub tasks: i64,
}

/// `POST /api/tasks/teams`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct CreateTeamRequest {
    pub name: String,
    pub key: String,
}

/// A task (reference 004): `identifier` is `KEY-n`, rising in its team.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct TaskDto {
    pub id: i64,
    pub identifier: String,
    pub team: String,
    pub title: String,
    pub description: String,
    /// `triage`, `backlog`, `todo`, `in_progress`, `done` or `canceled`.
    pub status: String,
    /// 0 none, 1 urgent, 2 high, 3 medium, 4 low.
    pub priority: i64,
    pub project: Option<String>,
    pub labels: Vec<String>,
    /// `YYYY-MM-DD`.
    pub due: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

/// `POST /api/tasks`: only the title is needed (the team: Personal, made on first use;
/// the status `todo`; no priority).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct CreateTaskRequest {
    pub title: String,
    #[serde(default)]
    pub description: Option<String>,
    /// A team's key or name.
    #[serde(default)]
    pub team: Option<String>,
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub priority: Option<i64>,
    #[serde(default)]
    pub project: Option<String>,
    #[serde(default)]
    pub labels: Option<Vec<String>>,
    #[serde(default)]
    pub due: Option<String>,
}

/// `PATCH /api/tasks/{id}`: the fields to change (`project` or `due` `""` clears it).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct UpdateTaskRequest {
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub team: Option<String>,
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub priority: Option<i64>,
    #[serde(default)]
    pub project: Option<String>,
    #[serde(default)]
    pub labels: Option<Vec<String>>,
    #[serde(default)]
    pub due: Option<String>,
}

/// One change of a task's history: who made it (`user`, or `agent` with its agent and
/// session) and each field's value before and after (`created` for its making).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct TaskEventDto {
    pub actor: String,
    pub agent_id: Option<i64>,
    pub session_id: Option<i64>,
    pub changes: Vec<FieldChange>,
    pub created_at: String,
}

/// A field's value before and after a change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct FieldChange {
    pub field: String,
    pub from: Option<String>,
    pub to: Option<String>,
}

/// How Hero reaches an MCP server: a program it runs in the user's sandbox (`stdio`), or a
/// URL it posts to (`http`, streamable HTTP), under the egress policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase", tag = "transport")]
pub enum McpTransport {
    Stdio {
        /// An absolute path under `/usr` or `/workspace` (the user's workspace).
        command: String,
        #[serde(default)]
        args: Vec<String>,
        /// Its environment: values are sealed and never shown back.
        #[serde(default)]
        env: std::collections::BTreeMap<String, String>,
    },
    Http {
        url: String,
        /// Sent with every request: values are sealed and never shown back.
        #[serde(default)]
        headers: std::collections::BTreeMap<String, String>,
    },
}

/// `POST /api/mcp/servers`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct CreateMcpServerRequest {
    /// `[a-z0-9-]{1,24}`: its tools are `mcp__<name>__<tool>`.
    pub name: String,
    #[serde(flatten)]
    pub transport: McpTransport,
    #[serde(default = "yes")]
    pub enabled: bool,
    /// The longest one call may take, in seconds (1 to 600; 60 when not given).
    #[serde(default)]
    pub timeout_secs: Option<u32>,
}

fn yes() -> bool {
    true
}

/// `PATCH /api/mcp/servers/{id}`: the fields given. A new transport replaces the old one
/// whole, its environment or headers included.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct UpdateMcpServerRequest {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub enabled: Option<bool>,
    #[serde(default)]
    pub timeout_secs: Option<u32>,
    #[serde(default)]
    pub transport: Option<McpTransport>,
}

/// One tool of an MCP server, as Hero offers it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct McpToolDto {
    /// Its name on the server.
    pub name: String,
    /// Its function's name (`mcp__<server>__<tool>`).
    pub function: String,
    pub description: String,
    #[serde(rename = "dangerLevel")]
    pub danger_level: crate::calls::DangerLevel,
}

/// An MCP server as `GET /api/mcp/servers` shows it: the names of its environment variables
/// or headers, never their values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct McpServerDto {
    pub id: i64,
    pub name: String,
    /// `stdio` or `http`.
    pub transport: String,
    /// Stdio: its command and arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// HTTP: its URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The names of its environment variables (stdio) or headers (HTTP).
    pub secret_names: Vec<String>,
    pub enabled: bool,
    pub timeout_secs: u32,
    /// `untested` (never listed), `ready` (its tools listed), `running` (a process or
    /// session open), `failed` (with the reason), `disabled`.
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub tools: Vec<McpToolDto>,
    /// Tools it lists that Hero cannot offer, each with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    pub updated_at: String,
}

/// `POST /api/mcp/servers/{id}/test`: a server that cannot be reached is a result too.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct McpTestResult {
    pub ok: bool,
    pub tools: Vec<McpToolDto>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
    pub instructions: Option<String>,
    pub error: Option<String>,
}
