-- troupe store, schema version 5 (PostgreSQL): each run keeps the head of its evidence
-- chain (the last entry's sequence number and hash), moved by every entry appended, in
-- the same transaction. A log whose last entries were removed no longer reaches the head,
-- so a verification notices the cut.
ALTER TABLE runs ADD COLUMN IF NOT EXISTS evidence_seq BIGINT NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS evidence_hash TEXT NOT NULL DEFAULT '';
UPDATE runs SET
    evidence_seq = COALESCE((SELECT MAX(e.seq) FROM evidence e WHERE e.run_id = runs.id), 0),
    evidence_hash = COALESCE(
        (SELECT e.hash FROM evidence e WHERE e.run_id = runs.id ORDER BY e.seq DESC LIMIT 1), '');
CREATE OR REPLACE FUNCTION troupe_evidence_moves_the_head() RETURNS trigger AS $$
BEGIN
    UPDATE runs SET evidence_seq = NEW.seq, evidence_hash = NEW.hash
    WHERE id = NEW.run_id AND evidence_seq < NEW.seq;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
DROP TRIGGER IF EXISTS evidence_moves_the_head ON evidence;
CREATE TRIGGER evidence_moves_the_head AFTER INSERT ON evidence
    FOR EACH ROW EXECUTE FUNCTION troupe_evidence_moves_the_head();
