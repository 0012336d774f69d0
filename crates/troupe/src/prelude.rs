//! The names most programs need: `use troupe::prelude::*`.

pub use troupe_core::{
    AgentEvent, AgentEventKind, Budget, ContentBlock, FailureCode, Message, ModelRequest, Role, StopReason,
    StreamEvent, ToolChoice, ToolSpec, Usage,
};
pub use troupe_model::{LlmProvider, ModelResponse, StreamAccumulator};
pub use troupe_runtime::{
    Agent, AgentSpec, ApprovalPolicy, ContentFilter, Engine, Logging, Middleware, Plugin, RateLimit, RunOutcome,
    RunOutput, Signal,
};

/// Cancels a run or a model call; checked between stream chunks.
pub use tokio_util::sync::CancellationToken;
