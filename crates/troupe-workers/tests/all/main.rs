//! troupe-workers' integration tests, as one binary: each module was a test binary of its
//! own, and each linked the whole stack.

mod definitions;
mod ipc;
mod process;
mod reload;
mod team_remote;
mod team_run;
mod team_work;
