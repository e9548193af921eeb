//! `hero serve` as a process of its own, on a free loopback port over a data directory:
//! for the tests that signal or kill it.

use std::io::{BufRead, Write};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub const PASSWORD: &str = "alice-password";

/// Adds the user alice to the data directory `data`, as an operator does.
pub fn add_alice(data: &std::path::Path) {
    add_alice_with(data, &[]);
}

/// [`add_alice`] with settings of the environment's (`HERO_DATABASE_URL`, …).
pub fn add_alice_with(data: &std::path::Path, env: &[(&str, &str)]) {
    let mut add = Command::new(env!("CARGO_BIN_EXE_hero"));
    add.args(["user", "add", "alice"])
        .env("HERO_DATA_DIR", data)
        .env_remove("HERO_MASTER_KEY")
        .env_remove("HERO_CONFIG")
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::null());
    let mut add = add.spawn().unwrap();
    writeln!(add.stdin.take().unwrap(), "{PASSWORD}").unwrap();
    assert!(add.wait().unwrap().success());
}

/// What a started server prints on its standard output, read as it comes.
pub struct Printed {
    text: Arc<Mutex<String>>,
    reader: std::thread::JoinHandle<()>,
}

impl Printed {
    /// Everything printed, once the server has exited (the pipe then closes).
    pub fn all(self) -> String {
        let _ = self.reader.join();
        Arc::try_unwrap(self.text)
            .map(|m| m.into_inner().unwrap())
            .unwrap_or_default()
    }
}

/// Starts `cmd`, a `hero serve --addr <ip>:0`, and waits until it prints the address it
/// listens on: its base URL (without a base path). The kernel picks the port as hero binds
/// it, so no other server can take it between a test's choice and hero's bind, and a
/// test never signs in to another test's server.
pub async fn listening(cmd: &mut Command) -> (Child, String, Printed) {
    let mut child = cmd.stdout(Stdio::piped()).spawn().expect("hero starts");
    let out = child.stdout.take().expect("stdout is piped");
    let text = Arc::new(Mutex::new(String::new()));
    let (tx, rx) = tokio::sync::oneshot::channel();
    let into = text.clone();
    // Reads to the end, so hero never blocks on a full pipe.
    let reader = std::thread::spawn(move || {
        let mut tx = Some(tx);
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if let Some(url) = line.strip_prefix("Hero is serving on ") {
                let origin = url.splitn(4, '/').take(3).collect::<Vec<_>>().join("/");
                if let Some(tx) = tx.take() {
                    let _ = tx.send(origin);
                }
            }
            let mut all = into.lock().unwrap();
            all.push_str(&line);
            all.push('\n');
        }
    });
    let base = match tokio::time::timeout(Duration::from_secs(30), rx).await {
        Ok(Ok(base)) => base,
        _ => {
            let _ = child.kill();
            let status = child.wait();
            panic!(
                "hero did not start listening ({status:?}): {}",
                text.lock().unwrap()
            )
        }
    };
    (child, base, Printed { text, reader })
}

/// A running `hero serve`, and alice signed in to it.
pub struct Served {
    pub child: Child,
    pub base: String,
    pub c: reqwest::Client,
    /// Alice's sign-in token (for the WebSocket).
    pub token: String,
}

/// `hero serve` on a free loopback port, its data in `data`, allowed to reach `allow` (the
/// mock LLM's address), with alice signed in.
pub async fn serve(data: &std::path::Path, allow: &str) -> Served {
    serve_with(data, allow, &[]).await
}

/// [`serve`] with settings of the environment's (`HERO_DATABASE_URL`, …).
pub async fn serve_with(data: &std::path::Path, allow: &str, env: &[(&str, &str)]) -> Served {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hero"));
    cmd.args(["serve", "--addr", "127.0.0.1:0"])
        .env("HERO_DATA_DIR", data)
        .env("HERO_SITE_ROOT", data.join("site"))
        .env("HERO_LOG", "warn")
        .env_remove("HERO_MASTER_KEY")
        .env_remove("HERO_CONFIG")
        .env_remove("HERO_DRAIN_SECS")
        .env("HERO_EGRESS_ALLOW", allow)
        .envs(env.iter().copied());
    let (child, base, _) = listening(&mut cmd).await;
    let c = reqwest::Client::builder()
        .cookie_store(true)
        .build()
        .unwrap();
    let r = c
        .post(format!("{base}/api/auth/login"))
        .json(&json!({"username": "alice", "password": PASSWORD}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "sign-in: {}", r.status());
    let login: Value = r.json().await.unwrap();
    let token = login["token"].as_str().unwrap().to_owned();
    Served {
        child,
        base,
        c,
        token,
    }
}

impl Served {
    /// POSTs JSON and reads the JSON answer (any status).
    pub async fn post(&self, path: &str, body: Value) -> Value {
        self.c
            .post(format!("{}{path}", self.base))
            .json(&body)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    pub async fn frames(&self, session: i64) -> Vec<Value> {
        let page: Value = self
            .c
            .get(format!("{}/api/sessions/{session}/frames", self.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        page["frames"].as_array().unwrap().clone()
    }

    /// The session's frames once `done` holds of them (within 20 s).
    pub async fn frames_when(&self, session: i64, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let frames = self.frames(session).await;
            if done(&frames) {
                return frames;
            }
            assert!(Instant::now() < deadline, "never came: {frames:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// A session with a new agent, Ada, on the mock LLM at `mock`: its id.
    pub async fn mock_session(&self, mock: &mock_llm::MockServer) -> i64 {
        let agent: Value = self
            .post(
                "/api/agents",
                json!({"name": "Ada", "provider": "anthropic", "model": "m", "base_url": mock.url(), "api_key": "k"}),
            )
            .await;
        let session: Value = self
            .post(
                "/api/sessions",
                json!({"name": "chat", "agent_id": agent["id"]}),
            )
            .await;
        session["id"].as_i64().unwrap()
    }

    /// A page's HTML.
    pub async fn page(&self, path: &str) -> String {
        self.c
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
