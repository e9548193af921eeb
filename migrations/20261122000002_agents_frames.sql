-- Agents: a user's configured AI backends. The API key and the JSON config are sealed with
-- the user's data key (associated data "agents.api_key:<id>" / "agents.config:<id>").
CREATE TABLE agents (
    id         INTEGER PRIMARY KEY,
    user_id    INTEGER NOT NULL REFERENCES users(id),
    name       TEXT NOT NULL,
    provider   TEXT NOT NULL CHECK (provider IN ('anthropic', 'openai', 'openai-compatible', 'scripted')),
    model      TEXT NOT NULL,
    base_url   TEXT,
    api_key    BLOB,
    config     BLOB NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    -- Soft delete: sessions keep pointing at the row, and say the agent is gone.
    deleted_at TEXT
);
CREATE INDEX agents_user ON agents(user_id, id);

ALTER TABLE sessions ADD COLUMN agent_id INTEGER REFERENCES agents(id);
-- 1: replies stream (SSE); 0: batch mode. Switched by typing `/stream on|off`.
ALTER TABLE sessions ADD COLUMN streaming INTEGER NOT NULL DEFAULT 1 CHECK (streaming IN (0, 1));

-- The conversation log (reference 003). Rows are never updated or deleted: hiding and
-- editing are `update` frames. `seq` is per session and strictly increasing.
CREATE TABLE frames (
    id          TEXT PRIMARY KEY NOT NULL,
    session_id  INTEGER NOT NULL REFERENCES sessions(id),
    seq         INTEGER NOT NULL,
    parent_id   TEXT,
    target_ids  TEXT NOT NULL DEFAULT '[]',
    timestamp   TEXT NOT NULL,
    type        TEXT NOT NULL CHECK (type IN ('message', 'request', 'result', 'update', 'compact')),
    author_type TEXT NOT NULL CHECK (author_type IN ('user', 'agent', 'system')),
    author_id   INTEGER,
    -- JSON payload sealed with the session owner's data key, associated data
    -- "frames.payload:<id>".
    payload     BLOB NOT NULL,
    UNIQUE (session_id, seq)
);
CREATE INDEX frames_parent ON frames(parent_id);

-- One row per provider call: what it cost in tokens.
CREATE TABLE usage (
    id            INTEGER PRIMARY KEY,
    user_id       INTEGER NOT NULL REFERENCES users(id),
    agent_id      INTEGER REFERENCES agents(id),
    session_id    INTEGER REFERENCES sessions(id),
    frame_id      TEXT,
    provider      TEXT NOT NULL,
    model         TEXT NOT NULL,
    input_tokens  INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    created_at    TEXT NOT NULL
);
CREATE INDEX usage_user ON usage(user_id, id);
