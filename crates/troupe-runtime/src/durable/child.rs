//! A delegated run's identity: the run that gives a task and the task's key name one run,
//! so a team resumed after a crash finds the runs its members already made instead of
//! starting them again.

use super::evidence::digest;
use super::input::state_from_value;
use crate::error::RuntimeError;
use crate::outcome::RunOutput;
use std::collections::BTreeMap;
use std::time::Duration;
use troupe_core::RunId;
use troupe_store::RunRecord;

/// The id of the run that `parent` starts for the task keyed `key` (a member's name and
/// its task's id, say): the same for the same pair, in every process, so the task is run
/// once and found again on resume.
pub fn child_run_id(parent: &RunId, key: &str) -> RunId {
    let hash = digest(&format!("{}\0{key}", parent.as_str()));
    RunId::new(format!("run_{}", &hash[..32]))
}

/// What a stored run that has finished came to, read back from its record: its outcome,
/// answer, conversation, usage and cost, with no events (the run emitted them when it
/// ran) and no duration. `None` while the run has not finished.
pub fn finished_output(record: RunRecord) -> Result<Option<RunOutput>, RuntimeError> {
    if !record.status.is_terminal() {
        return Ok(None);
    }
    let state = state_from_value(&record.id, record.state)?;
    let Some(outcome) = state.outcome().cloned() else {
        return Ok(None);
    };
    Ok(Some(RunOutput::ended(state, outcome, BTreeMap::new(), Duration::ZERO, Vec::new())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_parent_and_key_name_one_run() {
        let parent = RunId::new("run_a");
        let id = child_run_id(&parent, "coder\0lead/delegate/call_1");
        assert_eq!(id, child_run_id(&RunId::new("run_a"), "coder\0lead/delegate/call_1"));
        assert_ne!(id, child_run_id(&parent, "coder\0lead/delegate/call_2"));
        assert_ne!(id, child_run_id(&RunId::new("run_b"), "coder\0lead/delegate/call_1"));
        assert!(id.as_str().starts_with("run_") && id.as_str().len() == 36, "{id}");
    }
}
