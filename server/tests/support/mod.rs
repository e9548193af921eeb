//! The harness of the loopback tests: Hero's real router on a free port over a fresh SQLite
//! file, signed in as alice, with helpers to post messages and read SSE, the frame log and
//! the WebSocket.
#![allow(dead_code)]

pub mod process;

use std::time::Duration;

use futures::StreamExt;
use hero_backend::execution::egress::EgressPolicy;
use hero_backend::providers::CallOptions;
use hero_backend::{AppState, Settings, accounts, test_support};
use reqwest::StatusCode;
use serde_json::{Value, json};

/// An SSE event with owned fields.
#[derive(Debug)]
pub struct Ev {
    pub event: String,
    pub data: String,
    pub id: String,
}

/// The SSE events of a response body, read by the decoder Hero's providers use.
pub fn sse<S, E>(
    body: S,
) -> impl futures::Stream<Item = Result<Ev, sseer::errors::EventStreamError<E>>> + Unpin
where
    S: futures::Stream<Item = Result<bytes::Bytes, E>>,
{
    Box::pin(sseer::EventStream::new(body).map(|r| {
        r.map(|e| Ev {
            event: e.event.to_string(),
            data: e.data.to_string(),
            id: e.id.to_string(),
        })
    }))
}

pub const KEY: &str = "sk-test-5ecret-key-0123456789";

pub struct Hero {
    pub _dir: tempfile::TempDir,
    pub base: String,
    pub st: AppState,
    pub c: reqwest::Client,
    /// Every response body read, to check no key ever leaves the server.
    pub seen: std::sync::Mutex<Vec<String>>,
}

/// Hero on loopback, allowed to reach `allow` (the mock LLM's address) and nothing else
/// that is not public.
pub async fn hero(allow: &[std::net::SocketAddr]) -> Hero {
    hero_with(allow, |_| {}).await
}

/// [`hero`] with its settings changed by `tweak` first.
pub async fn hero_with(allow: &[std::net::SocketAddr], tweak: impl FnOnce(&mut Settings)) -> Hero {
    let mut settings = Settings {
        call_options: CallOptions {
            first_byte_timeout: Duration::from_secs(2),
            idle_timeout: Duration::from_millis(800),
            max_retries: 2,
            max_retry_wait: Duration::from_secs(2),
            turn_deadline: Duration::from_secs(60),
        },
        recheck_every: Duration::from_millis(300),
        egress: allow
            .iter()
            .fold(EgressPolicy::default(), |p, a| p.allowing(*a)),
        // The server binary is the sandbox's Landlock helper, as in production.
        sandbox: hero_backend::execution::sandbox::SandboxLimits {
            landlock_helper: Some(env!("CARGO_BIN_EXE_hero").into()),
            ..Default::default()
        },
        ..Settings::default()
    };
    tweak(&mut settings);
    let test_support::TestState { st, dir } = test_support::state_with(settings).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = server::ops::counted(
        server::web::router(
            st.clone(),
            server::web::leptos_options(addr, &dir.path().join("site")),
        ),
        st.clone(),
    );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    accounts::create(&st.db, &st.keys, "alice", "alice-password", false)
        .await
        .unwrap();
    let c = reqwest::Client::builder()
        .cookie_store(true)
        .build()
        .unwrap();
    let h = Hero {
        _dir: dir,
        base: format!("http://{addr}"),
        st,
        c,
        seen: Default::default(),
    };
    let r =
        h.c.post(h.url("/api/auth/login"))
            .json(&json!({"username": "alice", "password": "alice-password"}))
            .send()
            .await
            .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    h
}

impl Hero {
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// A page as the signed-in user's browser gets it.
    pub async fn page(&self, path: &str) -> String {
        let r = self.c.get(self.url(path)).send().await.unwrap();
        r.text().await.unwrap()
    }

    pub async fn json(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut req = self.c.request(method, self.url(path));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status();
        let text = resp.text().await.unwrap();
        self.seen.lock().unwrap().push(text.clone());
        (
            status,
            if text.is_empty() {
                Value::Null
            } else {
                serde_json::from_str(&text).unwrap()
            },
        )
    }

