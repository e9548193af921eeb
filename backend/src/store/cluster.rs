//! What several instances on one database share (`instances`, `leases`, `fanout_spill`),
//! and PostgreSQL's notifications, which carry live events between them
//! ([`crate::conversation::cluster`] decides what goes in them). On SQLite one process is
//! the only instance: the notification side is PostgreSQL's alone.

use sqlx::Row;
use sqlx::postgres::PgListener;

use super::{Db, Pool};
use crate::{Error, Result};

/// An error for a PostgreSQL-only statement run on SQLite (a caller's mistake).
fn postgres_only() -> Error {
    Error::Internal("notifications between instances need PostgreSQL".into())
}

/// The schema this database's tables live in: instances of one installation share it, so
/// their notification channel is named after it (another installation on the same
/// PostgreSQL database, in another schema, has another channel).
pub async fn schema(db: &Db) -> Result<String> {
    match db.pool() {
        Pool::Postgres(p) => Ok(sqlx::query_scalar("SELECT current_schema()::text")
            .fetch_one(p)
            .await?),
        Pool::Sqlite(_) => Err(postgres_only()),
    }
}

/// Notifications on one channel, on a connection of their own that reconnects by itself.
pub struct Listener(PgListener);

/// Listens on `channel`: once this returns, every notification sent on it afterwards is
/// received (or its loss told, [`Listener::recv`]).
pub async fn listen(db: &Db, channel: &str) -> Result<Listener> {
    let Pool::Postgres(p) = db.pool() else {
        return Err(postgres_only());
    };
    let mut l = PgListener::connect_with(p).await?;
    l.listen(channel).await?;
    Ok(Listener(l))
}

impl Listener {
    /// The next notification's payload; `None` when the connection was lost (it is made
    /// again, listening, by the next call): notifications sent meanwhile are lost.
    pub async fn recv(&mut self) -> Result<Option<String>> {
        Ok(self.0.try_recv().await?.map(|n| n.payload().to_owned()))
    }
}

/// Sends `payload` on `channel` to every instance listening (this one too).
pub async fn notify(db: &Db, channel: &str, payload: &str) -> Result<()> {
    let Pool::Postgres(p) = db.pool() else {
        return Err(postgres_only());
    };
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(channel)
        .bind(payload)
        .execute(p)
        .await?;
    Ok(())
}

/// Keeps a live event too large for a notification; answers the row's id.
pub async fn spill(db: &Db, body: &[u8], now_ms: i64) -> Result<i64> {
    let sql = "INSERT INTO fanout_spill (body, created_at) VALUES ($1, $2) RETURNING id";
    Ok(on_pool!(db, |p| sqlx::query(sql)
        .bind(body)
        .bind(now_ms)
        .fetch_one(p)
        .await?
        .try_get::<i64, _>(0)?))
}

/// A spilled event, while it is kept.
pub async fn spilled(db: &Db, id: i64) -> Result<Option<Vec<u8>>> {
    let sql = "SELECT body FROM fanout_spill WHERE id = $1";
    Ok(on_pool!(db, |p| sqlx::query_scalar(sql)
        .bind(id)
        .fetch_optional(p)
        .await?))
}

/// Forgets the spilled events written before `before_ms`.
pub async fn forget_spills(db: &Db, before_ms: i64) -> Result<u64> {
    let sql = "DELETE FROM fanout_spill WHERE created_at < $1";
    Ok(on_pool!(db, |p| sqlx::query(sql)
        .bind(before_ms)
        .execute(p)
        .await?
        .rows_affected()))
}

/// The instance `id` is alive at `now_ms` (registered if it was not, or was forgotten).
pub async fn beat(db: &Db, id: &str, now_ms: i64) -> Result<()> {
    // An instance that left (seen at 0) stays dead: a beat already on its way when it
    // left does not bring it back.
    let sql = "INSERT INTO instances (id, started_at, seen_at) VALUES ($1, $2, $2) \
               ON CONFLICT (id) DO UPDATE SET seen_at = excluded.seen_at \
               WHERE instances.seen_at <> 0";
    on_pool!(db, |p| {
        sqlx::query(sql).bind(id).bind(now_ms).execute(p).await?;
    });
    Ok(())
}

