//! The JSON API in process (`oneshot`), against a real SQLite file in a temp directory.

use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use hero_backend::{AppState, Settings, accounts, test_support};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

struct Api {
    _dir: tempfile::TempDir,
    st: AppState,
    router: Router,
}

async fn api() -> Api {
    let t = test_support::state_with(Settings::default()).await;
    let router = server::api::router().with_state(t.st.clone());
    Api {
        st: t.st.clone(),
        _dir: t.dir,
        router: Router::new().nest("/api", router),
    }
}

struct Resp {
    status: StatusCode,
    headers: axum::http::HeaderMap,
    body: Value,
}

impl Api {
    async fn user(&self, name: &str) -> String {
        let pw = format!("{name}-password");
        accounts::create(&self.st.db, &self.st.keys, name, &pw, false)
            .await
            .unwrap();
        let r = self
            .call(
                Method::POST,
                "/api/auth/login",
                None,
                Some(json!({"username": name, "password": pw})),
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
        r.body["token"].as_str().unwrap().to_owned()
    }

    async fn call(
        &self,
        method: Method,
        uri: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> Resp {
        let raw = body.map(|b| b.to_string());
        self.raw(method, uri, token, raw.as_deref(), "application/json")
            .await
    }

    async fn raw(
        &self,
        method: Method,
        uri: &str,
        token: Option<&str>,
        body: Option<&str>,
        ctype: &str,
    ) -> Resp {
        let mut req = Request::builder().method(method).uri(uri);
        if let Some(t) = token {
            req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
        }
        let req = match body {
            Some(b) => req
                .header(header::CONTENT_TYPE, ctype)
                .body(Body::from(b.to_owned())),
            None => req.body(Body::empty()),
        }
        .unwrap();
        let resp = self.router.clone().oneshot(req).await.unwrap();
        let status = resp.status();
        let headers = resp.headers().clone();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).expect("JSON body")
        };
        Resp {
            status,
            headers,
            body,
        }
    }

    async fn session_count(&self) -> i64 {
        hero_backend::store::testing::int(&self.st.db, "SELECT COUNT(*) FROM sessions", &[])
            .await
            .unwrap()
    }
}

/// A 4xx whose body is `{"error": "..."}` containing `want`.
fn assert_error(r: &Resp, status: StatusCode, want: &str) {
    assert_eq!(r.status, status, "{:?}", r.body);
    let msg = r.body["error"]
        .as_str()
        .unwrap_or_else(|| panic!("no error message in {:?}", r.body));
    assert!(msg.contains(want), "{msg:?} should contain {want:?}");
}

#[tokio::test]
async fn every_route_but_login_needs_a_token() {
    let a = api().await;
    for (m, uri) in [
        (Method::POST, "/api/auth/logout"),
        (Method::GET, "/api/me"),
        (Method::POST, "/api/me/password"),
        (Method::GET, "/api/sessions"),
        (Method::POST, "/api/sessions"),
        (Method::GET, "/api/sessions/1"),
        (Method::PATCH, "/api/sessions/1"),
    ] {
        let r = a.call(m.clone(), uri, None, Some(json!({}))).await;
        assert_error(&r, StatusCode::UNAUTHORIZED, "sign in");
        let r = a
            .call(m.clone(), uri, Some("not-a-token"), Some(json!({})))
            .await;
        assert_error(&r, StatusCode::UNAUTHORIZED, "invalid sign-in token");
    }
}

