//! What a provider streams back: [`StreamEvent`]s ending in a [`StopReason`].

use crate::usage::Usage;
use serde::{Deserialize, Serialize};

/// Why the model stopped generating.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model finished its turn.
    EndTurn,
    /// The model wants tool results before it goes on.
    ToolUse,
    /// The output token limit was hit; the message is partial.
    MaxTokens,
    /// A stop sequence was generated.
    StopSequence,
    /// The model (or a safety filter) declined to answer.
    Refusal,
    /// The conversation no longer fits the model's context window.
    ContextWindowExceeded,
    /// The provider paused a long turn; send the message back to continue it.
    PauseTurn,
    /// A reason troupe has no name for, kept verbatim.
    Other(String),
}

impl StopReason {
    /// Whether the turn ended with the model waiting for tool results.
    pub fn is_tool_use(&self) -> bool {
        matches!(self, StopReason::ToolUse)
    }
}

/// One incremental event of a streamed model response, in troupe's terms.
///
/// Blocks are addressed by `index`: a number the provider's parser assigns to each content
/// block of the message, unique within the message. Blocks appear in the final message in
/// the order their first event arrived, so events of different blocks may interleave (as
/// parallel tool calls do on OpenAI's wire).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StreamEvent {
    /// The response began.
    MessageStart {
        /// The provider's message id, where it gives one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// The model that actually serves the request, where the provider says.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
    },
    /// A piece of text of block `index`.
    TextDelta {
        /// The block.
        index: u32,
        /// The new text.
        text: String,
    },
    /// A piece of reasoning of block `index`.
    ReasoningDelta {
        /// The block.
        index: u32,
        /// The new reasoning text.
        text: String,
    },
    /// The signature of reasoning block `index` (or of tool call `index`, for providers
    /// that sign calls), to be echoed back verbatim.
    Signature {
        /// The block.
        index: u32,
        /// The opaque signature.
        signature: String,
    },
    /// Encrypted reasoning, to be echoed back verbatim.
    RedactedReasoning {
        /// The block.
        index: u32,
        /// The opaque payload.
        data: String,
    },
    /// A tool call began.
    ToolUseStart {
        /// The block.
        index: u32,
        /// The call id.
        id: String,
        /// The tool's catalog name (already decoded from its wire name).
        name: String,
    },
    /// A piece of the call's JSON arguments; concatenated they form the arguments object.
    ToolUseInputDelta {
        /// The block.
        index: u32,
        /// The next fragment of JSON text.
        partial_json: String,
    },
    /// The tool call's arguments are complete.
    ToolUseEnd {
        /// The block.
        index: u32,
    },
    /// Running token totals for this response; each supersedes the previous one.
    Usage {
        /// The totals so far.
        usage: Usage,
    },
    /// The request is being retried after a retryable failure before any output.
    Retrying {
        /// The retry about to be made (1 for the first retry).
        attempt: u32,
        /// How long the client waits before it.
        delay_ms: u64,
        /// What failed.
        reason: String,
    },
    /// The model was overloaded and the request moved to the next model of the
    /// fallback chain.
    ModelFallback {
        /// The model that failed (`provider/model`).
        from: String,
        /// The model now serving the request.
        to: String,
        /// What failed.
        reason: String,
    },
    /// The response is complete.
    MessageStop {
        /// Why the model stopped.
        stop_reason: StopReason,
    },
}
