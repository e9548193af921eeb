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
/// The site's files come from `leptos_options.site_root` ([`router_with_site`] for another
/// source).
pub fn router(backend: AppState, leptos_options: LeptosOptions) -> Router {
    let site = crate::site::Site::Dir(leptos_options.site_root.as_ref().into());
    router_with_site(backend, leptos_options, site)
}

/// [`router`] with the site's files from `site`: a directory, or inside the binary.
pub fn router_with_site(
    backend: AppState,
    leptos_options: LeptosOptions,
    site: crate::site::Site,
) -> Router {
    use crate::site::Site;
    let routes = generate_route_list(App);
    let state = ServerState(std::sync::Arc::new(Parts {
        leptos_options: leptos_options.clone(),
        backend: backend.clone(),
    }));
    // What every page is rendered with: the backend, and the site's files' names (read
    // once). A page not found is the app's too: it writes its links under the base path.
    let assets = site.assets();
    // The policy of answers without their own: it allows the pages' loader by its hash.
    let (js, wasm) = app::loader_urls(
        &backend.settings.base_path,
        &leptos_options.site_pkg_dir,
        &assets,
    );
    let default_policy = axum::http::HeaderValue::from_str(&app::csp::policy_with_hash(
        &loader_hash(&app::loader_script(&js, &wasm)),
    ))
    .expect("the policy is a header value");
    let context = move || {
        provide_context(backend.clone());
        provide_context(assets.clone());
    };
    let not_found =
        leptos_axum::file_and_error_handler_with_context::<ServerState, _>(context.clone(), shell);
    let router = match site {
        Site::Dir(dir) => Router::new()
            .nest_service(
                "/pkg",
                site_files(&dir.join(leptos_options.site_pkg_dir.as_ref())),
            )
            .fallback(not_found),
        // The site's own files first, then the page not found.
        Site::Embedded(files) => {
            let root = files.clone();
            let pkg = move |uri: axum::http::Uri, headers: axum::http::HeaderMap| {
                let files = files.clone();
                async move {
                    use axum::response::IntoResponse;
                    files
                        .serve(uri.path(), &headers)
                        .unwrap_or_else(|| axum::http::StatusCode::NOT_FOUND.into_response())
                }
            };
            let file_or_not_found =
                move |uri: axum::http::Uri,
                      state: axum::extract::State<ServerState>,
                      req: axum::extract::Request| {
                    let (root, not_found) = (root.clone(), not_found.clone());
                    async move {
                        let readable = matches!(
                            *req.method(),
                            axum::http::Method::GET | axum::http::Method::HEAD
                        );
                        match readable
                            .then(|| root.serve(uri.path(), req.headers()))
                            .flatten()
                        {
                            Some(file) => file,
                            None => not_found(uri, state, req).await,
                        }
                    }
                };
            Router::new()
                .route("/pkg/{*file}", axum::routing::get(pkg))
                .fallback(file_or_not_found)
        }
    };
    router
        .nest("/api", crate::api::router())
        .route("/ws", axum::routing::get(crate::api::ws::ws))
        .merge(crate::ops::health())
        .leptos_routes_with_context(&state, routes, context, move || {
            shell(leptos_options.clone())
        })
        .layer(axum::middleware::from_fn(unreadable_calls))
        .layer(axum::middleware::from_fn(missing_file))
        .layer(axum::middleware::from_fn(same_origin))
        .layer(axum::middleware::from_fn(move |req, next| {
            security_headers(default_policy.clone(), req, next)
        }))
        .layer(axum::middleware::from_fn(trace_request))
        .layer(page_compression())
        .with_state(state)
}

/// The built site's files in `pkg`, each as `.br` or `.gz` when the build left one beside it
/// and the browser accepts it (scripts/compress-site.sh makes them for release builds).
fn site_files(pkg: &std::path::Path) -> tower_http::services::ServeDir {
    tower_http::services::ServeDir::new(pkg)
        .precompressed_br()
        .precompressed_gzip()
}

/// `app` served under `base` (`/hero`, from the `base_path` setting) as well as at the
/// root: a request for `/hero/x` is routed as `/x`, so a proxy that strips the prefix and
/// one that passes it on reach the same routes (the pages write every URL with the prefix:
/// `app::base`). Put around the whole app, outside every layer: the path is rewritten before
/// any routing.
pub fn under_base(app: Router, base: &str) -> Router {
    if base.is_empty() {
        return app;
    }
    let base: std::sync::Arc<str> = base.into();
    let strip = move |mut req: axum::extract::Request| {
        let base = base.clone();
        async move {
            let own = app::base::strip(&base, req.uri().path());
            if own.len() != req.uri().path().len() {
                let path_and_query = match req.uri().query() {
                    Some(q) => format!("{own}?{q}"),
                    None => own.to_owned(),
                };
                let mut parts = req.uri().clone().into_parts();
                // A path that was a valid URI's stays one without its first segments.
                if let Ok(pq) = path_and_query.parse() {
                    parts.path_and_query = Some(pq);
                    if let Ok(uri) = axum::http::Uri::from_parts(parts) {
                        *req.uri_mut() = uri;
                    }
                }
            }
            req
        }
    };
    Router::new()
        .fallback_service(app)
        .layer(axum::middleware::map_request(strip))
}

