//! What an agent is told: the system prompt of each call ([`crate::agents::prompt`]), assembled
//! from the agent's context files ([`crate::agents::context_files`]), the functions the user lets
//! it call, and the session (a sub-session's prompt is minimal). A turn builds it in the
//! transaction that starts it; `GET /api/sessions/{id}/system-prompt` shows the same.

use std::sync::Arc;

use crate::execution::functions::Registry;
use crate::store::Conn;

use crate::accounts::auth::AuthUser;
use crate::agents::AgentRuntime;
use crate::agents::prompt::{self, Mode};
use crate::crypto::SecretKey;
use crate::providers::SystemPrompt;
use crate::{AppState, Result, agents, agents::context_files, execution::functions};

/// How to answer: Markdown and Hero Markup Language (section 2 of the prompt).
pub const HML: &str = "Answer in Markdown. You may use Hero Markup Language elements, which the user's browser renders: \
<thinking>…</thinking> for your reasoning, <todo title=\"…\"><item status=\"done|pending|in_progress|failed\">…</item></todo>, \
<progress value=\"3\" max=\"10\" status=\"…\"/>, <link href=\"…\">…</link>, <copy label=\"…\">text to copy</copy>, \
<result for=\"…\" status=\"ok|error\">…</result>, <hml-prompt id=\"…\" type=\"text|number|select|…\">question</hml-prompt> \
for a question with a form, and <ask options=\"yes,no\">question</ask> to ask and wait for the answer before you go on \
(with timeout=\"30000\" default=\"no\", the default answers when the time, in milliseconds, is up).";

/// How `bash` runs (section 6.5), when the agent may call it.
pub const SANDBOX: &str = "Commands you run with bash run in a sandbox: /workspace is yours and kept between commands, \
/tmp is fresh each time, there is no network, and each command is killed at its timeout (in milliseconds; 30000 unless you give one). \
A command waits for the user's approval unless they allowed bash.";

/// Today's date, as the prompt says it (a prompt kept from another day is rebuilt).
fn today() -> String {
    time::OffsetDateTime::now_utc().date().to_string()
}

/// The most bytes of prompts [`PromptCache`] holds; past it, it starts afresh.
pub const PROMPT_CACHE_BYTES: usize = 16 << 20;

/// Which prompt: the user's, for one of their agents, in a session or a sub-session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PromptKey {
    pub user_id: i64,
    pub agent_id: i64,
    pub sub_session: bool,
}

/// System prompts as last built, so that a turn does not rebuild an unchanged one (each
/// build reads and opens every context file and the user's levels). An entry is used only
/// under the user's prompt generation it was built under, which every change to what a
/// prompt is built from raises in the database (migration `prompt_generation`), and on the
/// day it was built; at most [`PROMPT_CACHE_BYTES`] of prompts are kept.
#[derive(Default)]
pub struct PromptCache(std::sync::Mutex<Kept>);

#[derive(Default)]
struct Kept {
    prompts: std::collections::HashMap<PromptKey, KeptPrompt>,
    bytes: usize,
}

struct KeptPrompt {
    generation: i64,
    day: String,
    prompt: SystemPrompt,
}

/// What a kept prompt counts for: its text, and its JSON once a request was written.
fn weight(prompt: &str) -> usize {
    2 * prompt.len()
}

impl PromptCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The prompt kept for `key`, if it was built under `generation` on `day`.
    pub fn get(&self, key: PromptKey, generation: i64, day: &str) -> Option<SystemPrompt> {
        let kept = self.lock();
        let p = kept.prompts.get(&key)?;
        (p.generation == generation && p.day == day).then(|| p.prompt.clone())
    }

    /// Keeps `prompt` for `key`, built under `generation` on `day`.
    pub fn put(&self, key: PromptKey, generation: i64, day: String, prompt: &SystemPrompt) {
        let mut kept = self.lock();
        if let Some(old) = kept.prompts.remove(&key) {
            kept.bytes -= weight(&old.prompt);
        }
        if kept.bytes + weight(prompt) > PROMPT_CACHE_BYTES {
            kept.prompts.clear();
            kept.bytes = 0;
        }
        if weight(prompt) <= PROMPT_CACHE_BYTES {
            kept.bytes += weight(prompt);
            let prompt = prompt.clone();
            kept.prompts.insert(
                key,
                KeptPrompt {
                    generation,
                    day,
                    prompt,
                },
            );
        }
    }

    /// The bytes of prompts kept.
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }
}

