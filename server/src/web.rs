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

pub fn router(backend: AppState, leptos_options: LeptosOptions) -> Router {
    let routes = generate_route_list(App);
    let state = ServerState(std::sync::Arc::new(Parts { leptos_options: leptos_options.clone(), backend: backend.clone() }));
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
        .layer(tower_http::trace::TraceLayer::new_for_http())
        .with_state(state)
}

/// The listener Hero serves on: every accepted connection gets `TCP_NODELAY`. A reply is a
/// run of small writes, one per token; with Nagle's algorithm each would wait for the
/// previous one's acknowledgement, which a client may delay by up to 40 ms.
pub fn listener(l: tokio::net::TcpListener) -> impl axum::serve::Listener<Addr = std::net::SocketAddr> {
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

/// Refuses cross-origin writes and WebSocket upgrades. The cookie is SameSite=Lax, but
/// another origin of the same site (another port on this host) still sends it; browsers
/// always name the origin of such requests, so a mismatch is refused. Requests without an
/// `Origin` (scripts, curl) are not browsers' and pass. Behind a proxy that rewrites `Host`,
/// `X-Forwarded-Host` names the public host.
async fn same_origin(req: axum::extract::Request, next: axum::middleware::Next) -> axum::response::Response {
    use axum::http::{Method, StatusCode, header};
    use axum::response::IntoResponse;
    let checked = req.uri().path() == "/ws" || !matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    if checked {
        if let Some(origin) = req.headers().get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("null");
            let origin_host = origin.split_once("://").map(|(_, h)| h.trim_end_matches('/'));
            let allowed = ["x-forwarded-host", "host"]
                .iter()
                .filter_map(|h| req.headers().get(*h)?.to_str().ok())
                .any(|h| Some(h) == origin_host);
            if !allowed {
                let body = hero_shared::api::ErrorBody { error: "cross-origin request refused".into() };
                return (StatusCode::FORBIDDEN, axum::Json(body)).into_response();
            }
        }
    }
    next.run(req).await
}
