-- Several instances of Hero on one database: who is alive, work that must run once among
-- them, and live events too large for a notification (as on SQLite, where they stay empty).

CREATE TABLE instances (
    id TEXT PRIMARY KEY,
    started_at BIGINT NOT NULL,
    seen_at BIGINT NOT NULL
);

CREATE TABLE leases (
    name TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    expires_at BIGINT NOT NULL
);

CREATE TABLE fanout_spill (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    body BYTEA NOT NULL,
    created_at BIGINT NOT NULL
);