/// Pages (HTML) compressed as the browser accepts (brotli, else gzip), at the fastest
/// level: a page is mostly markup, which even that cuts to about a third. Nothing else is:
/// the site's files are compressed ahead, a feed's events must leave as they come, and the
/// JSON answers are small. A page holds no secret another response could reflect to reveal
/// (no token, no key: the sign-in is an HttpOnly cookie), so compressing it gives nothing
/// away.
fn page_compression()
-> tower_http::compression::CompressionLayer<impl tower_http::compression::Predicate> {
    use tower_http::compression::predicate::{DefaultPredicate, Predicate};
    let html = |_: axum::http::StatusCode,
                _: axum::http::Version,
                headers: &axum::http::HeaderMap,
                _: &axum::http::Extensions| {
        headers
            .get(axum::http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/html"))
    };
    tower_http::compression::CompressionLayer::new()
        .quality(tower_http::CompressionLevel::Fastest)
        .compress_when(DefaultPredicate::new().and(html))
}

/// A name the site's directory cannot hold (too long for the file system) is a file that
/// is not there: the static files' service would answer it 500, as if the server had
/// failed. Only such names: any other error of the service stays the server's.
async fn missing_file(
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    // NAME_MAX and PATH_MAX: a name past either is no file of the site (the file system
    // would refuse to look it up, and the static files' service answer 500).
    let path = req.uri().path();
    let unholdable = path.len() > 4096 || path.split('/').any(|part| part.len() > 255);
    if path.starts_with("/pkg/") && unholdable {
        return axum::http::StatusCode::NOT_FOUND.into_response();
    }
    next.run(req).await
}

/// Every server function's path and method: what [`unreadable_calls`] watches over.
pub fn server_fn_paths() -> Vec<(String, axum::http::Method)> {
    leptos::server_fn::axum::server_fn_paths()
        .map(|(path, method)| (path.to_owned(), method))
        .collect()
}

/// The one place that decides what a server function's call that could not be read
/// answers. server_fn sends every error with 500, a body it could not decode (a form to a
/// function that takes JSON, an empty body, a wrong type, missing fields) included: those
/// are the caller's, and answer 400 (413 past the body limit) with a short message, and the
/// request log keeps its `ERROR` lines for the server's own faults. The message stays in
/// server_fn's error encoding, so the app's client still reads it.
async fn unreadable_calls(
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::http::StatusCode;
    use axum::response::IntoResponse;
    if !req.uri().path().starts_with(app::guard::SERVER_FN_PREFIX) {
        return next.run(req).await;
    }
    let resp = next.run(req).await;
    if resp.status() != StatusCode::INTERNAL_SERVER_ERROR
        || !resp.headers().contains_key("serverfnerror")
    {
        return resp;
    }
    let (parts, body) = resp.into_parts();
    // An error's text is short; one that is not is no decoding error of the caller's.
    let Ok(bytes) = axum::body::to_bytes(body, 64 << 10).await else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let text = String::from_utf8_lossy(&bytes);
    let (kind, detail) = text.split_once('|').unwrap_or(("", &text));
    let detail: String = detail.chars().take(200).collect();
    let (status, message) = match kind {
        // The body limit (axum's default, 2 MB) is met while the body is read for decoding.
        "Deserialization" | "Request" if detail.contains("length limit") => (
            StatusCode::PAYLOAD_TOO_LARGE,
            "this call's body is too large".to_owned(),
        ),
        "Deserialization" | "Args" | "MissingArg" => (
            StatusCode::BAD_REQUEST,
            format!(
                "this call's arguments could not be read ({detail}); send the fields the function takes, in the encoding it takes"
            ),
        ),
        "Request" => (
            StatusCode::BAD_REQUEST,
            format!("this call's body could not be read ({detail})"),
        ),
        _ => {
            return axum::response::Response::from_parts(parts, axum::body::Body::from(bytes));
        }
    };
    let mut resp = (status, format!("ServerError|{message}")).into_response();
    for (name, value) in parts.headers.iter() {
        if name != axum::http::header::CONTENT_LENGTH && name != axum::http::header::CONTENT_TYPE {
            resp.headers_mut().insert(name, value.clone());
        }
    }
    resp
}

/// The listener Hero serves on: every accepted connection gets `TCP_NODELAY`. A reply is a
/// run of small writes, one per token; with Nagle's algorithm each would wait for the
/// previous one's acknowledgement, which a client may delay by up to 40 ms.
pub fn listener(
    l: tokio::net::TcpListener,
) -> axum::serve::TapIo<tokio::net::TcpListener, fn(&mut tokio::net::TcpStream)> {
    use axum::serve::ListenerExt;
    fn nodelay(tcp: &mut tokio::net::TcpStream) {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "could not set TCP_NODELAY");
        }
    }
    l.tap_io(nodelay as fn(&mut tokio::net::TcpStream))
}

