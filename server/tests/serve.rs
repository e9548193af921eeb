//! `hero serve` as an operator and a browser meet it, over real sockets: the first run's
//! administrator password in a private file (never in the output), the data directory's
//! modes, the headers every answer carries, and the `Host` pinning that turns DNS
//! rebinding away.

mod support;

use std::io::Read;
use std::process::{Child, Command, Stdio};

/// `hero serve` on a free port of `ip`, its data in `data`; answers with its base URL.
async fn serve(data: &std::path::Path, ip: &str, extra_env: &[(&str, &str)]) -> (Served, String) {
    let site = data.join("site");
    serve_bin(
        env!("CARGO_BIN_EXE_hero").as_ref(),
        data,
        ip,
        Some(&site),
        extra_env,
    )
    .await
}

/// The binary at `bin` serving on a free port of `ip`, its data in `data`, its site in
/// `site` (unset: the one inside the binary, else the default).
async fn serve_bin(
    bin: &std::path::Path,
    data: &std::path::Path,
    ip: &str,
    site: Option<&std::path::Path>,
    extra_env: &[(&str, &str)],
) -> (Served, String) {
    let mut cmd = Command::new(bin);
    cmd.args(["serve", "--addr", &format!("{ip}:0")])
        .env("HERO_DATA_DIR", data)
        .env_remove("HERO_SITE_ROOT")
        .env("HERO_LOG", "warn")
        .env_remove("HERO_MASTER_KEY")
        .env_remove("HERO_CONFIG")
        .env_remove("HERO_PUBLIC_URL")
        .stderr(Stdio::piped());
    if let Some(site) = site {
        cmd.env("HERO_SITE_ROOT", site);
    }
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    let (child, base, printed) = support::process::listening(&mut cmd).await;
    // Killed if the test fails before it reads the output: no server outlives its test.
    (Served(Some(child), Some(printed)), base)
}

/// Stops `child` and answers with everything it wrote.
/// A `hero serve` of a test's, killed when dropped.
struct Served(Option<Child>, Option<support::process::Printed>);

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn output_of(mut served: Served) -> String {
    let mut child = served.0.take().expect("a server");
    let _ = child.kill();
    let _ = child.wait();
    let mut out = served.1.take().expect("its output").all();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    out
}

#[cfg(unix)]
fn mode(p: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[tokio::test]
async fn the_first_run_password_is_in_a_private_file_and_nowhere_else() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (child, base) = serve(&data, "127.0.0.1", &[]).await;
    let file = data.join("initial-admin-password");
    let password = std::fs::read_to_string(&file).unwrap().trim().to_owned();
    assert!(password.len() >= 16, "a strong password: {password:?}");
    #[cfg(unix)]
    {
        assert_eq!(mode(&file), 0o600, "the password file is private");
        // Searchable by the sandbox's own uid under a server run as root, never listable.
        let private = if hero_backend::execution::sandbox::running_as_root() {
            0o711
        } else {
            0o700
        };
        assert_eq!(mode(&data), private, "the data directory is private");
        assert_eq!(mode(&data.join("master.key")), 0o600);
        for db in ["hero.db", "hero.db-wal", "hero.db-shm"] {
            assert_eq!(mode(&data.join(db)), 0o600, "{db} is its owner's alone");
        }
    }
    let login = reqwest::Client::new()
        .post(format!("{base}/api/auth/login"))
        .json(&serde_json::json!({"username": "admin", "password": password}))
        .send()
        .await
        .unwrap();
    assert_eq!(login.status(), 200, "the file's password signs in");
    let out = output_of(child);
    assert!(!out.contains(&password), "the password was printed: {out}");
    assert!(
        out.contains(&file.display().to_string()),
        "the path is printed: {out}"
    );

    // The next start makes no account and leaves the file be.
    let (child, _) = serve(&data, "127.0.0.1", &[]).await;
    let out = output_of(child);
    assert!(!out.contains("First run"), "{out}");
    assert_eq!(std::fs::read_to_string(&file).unwrap().trim(), password);
}

