//! `/api/spend` (reference 003's three spend lines), `/api/spend/corrections` (the bill for a
//! key, `/update_usage`), `/api/spend/settings` (the token scalar) and `/api/prices` (Hero's
//! table and the server's `[prices]`).

use axum::Json;
use axum::extract::State;
use hero_backend::AppState;
use hero_backend::agents::spend;
use hero_shared::api::SpendDto;
use serde::Deserialize;
use serde_json::{Value, json};

use super::Created;
use super::{ApiJson, ApiQuery, ApiResult, Authed, Status};

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SpendQuery {
    session_id: Option<i64>,
}

/// `GET /api/spend?session_id=`.
pub async fn lines(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiQuery(q): ApiQuery<SpendQuery>,
) -> ApiResult<Json<SpendDto>> {
    Ok(Json(spend::lines(&st, &user, q.session_id).await?))
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CorrectionRequest {
    agent_id: i64,
    actual_usd: f64,
}

/// `POST /api/spend/corrections` `{agent_id, actual_usd}`: 201 with the correction.
pub async fn correct(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiJson(req): ApiJson<CorrectionRequest>,
) -> ApiResult<Created<Value>> {
    let actual = spend::micros_of(req.actual_usd).ok_or_else(|| {
        hero_backend::Error::Invalid(
            "actual_usd must be the bill's amount in dollars, 0 or more".into(),
        )
    })?;
    let delta = spend::correct(&st, &user, req.agent_id, actual).await?;
    Ok(Status(
        json!({"agent_id": req.agent_id, "actual_micros": actual, "delta_micros": delta}),
    ))
}

/// `GET /api/spend/corrections`: the user's, newest first.
pub async fn corrections(
    State(st): State<AppState>,
    Authed(user): Authed,
) -> ApiResult<Json<Value>> {
    let list = st
        .db
        .read_with(async |c| hero_backend::store::usage::corrections(c, user.id()).await)
        .await?;
    Ok(Json(json!(list)))
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SpendSettings {
    token_scalar: f64,
}

/// `GET /api/spend/settings`.
pub async fn settings(State(st): State<AppState>, Authed(user): Authed) -> ApiResult<Json<Value>> {
    Ok(Json(
        json!({"token_scalar": spend::scalar(&st, &user).await?}),
    ))
}

/// `PUT /api/spend/settings` `{token_scalar}` (0.01 to 100; later calls only).
pub async fn set_settings(
    State(st): State<AppState>,
    Authed(user): Authed,
    ApiJson(req): ApiJson<SpendSettings>,
) -> ApiResult<Json<Value>> {
    let scalar = spend::set_scalar(&st, &user, req.token_scalar).await?;
    Ok(Json(json!({"token_scalar": scalar})))
}

/// `GET /api/prices`: Hero's dated table, then the server's own.
pub async fn prices(State(st): State<AppState>, Authed(_): Authed) -> ApiResult<Json<Value>> {
    let table: Vec<Value> = spend::PRICES
        .iter()
        .map(
            |(provider, prefix, input, output, cache_read, cache_write)| {
                json!({"provider": provider.as_str(), "model_prefix": prefix, "input": input,
                "output": output, "cache_read": cache_read, "cache_write": cache_write})
            },
        )
        .collect();
    let configured: Vec<Value> = st
        .settings
        .prices
        .iter()
        .map(|r| json!({"provider": r.provider.as_str(), "model_prefix": r.prefix, "input": r.price.input,
            "output": r.price.output, "cache_read": r.price.cache_read, "cache_write": r.price.cache_write}))
        .collect();
    Ok(Json(
        json!({"date": spend::PRICES_DATE, "table": table, "configured": configured}),
    ))
}