#[tokio::test]
async fn login_sets_a_safe_cookie_and_both_credentials_work() {
    let a = api().await;
    accounts::create(&a.st.db, &a.st.keys, "alice", "alice-password", false)
        .await
        .unwrap();
    let r = a
        .call(
            Method::POST,
            "/api/auth/login",
            None,
            Some(json!({"username": "alice", "password": "alice-password"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
    let cookie = r
        .headers
        .get(header::SET_COOKIE)
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    assert!(cookie.starts_with("hero_token="), "{cookie}");
    for attr in ["HttpOnly", "SameSite=Lax", "Path=/"] {
        assert!(cookie.contains(attr), "{cookie} lacks {attr}");
    }
    assert_eq!(r.body["user"]["username"], "alice");
    assert!(r.body.get("password_hash").is_none() && r.body["user"].get("data_key").is_none());
    let token = r.body["token"].as_str().unwrap();
    // Bearer.
    assert_eq!(
        a.call(Method::GET, "/api/me", Some(token), None).await.body["username"],
        "alice"
    );
    // Cookie.
    let req = Request::get("/api/me")
        .header(header::COOKIE, cookie.split(';').next().unwrap())
        .body(Body::empty())
        .unwrap();
    assert_eq!(
        a.router.clone().oneshot(req).await.unwrap().status(),
        StatusCode::OK
    );
}

#[tokio::test]
async fn wrong_passwords_are_refused_then_slowed_down() {
    let a = api().await;
    accounts::create(&a.st.db, &a.st.keys, "alice", "alice-password", false)
        .await
        .unwrap();
    for _ in 0..5 {
        let r = a
            .call(
                Method::POST,
                "/api/auth/login",
                None,
                Some(json!({"username": "alice", "password": "guess-guess"})),
            )
            .await;
        assert_error(&r, StatusCode::UNAUTHORIZED, "wrong username or password");
    }
    let r = a
        .call(
            Method::POST,
            "/api/auth/login",
            None,
            Some(json!({"username": "alice", "password": "alice-password"})),
        )
        .await;
    assert_error(&r, StatusCode::TOO_MANY_REQUESTS, "try again in");
    assert!(r.headers.get(header::RETRY_AFTER).is_some());
    let r = a
        .call(
            Method::POST,
            "/api/auth/login",
            None,
            Some(json!({"username": "nobody", "password": "whatever!"})),
        )
        .await;
    assert_error(&r, StatusCode::UNAUTHORIZED, "wrong username or password");
}

#[tokio::test]
async fn logout_and_password_change_end_sign_ins() {
    let a = api().await;
    let t1 = a.user("alice").await;
    let r = a
        .call(Method::POST, "/api/auth/logout", Some(&t1), None)
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert!(
        r.headers
            .get(header::SET_COOKIE)
            .unwrap()
            .to_str()
            .unwrap()
            .contains("Max-Age=0")
    );
    assert_error(
        &a.call(Method::GET, "/api/me", Some(&t1), None).await,
        StatusCode::UNAUTHORIZED,
        "ended",
    );

    let login = json!({"username": "alice", "password": "alice-password"});
    let t2 = a
        .call(Method::POST, "/api/auth/login", None, Some(login))
        .await
        .body["token"]
        .as_str()
        .unwrap()
        .to_owned();
    let bad = a
        .call(
            Method::POST,
            "/api/me/password",
            Some(&t2),
            Some(json!({"current_password": "nope-nope", "new_password": "brand-new-pw"})),
        )
        .await;
    assert_error(&bad, StatusCode::BAD_REQUEST, "current password is wrong");
    let short = a
        .call(
            Method::POST,
            "/api/me/password",
            Some(&t2),
            Some(json!({"current_password": "alice-password", "new_password": "short"})),
        )
        .await;
    assert_error(&short, StatusCode::BAD_REQUEST, "too short");
    let ok = a
        .call(
            Method::POST,
            "/api/me/password",
            Some(&t2),
            Some(json!({"current_password": "alice-password", "new_password": "brand-new-pw"})),
        )
        .await;
    assert_eq!(ok.status, StatusCode::NO_CONTENT);
    assert_eq!(
        a.call(Method::GET, "/api/me", Some(&t2), None).await.status,
        StatusCode::UNAUTHORIZED
    );
}

#[tokio::test]
async fn sessions_create_rename_archive_restore_and_nest() {
    let a = api().await;
    let t = a.user("alice").await;
    let r = a
        .call(
            Method::POST,
            "/api/sessions",
            Some(&t),
            Some(json!({"name": "Research"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    let id = r.body["id"].as_i64().unwrap();
    assert_eq!(r.body["status"], "active");
    let child = a
        .call(
            Method::POST,
            "/api/sessions",
            Some(&t),
            Some(json!({"name": "Sub", "parent_session_id": id, "status": "agent"})),
        )
        .await;
    assert_eq!(
        (
            child.body["parent_session_id"].as_i64(),
            child.body["status"].as_str()
        ),
        (Some(id), Some("agent"))
    );
    let uri = format!("/api/sessions/{id}");
    let renamed = a
        .call(
            Method::PATCH,
            &uri,
            Some(&t),
            Some(json!({"name": "Deep research"})),
        )
        .await;
    assert_eq!(renamed.body["name"], "Deep research");
    let archived = a
        .call(
            Method::PATCH,
            &uri,
            Some(&t),
            Some(json!({"status": "archived"})),
        )
        .await;
    assert_eq!(
        (
            archived.body["status"].as_str(),
            archived.body["name"].as_str()
        ),
        (Some("archived"), Some("Deep research"))
    );
    let restored = a
        .call(
            Method::PATCH,
            &uri,
            Some(&t),
            Some(json!({"status": "active"})),
        )
        .await;
    assert_eq!(restored.body["status"], "active");
    assert_eq!(
        a.call(Method::GET, &uri, Some(&t), None).await.body,
        restored.body
    );
    let list = a
        .call(Method::GET, "/api/sessions", Some(&t), None)
        .await
        .body;
    assert_eq!(list.as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn bad_input_is_a_clear_4xx_and_writes_nothing() {
    let a = api().await;
    let t = a.user("alice").await;
    let s = a
        .call(
            Method::POST,
            "/api/sessions",
            Some(&t),
            Some(json!({"name": "keep"})),
        )
        .await
        .body;
    let uri = format!("/api/sessions/{}", s["id"]);

    let broken = a
        .raw(
            Method::POST,
            "/api/sessions",
            Some(&t),
            Some("{\"name\": "),
            "application/json",
        )
        .await;
    assert_error(&broken, StatusCode::BAD_REQUEST, "invalid JSON body");
    let no_ctype = a
        .raw(
            Method::POST,
            "/api/sessions",
            Some(&t),
            Some("{\"name\":\"x\"}"),
            "text/plain",
        )
        .await;
    assert_error(
        &no_ctype,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "Content-Type",
    );
    let wrong_shape = a
        .call(
            Method::POST,
            "/api/sessions",
            Some(&t),
            Some(json!({"name": 5})),
        )
        .await;
    assert_error(
        &wrong_shape,
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid JSON body",
    );
    let unknown_field = a
        .call(Method::PATCH, &uri, Some(&t), Some(json!({"title": "x"})))
        .await;
    assert_error(
        &unknown_field,
        StatusCode::UNPROCESSABLE_ENTITY,
        "unknown field",
    );
    let long = a
        .call(
            Method::POST,
            "/api/sessions",
            Some(&t),
            Some(json!({"name": "x".repeat(201)})),
        )
        .await;
    assert_error(&long, StatusCode::BAD_REQUEST, "too long");
    // A valid status with an invalid name: neither is applied.
    let half = a
        .call(
            Method::PATCH,
            &uri,
            Some(&t),
            Some(json!({"name": "", "status": "archived"})),
        )
        .await;
    assert_error(&half, StatusCode::BAD_REQUEST, "must not be empty");
    let bad_status = a
        .call(
            Method::PATCH,
            &uri,
            Some(&t),
            Some(json!({"status": "deleted"})),
        )
        .await;
    assert_error(
        &bad_status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "unknown variant",
    );
    assert_error(
        &a.call(Method::GET, "/api/sessions/999", Some(&t), None)
            .await,
        StatusCode::NOT_FOUND,
        "session not found",
    );
    assert_error(
        &a.call(Method::GET, "/api/sessions/abc", Some(&t), None)
            .await,
        StatusCode::BAD_REQUEST,
        "invalid id",
    );
    assert_error(
        &a.call(Method::GET, "/api/nothing", Some(&t), None).await,
        StatusCode::NOT_FOUND,
        "no such API route",
    );
    assert_error(
        &a.call(Method::DELETE, &uri, Some(&t), None).await,
        StatusCode::METHOD_NOT_ALLOWED,
        "method",
    );
    let loop_ = a
        .call(
            Method::PATCH,
            &uri,
            Some(&t),
            Some(json!({"parent_session_id": s["id"]})),
        )
        .await;
    assert_error(&loop_, StatusCode::BAD_REQUEST, "own parent");

    assert_eq!(a.session_count().await, 1);
    assert_eq!(a.call(Method::GET, &uri, Some(&t), None).await.body, s);
}

#[tokio::test]
async fn another_users_sessions_are_invisible_and_untouchable() {
    let a = api().await;
    let alice = a.user("alice").await;
    let bob = a.user("bob").await;
    let s = a
        .call(
            Method::POST,
            "/api/sessions",
            Some(&alice),
            Some(json!({"name": "private"})),
        )
        .await
        .body;
    let uri = format!("/api/sessions/{}", s["id"]);
    assert_eq!(
        a.call(Method::GET, "/api/sessions", Some(&bob), None)
            .await
            .body,
        json!([])
    );
    assert_error(
        &a.call(Method::GET, &uri, Some(&bob), None).await,
        StatusCode::NOT_FOUND,
        "session not found",
    );
    let steal = a
        .call(
            Method::PATCH,
            &uri,
            Some(&bob),
            Some(json!({"name": "mine now", "status": "archived"})),
        )
        .await;
    assert_error(&steal, StatusCode::NOT_FOUND, "session not found");
    let adopt = a
        .call(
            Method::POST,
            "/api/sessions",
            Some(&bob),
            Some(json!({"name": "c", "parent_session_id": s["id"]})),
        )
        .await;
    assert_error(&adopt, StatusCode::BAD_REQUEST, "names no session of yours");
    assert_eq!(a.call(Method::GET, &uri, Some(&alice), None).await.body, s);
    assert_eq!(a.session_count().await, 1);
}
