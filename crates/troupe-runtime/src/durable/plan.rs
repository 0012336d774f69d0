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
use troupe_run::RunState;
pub use troupe_run::{CallPlan, CallResume, UNCERTAIN_REASON};
use troupe_store::{EvidenceEntry, EvidenceKind, StoredSignal};
use troupe_tools::Idempotency;

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
        state.apply_resume(&self.calls);
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
        .pending_calls()
        .iter()
        .filter(|call| call.result.is_none())
        .map(|call| {
            let about: Vec<&EvidenceEntry> =
                this_turn.iter().filter(|e| e.call_id.as_deref() == Some(call.call_id.as_str())).collect();
            let started = about.iter().rposition(|e| e.kind == EvidenceKind::ActionStarted);
            let completed = about.iter().rposition(|e| e.kind == EvidenceKind::ActionCompleted);
            let resume = match (started, completed) {
                (_, Some(done)) if started.is_none_or(|s| done > s) => replay(about[done]),
                (Some(s), _) => match ActionStarted::deserialize(about[s].payload.value()) {
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
        pending.iter().filter(|s| s.seq > state.signal_cursor() && s.consumed_at.is_none()).cloned().collect();
    signals.sort_by_key(|s| s.seq);
    signals.dedup_by_key(|s| s.seq);
    ResumePlan { calls, signals }
}

fn replay(entry: &EvidenceEntry) -> CallResume {
    match ActionCompleted::deserialize(entry.payload.value()) {
        Ok(done) => CallResume::Replay {
            content: done.replayed_content(),
            is_error: done.is_error,
            attachments: done.attachments,
        },
        // The completion is recorded but unreadable: the call must not run again.
        Err(_) => CallResume::Replay {
            content: "The call completed before an interruption; its result could not be read back.".to_owned(),
            is_error: false,
            attachments: Vec::new(),
        },
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
