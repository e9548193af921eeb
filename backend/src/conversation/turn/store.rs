//! The store stage: the agent's reply appended to the log with what its call cost, in one
//! transaction (each alone if that fails: the provider charged either way).

use hero_shared::api::ProviderKind;

use crate::conversation::frames::{self, NewFrame};
use crate::conversation::history::Kept;
use crate::crypto::SecretKey;
use crate::{AppState, Result};

/// Stores the agent's frame and what the call cost, in one transaction. If that fails, each
/// is tried on its own: the provider charged for the call whether or not the reply can be
/// stored, and a reply is not lost for want of its usage row.
pub(super) async fn store_reply(
    st: &AppState,
    dk: &SecretKey,
    f: NewFrame,
    usage: Option<(&Usage<'_>, u64, u64)>,
) -> Result<Kept> {
    let sealed = frames::seal(dk, f)?;
    let both = st.db.write_with(async |tx| {
        if let Some((u, input, output)) = usage {
            record_usage(tx, u, input, output).await?;
        }
        sealed.insert(tx).await
    });
    let seq = match both.await {
        Ok(seq) => seq,
        Err(e) => {
            tracing::warn!(error = %e, "could not store a reply with its usage; storing each alone");
            if let Some((u, input_tokens, output_tokens)) = usage
                && let Err(e) = st
                    .db
                    .write_with(async |tx| record_usage(tx, u, input_tokens, output_tokens).await)
                    .await
            {
                tracing::error!(error = %e, input_tokens, output_tokens, "could not record a reply's usage");
            }
            st.db.write_with(async |tx| sealed.insert(tx).await).await?
        }
    };
    Ok(sealed.kept(seq))
}

/// Whose call a usage row records.
pub(super) struct Usage<'a> {
    pub(super) user_id: i64,
    pub(super) agent_id: i64,
    pub(super) provider: ProviderKind,
    pub(super) model: &'a str,
    pub(super) session_id: i64,
    pub(super) frame_id: &'a str,
}

async fn record_usage(
    c: &mut crate::store::Conn<'_>,
    u: &Usage<'_>,
    input: u64,
    output: u64,
) -> Result<()> {
    crate::store::usage::insert(
        c,
        &crate::store::usage::UsageRow {
            user_id: u.user_id,
            agent_id: u.agent_id,
            session_id: u.session_id,
            frame_id: u.frame_id,
            provider: u.provider.as_str(),
            model: u.model,
            input_tokens: input as i64,
            output_tokens: output as i64,
            created_at: &crate::now_text(),
        },
    )
    .await
}
