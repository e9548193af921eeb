//! What agents' calls cost (reference 003's spend): each call's tokens priced when its usage
//! is recorded, the three spend lines (Global, Service: the user's agents on one API key,
//! Session), corrections to the bill (`/update_usage`) and the user's token scalar.
//!
//! A price is USD per million tokens of each kind. Where it comes from, later over earlier:
//! Hero's dated table ([`PRICES`], by provider and the longest model prefix), the server's
//! `[prices]` ([`crate::Settings::prices`]), the agent's own. The offline demo costs nothing;
//! a call with no price costs 0 and is counted as unpriced. Cost = Σ tokens × price × the
//! scalar, in micro-dollars, rounded once per call. Totals are kept per scope in the
//! transaction of each row (`store::usage`), so the lines read three rows.

use hero_shared::api::{Price, ProviderKind, SpendDto, SpendTotals};

use crate::accounts::auth::AuthUser;
use crate::{AppState, Error, Result, store};

/// When [`PRICES`] were taken from the providers' pages.
pub const PRICES_DATE: &str = "2026-11-01";

/// Hero's prices, USD per million tokens: (provider, model prefix, input, output, cache read,
/// cache write). The longest prefix of a model's name wins.
pub const PRICES: &[(ProviderKind, &str, f64, f64, f64, f64)] = &[
    (
        ProviderKind::Anthropic,
        "claude-opus-4",
        15.0,
        75.0,
        1.5,
        18.75,
    ),
    (
        ProviderKind::Anthropic,
        "claude-sonnet-4",
        3.0,
        15.0,
        0.30,
        3.75,
    ),
    (
        ProviderKind::Anthropic,
        "claude-3-7-sonnet",
        3.0,
        15.0,
        0.30,
        3.75,
    ),
    (
        ProviderKind::Anthropic,
        "claude-3-5-sonnet",
        3.0,
        15.0,
        0.30,
        3.75,
    ),
    (
        ProviderKind::Anthropic,
        "claude-haiku-4",
        1.0,
        5.0,
        0.10,
        1.25,
    ),
    (
        ProviderKind::Anthropic,
        "claude-3-5-haiku",
        0.80,
        4.0,
        0.08,
        1.0,
    ),
    (ProviderKind::OpenAi, "gpt-4o-mini", 0.15, 0.60, 0.075, 0.0),
    (ProviderKind::OpenAi, "gpt-4o", 2.50, 10.0, 1.25, 0.0),
    (ProviderKind::OpenAi, "gpt-4.1-nano", 0.10, 0.40, 0.025, 0.0),
    (ProviderKind::OpenAi, "gpt-4.1-mini", 0.40, 1.60, 0.10, 0.0),
    (ProviderKind::OpenAi, "gpt-4.1", 2.0, 8.0, 0.50, 0.0),
    (ProviderKind::OpenAi, "gpt-5-mini", 0.25, 2.0, 0.025, 0.0),
    (ProviderKind::OpenAi, "gpt-5", 1.25, 10.0, 0.125, 0.0),
    (ProviderKind::OpenAi, "o4-mini", 1.10, 4.40, 0.275, 0.0),
    (ProviderKind::OpenAi, "o3", 2.0, 8.0, 0.50, 0.0),
];

/// A price of the server's `[prices]`: for `provider`'s models starting with `prefix`.
#[derive(Debug, Clone, PartialEq)]
pub struct PriceRule {
    pub provider: ProviderKind,
    pub prefix: String,
    pub price: Price,
}

/// The bounds of the token scalar (parts per million: 0.01 to 100).
pub const SCALAR_MIN_PPM: i64 = 10_000;
pub const SCALAR_MAX_PPM: i64 = 100_000_000;

/// A call's tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
}

/// Refuses a price no bill could hold: negative or not a finite number.
pub fn check_price(p: &Price) -> Result<()> {
    for (name, v) in [
        ("input", p.input),
        ("output", p.output),
        ("cache_read", p.cache_read),
        ("cache_write", p.cache_write),
    ] {
        if !v.is_finite() || v < 0.0 {
            return Err(Error::Invalid(format!(
                "the price's `{name}` must be a number of dollars per million tokens, 0 or more"
            )));
        }
    }
    Ok(())
}

