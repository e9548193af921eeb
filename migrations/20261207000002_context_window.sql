-- An agent's context window in tokens (reference 002 §16): where a conversation's memory
-- flush comes before its summary. NULL: 128,000.
ALTER TABLE agents ADD COLUMN context_window INTEGER CHECK (context_window > 0);
