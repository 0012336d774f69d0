//! Replays of recorded troupe runs.
//!
//! A recorded run keeps every model response, every tool result and every decision a
//! person made, with digests of each request to the model. [`replay`] starts the run again
//! through a runner of the *current* code and configuration — its instructions, tools,
//! policy and middleware — with the model and the tools substituted by what was recorded,
//! so nothing is called and nothing runs. At each step the request the run makes now is
//! compared with the recorded one; the [`ReplayReport`] says the run is identical, or names
//! the first [`Divergence`] (a different request, tool call, approval verdict or ending)
//! with a readable diff. [`ReplayOptions`] take the model or the tools live instead, to see
//! what a new model or prompt does in yesterday's exact situation. Where the recorded run
//! compacted its conversation, the replay puts the conversation it left in place at the
//! same step.
//!
//! ```no_run
//! # async fn example(store: &dyn troupe_store::Store, runner: &troupe_runtime::Runner, spec: troupe_run::AgentSpec) -> Result<(), troupe_replay::ReplayError> {
//! use troupe_replay::{Recording, ReplayOptions, replay};
//!
//! let recording = Recording::load(store, "run-id").await?;
//! let report = replay(runner, spec, recording, ReplayOptions::default()).await?;
//! println!("{report}");
//! assert!(report.identical());
//! # Ok(()) }
//! ```

// Library code answers with errors, never panics: `unwrap`/`expect` only in tests.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod cassette;
mod compaction;
mod divergence;
mod error;
mod fork;
mod model;
mod recording;
mod replay;
mod session;
mod tools;

pub use cassette::{CASSETTE_VERSION, Cassette, CassetteError};
pub use divergence::{Divergence, DivergenceKind};
pub use error::ReplayError;
pub use fork::{FORK_ID_INFIX, Fork, ForkEdits, fork, fork_run_id, forks_of, next_fork_run_id};
pub use recording::{RecordedCompaction, RecordedInput, RecordedResult, Recording};
pub use replay::{ReplayOptions, ReplayReport, replay};
