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
//! with an optional `"provider"`, prefixed when the model names none. `tools` are
//! client tools and a non-null `state` the shared state (below). Not used: `parentRunId`
//! (only echoed), and activity and reasoning messages.
//!
//! **Out.** `RUN_STARTED` first; message deltas become `TEXT_MESSAGE_START/CONTENT/END`
//! (opened on the first text), reasoning deltas `REASONING_START`,
//! `REASONING_MESSAGE_START/CONTENT/END`, `REASONING_END` (text and reasoning never
//! overlap: each closes the other); tool calls `TOOL_CALL_START/ARGS/END` and
//! `TOOL_CALL_RESULT` (a failed call's result carries `metadata: {"isError": true}`);
//! steps `STEP_STARTED/STEP_FINISHED` named `step N`; state snapshots and deltas
//! `STATE_SNAPSHOT`/`STATE_DELTA`; a `MESSAGES_SNAPSHOT` before `RUN_FINISHED`. Usage, retries, fallbacks, artifacts and the run's own
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
//! the rest of the run as a new AG-UI run (with the new `runId`); its `messages` only
//! seed the messages snapshot. `status: "cancelled"` rejects the call; `resolved` approves it, unless the
//! payload says otherwise: `false` or `{"approved": false, "reason"?}` rejects,
//! `{"arguments": {…}}` runs the call with those arguments instead, `{"alwaysAllow":
//! true}` approves this and every later call of the tool in the run.
//!
//! **Client tools.** The request's `tools` are offered to the model beside the agent's
//! own (checked: a well-formed name given once that neither the agent's tools nor
//! `state.update` have, an object schema; a team takes none), for the troupe run (they
//! are part of its state, so a resumed run offers the same). A call of one cannot run
//! here: the troupe run waits as for an approval, and the AG-UI run ends after the
//! call's `TOOL_CALL_START/ARGS/END` with an interrupt `{id, reason: "client_tool",
//! message, toolCallId, metadata: {tool, arguments}}`. The client answers with a
//! `resume` entry, whose `payload` is the result (a string as it is, anything else as
//! JSON text; `status: "cancelled"` makes it an error the model sees), or, as CopilotKit
//! does, with a request whose `messages` end with the `tool` message for the call. Either
//! way the result is sent to the run as its signal ([`Signal::ToolResult`](troupe_runtime::Signal::ToolResult)),
//! the run goes on, and the rest streams as the new AG-UI run; a result the client sent
//! in its messages is not announced back to it.
//!
//! **Shared state.** A non-null `state` is the troupe run's shared state: the run's
//! first events include its `STATE_SNAPSHOT`, and the agent gets `state.update`, whose
//! RFC 6902 patch, when it applies, changes the state and is sent as `STATE_DELTA` (one
//! that does not is an error result). An AG-UI run resuming a troupe run starts with a
//! `STATE_SNAPSHOT` of the state as the run has it.
//!
//! **Messages snapshot.** `MESSAGES_SNAPSHOT` carries the client's messages with the
//! run's assistant messages (text, tool calls) and tool results added under the events'
//! ids, in the protocol's shapes; it comes before `RUN_FINISHED`, and also just after
//! `RUN_STARTED` in an AG-UI run that resumes a troupe run (with what the run said before
//! its pause), so a client that lost its list rebuilds it.
//!
//! **Errors.** A request refused before the stream starts gets the native API's JSON
//! error: bad JSON (400), bad ids (400), an unknown agent (404), an unknown interrupt or
//! an answer for a call nobody waits for (404), a body that cannot be a run, client tools
//! that cannot be offered (`invalid_client_tools`) or a tool message answering an
//! approval (`invalid_resume`) (422). The troupe run's id is in the
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
