//! What the server sends an AG-UI client: the protocol's events, with its field names
//! (camelCase, `type` in SCREAMING_SNAKE_CASE), unset optionals omitted.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The protocol version the events follow.
pub const PROTOCOL_VERSION: &str = "1.0";

/// One AG-UI event.
///
/// Events that can belong to a subagent (a team member's run) carry its
/// `subagentRunId`; those of the run itself carry none.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Event {
    /// The run began. Always the first event.
    #[serde(rename_all = "camelCase")]
    RunStarted {
        /// The thread.
        thread_id: String,
        /// The run.
        run_id: String,
        /// The run this one follows, as the client gave it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent_run_id: Option<String>,
        /// The protocol version of the events.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        protocol_version: Option<String>,
    },
    /// The run ended without failing: done, cancelled, or waiting for interrupts.
    #[serde(rename_all = "camelCase")]
    RunFinished {
        /// The thread.
        thread_id: String,
        /// The run.
        run_id: String,
        /// The final answer, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<Value>,
        /// How it ended; absent means success.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        outcome: Option<RunOutcome>,
        /// Tokens used within this run, per model.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        usage: Vec<TokenUsage>,
    },
    /// The run failed.
    #[serde(rename_all = "camelCase")]
    RunError {
        /// What went wrong.
        message: String,
        /// A machine-readable error kind.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<String>,
        /// Tokens used within this run, per model.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        usage: Vec<TokenUsage>,
    },
    /// A step began.
    #[serde(rename_all = "camelCase")]
    StepStarted {
        /// The step's name.
        step_name: String,
        /// The subagent it belongs to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
    },
    /// A step ended.
    #[serde(rename_all = "camelCase")]
    StepFinished {
        /// The step's name.
        step_name: String,
        /// The subagent it belongs to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
    },
    /// A text message began.
    #[serde(rename_all = "camelCase")]
    TextMessageStart {
        /// The message.
        message_id: String,
        /// Who writes it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        role: Option<TextRole>,
        /// The subagent it belongs to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
    },
    /// Text was added to a message.
    #[serde(rename_all = "camelCase")]
    TextMessageContent {
        /// The message.
        message_id: String,
        /// The new text (never empty).
        delta: String,
        /// The subagent it belongs to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
    },
    /// A text message is complete.
    #[serde(rename_all = "camelCase")]
    TextMessageEnd {
        /// The message.
        message_id: String,
        /// The subagent it belongs to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
    },
    /// The agent began a tool call.
    #[serde(rename_all = "camelCase")]
    ToolCallStart {
        /// The call.
        tool_call_id: String,
        /// The tool's name.
        tool_call_name: String,
        /// The assistant message the call belongs to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent_message_id: Option<String>,
        /// The subagent it belongs to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
    },
    /// A fragment of the call's JSON arguments.
    #[serde(rename_all = "camelCase")]
    ToolCallArgs {
        /// The call.
        tool_call_id: String,
        /// The next fragment.
        delta: String,
        /// The subagent it belongs to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
    },
    /// The call's arguments are complete.
    #[serde(rename_all = "camelCase")]
    ToolCallEnd {
        /// The call.
        tool_call_id: String,
        /// The subagent it belongs to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
    },
    /// The tool ran (or was refused); the model sees `content`.
    #[serde(rename_all = "camelCase")]
    ToolCallResult {
        /// The id of the tool message this result becomes.
        message_id: String,
        /// The call.
        tool_call_id: String,
        /// The result or error text.
        content: String,
        /// Always `tool`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        role: Option<ToolRole>,
        /// `{"isError": true}` when the call failed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        metadata: Option<Value>,
        /// The subagent it belongs to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
    },
    /// The agent's whole state.
    #[serde(rename_all = "camelCase")]
    StateSnapshot {
        /// The state.
        snapshot: Value,
        /// The subagent it belongs to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
    },
    /// A change to the agent's state, as a JSON Patch (RFC 6902).
    #[serde(rename_all = "camelCase")]
    StateDelta {
        /// The patch operations.
        delta: Value,
        /// The subagent it belongs to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
    },
    /// The whole conversation, in the protocol's message shapes: the client replaces its
    /// messages with these (keeping the reasoning it shows, which this leaves out).
    #[serde(rename_all = "camelCase")]
    MessagesSnapshot {
        /// The messages, oldest first.
        messages: Vec<super::input::Message>,
    },
    /// A span of reasoning began.
    #[serde(rename_all = "camelCase")]
    ReasoningStart {
        /// The span.
        message_id: String,
        /// The subagent it belongs to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
    },
    /// A reasoning message began.
    #[serde(rename_all = "camelCase")]
    ReasoningMessageStart {
        /// The reasoning message.
        message_id: String,
        /// Always `reasoning`.
        role: ReasoningRole,
        /// The subagent it belongs to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
    },
    /// Reasoning text was added.
    #[serde(rename_all = "camelCase")]
    ReasoningMessageContent {
        /// The reasoning message.
        message_id: String,
        /// The new text (never empty).
        delta: String,
        /// The subagent it belongs to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
    },
    /// A reasoning message is complete.
    #[serde(rename_all = "camelCase")]
    ReasoningMessageEnd {
        /// The reasoning message.
        message_id: String,
        /// The subagent it belongs to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
    },
    /// A span of reasoning ended.
    #[serde(rename_all = "camelCase")]
    ReasoningEnd {
        /// The span.
        message_id: String,
        /// The subagent it belongs to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
    },
    /// A subagent (a team member's run) began.
    #[serde(rename_all = "camelCase")]
    SubagentStarted {
        /// The member's run.
        subagent_run_id: String,
        /// The member agent's name.
        name: String,
        /// The subagent that started it, when that is not the run itself.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent_subagent_run_id: Option<String>,
    },
    /// A subagent's part of this run ended.
    #[serde(rename_all = "camelCase")]
    SubagentFinished {
        /// The member's run.
        subagent_run_id: String,
        /// Its final answer, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<Value>,
        /// How; absent means success.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        outcome: Option<SubagentOutcome>,
    },
    /// A subagent failed.
    #[serde(rename_all = "camelCase")]
    SubagentError {
        /// The member's run.
        subagent_run_id: String,
        /// What went wrong.
        message: String,
        /// A machine-readable error kind.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<String>,
    },
    /// An application event (troupe's usage, retries, fallbacks, artifacts, and the
    /// agent's own custom events).
    #[serde(rename_all = "camelCase")]
    Custom {
        /// The event's name.
        name: String,
        /// Its payload.
        value: Value,
        /// The subagent it belongs to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
    },
    /// A troupe event this adapter has no translation for, as troupe's JSON.
    #[serde(rename_all = "camelCase")]
    Raw {
        /// The event.
        event: Value,
        /// Always `troupe`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        source: Option<String>,
        /// The subagent it belongs to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
    },
}

