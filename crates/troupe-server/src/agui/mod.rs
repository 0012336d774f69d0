//! AG-UI: `POST /agui/{agent}` takes a `RunAgentInput` and answers with AG-UI events
//! (`text/event-stream`, each event one `data: <json>` frame), for chat frontends built
//! on the AG-UI protocol (1.0; `@ag-ui/client`'s `HttpAgent` talks to it as is).
//!
//! The adapter translates; the run is the same run the native API serves, held in the
//! same hub.
//!
//! **In.** The last message (it must be the person's) is the instruction; the messages
//! before it are the history (user text and images, assistant text and tool calls, tool
//! results). `context` entries, and system or developer messages, are appended to the
//! instruction under a `Context:` heading, one `## description` section each. The
//! `threadId` is the conversation id. `forwardedProps.modelSelection` picks the model:
//! a string (`"anthropic/claude-sonnet-4-5"`) or an object `{"model": …}` (or `"id"`)
//! with an optional `"provider"`, prefixed when the model names none. Not used: `state`,
//! `tools` (tools the client would run itself), `parentRunId` (only echoed), and
//! activity and reasoning messages.
//!
//! **Out.** `RUN_STARTED` first; message deltas become `TEXT_MESSAGE_START/CONTENT/END`
//! (opened on the first text), reasoning deltas `REASONING_START`,
//! `REASONING_MESSAGE_START/CONTENT/END`, `REASONING_END` (text and reasoning never
//! overlap: each closes the other); tool calls `TOOL_CALL_START/ARGS/END` and
//! `TOOL_CALL_RESULT` (a failed call's result carries `metadata: {"isError": true}`);
//! steps `STEP_STARTED/STEP_FINISHED` named `step N`; state snapshots and deltas
//! `STATE_SNAPSHOT`/`STATE_DELTA`. Usage, retries, fallbacks, artifacts and the run's own
//! start and end are `CUSTOM` events named `troupe.usage`, `troupe.retrying`,
//! `troupe.model_fallback`, `troupe.artifact`, `troupe.run_started`,
//! `troupe.run_finished`; an agent's custom events keep their names. A team member's run
//! is a subagent (`SUBAGENT_STARTED/FINISHED/ERROR`, its events carrying its
//! `subagentRunId`). The end is `RUN_FINISHED {result}` (the final answer; `outcome:
//! {type: "cancelled"}` for a cancelled run; per-model `usage`) or `RUN_ERROR {message,
//! code}`, after everything still open has been closed; nothing follows it.
//!
//! **Approvals.** When the run stops for a person's approval, the AG-UI run ends with
//! `RUN_FINISHED {outcome: {type: "interrupt", interrupts: [{id, reason: "approval",
//! message, toolCallId, responseSchema, metadata: {tool, arguments}}]}}`, and the troupe
//! run keeps waiting. The interrupt's id is the tool call's id. A new request on the
//! same thread with `resume: [{interruptId, status, payload?}]` decides it and streams
//! the rest of the run as a new AG-UI run (with the new `runId`); its `messages` are not
//! used. `status: "cancelled"` rejects the call; `resolved` approves it, unless the
//! payload says otherwise: `false` or `{"approved": false, "reason"?}` rejects,
//! `{"arguments": {…}}` runs the call with those arguments instead, `{"alwaysAllow":
//! true}` approves this and every later call of the tool in the run.
//!
//! **Errors.** A request refused before the stream starts gets the native API's JSON
//! error: bad JSON (400), bad ids (400), an unknown agent (404), an unknown interrupt
//! (404), a body that cannot be a run (422). The troupe run's id is in the
//! `x-troupe-run-id` response header.

mod conversation;
mod events;
mod input;
mod projection;
mod resume;
mod route;
mod run_input;

pub use events::{
    Event, Interrupt, PROTOCOL_VERSION, ReasoningRole, RunOutcome, SubagentOutcome, TextRole, TokenUsage, ToolRole,
};
pub use input::{
    AssistantMessage, Content, ContentPart, Context, FunctionCall, Message, PartSource, ResumeEntry, ResumeStatus,
    RunAgentInput, TextMessage, Tool, ToolCall, ToolCallKind, ToolMessage, UserMessage,
};
pub use projection::{
    ARTIFACT_EVENT, CLIENT_TOOL_INTERRUPT, FALLBACK_EVENT, Projection, RETRYING_EVENT, RUN_FINISHED_EVENT,
    RUN_STARTED_EVENT, USAGE_EVENT,
};
pub use resume::{approval_response_schema, client_tool_answer, decision};
pub use run_input::{client_tools, model_selection, run_input};

use crate::state::AppState;
use axum::Router;
use axum::routing::post;

/// The AG-UI routes.
pub fn routes() -> Router<AppState> {
    Router::new().route("/agui/{agent}", post(route::run))
}