/// The price of a call of `provider`'s `model` and where it came from (`agent`, `config`,
/// `table`, `free` for the offline demo; `None` with `unpriced`).
pub fn price_for(
    rules: &[PriceRule],
    own: Option<Price>,
    provider: ProviderKind,
    model: &str,
) -> (Option<Price>, &'static str) {
    if provider == ProviderKind::Scripted {
        let free = Price {
            input: 0.0,
            output: 0.0,
            cache_read: 0.0,
            cache_write: 0.0,
        };
        return (Some(free), "free");
    }
    if let Some(p) = own {
        return (Some(p), "agent");
    }
    let configured = rules
        .iter()
        .filter(|r| r.provider == provider && model.starts_with(&r.prefix))
        .max_by_key(|r| r.prefix.len());
    if let Some(r) = configured {
        return (Some(r.price), "config");
    }
    let table = PRICES
        .iter()
        .filter(|(p, prefix, ..)| *p == provider && model.starts_with(prefix))
        .max_by_key(|(_, prefix, ..)| prefix.len());
    match table {
        Some(&(_, _, input, output, cache_read, cache_write)) => (
            Some(Price {
                input,
                output,
                cache_read,
                cache_write,
            }),
            "table",
        ),
        None => (None, "unpriced"),
    }
}

/// What `counts` cost at `price` and the scalar (ppm), in micro-dollars, rounded once.
pub fn cost_micros(counts: Counts, price: &Price, scalar_ppm: i64) -> i64 {
    let usd_micros = counts.input as f64 * price.input
        + counts.output as f64 * price.output
        + counts.cache_read as f64 * price.cache_read
        + counts.cache_write as f64 * price.cache_write;
    (usd_micros * scalar_ppm as f64 / 1e6).round() as i64
}

/// The spend lines of the user: everything, the session's agent's key (if a session is
/// given and its agent has a key), the session.
pub async fn lines(st: &AppState, user: &AuthUser, session_id: Option<i64>) -> Result<SpendDto> {
    let key = match session_id {
        Some(id) => session_key_fp(st, user, id).await?,
        None => None,
    };
    let session = session_id.map(|id| format!("session:{id}"));
    let key_scope = key.map(|k| format!("key:{k}"));
    let mut scopes = vec!["global"];
    scopes.extend(key_scope.as_deref());
    scopes.extend(session.as_deref());
    let totals = st
        .db
        .read_with(async |c| store::usage::totals(c, user.id(), &scopes).await)
        .await?;
    let mut it = totals.into_iter().map(dto);
    Ok(SpendDto {
        global: it.next().unwrap_or_default(),
        service: key_scope.as_ref().and_then(|_| it.next()),
        session: session.as_ref().and_then(|_| it.next()),
    })
}

fn dto(t: store::usage::Totals) -> SpendTotals {
    SpendTotals {
        cost_micros: t.cost_micros,
        calls: t.calls,
        unpriced_calls: t.unpriced_calls,
        input_tokens: t.input_tokens,
        output_tokens: t.output_tokens,
        cache_read_tokens: t.cache_read_tokens,
        cache_write_tokens: t.cache_write_tokens,
    }
}

/// The fingerprint of the API key of the session's agent, if it has one; another user's
/// session is a missing one.
async fn session_key_fp(st: &AppState, user: &AuthUser, session_id: i64) -> Result<Option<String>> {
    let session = st
        .db
        .read_with(async |c| store::sessions::get(c, user.id(), session_id).await)
        .await?
        .ok_or(Error::NotFound("session"))?;
    match session.agent_id {
        Some(id) => agent_key_fp(st, user, id).await,
        None => Ok(None),
    }
}

/// The fingerprint of agent `agent_id`'s API key, if it has one.
pub async fn agent_key_fp(st: &AppState, user: &AuthUser, agent_id: i64) -> Result<Option<String>> {
    let agent = crate::agents::runtime(&st.db, &st.keys, user.id(), agent_id).await?;
    Ok(agent
        .endpoint
        .api_key
        .as_deref()
        .map(|k| st.keys.key_fingerprint(k)))
}

