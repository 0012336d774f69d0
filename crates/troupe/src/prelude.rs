//! The names most programs need: `use troupe::prelude::*`.

pub use troupe_core::{
    AgentEvent, AgentEventKind, Budget, ContentBlock, FailureCode, Message, ModelRequest, Role, StopReason,
    StreamEvent, ToolChoice, ToolSpec, Usage,
};
pub use troupe_durable::ResumeRun;
pub use troupe_model::{LlmProvider, ModelResponse, StreamAccumulator};
pub use troupe_runtime::{
    Agent, AgentSpec, ApprovalPolicy, ContentFilter, Engine, Logging, Middleware, OutputSpec, Plugin, RateLimit,
    RunInput, RunOutcome, RunOutput, RuntimeError, Signal, TypedOutput,
};
pub use troupe_tools::{Effect, Tool, ToolContext, ToolError, ToolOutput, TypedTool, typed_tool};

/// `#[tool]`: an async function with doc comments as a typed tool.
pub use troupe_macros::tool;

/// Cancels a run or a model call; checked between stream chunks.
pub use tokio_util::sync::CancellationToken;
