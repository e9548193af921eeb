-- How a frame's payload is sealed. 1: its associated data names the frame id alone (frames
-- stored before this migration). 2: it names the id, the session, the type, the author,
-- the parent, the targets and the timestamp, so that none of them can be changed in the
-- database without the payload failing to open. Every new frame is sealed with 2.
ALTER TABLE frames ADD COLUMN seal INTEGER NOT NULL DEFAULT 1 CHECK (seal IN (1, 2));