#[tokio::test]
async fn every_answer_carries_the_security_headers() {
    let dir = tempfile::tempdir().unwrap();
    let (child, base) = serve(&dir.path().join("data"), "127.0.0.1", &[]).await;
    let c = reqwest::Client::new();
    let page = c.get(format!("{base}/login")).send().await.unwrap();
    let h = page.headers().clone();
    let html = page.text().await.unwrap();
    let csp = h["content-security-policy"].to_str().unwrap().to_owned();
    // The page's policy names the nonce its scripts carry, and only that one.
    let nonce = csp
        .split("'nonce-")
        .nth(1)
        .and_then(|r| r.split('\'').next())
        .expect("a nonce in the page's policy");
    assert!(nonce.len() >= 16, "{csp}");
    assert!(html.contains(&format!("nonce=\"{nonce}\"")), "{html}");
    for part in [
        "style-src 'self'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "'wasm-unsafe-eval'",
    ] {
        assert!(csp.contains(part), "{part} in {csp}");
    }
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    // A site file that is not there is not kept (the next build may bring it).
    let missing = c
        .get(format!("{base}/pkg/hero.AAAAAAAAAAAAAAAAAAAAAA.wasm"))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    assert_eq!(missing.headers()["cache-control"], "no-store");
    // Another load, another nonce.
    let again = c.get(format!("{base}/login")).send().await.unwrap();
    assert!(
        !again.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .contains(nonce)
    );
    // A page is compressed as the browser accepts; JSON is not (nor a feed's events, which
    // are no HTML either).
    let plain = c.get(format!("{base}/login")).send().await.unwrap();
    assert!(plain.headers().get("content-encoding").is_none());
    let plain = plain.bytes().await.unwrap().len();
    for (accept, expect) in [("gzip", "gzip"), ("br, gzip", "br")] {
        let r = c
            .get(format!("{base}/login"))
            .header("accept-encoding", accept)
            .send()
            .await
            .unwrap();
        assert_eq!(r.headers()["content-encoding"], expect);
        let sent = r.bytes().await.unwrap().len();
        assert!(
            sent * 4 < plain * 3,
            "{accept}: {sent} bytes for a {plain}-byte page"
        );
    }
    let json = c
        .get(format!("{base}/api/me"))
        .header("accept-encoding", "br, gzip")
        .send()
        .await
        .unwrap();
    assert!(json.headers().get("content-encoding").is_none());
    // The API and a missing page: the same headers, a policy without a nonce, no caching.
    for path in ["/login", "/api/me", "/no-such-page", "/api/sessions"] {
        let r = c.get(format!("{base}{path}")).send().await.unwrap();
        let h = r.headers();
        assert_eq!(h["x-content-type-options"], "nosniff", "{path}");
        assert_eq!(h["referrer-policy"], "same-origin", "{path}");
        assert_eq!(h["cache-control"], "no-store", "{path}");
        assert!(
            h["content-security-policy"]
                .to_str()
                .unwrap()
                .contains("frame-ancestors 'none'"),
            "{path}"
        );
    }
    // A page runs its loader by its nonce; an answer without its own policy allows that
    // loader alone, by its hash (should a page's render ever leave its policy unset, the
    // page still starts).
    let page = c.get(format!("{base}/login")).send().await.unwrap();
    let own = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    let html = page.text().await.unwrap();
    let nonce = own
        .split("'nonce-")
        .nth(1)
        .and_then(|r| r.split('\'').next())
        .unwrap();
    let open = format!("<script type=\"module\" nonce=\"{nonce}\">");
    let loader = html
        .split(&open)
        .nth(1)
        .and_then(|r| r.split("</script>").next())
        .unwrap();
    let r = c.get(format!("{base}/api/me")).send().await.unwrap();
    let default = r.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    let hash = server::web::loader_hash(loader);
    assert!(
        default.contains(&format!("'sha256-{hash}'")),
        "{default} for {loader}"
    );
    assert!(!default.contains("nonce"), "{default}");
    output_of(child);
}

