//! The admin API on loopback: an administrator lists accounts with their use, makes one,
//! disables and enables it, resets its password and makes or unmakes an administrator, each
//! taking effect on the account's sign-ins at once; everyone else gets 403 and changes
//! nothing; a bad change is a 4xx that changes nothing.

mod support;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use support::*;

async fn call(
    h: &Hero,
    c: &reqwest::Client,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut req = c.request(method, h.url(path));
    if let Some(b) = body {
        req = req.json(&b);
    }
    let r = req.send().await.unwrap();
    let status = r.status();
    let text = r.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn find<'a>(list: &'a Value, name: &str) -> &'a Value {
    list.as_array()
        .unwrap()
        .iter()
        .find(|u| u["username"] == name)
        .unwrap_or_else(|| panic!("{name} is not listed: {list}"))
}

#[tokio::test]
async fn an_administrator_manages_users_and_sees_their_use() {
    let mock = mock_llm::spawn(mock_llm::Config::default()).await.unwrap();
    let h = hero(&[mock.addr()]).await;
    let root = client_of(&h, "root", true).await;
    // Alice (not an administrator) uses Hero a little: a session with a mock agent, a turn.
    let (session, _) = h.session_with("anthropic", &mock, KEY).await;
    h.stream(session, "hello").await;

    let (s, list) = call(&h, &root, Method::GET, "/api/admin/users", None).await;
    assert_eq!(s, StatusCode::OK, "{list}");
    let alice = find(&list, "alice");
    assert_eq!(alice["is_admin"], false);
    assert_eq!(alice["disabled"], false);
    assert_eq!(alice["usage"]["sessions"], 1, "{alice}");
    assert_eq!(
        alice["usage"]["agents"], 2,
        "the demo agent and the mock's: {alice}"
    );
    assert!(alice["usage"]["calls"].as_i64().unwrap() >= 1, "{alice}");
    assert!(
        alice["usage"]["input_tokens"].as_i64().unwrap() > 0,
        "{alice}"
    );
    assert!(alice["usage"]["last_active"].is_string(), "{alice}");
    assert_eq!(find(&list, "root")["is_admin"], true);
    assert_eq!(find(&list, "root")["usage"]["sessions"], 0);

    // An account made here signs in, and starts with its demo agent.
    let (s, carol) = call(
        &h,
        &root,
        Method::POST,
        "/api/admin/users",
        Some(json!({"username": "carol", "password": "carol-password"})),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{carol}");
    assert_eq!(carol["is_admin"], false);
    let id = carol["id"].as_i64().unwrap();
    let path = format!("/api/admin/users/{id}");
    let (s, carol_c) = sign_in(&h, "carol", "carol-password").await;
    assert_eq!(s, StatusCode::OK);
    let (s, agents) = call(&h, &carol_c, Method::GET, "/api/agents", None).await;
    assert_eq!((s, agents.as_array().unwrap().len()), (StatusCode::OK, 1));

    // Disabling ends her sign-ins at once; enabling lets her sign in again.
    let (s, v) = call(
        &h,
        &root,
        Method::PATCH,
        &path,
        Some(json!({"disabled": true})),
    )
    .await;
    assert_eq!((s, &v["disabled"]), (StatusCode::OK, &json!(true)), "{v}");
    let (s, _) = call(&h, &carol_c, Method::GET, "/api/agents", None).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    assert_eq!(
        sign_in(&h, "carol", "carol-password").await.0,
        StatusCode::UNAUTHORIZED
    );
    let (s, _) = call(
        &h,
        &root,
        Method::PATCH,
        &path,
        Some(json!({"disabled": false})),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let (s, carol_c) = sign_in(&h, "carol", "carol-password").await;
    assert_eq!(s, StatusCode::OK);

    // A new password ends her sign-ins; only the new one works after.
    let (s, _) = call(
        &h,
        &root,
        Method::PATCH,
        &path,
        Some(json!({"password": "a-new-password"})),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let (s, _) = call(&h, &carol_c, Method::GET, "/api/agents", None).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    assert_eq!(
        sign_in(&h, "carol", "carol-password").await.0,
        StatusCode::UNAUTHORIZED
    );
    let (s, carol_c) = sign_in(&h, "carol", "a-new-password").await;
    assert_eq!(s, StatusCode::OK);

    // Made an administrator, her standing sign-in can manage users; unmade, it cannot.
    let (s, _) = call(&h, &carol_c, Method::GET, "/api/admin/users", None).await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    let (s, _) = call(
        &h,
        &root,
        Method::PATCH,
        &path,
        Some(json!({"is_admin": true})),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let (s, _) = call(&h, &carol_c, Method::GET, "/api/admin/users", None).await;
    assert_eq!(s, StatusCode::OK);
    let (s, _) = call(
        &h,
        &root,
        Method::PATCH,
        &path,
        Some(json!({"is_admin": false})),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let (s, _) = call(&h, &carol_c, Method::GET, "/api/admin/users", None).await;
    assert_eq!(s, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn only_administrators_manage_users_and_bad_changes_change_nothing() {
    let h = hero(&[]).await;
    let root = client_of(&h, "root", true).await;
    let (_, list) = call(&h, &root, Method::GET, "/api/admin/users", None).await;
    let alice = find(&list, "alice")["id"].as_i64().unwrap();
    let root_id = find(&list, "root")["id"].as_i64().unwrap();

    // Alice is no administrator: 403 everywhere, with a reason, and nothing changes.
    for (method, path, body) in [
        (Method::GET, "/api/admin/users".to_owned(), None),
        (
            Method::POST,
            "/api/admin/users".to_owned(),
            Some(json!({"username": "mallory", "password": "mallory-password", "is_admin": true})),
        ),
        (
            Method::PATCH,
            format!("/api/admin/users/{alice}"),
            Some(json!({"is_admin": true})),
        ),
        (
            Method::PATCH,
            format!("/api/admin/users/{root_id}"),
            Some(json!({"disabled": true})),
        ),
    ] {
        let (s, v) = h.json(method.clone(), &path, body).await;
        assert_eq!(s, StatusCode::FORBIDDEN, "{method} {path}: {v}");
        assert!(
            v["error"].as_str().unwrap().contains("administrator"),
            "{v}"
        );
    }
    let (_, after) = call(&h, &root, Method::GET, "/api/admin/users", None).await;
    assert_eq!(after, list, "a refused request changed something");

    let alice_path = format!("/api/admin/users/{alice}");
    let root_path = format!("/api/admin/users/{root_id}");
    for (method, path, body, want, says) in [
        // An administrator's own account is changed by another one, never by themselves.
        (
            Method::PATCH,
            root_path.clone(),
            json!({"disabled": true}),
            StatusCode::CONFLICT,
            "your own",
        ),
        (
            Method::PATCH,
            root_path.clone(),
            json!({"is_admin": false}),
            StatusCode::CONFLICT,
            "your own",
        ),
        (
            Method::PATCH,
            root_path.clone(),
            json!({"password": "root-new-password"}),
            StatusCode::CONFLICT,
            "your own password",
        ),
        (
            Method::PATCH,
            alice_path.clone(),
            json!({}),
            StatusCode::BAD_REQUEST,
            "nothing to change",
        ),
        // A short password refuses the whole change: Alice is not disabled either.
        (
            Method::PATCH,
            alice_path.clone(),
            json!({"disabled": true, "password": "short"}),
            StatusCode::BAD_REQUEST,
            "too short",
        ),
        (
            Method::PATCH,
            alice_path.clone(),
            json!({"disabled": true, "colour": "red"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "unknown field",
        ),
        (
            Method::PATCH,
            "/api/admin/users/999999".to_owned(),
            json!({"disabled": true}),
            StatusCode::NOT_FOUND,
            "user",
        ),
        (
            Method::PATCH,
            "/api/admin/users/carol".to_owned(),
            json!({"disabled": true}),
            StatusCode::BAD_REQUEST,
            "invalid id",
        ),
        (
            Method::POST,
            "/api/admin/users".to_owned(),
            json!({"username": "ALICE", "password": "alice-password-2"}),
            StatusCode::CONFLICT,
            "taken",
        ),
        (
            Method::POST,
            "/api/admin/users".to_owned(),
            json!({"username": "a b", "password": "long-enough"}),
            StatusCode::BAD_REQUEST,
            "may hold only",
        ),
        (
            Method::POST,
            "/api/admin/users".to_owned(),
            json!({"username": "dave", "password": "short"}),
            StatusCode::BAD_REQUEST,
            "too short",
        ),
    ] {
        let (s, v) = call(&h, &root, method.clone(), &path, Some(body.clone())).await;
        assert_eq!(s, want, "{method} {path} {body}: {v}");
        assert!(
            v["error"].as_str().unwrap_or_default().contains(says),
            "{method} {path} {body}: {v}"
        );
    }
    let (_, after) = call(&h, &root, Method::GET, "/api/admin/users", None).await;
    assert_eq!(after, list, "a refused change changed something");
    // Alice's sign-in still stands.
    let (s, _) = h.json(Method::GET, "/api/me", None).await;
    assert_eq!(s, StatusCode::OK);
}
