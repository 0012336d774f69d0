//! The schema's versions, applied in order by each backend when it opens a database.
//!
//! The version in force is kept in `troupe_meta` (key `schema_version`), next to the
//! marker `application = troupe` that tells a troupe database from anyone else's.

/// The newest schema version this build knows.
pub const SCHEMA_VERSION: i64 = 10;

/// The `troupe_meta` value of key `application` in every troupe database.
pub const APPLICATION: &str = "troupe";

/// One schema step: the version it brings the database to and its SQL.
#[derive(Clone, Copy, Debug)]
pub struct Migration {
    /// The version after this step.
    pub version: i64,
    /// The statements (several, separated by `;`, run as one script).
    pub sql: &'static str,
}

/// The SQLite schema's steps.
#[cfg(feature = "sqlite")]
pub const SQLITE_MIGRATIONS: &[Migration] = &[
    Migration { version: 1, sql: include_str!("../migrations/sqlite/0001_init.sql") },
    Migration { version: 2, sql: include_str!("../migrations/sqlite/0002_memories.sql") },
    Migration { version: 3, sql: include_str!("../migrations/sqlite/0003_work_items.sql") },
    Migration { version: 4, sql: include_str!("../migrations/sqlite/0004_run_indexes.sql") },
    Migration { version: 5, sql: include_str!("../migrations/sqlite/0005_evidence_head.sql") },
    Migration { version: 6, sql: include_str!("../migrations/sqlite/0006_evidence_head_by_write.sql") },
    Migration { version: 7, sql: include_str!("../migrations/sqlite/0007_run_messages.sql") },
    Migration { version: 8, sql: include_str!("../migrations/sqlite/0008_run_inputs.sql") },
    Migration { version: 9, sql: include_str!("../migrations/sqlite/0009_appended_keys.sql") },
    Migration { version: 10, sql: include_str!("../migrations/sqlite/0010_run_spend.sql") },
];

/// The PostgreSQL schema's steps.
#[cfg(feature = "postgres")]
pub const POSTGRES_MIGRATIONS: &[Migration] = &[
    Migration { version: 1, sql: include_str!("../migrations/postgres/0001_init.sql") },
    Migration { version: 2, sql: include_str!("../migrations/postgres/0002_memories.sql") },
    Migration { version: 3, sql: include_str!("../migrations/postgres/0003_work_items.sql") },
    Migration { version: 4, sql: include_str!("../migrations/postgres/0004_run_indexes.sql") },
    Migration { version: 5, sql: include_str!("../migrations/postgres/0005_evidence_head.sql") },
    Migration { version: 6, sql: include_str!("../migrations/postgres/0006_evidence_head_by_write.sql") },
    Migration { version: 7, sql: include_str!("../migrations/postgres/0007_run_messages.sql") },
    Migration { version: 8, sql: include_str!("../migrations/postgres/0008_run_inputs.sql") },
    Migration { version: 9, sql: include_str!("../migrations/postgres/0009_appended_keys.sql") },
    Migration { version: 10, sql: include_str!("../migrations/postgres/0010_run_spend.sql") },
];

/// The tables of the schema, to tell a half-foreign database from an empty one.
pub const TABLES: &[&str] = &[
    "troupe_meta",
    "runs",
    "run_transitions",
    "signals",
    "evidence",
    "conversation_turns",
    "run_queue",
    "schedules",
    "memories",
    "work_items",
    "evidence_heads",
    "run_messages",
    "run_inputs",
];
