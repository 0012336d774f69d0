//! Workers as child processes: the coordinator's side ([`ProcessMember`], a team member
//! whose tasks run in worker processes) and the worker's ([`serve`]).
//!
//! - [`config`]: how a worker is started ([`WorkerConfig`]: program, granted environment,
//!   timeout, heartbeats, retries, tool policy, artifact directory).
//! - [`coordinator`]: [`ProcessMember`], retries with backoff, the [`WorkerOutcome`].
//! - [`worker`]: [`serve`], the worker's loop.
//! - [`sandbox`]: Landlock confinement of a worker to its workspace, and its report.
//! - [`rss`]: peak resident memory from `/proc`.

mod attempt;
mod child;
pub mod config;
pub mod coordinator;
mod error;
mod outcome;
mod policy;
pub mod rss;
pub mod sandbox;
pub mod worker;

pub use config::{Backoff, DEFAULT_INHERITED_ENV, WorkerConfig};
pub use coordinator::{ProcessMember, WorkerTask};
pub use error::{AttemptError, WorkerError};
pub use outcome::{AttemptReport, ReceivedArtifact, WorkerOutcome};
pub use sandbox::{SandboxPolicy, SandboxReport, confine};
pub use worker::{INPUTS_DIR, SANDBOX_EVENT, ServeOptions, ServeSummary, serve};
