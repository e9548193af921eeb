//! The whole HTTP surface: the JSON API under `/api`, the Leptos pages and server functions,
//! and the built site's static files.

use app::{App, shell};
use axum::Router;
use axum::extract::FromRef;
use hero_backend::AppState;
use leptos::prelude::*;
use leptos_axum::{LeptosRoutes, generate_route_list};

/// The router's state: Leptos needs its options, handlers need the backend. Behind one
/// reference count: the router clones its state for every request, once per layer of the
/// route's stack, and the options alone are a dozen counted strings.
#[derive(Clone)]
pub struct ServerState(std::sync::Arc<Parts>);

pub struct Parts {
    pub leptos_options: LeptosOptions,
    pub backend: AppState,
}

impl FromRef<ServerState> for LeptosOptions {
    fn from_ref(s: &ServerState) -> Self {
        s.0.leptos_options.clone()
    }
}

impl FromRef<ServerState> for AppState {
    fn from_ref(s: &ServerState) -> Self {
        s.0.backend.clone()
    }
}

/// Serve it with `into_make_service()`: served as it is, axum copies the whole router (every
/// route's stack of services) for each new connection, and drops the copy when it closes.
pub fn router(backend: AppState, leptos_options: LeptosOptions) -> Router {
    let routes = generate_route_list(App);
    let state = ServerState(std::sync::Arc::new(Parts {
        leptos_options: leptos_options.clone(),
        backend: backend.clone(),
    }));
    Router::new()
        .nest("/api", crate::api::router())
        .route("/ws", axum::routing::get(crate::api::ws::ws))
        .leptos_routes_with_context(
            &state,
            routes,
            move || provide_context(backend.clone()),
            move || shell(leptos_options.clone()),
        )
        .fallback(leptos_axum::file_and_error_handler::<ServerState, _>(shell))
        .layer(axum::middleware::from_fn(same_origin))
        .layer(axum::middleware::from_fn(trace_request))
        .with_state(state)
}

/// The listener Hero serves on: every accepted connection gets `TCP_NODELAY`. A reply is a
/// run of small writes, one per token; with Nagle's algorithm each would wait for the
/// previous one's acknowledgement, which a client may delay by up to 40 ms.
pub fn listener(
    l: tokio::net::TcpListener,
) -> impl axum::serve::Listener<Addr = std::net::SocketAddr> {
    use axum::serve::ListenerExt;
    l.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "could not set TCP_NODELAY");
        }
    })
}

/// Leptos options for serving at `addr` from the built site in `site_root`.
pub fn leptos_options(addr: std::net::SocketAddr, site_root: &std::path::Path) -> LeptosOptions {
    let mut opts = LeptosOptions::builder()
        .output_name("hero")
        .site_root(site_root.to_string_lossy().to_string())
        .site_pkg_dir("pkg")
        .site_addr(addr)
        .build();
    // cargo-leptos's dev server sets LEPTOS_ENV=DEV for live reload; a plain run is PROD.
    opts.env = match std::env::var("LEPTOS_ENV").as_deref() {
        Ok("DEV") | Ok("dev") | Ok("development") => Env::DEV,
        _ => Env::PROD,
    };
    opts
}

/// A span per request, and a line when its answer starts: the status and how long it took
/// (at debug; a server error at error). tower-http's `TraceLayer` logs the same, but also
/// wraps every response body to look at each chunk, which for a streamed reply is a layer
/// more on every token's way out.
async fn trace_request(
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use tracing::Instrument;
    let span = tracing::debug_span!("request", method = %req.method(), uri = %req.uri());
    let started = std::time::Instant::now();
    let resp = next.run(req).instrument(span.clone()).await;
    let _in = span.enter();
    let latency_ms = started.elapsed().as_millis() as u64;
    if resp.status().is_server_error() {
        tracing::error!(
            status = resp.status().as_u16(),
            latency_ms,
            "request failed"
        );
    } else {
        tracing::debug!(status = resp.status().as_u16(), latency_ms, "answered");
    }
    resp
}

/// Refuses cross-origin writes and WebSocket upgrades. The cookie is SameSite=Lax, but
/// another origin of the same site (another port on this host) still sends it; browsers
/// always name the origin of such requests, so a mismatch is refused. Requests without an
/// `Origin` (scripts, curl) are not browsers' and pass. Behind a proxy that rewrites `Host`,
/// `X-Forwarded-Host` names the public host.
async fn same_origin(
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::http::{Method, StatusCode, header};
    use axum::response::IntoResponse;
    let checked = req.uri().path() == "/ws"
        || !matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    if checked && let Some(origin) = req.headers().get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("null");
        let origin_host = origin
            .split_once("://")
            .map(|(_, h)| h.trim_end_matches('/'));
        let allowed = ["x-forwarded-host", "host"]
            .iter()
            .filter_map(|h| req.headers().get(*h)?.to_str().ok())
            .any(|h| Some(h) == origin_host);
        if !allowed {
            let body = hero_shared::api::ErrorBody {
                error: "cross-origin request refused".into(),
            };
            return (StatusCode::FORBIDDEN, axum::Json(body)).into_response();
        }
    }
    next.run(req).await
}
