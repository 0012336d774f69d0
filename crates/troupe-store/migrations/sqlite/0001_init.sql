-- troupe store, schema version 1 (SQLite).
CREATE TABLE troupe_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE runs (
    id              TEXT PRIMARY KEY,
    agent           TEXT NOT NULL,
    status          TEXT NOT NULL,
    activity        TEXT,
    conversation_id TEXT,
    parent_run_id   TEXT,
    input           TEXT NOT NULL,
    state           TEXT NOT NULL,
    -- counters that number the run's signals and transitions; bumping one locks the run
    signal_seq      INTEGER NOT NULL DEFAULT 0,
    transition_seq  INTEGER NOT NULL DEFAULT 0,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
);
CREATE INDEX runs_by_update ON runs (updated_at DESC);
CREATE INDEX runs_by_status ON runs (status, updated_at DESC);

CREATE TABLE run_transitions (
    run_id      TEXT NOT NULL REFERENCES runs (id),
    seq         INTEGER NOT NULL,
    from_status TEXT,
    to_status   TEXT NOT NULL,
    at          INTEGER NOT NULL,
    PRIMARY KEY (run_id, seq)
);

CREATE TABLE signals (
    run_id      TEXT NOT NULL REFERENCES runs (id),
    seq         INTEGER NOT NULL,
    kind        TEXT NOT NULL,
    payload     TEXT NOT NULL,
    sent_at     INTEGER NOT NULL,
    consumed_at INTEGER,
    PRIMARY KEY (run_id, seq)
);

-- Append-only: the payload is kept as the exact text that was hashed.
CREATE TABLE evidence (
    run_id      TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    kind        TEXT NOT NULL,
    call_id     TEXT,
    payload     TEXT NOT NULL,
    recorded_at INTEGER NOT NULL,
    prev_hash   TEXT NOT NULL,
    hash        TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
CREATE TRIGGER evidence_is_append_only_update BEFORE UPDATE ON evidence
BEGIN
    SELECT RAISE(ABORT, 'evidence is append-only: entries are never updated');
END;
CREATE TRIGGER evidence_is_append_only_delete BEFORE DELETE ON evidence
BEGIN
    SELECT RAISE(ABORT, 'evidence is append-only: entries are never deleted');
END;

CREATE TABLE conversation_turns (
    conversation_id TEXT NOT NULL,
    seq             INTEGER NOT NULL,
    run_id          TEXT NOT NULL,
    role            TEXT NOT NULL,
    message         TEXT NOT NULL,
    recorded_at     INTEGER NOT NULL,
    PRIMARY KEY (conversation_id, seq)
);

CREATE TABLE run_queue (
    run_id       TEXT PRIMARY KEY REFERENCES runs (id),
    available_at INTEGER NOT NULL,
    owner        TEXT,
    epoch        INTEGER NOT NULL DEFAULT 0,
    expires_at   INTEGER
);
CREATE INDEX run_queue_by_availability ON run_queue (available_at);

CREATE TABLE schedules (
    id            TEXT PRIMARY KEY,
    trigger_spec  TEXT NOT NULL,
    target        TEXT NOT NULL,
    next_fire_at  INTEGER NOT NULL,
    last_fired_at INTEGER,
    enabled       INTEGER NOT NULL DEFAULT 1
);
