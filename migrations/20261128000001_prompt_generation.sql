-- A user's prompt generation: raised by every change to what their agents' system prompts
-- are built from (their agents' rows, those agents' context files, their permission levels),
-- in the same transaction as the change. A prompt kept in memory is used only while the
-- generation it was built under is still the user's (backend agents::persona::PromptCache),
-- whichever instance, connection or code path made the change.
ALTER TABLE users ADD COLUMN prompt_gen INTEGER NOT NULL DEFAULT 0;

CREATE TRIGGER prompt_gen_agent AFTER UPDATE ON agents BEGIN
    UPDATE users SET prompt_gen = prompt_gen + 1 WHERE id = NEW.user_id;
END;

CREATE TRIGGER prompt_gen_file_insert AFTER INSERT ON context_files BEGIN
    UPDATE users SET prompt_gen = prompt_gen + 1
    WHERE id = (SELECT user_id FROM agents WHERE id = NEW.agent_id);
END;
CREATE TRIGGER prompt_gen_file_update AFTER UPDATE ON context_files BEGIN
    UPDATE users SET prompt_gen = prompt_gen + 1
    WHERE id = (SELECT user_id FROM agents WHERE id = NEW.agent_id);
END;
CREATE TRIGGER prompt_gen_file_delete AFTER DELETE ON context_files BEGIN
    UPDATE users SET prompt_gen = prompt_gen + 1
    WHERE id = (SELECT user_id FROM agents WHERE id = OLD.agent_id);
END;

CREATE TRIGGER prompt_gen_level_insert AFTER INSERT ON permissions BEGIN
    UPDATE users SET prompt_gen = prompt_gen + 1 WHERE id = NEW.user_id;
END;
CREATE TRIGGER prompt_gen_level_update AFTER UPDATE ON permissions BEGIN
    UPDATE users SET prompt_gen = prompt_gen + 1 WHERE id = NEW.user_id;
END;
CREATE TRIGGER prompt_gen_level_delete AFTER DELETE ON permissions BEGIN
    UPDATE users SET prompt_gen = prompt_gen + 1 WHERE id = OLD.user_id;
END;
