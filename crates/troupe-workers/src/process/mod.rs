//! Workers as child processes: the coordinator's side ([`ProcessMember`], a team member
//! whose tasks run in worker processes) and the worker's ([`serve`]).
//!
//! - [`config`]: how a worker is started ([`WorkerConfig`]: program, granted environment,
//!   timeout, heartbeats, retries, tool policy, artifact directory).
//! - [`coordinator`]: [`ProcessMember`], retries with backoff, the [`WorkerOutcome`].
//! - [`worker`]: [`serve`], the worker's loop.
//! - `remote_store` and `store_host`: a worker's run recorded in the coordinator's store
//!   over the protocol ([`WorkerConfig::record_in`]), so a retried worker resumes it.
//! - `model_host` and `hosted_models`: a worker's model calls made by the coordinator
//!   ([`WorkerConfig::host_models`]), so no provider key reaches the worker.
//! - [`sandbox`]: Landlock confinement of a worker to its workspace, and its report.
//! - [`rss`]: peak resident memory from `/proc`.

mod attempt;
mod child;
pub mod config;
pub mod coordinator;
mod error;
mod hosted_models;
mod model_host;
mod outcome;
mod policy;
mod remote_store;
pub mod rss;
pub mod sandbox;
mod store_host;
pub mod worker;

pub use config::{Backoff, DEFAULT_INHERITED_ENV, OFFLINE_ENV, RecordStore, WorkerConfig};
pub use coordinator::{ProcessMember, WorkerTask};
pub use error::{AttemptError, WorkerError};
pub use model_host::ModelHost;
pub use outcome::{AttemptReport, ReceivedArtifact, WorkerOutcome};
pub use sandbox::{SandboxPolicy, SandboxReport, confine};
pub use worker::{INPUTS_DIR, SANDBOX_EVENT, ServeOptions, ServeSummary, serve};
