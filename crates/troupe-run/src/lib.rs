//! The protocol of a troupe run, without I/O.
//!
//! What an agent is ([`AgentSpec`]: instructions, model, tools, [`Limits`], an
//! [`ApprovalPolicy`], a [`CompactionPolicy`], the signals it accepts), what a run knows
//! between two steps ([`RunState`]: plain data that serializes at any boundary), what can
//! be said to it ([`Signal`]), what a person decides ([`ApprovalDecision`]) and how it ends
//! ([`RunOutcome`]).
//!
//! A run is an effect machine ([`machine`]): [`RunState::handle`] takes what its shell
//! learned (an [`Input`](machine::Input): a model response, tool results, a signal, the
//! deadline, a store failure, …) and returns what the shell is to do (a list of
//! [`Effect`](machine::Effect)s: call the model, run a batch of tools, ask a person, save,
//! finish). Budgets, deadlines, failure codes, approval and the recording protocol are
//! decided here; `troupe-runtime`'s runner performs the effects.

// Library code answers with errors, never panics: `unwrap`/`expect` only in tests.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod applied;
mod approval;
mod client_tools;
mod compaction;
mod error;
mod hooks;
mod limits;
pub mod machine;
mod outcome;
mod output;
mod reading;
mod resume;
mod shared_state;
mod signal;
mod spec;
mod state;
mod step;

pub use applied::AppliedSpec;
pub use approval::{
    ApprovalDecision, ApprovalMode, ApprovalPolicy, ApprovalRequest, ApprovalRule, RuleAction, Verdict,
};
pub use client_tools::{CLIENT_TOOL_REASON, is_client_tool_wait, validate_client_tools};
pub use compaction::{CompactionPolicy, DEFAULT_CONTEXT_WINDOW, Strategy};
pub use error::SignalError;
pub use hooks::{SignalHook, SignalHooks};
pub use limits::Limits;
pub use outcome::RunOutcome;
pub use output::{DEFAULT_MAX_CORRECTIONS, OutputSchemaError, OutputSpec};
pub use resume::{CallPlan, CallResume, UNCERTAIN_REASON};
pub use shared_state::{STATE_UPDATE_TOOL, apply_patch, apply_update, state_update_spec};
pub use signal::{Signal, SignalKind};
pub use spec::AgentSpec;
pub use state::{
    Action, CallResult, LoopStatus, PendingCall, Phase, RESUME_INSTRUCTION, RecordedToolResult, RunState, ToolBatch,
    tool_result_attachments, tool_results,
};
