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
    pub cache_read_tokens: i64,
    pub cache_write_tokens: i64,
    pub cost_micros: i64,
    /// `table`, `config`, `agent`, `free` or `unpriced`.
    pub price_source: &'a str,
    pub scalar_ppm: i64,
    /// The API key's fingerprint (none: no key).
    pub key_fp: Option<&'a str>,
    pub created_at: &'a str,
}

/// Records a call's usage on a held connection (with the reply's frame, when it can), and
/// adds it to the user's running totals (global, the key's, the session's) in the same
/// transaction.
pub async fn insert(c: &mut super::Conn<'_>, u: &UsageRow<'_>) -> Result<()> {
    let sql = "INSERT INTO usage (user_id, agent_id, session_id, frame_id, provider, model, \
         input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_micros, \
         price_source, scalar_ppm, key_fp, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)";
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
        u.cache_read_tokens,
        u.cache_write_tokens,
        u.cost_micros,
        u.price_source,
        u.scalar_ppm,
        u.key_fp,
        u.created_at
    )?;
    let unpriced = i64::from(u.price_source == "unpriced");
    let session = format!("session:{}", u.session_id);
    let key = u.key_fp.map(|k| format!("key:{k}"));
    for scope in ["global", session.as_str()]
        .into_iter()
        .chain(key.as_deref())
    {
        let add = Totals {
            cost_micros: u.cost_micros,
            calls: 1,
            unpriced_calls: unpriced,
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            cache_read_tokens: u.cache_read_tokens,
            cache_write_tokens: u.cache_write_tokens,
        };
        add_to(c, u.user_id, scope, &add).await?;
    }
    Ok(())
}

/// A spend scope's running totals (the `spend_totals` table).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Totals {
    pub cost_micros: i64,
    pub calls: i64,
    pub unpriced_calls: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cache_read_tokens: i64,
    pub cache_write_tokens: i64,
}

/// Adds `t` to the user's totals of `scope` (made on first use).
pub async fn add_to(c: &mut super::Conn<'_>, user_id: i64, scope: &str, t: &Totals) -> Result<()> {
    let sql = "INSERT INTO spend_totals (user_id, scope, cost_micros, calls, unpriced_calls, \
         input_tokens, output_tokens, cache_read_tokens, cache_write_tokens) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
         ON CONFLICT (user_id, scope) DO UPDATE SET \
         cost_micros = spend_totals.cost_micros + excluded.cost_micros, \
         calls = spend_totals.calls + excluded.calls, \
         unpriced_calls = spend_totals.unpriced_calls + excluded.unpriced_calls, \
         input_tokens = spend_totals.input_tokens + excluded.input_tokens, \
         output_tokens = spend_totals.output_tokens + excluded.output_tokens, \
         cache_read_tokens = spend_totals.cache_read_tokens + excluded.cache_read_tokens, \
         cache_write_tokens = spend_totals.cache_write_tokens + excluded.cache_write_tokens";
    execute!(
        c,
        sql,
        user_id,
        scope,
        t.cost_micros,
        t.calls,
        t.unpriced_calls,
        t.input_tokens,
        t.output_tokens,
        t.cache_read_tokens,
        t.cache_write_tokens
    )?;
    Ok(())
}

/// The user's totals of each of `scopes` (a scope with nothing yet: zero).
pub async fn totals(c: &mut super::Conn<'_>, user_id: i64, scopes: &[&str]) -> Result<Vec<Totals>> {
    let mut out = Vec::with_capacity(scopes.len());
    for scope in scopes {
        let sql = "SELECT cost_micros, calls, unpriced_calls, input_tokens, output_tokens, \
             cache_read_tokens, cache_write_tokens FROM spend_totals WHERE user_id = $1 AND scope = $2";
        let t = row!(c, read_totals, sql, user_id, *scope)?;
        out.push(t.unwrap_or_default());
    }
    Ok(out)
}

fn read_totals(r: &impl super::Columns) -> Result<Totals> {
    Ok(Totals {
        cost_micros: r.get(0)?,
        calls: r.get(1)?,
        unpriced_calls: r.get(2)?,
        input_tokens: r.get(3)?,
        output_tokens: r.get(4)?,
        cache_read_tokens: r.get(5)?,
        cache_write_tokens: r.get(6)?,
    })
}

/// A correction of the spend to the bill (`/update_usage`), and its effect on the totals of
/// the key and of everything, in one transaction.
pub async fn correct(
    c: &mut super::Write<'_>,
    user_id: i64,
    agent_id: i64,
    key_fp: &str,
    actual_micros: i64,
    delta_micros: i64,
    now: &str,
) -> Result<()> {
    let sql = "INSERT INTO spend_corrections (user_id, agent_id, key_fp, actual_micros, delta_micros, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6)";
    execute!(
        c,
        sql,
        user_id,
        agent_id,
        key_fp,
        actual_micros,
        delta_micros,
        now
    )?;
    let add = Totals {
        cost_micros: delta_micros,
        ..Totals::default()
    };
    for scope in ["global".to_owned(), format!("key:{key_fp}")] {
        add_to(c, user_id, &scope, &add).await?;
    }
    Ok(())
}

/// A correction as listed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Correction {
    pub id: i64,
    pub agent_id: Option<i64>,
    pub actual_micros: i64,
    pub delta_micros: i64,
    pub created_at: String,
}

