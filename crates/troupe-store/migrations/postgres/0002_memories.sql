-- troupe store, schema version 2 (PostgreSQL): agents' memories.
CREATE TABLE memories (
    id         BIGSERIAL PRIMARY KEY,
    namespace  TEXT NOT NULL,
    content    TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX memories_by_namespace ON memories (namespace, id DESC);
