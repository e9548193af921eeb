//! Per-user counts of things held at once (live streams, turns in flight), each with its
//! bound: a permit is taken before the thing starts and given back when it ends, so the
//! count is exact whatever ends it, and nothing is refused half-begun.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::{Error, Result};

/// How many of one kind of thing each user holds.
#[derive(Debug, Default)]
pub struct PerUser {
    held: Arc<Mutex<HashMap<i64, usize>>>,
}

/// One thing a user holds ([`PerUser::acquire`]); counted until dropped.
pub struct Permit {
    held: Arc<Mutex<HashMap<i64, usize>>>,
    user_id: i64,
    /// What else gives it back when it is dropped (its hold among the instances).
    then: Option<Box<dyn FnOnce() + Send + Sync>>,
}

impl std::fmt::Debug for Permit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Permit")
            .field("user_id", &self.user_id)
            .finish_non_exhaustive()
    }
}

impl Permit {
    pub fn user_id(&self) -> i64 {
        self.user_id
    }

    /// The permit, with `release` run when it is dropped too.
    pub fn then_release(mut self, release: impl FnOnce() + Send + Sync + 'static) -> Permit {
        self.then = Some(Box::new(release));
        self
    }
}

/// The refusal of one more of `what` (a 429), at `at_most` held at once.
pub fn refused(what: &str, at_most: usize) -> Error {
    Error::Limit(format!(
        "you are at the limit of {what} ({at_most} at once); wait for one to end"
    ))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl PerUser {
    /// A permit while `user_id` holds fewer than `at_most`; else a 429 whose message names
    /// `what` they hold too many of ("live streams").
    pub fn acquire(&self, user_id: i64, at_most: usize, what: &str) -> Result<Permit> {
        let mut m = lock(&self.held);
        let n = m.entry(user_id).or_default();
        if *n >= at_most {
            if *n == 0 {
                m.remove(&user_id);
            }
            return Err(refused(what, at_most));
        }
        *n += 1;
        Ok(Permit {
            held: self.held.clone(),
            user_id,
            then: None,
        })
    }

    /// How many `user_id` holds.
    pub fn held(&self, user_id: i64) -> usize {
        lock(&self.held).get(&user_id).copied().unwrap_or(0)
    }

    /// How many all users hold together.
    pub fn total(&self) -> usize {
        lock(&self.held).values().sum()
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        {
            let mut m = lock(&self.held);
            if let Some(n) = m.get_mut(&self.user_id) {
                *n -= 1;
                if *n == 0 {
                    m.remove(&self.user_id);
                }
            }
        }
        if let Some(release) = self.then.take() {
            release();
        }
    }
}

/// At most so many of one kind of work per user at once; the rest wait their turn (unlike
/// [`PerUser`], which refuses). A user's work then takes so many of a shared resource (the
/// pool's connections) at most, however much of it they start.
#[derive(Debug)]
pub struct Turnstile {
    at_once: usize,
    users: Arc<Mutex<HashMap<i64, Arc<tokio::sync::Semaphore>>>>,
}

/// One user's turn at a [`Turnstile`]; the next waiting one goes when it is dropped.
#[derive(Debug)]
pub struct Turn {
    permit: Option<tokio::sync::OwnedSemaphorePermit>,
    users: Arc<Mutex<HashMap<i64, Arc<tokio::sync::Semaphore>>>>,
    user_id: i64,
}

impl Turnstile {
    pub fn new(at_once: usize) -> Turnstile {
        Turnstile {
            at_once: at_once.max(1),
            users: Default::default(),
        }
    }

    /// Waits for `user_id`'s turn.
    pub async fn wait(&self, user_id: i64) -> Turn {
        let sem = lock(&self.users)
            .entry(user_id)
            .or_insert_with(|| Arc::new(tokio::sync::Semaphore::new(self.at_once)))
            .clone();
        // Never closed, so acquiring cannot fail.
        let permit = sem.acquire_owned().await.ok();
        Turn {
            permit,
            users: self.users.clone(),
            user_id,
        }
    }

    /// How many users have work in or waiting at the turnstile.
    pub fn users(&self) -> usize {
        lock(&self.users).len()
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        let mut users = lock(&self.users);
        self.permit.take();
        // The map's copy and none other: nobody holds or waits for a turn; forget the user.
        if users
            .get(&self.user_id)
            .is_some_and(|s| Arc::strong_count(s) == 1)
        {
            users.remove(&self.user_id);
        }
    }
}

/// The per-user bounds ([`crate::Settings::limits`]); the defaults are what a shared
/// deployment would choose, and each is a setting.
#[derive(Debug, Clone)]
pub struct Limits {
    pub sessions_per_user: usize,
    pub frames_per_session: i64,
    pub turns_per_user: usize,
    pub live_streams_per_user: usize,
    /// Replies of calls and follow-ups one user message may set going: the reply at this
    /// round has its calls refused, and the agent is not run again.
    pub rounds_per_message: usize,
    /// Messages an agent queued for a session (`@agent(queue, …)`) that wait to be sent at
    /// once, per user: the one past it is refused, named.
    pub queued_per_user: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            sessions_per_user: 10_000,
            frames_per_session: 200_000,
            turns_per_user: 8,
            live_streams_per_user: 32,
            rounds_per_message: 8,
            queued_per_user: 16,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_turnstile_lets_so_many_of_a_users_work_go_at_once_and_forgets_them_after() {
        let t = Turnstile::new(2);
        let a1 = t.wait(1).await;
        let _a2 = t.wait(1).await;
        // Another user is not held up by the first one's.
        let b = t.wait(2).await;
        let third = t.wait(1);
        tokio::pin!(third);
        assert!(
            futures::poll!(third.as_mut()).is_pending(),
            "a third turn at once"
        );
        drop(a1);
        let a3 = third.await;
        drop((a3, b, _a2));
        assert_eq!(t.users(), 0, "nobody waits: no user is kept");
    }

    #[test]
    fn a_user_holds_so_many_at_most_and_a_dropped_permit_frees_its_place() {
        let p = PerUser::default();
        let held: Vec<_> = (0..3)
            .map(|_| p.acquire(7, 3, "live streams").unwrap())
            .collect();
        let e = p.acquire(7, 3, "live streams").unwrap_err();
        assert!(
            matches!(&e, Error::Limit(m) if m.contains("limit of live streams (3 at once)")),
            "{e}"
        );
        assert_eq!(e.status(), http::StatusCode::TOO_MANY_REQUESTS);
        // Another user is counted apart; a dropped permit frees its place.
        let _other = p.acquire(8, 3, "live streams").unwrap();
        assert_eq!(p.total(), 4, "everyone's together");
        drop(held);
        assert_eq!(p.held(7), 0);
        let _again = p.acquire(7, 3, "live streams").unwrap();
        assert_eq!(p.held(7), 1);
        assert!(p.acquire(9, 0, "turns").is_err() && p.held(9) == 0);
        assert_eq!(p.total(), 2);
    }
}
