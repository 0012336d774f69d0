-- troupe store, schema version 8 (PostgreSQL): a run's input kept apart from its row,
-- written once when the run is created. Every checkpoint writes a new version of the
-- run's row; the input no longer rides along in it.
CREATE TABLE run_inputs (
    run_id TEXT PRIMARY KEY REFERENCES runs (id),
    input  TEXT NOT NULL
);
INSERT INTO run_inputs (run_id, input) SELECT id, input FROM runs;
ALTER TABLE runs DROP COLUMN input;