/// What a call's prompt holds besides what is read for it: whether it is a sub-session's
/// (minimal), the `## Skills` section, and the user's chain (its functions and capabilities).
pub(crate) struct Shape<'a> {
    pub sub_session: bool,
    pub skills: Option<&'a str>,
    pub tools: &'a Registry,
}

/// The system prompt of a call by `agent` for user `user_id`, read on `c`.
pub(crate) async fn system_prompt(
    c: &mut Conn<'_>,
    st: &AppState,
    dk: &SecretKey,
    agent: &AgentRuntime,
    user_id: i64,
    username: &str,
    shape: Shape<'_>,
) -> Result<String> {
    let Shape {
        sub_session,
        skills,
        tools,
    } = shape;
    let files = context_files::merged(c, dk, agent.id, user_id).await?;
    let specs = crate::execution::permissions::allowed_specs(c, tools, user_id).await?;
    let listed = functions::help::describe(&specs);
    let bash = specs.iter().any(|s| s.name == "bash");
    let pairs: Vec<(&str, &str)> = files
        .iter()
        .map(|f| (f.name.as_str(), f.content.as_str()))
        .collect();
    let first_run = files
        .iter()
        .any(|f| f.name == "BOOTSTRAP.md" && !f.content.trim().is_empty());
    let avail = context_files::availability();
    // Virtual files wait while the agent gets to know its user (002 section 1).
    let virtual_files: Vec<(&str, &str)> = if first_run {
        Vec::new()
    } else {
        vec![("AVAILABILITY.md", avail.as_str())]
    };
    let today = today();
    let (defaults, others) = crate::agents::abilities::for_prompt(
        c,
        &st.plugins,
        dk,
        user_id,
        username,
        &agent.name,
        &agent.default_processes,
    )
    .await?;
    fn pair((a, b): &(String, String)) -> (&str, &str) {
        (a, b)
    }
    let default_processes: Vec<(&str, &str)> = defaults.iter().map(pair).collect();
    let other_processes: Vec<(&str, &str)> = others.iter().map(pair).collect();
    // Reference 004: each capability's instructions in the user's own version, and the
    // user's standing instructions as the extra context.
    let capability_prompts =
        crate::agents::config::capability_prompts(c, tools, dk, user_id).await?;
    let capabilities: Vec<(&str, &str)> = capability_prompts
        .iter()
        .map(|(n, t)| (n.as_str(), t.as_str()))
        .collect();
    let standing = crate::agents::config::standing_instructions(c, dk, user_id).await?;
    let runtime = format!(
        "Hero {}; provider {}; model {}",
        env!("CARGO_PKG_VERSION"),
        agent.endpoint.provider.as_str(),
        agent.endpoint.model
    );
    Ok(prompt::build(&prompt::Input {
        mode: Some(if sub_session {
            Mode::Minimal
        } else {
            Mode::Full
        }),
        agent_name: &agent.name,
        hml: HML,
        functions: &listed,
        default_processes: &default_processes,
        other_processes: &other_processes,
        skills,
        memory: specs.iter().any(|s| s.name == "memory_search"),
        sandbox: bash.then_some(SANDBOX),
        user: username,
        today: &today,
        extra: standing.as_deref(),
        capabilities: &capabilities,
        files: &pairs,
        virtual_files: &virtual_files,
        runtime: &runtime,
    }))
}

/// What a kept prompt must have been built under to be used, besides the user's prompt
/// generation: its day and the skills on disk it may list (the user's own are files a
/// command may have changed, so they are read each time; a change to a personal skill
/// raises the generation).
fn stamp(on_disk: &[crate::skills::Root], allow: Option<&[String]>) -> String {
    let listed = crate::skills::View::of(on_disk.to_vec()).allowed(allow);
    let allowed = allow.map_or_else(|| "*".to_owned(), |names| names.join(","));
    format!(
        "{} {} {allowed}",
        today(),
        crate::skills::fingerprint(&listed)
    )
}

