-- troupe store, schema version 5 (SQLite): each run's evidence chain head (the last entry's
-- sequence number and hash), moved by every entry appended, in the same transaction. A log
-- whose last entries were removed no longer reaches the head, so a verification notices the
-- cut. The heads have a narrow table of their own: moving one rewrites a few bytes, not the
-- run's row with its state.
CREATE TABLE evidence_heads (
    run_id TEXT PRIMARY KEY,
    seq    INTEGER NOT NULL,
    hash   TEXT NOT NULL
) WITHOUT ROWID;
INSERT INTO evidence_heads (run_id, seq, hash)
    SELECT e.run_id, e.seq, e.hash FROM evidence e
    WHERE e.seq = (SELECT MAX(l.seq) FROM evidence l WHERE l.run_id = e.run_id);
CREATE TRIGGER evidence_moves_the_head AFTER INSERT ON evidence
BEGIN
    INSERT OR IGNORE INTO evidence_heads (run_id, seq, hash) VALUES (NEW.run_id, NEW.seq, NEW.hash);
    UPDATE evidence_heads SET seq = NEW.seq, hash = NEW.hash WHERE run_id = NEW.run_id AND seq < NEW.seq;
END;
