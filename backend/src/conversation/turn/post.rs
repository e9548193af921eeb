//! The post stage: what a posted message asks for ([`read`], through the one parser of
//! commands, [`hero_shared::command`]), and what needs no reply: `/stream on|off` (the
//! session's mode, and a note saying so), a private message (stored only), `/compact` (a
//! summary now, driven like a reply), `/update_usage` (a correction and its note), a
//! command with bad arguments (its usage), and the other commands, each run as a call of its
//! function with the user's authority ([`run_command`]).

use hero_shared::frame::AuthorType;
use hero_shared::wire::{ErrorData, MessageStart, SseEvent};
use serde_json::json;

use super::MAX_MESSAGE_CHARS;
use super::out::{Out, complete};
use crate::accounts::auth::AuthUser;
use crate::agents;
use crate::conversation::frames::{self, NewFrame};
use crate::conversation::hub::HubEvent;
use crate::conversation::sessions;
use crate::drive::events::TurnFuture;
use crate::{AppState, Error, Result};

/// What a posted message asks for.
#[derive(Debug, PartialEq)]
pub(super) enum Posted {
    Message(String),
    /// Stored and shown, never sent to the agent.
    Private(String),
    Streaming(bool),
    /// `/compact`: summarise the conversation now.
    Compact,
    /// `/update_usage <cost>`: the bill for this agent's key, in dollars (`None`: not an
    /// amount).
    UpdateUsage(Option<f64>),
    /// A command run as a call of its function with the user's authority (`/session`,
    /// `/ability`, `/agent`, `/skill`, `/start`); the text is kept as a private note.
    Command {
        text: String,
        function: &'static str,
        args: serde_json::Value,
    },
    /// A command with arguments it does not take: a private note saying why, with its usage.
    Bad(String),
}

/// Reads a post: refused if empty or too long, or if it is `/agent` with anything like a
/// key (never stored); a command if it is one ([`hero_shared::command::parse`]).
pub(super) fn read(content: &str, private: bool) -> Result<Posted> {
    use hero_shared::command::{KEY_REFUSED, Parsed, looks_like_key, parse};
    if content.trim().is_empty() {
        return Err(Error::Invalid("the message is empty".into()));
    }
    if content.chars().count() > MAX_MESSAGE_CHARS {
        return Err(Error::Invalid(format!(
            "the message is too long (at most {MAX_MESSAGE_CHARS} characters)"
        )));
    }
    let parsed = parse(content);
    let command = match &parsed {
        Some(Parsed::Call { command, .. } | Parsed::Bad { command, .. }) => Some(*command),
        None => None,
    };
    // Never stored, not even as a private note.
    if command.is_some_and(|c| c.name == "agent") && looks_like_key(content) {
        return Err(Error::Invalid(KEY_REFUSED.into()));
    }
    if private {
        return Ok(Posted::Private(content.to_owned()));
    }
    let Some(parsed) = parsed else {
        return Ok(Posted::Message(content.to_owned()));
    };
    Ok(match (command.map_or("", |c| c.name), parsed) {
        ("update_usage", Parsed::Call { args, .. }) => Posted::UpdateUsage(args["cost"].as_f64()),
        ("update_usage", Parsed::Bad { .. }) => Posted::UpdateUsage(None),
        ("stream", Parsed::Call { args, .. }) => Posted::Streaming(args["on"] == true),
        ("compact", Parsed::Call { .. }) => Posted::Compact,
        (_, Parsed::Call { command, args }) => Posted::Command {
            text: content.to_owned(),
            function: command.function,
            args,
        },
        (_, Parsed::Bad { command, why }) => Posted::Bad(format!(
            "/{}: {why}. Usage: {}",
            command.name, command.usage
        )),
    })
}

/// A typed command: the text kept as the user's private note, then the call of its function
/// with the user's authority, a `request` and a `result` frame through the gate (a level of
/// `never` still refuses it), and no reply.
pub(super) async fn run_command(
    out: &Out,
    user: &AuthUser,
    message_id: &str,
    text: String,
    function: &'static str,
    args: serde_json::Value,
) -> Result<()> {
    use crate::conversation::act;
    let (st, session_id) = (&out.st, out.session_id);
    shown(out, user, message_id, AuthorType::User, private_text(text)).await?;
    let (agent_id, tools) = st
        .db
        .read_with(async |c| {
            let agent = crate::store::sessions::agent_of(c, user.id(), session_id).await?;
            Ok((
                agent,
                crate::execution::mcp::registry(st, c, user.id()).await?,
            ))
        })
        .await?;
    let sc = act::Scene {
        user_id: user.id(),
        session_id,
        dk: crate::accounts::users::data_key(&st.db, &st.keys, user.id()).await?,
        message_id: message_id.to_owned(),
        agent_id,
        tools: tools.clone(),
    };
    let mut asked = act::Asked {
        function: function.to_owned(),
        args,
        origin: hero_shared::calls::CallOrigin::Prose { offset: 0 },
        problem: None,
        bound: false,
    };
    // Checked against its function's schema, as the agent's calls are.
    act::check(&sc.tools, &mut asked);
    let asked = vec![asked];
    let acting = st.turns.acting(session_id);
    let emit = |ev: SseEvent| out.emit(ev);
    let by = act::Authority::User(user.id());
    let settled = act::open_and_settle(st, &sc, by, asked, None, &emit, Some(acting.abort())).await;
    drop(acting);
    let executed = match settled {
        Ok(s) => s.executed,
        Err(e) => {
            out.emit(SseEvent::Error(ErrorData {
                message_id: Some(message_id.to_owned()),
                error: e.public_message(),
            }));
            Vec::new()
        }
    };
    out.emit(complete(message_id, "", executed));
    Ok(())
}