/// The instances seen since `since_ms`.
pub async fn alive(db: &Db, since_ms: i64) -> Result<Vec<String>> {
    let sql = "SELECT id FROM instances WHERE seen_at >= $1 ORDER BY id";
    Ok(on_pool!(db, |p| sqlx::query_scalar(sql)
        .bind(since_ms)
        .fetch_all(p)
        .await?))
}

/// The instance `id` stops: it is dead at once to the others, and its leases are free.
pub async fn leave(db: &Db, id: &str) -> Result<()> {
    on_pool!(db, |p| {
        sqlx::query("DELETE FROM leases WHERE owner = $1")
            .bind(id)
            .execute(p)
            .await?;
        sqlx::query("DELETE FROM instances WHERE id = $1")
            .bind(id)
            .execute(p)
            .await?;
    });
    Ok(())
}

/// Forgets the instances not seen since `before_ms` (long dead) that hold no lease.
pub async fn forget_instances(db: &Db, before_ms: i64) -> Result<u64> {
    // Not one that still holds work: that is for whoever takes it over.
    let sql = "DELETE FROM instances WHERE seen_at < $1 \
               AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.owner = instances.id)";
    Ok(on_pool!(db, |p| sqlx::query(sql)
        .bind(before_ms)
        .execute(p)
        .await?
        .rows_affected()))
}

/// Takes the lease `name` for `owner` until `until_ms`, if it is free, expired at
/// `now_ms`, or `owner`'s already (then it is extended): whether `owner` holds it now.
pub async fn take_lease(
    db: &Db,
    name: &str,
    owner: &str,
    until_ms: i64,
    now_ms: i64,
) -> Result<bool> {
    let sql = "INSERT INTO leases (name, owner, expires_at) VALUES ($1, $2, $3) \
               ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, \
               expires_at = excluded.expires_at \
               WHERE leases.expires_at < $4 OR leases.owner = excluded.owner";
    Ok(on_pool!(db, |p| sqlx::query(sql)
        .bind(name)
        .bind(owner)
        .bind(until_ms)
        .bind(now_ms)
        .execute(p)
        .await?
        .rows_affected())
        == 1)
}

/// Gives the lease `name` back, if `owner` holds it.
pub async fn release_lease(db: &Db, name: &str, owner: &str) -> Result<()> {
    let sql = "DELETE FROM leases WHERE name = $1 AND owner = $2";
    on_pool!(db, |p| {
        sqlx::query(sql).bind(name).bind(owner).execute(p).await?;
    });
    Ok(())
}

