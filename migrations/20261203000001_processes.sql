-- A user's own processes (reference 000's abilities of source `user`): markdown instruction
-- macros with a closed set of variables. The name is plain (unique per user, it names the
-- ability); the description and the content are sealed with the user's data key, bound to
-- (user, id, name).
CREATE TABLE processes (
    id         INTEGER PRIMARY KEY,
    user_id    INTEGER NOT NULL REFERENCES users(id),
    name       TEXT NOT NULL,
    sealed     BLOB NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (user_id, name)
);