/// Leptos options for serving at `addr` from the built site in `site_root`.
pub fn leptos_options(addr: std::net::SocketAddr, site_root: &std::path::Path) -> LeptosOptions {
    let mut opts = LeptosOptions::builder()
        .output_name("hero")
        .site_root(site_root.to_string_lossy().to_string())
        .site_pkg_dir("pkg")
        .site_addr(addr)
        .build();
    // The site's files' names (hero.<hash>.wasm) are not Leptos's to read: the router
    // reads them once (`site::Site::assets`) and pages link them from `app::Assets`.
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

/// The hash a Content-Security-Policy names an inline script by: its text's SHA-256, in
/// base64.
pub fn loader_hash(script: &str) -> String {
    use base64::Engine;
    use sha2::Digest;
    base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(script.as_bytes()))
}

/// Headers every answer carries: no type sniffing, no referrer to other origins, no framing, a strict
/// Content-Security-Policy where the page did not set its own (pages set theirs, with the
/// response's nonce: `app::csp`), and `no-store` on everything but the built site's files,
/// so that nothing holding a user's data stays in a shared or back-button cache.
async fn security_headers(
    default_policy: axum::http::HeaderValue,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::http::{HeaderValue, header};
    let site_cache = site_cache_control(req.uri().path());
    let mut resp = next.run(req).await;
    let h = resp.headers_mut();
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        // Nothing to other origins; our own requests keep their `Referer` and `Origin`
        // (under `no-referrer` a form posted without the wasm says `Origin: null`, which
        // the same-origin check must refuse, and its server function cannot send the
        // browser back to the page it came from).
        HeaderValue::from_static("same-origin"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.entry(header::CONTENT_SECURITY_POLICY)
        .or_insert(default_policy);
    // Only a file found may be kept: a 404 for a name the next build will have is not.
    let site_cache = site_cache.filter(|_| resp.status().is_success());
    let h = resp.headers_mut();
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static(site_cache.unwrap_or("no-store")),
    );
    resp
}

/// How long a browser may keep one of the built site's files (wasm, JS, CSS, the icon: the
/// same for everyone, no user data), `None` for anything else. A file named by its content
/// (`hero.<hash>.wasm`) never changes: kept for a year without asking again. Any other
/// is kept but asked about each time (a new build may have replaced it).
fn site_cache_control(path: &str) -> Option<&'static str> {
    let name = if let Some(name) = path.strip_prefix("/pkg/") {
        name
    } else if path == "/favicon.svg" {
        return Some("no-cache");
    } else {
        return None;
    };
    let hashed = name
        .split('.')
        .nth(1)
        .filter(|_| name.split('.').count() >= 3)
        .is_some_and(|h| {
            h.len() >= 10
                && h.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        });
    Some(if hashed {
        "public, max-age=31536000, immutable"
    } else {
        "no-cache"
    })
}

/// Which `Host` a request may name. A page of another site whose name the attacker makes
/// resolve to this machine (DNS rebinding) is, to the browser, of that other origin, and
/// could read Hero's answers; its requests name the attacker's host, and are refused here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostPolicy {
    /// Served on another address with no public URL set: any host.
    Any,
    /// Served on loopback with no public URL set: `localhost` and loopback addresses.
    Loopback,
    /// The public URL's host (and port, if it names one), lowercase.
    Exactly(String),
}

impl HostPolicy {
    /// From the `public_url` setting (already checked: an http(s) URL with a host) and the
    /// address Hero serves on.
    pub fn new(public_url: Option<&axum::http::Uri>, addr: std::net::SocketAddr) -> Self {
        match public_url.and_then(|u| u.authority()) {
            // A browser leaves out the scheme's own port: `https://h:443` is sent as `h`.
            Some(a) => HostPolicy::Exactly(
                match (public_url.and_then(|u| u.scheme_str()), a.port_u16()) {
                    (Some("https"), Some(443)) | (Some("http"), Some(80)) => {
                        a.host().to_ascii_lowercase()
                    }
                    _ => a.as_str().to_ascii_lowercase(),
                },
            ),
            None if addr.ip().is_loopback() => HostPolicy::Loopback,
            None => HostPolicy::Any,
        }
    }

