-- Whether a session has begun (reference 000 "Startup Abilities"): its first message is
-- preceded by the startup processes, in the transaction that stores it, which sets this.
-- Sessions made before it existed count as begun; a new one is inserted with FALSE.
ALTER TABLE sessions ADD COLUMN started BOOLEAN NOT NULL DEFAULT TRUE;
