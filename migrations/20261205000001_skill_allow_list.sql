-- An agent's skill allow list (reference 002 §12.5): NULL, every skill the user has; a JSON
-- array of names, those alone (`[]`: none).
ALTER TABLE agents ADD COLUMN skill_allow_list TEXT;
