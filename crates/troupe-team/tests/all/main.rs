//! troupe-team's integration tests, as one binary: each module was a test binary of its
//! own, and each linked the whole stack. `common` is the shared harness (one test per
//! wire, the mock server with its provider).

#[macro_use]
mod common;
mod coordination;
mod delegation;
mod demo_team;
mod durable_queue;
mod firewall;
mod groups;
mod reports;
mod supervisor;
