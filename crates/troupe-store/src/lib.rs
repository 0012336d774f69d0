//! Durable repositories for troupe runs.
//!
//! A store keeps what a run needs to survive a crash and to move between machines:
//!
//! - **runs**: status, transitions, current activity, input and the last checkpointed
//!   state ([`RunRepository`]);
//! - **signals**: an inbound queue per run, acknowledged once stored, applied in order,
//!   each exactly once ([`SignalRepository`]);
//! - **evidence**: an append-only log of model turns, action boundaries, approval waits
//!   and context digests, each entry chained to the one before by a SHA-256 hash
//!   ([`EvidenceRepository`], [`EvidenceChain`], [`verify_chain`]);
//! - **conversations**: the turns of each conversation across runs
//!   ([`ConversationRepository`]);
//! - **the run queue**: runs waiting for a worker and leases with heartbeats, so a run
//!   whose worker died is taken over ([`QueueRepository`]);
//! - **schedules**: cron or interval ticks, each fired exactly once however many workers
//!   watch them ([`ScheduleRepository`]);
//! - **memories**: what agents chose to remember, by namespace ([`MemoryRepository`]);
//! - **team work queues**: named queues of work items claimed by priority and tags under
//!   leases, retried up to their attempts ([`WorkItemRepository`]).
//!
//! Two backends implement [`Store`]: SQLite, embedded, the default (feature `sqlite`),
//! and PostgreSQL for many workers on many machines (feature `postgres`).
//!
//! ```
//! use serde_json::json;
//! use troupe_store::{EvidenceChain, EvidenceKind, NewEvidence, NewRun, RunStatus, now_millis, verify_chain};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let store = troupe_store::open(dir.path().join("troupe.db").to_str().ok_or("path")?).await?;
//! let run = NewRun {
//!     id: "run-1".into(),
//!     agent: "coder".into(),
//!     status: RunStatus::Running,
//!     conversation_id: None,
//!     parent_run_id: None,
//!     input: json!({"instruction": "fix the build"}).into(),
//!     state: json!({}).into(),
//!     spend: None,
//! };
//! store.create_run(run, now_millis()).await?;
//!
//! let mut chain = EvidenceChain::new("run-1");
//! let sealed = chain.seal(vec![NewEvidence::new(EvidenceKind::RunStarted, json!({"model": "demo"}))], now_millis());
//! store.append_evidence(&sealed, None).await?;
//! chain.advance(&sealed);
//!
//! let log = store.evidence("run-1", 0).await?;
//! assert_eq!(log.len(), 1);
//! verify_chain(&log)?;
//! # Ok(())
//! # }
//! ```

// Library code answers with errors, never panics: `unwrap`/`expect` only in tests.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

// The statement macros first: the modules after them use them.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
#[macro_use]
mod sql;
mod canonical;
mod chain;
mod error;
mod open;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod ops;
mod record;
mod repository;
pub mod schema;
mod work;

#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "sqlite")]
pub mod sqlite;

pub use canonical::canonical_text;
pub use chain::{ChainBreak, EvidenceChain, entry_hash, json_text, lower_hex, verify_chain, verify_log};
pub use error::{StoreError, redact_location};
pub use open::{StoreLocation, default_sqlite_path, legacy_sqlite_path, open, user_data_dir, workspace_sqlite_path};
pub use record::{
    Checkpoint, ConversationTurn, EvidenceEntry, EvidenceHead, EvidenceKind, Firing, Flush, Lease, MemoryRecord,
    MessagesWrite, Millis, NewEvidence, NewRun, QueueEntry, RunFilter, RunRecord, RunSpend, RunStatus, RunSummary,
    SavedCheckpoint, Schedule, ScheduleTarget, SpendGroup, SpendSums, StoreInfo, StoredJson, StoredSignal, Transition,
    Trigger, now_millis,
};
pub use repository::{
    ConversationRepository, EvidenceRepository, MemoryRepository, QueueRepository, RunRepository, ScheduleRepository,
    SignalRepository, Store, StoreFuture, WorkItemRepository,
};
pub use work::{NewWork, WorkRecord, WorkState, WorkStats};
