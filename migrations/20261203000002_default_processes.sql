-- An agent's default processes (reference 003): ability ids (`system:act`, `user:17`) in
-- order, as a JSON array; their text is in every system prompt of the agent's.
ALTER TABLE agents ADD COLUMN default_processes TEXT NOT NULL DEFAULT '[]';

-- A user's processes are in their agents' prompts (listed, or in full): a change raises the
-- user's prompt generation, in the same transaction.
CREATE TRIGGER prompt_gen_process_insert AFTER INSERT ON processes BEGIN
    UPDATE users SET prompt_gen = prompt_gen + 1 WHERE id = NEW.user_id;
END;
CREATE TRIGGER prompt_gen_process_update AFTER UPDATE ON processes BEGIN
    UPDATE users SET prompt_gen = prompt_gen + 1 WHERE id = NEW.user_id;
END;
CREATE TRIGGER prompt_gen_process_delete AFTER DELETE ON processes BEGIN
    UPDATE users SET prompt_gen = prompt_gen + 1 WHERE id = OLD.user_id;
END;
