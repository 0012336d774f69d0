-- troupe store, schema version 7 (PostgreSQL): a run's conversation kept apart from its
-- state, one row per message, so that a checkpoint appends the messages its boundary
-- added instead of writing the whole conversation again. A run whose conversation was
-- never kept apart (every run before this version) has no rows: its state holds it.
CREATE TABLE run_messages (
    run_id  TEXT NOT NULL REFERENCES runs (id),
    seq     BIGINT NOT NULL,
    message TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