impl Event {
    /// The event's `type` (`RUN_STARTED`, …).
    pub fn kind(&self) -> &'static str {
        match self {
            Event::RunStarted { .. } => "RUN_STARTED",
            Event::RunFinished { .. } => "RUN_FINISHED",
            Event::RunError { .. } => "RUN_ERROR",
            Event::StepStarted { .. } => "STEP_STARTED",
            Event::StepFinished { .. } => "STEP_FINISHED",
            Event::TextMessageStart { .. } => "TEXT_MESSAGE_START",
            Event::TextMessageContent { .. } => "TEXT_MESSAGE_CONTENT",
            Event::TextMessageEnd { .. } => "TEXT_MESSAGE_END",
            Event::ToolCallStart { .. } => "TOOL_CALL_START",
            Event::ToolCallArgs { .. } => "TOOL_CALL_ARGS",
            Event::ToolCallEnd { .. } => "TOOL_CALL_END",
            Event::ToolCallResult { .. } => "TOOL_CALL_RESULT",
            Event::StateSnapshot { .. } => "STATE_SNAPSHOT",
            Event::StateDelta { .. } => "STATE_DELTA",
            Event::MessagesSnapshot { .. } => "MESSAGES_SNAPSHOT",
            Event::ReasoningStart { .. } => "REASONING_START",
            Event::ReasoningMessageStart { .. } => "REASONING_MESSAGE_START",
            Event::ReasoningMessageContent { .. } => "REASONING_MESSAGE_CONTENT",
            Event::ReasoningMessageEnd { .. } => "REASONING_MESSAGE_END",
            Event::ReasoningEnd { .. } => "REASONING_END",
            Event::SubagentStarted { .. } => "SUBAGENT_STARTED",
            Event::SubagentFinished { .. } => "SUBAGENT_FINISHED",
            Event::SubagentError { .. } => "SUBAGENT_ERROR",
            Event::Custom { .. } => "CUSTOM",
            Event::Raw { .. } => "RAW",
        }
    }

    /// Whether the event ends the run's stream (`RUN_FINISHED` or `RUN_ERROR`).
    pub fn is_terminal(&self) -> bool {
        matches!(self, Event::RunFinished { .. } | Event::RunError { .. })
    }
}

/// Who writes a text message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TextRole {
    /// The agent.
    Assistant,
    /// The person.
    User,
}

/// The role of a tool result message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolRole {
    /// A tool.
    Tool,
}

/// The role of a reasoning message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReasoningRole {
    /// Reasoning.
    Reasoning,
}

/// How a run ended, in `RUN_FINISHED`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum RunOutcome {
    /// Done.
    Success,
    /// Waiting for the person: a new run whose input `resume`s these continues it.
    Interrupt {
        /// What it waits for.
        interrupts: Vec<Interrupt>,
    },
    /// Stopped before it completed, without failing.
    Cancelled,
}