/// A lock held across instances until it is dropped: a transaction on the locks' pool
/// holding PostgreSQL's advisory lock on a key (given back with the transaction, so a task
/// that fails while holding it cannot keep it).
pub struct Held(#[allow(dead_code)] sqlx::Transaction<'static, sqlx::Postgres>);

/// Waits for the lock on `key` among the instances; `None` on SQLite (one instance, whose
/// own locks are enough).
pub async fn hold(db: &Db, key: &str) -> Result<Option<Held>> {
    let Some(locks) = db.locks() else {
        return Ok(None);
    };
    let mut tx = locks.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
        .bind(key)
        .execute(&mut *tx)
        .await?;
    Ok(Some(Held(tx)))
}

/// Work `owner` does until it says otherwise ([`disown`]): a lease that never expires by
/// itself, held as long as its owner is alive.
pub async fn own(db: &Db, name: &str, owner: &str) -> Result<()> {
    let sql = "INSERT INTO leases (name, owner, expires_at) VALUES ($1, $2, $3) \
               ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, \
               expires_at = excluded.expires_at";
    on_pool!(db, |p| {
        sqlx::query(sql)
            .bind(name)
            .bind(owner)
            .bind(i64::MAX)
            .execute(p)
            .await?;
    });
    Ok(())
}

/// The work `name` is done, whoever held it.
pub async fn disown(db: &Db, name: &str) -> Result<()> {
    on_pool!(db, |p| {
        sqlx::query("DELETE FROM leases WHERE name = $1")
            .bind(name)
            .execute(p)
            .await?;
    });
    Ok(())
}

/// Whether the work `name` is held by an instance seen since `alive_since`.
pub async fn owned_alive(db: &Db, name: &str, alive_since: i64) -> Result<bool> {
    let sql = "SELECT COUNT(*) FROM leases l JOIN instances i ON i.id = l.owner \
               WHERE l.name = $1 AND i.seen_at >= $2";
    let n: i64 = on_pool!(db, |p| sqlx::query_scalar(sql)
        .bind(name)
        .bind(alive_since)
        .fetch_one(p)
        .await?);
    Ok(n > 0)
}

/// The names of the leases `owner` holds.
pub async fn leases_of(db: &Db, owner: &str) -> Result<Vec<String>> {
    let sql = "SELECT name FROM leases WHERE owner = $1 ORDER BY name";
    Ok(on_pool!(db, |p| sqlx::query_scalar(sql)
        .bind(owner)
        .fetch_all(p)
        .await?))
}

/// The instances not seen since `before_ms`: dead, their work to be taken over.
pub async fn dead(db: &Db, before_ms: i64) -> Result<Vec<String>> {
    let sql = "SELECT id FROM instances WHERE seen_at < $1 ORDER BY id";
    Ok(on_pool!(db, |p| sqlx::query_scalar(sql)
        .bind(before_ms)
        .fetch_all(p)
        .await?))
}

/// Takes the lock `name` for `owner`, marked by `token`: if no one holds it, its holder is
/// no longer alive (not seen since `alive_since`), or it is `owner`'s own (a release that
/// has not landed yet, by the one task of `owner`'s that may hold it): whether `owner`
/// holds it now.
pub async fn try_lock(
    db: &Db,
    name: &str,
    owner: &str,
    alive_since: i64,
    token: i64,
) -> Result<bool> {
    let sql = "INSERT INTO leases (name, owner, expires_at) VALUES ($1, $2, $3) \
               ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, \
               expires_at = excluded.expires_at \
               WHERE leases.owner = excluded.owner OR leases.owner NOT IN \
               (SELECT id FROM instances WHERE seen_at >= $4)";
    Ok(on_pool!(db, |p| sqlx::query(sql)
        .bind(name)
        .bind(owner)
        .bind(token)
        .bind(alive_since)
        .execute(p)
        .await?
        .rows_affected())
        == 1)
}

/// Gives the lock `name` back, if `owner` still holds it under `token` (the lease's
/// `expires_at`, which a lock row uses as the mark of one taking).
pub async fn release_lock(db: &Db, name: &str, owner: &str, token: i64) -> Result<()> {
    let sql = "DELETE FROM leases WHERE name = $1 AND owner = $2 AND expires_at = $3";
    on_pool!(db, |p| {
        sqlx::query(sql)
            .bind(name)
            .bind(owner)
            .bind(token)
            .execute(p)
            .await?;
    });
    Ok(())
}

/// The hold `name` (under `prefix`, a user's kind: "turn:7:") for `owner`, if instances
/// seen since `alive_since` hold fewer than `at_most` under that prefix: whether it was
/// taken ([`disown`] gives it back). Counted and taken under the prefix's lock, so two
/// instances never both take the last.
pub async fn take_hold(
    db: &Db,
    prefix: &str,
    name: &str,
    at_most: usize,
    owner: &str,
    alive_since: i64,
) -> Result<bool> {
    let Some(_held) = hold(db, prefix).await? else {
        return Err(postgres_only());
    };
    let sql = "SELECT COUNT(*) FROM leases l JOIN instances i ON i.id = l.owner \
               WHERE l.name LIKE $1 AND i.seen_at >= $2";
    let n: i64 = on_pool!(db, |p| sqlx::query_scalar(sql)
        .bind(format!("{prefix}%"))
        .bind(alive_since)
        .fetch_one(p)
        .await?);
    if n as usize >= at_most {
        return Ok(false);
    }
    own(db, name, owner).await?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A migrated database of the backend the tests run on (`HERO_TEST_BACKEND`).
    async fn db() -> (tempfile::TempDir, Db) {
        let (dir, st) = crate::test_support::state().await;
        (dir, st.db.clone())
    }

    #[tokio::test]
    async fn a_lease_is_held_by_one_owner_until_it_expires() {
        let (_dir, db) = db().await;
        {
            assert!(take_lease(&db, "timer:1", "a", 1_000, 0).await.unwrap());
            // Held: another cannot take it, its owner extends it.
            assert!(!take_lease(&db, "timer:1", "b", 2_000, 500).await.unwrap());
            assert!(take_lease(&db, "timer:1", "a", 3_000, 900).await.unwrap());
            assert!(!take_lease(&db, "timer:1", "b", 4_000, 2_999).await.unwrap());
            // Expired: taken over.
            assert!(take_lease(&db, "timer:1", "b", 9_000, 3_001).await.unwrap());
            assert!(!take_lease(&db, "timer:1", "a", 9_000, 3_002).await.unwrap());
            // Given back only by its owner.
            release_lease(&db, "timer:1", "a").await.unwrap();
            assert!(!take_lease(&db, "timer:1", "a", 9_000, 3_003).await.unwrap());
            release_lease(&db, "timer:1", "b").await.unwrap();
            assert!(take_lease(&db, "timer:1", "a", 9_000, 3_004).await.unwrap());
        }
    }

    #[tokio::test]
    async fn instances_are_alive_while_they_beat_and_dead_when_they_leave() {
        let (_dir, db) = db().await;
        {
            beat(&db, "a", 1_000).await.unwrap();
            beat(&db, "b", 1_000).await.unwrap();
            beat(&db, "a", 5_000).await.unwrap();
            assert_eq!(alive(&db, 2_000).await.unwrap(), ["a"]);
            assert!(
                take_lease(&db, "reply:m", "a", 99_000, 5_000)
                    .await
                    .unwrap()
            );
            leave(&db, "a").await.unwrap();
            assert!(alive(&db, 0).await.unwrap() == ["b"]);
            // Its lease went with it.
            assert!(
                take_lease(&db, "reply:m", "b", 99_000, 5_001)
                    .await
                    .unwrap()
            );
            // Long dead but holding work: kept for whoever takes the work over.
            assert_eq!(forget_instances(&db, 2_000).await.unwrap(), 0);
            release_lease(&db, "reply:m", "b").await.unwrap();
            assert_eq!(forget_instances(&db, 2_000).await.unwrap(), 1);
            assert!(alive(&db, 0).await.unwrap().is_empty());
        }
    }

    #[tokio::test]
    async fn holds_count_only_live_owners_and_stop_at_the_bound() {
        let (_dir, db) = db().await;
        let take = |name: &'static str, prefix: &'static str, owner: &'static str, since: i64| {
            let db = db.clone();
            async move { take_hold(&db, prefix, name, 2, owner, since).await }
        };
        if db.sqlite_pool().is_some() {
            // One instance: its own counts are the bound (`limits::PerUser`).
            assert!(take("turn:1:a", "turn:1:", "a", 0).await.is_err());
            return;
        }
        beat(&db, "a", 10_000).await.unwrap();
        beat(&db, "b", 10_000).await.unwrap();
        assert!(take("turn:1:x", "turn:1:", "a", 5_000).await.unwrap());
        assert!(take("turn:1:y", "turn:1:", "b", 5_000).await.unwrap());
        // Two held, by live instances: the third is refused, another user's is not.
        assert!(!take("turn:1:z", "turn:1:", "b", 5_000).await.unwrap());
        assert!(take("turn:11:x", "turn:11:", "b", 5_000).await.unwrap());
        disown(&db, "turn:1:x").await.unwrap();
        assert!(take("turn:1:w", "turn:1:", "a", 5_000).await.unwrap());
        assert!(owned_alive(&db, "turn:1:w", 5_000).await.unwrap());
        assert!(!take("turn:1:v", "turn:1:", "a", 5_000).await.unwrap());
        // b dies: what it held no longer counts.
        beat(&db, "a", 20_000).await.unwrap();
        assert!(take("turn:1:u", "turn:1:", "a", 15_000).await.unwrap());
        assert_eq!(dead(&db, 15_000).await.unwrap(), ["b"]);
        assert_eq!(leases_of(&db, "b").await.unwrap().len(), 2);
    }

    #[tokio::test]
    async fn a_lock_row_is_one_live_owners_at_a_time() {
        let (_dir, db) = db().await;
        beat(&db, "a", 10_000).await.unwrap();
        beat(&db, "b", 10_000).await.unwrap();
        assert!(try_lock(&db, "lock:m", "a", 5_000, 1).await.unwrap());
        assert!(
            !try_lock(&db, "lock:m", "b", 5_000, 2).await.unwrap(),
            "a holds it"
        );
        assert!(
            try_lock(&db, "lock:m", "a", 5_000, 3).await.unwrap(),
            "its own"
        );
        // The first taking's late release leaves the second's alone.
        release_lock(&db, "lock:m", "a", 1).await.unwrap();
        assert!(!try_lock(&db, "lock:m", "b", 5_000, 4).await.unwrap());
        release_lock(&db, "lock:m", "a", 3).await.unwrap();
        assert!(try_lock(&db, "lock:m", "b", 5_000, 5).await.unwrap());
        // b dies holding it: a takes it.
        beat(&db, "a", 30_000).await.unwrap();
        assert!(try_lock(&db, "lock:m", "a", 20_000, 6).await.unwrap());
    }

    #[tokio::test]
    async fn a_lock_across_instances_is_held_by_one_at_a_time() {
        let (_dir, db) = db().await;
        let Some(first) = hold(&db, "message:m").await.unwrap() else {
            assert!(db.sqlite_pool().is_some(), "only SQLite has no such lock");
            return;
        };
        let other = db.clone();
        let waiting = tokio::spawn(async move { hold(&other, "message:m").await.unwrap() });
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        assert!(!waiting.is_finished(), "the second waits for the first");
        // Another key is not held up.
        assert!(hold(&db, "message:n").await.unwrap().is_some());
        drop(first);
        let second = tokio::time::timeout(std::time::Duration::from_secs(10), waiting)
            .await
            .expect("the lock is given back with its holder")
            .unwrap();
        assert!(second.is_some());
    }

    #[tokio::test]
    async fn a_spilled_event_is_read_back_until_it_is_forgotten() {
        let (_dir, db) = db().await;
        {
            let id = spill(&db, b"sealed", 1_000).await.unwrap();
            assert_eq!(spilled(&db, id).await.unwrap().unwrap(), b"sealed");
            assert_eq!(forget_spills(&db, 1_001).await.unwrap(), 1);
            assert!(spilled(&db, id).await.unwrap().is_none());
        }
    }

    #[tokio::test]
    async fn a_notification_reaches_every_listener_on_the_channel() {
        let (_dir, db) = db().await;
        if db.sqlite_pool().is_some() {
            // SQLite has no notifications: one process is the only instance.
            assert!(listen(&db, "hero").await.is_err());
            return;
        }
        let channel = format!("hero_{}", schema(&db).await.unwrap());
        let mut a = listen(&db, &channel).await.unwrap();
        let mut b = listen(&db, &channel).await.unwrap();
        notify(&db, &channel, "hello").await.unwrap();
        notify(&db, "elsewhere", "not this").await.unwrap();
        notify(&db, &channel, "again").await.unwrap();
        for l in [&mut a, &mut b] {
            assert_eq!(l.recv().await.unwrap().as_deref(), Some("hello"));
            assert_eq!(l.recv().await.unwrap().as_deref(), Some("again"));
        }
    }
}
