//! Delegation: how a leader hands work to its team.
//!
//! Two ways, for two kinds of leader:
//!
//! - **A delegation plan** in the leader's answer, read by a [`DelegationParser`]: the
//!   orchestrated [`Strategy`](crate::group::Strategy) asks the leader for one, runs the
//!   workers in parallel and gives their results back to the leader to synthesise. The
//!   default [`JsonDelegationParser`] reads a JSON list of [`Delegation`]s out of prose.
//! - **Delegation as a tool** ([`DelegateTool`]): the leader is an ordinary agent with a
//!   `delegate(to, brief)` tool and decides itself when, and whether, to call a teammate.

mod parser;
mod tool;

pub use parser::JsonDelegationParser;
pub use tool::{DELEGATE_TOOL, DelegateArgs, DelegateTool, Delegations};

use serde::{Deserialize, Serialize};

/// One task the leader gives one worker.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delegation {
    /// The worker's index in the group's roster.
    pub worker: usize,
    /// What that worker must do, self-contained: the worker sees nothing else of the
    /// leader's conversation.
    pub task: String,
}

impl Delegation {
    /// `task` for the worker at index `worker`.
    pub fn new(worker: usize, task: impl Into<String>) -> Self {
        Delegation { worker, task: task.into() }
    }
}

/// Reads the delegations out of a leader's answer.
///
/// `workers` holds the workers' names in roster order (a delegation's `worker` is an
/// index into it). An error is shown to the leader, which is asked to correct its answer:
/// its message must say what was wrong and what a valid answer looks like.
pub trait DelegationParser: Send + Sync {
    /// The delegations in `text`, each with a worker index below `workers.len()`.
    fn parse(&self, text: &str, workers: &[&str]) -> Result<Vec<Delegation>, DelegationError>;
}

/// Why a leader's answer could not be used as a delegation; worded for the leader.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DelegationError {
    /// The answer holds nothing that reads as a delegation.
    #[error(
        "no delegation found ({detail}). Reply with a JSON array in a ```json block, one entry per task: \
         [{{\"worker\": <index>, \"task\": \"<self-contained task>\"}}]; valid workers are {valid}"
    )]
    NotFound {
        /// What was found instead.
        detail: String,
        /// The valid workers, as [`DelegationError`] messages name them.
        valid: String,
    },
    /// The delegation names no task at all.
    #[error("the delegation is empty: give at least one worker a task; valid workers are {valid}")]
    Empty {
        /// The valid workers.
        valid: String,
    },
    /// An entry does not have the shape of a delegation.
    #[error("delegation entry {entry}: {message}. Each entry is {{\"worker\": <index>, \"task\": \"...\"}}")]
    Malformed {
        /// The entry's position in the list, from 0.
        entry: usize,
        /// What is wrong with it.
        message: String,
    },
    /// An entry names a worker index the team does not have.
    #[error("delegation entry {entry}: worker {worker} is out of range; valid workers are {valid}")]
    OutOfRange {
        /// The entry's position in the list, from 0.
        entry: usize,
        /// The index as written.
        worker: String,
        /// The valid workers.
        valid: String,
    },
    /// An entry names a worker by a name nobody in the team has.
    #[error("delegation entry {entry}: no worker is named `{name}`; valid workers are {valid}")]
    UnknownWorker {
        /// The entry's position in the list, from 0.
        entry: usize,
        /// The name as written.
        name: String,
        /// The valid workers.
        valid: String,
    },
    /// An entry gives its worker an empty task.
    #[error("delegation entry {entry}: the task for worker {worker} is empty; give every worker a self-contained task")]
    EmptyTask {
        /// The entry's position in the list, from 0.
        entry: usize,
        /// The worker's index.
        worker: usize,
    },
}

/// The valid workers in words: `0..=2 (0 = researcher, 1 = writer, 2 = critic)`.
pub(crate) fn valid_workers(workers: &[&str]) -> String {
    match workers.len() {
        0 => "none (the team has no workers)".to_owned(),
        n => {
            let names: Vec<String> = workers.iter().enumerate().map(|(i, name)| format!("{i} = {name}")).collect();
            format!("0..={} ({})", n - 1, names.join(", "))
        }
    }
}
