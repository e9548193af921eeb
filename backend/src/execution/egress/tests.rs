//! The egress policy's table: addresses and URL forms, each allowed or refused with its
//! class, all through one [`check`]; then the resolver's screen, and a request to a name
//! that resolves to loopback.

use super::*;

/// What the policy makes of `url`: `public` (goes out, names checked again when resolved),
/// `allowed` (an administrator allowed its host and port), a refused class, or the form
/// error.
fn outcome(policy: &EgressPolicy, url: &str) -> String {
    match policy.check(url) {
        Ok(u) if u.is_allowed() => "allowed".into(),
        Ok(_) => "public".into(),
        Err(UrlError::Refused(r)) => r.reason.label(),
        Err(UrlError::NotAUrl(_)) => "not-a-url".into(),
        Err(UrlError::Scheme) => "scheme".into(),
        Err(UrlError::UserInfo) => "userinfo".into(),
        Err(UrlError::Query) => "query".into(),
        Err(UrlError::Fragment) => "fragment".into(),
    }
}

/// Runs a table; every wrong row is reported at once.
fn check(policy: &EgressPolicy, table: &[(&str, &str)]) -> usize {
    let wrong: Vec<String> = table
        .iter()
        .filter_map(|(url, want)| {
            let got = outcome(policy, url);
            (got != *want).then(|| format!("{url}: expected {want}, got {got}"))
        })
        .collect();
    assert!(
        wrong.is_empty(),
        "{} wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    table.len()
}

/// Each IPv4 range, its first and last address, and the public neighbours either side.
const IPV4: &[(&str, &str)] = &[
    ("http://0.0.0.0/", "unspecified"),
    ("http://0.0.0.1/", "this-network"),
    ("http://0.255.255.255/", "this-network"),
    ("http://1.0.0.0/", "public"),
    ("http://9.255.255.255/", "public"),
    ("http://10.0.0.0/", "private"),
    ("http://10.0.0.1/", "private"),
    ("http://10.255.255.255/", "private"),
    ("http://11.0.0.0/", "public"),
    ("http://100.63.255.255/", "public"),
    ("http://100.64.0.0/", "cgnat"),
    ("http://100.100.100.200/", "cgnat"),
    ("http://100.127.255.255/", "cgnat"),
    ("http://100.128.0.0/", "public"),
    ("http://126.255.255.255/", "public"),
    ("http://127.0.0.0/", "loopback"),
    ("http://127.0.0.1/", "loopback"),
    ("http://127.0.1.1/", "loopback"),
    ("http://127.255.255.255/", "loopback"),
    ("http://128.0.0.0/", "public"),
    ("http://169.253.255.255/", "public"),
    ("http://169.254.0.0/", "link-local"),
    ("http://169.254.169.254/", "link-local"),
    ("http://169.254.169.254/latest/meta-data/", "link-local"),
    ("http://169.254.170.2/", "link-local"),
    ("http://169.254.255.255/", "link-local"),
    ("http://169.255.0.0/", "public"),
    ("http://172.15.255.255/", "public"),
    ("http://172.16.0.0/", "private"),
    ("http://172.17.0.1/", "private"),
    ("http://172.31.255.255/", "private"),
    ("http://172.32.0.0/", "public"),
    ("http://192.0.0.0/", "reserved"),
    ("http://192.0.0.255/", "reserved"),
    ("http://192.0.1.0/", "public"),
    ("http://192.0.2.0/", "documentation"),
    ("http://192.0.2.255/", "documentation"),
    ("http://192.0.3.0/", "public"),
    ("http://192.88.98.255/", "public"),
    ("http://192.88.99.1/", "reserved"),
    ("http://192.167.255.255/", "public"),
    ("http://192.168.0.0/", "private"),
    ("http://192.168.1.1/", "private"),
    ("http://192.168.255.255/", "private"),
    ("http://192.169.0.0/", "public"),
    ("http://198.17.255.255/", "public"),
    ("http://198.18.0.0/", "benchmarking"),
    ("http://198.19.255.255/", "benchmarking"),
    ("http://198.20.0.0/", "public"),
    ("http://198.51.99.255/", "public"),
    ("http://198.51.100.1/", "documentation"),
    ("http://198.51.101.0/", "public"),
    ("http://203.0.112.255/", "public"),
    ("http://203.0.113.1/", "documentation"),
    ("http://203.0.114.0/", "public"),
    ("http://223.255.255.255/", "public"),
    ("http://224.0.0.0/", "multicast"),
    ("http://224.0.0.251/", "multicast"),
    ("http://239.255.255.255/", "multicast"),
    ("http://240.0.0.0/", "reserved"),
    ("http://254.255.255.255/", "reserved"),
    ("http://255.255.255.254/", "reserved"),
    ("http://255.255.255.255/", "broadcast"),
    ("http://8.8.8.8/", "public"),
    ("http://1.1.1.1/", "public"),
    ("https://9.9.9.9:8443/v1", "public"),
];

/// The URL parser (WHATWG) reads decimal, hex, octal and shortened forms as IPv4: each is
/// the address it names, not a name to resolve.
const IPV4_SPELLINGS: &[(&str, &str)] = &[
    ("http://2130706433/", "loopback"),
    ("http://0x7f000001/", "loopback"),
    ("http://0x7f.1/", "loopback"),
    ("http://0x7F.0.0.1/", "loopback"),
    ("http://0177.0.0.1/", "loopback"),
    ("http://0177.1/", "loopback"),
    ("http://017700000001/", "loopback"),
    ("http://127.1/", "loopback"),
    ("http://127.0.1/", "loopback"),
    ("http://127.000.000.001/", "loopback"),
    ("http://127.0.0.1./", "loopback"),
    ("http://0/", "unspecified"),
    ("http://0x0/", "unspecified"),
    ("http://3232235777/", "private"),
    ("http://10.1/", "private"),
    ("http://0x0a.0x00.0x00.0x01/", "private"),
    ("http://012.0.0.1/", "private"),
    ("http://2852039166/", "link-local"),
    ("http://0xa9fea9fe/", "link-local"),
    ("http://0xA9.0xFE.0xA9.0xFE/", "link-local"),
    ("http://169.254.43518/", "link-local"),
    ("http://0251.0376.0251.0376/", "link-local"),
    ("http://134744072/", "public"),
    ("http://0x08080808/", "public"),
    ("http://%31%32%37.0.0.1/", "loopback"),
    ("http://１２７.０.０.１/", "loopback"),
];

const IPV6: &[(&str, &str)] = &[
    ("http://[::]/", "unspecified"),
    ("http://[::1]/", "loopback"),
    ("http://[0:0:0:0:0:0:0:1]/", "loopback"),
    ("http://[::1]:11434/", "loopback"),
    ("http://[::ffff:127.0.0.1]/", "mapped(loopback)"),
    ("http://[::ffff:7f00:1]/", "mapped(loopback)"),
    (
        "http://[0:0:0:0:0:ffff:169.254.169.254]/",
        "mapped(link-local)",
    ),
    ("http://[::ffff:a9fe:a9fe]/", "mapped(link-local)"),
    ("http://[::ffff:10.0.0.1]/", "mapped(private)"),
    ("http://[::ffff:0.0.0.0]/", "mapped(unspecified)"),
    ("http://[::ffff:8.8.8.8]/", "mapped(public)"),
    ("http://[::127.0.0.1]/", "compatible(loopback)"),
    ("http://[::8.8.8.8]/", "compatible(public)"),
    ("http://[::2]/", "compatible(this-network)"),
    ("http://[64:ff9b::a9fe:a9fe]/", "nat64(link-local)"),
    ("http://[64:ff9b::127.0.0.1]/", "nat64(loopback)"),
    ("http://[64:ff9b::10.0.0.1]/", "nat64(private)"),
    ("http://[64:ff9b::c0a8:1]/", "nat64(private)"),
    ("http://[64:ff9b::8.8.8.8]/", "public"),
    ("http://[64:ff9b:1::1]/", "reserved"),
    ("http://[2002:7f00:1::]/", "6to4(loopback)"),
    ("http://[2002:a9fe:a9fe::1]/", "6to4(link-local)"),
    ("http://[2002:c0a8:101::1]/", "6to4(private)"),
    ("http://[2002:6440::1]/", "6to4(cgnat)"),
    ("http://[2002:808:808::1]/", "public"),
    ("http://[fc00::]/", "ula"),
    ("http://[fd00::1]/", "ula"),
    ("http://[fd00:ec2::254]/", "ula"),
    ("http://[fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]/", "ula"),
    ("http://[fbff:ffff::1]/", "reserved"),
    ("http://[fe00::1]/", "reserved"),
    ("http://[fe80::]/", "link-local"),
    ("http://[fe80::1]/", "link-local"),
    ("http://[febf:ffff::1]/", "link-local"),
    ("http://[fe80::1%25eth0]/", "not-a-url"),
    ("http://[fec0::1]/", "site-local"),
    ("http://[feff::1]/", "site-local"),
    ("http://[ff00::]/", "multicast"),
    ("http://[ff02::1]/", "multicast"),
    ("http://[ff05::1:3]/", "multicast"),
    ("http://[ff0e::1]/", "multicast"),
    ("http://[2001:db8::1]/", "documentation"),
    ("http://[2001:db8:ffff::1]/", "documentation"),
    ("http://[2001:db9::1]/", "public"),
    ("http://[3fff::1]/", "documentation"),
    ("http://[3fff:fff:ffff::1]/", "documentation"),
    ("http://[3fff:1000::1]/", "public"),
    ("http://[2001::1]/", "reserved"),
    ("http://[2001:2::1]/", "benchmarking"),
    ("http://[2001:10::1]/", "reserved"),
    ("http://[2001:1ff::1]/", "reserved"),
    ("http://[2001:200::1]/", "public"),
    ("http://[100::1]/", "reserved"),
    ("http://[1fff::1]/", "reserved"),
    ("http://[4000::1]/", "reserved"),
    ("http://[2606:4700::1111]/", "public"),
    ("https://[2606:4700:4700::1111]:443/v1", "public"),
    ("http://[2001:4860:4860::8888]/", "public"),
    ("http://[2a00:1450:4001::1]/", "public"),
];

/// The form of a base URL: no credentials, query or fragment; http and https only. Names
/// pass (they are checked on what they resolve to, at connect time).
const FORMS: &[(&str, &str)] = &[
    ("https://api.anthropic.com", "public"),
    ("https://api.openai.com/v1", "public"),
    ("HTTPS://API.ANTHROPIC.COM/", "public"),
    ("http://example.com:8080/v1", "public"),
    ("http://localhost:11434/v1", "public"),
    ("http://metadata.google.internal/", "public"),
    ("http://user:pass@8.8.8.8/", "userinfo"),
    ("http://user@example.com/", "userinfo"),
    ("https://:secret@api.openai.com/v1", "userinfo"),
    ("http://user:pass@127.0.0.1/", "userinfo"),
    ("http://8.8.8.8/?x=1", "query"),
    ("http://8.8.8.8/?", "query"),
    ("https://api.openai.com/v1?api-version=1", "query"),
    ("http://8.8.8.8/#frag", "fragment"),
    ("http://8.8.8.8/#", "fragment"),
    ("https://api.openai.com/v1#x", "fragment"),
    ("ftp://8.8.8.8/", "scheme"),
    ("file:///etc/passwd", "scheme"),
    ("gopher://127.0.0.1:70/", "scheme"),
    ("ws://8.8.8.8/", "scheme"),
    ("javascript:alert(1)", "scheme"),
    ("data:text/plain,hi", "scheme"),
    ("unix:/var/run/docker.sock", "scheme"),
    ("http://", "not-a-url"),
    ("not a url", "not-a-url"),
    ("", "not-a-url"),
    ("//example.com/v1", "not-a-url"),
    ("http://[::1/", "not-a-url"),
    ("http://256.0.0.1/", "not-a-url"),
    ("http://1.2.3.4.5/", "not-a-url"),
    ("http://0x100000000/", "not-a-url"),
    ("http://example.com:99999/", "not-a-url"),
];

#[test]
fn addresses_and_url_forms_are_refused_or_allowed_as_they_should_be() {
    let policy = EgressPolicy::default();
    let n = check(&policy, IPV4)
        + check(&policy, IPV4_SPELLINGS)
        + check(&policy, IPV6)
        + check(&policy, FORMS);
    assert!(n >= 150, "{n} cases");
}

/// Exact host (as the URL parser writes it) and port; nothing else.
const ALLOWED: &[(&str, &str)] = &[
    ("http://127.0.0.1:11434/v1", "allowed"),
    ("https://127.0.0.1:11434/", "allowed"),
    ("http://2130706433:11434/", "allowed"),
    ("http://127.1:11434/api", "allowed"),
    ("http://127.0.0.1:11435/", "loopback"),
    ("http://127.0.0.1/", "loopback"),
    ("http://127.0.0.2:11434/", "loopback"),
    ("http://[::ffff:127.0.0.1]:11434/", "mapped(loopback)"),
    ("http://[::1]:8080/", "allowed"),
    ("http://[0::1]:8080/", "allowed"),
    ("http://[::1]:11434/", "loopback"),
    ("https://10.0.0.5/", "allowed"),
    ("http://10.0.0.5:443/", "allowed"),
    ("http://10.0.0.5/", "private"),
    ("http://localhost:11434/", "allowed"),
    ("http://LocalHost:11434/", "allowed"),
    ("http://localhost:11435/", "public"),
    ("http://localhost./", "public"),
    ("http://ollama.lan/", "allowed"),
    ("http://ollama.lan:8080/", "public"),
    ("http://8.8.8.8:11434/", "public"),
    ("http://user:pw@127.0.0.1:11434/", "userinfo"),
    ("http://127.0.0.1:11434/?q", "query"),
];

#[test]
fn an_administrator_allows_exact_hosts_and_ports() {
    let policy = EgressPolicy::parse_list(
        "127.0.0.1:11434, [::1]:8080,localhost:11434 , 10.0.0.5:443,OLLAMA.lan:80",
    )
    .unwrap();
    check(&policy, ALLOWED);
    assert_eq!(
        policy.allowed(),
        [
            "127.0.0.1:11434",
            "[::1]:8080",
            "localhost:11434",
            "10.0.0.5:443",
            "ollama.lan:80"
        ]
    );
    let one = EgressPolicy::default().allowing("127.0.0.1:9".parse().unwrap());
    check(
        &one,
        &[
            ("http://127.0.0.1:9/", "allowed"),
            ("http://127.0.0.1:10/", "loopback"),
        ],
    );
}

#[test]
fn malformed_allow_entries_are_errors() {
    for bad in [
        "127.0.0.1",
        "127.0.0.1:",
        "127.0.0.1:0",
        "127.0.0.1:70000",
        ":11434",
        "::1:11434",
        "http://127.0.0.1:11434",
        "user@127.0.0.1:11434",
        "127.0.0.1:11434/v1",
        "exa mple:80",
        "256.0.0.1:80",
    ] {
        let err = EgressPolicy::new([bad]).expect_err(bad);
        assert!(err.to_string().contains("HOST:PORT"), "{err}");
    }
    assert!(EgressPolicy::parse_list("").unwrap().allowed().is_empty());
    assert!(EgressPolicy::parse_list("a:1,,b:2").is_ok());
}

#[test]
fn refusals_name_the_setting_that_allows_them() {
    let err = EgressPolicy::default()
        .check("http://127.0.0.1:11434/v1")
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "127.0.0.1:11434 is a loopback address; an administrator can allow it with HERO_EGRESS_ALLOW"
    );
    let err = EgressPolicy::default()
        .check("http://[::ffff:169.254.169.254]/")
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("[::ffff:169.254.169.254]:80 is an IPv4-mapped IPv6 form of 169.254.169.254, a link-local address;"),
        "{err}"
    );
    let err = EgressPolicy::default()
        .check("https://me:pw@example.com/")
        .unwrap_err()
        .to_string();
    assert!(err.contains("user name or password"), "{err}");
}

