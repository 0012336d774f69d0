-- troupe store, schema version 5 (SQLite): each run keeps the head of its evidence chain
-- (the last entry's sequence number and hash), moved by every entry appended, in the same
-- transaction. A log whose last entries were removed no longer reaches the head, so a
-- verification notices the cut.
ALTER TABLE runs ADD COLUMN evidence_seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN evidence_hash TEXT NOT NULL DEFAULT '';
UPDATE runs SET
    evidence_seq = COALESCE((SELECT MAX(e.seq) FROM evidence e WHERE e.run_id = runs.id), 0),
    evidence_hash = COALESCE(
        (SELECT e.hash FROM evidence e WHERE e.run_id = runs.id ORDER BY e.seq DESC LIMIT 1), '');
CREATE TRIGGER evidence_moves_the_head AFTER INSERT ON evidence
BEGIN
    UPDATE runs SET evidence_seq = NEW.seq, evidence_hash = NEW.hash
    WHERE id = NEW.run_id AND evidence_seq < NEW.seq;
END;