    /// An agent of `provider` pointed at the mock, and a session talking to it.
    pub async fn session_with(
        &self,
        provider: &str,
        mock: &mock_llm::MockServer,
        key: &str,
    ) -> (i64, i64) {
        let base = if provider == "anthropic" {
            mock.url()
        } else {
            format!("{}/v1", mock.url())
        };
        let (s, agent) = self
            .json(reqwest::Method::POST, "/api/agents", Some(json!({
                "name": format!("{provider} agent"), "provider": provider, "model": "mock-model",
                "base_url": base, "api_key": key, "config": {"max_tokens": 321, "temperature": 0.25}
            })))
            .await;
        assert_eq!(s, StatusCode::CREATED, "{agent}");
        let (s, session) = self
            .json(
                reqwest::Method::POST,
                "/api/sessions",
                Some(json!({"name": "chat", "agent_id": agent["id"]})),
            )
            .await;
        assert_eq!(s, StatusCode::CREATED, "{session}");
        (
            session["id"].as_i64().unwrap(),
            agent["id"].as_i64().unwrap(),
        )
    }

    /// Posts a message to the streaming endpoint and reads every SSE event of the answer.
    pub async fn stream(&self, session: i64, content: &str) -> Vec<(String, Value)> {
        self.stream_body(session, json!({ "content": content }))
            .await
    }

    /// The same with a whole request body (`private`, …).
    pub async fn stream_body(&self, session: i64, body: Value) -> Vec<(String, Value)> {
        let resp = self
            .c
            .post(self.url(&format!("/api/sessions/{session}/messages/stream")))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        assert!(
            resp.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/event-stream")
        );
        let mut events = sse(resp.bytes_stream());
        let mut out = Vec::new();
        while let Some(ev) = tokio::time::timeout(Duration::from_secs(20), events.next())
            .await
            .expect("SSE stalled")
        {
            let ev = ev.unwrap();
            self.seen.lock().unwrap().push(ev.data.clone());
            let done = ev.event == "message_complete";
            out.push((ev.event, serde_json::from_str(&ev.data).unwrap()));
            if done {
                break;
            }
        }
        out
    }

    /// A new sign-in's token and a WebSocket opened with it.
    pub async fn ws(
        &self,
    ) -> (
        String,
        tokio_tungstenite::WebSocketStream<
            tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
        >,
    ) {
        self.ws_as("alice", "alice-password").await
    }

    /// The same for another user.
    pub async fn ws_as(
        &self,
        username: &str,
        password: &str,
    ) -> (
        String,
        tokio_tungstenite::WebSocketStream<
            tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
        >,
    ) {
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        let (_, login) = self
            .json(
                reqwest::Method::POST,
                "/api/auth/login",
                Some(json!({"username": username, "password": password})),
            )
            .await;
        let token = login["token"].as_str().unwrap().to_owned();
        let mut req = format!("ws{}/ws", self.base.trim_start_matches("http"))
            .into_client_request()
            .unwrap();
        req.headers_mut()
            .insert("cookie", format!("hero_token={token}").parse().unwrap());
        let (ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
        (token, ws)
    }

    pub async fn frames(&self, session: i64) -> Vec<Value> {
        let (s, page) = self
            .json(
                reqwest::Method::GET,
                &format!("/api/sessions/{session}/frames"),
                None,
            )
            .await;
        assert_eq!(s, StatusCode::OK);
        page["frames"].as_array().unwrap().clone()
    }
}

pub fn names(events: &[(String, Value)]) -> Vec<&str> {
    events.iter().map(|(n, _)| n.as_str()).collect()
}

pub fn last_data<'a>(events: &'a [(String, Value)], name: &str) -> &'a Value {
    &events
        .iter()
        .rev()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no {name} in {:?}", names(events)))
        .1
}

/// A second user, bob, signed in on the backend: whose requests for alice's things must
/// find nothing.
pub async fn bob(h: &Hero) -> hero_backend::accounts::auth::AuthUser {
    hero_backend::accounts::create(&h.st.db, &h.st.keys, "bob", "bob-password", false)
        .await
        .unwrap();
    hero_backend::accounts::auth::login(&h.st, "bob", "bob-password")
        .await
        .unwrap()
        .user
}

