//! The whole router on a real loopback socket: server-rendered pages, the sign-in redirect,
//! server functions and the JSON API sharing one cookie.

use hero_backend::{AppState, Settings, accounts, test_support};
use reqwest::StatusCode;
use reqwest::redirect::Policy;
use serde_json::{Value, json};

/// Leptos keeps process-wide state (its executor, the route list it builds by running the
/// app): two routers rendering pages at once in one process now and then left a render
/// waiting for ever. `hero` runs one router per process; these tests take turns.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

struct Running {
    _turn: tokio::sync::MutexGuard<'static, ()>,
    _dir: tempfile::TempDir,
    base: String,
    st: AppState,
}

async fn start() -> Running {
    let turn = ONE_AT_A_TIME.lock().await;
    let test_support::TestState { st, dir } = test_support::state_with(Settings::default()).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = server::web::router(
        st.clone(),
        server::web::leptos_options(addr, &dir.path().join("site")),
    );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Running {
        _turn: turn,
        _dir: dir,
        base: format!("http://{addr}"),
        st,
    }
}

fn client() -> reqwest::Client {
    // A browser's navigation: pages answer redirects to those with a real 302.
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert("accept", "text/html,application/xhtml+xml".parse().unwrap());
    // Pages are rendered on a multi-threaded runtime, as `hero serve` runs them; a page that
    // never answers fails the test instead of holding CI.
    reqwest::Client::builder()
        .cookie_store(true)
        .timeout(std::time::Duration::from_secs(30))
        .redirect(Policy::none())
        .default_headers(headers)
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_redirect_to_sign_in_and_render_sessions_on_the_server() {
    let r = start().await;
    accounts::create(&r.st.db, &r.st.keys, "alice", "alice-password", false)
        .await
        .unwrap();
    let c = client();

    let home = c.get(format!("{}/", r.base)).send().await.unwrap();
    assert_eq!(home.status(), StatusCode::FOUND);
    assert_eq!(home.headers()["location"], "/login");
    let login_page = c.get(format!("{}/login", r.base)).send().await.unwrap();
    assert_eq!(login_page.status(), StatusCode::OK);
    let html = login_page.text().await.unwrap();
    assert!(
        html.contains("Sign in") && html.contains("name=\"password\""),
        "{html}"
    );

    // Sign in through the JSON API; the cookie it sets also opens the pages.
    let resp = c
        .post(format!("{}/api/auth/login", r.base))
        .json(&json!({"username": "alice", "password": "alice-password"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let s: Value = c
        .post(format!("{}/api/sessions", r.base))
        .json(&json!({"name": "Rendered <on> the server"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let page = c
        .get(format!("{}/s/{}", r.base, s["id"]))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    let html = page.text().await.unwrap();
    // Escaped, in the sidebar and as the page title.
    assert!(
        html.matches("Rendered &lt;on&gt; the server").count() >= 2,
        "{html}"
    );
    assert!(html.contains("data-testid=\"whoami\""), "{html}");
    // Signed in, /login sends you home.
    let again = c.get(format!("{}/login", r.base)).send().await.unwrap();
    assert_eq!(again.status(), StatusCode::FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_functions_and_the_api_need_a_sign_in() {
    use leptos::server_fn::ServerFn;
    let r = start().await;
    let c = client();
    for path in [
        app::auth::CurrentUser::PATH,
        app::auth::Logout::PATH,
        app::sessions::ListSessions::PATH,
        app::sessions::CreateSession::PATH,
        app::sessions::UpdateSession::PATH,
    ] {
        let resp = c
            .post(format!("{}{path}", r.base))
            .header("content-type", "application/x-www-form-urlencoded")
            .header("accept", "application/json")
            .body("id=1&name=x")
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::UNAUTHORIZED, "{path}");
    }
    let me = c.get(format!("{}/api/me", r.base)).send().await.unwrap();
    assert_eq!(me.status(), StatusCode::UNAUTHORIZED);
    let body: Value = me.json().await.unwrap();
    assert_eq!(body["error"], "sign in first");
    let nothing = c
        .get(format!("{}/api/nothing", r.base))
        .send()
        .await
        .unwrap();
    assert_eq!(nothing.status(), StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cross_origin_writes_and_sockets_are_refused() {
    let r = start().await;
    accounts::create(&r.st.db, &r.st.keys, "alice", "alice-password", false)
        .await
        .unwrap();
    let c = client();
    let login = json!({"username": "alice", "password": "alice-password"});
    let evil = c
        .post(format!("{}/api/auth/login", r.base))
        .header("origin", "http://127.0.0.1:1")
        .json(&login)
        .send()
        .await
        .unwrap();
    assert_eq!(evil.status(), StatusCode::FORBIDDEN);
    let same = c
        .post(format!("{}/api/auth/login", r.base))
        .header("origin", r.base.clone())
        .json(&login)
        .send()
        .await
        .unwrap();
    assert_eq!(same.status(), StatusCode::OK);
    let ws = c
        .get(format!("{}/ws", r.base))
        .header("origin", "http://evil.example")
        .header("connection", "upgrade")
        .header("upgrade", "websocket")
        .header("sec-websocket-version", "13")
        .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")
        .send()
        .await
        .unwrap();
    assert_eq!(ws.status(), StatusCode::FORBIDDEN);
    // Reads from another origin are the browser's to block; they still need the cookie.
    let read = c
        .get(format!("{}/api/me", r.base))
        .header("origin", "http://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(read.status(), StatusCode::OK);
}
