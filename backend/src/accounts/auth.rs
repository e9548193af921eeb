//! Sign-in: password check ([`crate::accounts::password`]) behind a brake on repeated failures, a
//! revocable token ([`crate::accounts::tokens`]), and the [`AuthUser`] that every other operation
//! requires.
//!
//! A token is good only while its signature and expiry check out *and* its `jti` row in
//! `auth_tokens` is present and not revoked *and* its account is not disabled: logout,
//! password change and disabling take effect at the next request.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use http::HeaderMap;

use crate::{
    AppState, Error, Result, Settings, accounts::password, accounts::tokens, accounts::users, store,
};

pub const COOKIE_NAME: &str = "hero_token";
/// The cookie's name when it is `Secure` and Hero is served at its host's root: the
/// `__Host-` prefix makes the browser refuse it unless it came from this very host over
/// HTTPS with `Path=/` and no `Domain`, so a sibling subdomain cannot plant a sign-in of its
/// choosing.
pub const SECURE_COOKIE_NAME: &str = "__Host-hero_token";
/// The cookie's name when it is `Secure` under a base path (`__Host-` requires `Path=/`):
/// `__Secure-` still makes the browser refuse it from a page that is not HTTPS.
pub const SECURE_SCOPED_COOKIE_NAME: &str = "__Secure-hero_token";

/// The sign-in cookie's name: prefixed when the cookie is `Secure`.
pub fn cookie_name(settings: &Settings) -> &'static str {
    match (settings.secure_cookie, settings.base_path.is_empty()) {
        (false, _) => COOKIE_NAME,
        (true, true) => SECURE_COOKIE_NAME,
        (true, false) => SECURE_SCOPED_COOKIE_NAME,
    }
}

/// The signed-in user. Only this module constructs one, after checking a token or a
/// password, so a function that takes `&AuthUser` cannot run for nobody; the one exception,
/// [`AuthUser::on_behalf_of`], is the server finishing work such a user began.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthUser {
    id: i64,
    username: String,
    is_admin: bool,
    jti: String,
    /// When the token ends (Unix seconds): a live stream opened with it ends then too.
    expires_at: i64,
}

impl AuthUser {
    /// The server carrying on work the user began while signed in (a timed question of
    /// theirs taking its default, after a restart too). It is no sign-in: it has no token,
    /// so [`still_valid`] refuses it and no stream or socket can be opened with it.
    pub(crate) fn on_behalf_of(user_id: i64) -> AuthUser {
        AuthUser {
            id: user_id,
            username: String::new(),
            is_admin: false,
            jti: String::new(),
            expires_at: 0,
        }
    }

    pub fn id(&self) -> i64 {
        self.id
    }
    pub fn username(&self) -> &str {
        &self.username
    }
    pub fn is_admin(&self) -> bool {
        self.is_admin
    }
    pub fn dto(&self) -> hero_shared::api::UserDto {
        hero_shared::api::UserDto {
            id: self.id,
            username: self.username.clone(),
            is_admin: self.is_admin,
        }
    }
}

/// A fresh sign-in.
#[derive(Debug, Clone)]
pub struct Login {
    pub user: AuthUser,
    pub token: String,
    /// Unix seconds.
    pub expires_at: i64,
}

/// Checks a username and password and issues a token ([`login_from`] with no known client).
pub async fn login(st: &AppState, username: &str, password: &str) -> Result<Login> {
    login_from(st, None, username, password).await
}

