//! The `usage` table: the tokens each provider call cost, per user, agent and session.

use crate::Result;

/// One call's usage.
pub struct UsageRow<'a> {
    pub user_id: i64,
    pub agent_id: i64,
    pub session_id: i64,
    pub frame_id: &'a str,
    pub provider: &'a str,
    pub model: &'a str,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub created_at: &'a str,
}

/// Records a call's usage on a held connection (with the reply's frame, when it can).
pub async fn insert(c: &mut super::Conn<'_>, u: &UsageRow<'_>) -> Result<()> {
    let sql = "INSERT INTO usage (user_id, agent_id, session_id, frame_id, provider, model, \
         input_tokens, output_tokens, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)";
    execute!(
        c,
        sql,
        u.user_id,
        u.agent_id,
        u.session_id,
        u.frame_id,
        u.provider,
        u.model,
        u.input_tokens,
        u.output_tokens,
        u.created_at
    )?;
    Ok(())
}
