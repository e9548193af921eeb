//! The store stage: the agent's reply appended to the log with what its call cost, in one
//! transaction (each alone if that fails: the provider charged either way).

use hero_shared::api::ProviderKind;

use crate::agents::spend::{self, Counts};
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
    usage: Option<(&Usage<'_>, Counts)>,
) -> Result<Kept> {
    let sealed = frames::seal(dk, f)?;
    let both = st.db.write_with(async |tx| {
        if let Some((u, counts)) = usage {
            record_usage(tx, st, u, counts).await?;
        }
        sealed.insert(tx).await
    });
    let seq = match both.await {
        Ok(seq) => seq,
        Err(e) => {
            tracing::warn!(error = %e, "could not store a reply with its usage; storing each alone");
            if let Some((u, counts)) = usage
                && let Err(e) = st
                    .db
                    .write_with(async |tx| record_usage(tx, st, u, counts).await)
                    .await
            {
                let (input_tokens, output_tokens) = (counts.input, counts.output);
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
    /// The agent's own price.
    pub(super) price: Option<hero_shared::api::Price>,
    /// The fingerprint of the API key the call was made with.
    pub(super) key_fp: Option<String>,
}

/// The call's usage row, priced ([`crate::agents::spend`]) at the user's scalar read in the
/// same transaction, and its totals.
async fn record_usage(
    c: &mut crate::store::Conn<'_>,
    st: &AppState,
    u: &Usage<'_>,
    counts: Counts,
) -> Result<()> {
    let (price, source) = spend::price_for(&st.settings.prices, u.price, u.provider, u.model);
    let scalar_ppm = crate::store::usage::scalar_ppm(c, u.user_id).await?;
    let cost = price.map_or(0, |p| spend::cost_micros(counts, &p, scalar_ppm));
    crate::store::usage::insert(
        c,
        &crate::store::usage::UsageRow {
            user_id: u.user_id,
            agent_id: u.agent_id,
            session_id: u.session_id,
            frame_id: u.frame_id,
            provider: u.provider.as_str(),
            model: u.model,
            input_tokens: counts.input as i64,
            output_tokens: counts.output as i64,
            cache_read_tokens: counts.cache_read as i64,
            cache_write_tokens: counts.cache_write as i64,
            cost_micros: cost,
            price_source: source,
            scalar_ppm,
            key_fp: u.key_fp.as_deref(),
            created_at: &crate::now_text(),
        },
    )
    .await
}