/// Checks a username and password from `client` (the address the request came from, see
/// [`client_address`]) and issues a token. Refused before anything is stored or hashed: a
/// username longer than any account can have, a password longer than any can be, and a
/// guess the brake holds back ([`LoginThrottle`]).
pub async fn login_from(
    st: &AppState,
    client: Option<IpAddr>,
    username: &str,
    password: &str,
) -> Result<Login> {
    let name = username.trim();
    if name.len() > users::MAX_USERNAME_CHARS {
        return Err(Error::Invalid(format!(
            "username is too long (at most {} characters)",
            users::MAX_USERNAME_CHARS
        )));
    }
    let key = name.to_lowercase();
    let bad = || Error::Unauthorized("wrong username or password");
    if password.len() > password::MAX_PASSWORD_BYTES {
        return Err(bad());
    }
    st.throttle.check(&key, client)?;
    let row = store::users::credentials(&st.db, name).await?;
    let Some(store::users::Credentials {
        user,
        password_hash: hash,
    }) = row
    else {
        // Spend the same time as a real check, so timing does not tell which names exist.
        st.hash_gate.verify(password, password::DUMMY_HASH).await?;
        return Err(bad());
    };
    if !st.hash_gate.verify(password, &hash).await? {
        return Err(bad());
    }
    if user.disabled {
        return Err(Error::Unauthorized("this account is disabled"));
    }
    st.throttle.record_success(&key, client);
    issue(st, user.id, user.username, user.is_admin).await
}

/// The address a request came from: the peer, or, when the peer is one of the
/// `trusted_proxies`, the last address in `X-Forwarded-For` that is not (the proxies
/// append; what a client wrote itself stands further left and is not believed). IPv4
/// addresses in their IPv6-mapped form (a dual-stack listener's peers) are the IPv4 ones.
pub fn client_address(
    headers: &HeaderMap,
    peer: Option<IpAddr>,
    trusted_proxies: &[IpAddr],
) -> Option<IpAddr> {
    let peer = peer?.to_canonical();
    let trusted = |a: &IpAddr| trusted_proxies.iter().any(|p| p.to_canonical() == *a);
    if !trusted(&peer) {
        return Some(peer);
    }
    let forwarded: Vec<IpAddr> = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|a| a.trim().parse::<IpAddr>().ok())
        .map(|a| a.to_canonical())
        .collect();
    Some(
        forwarded
            .into_iter()
            .rev()
            .find(|a| !trusted(a))
            .unwrap_or(peer),
    )
}

async fn issue(st: &AppState, id: i64, username: String, is_admin: bool) -> Result<Login> {
    let t = tokens::issue(&st.db, &st.keys, id, st.settings.token_ttl).await?;
    Ok(Login {
        user: AuthUser {
            id,
            username,
            is_admin,
            jti: t.jti,
            expires_at: t.expires_at,
        },
        token: t.token,
        expires_at: t.expires_at,
    })
}

/// Turns a bearer or cookie token into the user it was issued to.
pub async fn authenticate(st: &AppState, token: &str) -> Result<AuthUser> {
    let claims = tokens::verify(&st.keys, token)?;
    let row = st
        .db
        .read_with(async |c| store::tokens::by_jti_hot(c, &claims.jti).await)
        .await?;
    match row {
        Some(t) if t.disabled => Err(Error::Unauthorized("this account is disabled")),
        Some(t) if !t.revoked && t.user_id.to_string() == claims.sub => Ok(AuthUser {
            id: t.user_id,
            username: t.username,
            is_admin: t.is_admin,
            jti: claims.jti,
            expires_at: claims.exp,
        }),
        _ => Err(Error::Unauthorized("this sign-in has ended; sign in again")),
    }
}

/// Whether this sign-in still stands (not expired, not logged out, password unchanged,
/// account enabled): long-lived streams ask again from time to time. An error when the
/// database cannot say (the stream ends asking to reconnect, not signed out).
pub async fn still_valid(st: &AppState, user: &AuthUser) -> Result<bool> {
    if time::OffsetDateTime::now_utc().unix_timestamp() >= user.expires_at {
        return Ok(false);
    }
    let row = store::tokens::by_jti(&st.db, &user.jti).await?;
    Ok(matches!(row, Some(t) if !t.disabled && !t.revoked))
}

/// How often a live stream (events, WebSocket) re-checks its sign-in, by default
/// (`Settings::recheck_every`).
pub const RECHECK_EVERY: std::time::Duration = std::time::Duration::from_secs(15);

/// Authenticates the request's `Authorization: Bearer` token, else its cookie.
pub async fn authenticate_headers(st: &AppState, headers: &HeaderMap) -> Result<AuthUser> {
    let token =
        token_from_headers(headers, &st.settings).ok_or(Error::Unauthorized("sign in first"))?;
    authenticate(st, &token).await
}

