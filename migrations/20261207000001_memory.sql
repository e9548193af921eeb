-- An agent's memory (reference 002 §1, §14): Markdown files the agent writes and searches,
-- at the agent's own scope (user_id NULL, written by its owner) or a user's. The content is
-- sealed with the agent owner's data key, bound to (agent, user, path); `hash` is an HMAC
-- under a key derived from that data key (a stored hash confirms no guessed text), and
-- `size` the plain text's bytes (a user's total is bounded). No chunk is stored: the index
-- is built in memory from the opened files.
CREATE TABLE memory_files (
    id         INTEGER PRIMARY KEY,
    agent_id   INTEGER NOT NULL REFERENCES agents(id),
    user_id    INTEGER REFERENCES users(id),
    owner_id   INTEGER NOT NULL REFERENCES users(id),
    path       TEXT NOT NULL,
    content    BLOB NOT NULL,
    hash       BLOB NOT NULL,
    size       INTEGER NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE UNIQUE INDEX memory_files_key ON memory_files(agent_id, IFNULL(user_id, 0), path);
CREATE INDEX memory_files_owner ON memory_files(owner_id);