    pub fn allows(&self, host: &str) -> bool {
        let host = host.trim().to_ascii_lowercase();
        match self {
            HostPolicy::Any => true,
            HostPolicy::Exactly(h) => host == *h,
            HostPolicy::Loopback => {
                // Strip the port: after the brackets of an IPv6 literal, else after a colon.
                let name = match host.strip_prefix('[') {
                    Some(rest) => rest.split(']').next().unwrap_or(""),
                    None => host.rsplit_once(':').map_or(host.as_str(), |(n, _)| n),
                };
                name == "localhost"
                    || name
                        .parse::<std::net::IpAddr>()
                        .is_ok_and(|ip| ip.is_loopback())
            }
        }
    }
}

/// Puts `policy` in front of `router`: a request whose `Host` it does not allow answers
/// 421 (a client that sends none, such as an in-process test, is not a browser and passes).
pub fn pin_host(router: Router, policy: HostPolicy) -> Router {
    if policy == HostPolicy::Any {
        return router;
    }
    let policy = std::sync::Arc::new(policy);
    router.layer(axum::middleware::from_fn(
        move |req: axum::extract::Request, next: axum::middleware::Next| {
            let policy = policy.clone();
            async move {
                use axum::response::IntoResponse;
                let host = req
                    .headers()
                    .get(axum::http::header::HOST)
                    .map(|h| h.to_str().unwrap_or(""));
                // A load balancer's health check names the address it reaches.
                let health = crate::ops::HEALTH_PATHS.contains(&req.uri().path())
                    && matches!(*req.method(), axum::http::Method::GET | axum::http::Method::HEAD);
                if let Some(host) = host
                    && !health
                    && !policy.allows(host)
                {
                    let body = hero_shared::api::ErrorBody {
                        error: "this server does not answer to that host name; \
                                an administrator can set HERO_PUBLIC_URL to the name it is reached by"
                            .into(),
                    };
                    return (axum::http::StatusCode::MISDIRECTED_REQUEST, axum::Json(body))
                        .into_response();
                }
                next.run(req).await
            }
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_named_files_are_kept_for_good() {
        let forever = Some("public, max-age=31536000, immutable");
        assert_eq!(site_cache_control("/pkg/hero.Xk3_9-abcDEFgh.wasm"), forever);
        assert_eq!(site_cache_control("/pkg/hero.Xk3_9-abcDEFgh.js"), forever);
        assert_eq!(site_cache_control("/pkg/hero.wasm"), Some("no-cache"));
        assert_eq!(site_cache_control("/pkg/hero.css"), Some("no-cache"));
        assert_eq!(site_cache_control("/favicon.svg"), Some("no-cache"));
        assert_eq!(site_cache_control("/s/12"), None);
        assert_eq!(site_cache_control("/api/pkg/hero.Xk3_9-abcDEFgh.js"), None);
    }

    #[test]
    fn hosts_are_pinned() {
        let local: std::net::SocketAddr = "127.0.0.1:3000".parse().unwrap();
        let anywhere: std::net::SocketAddr = "0.0.0.0:3000".parse().unwrap();
        let loopback = HostPolicy::new(None, local);
        assert_eq!(loopback, HostPolicy::Loopback);
        for ok in [
            "127.0.0.1:3000",
            "localhost:3000",
            "LOCALHOST",
            "127.1.2.3",
            "[::1]:3000",
            "[::1]",
        ] {
            assert!(loopback.allows(ok), "{ok}");
        }
        for refused in [
            "evil.example:3000",
            "localhost.evil.example",
            "127.0.0.1.nip.io:3000",
            "10.0.0.1:3000",
            "[::ffff:7f00:1]:3000",
            "",
        ] {
            assert!(!loopback.allows(refused), "{refused}");
        }
        assert_eq!(HostPolicy::new(None, anywhere), HostPolicy::Any);
        let public: axum::http::Uri = "https://Hero.example.com".parse().unwrap();
        let pinned = HostPolicy::new(Some(&public), anywhere);
        assert!(pinned.allows("hero.example.com"));
        assert!(!pinned.allows("hero.example.com:8443"));
        assert!(!pinned.allows("127.0.0.1:3000"));
        let explicit: axum::http::Uri = "https://hero.example.com:443".parse().unwrap();
        let pinned = HostPolicy::new(Some(&explicit), anywhere);
        assert!(pinned.allows("hero.example.com"), "{pinned:?}");
        let with_port: axum::http::Uri = "http://hero.lan:8080/".parse().unwrap();
        let pinned = HostPolicy::new(Some(&with_port), local);
        assert!(pinned.allows("hero.lan:8080") && !pinned.allows("localhost:8080"));
    }
}
