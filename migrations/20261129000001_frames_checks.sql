-- The frames table again, its checks written as comparisons: SQLite tests `x IN (list)` of
-- three or more values against a temporary b-tree it builds and frees on every insert (a
-- page cache set up and torn down twice per frame, measured at a few percent of a turn's
-- CPU; docs/perf.md). The rows, the columns and what each check admits are as they were.
CREATE TABLE frames_checked (
    id          TEXT PRIMARY KEY NOT NULL,
    session_id  INTEGER NOT NULL REFERENCES sessions(id),
    seq         INTEGER NOT NULL,
    parent_id   TEXT,
    target_ids  TEXT NOT NULL DEFAULT '[]',
    timestamp   TEXT NOT NULL,
    type        TEXT NOT NULL CHECK (
        type = 'message' OR type = 'request' OR type = 'result' OR type = 'update' OR type = 'compact'
    ),
    author_type TEXT NOT NULL CHECK (
        author_type = 'user' OR author_type = 'agent' OR author_type = 'system'
    ),
    author_id   INTEGER,
    -- JSON payload sealed with the session owner's data key (`seal` says how).
    payload     BLOB NOT NULL,
    seal        INTEGER NOT NULL DEFAULT 1 CHECK (seal = 1 OR seal = 2),
    UNIQUE (session_id, seq)
);

INSERT INTO frames_checked
    (id, session_id, seq, parent_id, target_ids, timestamp, type, author_type, author_id, payload, seal)
SELECT id, session_id, seq, parent_id, target_ids, timestamp, type, author_type, author_id, payload, seal
FROM frames;

DROP TABLE frames;
ALTER TABLE frames_checked RENAME TO frames;

CREATE INDEX frames_parent ON frames(parent_id) WHERE parent_id IS NOT NULL;
CREATE INDEX frames_compacts ON frames(session_id, seq) WHERE type = 'compact';
