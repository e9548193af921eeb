//! Startup processes in the log (reference 000 "Startup Abilities", 003): the processes
//! named underscores then `onstart_` ([`crate::agents::abilities::startup`]), each rendered
//! and appended as a system `message` frame hidden from birth (`"startup": name`). Hidden,
//! they are not shown unless "Show hidden messages" is on; they reach the agent all the same.
//!
//! "Session start" is the session's first message (000: "Loaded on first message"): the
//! transaction storing it appends them first ([`begin`]). `/start` appends them again, and a
//! summary is followed by them ([`append`]), so a summarised session keeps them.

use hero_shared::frame::AuthorType;
use serde_json::json;

use crate::conversation::frames::{self, NewFrame};
use crate::conversation::history::Kept;
use crate::crypto::SecretKey;
use crate::store::{self, Write};
use crate::{AppState, Result};

/// The startup frames if the session has not begun (and marks it begun); none otherwise.
/// Called in the transaction that stores its first message, before that message.
pub(crate) async fn begin(
    tx: &mut Write<'_>,
    st: &AppState,
    dk: &SecretKey,
    user_id: i64,
    session_id: i64,
) -> Result<Vec<Kept>> {
    if !store::sessions::begin(tx, user_id, session_id).await? {
        return Ok(Vec::new());
    }
    append(tx, st, dk, user_id, session_id).await
}

/// Appends the startup frames, in order, in the caller's transaction.
pub(crate) async fn append(
    tx: &mut Write<'_>,
    st: &AppState,
    dk: &SecretKey,
    user_id: i64,
    session_id: i64,
) -> Result<Vec<Kept>> {
    let processes = crate::agents::abilities::startup(tx, dk, user_id, session_id).await?;
    let mut kept = Vec::with_capacity(processes.len());
    for (name, content) in processes {
        let sealed = frames::seal(dk, frame(session_id, &name, content))?;
        let seq = sealed.insert(tx).await?;
        frames::full_session(st, seq)?;
        kept.push(sealed.kept(seq));
    }
    Ok(kept)
}

/// `/start`: the startup frames appended again, in a transaction of their own (the session
/// begun, if it was not), and the session's readers told; their names, in order.
pub(crate) async fn again(
    st: &AppState,
    user: &crate::accounts::auth::AuthUser,
    session_id: i64,
) -> Result<Vec<String>> {
    let dk = crate::accounts::users::data_key(&st.db, &st.keys, user.id()).await?;
    let kept = st
        .db
        .write_with(async |tx| {
            crate::conversation::sessions::fetch(tx, user.id(), session_id).await?;
            // Sent now, they are not sent again before the first message.
            store::sessions::begin(tx, user.id(), session_id).await?;
            append(tx, st, &dk, user.id(), session_id).await
        })
        .await?;
    let mut names = Vec::with_capacity(kept.len());
    for k in kept {
        names.push(
            k.frame.payload["startup"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        );
        st.hub.publish(
            user.id(),
            session_id,
            crate::conversation::hub::HubEvent::Frame((*k.frame).clone()),
        );
        st.history.append(k);
    }
    Ok(names)
}

/// A startup process's frame: Hero's, hidden, naming the process.
fn frame(session_id: i64, name: &str, content: String) -> NewFrame {
    NewFrame::message(
        session_id,
        AuthorType::System,
        None,
        json!({"role": "system", "content": content, "hidden": true, "startup": name}),
    )
}
