-- Reference 004's configuration, per user: each key's versions, appended and never changed
-- (the highest is current). `agent_id` names the agent an agent key (`soul`, `agents`) is of,
-- 0 for the user's own keys. The content and the reason are sealed together with the user's
-- data key, bound to (user, key, agent, version); `author` is who wrote it: `hero` (a
-- shipped default, or a file as first read), `user` or `agent`.
CREATE TABLE config_versions (
    id         INTEGER PRIMARY KEY,
    user_id    INTEGER NOT NULL REFERENCES users(id),
    key        TEXT NOT NULL,
    agent_id   INTEGER NOT NULL,
    version    INTEGER NOT NULL,
    sealed     BLOB NOT NULL,
    author     TEXT NOT NULL CHECK (author IN ('hero', 'user', 'agent')),
    change_id  TEXT,
    created_at TEXT NOT NULL,
    UNIQUE (user_id, key, agent_id, version)
);

-- A change an agent proposed (`propose_config_change`), by the id of its call's request
-- frame: the version it was made against, the content and reason sealed as a version's are
-- (bound to the change's id), and what the user decided.
CREATE TABLE config_changes (
    id           TEXT PRIMARY KEY,
    user_id      INTEGER NOT NULL REFERENCES users(id),
    session_id   INTEGER NOT NULL,
    key          TEXT NOT NULL,
    agent_id     INTEGER NOT NULL,
    base_version INTEGER NOT NULL,
    sealed       BLOB NOT NULL,
    status       TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'rejected', 'stale')),
    version      INTEGER,
    created_at   TEXT NOT NULL,
    decided_at   TEXT
);
CREATE INDEX config_changes_user ON config_changes (user_id, status);

-- A capability's instructions and the user's standing instructions are in their agents'
-- prompts: a new version raises the user's prompt generation, in the same transaction.
CREATE TRIGGER prompt_gen_config_version AFTER INSERT ON config_versions BEGIN
    UPDATE users SET prompt_gen = prompt_gen + 1 WHERE id = NEW.user_id;
END;
