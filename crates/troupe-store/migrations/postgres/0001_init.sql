-- troupe store, schema version 1 (PostgreSQL).
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
    signal_seq      BIGINT NOT NULL DEFAULT 0,
    transition_seq  BIGINT NOT NULL DEFAULT 0,
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL
);
CREATE INDEX runs_by_update ON runs (updated_at DESC);
CREATE INDEX runs_by_status ON runs (status, updated_at DESC);

CREATE TABLE run_transitions (
    run_id      TEXT NOT NULL REFERENCES runs (id),
    seq         BIGINT NOT NULL,
    from_status TEXT,
    to_status   TEXT NOT NULL,
    at          BIGINT NOT NULL,
    PRIMARY KEY (run_id, seq)
);

CREATE TABLE signals (
    run_id      TEXT NOT NULL REFERENCES runs (id),
    seq         BIGINT NOT NULL,
    kind        TEXT NOT NULL,
    payload     TEXT NOT NULL,
    sent_at     BIGINT NOT NULL,
    consumed_at BIGINT,
    PRIMARY KEY (run_id, seq)
);

-- Append-only: the payload is kept as the exact text that was hashed (TEXT, not JSONB,
-- which would reorder keys).
CREATE TABLE evidence (
    run_id      TEXT NOT NULL,
    seq         BIGINT NOT NULL,
    kind        TEXT NOT NULL,
    call_id     TEXT,
    payload     TEXT NOT NULL,
    recorded_at BIGINT NOT NULL,
    prev_hash   TEXT NOT NULL,
    hash        TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
CREATE FUNCTION troupe_evidence_is_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'evidence is append-only: % refused', TG_OP;
END;
$$;
CREATE TRIGGER evidence_is_append_only BEFORE UPDATE OR DELETE ON evidence
    FOR EACH ROW EXECUTE FUNCTION troupe_evidence_is_append_only();
CREATE TRIGGER evidence_is_append_only_truncate BEFORE TRUNCATE ON evidence
    FOR EACH STATEMENT EXECUTE FUNCTION troupe_evidence_is_append_only();

CREATE TABLE conversation_turns (
    conversation_id TEXT NOT NULL,
    seq             BIGINT NOT NULL,
    run_id          TEXT NOT NULL,
    role            TEXT NOT NULL,
    message         TEXT NOT NULL,
    recorded_at     BIGINT NOT NULL,
    PRIMARY KEY (conversation_id, seq)
);

CREATE TABLE run_queue (
    run_id       TEXT PRIMARY KEY REFERENCES runs (id),
    available_at BIGINT NOT NULL,
    owner        TEXT,
    epoch        BIGINT NOT NULL DEFAULT 0,
    expires_at   BIGINT
);
CREATE INDEX run_queue_by_availability ON run_queue (available_at);

CREATE TABLE schedules (
    id            TEXT PRIMARY KEY,
    trigger_spec  TEXT NOT NULL,
    target        TEXT NOT NULL,
    next_fire_at  BIGINT NOT NULL,
    last_fired_at BIGINT,
    enabled       BOOLEAN NOT NULL DEFAULT TRUE
);