/// A command with bad arguments: a private note of Hero's saying why, with its usage.
pub(super) async fn bad_command(
    out: &Out,
    user: &AuthUser,
    message_id: &str,
    note: String,
) -> Result<()> {
    let payload = json!({"role": "system", "content": note, "private": true, "notice": "warning"});
    shown(out, user, message_id, AuthorType::System, payload).await?;
    out.emit(complete(message_id, &note, Vec::new()));
    Ok(())
}

/// `/update_usage <cost>`: the bill for the session's agent's key, stored as a correction
/// that makes the Service and Global spend match it, and a private note saying so; a bad
/// one leaves a note with its usage.
pub(super) async fn update_usage(
    out: &Out,
    user: &AuthUser,
    message_id: &str,
    cost: Option<f64>,
) -> Result<()> {
    let (st, session_id) = (&out.st, out.session_id);
    const USAGE: &str = "Usage: /update_usage <cost>, the bill in dollars for this session's agent's API key (for example /update_usage 12.34).";
    let note = match cost.and_then(agents::spend::micros_of) {
        None => USAGE.to_owned(),
        Some(actual) => {
            let agent = st
                .db
                .read_with(async |c| {
                    crate::store::sessions::agent_of(c, user.id(), session_id).await
                })
                .await?;
            match agent {
                None => {
                    "This session has no agent, so there is no key to match a bill to.".to_owned()
                }
                Some(agent_id) => match agents::spend::correct(st, user, agent_id, actual).await {
                    Ok(delta) => format!(
                        "Spend matched to the bill: {} for this agent's key (a correction of {}{}).",
                        hero_shared::api::format_cost(actual),
                        if delta >= 0 { "+" } else { "" },
                        hero_shared::api::format_cost(delta)
                    ),
                    Err(Error::Invalid(why)) => format!("{why}. {USAGE}"),
                    Err(e) => return Err(e),
                },
            }
        }
    };
    let payload = json!({"role": "system", "content": note, "private": true});
    shown(out, user, message_id, AuthorType::System, payload).await?;
    out.emit(complete(message_id, &note, Vec::new()));
    Ok(())
}

/// `/stream on|off`: the switch and its note (private: for the user, not the agent) commit
/// together; the note carries the mode, so every reader of the log learns it.
pub(super) async fn switch_streaming(
    out: &Out,
    user: &AuthUser,
    message_id: &str,
    on: bool,
) -> Result<()> {
    let (st, session_id) = (&out.st, out.session_id);
    let note = if on {
        "Streaming is on for this session."
    } else {
        "Streaming is off: replies arrive whole."
    };
    let mut f = NewFrame::message(
        session_id,
        AuthorType::System,
        None,
        json!({"role": "system", "content": note, "private": true, "streaming": on}),
    );
    f.id = message_id.to_owned();
    let frame = store_now(st, user, f, Some(on)).await?;
    out.emit(SseEvent::MessageStart(MessageStart {
        message_id: message_id.to_owned(),
        session_id,
        agent_name: "Hero".into(),
    }));
    out.emit(SseEvent::Text(hero_shared::wire::TextData {
        message_id: message_id.to_owned(),
        text: note.into(),
    }));
    // The frame after the events that show it, before the reply's end.
    st.hub
        .publish(user.id(), session_id, HubEvent::Frame(frame));
    out.emit(complete(message_id, note, Vec::new()));
    Ok(())
}

/// A private message: stored and shown, no reply (the message ends where it began).
pub(super) async fn store_private(
    out: &Out,
    user: &AuthUser,
    message_id: &str,
    text: String,
) -> Result<()> {
    shown(out, user, message_id, AuthorType::User, private_text(text)).await?;
    out.emit(complete(message_id, "", Vec::new()));
    Ok(())
}

/// The user's words kept as a private message (stored and shown, never sent to the agent).
fn private_text(text: String) -> serde_json::Value {
    json!({"role": "user", "content": text, "private": true})
}

/// Stores `payload` as the message `message_id`, the user's or Hero's, and shows it to the
/// session's readers.
async fn shown(
    out: &Out,
    user: &AuthUser,
    message_id: &str,
    author: AuthorType,
    payload: serde_json::Value,
) -> Result<()> {
    let author_id = (author == AuthorType::User).then(|| user.id());
    let mut f = NewFrame::message(out.session_id, author, author_id, payload);
    f.id = message_id.to_owned();
    let frame = store_now(&out.st, user, f, None).await?;
    out.st
        .hub
        .publish(user.id(), out.session_id, HubEvent::Frame(frame));
    Ok(())
}

