-- Vectors of texts (reference 002 §11), cached by (endpoint, model, text's tag): the tag is
-- SHA-256's first 16 bytes of a public text (Hero's and the administrator's skills), or an
-- HMAC-SHA-256 under a key derived from the user's data key of theirs, whose vector is then
-- sealed with that key. No text is stored.
CREATE TABLE embeddings (
    endpoint   TEXT NOT NULL,
    model      TEXT NOT NULL,
    tag        BLOB NOT NULL,
    user_id    INTEGER REFERENCES users(id),
    vector     BLOB NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (endpoint, model, tag)
);
