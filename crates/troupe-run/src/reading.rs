//! What a run's state says, read from outside: the state's fields are its own, changed
//! only by its inputs, so the shell, the server and the team read them through these.

use crate::applied::AppliedSpec;
use crate::outcome::RunOutcome;
use crate::state::{LoopStatus, PendingCall, Phase, RunState};
use std::collections::BTreeSet;
use troupe_core::{ConversationId, Message, RunId, Usage};

impl RunState {
    /// The run.
    pub fn run_id(&self) -> &RunId {
        &self.run_id
    }

    /// The agent's name.
    pub fn agent(&self) -> &str {
        &self.agent
    }

    /// The model's id (`provider/model`).
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The model's name on the wire, sent in requests (empty until the model is resolved).
    pub fn model_name(&self) -> &str {
        &self.model_name
    }

    /// The conversation the run continues, if any.
    pub fn conversation_id(&self) -> Option<&ConversationId> {
        self.conversation_id.as_ref()
    }

    /// The run that delegated this one, if any.
    pub fn parent_run_id(&self) -> Option<&RunId> {
        self.parent_run_id.as_ref()
    }

    /// The conversation so far.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// The conversation, keeping nothing else of the run.
    pub fn into_messages(self) -> Vec<Message> {
        self.messages
    }

    /// Model calls made.
    pub fn iteration(&self) -> u32 {
        self.iteration
    }

    /// Tokens used by all model calls.
    pub fn usage(&self) -> Usage {
        self.usage
    }

    /// The usage of the last model call.
    pub fn last_usage(&self) -> Option<Usage> {
        self.last_usage
    }

    /// What the model calls cost, in USD.
    pub fn cost_usd(&self) -> f64 {
        self.cost_usd
    }

    /// Where the run stands.
    pub fn status(&self) -> LoopStatus {
        self.status
    }

    /// What the loop does next.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// Output-limit recoveries made in a row.
    pub fn recoveries(&self) -> u32 {
        self.recoveries
    }

    /// Tools a person chose to always allow in this run.
    pub fn always_allowed(&self) -> &BTreeSet<String> {
        &self.always_allowed
    }

    /// The tool calls of the last response, until their results are in the conversation.
    pub fn pending_calls(&self) -> &[PendingCall] {
        &self.pending_calls
    }

    /// The tools offered to the model that the run's client runs itself.
    pub fn client_tools(&self) -> &[troupe_core::ToolSpec] {
        &self.client_tools
    }

    /// The state shared with the run's client, as the agent last changed it; `None` when
    /// nothing is shared.
    pub fn shared_state(&self) -> Option<&serde_json::Value> {
        self.shared_state.as_ref()
    }

    /// Messages (user input, steering, hook output) waiting for the next model call.
    pub fn pending_input(&self) -> &[Message] {
        &self.pending_input
    }

    /// Text of responses cut at the output limit, to be continued.
    pub fn continuation(&self) -> &str {
        &self.continuation
    }

    /// The final answer, once the model gave it.
    pub fn answer(&self) -> &str {
        &self.answer
    }

    /// Why the run is being cancelled, once it is.
    pub fn cancel_reason(&self) -> Option<&str> {
        self.cancel_reason.as_deref()
    }

    /// Tool calls answered (refused ones included).
    pub fn tool_calls(&self) -> u32 {
        self.tool_calls
    }

    /// Of those, the ones answered with an error.
    pub fn tool_errors(&self) -> u32 {
        self.tool_errors
    }

    /// The sequence number of the run's next event: a resumed run numbers its events on
    /// from where it stopped.
    pub fn event_seq(&self) -> u64 {
        self.event_seq
    }

    /// How the run ended, once it has (a paused run has an outcome too).
    pub fn outcome(&self) -> Option<&RunOutcome> {
        self.outcome.as_ref()
    }

    /// With a store: every stored signal up to this sequence number has been applied.
    pub fn signal_cursor(&self) -> i64 {
        self.signal_cursor
    }

    /// The agent's configuration as changed while the run was going, once it was.
    pub fn applied_spec(&self) -> Option<&AppliedSpec> {
        self.applied_spec.as_ref()
    }
}
