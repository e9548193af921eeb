-- Agents with a persona (reference 002): an agent's type routes its context files, which
-- are seeded once, on the agent's first use; `status` is `summoning` while an agent's files
-- are being written from a description.
ALTER TABLE agents ADD COLUMN kind TEXT NOT NULL DEFAULT 'open' CHECK (kind IN ('open', 'predefined'));
ALTER TABLE agents ADD COLUMN status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('summoning', 'active'));
ALTER TABLE agents ADD COLUMN files_seeded INTEGER NOT NULL DEFAULT 0 CHECK (files_seeded IN (0, 1));

-- An agent's context files: at the agent's own level (user_id NULL) or a user's own copy.
-- The content is sealed with the agent owner's data key, bound to (agent, user, name).
CREATE TABLE context_files (
    id         INTEGER PRIMARY KEY,
    agent_id   INTEGER NOT NULL REFERENCES agents(id),
    user_id    INTEGER REFERENCES users(id),
    name       TEXT NOT NULL,
    content    BLOB NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE UNIQUE INDEX context_files_key ON context_files(agent_id, IFNULL(user_id, 0), name);

-- When an agent's sessions are summarised (compaction): NULL keeps Hero's defaults.
ALTER TABLE agents ADD COLUMN compact_messages INTEGER CHECK (compact_messages > 0);
ALTER TABLE agents ADD COLUMN compact_tokens INTEGER CHECK (compact_tokens > 0);
