-- Files attached to messages (issue 34): each sealed with its user's key like a frame's
-- payload (its name, its bytes, and the text read from it); the message that carries one
-- names it in its payload.
CREATE TABLE attachments (
    id          TEXT PRIMARY KEY,
    user_id     BIGINT NOT NULL REFERENCES users(id),
    session_id  BIGINT NOT NULL REFERENCES sessions(id),
    kind        TEXT NOT NULL CHECK (kind IN ('text', 'pdf', 'image')),
    media_type  TEXT NOT NULL,
    size        BIGINT NOT NULL,
    name        BYTEA NOT NULL,
    content     BYTEA NOT NULL,
    text        BYTEA,
    created_at  TEXT NOT NULL
);
CREATE INDEX attachments_session ON attachments (session_id);
