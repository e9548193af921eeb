//! Passwords: the rules a new one must meet and argon2id hashing and checking, run on the
//! blocking pool (argon2 is deliberately slow and must not stall the runtime). A leaf: it
//! knows nothing of users, tokens or the database.

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};

use std::time::Duration;

use crate::{Error, Result};

pub const MIN_PASSWORD_CHARS: usize = 8;
/// argon2 cost grows with input; a cap keeps one request from buying seconds of CPU.
pub const MAX_PASSWORD_BYTES: usize = 1024;

/// An argon2id hash of a random string, checked against when a username is unknown, so that
/// timing does not tell which names exist.
pub const DUMMY_HASH: &str = "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$J0z7gPSt7zxHobVJ4lcV+VlgQ0oP8c8bUT6zC7rJ6pY";

pub fn validate(pw: &str) -> Result<()> {
    if pw.chars().count() < MIN_PASSWORD_CHARS {
        return Err(Error::Invalid(format!(
            "password is too short (at least {MIN_PASSWORD_CHARS} characters)"
        )));
    }
    if pw.len() > MAX_PASSWORD_BYTES {
        return Err(Error::Invalid(format!(
            "password is too long (at most {MAX_PASSWORD_BYTES} bytes)"
        )));
    }
    Ok(())
}

pub async fn hash(pw: &str) -> Result<String> {
    let pw = pw.to_owned();
    tokio::task::spawn_blocking(move || {
        let salt = SaltString::generate(&mut argon2::password_hash::rand_core::OsRng);
        Argon2::default()
            .hash_password(pw.as_bytes(), &salt)
            .map(|h| h.to_string())
            .map_err(|e| Error::Internal(format!("password hashing failed: {e}")))
    })
    .await
    .map_err(|e| Error::Internal(format!("password hashing task failed: {e}")))?
}

/// At most so many password hashes run at once (the number of cores, by default); the
/// rest wait their turn a bounded time, then are told the server is busy (503 with
/// Retry-After), so a burst of sign-ins cannot queue unbounded CPU work behind it. Used on
/// the paths anyone can reach: sign-in and password change.
#[derive(Debug)]
pub struct HashGate {
    permits: std::sync::Arc<tokio::sync::Semaphore>,
    wait: Duration,
}

impl HashGate {
    pub fn new(at_once: usize, wait: Duration) -> Self {
        HashGate {
            permits: std::sync::Arc::new(tokio::sync::Semaphore::new(at_once.max(1))),
            wait,
        }
    }

    /// [`verify`], when a turn comes within the wait. The turn goes with the hash onto the
    /// blocking pool and is given back when the hash ends: a client that leaves mid-check
    /// cannot free its place while the hash still runs.
    pub async fn verify(&self, pw: &str, hash: &str) -> Result<bool> {
        let turn = tokio::time::timeout(self.wait, self.permits.clone().acquire_owned())
            .await
            .map_err(|_| Error::Unavailable("too many sign-ins at once; try again in a moment"))?
            .map_err(|_| Error::Unavailable("the server is shutting down"))?;
        Ok(verify_holding(pw, hash, Some(turn)).await)
    }
}

/// The default number of hashes at once: the machine's cores.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

/// True when `pw` matches `hash`. A malformed stored hash counts as no match.
pub async fn verify(pw: &str, hash: &str) -> bool {
    verify_holding(pw, hash, None).await
}

/// [`verify`], holding `turn` until the hash itself ends.
async fn verify_holding(
    pw: &str,
    hash: &str,
    turn: Option<tokio::sync::OwnedSemaphorePermit>,
) -> bool {
    let (pw, hash) = (pw.to_owned(), hash.to_owned());
    tokio::task::spawn_blocking(move || {
        let _turn = turn;
        PasswordHash::new(&hash)
            .map(|parsed| {
                Argon2::default()
                    .verify_password(pw.as_bytes(), &parsed)
                    .is_ok()
            })
            .unwrap_or(false)
    })
    .await
    .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_gate_lets_so_many_hash_at_once_and_turns_the_rest_away_in_time() {
        let gate = std::sync::Arc::new(HashGate::new(1, Duration::from_millis(1)));
        let hash = hash("correct horse").await.unwrap();
        let tries: Vec<_> = (0..8)
            .map(|_| {
                let (gate, hash) = (gate.clone(), hash.clone());
                tokio::spawn(async move { gate.verify("correct horse", &hash).await })
            })
            .collect();
        let (mut ok, mut busy) = (0, 0);
        for t in tries {
            match t.await.unwrap() {
                Ok(true) => ok += 1,
                Err(Error::Unavailable(m)) => {
                    assert!(m.contains("too many sign-ins"), "{m}");
                    busy += 1
                }
                other => panic!("{other:?}"),
            }
        }
        // One hash takes longer than the wait: the first runs, most of the rest give up.
        assert!(
            ok >= 1 && busy >= 1 && ok + busy == 8,
            "{ok} ran, {busy} turned away"
        );
    }

    #[tokio::test]
    async fn hashes_verify_and_rules_hold() {
        let h = hash("correct horse").await.unwrap();
        assert!(verify("correct horse", &h).await);
        assert!(!verify("wrong horse", &h).await);
        assert!(!verify("correct horse", "not a hash").await);
        assert!(!verify("x", DUMMY_HASH).await);
        assert!(validate("short").is_err());
        assert!(validate(&"x".repeat(MAX_PASSWORD_BYTES + 1)).is_err());
        assert!(validate("long enough").is_ok());
    }
}
