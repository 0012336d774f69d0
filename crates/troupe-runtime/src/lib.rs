//! The runtime of troupe: agents as declarations, and the runner that owns their loop.
//!
//! An agent is an [`AgentSpec`]: a name, instructions, a model id, the tools it may call,
//! [`Limits`], an [`ApprovalPolicy`] and the [`Signal`]s it accepts. The [`Runner`] runs
//! every agent with the same loop:
//!
//! 1. at a safe boundary, take waiting signals (user messages, steering, approvals, cancel);
//! 2. call the [`Compactor`] hook, then stream the model, projecting its output live as
//!    [`AgentEvent`](troupe_core::AgentEvent)s;
//! 3. price the call ([`CostTracker`]); budgets and the iteration limit are checked before
//!    the next one;
//! 4. on a tool turn, decide each call by the approval policy (pausing for a person where
//!    needed), run the cleared calls through the [`ToolCatalog`](troupe_tools::ToolCatalog)
//!    and send all results back together;
//! 5. on an output-limit stop, ask the model to resume (at most
//!    [`Limits::max_tokens_recoveries`] times in a row); on an answer, finish.
//!
//! The step logic is [`RunState`], a sans-IO state machine that serializes between any two
//! steps; the runner only performs its [`Action`]s. Events are the single record of what
//! happened: every adapter (terminal, SSE, AG-UI, A2A) projects the same stream.
//!
//! Around every model call and tool call the runner runs its [`MiddlewareStack`]:
//! [`Middleware`]s that may change or refuse a request, a response, a tool's arguments or
//! its result ([`RateLimit`], [`Logging`] and [`ContentFilter`] ship with the crate). A
//! [`Plugin`] brings tools and middlewares together, with a setup run once before the
//! first run and a teardown at [`Engine::shutdown`]. Every run is traced as `tracing`
//! spans on the OpenTelemetry GenAI conventions (`invoke_agent`, `chat`, `execute_tool`);
//! prompts and results are recorded in them only with [`Runner::with_content_capture`].
//!
//! An [`Agent`] can be reconfigured while its runs go ([`Agent::reconfigure`] with a
//! [`SpecUpdate`]): new runs start with the new instructions, model, [`Limits`] or rate
//! quotas, and every run in flight takes them at its next safe boundary, where signals
//! are taken too, announcing them with
//! [`ConfigChanged`](troupe_core::AgentEventKind::ConfigChanged). The run carries what it
//! applied in its state ([`RunState::applied_spec`]), so a resumed run keeps it.
//!
//! The shortest agent runs on the offline `demo` model:
//!
//! ```
//! use troupe_runtime::Engine;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), troupe_runtime::RuntimeError> {
//! let engine = Engine::builder().build();
//! let agent = engine.agent("greeter").model("demo").build()?;
//! let output = agent.run("hello").await?;
//! assert!(output.is_completed());
//! assert!(output.text.contains("hello"));
//! # Ok(())
//! # }
//! ```
//!
//! A tool-using agent takes a dozen lines; here its model is a tiny provider that reads a
//! file, then answers with what it read:
//!
//! ```
//! use futures::{FutureExt, StreamExt, future::BoxFuture};
//! use std::sync::Arc;
//! use tokio_util::sync::CancellationToken;
//! use troupe_core::{ContentBlock, ModelRequest, StopReason, StreamEvent};
//! use troupe_model::{EventStream, LlmProvider};
//! use troupe_runtime::{Engine, FixedModel};
//!
//! /// Calls `fs.read` on `notes.txt`, then answers with the result.
//! struct Reader;
//!
//! impl LlmProvider for Reader {
//!     fn name(&self) -> &str {
//!         "reader"
//!     }
//!
//!     fn stream<'a>(
//!         &'a self,
//!         request: &'a ModelRequest,
//!         _cancel: CancellationToken,
//!     ) -> BoxFuture<'a, troupe_model::Result<EventStream>> {
//!         let result = request.messages.last().and_then(|m| {
//!             m.content.iter().find_map(|b| match b {
//!                 ContentBlock::ToolResult { content, .. } => Some(content.clone()),
//!                 _ => None,
//!             })
//!         });
//!         let events = match result {
//!             None => vec![
//!                 StreamEvent::ToolUseStart { index: 0, id: "call_1".into(), name: "fs.read".into() },
//!                 StreamEvent::ToolUseInputDelta { index: 0, partial_json: r#"{"path": "notes.txt"}"#.into() },
//!                 StreamEvent::MessageStop { stop_reason: StopReason::ToolUse },
//!             ],
//!             Some(content) => vec![
//!                 StreamEvent::TextDelta { index: 0, text: format!("The notes say: {content}") },
//!                 StreamEvent::MessageStop { stop_reason: StopReason::EndTurn },
//!             ],
//!         };
//!         async move { Ok(futures::stream::iter(events.into_iter().map(Ok)).boxed()) }.boxed()
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! std::fs::write(dir.path().join("notes.txt"), "remember the milk\n")?;
//!
//! let engine = Engine::builder().resolver(Arc::new(FixedModel::new(Arc::new(Reader), "reader-1"))).build();
//! let agent = engine
//!     .agent("reader")
//!     .workspace(dir.path())
//!     .readonly_tools()
//!     .instructions("Answer from the files.")
//!     .max_iterations(5)
//!     .build()?;
//! let output = agent.run("What do the notes say?").await?;
//! assert!(output.is_completed());
//! assert!(output.text.contains("remember the milk"), "{}", output.text);
//! assert_eq!(output.tool_calls, 1);
//! # Ok(())
//! # }
//! ```

