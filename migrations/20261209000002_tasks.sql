-- Reference 004's tasks, per user: teams (the key plain, an identifier's prefix; the name
-- sealed), tasks (the number plain, unique and rising in its team; status, priority and due
-- date plain, for the board's columns and order; title, description, project and labels
-- sealed with the user's data key, bound to the task's user and id), and every change to a
-- task as an event of its history, sealed, appended and never changed. Nothing is deleted.
CREATE TABLE task_teams (
    id          INTEGER PRIMARY KEY,
    user_id     INTEGER NOT NULL REFERENCES users(id),
    key         TEXT NOT NULL,
    sealed      BLOB NOT NULL,
    next_number INTEGER NOT NULL DEFAULT 1,
    created_at  TEXT NOT NULL,
    UNIQUE (user_id, key)
);

CREATE TABLE tasks (
    id         INTEGER PRIMARY KEY,
    user_id    INTEGER NOT NULL REFERENCES users(id),
    team_id    INTEGER NOT NULL REFERENCES task_teams(id),
    number     INTEGER NOT NULL,
    status     TEXT NOT NULL CHECK (status IN ('triage', 'backlog', 'todo', 'in_progress', 'done', 'canceled')),
    priority   INTEGER NOT NULL CHECK (priority BETWEEN 0 AND 4),
    due        TEXT,
    sealed     BLOB NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (team_id, number)
);
CREATE INDEX tasks_user ON tasks (user_id, status);

CREATE TABLE task_events (
    id         INTEGER PRIMARY KEY,
    task_id    INTEGER NOT NULL REFERENCES tasks(id),
    user_id    INTEGER NOT NULL REFERENCES users(id),
    n          INTEGER NOT NULL,
    actor      TEXT NOT NULL CHECK (actor IN ('user', 'agent')),
    agent_id   INTEGER,
    session_id INTEGER,
    sealed     BLOB NOT NULL,
    created_at TEXT NOT NULL,
    UNIQUE (task_id, n)
);
