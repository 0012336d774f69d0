-- troupe store, schema version 8 (SQLite): a run's input kept apart from its row. SQLite
-- writes a row whole whenever it changes, and every checkpoint changes the run's row: an
-- input that spans pages (a long system prompt, a session's history, an attachment) was
-- written again at every boundary. It is written once, when the run is created.
CREATE TABLE run_inputs (
    run_id TEXT PRIMARY KEY REFERENCES runs (id),
    input  TEXT NOT NULL
);
INSERT INTO run_inputs (run_id, input) SELECT id, input FROM runs;
ALTER TABLE runs DROP COLUMN input;
