-- A user's personal skills (reference 002 §8, tier 3), never on disk. The name is plain,
-- unique per user; SKILL.md and the files beside it are sealed together with the user's data
-- key, bound to (user, name).
CREATE TABLE personal_skills (
    id         INTEGER PRIMARY KEY,
    user_id    INTEGER NOT NULL REFERENCES users(id),
    name       TEXT NOT NULL,
    sealed     BLOB NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (user_id, name)
);
