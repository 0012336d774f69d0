//! [`DelegationChain`]: who handed which task to whom, and the loops to stop.

use crate::bus::lock;
use crate::{MemberResult, TeamError};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// How many times a task may bounce between the same two agents by default.
pub const DEFAULT_MAX_BOUNCES: u32 = 3;

/// Where a delegated task stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DelegationStatus {
    /// Handed out, not reported yet.
    Open,
    /// Reported with a successful result.
    Done,
    /// Reported with a failed result.
    Failed,
}

/// One delegation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DelegationRecord {
    /// The task's id (`task-<n>`).
    pub task_id: String,
    /// The task it was delegated from, if it was.
    pub parent: Option<String>,
    /// Who delegated.
    pub from: String,
    /// Who got it.
    pub to: String,
    /// What to do.
    pub prompt: String,
    /// Where it stands.
    pub status: DelegationStatus,
    /// The reported result.
    pub result: Option<MemberResult>,
}

#[derive(Debug, Default)]
struct State {
    next: u64,
    records: HashMap<String, DelegationRecord>,
}

/// The tree of delegations of a team: each task has an id, a delegator, an assignee and
/// possibly a parent task; a task delegated on and on forms a chain.
///
/// A task that goes back and forth between the same two agents (`A -> B -> A -> B ...`)
/// more than `max_bounces` times is refused with [`TeamError::DelegationLoop`]: a bounce
/// is each hop back to the agent of the hop before.
///
/// ```
/// use troupe_team::TeamError;
/// use troupe_team::coordination::DelegationChain;
///
/// let chain = DelegationChain::new(1);
/// let first = chain.delegate("lead", "coder", "Write the parser.")?;
/// let back = chain.delegate_within(&first, "lead", "Which grammar?")?; // 1 bounce
/// assert_eq!(chain.chain(&back), ["lead", "coder", "lead"]);
/// let again = chain.delegate_within(&back, "coder", "The JSON one.");
/// assert!(matches!(again, Err(TeamError::DelegationLoop { bounces: 2, .. })));
/// # Ok::<(), TeamError>(())
/// ```
#[derive(Clone, Debug)]
pub struct DelegationChain {
    state: Arc<Mutex<State>>,
    max_bounces: u32,
}

impl Default for DelegationChain {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_BOUNCES)
    }
}

impl DelegationChain {
    /// A chain that stops tasks bouncing more than `max_bounces` times.
    pub fn new(max_bounces: u32) -> Self {
        DelegationChain { state: Arc::default(), max_bounces }
    }

    /// The most bounces allowed.
    pub fn max_bounces(&self) -> u32 {
        self.max_bounces
    }

    /// `from` hands `to` a new task; returns its id.
    pub fn delegate(
        &self,
        from: impl Into<String>,
        to: impl Into<String>,
        prompt: impl Into<String>,
    ) -> Result<String, TeamError> {
        let mut state = lock(&self.state);
        Ok(Self::record(&mut state, None, from.into(), to.into(), prompt.into()))
    }

    /// The assignee of `parent` hands part of it (or it back) to `to`; returns the new
    /// task's id. Refused when the chain would bounce too often between two agents.
    pub fn delegate_within(
        &self,
        parent: &str,
        to: impl Into<String>,
        prompt: impl Into<String>,
    ) -> Result<String, TeamError> {
        let to = to.into();
        let mut state = lock(&self.state);
        let from = state
            .records
            .get(parent)
            .map(|r| r.to.clone())
            .ok_or_else(|| TeamError::Invalid(format!("no delegated task `{parent}`")))?;
        let mut path = Self::path(&state, parent);
        path.push(to.clone());
        let bounces = trailing_bounces(&path);
        if bounces > self.max_bounces {
            tracing::warn!(a = %from, b = %to, bounces, "delegation loop stopped");
            return Err(TeamError::DelegationLoop { a: from, b: to, bounces });
        }
        Ok(Self::record(&mut state, Some(parent.to_owned()), from, to, prompt.into()))
    }

    fn record(state: &mut State, parent: Option<String>, from: String, to: String, prompt: String) -> String {
        state.next += 1;
        let task_id = format!("task-{}", state.next);
        let record = DelegationRecord {
            task_id: task_id.clone(),
            parent,
            from,
            to,
            prompt,
            status: DelegationStatus::Open,
            result: None,
        };
        state.records.insert(task_id.clone(), record);
        task_id
    }

    /// Reports the result of `task_id` (the last report wins).
    pub fn report(&self, task_id: &str, result: MemberResult) -> Result<(), TeamError> {
        let mut state = lock(&self.state);
        let record = state
            .records
            .get_mut(task_id)
            .ok_or_else(|| TeamError::Invalid(format!("no delegated task `{task_id}`")))?;
        record.status = if result.success { DelegationStatus::Done } else { DelegationStatus::Failed };
        record.result = Some(result);
        Ok(())
    }

    /// The agents along the chain of `task_id`: the first delegator, then each assignee,
    /// ending with this task's. Empty for an unknown task.
    pub fn chain(&self, task_id: &str) -> Vec<String> {
        Self::path(&lock(&self.state), task_id)
    }

    fn path(state: &State, task_id: &str) -> Vec<String> {
        let mut reversed = Vec::new();
        let mut current = state.records.get(task_id);
        let mut first = None;
        while let Some(record) = current {
            reversed.push(record.to.clone());
            first = Some(record.from.clone());
            // Ids are never reused and parents come first, so this ends.
            current = record.parent.as_deref().and_then(|p| state.records.get(p));
        }
        reversed.extend(first);
        reversed.reverse();
        reversed
    }

    /// The task `task_id`.
    pub fn get(&self, task_id: &str) -> Option<DelegationRecord> {
        lock(&self.state).records.get(task_id).cloned()
    }

    /// The tasks not reported yet, oldest first.
    pub fn open(&self) -> Vec<DelegationRecord> {
        let state = lock(&self.state);
        let mut open: Vec<DelegationRecord> =
            state.records.values().filter(|r| r.status == DelegationStatus::Open).cloned().collect();
        open.sort_by_key(|r| r.task_id.trim_start_matches("task-").parse::<u64>().unwrap_or(u64::MAX));
        open
    }
}

/// How many hops at the end of `path` went back to the agent of the hop before.
fn trailing_bounces(path: &[String]) -> u32 {
    let mut bounces = 0;
    let mut k = path.len();
    while k >= 3 && path[k - 1] == path[k - 3] && path[k - 1] != path[k - 2] {
        bounces += 1;
        k -= 1;
    }
    bounces
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn bounces_count_only_the_trailing_alternation() {
        assert_eq!(trailing_bounces(&path(&["a", "b"])), 0);
        assert_eq!(trailing_bounces(&path(&["a", "b", "a"])), 1);
        assert_eq!(trailing_bounces(&path(&["a", "b", "a", "b"])), 2);
        assert_eq!(trailing_bounces(&path(&["a", "b", "c", "b"])), 1);
        assert_eq!(trailing_bounces(&path(&["a", "b", "a", "c"])), 0);
        assert_eq!(trailing_bounces(&path(&["a", "a", "a"])), 0);
    }
}