/// Records what the bill for agent `agent_id`'s key says (`actual_micros`): a correction
/// of the difference from the Service total, after which Service and Global match it.
/// Answers the correction (micro-dollars).
pub async fn correct(
    st: &AppState,
    user: &AuthUser,
    agent_id: i64,
    actual_micros: i64,
) -> Result<i64> {
    if actual_micros < 0 {
        return Err(Error::Invalid(
            "the bill's amount cannot be negative".into(),
        ));
    }
    let key = agent_key_fp(st, user, agent_id).await?.ok_or_else(|| {
        Error::Invalid("this agent has no API key: there is no bill to match".into())
    })?;
    let scope = format!("key:{key}");
    let now = crate::now_text();
    st.db
        .write_with(async |tx| {
            let service = store::usage::totals(tx, user.id(), &[scope.as_str()]).await?;
            let delta = actual_micros - service[0].cost_micros;
            store::usage::correct(tx, user.id(), agent_id, &key, actual_micros, delta, &now)
                .await?;
            Ok(delta)
        })
        .await
}

/// Dollars, as typed or sent, in micro-dollars; `None` for what is no amount.
pub fn micros_of(usd: f64) -> Option<i64> {
    (usd.is_finite() && (0.0..1e9).contains(&usd)).then(|| (usd * 1e6).round() as i64)
}

/// The user's token scalar.
pub async fn scalar(st: &AppState, user: &AuthUser) -> Result<f64> {
    let ppm = st
        .db
        .read_with(async |c| store::usage::scalar_ppm(c, user.id()).await)
        .await?;
    Ok(ppm as f64 / 1e6)
}

/// Sets the user's token scalar (0.01 to 100), for the calls after.
pub async fn set_scalar(st: &AppState, user: &AuthUser, scalar: f64) -> Result<f64> {
    let ppm = (scalar * 1e6).round();
    if !scalar.is_finite() || !(SCALAR_MIN_PPM as f64..=SCALAR_MAX_PPM as f64).contains(&ppm) {
        return Err(Error::Invalid(
            "the token scalar must be a number from 0.01 to 100".into(),
        ));
    }
    st.db
        .write_with(async |tx| store::usage::set_scalar_ppm(tx, user.id(), ppm as i64).await)
        .await?;
    Ok(ppm / 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 1,000 input, 500 output and 2,000 cache-read tokens at 3 / 15 / 0.30 (and 3.75 to
    /// write): 11,100 µ$ exactly; the scalar multiplies; the longest prefix wins; the demo is
    /// free; an unknown model is unpriced; the agent's and the server's prices come first.
    #[test]
    fn calls_are_priced() {
        let counts = Counts {
            input: 1000,
            output: 500,
            cache_read: 2000,
            cache_write: 0,
        };
        let (p, source) = price_for(&[], None, ProviderKind::Anthropic, "claude-sonnet-4-5");
        assert_eq!(source, "table");
        assert_eq!(cost_micros(counts, &p.unwrap(), 1_000_000), 11_100);
        assert_eq!(cost_micros(counts, &p.unwrap(), 2_000_000), 22_200);
        let (p, _) = price_for(&[], None, ProviderKind::OpenAi, "gpt-4o-mini-2024");
        assert_eq!(p.unwrap().input, 0.15);
        assert_eq!(
            price_for(&[], None, ProviderKind::OpenAi, "llama3").1,
            "unpriced"
        );
        assert_eq!(
            price_for(&[], None, ProviderKind::Scripted, "demo").1,
            "free"
        );
        let own = Price {
            input: 1.0,
            output: 2.0,
            cache_read: 0.0,
            cache_write: 0.0,
        };
        let rule = PriceRule {
            provider: ProviderKind::OpenAiCompatible,
            prefix: "llama".into(),
            price: own,
        };
        let rules = [rule];
        let config = price_for(&rules, None, ProviderKind::OpenAiCompatible, "llama3");
        assert_eq!(config, (Some(own), "config"));
        assert_eq!(
            price_for(
                &rules,
                Some(own),
                ProviderKind::Anthropic,
                "claude-sonnet-4"
            )
            .1,
            "agent"
        );
        let bad = Price { input: -1.0, ..own };
        assert!(check_price(&bad).is_err());
        assert!(
            check_price(&Price {
                output: f64::NAN,
                ..own
            })
            .is_err()
        );
        assert_eq!(micros_of(12.34), Some(12_340_000));
        assert_eq!(micros_of(-1.0), None);
    }
}