/// The user's corrections, newest first (at most 100).
pub async fn corrections(c: &mut super::Conn<'_>, user_id: i64) -> Result<Vec<Correction>> {
    let sql = "SELECT id, agent_id, actual_micros, delta_micros, created_at FROM spend_corrections \
         WHERE user_id = $1 ORDER BY id DESC LIMIT 100";
    rows!(c, read_correction, sql, user_id)
}

fn read_correction(r: &impl super::Columns) -> Result<Correction> {
    Ok(Correction {
        id: r.get(0)?,
        agent_id: r.get(1)?,
        actual_micros: r.get(2)?,
        delta_micros: r.get(3)?,
        created_at: r.get(4)?,
    })
}

/// The user's token scalar, parts per million.
pub async fn scalar_ppm(c: &mut super::Conn<'_>, user_id: i64) -> Result<i64> {
    let sql = "SELECT token_scalar_ppm FROM users WHERE id = $1";
    Ok(scalar!(c, i64, sql, user_id)?.unwrap_or(1_000_000))
}

pub async fn set_scalar_ppm(c: &mut super::Write<'_>, user_id: i64, ppm: i64) -> Result<()> {
    execute!(
        c,
        "UPDATE users SET token_scalar_ppm = $1 WHERE id = $2",
        ppm,
        user_id
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A call: (session, key, input, output, cache read, priced).
    type Call = (u8, u8, u16, u16, u16, bool);

    /// Any run of calls and corrections: each scope's running totals are what its rows add
    /// up to (corrections in the key's and the global cost), on either backend.
    fn totals_are_the_sum_of_rows(calls: Vec<Call>, fixes: Vec<(u8, u32)>) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let (_dir, st) = crate::test_support::state().await;
            let user = crate::test_support::signed_in(&st, "alice").await;
            let sessions = [
                crate::test_support::session(&st, &user, "a").await.id,
                crate::test_support::session(&st, &user, "b").await.id,
            ];
            let keys = ["k1", "k2"];
            for (session, key, input, output, cache, priced) in &calls {
                let row = UsageRow {
                    user_id: user.id(),
                    agent_id: 1,
                    session_id: sessions[usize::from(*session % 2)],
                    frame_id: "f",
                    provider: "anthropic",
                    model: "m",
                    input_tokens: i64::from(*input),
                    output_tokens: i64::from(*output),
                    cache_read_tokens: i64::from(*cache),
                    cache_write_tokens: 0,
                    cost_micros: if *priced { i64::from(*input) * 3 } else { 0 },
                    price_source: if *priced { "table" } else { "unpriced" },
                    scalar_ppm: 1_000_000,
                    key_fp: (*key % 3 != 2).then_some(keys[usize::from(*key % 2)]),
                    created_at: "now",
                };
                st.db
                    .write_with(async |tx| insert(tx, &row).await)
                    .await
                    .unwrap();
            }
            for (key, actual) in &fixes {
                let key = keys[usize::from(*key % 2)];
                st.db
                    .write_with(async |tx| {
                        correct(
                            tx,
                            user.id(),
                            1,
                            key,
                            i64::from(*actual),
                            i64::from(*actual) - 7,
                            "now",
                        )
                        .await
                    })
                    .await
                    .unwrap();
            }
            let sum = |filter: &dyn Fn(&Call) -> bool, fix: &dyn Fn(&(u8, u32)) -> bool| {
                let rows: Vec<_> = calls.iter().filter(|c| filter(c)).collect();
                Totals {
                    cost_micros: rows
                        .iter()
                        .map(|c| if c.5 { i64::from(c.2) * 3 } else { 0 })
                        .sum::<i64>()
                        + fixes
                            .iter()
                            .filter(|f| fix(f))
                            .map(|f| i64::from(f.1) - 7)
                            .sum::<i64>(),
                    calls: rows.len() as i64,
                    unpriced_calls: rows.iter().filter(|c| !c.5).count() as i64,
                    input_tokens: rows.iter().map(|c| i64::from(c.2)).sum(),
                    output_tokens: rows.iter().map(|c| i64::from(c.3)).sum(),
                    cache_read_tokens: rows.iter().map(|c| i64::from(c.4)).sum(),
                    cache_write_tokens: 0,
                }
            };
            let scopes = [
                "global".to_owned(),
                format!("session:{}", sessions[0]),
                format!("session:{}", sessions[1]),
                "key:k1".to_owned(),
                "key:k2".to_owned(),
            ];
            let names: Vec<&str> = scopes.iter().map(String::as_str).collect();
            let got = st
                .db
                .read_with(async |c| totals(c, user.id(), &names).await)
                .await
                .unwrap();
            let want = [
                sum(&|_| true, &|_| true),
                sum(&|c| c.0 % 2 == 0, &|_| false),
                sum(&|c| c.0 % 2 == 1, &|_| false),
                sum(&|c| c.1 % 3 != 2 && c.1 % 2 == 0, &|f| f.0 % 2 == 0),
                sum(&|c| c.1 % 3 != 2 && c.1 % 2 == 1, &|f| f.0 % 2 == 1),
            ];
            assert_eq!(got, want);
        });
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(12))]

        #[test]
        fn running_totals_are_the_sum_of_the_rows(
            calls in prop::collection::vec(any::<Call>(), 0..12),
            fixes in prop::collection::vec((any::<u8>(), 0u32..1_000_000), 0..3),
        ) {
            totals_are_the_sum_of_rows(calls, fixes);
        }
    }
}
