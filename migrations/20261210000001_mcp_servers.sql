-- Each user's MCP servers (reference 004: a capability source). Name, transport, whether it
-- is enabled, its timeout and status are plain; its configuration (command, arguments and
-- environment, or URL and headers) and its listing (tools, instructions, why it failed) are
-- sealed with the user's data key, bound to the server's user and id. A change to a server
-- raises the user's prompt generation: its tools are in the prompt and in the user's chain.
CREATE TABLE mcp_servers (
    id           INTEGER PRIMARY KEY,
    user_id      INTEGER NOT NULL REFERENCES users(id),
    name         TEXT NOT NULL,
    transport    TEXT NOT NULL CHECK (transport IN ('stdio', 'http')),
    enabled      INTEGER NOT NULL DEFAULT 1,
    timeout_secs INTEGER NOT NULL,
    status       TEXT NOT NULL CHECK (status IN ('untested', 'ready', 'failed')),
    config       BLOB NOT NULL,
    listing      BLOB NOT NULL,
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL,
    UNIQUE (user_id, name)
);

CREATE TRIGGER prompt_gen_mcp_insert AFTER INSERT ON mcp_servers BEGIN
    UPDATE users SET prompt_gen = prompt_gen + 1 WHERE id = NEW.user_id;
END;
CREATE TRIGGER prompt_gen_mcp_update AFTER UPDATE ON mcp_servers BEGIN
    UPDATE users SET prompt_gen = prompt_gen + 1 WHERE id = NEW.user_id;
END;
CREATE TRIGGER prompt_gen_mcp_delete AFTER DELETE ON mcp_servers BEGIN
    UPDATE users SET prompt_gen = prompt_gen + 1 WHERE id = OLD.user_id;
END;
