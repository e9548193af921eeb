//! Hero on a PostgreSQL of the test's own. Over TLS, verified against the server's
//! certificate. Stopped and started again under a serving Hero, with requests coming all the
//! while: while it is down, requests answer 503 with a message (never 500, never a
//! panic), `/readyz` says so, a message posted then is refused and not stored, and a tab's
//! event stream ends with a hint to reconnect; when it is back, Hero serves again by
//! itself, nothing restarted. A PostgreSQL of the test's own (`scripts/postgres.sh` with
//! `HERO_PG_DIR`), since the one the other tests share must stay up.

mod support;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{Value, json};
use support::process::{add_alice_with, serve_with};
use support::{agent_messages, sse};

/// A PostgreSQL of this test's own, stopped and removed when dropped.
struct OwnPostgres {
    dir: PathBuf,
}

fn script(dir: &std::path::Path, args: &[&str]) -> String {
    let out = Command::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../scripts/postgres.sh"
    ))
    .args(args)
    .env("HERO_PG_DIR", dir)
    .output()
    .expect("scripts/postgres.sh runs");
    assert!(
        out.status.success(),
        "postgres.sh {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

impl OwnPostgres {
    fn start() -> (OwnPostgres, String) {
        Self::start_with(&[])
    }

    fn start_with(env: &[(&str, &str)]) -> (OwnPostgres, String) {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port();
        let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../target"))
            .join(format!("pg-own-{port}"));
        let out = Command::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../scripts/postgres.sh"
        ))
        .args(["start", &port.to_string()])
        .env("HERO_PG_DIR", &dir)
        .envs(env.iter().copied())
        .output()
        .expect("scripts/postgres.sh runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let url = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        (OwnPostgres { dir }, url)
    }

    fn halt(&self) {
        script(&self.dir, &["halt"]);
    }

    fn resume(&self) {
        script(&self.dir, &["resume"]);
    }
}

impl Drop for OwnPostgres {
    fn drop(&mut self) {
        let _ = Command::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../scripts/postgres.sh"
        ))
        .arg("stop")
        .env("HERO_PG_DIR", &self.dir)
        .output();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgresql_stopped_and_started_again_under_load() {
    let (pg, url) = OwnPostgres::start();
    let key = "44".repeat(32);
    let env = [
        ("HERO_DATABASE_URL", url.as_str()),
        ("HERO_MASTER_KEY", key.as_str()),
    ];
    let data = tempfile::tempdir().unwrap();
    let mock = mock_llm::spawn(mock_llm::Config::default()).await.unwrap();
    add_alice_with(data.path(), &env);
    let hero = serve_with(data.path(), &mock.addr().to_string(), &env).await;
    let sid = hero.mock_session(&mock).await;
    let v: Value = hero
        .post(
            &format!("/api/sessions/{sid}/messages"),
            json!({"content": "[[mock text=\"before\"]]"}),
        )
        .await;
    assert_eq!(v["content"], "before", "{v}");

    // Load: a tab's list of sessions, read every 20 ms, all through.
    let (c, base) = (hero.c.clone(), hero.base.clone());
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let loader = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut statuses = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok(r) = c.get(format!("{base}/api/sessions")).send().await {
                    statuses.push(r.status().as_u16());
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            statuses
        })
    };
    let events = hero
        .c
        .get(format!("{}/api/sessions/{sid}/events", hero.base))
        .send()
        .await
        .unwrap();
    assert_eq!(events.status(), 200);
    let mut events = sse(events.bytes_stream());

    pg.halt();
    let get = |path: &str| {
        hero.c
            .get(format!("{}{path}", hero.base))
            .timeout(Duration::from_secs(30))
            .send()
    };
    // Down: 503 with words, soon.
    let deadline = Instant::now() + Duration::from_secs(20);
    let why = loop {
        let r = get("/api/sessions").await.unwrap();
        if r.status() == 503 {
            break r.text().await.unwrap();
        }
        assert!(
            Instant::now() < deadline,
            "still {} with the database down",
            r.status()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(why.contains("database"), "{why}");
    let ready = get("/readyz").await.unwrap();
    assert_eq!(ready.status(), 503);
    assert!(ready.text().await.unwrap().contains("database"));
    assert_eq!(
        get("/healthz").await.unwrap().status(),
        200,
        "the process is up"
    );
    let posted = hero
        .c
        .post(format!("{}/api/sessions/{sid}/messages", hero.base))
        .json(&json!({"content": "[[mock text=\"lost\"]] while down"}))
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .unwrap();
    assert_eq!(posted.status(), 503);
    // The tab's stream ends, saying to reconnect.
    let ended = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(Ok(ev)) = events.next().await {
            if ev.event == "error" {
                return ev.data;
            }
        }
        String::new()
    })
    .await
    .expect("the event stream ended");
    assert!(ended.contains("reconnect"), "{ended}");

    pg.resume();
    // Back by itself.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = get("/api/sessions").await.unwrap();
        if r.status() == 200 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still {} with the database back",
            r.status()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(get("/readyz").await.unwrap().status(), 200);
    let v: Value = hero
        .post(
            &format!("/api/sessions/{sid}/messages"),
            json!({"content": "[[mock text=\"after\"]]"}),
        )
        .await;
    assert_eq!(v["content"], "after", "{v}");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let statuses = loader.await.unwrap();
    assert!(
        statuses.contains(&200) && statuses.contains(&503),
        "{statuses:?}"
    );
    assert!(
        statuses.iter().all(|s| *s == 200 || *s == 503),
        "only served or unavailable: {statuses:?}"
    );
    // Nothing of the message refused while down is stored.
    let frames = hero.frames(sid).await;
    let said: Vec<_> = frames
        .iter()
        .filter(|f| f["author_type"] == "user")
        .map(|f| {
            f["payload"]["content"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert_eq!(said.len(), 2, "{said:?}");
    assert!(said.iter().all(|c| !c.contains("while down")), "{said:?}");
    assert_eq!(agent_messages(&frames).len(), 2);
}

/// `database_url` with `sslmode=verify-full` and the server's certificate as its root:
/// Hero connects over TLS (the server says so of the connection); without the root, the
/// certificate is refused and the start stops with a line naming the host.
#[tokio::test]
async fn postgresql_over_tls_is_verified() {
    let (pg, url) = OwnPostgres::start_with(&[("HERO_PG_SSL", "1")]);
    let root = pg.dir.join("data/root.crt");
    // The authority that signed the server's certificate (readable by all).
    let verified = format!("{url}?sslmode=verify-full&sslrootcert={}", root.display());
    let data = tempfile::tempdir().unwrap();
    let migrate = |url: &str| {
        Command::new(env!("CARGO_BIN_EXE_hero"))
            .args(["migrate"])
            .env("HERO_DATA_DIR", data.path())
            .env("HERO_DATABASE_URL", url)
            .env("HERO_MASTER_KEY", "55".repeat(32))
            .env_remove("HERO_CONFIG")
            .output()
            .unwrap()
    };
    let ok = migrate(&verified);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    // The same driver, the same URL: the connection is encrypted.
    let opts = hero_backend::store::postgres_options(&verified).unwrap();
    use sqlx::Connection;
    let mut c = sqlx::PgConnection::connect_with(&opts).await.unwrap();
    let ssl: bool = sqlx::query_scalar("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
        .fetch_one(&mut c)
        .await
        .unwrap();
    assert!(ssl);
    // Verified against the public roots only: this certificate is no one's, refused.
    let refused = migrate(&format!("{url}?sslmode=verify-full"));
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("127.0.0.1"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
}
