-- troupe store, schema version 3 (SQLite): team work queues.
CREATE TABLE work_items (
    -- enqueue order across the store: first in, first out among equal priorities
    seq              INTEGER PRIMARY KEY AUTOINCREMENT,
    queue            TEXT NOT NULL,
    id               TEXT NOT NULL,
    payload          TEXT NOT NULL,
    priority         INTEGER NOT NULL,
    -- a JSON array of strings
    tags             TEXT NOT NULL,
    state            TEXT NOT NULL
        CHECK (state IN ('queued', 'claimed', 'running', 'done', 'failed')),
    attempts         INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL CHECK (max_attempts >= 1),
    worker           TEXT,
    lease_expires_at INTEGER,
    available_at     INTEGER NOT NULL,
    last_error       TEXT,
    result           TEXT,
    enqueued_at      INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    UNIQUE (queue, id)
);
-- What a claim scans: the queued items of a queue, best first.
CREATE INDEX work_items_to_claim ON work_items (queue, priority DESC, seq) WHERE state = 'queued';
-- What expiry scans: the held items of a queue, by lease.
CREATE INDEX work_items_held ON work_items (queue, lease_expires_at) WHERE state IN ('claimed', 'running');