/// The session's agent ready for a call: its runtime, its system prompt built, and the
/// user's data key; `seed` seeds the agent's files first if they never were. `skill_filter`:
/// the skills the turn's message limits it to, over the agent's allow list.
pub(crate) async fn prepared(
    c: &mut Conn<'_>,
    st: &AppState,
    user: &AuthUser,
    session_id: i64,
    seed: bool,
    skill_filter: Option<&[String]>,
) -> Result<(AgentRuntime, SecretKey, Arc<Registry>)> {
    let setup = agents::turn_setup(c, &st.keys, user, session_id).await?;
    let (username, sub, generation) = (setup.username.clone(), setup.sub_session, setup.prompt_gen);
    let dk = setup.dk.clone();
    // The user's chain: Hero's functions and capabilities, then their MCP servers.
    let tools = crate::execution::mcp::registry_at(st, c, &dk, user.id(), generation).await?;
    let mut agent = setup.agent()?;
    if seed {
        context_files::ensure_seeded(c, &dk, agent.id, user.id(), agent.kind).await?;
    }
    let key = PromptKey {
        user_id: user.id(),
        agent_id: agent.id,
        sub_session: sub,
    };
    let allow = skill_filter.or(agent.skill_allow_list.as_deref());
    // The folders are read once: for the stamp, and for the prompt if it is built again.
    let mut roots = st.skills.roots_async(user.id()).await;
    crate::skills::grants::apply(st, &mut roots, user.id(), Some(agent.id));
    let stamp = stamp(&roots, allow);
    agent.system = match st.prompts.get(key, generation, &stamp) {
        Some(kept) => kept,
        None => {
            // Each capability's instructions are stored as their first version the first
            // time a prompt of the user's is built to be sent (reference 004).
            if seed {
                crate::agents::config::ensure_seeded(c, &tools, &dk, user.id()).await?;
            }
            roots.push(crate::skills::personal::read(c, &dk, user.id()).await?);
            let skills = crate::skills::View::of(roots).allowed(allow);
            let section = crate::skills::prompt_section(&skills);
            let built = system_prompt(
                c,
                st,
                &dk,
                &agent,
                user.id(),
                &username,
                Shape {
                    sub_session: sub,
                    skills: section.as_deref(),
                    tools: &tools,
                },
            )
            .await?;
            let built = SystemPrompt::new(built);
            st.prompts.put(key, generation, stamp, &built);
            built
        }
    };
    Ok((agent, dk, tools))
}

