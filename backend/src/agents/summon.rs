//! Summoning (reference 002, section 7): an agent's SOUL.md, IDENTITY.md, AGENTS.md and
//! TOOLS.md written from a one-line description ("a sarcastic Rust reviewer") by one call to
//! a provider, the agent's own or another agent's of the user. The agent is `summoning`
//! meanwhile, and the user's sockets hear how far it got (`agent_status`). The reply is
//! untrusted: it is read within a size and a time bound and parsed here, file by file; a
//! timeout, a provider error or a reply without the files writes nothing (a new agent keeps
//! its templates, an agent summoned before keeps its files), and the agent is `active`
//! again either way. Summoning again ("Edit with AI") rewrites the files its reply holds.
//!
//! The files go where the agent's type routes them, written as by its owner (summoning is
//! the owner's request, not the agent's, so a predefined agent's own files may be written).

use hero_shared::api::{AgentDto, SummonRequest};

use crate::accounts::auth::AuthUser;
use crate::agents::context_files::{self, Of, Writer};
use crate::conversation::hub::HubEvent;
use crate::providers::{self, Call, ChatMessage, Role};
use crate::{AppState, Error, Result, agents, store};

/// The files a summoning writes.
pub const FILES: [&str; 4] = ["SOUL.md", "IDENTITY.md", "AGENTS.md", "TOOLS.md"];

/// The longest description taken.
pub const MAX_DESCRIPTION_CHARS: usize = 2_000;

/// The most of a reply read: past it, the reply is not used.
pub const MAX_REPLY_BYTES: usize = 64 << 10;

/// The most one file of the reply may hold (characters).
pub const MAX_FILE_CHARS: usize = 8_000;

/// The files in a summoning reply; an error says why the reply cannot be used. SOUL.md and
/// IDENTITY.md must be there; a missing AGENTS.md or TOOLS.md keeps its template.
pub fn parse(reply: &str) -> std::result::Result<Vec<(&'static str, String)>, String> {
    let mut out = Vec::new();
    for name in FILES {
        let open = format!("<file name=\"{name}\">");
        let Some(start) = reply.find(&open).map(|i| i + open.len()) else {
            continue;
        };
        let Some(len) = reply[start..].find("</file>") else {
            return Err(format!("{name} is not closed"));
        };
        let text = reply[start..start + len].trim();
        if text.is_empty() {
            continue;
        }
        if text.chars().count() > MAX_FILE_CHARS {
            return Err(format!("{name} is longer than {MAX_FILE_CHARS} characters"));
        }
        out.push((name, format!("{text}\n")));
    }
    for needed in ["SOUL.md", "IDENTITY.md"] {
        if !out.iter().any(|(n, _)| *n == needed) {
            return Err(format!("the reply has no {needed}"));
        }
    }
    Ok(out)
}

/// Starts summoning the user's agent `agent_id` from `req`: answers the agent as it now is
/// (`summoning`); the work goes on in a task of its own. A second summoning while one runs
/// is a 409.
pub async fn summon(
    st: &AppState,
    user: &AuthUser,
    agent_id: i64,
    req: SummonRequest,
) -> Result<AgentDto> {
    let description = req.description.trim().to_owned();
    if description.is_empty() {
        return Err(Error::Invalid("describe the agent in a few words".into()));
    }
    if description.chars().count() > MAX_DESCRIPTION_CHARS {
        return Err(Error::Invalid(format!(
            "the description is too long (at most {MAX_DESCRIPTION_CHARS} characters)"
        )));
    }
    // Both agents must be the user's (another's is a missing one).
    let target = agents::get(&st.db, &st.keys, user, agent_id).await?;
    let caller = agents::runtime(
        &st.db,
        &st.keys,
        user.id(),
        req.with_agent_id.unwrap_or(agent_id),
    )
    .await?;
    // Held from before the agent is marked summoning: a recovery elsewhere never takes a
    // summoning this instance is starting for one left behind.
    let owned = crate::conversation::cluster::hold_work(
        st,
        crate::conversation::cluster::summon_mark(agent_id),
    )
    .await;
    let started = st
        .db
        .write_with(async |tx| store::agents::start_summoning(tx, user.id(), agent_id).await)
        .await?;
    if !started {
        return Err(Error::Conflict(
            "this agent is being summoned already".into(),
        ));
    }
    // A summoning is a provider call like a reply: it takes one of the user's reply slots
    // until it ends. None to spare: the agent is as it was.
    let slot = match crate::conversation::cluster::turn_slot(st, user.id()).await {
        Ok(slot) => slot,
        Err(e) => {
            st.db
                .write_with(async |tx| store::agents::end_summoning(tx, agent_id).await)
                .await?;
            return Err(e);
        }
    };
    let of = Of {
        agent_id,
        user_id: user.id(),
        kind: target.kind,
    };
    status(
        st,
        user.id(),
        agent_id,
        "summoning",
        format!("asking {} ({})", caller.name, caller.endpoint.model),
    );
    // Held while it runs: if this instance dies first, another makes the agent active.
    let st2 = st.clone();
    tokio::spawn(async move {
        let _slot = slot;
        let _owned = owned;
        let st = st2;
        let (files, detail) = match write_with(&st, &caller, &description).await {
            Ok(files) => (files, "written from the description".to_owned()),
            Err(why) => {
                tracing::info!(agent = agent_id, reason = %why, "summoning wrote nothing");
                (Vec::new(), format!("its files stay as they were: {why}"))
            }
        };
        if let Err(e) = store_files(&st, of, &files).await {
            tracing::error!(error = %e, "a summoned agent's files could not be stored");
        }
        if let Err(e) = st
            .db
            .write_with(async |tx| store::agents::end_summoning(tx, agent_id).await)
            .await
        {
            tracing::error!(error = %e, "a summoned agent could not be made active");
        }
        status(&st, of.user_id, agent_id, "active", detail);
    });
    agents::get(&st.db, &st.keys, user, agent_id).await
}

