-- Several instances of Hero on one database (PostgreSQL): who is alive, work that must run
-- once among them, and live events too large for a notification. On SQLite one process is
-- the only instance and these stay empty: they exist so that both backends have one schema.

-- Each running instance, by the random id it took at start; `seen_at` (Unix ms) is its
-- last heartbeat. One not seen for `cluster::EXPIRY` is dead: its leases may be taken.
CREATE TABLE instances (
    id TEXT PRIMARY KEY,
    started_at BIGINT NOT NULL,
    seen_at BIGINT NOT NULL
);

-- Work held by one instance until `expires_at` (Unix ms), by name ("timer:…", "reply:…").
CREATE TABLE leases (
    name TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    expires_at BIGINT NOT NULL
);

-- A live event too large for a notification's payload, sealed with the fan-out key; the
-- notification names its row. Deleted a minute after it was written.
CREATE TABLE fanout_spill (
    id INTEGER PRIMARY KEY,
    body BLOB NOT NULL,
    created_at BIGINT NOT NULL
);