#[tokio::test]
async fn a_request_naming_another_host_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let c = reqwest::Client::new();
    let with_host =
        |base: &str, host: &str| c.get(format!("{base}/api/me")).header("host", host).send();
    // Served on loopback: only loopback names (a rebinding attacker's page names its own).
    let (child, base) = serve(&dir.path().join("a"), "127.0.0.1", &[]).await;
    let port = base.rsplit(':').next().unwrap();
    for host in [format!("127.0.0.1:{port}"), format!("localhost:{port}")] {
        assert_eq!(
            with_host(&base, &host).await.unwrap().status(),
            401,
            "{host}"
        );
    }
    for host in [
        format!("attacker.example:{port}"),
        "hero.example.com".into(),
    ] {
        let r = with_host(&base, &host).await.unwrap();
        assert_eq!(r.status(), 421, "{host}");
        assert!(r.text().await.unwrap().contains("HERO_PUBLIC_URL"));
    }
    output_of(child);
    // With a public URL: that host alone.
    let (child, base) = serve(
        &dir.path().join("b"),
        "127.0.0.1",
        &[("HERO_PUBLIC_URL", "https://hero.example.com")],
    )
    .await;
    assert_eq!(
        with_host(&base, "hero.example.com").await.unwrap().status(),
        401
    );
    let port = base.rsplit(':').next().unwrap();
    assert_eq!(
        with_host(&base, &format!("127.0.0.1:{port}"))
            .await
            .unwrap()
            .status(),
        421
    );
    output_of(child);
}

/// Bad input answers 4xx, never 500: every server function, called with a body it cannot
/// read (a form where it takes JSON and JSON where it takes a form, nothing, a wrong type,
/// only unknown fields, broken encodings, a body past the limit), and the site's files
/// asked for by names no file system holds. The log has no `ERROR` line for any of it:
/// none is a fault of the server's.
#[tokio::test]
async fn malformed_calls_answer_4xx_and_log_no_error() {
    let dir = tempfile::tempdir().unwrap();
    let (child, base) = serve(&dir.path().join("data"), "127.0.0.1", &[]).await;
    // A connection per call: one the server closed after a body it did not read is not
    // used again.
    let c = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let paths = server::web::server_fn_paths();
    assert!(paths.len() >= 20, "{paths:?}");
    let huge = format!("{{\"x\": \"{}\"}}", "a".repeat(3 << 20));
    let bodies: [(&str, &str); 10] = [
        (
            "application/x-www-form-urlencoded",
            "session_id=x&content=1",
        ),
        ("application/x-www-form-urlencoded", "%zz=%&&=="),
        ("application/x-www-form-urlencoded", "id[]]=1&id=2"),
        ("application/json", ""),
        ("application/json", "[1, 2]"),
        ("application/json", "\"text\""),
        ("application/json", "{\"zzz_unknown\": 1}"),
        (
            "application/json",
            "{\"session_id\": \"not a number\", \"id\": {}, \"agent_id\": []}",
        ),
        ("application/json", "{"),
        ("text/plain", "hello"),
    ];
    let mut answered = Vec::new();
    for (path, method) in &paths {
        // A function without arguments reads any form as no arguments: not malformed.
        for (ty, body) in bodies
            .iter()
            .copied()
            .chain([("application/json", huge.as_str())])
        {
            let sent = c
                .request(method.clone(), format!("{base}{path}"))
                .header("content-type", ty)
                .body(body.to_owned())
                .send()
                .await;
            // Past the limit, the server may answer before it has read the body, and close
            // the connection as the client still sends: the client then sees no answer.
            let r = match sent {
                Err(e) if body.len() > 1 << 20 && e.is_request() => {
                    answered.push(0);
                    continue;
                }
                r => r.unwrap(),
            };
            let status = r.status();
            let text = r.text().await.unwrap_or_default();
            assert!(
                !status.is_server_error(),
                "{method} {path} with {ty} {:?}: {status} {text}",
                &body[..body.len().min(40)]
            );
            assert!(
                status.is_client_error(),
                "{method} {path} with {ty} {body:?}: {status}"
            );
            answered.push(status.as_u16());
        }
    }
    for name in [
        "a".repeat(5000),
        "é".repeat(300),
        format!("{}/x", "b".repeat(300)),
        "%00".into(),
        "..%2f..%2fetc%2fpasswd".into(),
        "a/b/c/d/e/f".into(),
        "%ff%fe".into(),
    ] {
        for under in ["/pkg/", "/", "/_fn/"] {
            let r = c.get(format!("{base}{under}{name}")).send().await.unwrap();
            assert!(
                r.status().is_client_error(),
                "{under}{}: {}",
                &name[..name.len().min(40)],
                r.status()
            );
        }
        // A page's address with such a session id is a page (the sign-in's, here).
        let r = c.get(format!("{base}/s/{name}")).send().await.unwrap();
        assert!(!r.status().is_server_error(), "/s/…: {}", r.status());
    }
    let out = output_of(child);
    assert!(
        !out.contains("ERROR"),
        "a caller's fault was logged as the server's: {out}"
    );
    assert!(
        answered.contains(&400) && answered.contains(&413),
        "{answered:?}"
    );
    let n = |s: u16| answered.iter().filter(|&&a| a == s).count();
    println!(
        "{} calls: {} answered 400, {} 401, {} 413, {} closed while sending",
        answered.len(),
        n(400),
        n(401),
        n(413),
        n(0)
    );
}