/// Something the run needs from the person before it can go on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Interrupt {
    /// The interrupt's id: for an approval, the tool call's id.
    pub id: String,
    /// `approval`, `uncertain_action` or `input`.
    pub reason: String,
    /// What to tell the person.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The tool call waiting, for approvals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// The JSON Schema of the `payload` a resume may carry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_schema: Option<Value>,
    /// The tool's name and arguments, for approvals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
    /// The subagent waiting, when it is not the run itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
}

/// How a subagent's part of the run ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum SubagentOutcome {
    /// Done.
    Success,
    /// Waiting for outside input; a later run continues it.
    #[serde(rename_all = "camelCase")]
    Suspended {
        /// The interrupts it waits for.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        interrupt_ids: Vec<String>,
    },
}

/// Tokens of one model, in the protocol's accounting: `inputTokens` and `outputTokens`
/// are totals, the cached and reasoning counts parts of them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenUsage {
    /// The provider (`anthropic`), when the model id names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// The model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Every prompt token, cached or not.
    pub input_tokens: u64,
    /// Every generated token, reasoning included.
    pub output_tokens: u64,
    /// Input and output together.
    pub total_tokens: u64,
    /// Of the output, the reasoning tokens.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reasoning_tokens: u64,
    /// Of the input, the tokens read from the provider's cache.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_input_tokens: u64,
    /// Of the input, the tokens written to the provider's cache.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_input_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl TokenUsage {
    /// The usage of `model` (`provider/model`), from troupe's counts.
    pub fn of(model: &str, usage: &troupe_core::Usage) -> Self {
        let (provider, name) = match model.split_once('/') {
            Some((provider, name)) if !provider.is_empty() && !name.is_empty() => (Some(provider), name),
            _ => (None, model),
        };
        TokenUsage {
            provider: provider.map(str::to_owned),
            model: (!name.is_empty()).then(|| name.to_owned()),
            input_tokens: usage.total_input(),
            output_tokens: usage.output_tokens,
            total_tokens: usage.total(),
            reasoning_tokens: usage.reasoning_tokens,
            cached_input_tokens: usage.cache_read_tokens,
            cache_write_input_tokens: usage.cache_write_tokens,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_use_the_protocol_names_and_omit_unset_fields() {
        let start = Event::RunStarted {
            thread_id: "t".into(),
            run_id: "r".into(),
            parent_run_id: None,
            protocol_version: Some(PROTOCOL_VERSION.into()),
        };
        assert_eq!(
            serde_json::to_value(&start).expect("json"),
            json!({"type": "RUN_STARTED", "threadId": "t", "runId": "r", "protocolVersion": "1.0"})
        );
        let call = Event::ToolCallStart {
            tool_call_id: "c".into(),
            tool_call_name: "fs.write".into(),
            parent_message_id: Some("m".into()),
            subagent_run_id: None,
        };
        assert_eq!(
            serde_json::to_value(&call).expect("json"),
            json!({"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "fs.write", "parentMessageId": "m"})
        );
        let finished = Event::RunFinished {
            thread_id: "t".into(),
            run_id: "r".into(),
            result: None,
            outcome: Some(RunOutcome::Interrupt {
                interrupts: vec![Interrupt {
                    id: "c".into(),
                    reason: "approval".into(),
                    message: None,
                    tool_call_id: Some("c".into()),
                    response_schema: None,
                    metadata: None,
                    subagent_run_id: None,
                }],
            }),
            usage: Vec::new(),
        };
        let value = serde_json::to_value(&finished).expect("json");
        assert_eq!(
            value,
            json!({"type": "RUN_FINISHED", "threadId": "t", "runId": "r",
                   "outcome": {"type": "interrupt", "interrupts": [{"id": "c", "reason": "approval", "toolCallId": "c"}]}})
        );
        let back: Event = serde_json::from_value(value).expect("round-trips");
        assert_eq!(back, finished);
        assert_eq!(back.kind(), "RUN_FINISHED");
        assert!(back.is_terminal());
    }

    #[test]
    fn token_usage_counts_cached_input_as_part_of_the_input() {
        let usage = troupe_core::Usage {
            input_tokens: 10,
            output_tokens: 5,
            cache_read_tokens: 30,
            cache_write_tokens: 0,
            cache_write_long_tokens: 0,
            reasoning_tokens: 2,
        };
        let value = serde_json::to_value(TokenUsage::of("anthropic/claude-x", &usage)).expect("json");
        assert_eq!(
            value,
            json!({"provider": "anthropic", "model": "claude-x", "inputTokens": 40, "outputTokens": 5,
                   "totalTokens": 45, "reasoningTokens": 2, "cachedInputTokens": 30})
        );
        assert_eq!(TokenUsage::of("demo", &usage).provider, None);
    }
}
