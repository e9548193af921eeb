-- Files attached to messages (issue 34): each sealed with its user's key like a frame's
-- payload (its name, its bytes, and the text read from it); the message that carries one
-- names it in its payload.
CREATE TABLE attachments (
    id          TEXT PRIMARY KEY,
    user_id     INTEGER NOT NULL REFERENCES users(id),
    session_id  INTEGER NOT NULL REFERENCES sessions(id),
    kind        TEXT NOT NULL CHECK (kind = 'text' OR kind = 'pdf' OR kind = 'image'),
    media_type  TEXT NOT NULL,
    size        INTEGER NOT NULL,
    name        BLOB NOT NULL,
    content     BLOB NOT NULL,
    text        BLOB,
    created_at  TEXT NOT NULL
);
CREATE INDEX attachments_session ON attachments(session_id);