/// Frames of the session once `done` holds for them (the follow-up runs in a task).
pub async fn frames_when(h: &Hero, session: i64, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    for _ in 0..400 {
        let f = h.frames(session).await;
        if done(&f) {
            return f;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!(
        "frames never got there: {:#}",
        json!(h.frames(session).await)
    );
}

/// A second user, bob, with an HTTP client of his own, signed in.
pub async fn bob_client(h: &Hero) -> reqwest::Client {
    client_of(h, "bob", false).await
}

/// A signed-in client of a new user `name` (password `<name>-password`), an administrator
/// if `admin`.
pub async fn client_of(h: &Hero, name: &str, admin: bool) -> reqwest::Client {
    let password = format!("{name}-password");
    accounts::create(&h.st.db, &h.st.keys, name, &password, admin)
        .await
        .unwrap();
    let (status, c) = sign_in(h, name, &password).await;
    assert_eq!(status, StatusCode::OK);
    c
}

/// A new client's sign-in as `name`: the answer's status, and the client (with its cookie
/// when it was let in).
pub async fn sign_in(h: &Hero, name: &str, password: &str) -> (StatusCode, reqwest::Client) {
    let c = reqwest::Client::builder()
        .cookie_store(true)
        .build()
        .unwrap();
    let r = c
        .post(h.url("/api/auth/login"))
        .json(&json!({"username": name, "password": password}))
        .send()
        .await
        .unwrap();
    (r.status(), c)
}

/// The frames of one type (`message`, `request`, `result`, …).
/// The user's decision on a call waiting for approval.
pub async fn decide(h: &Hero, session: i64, request: &str, approved: bool) -> (StatusCode, Value) {
    h.json(
        reqwest::Method::POST,
        &format!("/api/sessions/{session}/approvals/{request}"),
        Some(json!({"approved": approved})),
    )
    .await
}

/// The frames after the session's startup processes (reference 000 "Startup Abilities"),
/// which precede its first message: Hero's `__onstart_` alone for a user with none of
/// their own.
pub fn after_startup(frames: Vec<Value>) -> Vec<Value> {
    let startup = frames
        .iter()
        .take_while(|f| f["payload"].get("startup").is_some())
        .count();
    assert_eq!(startup, 1, "one startup process, Hero's: {frames:#?}");
    frames.into_iter().skip(startup).collect()
}

pub fn of_type<'a>(frames: &'a [Value], t: &str) -> Vec<&'a Value> {
    frames.iter().filter(|f| f["type"] == t).collect()
}

/// The agent's messages among the frames.
pub fn agent_messages(frames: &[Value]) -> Vec<&Value> {
    frames
        .iter()
        .filter(|f| f["type"] == "message" && f["author_type"] == "agent")
        .collect()
}

/// One sample of `/metrics`: its family's name, its labels, and its value (a histogram's
/// count of observations).
pub type Metric = (String, std::collections::BTreeMap<String, String>, f64);

/// `/metrics`'s text read by an OpenMetrics parser, as a scraper reads it; text it refuses
/// fails the test.
pub fn metric_samples(text: &str) -> Vec<Metric> {
    use openmetrics_parser::OpenMetricsValue as V;
    let parsed = openmetrics_parser::openmetrics::parse_openmetrics(text)
        .unwrap_or_else(|e| panic!("not OpenMetrics text ({e:?}):\n{text}"));
    let mut out = Vec::new();
    for (name, family) in parsed.families {
        for s in family.iter_samples() {
            let labels = s
                .get_labelset()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let value = match &s.value {
                V::Counter(c) => c.value.as_f64(),
                V::Gauge(n) | V::Unknown(n) => n.as_f64(),
                V::Histogram(h) => h.count.unwrap_or(0) as f64,
                other => panic!("{name}: unexpected {other:?}"),
            };
            out.push((name.clone(), labels, value));
        }
    }
    out
}

/// The value of the sample of family `name` whose labels include `with`.
pub fn metric(samples: &[Metric], name: &str, with: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .find(|(n, labels, _)| {
            n == name
                && with
                    .iter()
                    .all(|(k, v)| labels.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|s| s.2)
}
