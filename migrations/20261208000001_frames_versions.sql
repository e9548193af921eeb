-- The messages that are new versions of others (an edit, a regeneration): a session's page
-- asks whether its part of the conversation has any before it pages by seq.
CREATE INDEX frames_versions ON frames(session_id, seq) WHERE type = 'message' AND parent_id IS NOT NULL;
