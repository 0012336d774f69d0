//! Evaluations of troupe agents.
//!
//! A [`Suite`] (a TOML file) names cases — a task, the files of a throwaway workspace, a
//! typed answer to ask for, and [`Grader`]s its answer must pass: exact text, contained
//! text, a regular expression, a JSON schema, JSON equality, a tool call the run must make,
//! a command that must exit 0 in the workspace. [`run_suite`] runs every case N times
//! against a [`Subject`] (an agent or a team, built afresh in each run's workspace), concurrently and
//! within a budget, and the [`SuiteReport`] gives each case's and the whole suite's pass
//! rate with a 95% confidence interval, cost, tokens and latency, as JSON or as an HTML page.
//! `troupe eval SUITE.toml` is the command.

// Library code answers with errors, never panics: `unwrap`/`expect` only in tests.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod grade;
mod report;
mod run;
mod suite;

pub use grade::{Attempt, Judge, Verdict, grade};
pub use report::{CaseReport, Comparison, Rate, RunRecord, SuiteReport};
pub use run::{CaseInput, Outcome, Subject, run_agent, run_suite};
pub use suite::{Case, DEFAULT_COMMAND_TIMEOUT, Grader, Suite, SuiteError};
