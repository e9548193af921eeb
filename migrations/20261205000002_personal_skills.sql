-- A user's personal skills (reference 002 §8, tier 3), never on disk. The name is plain,
-- unique per user; SKILL.md and the files beside it are sealed together with the user's data
-- key, bound to (user, name).
CREATE TABLE personal_skills (
    id         INTEGER PRIMARY KEY,
    user_id    INTEGER NOT NULL REFERENCES users(id),
    name       TEXT NOT NULL,
    sealed     BLOB NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (user_id, name)
);

-- A user's personal skills are in their agents' prompts: a change raises the user's prompt
-- generation, in the same transaction (the skills on disk are told apart by what they hold).
CREATE TRIGGER prompt_gen_personal_skill_insert AFTER INSERT ON personal_skills BEGIN
    UPDATE users SET prompt_gen = prompt_gen + 1 WHERE id = NEW.user_id;
END;
CREATE TRIGGER prompt_gen_personal_skill_update AFTER UPDATE ON personal_skills BEGIN
    UPDATE users SET prompt_gen = prompt_gen + 1 WHERE id = NEW.user_id;
END;
CREATE TRIGGER prompt_gen_personal_skill_delete AFTER DELETE ON personal_skills BEGIN
    UPDATE users SET prompt_gen = prompt_gen + 1 WHERE id = OLD.user_id;
END;