/// `/compact`: the summary, as a turn's future for the poster to drive. It counts as a
/// reply in flight (a provider call, the context in memory); a session of someone else's
/// is a 404 here, not a failed summary.
pub(super) async fn summarise(out: Out, user: &AuthUser, message_id: String) -> Result<TurnFuture> {
    let (st, session_id) = (out.st.clone(), out.session_id);
    sessions::get(&st.db, user, session_id).await?;
    let slot = crate::conversation::cluster::turn_slot(&st, user.id()).await?;
    let user = user.clone();
    Ok(Box::pin(async move {
        out.emit(SseEvent::MessageStart(MessageStart {
            message_id: message_id.clone(),
            session_id,
            agent_name: "Hero".into(),
        }));
        let acting = st.turns.acting(session_id);
        let done =
            crate::conversation::compact::compact(&st, &user, session_id, Some(acting.abort()));
        match done.await {
            Ok(frame) => {
                let text = frame.payload["content"].as_str().unwrap_or_default();
                out.emit(complete(&message_id, text, Vec::new()));
            }
            Err(e) => {
                out.emit(SseEvent::Error(ErrorData {
                    message_id: Some(message_id.clone()),
                    error: e.public_message(),
                }));
                out.emit(complete(&message_id, "", Vec::new()));
            }
        }
        drop(acting);
        drop(slot);
    }))
}

/// Stores a frame of the poster's own (a note, a private message), and the session's new
/// streaming mode when `streaming` is given, in one transaction; the caller hands it to the
/// session's readers.
async fn store_now(
    st: &AppState,
    user: &AuthUser,
    f: NewFrame,
    streaming: Option<bool>,
) -> Result<hero_shared::frame::Frame> {
    let session_id = f.session_id;
    let kept = st
        .db
        .write_with(async |tx| {
            let setup = agents::turn_setup(tx, &st.keys, user, session_id).await?;
            if let Some(on) = streaming {
                sessions::set_streaming(tx, user, session_id, on).await?;
            }
            let sealed = frames::seal(&setup.dk, f.clone())?;
            let seq = sealed.insert(tx).await?;
            frames::full_session(st, seq)?;
            Ok(sealed.kept(seq))
        })
        .await?;
    let frame = (*kept.frame).clone();
    st.history.append(kept);
    Ok(frame)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_post_is_read_as_a_message_or_a_command() {
        assert_eq!(
            read("hello", false).unwrap(),
            Posted::Message("hello".into())
        );
        assert_eq!(
            read("  /stream off ", false).unwrap(),
            Posted::Streaming(false)
        );
        assert_eq!(read("/stream on", false).unwrap(), Posted::Streaming(true));
        assert_eq!(read("/compact", false).unwrap(), Posted::Compact);
        // A command sent privately is a private note, not a command.
        assert_eq!(
            read("/compact", true).unwrap(),
            Posted::Private("/compact".into())
        );
        // Commands are whole messages: one inside a sentence is text.
        let text = "please /compact later";
        assert_eq!(read(text, false).unwrap(), Posted::Message(text.into()));
        assert_eq!(
            read("/update_usage 12.34", false).unwrap(),
            Posted::UpdateUsage(Some(12.34))
        );
        assert_eq!(
            read("/update_usage $7", false).unwrap(),
            Posted::UpdateUsage(Some(7.0))
        );
        for bad in ["/update_usage", "/update_usage lots", "/update_usage -3"] {
            assert_eq!(
                read(bad, false).unwrap(),
                Posted::UpdateUsage(None),
                "{bad}"
            );
        }
        let text = "/update_usages 3";
        assert_eq!(read(text, false).unwrap(), Posted::Message(text.into()));
        assert_eq!(
            read("/session new Research --agent Ada", false).unwrap(),
            Posted::Command {
                text: "/session new Research --agent Ada".into(),
                function: "command_session",
                args: json!({"action": "new", "name": "Research", "agent": "Ada"}),
            }
        );
        let Posted::Bad(note) = read("/session fly", false).unwrap() else {
            panic!("a bad command is a note");
        };
        assert!(note.contains("Usage: /session new"), "{note}");
    }

    #[test]
    fn a_command_with_a_key_is_refused_before_it_is_stored() {
        for private in [false, true] {
            let e = read("/agent configure Ada api_key=abc123", private).unwrap_err();
            assert!(e.public_message().contains("Agents page"), "{e}");
        }
    }

    #[test]
    fn an_empty_or_overlong_post_is_refused_with_a_reason() {
        for empty in ["", "   ", "\n\t"] {
            let e = read(empty, false).unwrap_err();
            assert!(e.public_message().contains("empty"), "{e}");
        }
        let long = "é".repeat(MAX_MESSAGE_CHARS + 1);
        let e = read(&long, false).unwrap_err();
        assert!(e.public_message().contains("too long"), "{e}");
        // The bound counts characters, not bytes.
        assert!(read(&"é".repeat(MAX_MESSAGE_CHARS), false).is_ok());
    }
}
