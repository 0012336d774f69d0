//! Durable runs, from above the runner.
//!
//! `troupe-runtime`'s runner records a run as it goes (with
//! [`Runner::with_store`](troupe_runtime::Runner::with_store)) and continues a stored run
//! whose lease this process holds. This crate works on stored runs from outside any one
//! run:
//!
//! - [`QueueWorker`] claims queued runs from a shared store and runs them, any number of
//!   workers on any number of machines (the [`queue`] consumer);
//! - [`fire_due`] starts the scheduled runs whose tick is due, exactly once per tick
//!   however many workers watch ([`schedule_agent`], [`schedule_run`], [`schedule_wake`]);
//! - [`ResumeRun`] continues a stored run by its id, taking its lease first
//!   ([`take_lease`]);
//! - [`send_signal`] sends a signal to a stored run through the store, so that whichever
//!   process holds the run applies it, in order, once.

// Library code answers with errors, never panics: `unwrap`/`expect` only in tests.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod lease;
pub mod queue;
mod resume;
mod schedule;
mod signal;

pub use lease::take_lease;
pub use queue::{ClaimedRuns, DEFAULT_IDLE_POLL, QueueWorker, WorkerReport};
pub use resume::ResumeRun;
pub use schedule::{ScheduleFired, fire_due, next_tick, schedule_agent, schedule_run, schedule_wake};
pub use signal::send_signal;
