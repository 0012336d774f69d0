-- troupe store, schema version 3 (PostgreSQL): team work queues.
CREATE TABLE work_items (
    -- enqueue order across the store: first in, first out among equal priorities
    seq              BIGSERIAL PRIMARY KEY,
    queue            TEXT NOT NULL,
    id               TEXT NOT NULL,
    payload          TEXT NOT NULL,
    priority         BIGINT NOT NULL,
    tags             TEXT[] NOT NULL,
    state            TEXT NOT NULL
        CHECK (state IN ('queued', 'claimed', 'running', 'done', 'failed')),
    attempts         BIGINT NOT NULL DEFAULT 0,
    max_attempts     BIGINT NOT NULL CHECK (max_attempts >= 1),
    worker           TEXT,
    lease_expires_at BIGINT,
    available_at     BIGINT NOT NULL,
    last_error       TEXT,
    result           TEXT,
    enqueued_at      BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL,
    UNIQUE (queue, id)
);
-- What a claim scans: the queued items of a queue, best first.
CREATE INDEX work_items_to_claim ON work_items (queue, priority DESC, seq) WHERE state = 'queued';
-- What expiry scans: the held items of a queue, by lease.
CREATE INDEX work_items_held ON work_items (queue, lease_expires_at) WHERE state IN ('claimed', 'running');
