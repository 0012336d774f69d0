-- troupe store, schema version 6 (SQLite): the evidence head is moved once per write that
-- appends evidence (the write's last entry of each run), by the store's own statement in
-- the same transaction, not by a trigger run for every entry (two statements, and a
-- statement journal, per entry).
DROP TRIGGER IF EXISTS evidence_moves_the_head;