fn sa(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

#[test]
fn the_resolver_keeps_public_addresses_only_unless_the_name_is_allowed() {
    let err = screen("localhost", [sa("127.0.0.1:0"), sa("[::1]:0")], false).unwrap_err();
    assert_eq!(
        err.to_string(),
        "localhost resolves to a loopback address; an administrator can allow it with HERO_EGRESS_ALLOW"
    );
    // A name that answers both ways is kept to its public addresses (rebinding gains nothing).
    assert_eq!(
        screen(
            "mixed.example",
            [sa("10.0.0.1:0"), sa("8.8.8.8:0"), sa("[fd00::1]:0")],
            false
        )
        .unwrap(),
        [sa("8.8.8.8:0")]
    );
    assert_eq!(
        screen("ollama.lan", [sa("10.0.0.1:0")], true).unwrap(),
        [sa("10.0.0.1:0")]
    );
    assert!(screen("nothing.example", [], false).unwrap().is_empty());
}

/// A listener on loopback and a `http://localhost:PORT/` URL: the URL check passes (a name),
/// and the resolver refuses what `localhost` resolves to, at connect time, unless allowed.
#[tokio::test]
async fn a_name_that_resolves_to_loopback_is_refused_when_connecting() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let url = format!("http://localhost:{port}/v1");

    let strict = EgressPolicy::default().client().unwrap();
    let checked = strict.check(&url).expect("a name passes the URL check");
    assert!(!checked.is_allowed());
    let err = strict.post(&checked).send().await.unwrap_err();
    let refused = refusal_in(&err).expect("the resolver's refusal is in the error");
    assert_eq!(refused.reason, Reason::Loopback);
    assert!(refused.to_string().contains(ALLOW_SETTING), "{refused}");
    let accepted = tokio::time::timeout(Duration::from_millis(200), listener.accept()).await;
    assert!(accepted.is_err(), "nothing connected");

    // The same name, allowed with this port: the request arrives.
    let allowed = EgressPolicy::new([format!("localhost:{port}")])
        .unwrap()
        .client()
        .unwrap();
    let checked = allowed.check(&url).unwrap();
    assert!(checked.is_allowed());
    let send = tokio::spawn(allowed.post(&checked).send());
    let (mut conn, _) = tokio::time::timeout(Duration::from_secs(5), listener.accept())
        .await
        .expect("the allowed request connected")
        .unwrap();
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = [0u8; 256];
    let n = conn.read(&mut buf).await.unwrap();
    assert!(buf[..n].starts_with(b"POST /v1 HTTP/1.1"));
    conn.write_all(b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n")
        .await
        .unwrap();
    assert_eq!(send.await.unwrap().unwrap().status(), 204);
}

/// The check runs on IP literals before sending: hyper does not ask a resolver for them.
#[tokio::test]
async fn an_ip_literal_is_refused_before_any_connection() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let out = EgressPolicy::default().client().unwrap();
    let err = out.check(&format!("http://{addr}/v1")).unwrap_err();
    assert!(matches!(err, UrlError::Refused(ref r) if r.reason == Reason::Loopback));
    let out = EgressPolicy::default().allowing(addr).client().unwrap();
    assert!(
        out.check(&format!("http://{addr}/v1"))
            .unwrap()
            .is_allowed()
    );
}
