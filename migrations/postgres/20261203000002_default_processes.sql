-- An agent's default processes (reference 003): ability ids (`system:act`, `user:17`) in
-- order, as a JSON array; their text is in every system prompt of the agent's.
ALTER TABLE agents ADD COLUMN default_processes TEXT NOT NULL DEFAULT '[]';

-- A user's processes are in their agents' prompts (listed, or in full): a change raises the
-- user's prompt generation, in the same transaction.
CREATE TRIGGER prompt_gen_process AFTER INSERT OR UPDATE OR DELETE ON processes
    FOR EACH ROW EXECUTE FUNCTION prompt_gen_of_user();