/// The bearer token, else the sign-in cookie (only the prefixed one when cookies are
/// `Secure`: an unprefixed one could have been planted by another host of the site).
pub fn token_from_headers(headers: &HeaderMap, settings: &Settings) -> Option<String> {
    let name = cookie_name(settings);
    if let Some(v) = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        && let Some(t) = v
            .strip_prefix("Bearer ")
            .or_else(|| v.strip_prefix("bearer "))
    {
        return Some(t.trim().to_owned());
    }
    headers
        .get_all(http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_owned())
}

/// Ends this sign-in (the token's row is revoked).
pub async fn logout(st: &AppState, user: &AuthUser) -> Result<()> {
    tokens::revoke(&st.db, &user.jti).await
}

/// Changes the signed-in user's password after checking the current one; every sign-in of
/// the account ends, this one included.
pub async fn change_password(
    st: &AppState,
    user: &AuthUser,
    client: Option<IpAddr>,
    current: &str,
    new: &str,
) -> Result<()> {
    // The same brake as a sign-in: a stolen session must not make it a free password oracle.
    let key = user.username.to_lowercase();
    st.throttle.check(&key, client)?;
    let hash = store::users::password_hash(&st.db, user.id)
        .await?
        .ok_or(Error::NotFound("user"))?;
    if current.len() > password::MAX_PASSWORD_BYTES || !st.hash_gate.verify(current, &hash).await? {
        return Err(Error::Invalid("the current password is wrong".into()));
    }
    st.throttle.record_success(&key, client);
    users::set_password(&st.db, user.id, new).await
}

/// `Set-Cookie` value that stores the token: HttpOnly (scripts cannot read it),
/// SameSite=Lax (other sites' forms cannot post with it), and sent only to the path Hero is
/// served under (`base_path`, else the whole host).
pub fn session_cookie(token: &str, max_age_secs: i64, settings: &Settings) -> String {
    cookie(cookie_name(settings), token, max_age_secs, true, settings)
}

/// A `Set-Cookie` value of Hero's: sent only to the path Hero is served under
/// (`base_path`, else the whole host), SameSite=Lax, `Secure` when cookies are, HttpOnly
/// when scripts need not read it.
pub fn cookie(
    name: &str,
    value: &str,
    max_age_secs: i64,
    http_only: bool,
    settings: &Settings,
) -> String {
    let path = match settings.base_path.as_str() {
        "" => "/",
        base => base,
    };
    format!(
        "{name}={value}; Path={path}{}; SameSite=Lax; Max-Age={max_age_secs}{}",
        if http_only { "; HttpOnly" } else { "" },
        if settings.secure_cookie {
            "; Secure"
        } else {
            ""
        }
    )
}

/// `Set-Cookie` value that removes the token cookie.
pub fn clear_cookie(settings: &Settings) -> String {
    session_cookie("", 0, settings)
}

/// Slows down guessing, on two keys at once: one username from one client address, and
/// one client address whatever the username. After [`LoginThrottle::FREE_FAILURES`]
/// failures in a row on a username from one address (or [`LoginThrottle::FREE_SPRAY`] from
/// one address across usernames), each further attempt must wait twice as long as the last,
/// up to [`LoginThrottle::MAX_DELAY`]; a success clears the username's count from that
/// address. Guessing from one address is slowed, spraying many names from one is slowed,
/// and one address cannot hold back an account's owner signing in from another. (With no
/// known address, as in-process callers, every attempt shares one.)
///
/// Its memory is bounded: [`LoginThrottle::MAX_ENTRIES`] keys at most, idle ones forgotten
/// first, then the oldest.
#[derive(Debug, Default)]
pub struct LoginThrottle {
    keys: Mutex<HashMap<Brake, Failures>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Brake {
    /// A username from one address.
    Name(String, Option<IpAddr>),
    /// One address, any username.
    Client(IpAddr),
}

#[derive(Debug, Clone, Copy)]
struct Failures {
    count: u32,
    last: Instant,
}

impl LoginThrottle {
    pub const FREE_FAILURES: u32 = 5;
    pub const FREE_SPRAY: u32 = 20;
    pub const MAX_DELAY: Duration = Duration::from_secs(300);
    /// Entries idle this long are forgotten.
    const FORGET_AFTER: Duration = Duration::from_secs(3600);
    pub const MAX_ENTRIES: usize = 100_000;

