//! The neutral event taxonomy a run emits.
//!
//! Every adapter (terminal renderer, SSE, WebSocket, AG-UI, A2A, worker IPC) projects these
//! events; none reinterprets them. Each event carries its [`Attribution`]: which agent and
//! run it belongs to, and its place in the run's sequence.

use crate::ids::{AgentId, ConversationId, RunId, ToolCallId};
use crate::message::Role;
use crate::usage::Usage;
use serde::{Deserialize, Serialize};
use std::time::{SystemTime, UNIX_EPOCH};

/// Where an event comes from and where it stands in its run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attribution {
    /// The agent that emitted it.
    pub agent_id: AgentId,
    /// The run it belongs to.
    pub run_id: RunId,
    /// The conversation the run continues, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation_id: Option<ConversationId>,
    /// The run that delegated this one, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_run_id: Option<RunId>,
    /// Position in the run's event sequence, from 0, without gaps.
    pub seq: u64,
    /// When it was emitted, in milliseconds since the Unix epoch.
    pub timestamp_ms: u64,
}

/// How a run ended (or stopped for now).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunOutcomeKind {
    /// The agent finished its task.
    Completed,
    /// The run waits for a person (an approval, an answer).
    Paused,
    /// The run was cancelled.
    Cancelled,
    /// A token, cost or time budget ran out.
    BudgetExceeded,
    /// The iteration limit was reached.
    MaxIterations,
    /// The model kept hitting its output limit; the result is partial.
    Incomplete,
    /// The run failed.
    Failed,
}

/// Why a run paused.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum PauseReason {
    /// A tool call waits for a person's approval.
    Approval {
        /// The call.
        call_id: ToolCallId,
        /// The tool's catalog name.
        tool: String,
        /// The arguments the model gave.
        arguments: serde_json::Value,
        /// Why approval is needed (the effect, the rule that matched).
        reason: String,
    },
    /// The agent asks the person a question.
    Input {
        /// The question.
        prompt: String,
    },
    /// A side effect was interrupted and may or may not have happened: a resumed run
    /// found the call started and never finished. Approving retries it (which may repeat
    /// its effect), rejecting skips it; decided like an approval, by its call id.
    UncertainAction {
        /// The call.
        call_id: ToolCallId,
        /// The tool's catalog name.
        tool: String,
        /// The arguments of the interrupted call.
        arguments: serde_json::Value,
    },
}

/// What happened.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum AgentEventKind {
    /// The run began.
    RunStarted {
        /// The task given to the run.
        instruction: String,
        /// The model serving it (`provider/model`).
        model: String,
    },
    /// The run ended (or paused; see [`AgentEventKind::RunPaused`]).
    RunFinished {
        /// How it ended.
        outcome: RunOutcomeKind,
        /// The final answer, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output: Option<String>,
        /// Tokens used by the whole run.
        usage: Usage,
        /// What the run cost, by the registry's prices.
        cost_usd: f64,
    },
    /// The run stopped to wait for a person.
    RunPaused {
        /// What it waits for.
        reason: PauseReason,
    },
    /// The run failed.
    RunError {
        /// What went wrong.
        message: String,
        /// A machine-readable error kind.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<String>,
    },
    /// A step (one model call and the tool calls it requests) began.
    StepStarted {
        /// The step number, from 1.
        step: u32,
    },
    /// A step ended.
    StepFinished {
        /// The step number, from 1.
        step: u32,
    },
    /// A message began.
    MessageStart {
        /// The message's id within the run.
        message_id: String,
        /// Who writes it.
        role: Role,
    },
    /// Text was added to a message.
    MessageDelta {
        /// The message.
        message_id: String,
        /// The new text.
        delta: String,
    },
    /// A message is complete.
    MessageEnd {
        /// The message.
        message_id: String,
    },
    /// Reasoning text was added to a message.
    ReasoningDelta {
        /// The message.
        message_id: String,
        /// The new reasoning text.
        delta: String,
    },
    /// The model began a tool call.
    ToolCallStart {
        /// The call.
        call_id: ToolCallId,
        /// The tool's catalog name.
        tool: String,
        /// The assistant message the call belongs to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent_message_id: Option<String>,
    },
    /// A piece of the call's JSON arguments arrived.
    ToolCallArgs {
        /// The call.
        call_id: ToolCallId,
        /// The next fragment of JSON text.
        delta: String,
    },
    /// The call's arguments are complete.
    ToolCallEnd {
        /// The call.
        call_id: ToolCallId,
    },
    /// The tool ran (or was refused); this is what the model will see.
    ToolCallResult {
        /// The call.
        call_id: ToolCallId,
        /// The result or error text.
        content: String,
        /// Whether the call failed.
        is_error: bool,
    },
    /// The run's whole shared state.
    StateSnapshot {
        /// The state.
        state: serde_json::Value,
    },
    /// A change to the shared state, as a JSON Patch (RFC 6902) array.
    StateDelta {
        /// The patch operations.
        patch: serde_json::Value,
    },
    /// Tokens used by one model call.
    Usage {
        /// The model (`provider/model`).
        model: String,
        /// The tokens.
        usage: Usage,
        /// The call's price by the registry, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cost_usd: Option<f64>,
    },
    /// A model call is retried after a transient failure.
    Retrying {
        /// The retry about to be made.
        attempt: u32,
        /// The wait before it.
        delay_ms: u64,
        /// What failed.
        reason: String,
    },
    /// A model was overloaded and the next one of the fallback chain took over.
    ModelFallback {
        /// The model that failed.
        from: String,
        /// The model now serving.
        to: String,
        /// What failed.
        reason: String,
    },
    /// The run produced a named output (a file, a report).
    Artifact {
        /// The artifact's name.
        name: String,
        /// Its MIME type.
        mime_type: String,
        /// Its content, inline.
        content: String,
    },
    /// The agent's configuration changed while the run was going (its instructions, model,
    /// limits or rate limit were edited), and the run now works by it. Emitted at the safe
    /// boundary where the change took effect: before a model call, between tool batches or
    /// while waiting for approval, never inside a model response or between a tool call and
    /// its result.
    ConfigChanged {
        /// The configuration's revision now in force (1 for the first change of the agent).
        revision: u64,
        /// What changed, by name: `instructions`, `model`, `rate_limit`, or a limit such
        /// as `limits.max_usd`, `limits.max_total_tokens`, `limits.timeout`,
        /// `limits.max_iterations`.
        changed: Vec<String>,
    },
    /// An application-defined event.
    Custom {
        /// The event's name.
        name: String,
        /// Its payload.
        value: serde_json::Value,
    },
}

