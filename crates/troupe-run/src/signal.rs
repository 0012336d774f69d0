//! Signals: what the outside world tells a run while it is going.
//!
//! Signals are taken at safe boundaries only (before a model call, between tool batches,
//! while waiting for approval), never in the middle of a model response or of a tool
//! turn, so a call is never separated from its result. Cancellation is the exception in
//! promptness, not in place: it also trips the run's cancellation token, which aborts the
//! open model stream and running tools, and the run then ends at the next boundary.

use crate::approval::ApprovalDecision;
use crate::state::RunState;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use troupe_core::{Message, ToolCallId};

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
    pub const ALL: [SignalKind; 7] = [
        SignalKind::UserMessage,
        SignalKind::Steering,
        SignalKind::Approval,
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

/// Code an agent runs when a signal of some kind arrives, before the run applies it.
///
/// A hook sees the signal and the run's state and may return messages to add to the
/// conversation (they reach the model with the next call). Hooks run on the run's task,
/// between steps: keep them quick, and hand slow work to a task of your own.
pub trait SignalHook: Send + Sync {
    /// Called for each accepted signal of the kinds the hook is registered for; returns the
    /// messages to inject, if any.
    fn on_signal(&self, signal: &Signal, state: &RunState) -> Option<Vec<Message>>;
}

impl<F> SignalHook for F
where
    F: Fn(&Signal, &RunState) -> Option<Vec<Message>> + Send + Sync,
{
    fn on_signal(&self, signal: &Signal, state: &RunState) -> Option<Vec<Message>> {
        self(signal, state)
    }
}

/// An agent's signal hooks, by kind, in registration order.
#[derive(Clone, Default)]
pub struct SignalHooks {
    hooks: BTreeMap<SignalKind, Vec<Arc<dyn SignalHook>>>,
}

impl SignalHooks {
    /// No hooks.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `hook` for signals of `kind`.
    pub fn on(&mut self, kind: SignalKind, hook: Arc<dyn SignalHook>) {
        self.hooks.entry(kind).or_default().push(hook);
    }

    /// Whether no hook is registered.
    pub fn is_empty(&self) -> bool {
        self.hooks.is_empty()
    }

    /// Runs the hooks of `signal`'s kind and collects the messages they return.
    pub fn run(&self, signal: &Signal, state: &RunState) -> Vec<Message> {
        self.hooks
            .get(&signal.kind())
            .into_iter()
            .flatten()
            .filter_map(|hook| hook.on_signal(signal, state))
            .flatten()
            .collect()
    }
}

impl fmt::Debug for SignalHooks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.hooks.iter().map(|(kind, hooks)| (kind, hooks.len()))).finish()
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