    fn delay_for(count: u32, free: u32) -> Duration {
        if count < free {
            return Duration::ZERO;
        }
        let exp = (count - free).min(16);
        Duration::from_secs(1u64 << exp).min(Self::MAX_DELAY)
    }

    fn brakes(name: &str, client: Option<IpAddr>) -> impl Iterator<Item = (Brake, u32)> {
        std::iter::once((Brake::Name(name.to_owned(), client), Self::FREE_FAILURES))
            .chain(client.map(|c| (Brake::Client(c), Self::FREE_SPRAY)))
    }

    /// Refuses while a wait is running on either key; otherwise counts this attempt as a
    /// failure until [`LoginThrottle::record_success`] says otherwise, so parallel guesses
    /// cannot all slip past one check.
    pub fn check(&self, name: &str, client: Option<IpAddr>) -> Result<()> {
        let mut map = self.keys.lock().unwrap_or_else(|p| p.into_inner());
        let wait = Self::brakes(name, client)
            .filter_map(|(k, free)| {
                let f = map.get(&k)?;
                Self::delay_for(f.count, free).checked_sub(f.last.elapsed())
            })
            .max();
        if let Some(retry_after) = wait.filter(|w| !w.is_zero()) {
            return Err(Error::TooManyAttempts { retry_after });
        }
        for (k, _) in Self::brakes(name, client) {
            Self::count_failure(&mut map, k);
        }
        Ok(())
    }

    fn count_failure(map: &mut HashMap<Brake, Failures>, key: Brake) {
        if map.len() >= Self::MAX_ENTRIES && !map.contains_key(&key) {
            map.retain(|_, f| f.last.elapsed() < Self::FORGET_AFTER);
            if map.len() >= Self::MAX_ENTRIES {
                // All recent: the oldest tenth goes.
                let mut ages: Vec<Instant> = map.values().map(|f| f.last).collect();
                let cut = ages.len() / 10;
                let (_, &mut oldest_kept, _) = ages.select_nth_unstable(cut);
                map.retain(|_, f| f.last >= oldest_kept);
            }
        }
        let now = Instant::now();
        let e = map.entry(key).or_insert(Failures {
            count: 0,
            last: now,
        });
        if e.last.elapsed() >= Self::FORGET_AFTER {
            e.count = 0;
        }
        e.count += 1;
        e.last = now;
    }

    /// The username signed in from `client`: its count there is cleared, and this attempt
    /// no longer counts against the address (its earlier failures still do, so one valid
    /// password does not reset a spray, and many people signing in from one address do
    /// not slow each other).
    pub fn record_success(&self, name: &str, client: Option<IpAddr>) {
        let mut map = self.keys.lock().unwrap_or_else(|p| p.into_inner());
        map.remove(&Brake::Name(name.to_owned(), client));
        if let Some(c) = client
            && let Some(f) = map.get_mut(&Brake::Client(c))
        {
            f.count = f.count.saturating_sub(1);
        }
    }