// Library code answers with errors, never panics: `unwrap`/`expect` only in tests.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod agent;
mod builder;
mod compaction;
mod cost;
pub mod durable;
mod error;
mod genai;
mod handle;
mod live;
mod live_spec;
mod metrics;
pub mod middleware;
mod outcome;
mod plugin;
mod plugins;
mod resolver;
mod runner;
mod task;
pub use task::model_call::STREAM_RESTARTS;
mod tool_pipeline;
mod typed;

pub use agent::Agent;
pub use builder::{AgentBuilder, Engine, EngineBuilder};
pub use compaction::{
    AuxiliaryUsage, CompactionContext, CompactionReport, Compactor, NoCompaction, PolicyCompactor, REMOVED_NOTE_SUFFIX,
    SUMMARY_INSTRUCTION, SUMMARY_PREFIX, TRIMMED_NOTE_PREFIX, TokenEstimator,
};
pub use cost::{CostTracker, ModelCost};
pub use durable::{Durability, ResumePlan, StoredInput, plan_resume};
pub use error::{RunNotCompleted, RuntimeError};
pub use handle::{
    EVENT_BUFFER, ForkOrigin, RunEvents, RunHalt, RunHandle, RunInput, RunResult, SIGNAL_BUFFER, SignalSender,
};
pub use live_spec::{LiveSpec, SpecRevision, SpecUpdate, changed_fields, validate_limits};
pub use metrics::{AgentMetrics, Metrics, MetricsSnapshot};
pub use middleware::{
    ContentFilter, FilterMode, Logging, Middleware, MiddlewareError, MiddlewareStack, ModelCallContext, PatternError,
    RateLimit, RateQuota, RateQuotas, RateScope, SensitiveData, ToolCallContext,
};
pub use outcome::RunOutput;
pub use plugin::{Plugin, PluginContext, PluginError};
pub use resolver::{FixedModel, ModelResolver};
pub use runner::{DEFAULT_TOOL_CONCURRENCY, Runner, SpecSource};
pub use troupe_run::machine;
pub use troupe_run::{
    Action, AgentSpec, AppliedSpec, ApprovalDecision, ApprovalMode, ApprovalPolicy, ApprovalRequest, ApprovalRule,
    CLIENT_TOOL_REASON, CallResult, CompactionPolicy, DEFAULT_CONTEXT_WINDOW, DEFAULT_MAX_CORRECTIONS, Limits,
    LoopStatus, OutputSchemaError, OutputSpec, PendingCall, Phase, RESUME_INSTRUCTION, RuleAction, RunOutcome,
    RunState, STATE_UPDATE_TOOL, Signal, SignalError, SignalHook, SignalHooks, SignalKind, Strategy, Verdict,
    apply_patch, is_client_tool_wait, validate_client_tools,
};
pub use typed::{TypedOutput, output_spec_for};
