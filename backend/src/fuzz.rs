//! Fuzz entry points of the backend, shared by the cargo-fuzz targets in `fuzz/` and by the
//! unit tests below (which run them on their seeds in the normal suite). Each checks
//! invariants, not only "no panic".
//!
//! - [`egress_url`]: any text as an agent's base URL. A URL the policy accepts has an http(s)
//!   scheme, a host, no user, query or fragment, and a public address when its host is an
//!   IP literal; checking its normalised form again gives the same answer.
//! - [`api_bodies`]: any bytes as the JSON body of each request the API takes, through the
//!   validators the routes run; what a validator accepts meets its rule.

use hero_shared::api::{
    ChangePasswordRequest, CreateAgentRequest, CreateSessionRequest, LoginRequest,
    PostMessageRequest, UpdateAgentRequest, UpdateSessionRequest,
};

use crate::execution::egress::{EgressPolicy, classify};

/// Egress target: see the module's doc.
pub fn egress_url(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let policy = EgressPolicy::default();
    let Ok(public) = policy.check(&text) else {
        return;
    };
    let url = reqwest::Url::parse(public.as_str()).expect("an accepted URL parses again");
    assert!(matches!(url.scheme(), "http" | "https"), "{url}");
    assert!(
        url.username().is_empty() && url.password().is_none(),
        "{url}"
    );
    assert!(url.query().is_none() && url.fragment().is_none(), "{url}");
    let host = url.host_str().expect("an accepted URL has a host");
    let literal = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    match literal.parse::<std::net::IpAddr>() {
        Ok(ip) => assert_eq!(classify(ip), None, "{url}"),
        Err(_) => assert!(!host.is_empty(), "{url}"),
    }
    assert!(
        policy.check(public.as_str()).is_ok(),
        "its normalised form is refused: {url}"
    );
}

/// API bodies target: see the module's doc.
pub fn api_bodies(data: &[u8]) {
    if let Ok(r) = serde_json::from_slice::<LoginRequest>(data) {
        let _ = crate::accounts::users::validate_username(&r.username);
    }
    if let Ok(r) = serde_json::from_slice::<ChangePasswordRequest>(data)
        && crate::accounts::password::validate(&r.new_password).is_ok()
    {
        assert!(r.new_password.chars().count() >= crate::accounts::password::MIN_PASSWORD_CHARS);
        assert!(r.new_password.len() <= crate::accounts::password::MAX_PASSWORD_BYTES);
    }
    if let Ok(r) = serde_json::from_slice::<CreateSessionRequest>(data) {
        name_rule(&r.name);
    }
    if let Ok(r) = serde_json::from_slice::<UpdateSessionRequest>(data)
        && let Some(n) = &r.name
    {
        name_rule(n);
    }
    if let Ok(r) = serde_json::from_slice::<CreateAgentRequest>(data) {
        config_rule(r.config.as_ref());
        if let Some(u) = &r.base_url {
            egress_url(u.as_bytes());
        }
    }
    if let Ok(r) = serde_json::from_slice::<UpdateAgentRequest>(data) {
        config_rule(r.config.as_ref());
    }
    if let Ok(r) = serde_json::from_slice::<PostMessageRequest>(data) {
        let _ = r.content.len();
    }
    if let Ok(name) = std::str::from_utf8(data)
        && let Ok(n) = crate::accounts::users::validate_username(name)
    {
        assert!(!n.is_empty() && n.chars().count() <= crate::accounts::users::MAX_USERNAME_CHARS);
        assert!(
            n.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        );
    }
}

fn name_rule(name: &str) {
    if let Ok(n) = crate::conversation::sessions::validate_name(name) {
        assert!(!n.is_empty() && n == n.trim(), "{n:?}");
        assert!(n.chars().count() <= hero_shared::api::MAX_SESSION_NAME_CHARS);
        assert!(!n.chars().any(char::is_control), "{n:?}");
    }
}

fn config_rule(config: Option<&serde_json::Value>) {
    if let Ok(m) = crate::agents::validate_config(config) {
        for k in crate::agents::RESERVED_CONFIG_KEYS {
            assert!(!m.contains_key(*k), "{k} passed");
        }
        let bytes = serde_json::to_vec(&m).expect("a map serialises").len();
        assert!(
            bytes <= crate::agents::MAX_CONFIG_BYTES,
            "{bytes} bytes passed"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Seeds of both targets, and every case a fuzz run found (none yet).
    const SEEDS: &[&str] = &[
        "http://127.0.0.1:11434/v1",
        "https://api.anthropic.com",
        "http://2852039166/",
        "http://[::ffff:7f00:1]/",
        "https://u:p@example.com/?q#f",
        "http://0x7f.1/",
        "https://8.8.8.8:443/v1",
        "{\"username\": \"alice\", \"password\": \"x\"}",
        "{\"name\": \"  a\\u0000b  \"}",
        "{\"name\": \"x\", \"provider\": \"openai\", \"model\": \"m\", \"base_url\": \"http://10.0.0.1\", \"config\": {\"stream\": true}}",
        "{\"name\": \"x\", \"provider\": \"openai\", \"model\": \"m\", \"config\": {\"temperature\": 0.2}}",
        "{\"current_password\": \"a\", \"new_password\": \"correct horse battery\"}",
        "{\"content\": \"hi\"}",
        "alice.b-c_d",
    ];

    #[test]
    fn seeds_hold_the_invariants() {
        for seed in SEEDS {
            egress_url(seed.as_bytes());
            api_bodies(seed.as_bytes());
        }
    }
}
