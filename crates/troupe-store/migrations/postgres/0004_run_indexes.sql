-- troupe store, schema version 4 (PostgreSQL): run indexes a checkpoint does not touch.
-- Runs are listed newest first by creation; `updated_at` changes at every checkpoint, and
-- an index on it was rewritten by each one while no query read it.
DROP INDEX IF EXISTS runs_by_update;
DROP INDEX IF EXISTS runs_by_status;
CREATE INDEX IF NOT EXISTS runs_by_creation ON runs (created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS runs_by_status ON runs (status, created_at DESC, id DESC);
-- A run's children (a team's members' runs, delegations), looked up by their parent.
CREATE INDEX IF NOT EXISTS runs_by_parent ON runs (parent_run_id) WHERE parent_run_id IS NOT NULL;
