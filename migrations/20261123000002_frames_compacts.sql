-- Where a session's context starts: its last `compact` frame, found without reading the
-- frames before it (a turn's path and `GET /frames` never read what lies before a compact).
CREATE INDEX frames_compacts ON frames(session_id, seq) WHERE type = 'compact';
