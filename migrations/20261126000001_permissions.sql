-- Each user's own permission level for a function (reference 000, "Permission Levels"): a
-- row overrides the function's default; no row, the default holds. Functions are named by
-- the registry in code, so the name is not a foreign key.
CREATE TABLE permissions (
    user_id    INTEGER NOT NULL REFERENCES users(id),
    function   TEXT NOT NULL,
    level      TEXT NOT NULL CHECK (level IN ('always', 'ask', 'never')),
    updated_at TEXT NOT NULL,
    PRIMARY KEY (user_id, function)
);
