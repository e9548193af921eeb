-- What each call cost (reference 003's spend): the prompt cache's tokens, the cost in
-- micro-dollars (Σ tokens × USD per million × the user's scalar, rounded once per call),
-- where its price came from (`table`, `config`, `agent`, `free` for the offline demo,
-- `unpriced`), the scalar in force (parts per million), and the fingerprint of the API key
-- it was made with (an HMAC under a key derived from the master key: the Service line groups
-- a user's agents by it; never sent). Rows from before cost nothing and count as unpriced.
ALTER TABLE usage ADD COLUMN cache_read_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE usage ADD COLUMN cache_write_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE usage ADD COLUMN cost_micros INTEGER NOT NULL DEFAULT 0;
ALTER TABLE usage ADD COLUMN price_source TEXT NOT NULL DEFAULT 'unpriced';
ALTER TABLE usage ADD COLUMN scalar_ppm INTEGER NOT NULL DEFAULT 1000000;
ALTER TABLE usage ADD COLUMN key_fp TEXT;

-- An agent's own price, USD per million tokens: JSON {input, output, cache_read, cache_write}.
ALTER TABLE agents ADD COLUMN price TEXT;

-- The user's token scalar (parts per million; 1.0 is 1,000,000), applied to later calls.
ALTER TABLE users ADD COLUMN token_scalar_ppm INTEGER NOT NULL DEFAULT 1000000;

-- `/update_usage <cost>`: what the bill for a key said, and the correction that makes the
-- Service and Global totals match it.
CREATE TABLE spend_corrections (
    id            INTEGER PRIMARY KEY,
    user_id       INTEGER NOT NULL REFERENCES users(id),
    agent_id      INTEGER REFERENCES agents(id),
    key_fp        TEXT NOT NULL,
    actual_micros INTEGER NOT NULL,
    delta_micros  INTEGER NOT NULL,
    created_at    TEXT NOT NULL
);
CREATE INDEX spend_corrections_user ON spend_corrections(user_id, id);

-- Running totals per user and scope (`global`, `key:<fp>`, `session:<id>`), kept in the
-- transaction of each usage row and correction: the spend lines read three rows, not every
-- call. The sum of the rows is the total (a property test holds them equal).
CREATE TABLE spend_totals (
    user_id            INTEGER NOT NULL REFERENCES users(id),
    scope              TEXT NOT NULL,
    cost_micros        INTEGER NOT NULL DEFAULT 0,
    calls              INTEGER NOT NULL DEFAULT 0,
    unpriced_calls     INTEGER NOT NULL DEFAULT 0,
    input_tokens       INTEGER NOT NULL DEFAULT 0,
    output_tokens      INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens  INTEGER NOT NULL DEFAULT 0,
    cache_write_tokens INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (user_id, scope)
);

INSERT INTO spend_totals (user_id, scope, calls, unpriced_calls, input_tokens, output_tokens)
    SELECT user_id, 'global', COUNT(*), COUNT(*), SUM(input_tokens), SUM(output_tokens)
    FROM usage GROUP BY user_id;
INSERT INTO spend_totals (user_id, scope, calls, unpriced_calls, input_tokens, output_tokens)
    SELECT user_id, 'session:' || session_id, COUNT(*), COUNT(*), SUM(input_tokens), SUM(output_tokens)
    FROM usage WHERE session_id IS NOT NULL GROUP BY user_id, session_id;
