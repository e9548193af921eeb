-- The administrator's skills (reference 002 §12, tier 4): their folders are on disk; a row
-- per folder ever read keeps what the disk cannot: its visibility, its version (raised when
-- its SKILL.md's hash changes) and, for agents pinned to one, its last texts.
CREATE TABLE skills (
    id         INTEGER PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    visibility TEXT NOT NULL DEFAULT 'public' CHECK (visibility IN ('public', 'internal')),
    version    INTEGER NOT NULL,
    hash       TEXT NOT NULL,
    updated_at TEXT NOT NULL
);

-- A global skill's last SKILL.md texts (20 kept), read by the agents pinned to one.
CREATE TABLE skill_versions (
    skill_id   INTEGER NOT NULL REFERENCES skills(id),
    version    INTEGER NOT NULL,
    hash       TEXT NOT NULL,
    content    TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (skill_id, version)
);

-- An internal skill is seen by the users and the agents it is granted to.
CREATE TABLE skill_user_grants (
    id         INTEGER PRIMARY KEY,
    skill_id   INTEGER NOT NULL REFERENCES skills(id),
    user_id    INTEGER NOT NULL REFERENCES users(id),
    granted_by INTEGER NOT NULL REFERENCES users(id),
    created_at TEXT NOT NULL,
    UNIQUE (skill_id, user_id)
);

CREATE TABLE skill_agent_grants (
    id             INTEGER PRIMARY KEY,
    skill_id       INTEGER NOT NULL REFERENCES skills(id),
    agent_id       INTEGER NOT NULL REFERENCES agents(id),
    pinned_version INTEGER,
    granted_by     INTEGER NOT NULL REFERENCES users(id),
    created_at     TEXT NOT NULL,
    UNIQUE (skill_id, agent_id)
);