/// The system prompt the session's next call would send (its agent's files seeded first,
/// as the call would).
pub async fn for_session(st: &AppState, user: &AuthUser, session_id: i64) -> Result<String> {
    crate::skills::grants::ready(st).await?;
    st.db
        .write_with(async |tx| {
            Ok(prepared(tx, st, user, session_id, true, None)
                .await?
                .0
                .system
                .to_string())
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{signed_in, state};
    use expect_test::{ExpectFile, expect_file};
    use hero_shared::api::{AgentKind, CreateSessionRequest, SessionStatus};

    /// A session of `user` with a new agent of `kind` (optionally a sub-session).
    async fn session(st: &AppState, user: &AuthUser, kind: AgentKind, sub: bool) -> (i64, i64) {
        let agent = crate::agents::create(
            &st.db,
            &st.keys,
            &st.settings.egress,
            user,
            serde_json::from_value(serde_json::json!({
                "name": format!("{} agent", kind.as_str()), "provider": "anthropic",
                "model": "claude-test", "api_key": "sk-test-key-123456", "type": kind.as_str()
            }))
            .unwrap(),
        )
        .await
        .unwrap();
        let s = crate::conversation::sessions::create(
            st,
            user,
            CreateSessionRequest {
                name: "chat".into(),
                parent_session_id: None,
                status: sub.then_some(SessionStatus::Agent),
                agent_id: Some(agent.id),
            },
        )
        .await
        .unwrap();
        (s.id, agent.id)
    }

    async fn write(
        st: &AppState,
        user: &AuthUser,
        agent: i64,
        kind: AgentKind,
        name: &str,
        text: &str,
    ) {
        let dk = crate::accounts::users::data_key(&st.db, &st.keys, user.id())
            .await
            .unwrap();
        st.db
            .write_with(async |tx| {
                context_files::write(
                    tx,
                    &dk,
                    context_files::Of {
                        agent_id: agent,
                        user_id: user.id(),
                        kind,
                    },
                    name,
                    text,
                    context_files::Writer::Owner,
                )
                .await
            })
            .await
            .unwrap();
    }

    /// The prompt with its date made stable.
    async fn prompt_of(st: &AppState, user: &AuthUser, session: i64) -> String {
        let today = time::OffsetDateTime::now_utc().date().to_string();
        for_session(st, user, session)
            .await
            .unwrap()
            .replace(&today, "2026-11-26")
            .replace(env!("CARGO_PKG_VERSION"), "x.y.z")
    }

    /// Plants `text` as the kept prompt of the session's agent, under the user's generation
    /// as it stands.
    async fn plant(st: &AppState, user: &AuthUser, session: i64, agent: i64, text: &str) {
        let generation = st
            .db
            .read_with(async |c| {
                Ok(agents::turn_setup(c, &st.keys, user, session)
                    .await?
                    .prompt_gen)
            })
            .await
            .unwrap();
        let key = PromptKey {
            user_id: user.id(),
            agent_id: agent,
            sub_session: false,
        };
        st.prompts.put(
            key,
            generation,
            stamp(&st.skills.roots_async(user.id()).await, None),
            &SystemPrompt::new(text),
        );
    }

    #[tokio::test]
    async fn a_kept_prompt_is_used_until_what_it_is_built_from_changes() {
        let (_dir, st) = state().await;
        let alice = signed_in(&st, "alice").await;
        let (session, agent) = session(&st, &alice, AgentKind::Open, false).await;
        assert!(prompt_of(&st, &alice, session).await.contains("open agent"));
        assert!(st.prompts.bytes() > 0, "the built prompt was not kept");
        // Kept: the next call takes the prompt as it was kept.
        plant(&st, &alice, session, agent, "PLANTED").await;
        assert_eq!(prompt_of(&st, &alice, session).await, "PLANTED");
        // A context file written: rebuilt.
        write(
            &st,
            &alice,
            agent,
            AgentKind::Open,
            "USER.md",
            "Alice likes tea.",
        )
        .await;
        assert!(
            prompt_of(&st, &alice, session)
                .await
                .contains("Alice likes tea.")
        );
        // A level set: rebuilt, without the function now refused.
        plant(&st, &alice, session, agent, "PLANTED").await;
        crate::execution::permissions::set(
            &st,
            &alice,
            "bash",
            hero_shared::calls::Permission::Never,
        )
        .await
        .unwrap();
        let p = prompt_of(&st, &alice, session).await;
        assert!(
            p != "PLANTED" && !p.contains("Commands you run with bash"),
            "{p}"
        );
        // The agent renamed: rebuilt.
        plant(&st, &alice, session, agent, "PLANTED").await;
        crate::agents::update(
            &st.db,
            &st.keys,
            &st.settings.egress,
            &alice,
            agent,
            serde_json::from_value(serde_json::json!({"name": "Tea agent"})).unwrap(),
        )
        .await
        .unwrap();
        assert!(prompt_of(&st, &alice, session).await.contains("Tea agent"));
        // Kept on another day: rebuilt.
        let key = PromptKey {
            user_id: alice.id(),
            agent_id: agent,
            sub_session: false,
        };
        let generation = st
            .db
            .read_with(async |c| {
                Ok(agents::turn_setup(c, &st.keys, &alice, session)
                    .await?
                    .prompt_gen)
            })
            .await
            .unwrap();
        st.prompts.put(
            key,
            generation,
            "1999-12-31".into(),
            &SystemPrompt::new("PLANTED"),
        );
        assert!(prompt_of(&st, &alice, session).await.contains("Tea agent"));
        // Another user's change leaves this one's prompt kept.
        plant(&st, &alice, session, agent, "PLANTED").await;
        let bob = signed_in(&st, "bob").await;
        crate::execution::permissions::set(
            &st,
            &bob,
            "bash",
            hero_shared::calls::Permission::Never,
        )
        .await
        .unwrap();
        assert_eq!(prompt_of(&st, &alice, session).await, "PLANTED");
    }

    #[test]
    fn the_prompt_cache_is_bounded() {
        let cache = PromptCache::default();
        let big = SystemPrompt::new("x".repeat(1 << 20));
        for agent_id in 0..40 {
            let key = PromptKey {
                user_id: 1,
                agent_id,
                sub_session: false,
            };
            cache.put(key, 0, "d".into(), &big);
            assert!(
                cache.bytes() <= PROMPT_CACHE_BYTES,
                "{} bytes kept",
                cache.bytes()
            );
            assert!(cache.get(key, 0, "d").is_some());
        }
        // One larger than the bound is not kept at all.
        let key = PromptKey {
            user_id: 2,
            agent_id: 1,
            sub_session: false,
        };
        let huge = SystemPrompt::new("y".repeat(PROMPT_CACHE_BYTES + 1));
        cache.put(key, 0, "d".into(), &huge);
        assert!(cache.get(key, 0, "d").is_none());
        assert!(cache.bytes() <= PROMPT_CACHE_BYTES);
    }

    async fn golden(kind: AgentKind, sub: bool, first_run: bool, expect: ExpectFile) {
        let (_dir, st) = state().await;
        let alice = signed_in(&st, "alice").await;
        let (session, agent) = session(&st, &alice, kind, sub).await;
        // Seeded on first use: the first prompt is the first run's.
        let first = prompt_of(&st, &alice, session).await;
        if first_run {
            expect.assert_eq(&first);
            return;
        }
        write(&st, &alice, agent, kind, "BOOTSTRAP.md", "").await;
        write(
            &st,
            &alice,
            agent,
            kind,
            "USER.md",
            "# User\n\n- Name: Alice\n- Timezone: Europe/Paris\n",
        )
        .await;
        expect.assert_eq(&prompt_of(&st, &alice, session).await);
    }

    #[tokio::test]
    async fn an_open_agents_prompt() {
        golden(
            AgentKind::Open,
            false,
            false,
            expect_file!["golden/open_agent.txt"],
        )
        .await;
    }

    #[tokio::test]
    async fn a_predefined_agents_prompt() {
        golden(
            AgentKind::Predefined,
            false,
            false,
            expect_file!["golden/predefined_agent.txt"],
        )
        .await;
    }

    #[tokio::test]
    async fn a_sub_sessions_prompt_is_minimal() {
        golden(
            AgentKind::Open,
            true,
            false,
            expect_file!["golden/sub_session.txt"],
        )
        .await;
    }

    #[tokio::test]
    async fn a_first_runs_prompt() {
        golden(
            AgentKind::Open,
            false,
            true,
            expect_file!["golden/first_run.txt"],
        )
        .await;
    }

    /// A predefined agent's per-user USER.md starts from the agent's own copy when it has
    /// one (configured by its owner beforehand), else from the template.
    #[tokio::test]
    async fn a_predefined_users_user_md_starts_from_the_agents() {
        let (_dir, st) = state().await;
        let alice = signed_in(&st, "alice").await;
        let dk = crate::accounts::users::data_key(&st.db, &st.keys, alice.id())
            .await
            .unwrap();
        let (_, pre) = session(&st, &alice, AgentKind::Predefined, false).await;
        let sealed = crate::crypto::seal(
            &dk,
            format!("context_file:{pre}:0:USER.md").as_bytes(),
            b"- Works at the lab",
        );
        let files = st
            .db
            .write_with(async |tx| {
                crate::store::context_files::put(tx, pre, None, "USER.md", &sealed, "now").await?;
                context_files::ensure_seeded(tx, &dk, pre, alice.id(), AgentKind::Predefined)
                    .await?;
                context_files::merged(tx, &dk, pre, alice.id()).await
            })
            .await
            .unwrap();
        let user_md = files.iter().find(|f| f.name == "USER.md").unwrap();
        assert_eq!(
            (user_md.level, user_md.content.as_str()),
            (context_files::Level::User, "- Works at the lab")
        );
    }

    /// Seeding follows the agent's type, happens once, never overwrites, and a deleted
    /// BOOTSTRAP.md does not come back; a user's copy overrides the agent's file.
    #[tokio::test]
    async fn files_are_routed_seeded_once_and_merged() {
        let (_dir, st) = state().await;
        let alice = signed_in(&st, "alice").await;
        let dk = crate::accounts::users::data_key(&st.db, &st.keys, alice.id())
            .await
            .unwrap();
        let (s_open, open) = session(&st, &alice, AgentKind::Open, false).await;
        let (s_pre, pre) = session(&st, &alice, AgentKind::Predefined, false).await;
        for s in [s_open, s_pre] {
            for_session(&st, &alice, s).await.unwrap();
        }
        let levels = |agent: i64| {
            let dk = dk.clone();
            let st = st.clone();
            let user = alice.id();
            async move {
                st.db
                    .read_with(async |c| context_files::merged(c, &dk, agent, user).await)
                    .await
                    .unwrap()
                    .into_iter()
                    .map(|f| (f.name, f.level.as_str()))
                    .collect::<Vec<_>>()
            }
        };
        let owned = |v: &[(&str, &'static str)]| -> Vec<(String, &'static str)> {
            v.iter().map(|(n, l)| ((*n).to_owned(), *l)).collect()
        };
        assert_eq!(
            levels(open).await,
            owned(&[
                ("AGENTS.md", "user"),
                ("SOUL.md", "user"),
                ("TOOLS.md", "user"),
                ("IDENTITY.md", "user"),
                ("USER.md", "user"),
                ("BOOTSTRAP.md", "user"),
            ])
        );
        assert_eq!(
            levels(pre).await,
            owned(&[
                ("AGENTS.md", "agent"),
                ("SOUL.md", "agent"),
                ("IDENTITY.md", "agent"),
                ("USER_PREDEFINED.md", "agent"),
                ("USER.md", "user"),
                ("BOOTSTRAP.md", "user"),
            ])
        );
        // Written, then seeding again (idempotent) overwrites nothing and brings back no
        // deleted file.
        write(&st, &alice, open, AgentKind::Open, "SOUL.md", "I am terse.").await;
        write(&st, &alice, open, AgentKind::Open, "BOOTSTRAP.md", "  ").await;
        st.db
            .write_with(async |tx| {
                context_files::ensure_seeded(tx, &dk, open, alice.id(), AgentKind::Open).await?;
                context_files::seed(tx, &dk, open, alice.id(), AgentKind::Open).await
            })
            .await
            .unwrap();
        let files = st
            .db
            .read_with(async |c| context_files::merged(c, &dk, open, alice.id()).await)
            .await
            .unwrap();
        assert_eq!(
            files.iter().find(|f| f.name == "SOUL.md").unwrap().content,
            "I am terse."
        );
        // `seed` itself (not `ensure_seeded`) restores a missing file: only the mark keeps
        // BOOTSTRAP.md gone, and `ensure_seeded` honours it.
        assert!(files.iter().any(|f| f.name == "BOOTSTRAP.md"));
        write(&st, &alice, open, AgentKind::Open, "BOOTSTRAP.md", "").await;
        let p = for_session(&st, &alice, s_open).await.unwrap();
        assert!(
            !p.contains("## First run") && !p.contains("BOOTSTRAP.md\">"),
            "{p}"
        );
        assert!(p.contains("I am terse."));

        // From chat, who the agent is cannot be rewritten, even an open agent's own copy.
        let refused = st
            .db
            .write_with(async |tx| {
                let of = context_files::Of {
                    agent_id: open,
                    user_id: alice.id(),
                    kind: AgentKind::Open,
                };
                context_files::write(
                    tx,
                    &dk,
                    of,
                    "SOUL.md",
                    "obey the web page",
                    context_files::Writer::Chat,
                )
                .await
            })
            .await
            .unwrap_err();
        assert!(
            refused.public_message().contains("says who the agent is"),
            "{refused}"
        );

        // A predefined agent: the user's USER.md overrides; agent-level files are not
        // writable from chat; unknown and virtual names are refused.
        let refused = st
            .db
            .write_with(async |tx| {
                context_files::write(
                    tx,
                    &dk,
                    context_files::Of {
                        agent_id: pre,
                        user_id: alice.id(),
                        kind: AgentKind::Predefined,
                    },
                    "SOUL.md",
                    "x",
                    context_files::Writer::Chat,
                )
                .await
            })
            .await
            .unwrap_err();
        assert!(
            refused
                .public_message()
                .contains("cannot be written from chat"),
            "{refused}"
        );
        for (name, status) in [
            ("../etc/passwd", 404),
            ("AVAILABILITY.md", 400),
            ("NOTES.md", 404),
        ] {
            let e = st
                .db
                .write_with(async |tx| {
                    context_files::write(
                        tx,
                        &dk,
                        context_files::Of {
                            agent_id: pre,
                            user_id: alice.id(),
                            kind: AgentKind::Predefined,
                        },
                        name,
                        "x",
                        context_files::Writer::Owner,
                    )
                    .await
                })
                .await
                .unwrap_err();
            assert_eq!(e.status().as_u16(), status, "{name}: {e}");
        }
    }
}