/// A free port on loopback.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

#[tokio::test]
async fn the_operators_endpoints_answer_and_the_metrics_stay_off_the_public_address() {
    let dir = tempfile::tempdir().unwrap();
    let metrics_at = format!("127.0.0.1:{}", free_port());
    let (child, base) = serve(
        &dir.path().join("data"),
        "127.0.0.1",
        &[
            ("HERO_METRICS_ADDR", &metrics_at),
            ("HERO_PUBLIC_URL", "http://hero.test"),
            ("HERO_LOG", "info"),
            ("HERO_LOG_FORMAT", "json"),
        ],
    )
    .await;
    let c = reqwest::Client::new();
    // A load balancer's health check names the address it reaches, which the pinning of
    // `Host` refuses for everything else.
    let r = c.get(format!("{base}/healthz")).send().await.unwrap();
    assert_eq!(
        (r.status().as_u16(), r.text().await.unwrap()),
        (200, "ok\n".into())
    );
    let r = c.get(format!("{base}/readyz")).send().await.unwrap();
    assert_eq!(
        (r.status().as_u16(), r.text().await.unwrap()),
        (200, "ready\n".into())
    );
    let r = c.get(format!("{base}/login")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 421);
    let as_public = |method: &str, path: &str| {
        c.request(method.parse().unwrap(), format!("{base}{path}"))
            .header("host", "hero.test")
    };
    // Not on the public address, whatever name it is asked by.
    let r = as_public("GET", "/metrics").send().await.unwrap();
    let body = r.text().await.unwrap();
    assert!(!body.contains("hero_http_requests"), "{body}");
    // Made-up paths and methods are one label each, however many there are.
    for i in 0..50 {
        as_public("GET", &format!("/made-up-{i}"))
            .send()
            .await
            .unwrap();
        as_public("BREW", &format!("/api/made-up-{i}"))
            .send()
            .await
            .unwrap();
    }
    let text = reqwest::get(format!("http://{metrics_at}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let samples = support::metric_samples(&text);
    let requests: Vec<_> = samples
        .iter()
        .filter(|s| s.0 == "hero_http_requests")
        .collect();
    let label = |s: &support::Metric, k: &str| s.1.get(k).cloned().unwrap_or_default();
    let routes: std::collections::BTreeSet<String> =
        requests.iter().map(|s| label(s, "route")).collect();
    // The `/login` refused for its `Host` is counted too.
    let expected = ["/healthz", "/login", "/readyz", "unmatched"];
    assert_eq!(routes, expected.map(String::from).into(), "{text}");
    assert_eq!(
        support::metric(
            &samples,
            "hero_http_requests",
            &[("route", "/login"), ("status", "421")]
        ),
        Some(1.0),
        "{text}"
    );
    let unmatched: f64 = requests
        .iter()
        .filter(|s| label(s, "route") == "unmatched")
        .map(|s| s.2)
        .sum();
    assert!(unmatched >= 100.0, "{text}");
    assert_eq!(
        support::metric(
            &samples,
            "hero_http_requests",
            &[("route", "/healthz"), ("method", "GET"), ("status", "200")]
        ),
        Some(1.0),
        "{text}"
    );
    for method in requests.iter().map(|s| label(s, "method")) {
        assert!(["GET", "other"].contains(&method.as_str()), "{method}");
    }
    // The health checks answer on the metrics address too; nothing else does.
    let at = |path: &str| format!("http://{metrics_at}{path}");
    assert_eq!(
        reqwest::get(at("/readyz")).await.unwrap().status().as_u16(),
        200
    );
    assert_eq!(
        reqwest::get(at("/login")).await.unwrap().status().as_u16(),
        404
    );
    // `log_format = json`: one JSON object a line.
    let out = output_of(child);
    assert!(
        out.contains(&format!(
            "Metrics are served on http://{metrics_at}/metrics"
        )),
        "{out}"
    );
    let logged: Vec<serde_json::Value> = out
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(
        logged
            .iter()
            .any(|l| l["level"] == "INFO" && l["fields"]["message"].is_string()),
        "{out}"
    );
}

#[test]
fn the_metrics_address_is_never_the_public_one() {
    let out = Command::new(env!("CARGO_BIN_EXE_hero"))
        .args([
            "settings",
            "--addr",
            "127.0.0.1:3999",
            "--metrics-addr",
            "127.0.0.1:3999",
        ])
        .env_remove("HERO_CONFIG")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("metrics_addr must not be addr's port"),
        "{err}"
    );
}

/// Behind a proxy at `/hero`, whether it strips the prefix or passes it on: the pages write
/// every URL under it, the site's files, the API, server functions and the health check
/// answer at both, a redirect and the sign-in cookie stay under it.
#[tokio::test]
async fn under_a_base_path_everything_lives_under_the_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(data.join("site/pkg")).unwrap();
    std::fs::write(data.join("site/pkg/probe.js"), "// the site's file").unwrap();
    let (child, root) = serve(&data, "127.0.0.1", &[("HERO_BASE_PATH", "/hero/")]).await;
    let c = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let get = |path: String| {
        let c = c.clone();
        // As a browser asks: a redirect is then a 302.
        async move {
            c.get(path)
                .header("accept", "text/html")
                .send()
                .await
                .unwrap()
        }
    };

    // A proxy that passes the prefix on, and one that strips it: the same page.
    for prefix in ["/hero", ""] {
        let page = get(format!("{root}{prefix}/login")).await;
        assert_eq!(page.status(), 200, "{prefix}/login");
        let html = page.text().await.unwrap();
        for written in [
            r#"<meta name="hero-base" content="/hero""#,
            r#"href="/hero/favicon.svg""#,
            r#"action="/hero/_fn/"#,
            r#"data-then="/hero/""#,
            "/hero/pkg/hero",
        ] {
            assert!(
                html.contains(written),
                "{prefix}/login lacks {written}: {html}"
            );
        }
        let file = get(format!("{root}{prefix}/pkg/probe.js")).await;
        assert_eq!(file.status(), 200, "{prefix}/pkg/probe.js");
        assert_eq!(get(format!("{root}{prefix}/healthz")).await.status(), 200);
        // Signed out, the workspace sends the browser to the sign-in page under the prefix.
        let home = get(format!("{root}{prefix}/")).await;
        assert!(
            home.status().is_redirection(),
            "{prefix}/: {}",
            home.status()
        );
        assert_eq!(home.headers()["location"], "/hero/login", "{prefix}/");
    }
    // Only the whole segment is the prefix: /heroes is no page of Hero's.
    assert_eq!(get(format!("{root}/heroes/login")).await.status(), 404);

    let password = std::fs::read_to_string(data.join("initial-admin-password")).unwrap();
    let login = c
        .post(format!("{root}/hero/api/auth/login"))
        .json(&serde_json::json!({"username": "admin", "password": password.trim()}))
        .send()
        .await
        .unwrap();
    assert_eq!(login.status(), 200);
    let cookie = login.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(cookie.contains("; Path=/hero;"), "{cookie}");
    let token = login.json::<serde_json::Value>().await.unwrap()["token"]
        .as_str()
        .unwrap()
        .to_owned();
    let session = c
        .post(format!("{root}/hero/api/sessions"))
        .bearer_auth(&token)
        .json(&serde_json::json!({"name": "Under a prefix"}))
        .send()
        .await
        .unwrap();
    assert_eq!(session.status(), 201, "a session is made through /hero/api");
    let id = session.json::<serde_json::Value>().await.unwrap()["id"]
        .as_i64()
        .unwrap();
    // The page itself, signed in by the cookie the browser would send back.
    let token_cookie = cookie.split(';').next().unwrap().to_owned();
    let page = c
        .get(format!("{root}/hero/s/{id}"))
        .header("cookie", &token_cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    for written in [
        format!(r#"href="/hero/s/{id}""#),
        r#"href="/hero/agents""#.to_owned(),
        r#"href="/hero/permissions""#.to_owned(),
        r#"data-then="/hero/s/{id}""#.to_owned(),
        r#"data-then="/hero/login""#.to_owned(),
    ] {
        assert!(html.contains(&written), "/hero/s/{id} lacks {written}");
    }
    assert!(
        !html.contains(r#"href="/s/"#) && !html.contains(r#"action="/_fn"#),
        "a URL outside the prefix: {html}"
    );
    // A server function through the prefix (the path the sign-out form names): signing out
    // clears the cookie there.
    let action = html
        .split(r#"action=""#)
        .map(|rest| rest.split('"').next().unwrap())
        .find(|a| a.starts_with("/hero/_fn/logout"))
        .expect("the sign-out form");
    let out = c
        .post(format!("{root}{action}"))
        .header("cookie", &token_cookie)
        .header("accept", "application/json")
        .send()
        .await
        .unwrap();
    let cleared = out
        .headers()
        .get("set-cookie")
        .map(|v| v.to_str().unwrap().to_owned());
    assert!(out.status().is_success(), "{}", out.status());
    assert!(
        cleared
            .as_deref()
            .is_some_and(|c| c.contains("Max-Age=0") && c.contains("Path=/hero;")),
        "{cleared:?}"
    );
    output_of(child);
}

#[test]
fn a_malformed_base_path_stops_the_start_with_a_clear_message() {
    let out = Command::new(env!("CARGO_BIN_EXE_hero"))
        .args(["settings", "--base-path", "hero"])
        .env_remove("HERO_CONFIG")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("base_path \"hero\" must start with /"),
        "{err}"
    );
}

/// A site as a build leaves it in `dir`: hashed names, `public/`'s icon, each compressed by
/// the build's own script; and the build's hashes in `dir/hash.txt`.
fn built_site(dir: &std::path::Path, marker: &str) {
    let pkg = dir.join("site/pkg");
    std::fs::create_dir_all(&pkg).unwrap();
    let js = format!("export default async function init() {{}} // {marker}\n").repeat(40);
    std::fs::write(pkg.join("hero.Js0123456789abcdefXY.js"), js).unwrap();
    std::fs::write(
        pkg.join("hero.Wa0123456789abcdefXY.wasm"),
        [0u8, 97, 115, 109, 1, 0, 0, 0].repeat(64),
    )
    .unwrap();
    std::fs::write(
        pkg.join("hero.Cs0123456789abcdefXY.css"),
        "body { margin: 0 }\n".repeat(30),
    )
    .unwrap();
    std::fs::write(
        dir.join("site/favicon.svg"),
        "<svg xmlns=\"http://www.w3.org/2000/svg\"/>",
    )
    .unwrap();
    std::fs::write(
        dir.join("hash.txt"),
        "js: Js0123456789abcdefXY\nwasm: Wa0123456789abcdefXY\ncss: Cs0123456789abcdefXY\nsplit: Sp0123456789abcdefXY\n",
    )
    .unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/compress-site.sh");
    let done = Command::new("bash")
        .arg(script)
        .arg(dir.join("site"))
        .status()
        .unwrap();
    assert!(done.success(), "compress-site.sh");
}

/// `hero embed-site` run by `bin`, writing `out`; answers with its size.
fn embed(bin: &std::path::Path, dir: &std::path::Path, out: &std::path::Path) -> u64 {
    let done = Command::new(bin)
        .arg("embed-site")
        .arg("--site")
        .arg(dir.join("site"))
        .arg("--hashes")
        .arg(dir.join("hash.txt"))
        .arg("--out")
        .arg(out)
        .env_remove("HERO_CONFIG")
        .output()
        .unwrap();
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    std::fs::metadata(out).unwrap().len()
}

/// A binary that carries its site serves the whole of it with nothing beside it: pages
/// link the build's names, each file answers in the encoding the browser takes, and
/// `site_root` still overrides it.
#[tokio::test]
async fn a_binary_with_its_site_inside_serves_it_alone() {
    let dir = tempfile::tempdir().unwrap();
    let build = dir.path().join("build");
    built_site(&build, "embedded");
    let bin = dir.path().join("bin/hero");
    std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
    let plain = std::fs::metadata(env!("CARGO_BIN_EXE_hero")).unwrap().len();
    let size = embed(env!("CARGO_BIN_EXE_hero").as_ref(), &build, &bin);
    // Embedding again replaces the site the binary carries; it does not stack a second.
    assert_eq!(embed(&bin, &build, &bin), size);
    assert!(size > plain, "the site is inside: {size} vs {plain}");
    let file = |name: &str| std::fs::read(build.join("site/pkg").join(name)).unwrap();
    let js = "hero.Js0123456789abcdefXY.js";
    let (raw, br, gz) = (
        file(js),
        file(&format!("{js}.br")),
        file(&format!("{js}.gz")),
    );
    // Nothing of the build is left beside it: the binary alone.
    let kept = dir.path().join("kept");
    std::fs::rename(&build, &kept).unwrap();

    let data = dir.path().join("data");
    let (child, base) = serve_bin(&bin, &data, "127.0.0.1", None, &[]).await;
    let c = reqwest::Client::new();
    let page = c
        .get(format!("{base}/login"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for linked in [
        "/pkg/hero.Js0123456789abcdefXY.js",
        "/pkg/hero.Wa0123456789abcdefXY.wasm",
        "/pkg/hero.Cs0123456789abcdefXY.css",
    ] {
        assert!(page.contains(linked), "the page links {linked}: {page}");
    }
    let get = |path: &str, encoding: Option<&str>| {
        let mut r = c.get(format!("{base}{path}"));
        if let Some(e) = encoding {
            r = r.header("accept-encoding", e);
        }
        r.send()
    };
    for (accept, body, encoding) in [
        (Some("gzip, deflate, br"), &br, Some("br")),
        (Some("gzip"), &gz, Some("gzip")),
        (Some("br;q=0, gzip"), &gz, Some("gzip")),
        (None, &raw, None),
    ] {
        let r = get(&format!("/pkg/{js}"), accept).await.unwrap();
        assert_eq!(r.status(), 200, "{accept:?}");
        let h = r.headers().clone();
        assert_eq!(
            h.get("content-encoding").map(|v| v.to_str().unwrap()),
            encoding,
            "{accept:?}"
        );
        assert_eq!(h["content-type"], "text/javascript", "{accept:?}");
        assert!(h["cache-control"].to_str().unwrap().contains("immutable"));
        assert_eq!(&r.bytes().await.unwrap()[..], &body[..], "{accept:?}");
    }
    let wasm = get("/pkg/hero.Wa0123456789abcdefXY.wasm", None)
        .await
        .unwrap();
    assert_eq!(wasm.headers()["content-type"], "application/wasm");
    let icon = get("/favicon.svg", None).await.unwrap();
    assert_eq!(icon.status(), 200);
    assert_eq!(icon.headers()["content-type"], "image/svg+xml");
    // A name the site lacks is not found; the build's hashes are not the site's to serve.
    assert_eq!(
        get("/pkg/hero.nothing.js", None).await.unwrap().status(),
        404
    );
    assert_eq!(get("/hash.txt", None).await.unwrap().status(), 404);
    output_of(child);

    // site_root set: that directory, whatever the binary carries.
    let other = dir.path().join("other");
    built_site(&other, "from the directory");
    let (child, base) = serve_bin(&bin, &data, "127.0.0.1", Some(&other.join("site")), &[]).await;
    let r = reqwest::get(format!("{base}/pkg/{js}")).await.unwrap();
    assert!(r.text().await.unwrap().contains("from the directory"));
    output_of(child);
}

#[test]
fn embedding_a_directory_with_no_site_or_an_unsplit_one_says_so() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("hash.txt"), "js: x\n").unwrap();
    // What `embed-site` says of the directory, which must be a refusal that writes nothing.
    let refusal = || {
        let out = Command::new(env!("CARGO_BIN_EXE_hero"))
            .args(["embed-site", "--site"])
            .arg(dir.path())
            .arg("--hashes")
            .arg(dir.path().join("hash.txt"))
            .arg("--out")
            .arg(dir.path().join("hero"))
            .env_remove("HERO_CONFIG")
            .output()
            .unwrap();
        assert!(!out.status.success());
        assert!(!dir.path().join("hero").exists(), "nothing is written");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = refusal();
    assert!(err.contains("holds no built site"), "{err}");
    // A site built without --split: its wasm would ask for a module no file provides.
    std::fs::create_dir_all(dir.path().join("pkg")).unwrap();
    let err = refusal();
    assert!(err.contains("built without --split"), "{err}");
}

/// `hero serve` on PostgreSQL: migrated at start, the first run's account made there, found
/// again by the next start; readiness through PostgreSQL; a second process with another
/// master key on the same database refuses to start.
#[tokio::test]
async fn serving_on_postgresql_keeps_everything_there() {
    let url = hero_backend::store::testing::postgres_url().await;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let key = "11".repeat(32);
    let env = [
        ("HERO_DATABASE_URL", url.as_str()),
        ("HERO_MASTER_KEY", key.as_str()),
    ];
    let (child, base) = serve(&data, "127.0.0.1", &env).await;
    assert_eq!(
        reqwest::get(format!("{base}/readyz"))
            .await
            .unwrap()
            .status(),
        200
    );
    let password = std::fs::read_to_string(data.join("initial-admin-password")).unwrap();
    let login = reqwest::Client::new()
        .post(format!("{base}/api/auth/login"))
        .json(&serde_json::json!({"username": "admin", "password": password.trim()}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        login.status(),
        200,
        "the account made on PostgreSQL signs in"
    );
    let out = output_of(child);
    assert!(
        !data.join("hero.db").exists(),
        "no SQLite file beside: {out}"
    );
    // The next start finds the account: no first run again.
    let (child, _) = serve(&data, "127.0.0.1", &env).await;
    let out = output_of(child);
    assert!(!out.contains("First run"), "{out}");
    // Another master key on the same database: refused, saying why.
    let other = "22".repeat(32);
    let refused = Command::new(env!("CARGO_BIN_EXE_hero"))
        .args(["migrate"])
        .env("HERO_DATA_DIR", dir.path().join("other"))
        .env("HERO_DATABASE_URL", &url)
        .env("HERO_MASTER_KEY", &other)
        .env_remove("HERO_CONFIG")
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("master key does not match"), "{err}");
}

#[test]
fn an_unreachable_or_malformed_database_url_stops_the_start_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let run = |url: &str| {
        Command::new(env!("CARGO_BIN_EXE_hero"))
            .args(["migrate"])
            .env("HERO_DATA_DIR", &data)
            .env("HERO_DATABASE_URL", url)
            .env("HERO_MASTER_KEY", "11".repeat(32))
            .env_remove("HERO_CONFIG")
            .output()
            .unwrap()
    };
    // Nothing listens on port 1.
    let out = run("postgres://hero:pw@127.0.0.1:1/hero");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("127.0.0.1:1") && err.contains("database_url"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(!data.join("hero.db").exists(), "nothing written");
    let out = run("mysql://hero@host/db");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("database_url must start with postgres://"),
        "{err}"
    );
}