    /// How many keys the brake holds (for the test of its bound).
    pub fn len(&self) -> usize {
        self.keys.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::state;

    #[tokio::test]
    async fn login_issue_authenticate_logout() {
        let (_dir, st) = state().await;
        crate::accounts::create(&st.db, &st.keys, "alice", "correct horse", false)
            .await
            .unwrap();
        let l = login(&st, "alice", "correct horse").await.unwrap();
        let u = authenticate(&st, &l.token).await.unwrap();
        assert_eq!(u.username(), "alice");
        logout(&st, &u).await.unwrap();
        let err = authenticate(&st, &l.token).await.unwrap_err();
        assert!(matches!(err, Error::Unauthorized(_)), "{err}");
    }

    #[tokio::test]
    async fn forged_and_foreign_tokens_are_refused() {
        let (_dir, st) = state().await;
        crate::accounts::create(&st.db, &st.keys, "alice", "correct horse", false)
            .await
            .unwrap();
        let l = login(&st, "alice", "correct horse").await.unwrap();
        // Signed with another key (another instance's master key).
        let (_d2, other) = state().await;
        assert!(authenticate(&other, &l.token).await.is_err());
        // `alg: none` and garbage.
        let parts: Vec<&str> = l.token.split('.').collect();
        let none = format!("eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.{}.", parts[1]);
        assert!(authenticate(&st, &none).await.is_err());
        assert!(authenticate(&st, "garbage").await.is_err());
    }

    #[tokio::test]
    async fn password_change_and_disable_revoke_tokens() {
        let (_dir, st) = state().await;
        let a = crate::accounts::create(&st.db, &st.keys, "alice", "correct horse", false)
            .await
            .unwrap();
        let l1 = login(&st, "alice", "correct horse").await.unwrap();
        let l2 = login(&st, "alice", "correct horse").await.unwrap();
        let u = authenticate(&st, &l1.token).await.unwrap();
        let wrong = change_password(&st, &u, None, "nope nope", "new password!")
            .await
            .unwrap_err();
        assert!(wrong.to_string().contains("current password"));
        change_password(&st, &u, None, "correct horse", "new password!")
            .await
            .unwrap();
        assert!(authenticate(&st, &l1.token).await.is_err());
        assert!(authenticate(&st, &l2.token).await.is_err());
        assert!(login(&st, "alice", "correct horse").await.is_err());
        let l3 = login(&st, "alice", "new password!").await.unwrap();
        users::set_disabled(&st.db, a.id, true).await.unwrap();
        assert!(authenticate(&st, &l3.token).await.is_err());
        let err = login(&st, "alice", "new password!").await.unwrap_err();
        assert!(err.to_string().contains("disabled"), "{err}");
    }

    #[tokio::test]
    async fn repeated_failures_are_slowed_down() {
        let (_dir, st) = state().await;
        crate::accounts::create(&st.db, &st.keys, "alice", "correct horse", false)
            .await
            .unwrap();
        for _ in 0..LoginThrottle::FREE_FAILURES {
            let e = login(&st, "alice", "wrong!!!!").await.unwrap_err();
            assert!(matches!(e, Error::Unauthorized(_)), "{e}");
        }
        // Even the right password now waits: the brake does not reveal it.
        let e = login(&st, "Alice", "correct horse").await.unwrap_err();
        match e {
            Error::TooManyAttempts { retry_after } => {
                assert!(retry_after <= Duration::from_secs(1))
            }
            other => panic!("expected TooManyAttempts, got {other}"),
        }
        assert_eq!(LoginThrottle::delay_for(6, 5), Duration::from_secs(2));
        assert_eq!(LoginThrottle::delay_for(40, 5), LoginThrottle::MAX_DELAY);
        // Another account is not affected.
        crate::accounts::create(&st.db, &st.keys, "bob", "battery staple", false)
            .await
            .unwrap();
        login(&st, "bob", "battery staple").await.unwrap();
    }

    #[tokio::test]
    async fn a_sign_in_stops_standing_when_its_token_expires() {
        let t = crate::test_support::state_with(crate::Settings {
            // Long enough for a sign-in (argon2, in a debug build on a loaded machine) to be
            // checked before it expires.
            token_ttl: time::Duration::seconds(4),
            ..Default::default()
        })
        .await;
        crate::accounts::create(&t.db, &t.keys, "alice", "correct horse", false)
            .await
            .unwrap();
        let l = login(&t, "alice", "correct horse").await.unwrap();
        let u = authenticate(&t, &l.token).await.unwrap();
        assert!(still_valid(&t, &u).await.unwrap() && still_valid(&t, &l.user).await.unwrap());
        tokio::time::sleep(Duration::from_millis(5100)).await;
        // A live stream opened with it re-checks and ends: not revoked, but over.
        assert!(!still_valid(&t, &u).await.unwrap() && !still_valid(&t, &l.user).await.unwrap());
    }

    #[tokio::test]
    async fn one_address_cannot_hold_back_an_account_signing_in_from_another() {
        let (_dir, st) = state().await;
        crate::accounts::create(&st.db, &st.keys, "alice", "correct horse", false)
            .await
            .unwrap();
        let attacker: IpAddr = "203.0.113.9".parse().unwrap();
        let alice_home: IpAddr = "198.51.100.4".parse().unwrap();
        for _ in 0..LoginThrottle::FREE_FAILURES {
            login_from(&st, Some(attacker), "alice", "guess!!!!")
                .await
                .unwrap_err();
        }
        let held = login_from(&st, Some(attacker), "alice", "correct horse").await;
        assert!(
            matches!(held, Err(Error::TooManyAttempts { .. })),
            "{held:?}"
        );
        login_from(&st, Some(alice_home), "alice", "correct horse")
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn many_sign_ins_from_one_address_do_not_slow_it() {
        let (_dir, st) = state().await;
        crate::accounts::create(&st.db, &st.keys, "alice", "correct horse", false)
            .await
            .unwrap();
        let office: IpAddr = "198.51.100.77".parse().unwrap();
        for _ in 0..LoginThrottle::FREE_SPRAY * 2 {
            login_from(&st, Some(office), "alice", "correct horse")
                .await
                .unwrap();
        }
    }

    #[tokio::test]
    async fn spraying_many_names_from_one_address_is_slowed() {
        let (_dir, st) = state().await;
        let sprayer: IpAddr = "203.0.113.7".parse().unwrap();
        for i in 0..LoginThrottle::FREE_SPRAY {
            let e = login_from(&st, Some(sprayer), &format!("user{i}"), "password1")
                .await
                .unwrap_err();
            assert!(matches!(e, Error::Unauthorized(_)), "{e}");
        }
        let e = login_from(&st, Some(sprayer), "someone-new", "password1")
            .await
            .unwrap_err();
        assert!(matches!(e, Error::TooManyAttempts { .. }), "{e}");
        // Another address is not slowed by it.
        let e = login_from(
            &st,
            Some("192.0.2.1".parse().unwrap()),
            "someone-new",
            "password1",
        )
        .await
        .unwrap_err();
        assert!(matches!(e, Error::Unauthorized(_)), "{e}");
    }

    #[tokio::test]
    async fn an_overlong_username_is_refused_before_anything_is_kept() {
        let (_dir, st) = state().await;
        let long = "a".repeat(crate::accounts::users::MAX_USERNAME_CHARS + 1);
        let e = login(&st, &long, "password1").await.unwrap_err();
        assert!(e.to_string().contains("username is too long"), "{e}");
        assert!(st.throttle.is_empty(), "nothing of it was stored");
        // Nor is an overlong password hashed or kept as a failure of its own.
        let e = login(&st, "alice", &"p".repeat(password::MAX_PASSWORD_BYTES + 1))
            .await
            .unwrap_err();
        assert!(matches!(e, Error::Unauthorized(_)), "{e}");
        assert!(st.throttle.is_empty());
    }

    #[test]
    fn the_brake_holds_so_many_keys_at_most() {
        let t = LoginThrottle::default();
        for i in 0..LoginThrottle::MAX_ENTRIES + 5_000 {
            let client = IpAddr::from([10, (i >> 16) as u8, (i >> 8) as u8, i as u8]);
            let _ = t.check(&format!("u{i}"), Some(client));
        }
        assert!(t.len() <= LoginThrottle::MAX_ENTRIES, "{} keys", t.len());
        // And it still brakes what it holds.
        let me: IpAddr = "192.0.2.200".parse().unwrap();
        for _ in 0..LoginThrottle::FREE_FAILURES {
            t.check("me", Some(me)).unwrap();
        }
        assert!(t.check("me", Some(me)).is_err());
    }

    #[test]
    fn the_client_is_the_peer_unless_a_trusted_proxy_names_it() {
        let mut h = HeaderMap::new();
        h.insert("x-forwarded-for", "1.1.1.1, 203.0.113.5".parse().unwrap());
        let peer: IpAddr = "198.51.100.1".parse().unwrap();
        let proxy: IpAddr = "10.0.0.2".parse().unwrap();
        // An untrusted peer's header is not believed.
        assert_eq!(client_address(&h, Some(peer), &[]), Some(peer));
        // Behind the proxy: the last address it did not add itself (the first, 1.1.1.1,
        // is what the client wrote and could be anything).
        assert_eq!(
            client_address(&h, Some(proxy), &[proxy]),
            "203.0.113.5".parse().ok()
        );
        assert_eq!(
            client_address(&HeaderMap::new(), Some(proxy), &[proxy]),
            Some(proxy)
        );
        assert_eq!(client_address(&h, None, &[proxy]), None);
    }

    /// A dual-stack listener (`[::]`) sees an IPv4 peer as `::ffff:a.b.c.d`: the proxy
    /// configured as `127.0.0.1` is still trusted, and a client is one address either way.
    #[test]
    fn mapped_addresses_are_the_ipv4_ones() {
        let mut h = HeaderMap::new();
        h.insert("x-forwarded-for", "::ffff:203.0.113.5".parse().unwrap());
        let proxy: IpAddr = "127.0.0.1".parse().unwrap();
        let mapped: IpAddr = "::ffff:127.0.0.1".parse().unwrap();
        assert_eq!(
            client_address(&h, Some(mapped), &[proxy]),
            "203.0.113.5".parse().ok()
        );
        let client: IpAddr = "::ffff:198.51.100.1".parse().unwrap();
        assert_eq!(
            client_address(&h, Some(client), &[proxy]),
            "198.51.100.1".parse().ok()
        );
        // A proxy configured in its mapped form is the same proxy.
        assert_eq!(
            client_address(&h, Some(proxy), &[mapped]),
            "203.0.113.5".parse().ok()
        );
    }

    /// Settings with the cookie's two knobs as given.
    fn cookie_settings(secure: bool, base_path: &str) -> Settings {
        Settings {
            secure_cookie: secure,
            base_path: base_path.into(),
            ..Settings::default()
        }
    }

    #[test]
    fn token_comes_from_bearer_then_cookie() {
        let (plain, secure) = (cookie_settings(false, ""), cookie_settings(true, ""));
        let mut h = HeaderMap::new();
        h.insert(
            "cookie",
            "a=1; hero_token=from-cookie; b=2".parse().unwrap(),
        );
        assert_eq!(
            token_from_headers(&h, &plain).as_deref(),
            Some("from-cookie")
        );
        // Secure cookies are read only under their __Host- name.
        assert_eq!(token_from_headers(&h, &secure), None);
        h.insert(
            "cookie",
            "hero_token=planted; __Host-hero_token=real; __Secure-hero_token=scoped"
                .parse()
                .unwrap(),
        );
        assert_eq!(token_from_headers(&h, &secure).as_deref(), Some("real"));
        // Under a base path, the __Secure- one.
        assert_eq!(
            token_from_headers(&h, &cookie_settings(true, "/hero")).as_deref(),
            Some("scoped")
        );
        h.insert("authorization", "Bearer from-bearer".parse().unwrap());
        assert_eq!(
            token_from_headers(&h, &secure).as_deref(),
            Some("from-bearer")
        );
        assert_eq!(token_from_headers(&HeaderMap::new(), &plain), None);
    }

    #[test]
    fn a_secure_cookie_is_host_prefixed() {
        let secure = cookie_settings(true, "");
        let c = session_cookie("t", 60, &secure);
        assert!(c.starts_with("__Host-hero_token=t; Path=/;"), "{c}");
        assert!(c.ends_with("; Secure") && !c.contains("Domain"), "{c}");
        assert!(
            session_cookie("t", 60, &cookie_settings(false, ""))
                .starts_with("hero_token=t; Path=/;")
        );
        assert!(clear_cookie(&secure).starts_with("__Host-hero_token=;"));
    }

    #[test]
    fn under_a_base_path_the_cookie_is_sent_only_there() {
        let c = session_cookie("t", 60, &cookie_settings(false, "/hero"));
        assert!(c.starts_with("hero_token=t; Path=/hero;"), "{c}");
        // __Host- requires Path=/; __Secure- still asks for HTTPS.
        let c = session_cookie("t", 60, &cookie_settings(true, "/hero"));
        assert!(c.starts_with("__Secure-hero_token=t; Path=/hero;"), "{c}");
        assert!(c.ends_with("; Secure"), "{c}");
        assert!(clear_cookie(&cookie_settings(true, "/hero")).contains("Max-Age=0"));
    }
}
