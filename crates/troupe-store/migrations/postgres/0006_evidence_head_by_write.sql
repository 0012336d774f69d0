-- troupe store, schema version 6 (PostgreSQL): the evidence head is moved once per write
-- that appends evidence (the write's last entry of each run), by the store's own statement
-- in the same transaction, not by a trigger run for every entry.
DROP TRIGGER IF EXISTS evidence_moves_the_head ON evidence;
DROP FUNCTION IF EXISTS troupe_evidence_moves_the_head();
