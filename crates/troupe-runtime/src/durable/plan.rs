//! [`plan_resume`]: what a run resumed after a crash does with each tool call the crash
//! left unanswered. Pure: state and evidence in, a plan out.
//!
//! The rules (design principle 2: a completed side effect is never executed twice):
//! - a call whose completion is in the evidence is **replayed**: its recorded result is
//!   given to the model and the tool does not run again;
//! - a call that started but did not complete is **retried** when its tool is idempotent
//!   (or conditionally so), and otherwise **put to a person**: it may or may not have
//!   happened, so they choose to retry it, skip it or cancel the run;
//! - a call that was waiting for approval **keeps waiting**;
//! - a call with no evidence at all had not started: it runs as planned;
//! - signals stored after the state's cursor are applied in append order, each once.

use super::evidence::{ActionCompleted, ActionStarted};
use serde::{Deserialize, Serialize};
use troupe_core::ToolCallId;
use troupe_run::Verdict;
use troupe_run::{CallResult, RunState};
use troupe_store::{EvidenceEntry, EvidenceKind, StoredSignal};
use troupe_tools::Idempotency;

/// Why an interrupted call is put to a person.
pub const UNCERTAIN_REASON: &str = "this call was interrupted and may or may not have happened: approve to retry it, reject to skip it, or cancel the run";

/// What resuming does with one unanswered call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum CallResume {
    /// It completed before the interruption: the recorded result is replayed.
    Replay {
        /// The result the model sees.
        content: String,
        /// Whether the call had failed.
        is_error: bool,
    },
    /// It started and is idempotent: it runs again.
    Retry,
    /// It started, and repeating it may repeat its effect: a person decides.
    AskPerson,
    /// It was waiting for approval: it keeps waiting.
    KeepWaiting,
    /// It had not started: it runs as planned.
    NotStarted,
}

/// The plan for one call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallPlan {
    /// The call.
    pub call_id: ToolCallId,
    /// Its tool.
    pub tool: String,
    /// What resuming does with it.
    pub resume: CallResume,
}

/// What a resumed run does first.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ResumePlan {
    /// The calls of the last response that have no result yet, in call order.
    pub calls: Vec<CallPlan>,
    /// The signals to apply, in append order.
    #[serde(skip)]
    pub signals: Vec<StoredSignal>,
}

impl ResumePlan {
    /// Whether a person is needed before the run can go on.
    pub fn needs_person(&self) -> bool {
        self.calls.iter().any(|c| matches!(c.resume, CallResume::AskPerson | CallResume::KeepWaiting))
    }

    /// Applies the plan's call decisions to `state` (signals are applied by the run).
    pub fn apply(&self, state: &mut RunState) {
        for plan in &self.calls {
            let Some(call) = state.pending_calls.iter_mut().find(|c| c.call_id == plan.call_id && c.result.is_none())
            else {
                continue;
            };
            match &plan.resume {
                CallResume::Replay { content, is_error } => {
                    call.result = Some(CallResult { content: content.clone(), is_error: *is_error });
                }
                CallResume::AskPerson => {
                    call.uncertain = true;
                    call.decision = None;
                    call.verdict = Some(Verdict::Ask { reason: UNCERTAIN_REASON.to_owned() });
                }
                CallResume::Retry | CallResume::KeepWaiting | CallResume::NotStarted => {}
            }
        }
    }
}

/// Decides how `state`, checkpointed before an interruption, goes on, from the run's
/// `evidence` (its whole log, in order) and its `pending` signals.
pub fn plan_resume(state: &RunState, evidence: &[EvidenceEntry], pending: &[StoredSignal]) -> ResumePlan {
    // The pending calls come from the last recorded model turn: only evidence after it is
    // about them (call ids may repeat across turns).
    let turn_start = evidence.iter().rposition(|e| e.kind == EvidenceKind::ModelTurn).map_or(0, |i| i + 1);
    let this_turn = &evidence[turn_start..];
    let calls = state
        .pending_calls
        .iter()
        .filter(|call| call.result.is_none())
        .map(|call| {
            let about: Vec<&EvidenceEntry> =
                this_turn.iter().filter(|e| e.call_id.as_deref() == Some(call.call_id.as_str())).collect();
            let started = about.iter().rposition(|e| e.kind == EvidenceKind::ActionStarted);
            let completed = about.iter().rposition(|e| e.kind == EvidenceKind::ActionCompleted);
            let resume = match (started, completed) {
                (_, Some(done)) if started.is_none_or(|s| done > s) => replay(about[done]),
                (Some(s), _) => match serde_json::from_value::<ActionStarted>(about[s].payload.clone()) {
                    Ok(started) if started.idempotency != Idempotency::NonIdempotent => CallResume::Retry,
                    // Not idempotent, or a record this build cannot read: only a person knows.
                    _ => CallResume::AskPerson,
                },
                (None, _) if call.uncertain => CallResume::AskPerson,
                (None, _) if call.is_awaiting() => CallResume::KeepWaiting,
                (None, _) => CallResume::NotStarted,
            };
            CallPlan { call_id: call.call_id.clone(), tool: call.tool.clone(), resume }
        })
        .collect();
    let mut signals: Vec<StoredSignal> =
        pending.iter().filter(|s| s.seq > state.signal_cursor && s.consumed_at.is_none()).cloned().collect();
    signals.sort_by_key(|s| s.seq);
    signals.dedup_by_key(|s| s.seq);
    ResumePlan { calls, signals }
}

fn replay(entry: &EvidenceEntry) -> CallResume {
    match serde_json::from_value::<ActionCompleted>(entry.payload.clone()) {
        Ok(done) => CallResume::Replay { content: done.replayed_content(), is_error: done.is_error },
        // The completion is recorded but unreadable: the call must not run again.
        Err(_) => CallResume::Replay {
            content: "The call completed before an interruption; its result could not be read back.".to_owned(),
            is_error: false,
        },
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
