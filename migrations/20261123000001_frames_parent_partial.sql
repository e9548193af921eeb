-- Most frames (every message) have no parent: index only those that do, so that appending a
-- message writes one index fewer (a page of the write-ahead log per frame). A lookup by
-- parent (`parent_id = ?`) still uses it: the equality implies NOT NULL.
DROP INDEX frames_parent;
CREATE INDEX frames_parent ON frames(parent_id) WHERE parent_id IS NOT NULL;
