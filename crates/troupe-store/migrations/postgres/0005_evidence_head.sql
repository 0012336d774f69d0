-- troupe store, schema version 5 (PostgreSQL): each run's evidence chain head (the last
-- entry's sequence number and hash), moved by every entry appended, in the same
-- transaction. A log whose last entries were removed no longer reaches the head, so a
-- verification notices the cut. The heads have a narrow table of their own: moving one
-- rewrites a few bytes, not the run's row with its state.
CREATE TABLE IF NOT EXISTS evidence_heads (
    run_id TEXT PRIMARY KEY,
    seq    BIGINT NOT NULL,
    hash   TEXT NOT NULL
);
INSERT INTO evidence_heads (run_id, seq, hash)
    SELECT DISTINCT ON (run_id) run_id, seq, hash FROM evidence ORDER BY run_id, seq DESC
    ON CONFLICT (run_id) DO NOTHING;
CREATE OR REPLACE FUNCTION troupe_evidence_moves_the_head() RETURNS trigger AS $$
BEGIN
    INSERT INTO evidence_heads (run_id, seq, hash) VALUES (NEW.run_id, NEW.seq, NEW.hash)
    ON CONFLICT (run_id) DO UPDATE SET seq = EXCLUDED.seq, hash = EXCLUDED.hash
        WHERE evidence_heads.seq < EXCLUDED.seq;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
DROP TRIGGER IF EXISTS evidence_moves_the_head ON evidence;
CREATE TRIGGER evidence_moves_the_head AFTER INSERT ON evidence
    FOR EACH ROW EXECUTE FUNCTION troupe_evidence_moves_the_head();
