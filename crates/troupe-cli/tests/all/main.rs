//! The `troupe` binary's tests: each spawns the built binary against the testkit's mock
//! model, real stores and real peers.
//!
//! One test binary for the crate: each module was a test file of its own.

mod agent;
mod cli;
mod console;
mod eval;
mod kill;
mod mcp;
mod memory;
mod remote;
mod restart;
mod run;
mod runs;
mod serve;
mod team;
mod worker_process;