/// One event of a run: what happened, and where it belongs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentEvent {
    /// Where it comes from.
    #[serde(flatten)]
    pub attribution: Attribution,
    /// What happened.
    #[serde(flatten)]
    pub kind: AgentEventKind,
}

impl AgentEvent {
    /// An event stamped now.
    pub fn new(attribution: Attribution, kind: AgentEventKind) -> Self {
        AgentEvent { attribution, kind }
    }
}

impl Attribution {
    /// The attribution of event `seq` of `run_id` by `agent_id`, stamped now.
    pub fn now(agent_id: AgentId, run_id: RunId, seq: u64) -> Self {
        Attribution { agent_id, run_id, conversation_id: None, parent_run_id: None, seq, timestamp_ms: now_ms() }
    }
}

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_are_flat_json_with_a_type_tag_and_round_trip() {
        let event = AgentEvent::new(
            Attribution {
                agent_id: AgentId::new("coder"),
                run_id: RunId::new("run_1"),
                conversation_id: None,
                parent_run_id: Some(RunId::new("run_0")),
                seq: 7,
                timestamp_ms: 1_700_000_000_000,
            },
            AgentEventKind::ToolCallResult { call_id: ToolCallId::new("c1"), content: "ok".into(), is_error: false },
        );
        let value = serde_json::to_value(&event).expect("serializes");
        assert_eq!(value["type"], json!("tool_call_result"));
        assert_eq!(value["seq"], json!(7));
        assert_eq!(value["parent_run_id"], json!("run_0"));
        assert!(value.get("conversation_id").is_none());
        let back: AgentEvent = serde_json::from_value(value).expect("round-trips");
        assert_eq!(back, event);
    }

    #[test]
    fn config_changed_round_trips_with_what_changed() {
        let kind = AgentEventKind::ConfigChanged {
            revision: 3,
            changed: vec!["instructions".into(), "model".into(), "limits.max_usd".into()],
        };
        let value = serde_json::to_value(&kind).expect("serializes");
        assert_eq!(
            value,
            json!({"type": "config_changed", "revision": 3, "changed": ["instructions", "model", "limits.max_usd"]})
        );
        let back: AgentEventKind = serde_json::from_value(value).expect("round-trips");
        assert_eq!(back, kind);
    }

    #[test]
    fn paused_event_carries_the_call() {
        let kind = AgentEventKind::RunPaused {
            reason: PauseReason::Approval {
                call_id: ToolCallId::new("c"),
                tool: "shell".into(),
                arguments: json!({"command": "rm -rf build"}),
                reason: "destructive".into(),
            },
        };
        let value = serde_json::to_value(&kind).expect("serializes");
        assert_eq!(value["reason"]["type"], json!("approval"));
        assert_eq!(value["reason"]["arguments"]["command"], json!("rm -rf build"));
    }
}
