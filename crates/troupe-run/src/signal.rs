//! Signals: what the outside world tells a run while it is going.
//!
//! Signals are taken at safe boundaries only (before a model call, between tool batches,
//! while waiting for approval), never in the middle of a model response or of a tool
//! turn, so a call is never separated from its result. Cancellation is the exception in
//! promptness, not in place: it also trips the run's cancellation token, which aborts the
//! open model stream and running tools, and the run then ends at the next boundary.

use crate::approval::ApprovalDecision;
use serde::{Deserialize, Serialize};
use std::fmt;
use troupe_core::ToolCallId;

/// A message to a running run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Signal {
    /// A new message from the user, answered after the current step.
    UserMessage {
        /// The message.
        text: String,
    },
    /// An instruction that steers the work in progress.
    Steering {
        /// The instruction.
        text: String,
    },
    /// A person's decision about a call waiting for approval.
    Approval {
        /// The call.
        call_id: ToolCallId,
        /// The decision.
        decision: ApprovalDecision,
    },
    /// The result of a call of a client tool, which the run's client ran itself (the call
    /// waits with [`CLIENT_TOOL_REASON`](crate::CLIENT_TOOL_REASON)): it becomes the
    /// call's result.
    ToolResult {
        /// The call.
        call_id: ToolCallId,
        /// What the tool returned, as the model will see it.
        content: String,
        /// Whether the tool failed.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
    /// Stop the run; it ends [`Cancelled`](crate::RunOutcome::Cancelled).
    Cancel {
        /// Why, recorded in the outcome.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// Continue a suspended run.
    Resume,
    /// Something happened outside the run that the agent should know about.
    ExternalEvent {
        /// The event's name.
        name: String,
        /// Its data.
        payload: serde_json::Value,
    },
    /// A scheduled wake-up came due.
    SchedulerWake,
}

/// The kinds of [`Signal`], for declaring which an agent accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SignalKind {
    /// [`Signal::UserMessage`].
    UserMessage,
    /// [`Signal::Steering`].
    Steering,
    /// [`Signal::Approval`].
    Approval,
    /// [`Signal::ToolResult`].
    ToolResult,
    /// [`Signal::Cancel`].
    Cancel,
    /// [`Signal::Resume`].
    Resume,
    /// [`Signal::ExternalEvent`].
    ExternalEvent,
    /// [`Signal::SchedulerWake`].
    SchedulerWake,
}

impl SignalKind {
    /// Every kind.
    pub const ALL: [SignalKind; 8] = [
        SignalKind::UserMessage,
        SignalKind::Steering,
        SignalKind::Approval,
        SignalKind::ToolResult,
        SignalKind::Cancel,
        SignalKind::Resume,
        SignalKind::ExternalEvent,
        SignalKind::SchedulerWake,
    ];

    /// The kind's snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            SignalKind::UserMessage => "user_message",
            SignalKind::Steering => "steering",
            SignalKind::Approval => "approval",
            SignalKind::ToolResult => "tool_result",
            SignalKind::Cancel => "cancel",
            SignalKind::Resume => "resume",
            SignalKind::ExternalEvent => "external_event",
            SignalKind::SchedulerWake => "scheduler_wake",
        }
    }
}

impl fmt::Display for SignalKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Signal {
    /// The signal's kind.
    pub fn kind(&self) -> SignalKind {
        match self {
            Signal::UserMessage { .. } => SignalKind::UserMessage,
            Signal::Steering { .. } => SignalKind::Steering,
            Signal::Approval { .. } => SignalKind::Approval,
            Signal::ToolResult { .. } => SignalKind::ToolResult,
            Signal::Cancel { .. } => SignalKind::Cancel,
            Signal::Resume => SignalKind::Resume,
            Signal::ExternalEvent { .. } => SignalKind::ExternalEvent,
            Signal::SchedulerWake => SignalKind::SchedulerWake,
        }
    }

    /// A user message.
    pub fn user_message(text: impl Into<String>) -> Self {
        Signal::UserMessage { text: text.into() }
    }

    /// A steering instruction.
    pub fn steering(text: impl Into<String>) -> Self {
        Signal::Steering { text: text.into() }
    }

    /// An approval decision for `call_id`.
    pub fn approval(call_id: impl Into<ToolCallId>, decision: ApprovalDecision) -> Self {
        Signal::Approval { call_id: call_id.into(), decision }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn signals_serialize_with_a_type_tag() {
        let signal = Signal::approval("c1", ApprovalDecision::Modify { arguments: json!({"path": "b"}) });
        let value = serde_json::to_value(&signal).expect("serializes");
        assert_eq!(value["type"], json!("approval"));
        assert_eq!(value["decision"]["type"], json!("modify"));
        let back: Signal = serde_json::from_value(value).expect("round-trips");
        assert_eq!(back, signal);
        let cancel: Signal = serde_json::from_value(json!({"type": "cancel"})).expect("parses");
        assert_eq!(cancel, Signal::Cancel { reason: None });
        assert_eq!(cancel.kind().to_string(), "cancel");
        let result: Signal =
            serde_json::from_value(json!({"type": "tool_result", "call_id": "c", "content": "ok"})).expect("parses");
        assert_eq!(result, Signal::ToolResult { call_id: "c".into(), content: "ok".into(), is_error: false });
    }

    #[test]
    fn every_kind_is_listed_once_and_named_as_serde_names_it() {
        for kind in SignalKind::ALL {
            assert_eq!(serde_json::to_value(kind).expect("serializes"), json!(kind.as_str()));
        }
        let unique: std::collections::BTreeSet<_> = SignalKind::ALL.into_iter().collect();
        assert_eq!(unique.len(), SignalKind::ALL.len());
    }
}
