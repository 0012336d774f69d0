-- troupe store, schema version 2 (SQLite): agents' memories.
CREATE TABLE memories (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    namespace  TEXT NOT NULL,
    content    TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX memories_by_namespace ON memories (namespace, id DESC);