fn status(st: &AppState, user_id: i64, agent_id: i64, status: &str, detail: String) {
    st.hub.publish_user(
        user_id,
        HubEvent::AgentStatus {
            agent_id,
            status: status.to_owned(),
            detail,
        },
    );
}

/// At start-up (or another instance's death): agents a previous run left summoning are
/// active again (with the files they have), but for those an instance alive summons
/// ([`crate::conversation::cluster::end_summonings`]).
pub async fn recover(st: &AppState) -> Result<u64> {
    crate::conversation::cluster::end_summonings(st).await
}

/// The one call: the reply, bounded in time and size, parsed.
async fn write_with(
    st: &AppState,
    caller: &agents::AgentRuntime,
    description: &str,
) -> std::result::Result<Vec<(&'static str, String)>, String> {
    let call = Call {
        endpoint: &caller.endpoint,
        system: crate::providers::SystemPrompt::new(crate::agents::prompt::SUMMON),
        messages: vec![std::sync::Arc::new(ChatMessage::text(
            Role::User,
            format!("Description: {description}"),
        ))],
        tools: Vec::new(),
        whole: false,
    };
    let reply = providers::collect(
        &st.http,
        &st.call_options,
        call,
        st.settings.summon_timeout,
        MAX_REPLY_BYTES,
        None,
    )
    .await?;
    parse(&reply)
}

/// Writes the files the reply holds; a file it lacks keeps what it has, or gets its
/// template when it has nothing (a new agent's files are its templates).
async fn store_files(st: &AppState, of: Of, files: &[(&'static str, String)]) -> Result<()> {
    let dk = crate::accounts::users::data_key(&st.db, &st.keys, of.user_id).await?;
    st.db
        .write_with(async |tx| {
            context_files::ensure_seeded(tx, &dk, of.agent_id, of.user_id, of.kind).await?;
            let existing = context_files::merged(tx, &dk, of.agent_id, of.user_id).await?;
            for name in FILES {
                let text = match files.iter().find(|(n, _)| *n == name) {
                    Some((_, t)) => t.as_str(),
                    None if existing.iter().any(|f| f.name == name) => continue,
                    None => context_files::template(of.kind, name).unwrap_or_default(),
                };
                context_files::write(tx, &dk, of, name, text, Writer::Owner).await?;
            }
            Ok(())
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_is_read_file_by_file_and_bad_ones_are_refused() {
        let ok = parse(&crate::providers::scripted::summoned(
            "a sarcastic Rust reviewer",
        ))
        .unwrap();
        let names: Vec<&str> = ok.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, FILES);
        assert!(ok[0].1.contains("You are a sarcastic Rust reviewer."));
        // Only SOUL and IDENTITY: the rest keep their templates.
        let two =
            parse("<file name=\"SOUL.md\">s</file><file name=\"IDENTITY.md\">i</file>").unwrap();
        assert_eq!(
            two,
            vec![
                ("SOUL.md", "s\n".to_owned()),
                ("IDENTITY.md", "i\n".to_owned())
            ]
        );
        for (bad, why) in [
            ("Sure! Here is a persona.", "the reply has no SOUL.md"),
            (
                "<file name=\"SOUL.md\">s</file>",
                "the reply has no IDENTITY.md",
            ),
            (
                "<file name=\"SOUL.md\">never closed",
                "SOUL.md is not closed",
            ),
            (
                "<file name=\"../../etc/passwd\">x</file><file name=\"SOUL.md\">s</file>",
                "the reply has no IDENTITY.md",
            ),
        ] {
            assert_eq!(parse(bad).unwrap_err(), why, "{bad}");
        }
        let huge = format!(
            "<file name=\"SOUL.md\">{}</file><file name=\"IDENTITY.md\">i</file>",
            "x".repeat(MAX_FILE_CHARS + 1)
        );
        assert!(parse(&huge).unwrap_err().contains("longer than"));
    }
}
