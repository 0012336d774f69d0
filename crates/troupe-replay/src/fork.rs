//! Forks: a new run that starts from a recorded run's conversation as it stood at one of its
//! model steps, with a change, and goes on live. The recorded run is not touched: the fork
//! only reads it, and names it as its origin.
//!
//! The link goes both ways without writing to the origin: the fork's input names the origin
//! (`forked_from`), and the fork's id begins with the origin's ([`fork_run_id`]), so the
//! origin's forks are found by an id-prefix query of the store ([`forks_of`]).

use crate::error::ReplayError;
use crate::recording::Recording;
use troupe_core::{ContentBlock, Role, RunId};
use troupe_run::AgentSpec;
use troupe_runtime::durable::StoredInput;
use troupe_runtime::{ForkOrigin, RunInput};
use troupe_store::{RunFilter, Store, StoreError};

/// What a fork's id adds to its origin's: `run_…​.fork.2` is the second fork of `run_…`.
pub const FORK_ID_INFIX: &str = ".fork.";

/// The id of the `n`th fork (from 1) of run `origin`.
pub fn fork_run_id(origin: &str, n: u32) -> RunId {
    RunId::new(format!("{origin}{FORK_ID_INFIX}{n}"))
}

/// The id the next fork of run `origin` takes in `store`: one more than the forks it has.
pub async fn next_fork_run_id(store: &dyn Store, origin: &str) -> Result<RunId, StoreError> {
    let made = forks_of(store, origin).await?.len();
    Ok(fork_run_id(origin, u32::try_from(made + 1).unwrap_or(u32::MAX)))
}

/// The forks of run `origin` in `store` (each id and the step it forked at), oldest first:
/// the runs whose id begins with the origin's and [`FORK_ID_INFIX`] and whose input names
/// the origin (a fork of a fork is its own origin's, not this one's).
pub async fn forks_of(store: &dyn Store, origin: &str) -> Result<Vec<(String, u32)>, StoreError> {
    let prefix = format!("{origin}{FORK_ID_INFIX}");
    let filter = RunFilter { id_prefix: Some(prefix.clone()), ..RunFilter::default() };
    let mut forks = Vec::new();
    for summary in store.list_runs(&filter).await? {
        // `run_x.fork.1.fork.1` is a fork of `run_x.fork.1`.
        if summary.id.strip_prefix(&prefix).is_none_or(|rest| rest.contains(FORK_ID_INFIX)) {
            continue;
        }
        let Some(run) = store.load_run(&summary.id).await? else { continue };
        if let Ok(input) = StoredInput::from_value(run.input)
            && let Some(from) = input.forked_from
            && from.run_id == origin
        {
            forks.push((summary.id, from.step));
        }
    }
    forks.reverse();
    Ok(forks)
}

/// What a fork changes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ForkEdits {
    /// The user's message at that step, instead of the recorded one: at step 1 it replaces
    /// the task; later it is added to the tool results the model gets at that step.
    pub message: Option<String>,
    /// Another model.
    pub model: Option<String>,
    /// Other instructions (the system prompt).
    pub instructions: Option<String>,
}

/// The agent and the input of a fork of `recording` at `step`.
#[derive(Clone, Debug)]
pub struct Fork {
    /// The agent: the recorded one with the edits.
    pub spec: AgentSpec,
    /// The run's input: the conversation at the step, its origin named.
    pub input: RunInput,
}

/// The fork of `recording` at model step `step` (1 for the first model call) with `edits`.
///
/// Fails for a step the recorded run did not reach.
pub fn fork(recording: &Recording, step: u32, edits: ForkEdits) -> Result<Fork, ReplayError> {
    let steps = u32::try_from(recording.turns.len()).unwrap_or(u32::MAX);
    let turn = step
        .checked_sub(1)
        .and_then(|index| recording.turns.get(index as usize))
        .ok_or_else(|| ReplayError::NoSuchStep { run_id: recording.run_id.clone(), step, steps })?;
    // The last checkpoint's conversation holds what every step since the last compaction
    // was sent; what came before a compaction is gone from it.
    if let Some(compacted) = recording.compactions.iter().map(|c| c.step).max()
        && step < compacted
    {
        return Err(ReplayError::ForkBeforeCompaction { run_id: recording.run_id.clone(), step, compacted });
    }
    let count = turn.request.as_ref().map_or(0, |r| usize::try_from(r.message_count).unwrap_or(usize::MAX));
    let mut history = recording.messages[..count.min(recording.messages.len())].to_vec();
    if let Some(text) = edits.message {
        match history.last_mut() {
            Some(last) if last.role == Role::User && step == 1 => {
                last.content.retain(|block| !matches!(block, ContentBlock::Text { .. }));
                last.content.push(ContentBlock::text(text));
            }
            Some(last) if last.role == Role::User => last.content.push(ContentBlock::text(text)),
            _ => history.push(troupe_core::Message::user(text)),
        }
    }
    let mut spec = recording.input.spec.clone();
    if let Some(instructions) = edits.instructions {
        spec.instructions = instructions;
    }
    let mut input = RunInput::new("").history(history);
    input.model = edits.model.or_else(|| recording.input.model.clone());
    input.output = recording.input.output.clone();
    input.client_tools = recording.input.client_tools.clone();
    input.shared_state = recording.input.shared_state.clone();
    input.forked_from = Some(ForkOrigin { run_id: recording.run_id.clone(), step });
    Ok(Fork { spec, input })
}
