//! What a run resumed after a crash does with each tool call the crash left unanswered, as
//! data ([`CallResume`], decided by the runtime's `plan_resume` from the run's evidence),
//! and how the state takes it ([`RunState::apply_resume`]).

use crate::approval::Verdict;
use crate::state::{CallResult, RunState};
use serde::{Deserialize, Serialize};
use troupe_core::ToolCallId;

/// Why an interrupted call is put to a person.
pub const UNCERTAIN_REASON: &str = "this call was interrupted and may or may not have happened: approve to retry it, reject to skip it, or cancel the run";

/// What resuming does with one unanswered call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum CallResume {
    /// It completed before the interruption: the recorded result is replayed.
    Replay {
        /// The result the model sees.
        content: String,
        /// Whether the call had failed.
        is_error: bool,
        /// The images and PDFs the result carried, as recorded.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        attachments: Vec<troupe_core::ContentBlock>,
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
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CallPlan {
    /// The call.
    pub call_id: ToolCallId,
    /// Its tool.
    pub tool: String,
    /// What resuming does with it.
    pub resume: CallResume,
}

impl RunState {
    /// Takes what resuming does with each unanswered call: a completed call's recorded
    /// result replaces running it, an interrupted one waits for a person; the others go
    /// on as they stood.
    pub fn apply_resume(&mut self, calls: &[CallPlan]) {
        for plan in calls {
            let Some(call) = self.pending_calls.iter_mut().find(|c| c.call_id == plan.call_id && c.result.is_none())
            else {
                continue;
            };
            match &plan.resume {
                CallResume::Replay { content, is_error, attachments } => {
                    call.result = Some(CallResult {
                        content: content.clone(),
                        is_error: *is_error,
                        attachments: attachments.clone(),
                    });
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
