-- Instance-wide values: the master-key check, so a wrong HERO_MASTER_KEY fails at start-up
-- with a clear message instead of as undecryptable rows later.
CREATE TABLE meta (
    key   TEXT PRIMARY KEY NOT NULL,
    value BLOB NOT NULL
);

CREATE TABLE users (
    id            INTEGER PRIMARY KEY,
    username      TEXT NOT NULL UNIQUE COLLATE NOCASE,
    password_hash TEXT NOT NULL,
    is_admin      INTEGER NOT NULL DEFAULT 0 CHECK (is_admin IN (0, 1)),
    disabled      INTEGER NOT NULL DEFAULT 0 CHECK (disabled IN (0, 1)),
    -- The user's data key, AES-256-GCM wrapped by the master key; the associated data names
    -- this row ("users.data_key:<id>"), so a key copied onto another row does not open.
    data_key      BLOB NOT NULL,
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL
);

-- One row per issued JWT (its jti). Logout and password change revoke rows; a token whose
-- row is missing or revoked is refused even though its signature and expiry are good.
CREATE TABLE auth_tokens (
    jti        TEXT PRIMARY KEY NOT NULL,
    user_id    INTEGER NOT NULL REFERENCES users(id),
    created_at TEXT NOT NULL,
    expires_at INTEGER NOT NULL,
    revoked_at TEXT
);
CREATE INDEX auth_tokens_user ON auth_tokens(user_id);

CREATE TABLE sessions (
    id                INTEGER PRIMARY KEY,
    user_id           INTEGER NOT NULL REFERENCES users(id),
    name              TEXT NOT NULL,
    status            TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'archived', 'agent')),
    parent_session_id INTEGER REFERENCES sessions(id),
    created_at        TEXT NOT NULL,
    updated_at        TEXT NOT NULL
);
CREATE INDEX sessions_user ON sessions(user_id, id);
CREATE INDEX sessions_parent ON sessions(parent_session_id);
