//! What an operator's tools ask of a running Hero: `GET /healthz` (the process answers),
//! `GET /readyz` (the database answers and holds every migration), both on the public
//! address and the metrics one; `GET /metrics` (Prometheus text, [`hero_backend::metrics`])
//! on the metrics address alone (`metrics_addr`), never the public one. And the count of
//! every answered request by route ([`count_requests`]).

use axum::Router;
use axum::extract::{FromRef, MatchedPath, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hero_backend::AppState;

/// The paths of the health checks ([`health`]): answered whatever `Host` a load balancer
/// names.
pub const HEALTH_PATHS: [&str; 2] = ["/healthz", "/readyz"];

/// How long `/readyz` waits for the database before saying it does not answer.
const READY_WITHIN: std::time::Duration = std::time::Duration::from_secs(2);

/// The process is up and serving.
pub async fn healthz() -> &'static str {
    "ok\n"
}

/// 200 when the database answers and holds every migration; else 503 saying which. A
/// server shutting down is not ready either: a load balancer takes it out of rotation
/// while its replies drain.
pub async fn readyz(State(st): State<AppState>) -> Response {
    let ready = if st.hub.is_closing() {
        Err("the server is shutting down".to_owned())
    } else {
        hero_backend::store::ready(&st.db, READY_WITHIN).await
    };
    match ready {
        Ok(()) => "ready\n".into_response(),
        Err(why) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {why}\n"),
        )
            .into_response(),
    }
}

/// Everything counted, as Prometheus reads it.
pub async fn metrics(State(st): State<AppState>) -> Response {
    let (pool_size, pool_idle) = st.db.pool_use();
    let text = st.metrics.render(hero_backend::metrics::Now {
        turns: st.turns.count_all(),
        streams: st.hub.streams_open(),
        pool_size,
        pool_idle,
    });
    (
        [(header::CONTENT_TYPE, hero_backend::metrics::CONTENT_TYPE)],
        text,
    )
        .into_response()
}

/// The health checks' routes, the same on both addresses ([`HEALTH_PATHS`]).
pub fn health<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    AppState: FromRef<S>,
{
    let [live, ready] = HEALTH_PATHS;
    Router::new()
        .route(live, axum::routing::get(healthz))
        .route(ready, axum::routing::get(readyz))
}

/// The metrics address's own router: the metrics and the health checks, nothing else.
pub fn metrics_router(st: AppState) -> Router {
    health()
        .route("/metrics", axum::routing::get(metrics))
        .with_state(st)
}

/// Counts every answered request by its route's template (the site's files as one, and
/// `unmatched` for any path no route holds, so that made-up paths cannot grow the labels),
/// method and status. Layered on the whole router last ([`counted`]), it runs after the
/// routing and outside every other layer: what they refuse (a `Host` not allowed, a
/// cross-origin write) is counted too.
pub async fn count_requests(State(st): State<AppState>, req: Request, next: Next) -> Response {
    let route = match req.extensions().get::<MatchedPath>() {
        Some(p) => p.as_str(),
        None if req.uri().path().starts_with("/pkg/") => "/pkg/{*file}",
        None => "unmatched",
    }
    .to_owned();
    // A method of no standard is one label, as an unmatched path is.
    let method = match req.method().as_str() {
        "GET" => "GET",
        "HEAD" => "HEAD",
        "POST" => "POST",
        "PUT" => "PUT",
        "PATCH" => "PATCH",
        "DELETE" => "DELETE",
        "OPTIONS" => "OPTIONS",
        _ => "other",
    };
    let res = next.run(req).await;
    st.metrics.request(&hero_backend::metrics::Request {
        route,
        method,
        status: res.status().as_u16(),
    });
    res
}

/// `router` with every request counted ([`count_requests`]): the last layer put on it.
pub fn counted(router: Router, st: AppState) -> Router {
    router.layer(axum::middleware::from_fn_with_state(st, count_requests))
}
