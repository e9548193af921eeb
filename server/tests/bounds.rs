//! What a caller can make grow is bounded, measured on a real `hero serve` over loopback:
//! the server's resident memory after 1,000 oversized or abandoned requests of each kind
//! stays within 10 MB of where it was (after a warm-up round of the same kind, so that
//! what is allocated once, such as the first connection's buffers, is not counted).

mod support;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use futures::StreamExt;
use serde_json::json;

const PASSWORD: &str = "bounds-password";
const ROUNDS: usize = 1000;
const SLACK_KB: u64 = 10 * 1024;

struct Server {
    child: Child,
    base: String,
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    async fn start() -> Server {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let hero = |args: &[&str]| {
            let mut c = Command::new(env!("CARGO_BIN_EXE_hero"));
            c.args(args)
                .env("HERO_DATA_DIR", &data)
                .env("HERO_SITE_ROOT", data.join("site"))
                .env("HERO_LOG", "error")
                .env_remove("HERO_MASTER_KEY")
                .env_remove("HERO_CONFIG")
                .env_remove("HERO_PUBLIC_URL");
            c
        };
        let mut add = hero(&["user", "add", "bounds"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        use std::io::Write;
        writeln!(add.stdin.take().unwrap(), "{PASSWORD}").unwrap();
        assert!(add.wait().unwrap().success());
        let (child, base, _) =
            support::process::listening(&mut hero(&["serve", "--addr", "127.0.0.1:0"])).await;
        Server {
            child,
            base,
            _dir: dir,
        }
    }

    /// Resident memory, in KiB.
    fn rss_kb(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }

    async fn token(&self) -> String {
        let r: serde_json::Value = reqwest::Client::new()
            .post(format!("{}/api/auth/login", self.base))
            .json(&json!({"username": "bounds", "password": PASSWORD}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        r["token"].as_str().unwrap().to_owned()
    }

    /// Runs `one` ROUNDS times after a warm-up of 100, and checks the memory it left.
    async fn flat<F, Fut>(&self, what: &str, mut one: F)
    where
        F: FnMut(usize) -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        for i in 0..100 {
            one(i).await;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        let before = self.rss_kb();
        for i in 0..ROUNDS {
            one(i).await;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        let after = self.rss_kb();
        println!(
            "{what}: RSS {before} KiB before, {after} KiB after {ROUNDS} (+{} KiB)",
            after.saturating_sub(before)
        );
        assert!(
            after <= before + SLACK_KB,
            "{what}: RSS grew from {before} KiB to {after} KiB"
        );
    }
}

#[tokio::test]
async fn oversized_and_abandoned_requests_leave_memory_flat() {
    let s = Server::start().await;
    let token = s.token().await;
    let c = reqwest::Client::new();
    let base = s.base.clone();

    // Sign-ins with usernames far past the limit: refused before anything is kept.
    s.flat("oversized usernames", |i| {
        let (c, base) = (c.clone(), base.clone());
        async move {
            let r = c
                .post(format!("{base}/api/auth/login"))
                .json(&json!({"username": format!("{i}{}", "u".repeat(10_000)), "password": "x"}))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 400);
        }
    })
    .await;

    // JSON bodies past the body limit.
    let big = "x".repeat(3 << 20);
    s.flat("oversized bodies", |_| {
        let (c, base, token, big) = (c.clone(), base.clone(), token.clone(), big.clone());
        async move {
            let r = c
                .post(format!("{base}/api/sessions"))
                .bearer_auth(&token)
                .header("content-type", "application/json")
                .body(format!("{{\"name\":\"{big}\"}}"))
                .send()
                .await;
            // Refused (413) as soon as the limit is passed; the server may close the
            // connection while the rest is still being sent.
            match r {
                Ok(r) => assert!(r.status().is_client_error(), "{}", r.status()),
                Err(e) => assert!(e.is_request(), "{e}"),
            }
        }
    })
    .await;

    // Event streams opened and dropped at once, each on a session of its own: their
    // channels, feeds and places among the user's live streams are let go.
    let session = |i: usize| {
        let (c, base, token) = (c.clone(), base.clone(), token.clone());
        async move {
            let r: serde_json::Value = c
                .post(format!("{base}/api/sessions"))
                .bearer_auth(&token)
                .json(&json!({"name": format!("s{i}")}))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            r["id"].as_i64().unwrap()
        }
    };
    let mut ids = Vec::new();
    for i in 0..50 {
        ids.push(session(i).await);
    }
    s.flat("abandoned event streams", |i| {
        let (base, token, id) = (base.clone(), token.clone(), ids[i % ids.len()]);
        async move {
            // A client of its own: dropping it closes the connection.
            let c = reqwest::Client::new();
            let r = c
                .get(format!("{base}/api/sessions/{id}/events"))
                .bearer_auth(&token)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200, "stream {i}");
            let mut body = r.bytes_stream();
            let _ = tokio::time::timeout(Duration::from_millis(20), body.next()).await;
        }
    })
    .await;

    // WebSockets opened and dropped.
    s.flat("abandoned WebSockets", |i| {
        let (base, token) = (base.clone(), token.clone());
        async move {
            use tokio_tungstenite::tungstenite::client::IntoClientRequest;
            let mut req = format!("ws{}/ws", base.trim_start_matches("http"))
                .into_client_request()
                .unwrap();
            req.headers_mut()
                .insert("authorization", format!("Bearer {token}").parse().unwrap());
            let (ws, _) = tokio_tungstenite::connect_async(req)
                .await
                .unwrap_or_else(|e| panic!("socket {i}: {e}"));
            drop(ws);
        }
    })
    .await;
}
