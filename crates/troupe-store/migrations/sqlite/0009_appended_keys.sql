-- troupe store, schema version 9 (SQLite): the b-trees a new run writes grow at their end.
-- Run ids and creation times increase, so a run's keys come after every earlier run's:
-- - the listing indexes are kept in ascending order (a newest-first list reads them
--   backwards, as fast). In descending order each new run went before all the others, and
--   the pages at the front were split and rebalanced, several of them a commit.
-- - a run's transitions, its input and its lease are kept by their key alone (`WITHOUT
--   ROWID`): one b-tree each instead of a table and its key's index, both written.
-- - the head of a run's evidence is kept in the run's row, which every checkpoint writes
--   anyway, instead of a table of its own whose page (and, as it grew, its neighbours')
--   each checkpoint wrote too. A run with no evidence has the head (0, '').
DROP INDEX IF EXISTS runs_by_creation;
DROP INDEX IF EXISTS runs_by_status;
CREATE INDEX runs_by_creation ON runs (created_at, id);
CREATE INDEX runs_by_status ON runs (status, created_at, id);

CREATE TABLE run_transitions_by_key (
    run_id      TEXT NOT NULL REFERENCES runs (id),
    seq         INTEGER NOT NULL,
    from_status TEXT,
    to_status   TEXT NOT NULL,
    at          INTEGER NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
INSERT INTO run_transitions_by_key (run_id, seq, from_status, to_status, at)
    SELECT run_id, seq, from_status, to_status, at FROM run_transitions;
DROP TABLE run_transitions;
ALTER TABLE run_transitions_by_key RENAME TO run_transitions;

CREATE TABLE run_inputs_by_key (
    run_id TEXT PRIMARY KEY REFERENCES runs (id),
    input  TEXT NOT NULL
) WITHOUT ROWID;
INSERT INTO run_inputs_by_key (run_id, input) SELECT run_id, input FROM run_inputs;
DROP TABLE run_inputs;
ALTER TABLE run_inputs_by_key RENAME TO run_inputs;

CREATE TABLE run_queue_by_key (
    run_id       TEXT PRIMARY KEY REFERENCES runs (id),
    available_at INTEGER NOT NULL,
    owner        TEXT,
    epoch        INTEGER NOT NULL DEFAULT 0,
    expires_at   INTEGER
) WITHOUT ROWID;
INSERT INTO run_queue_by_key (run_id, available_at, owner, epoch, expires_at)
    SELECT run_id, available_at, owner, epoch, expires_at FROM run_queue;
DROP TABLE run_queue;
ALTER TABLE run_queue_by_key RENAME TO run_queue;
CREATE INDEX run_queue_by_availability ON run_queue (available_at);

ALTER TABLE runs ADD COLUMN evidence_seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN evidence_hash TEXT NOT NULL DEFAULT '';
UPDATE runs SET evidence_seq = h.seq, evidence_hash = h.hash FROM evidence_heads h WHERE h.run_id = runs.id;
DROP TABLE evidence_heads;
