//! [`RunState`]: the run's step logic, without any I/O.
//!
//! The shell drives it through [`handle`](RunState::handle) (the effect machine, in
//! [`machine`](crate::machine)): what it learned goes in as an input, what it is to do
//! comes out as effects. Underneath, the state answers one question,
//! [`next_action`](RunState::next_action): call the model with this request, run these
//! tool calls, wait for these approvals, or finish; and takes what happened
//! ([`apply_model_response`](RunState::apply_model_response),
//! [`apply_tool_results`](RunState::apply_tool_results),
//! [`apply_signal`](RunState::apply_signal)). Because the state is plain data (it
//! serializes and clones), a run can be stored between any two steps and resumed.
//!
//! Invariants the state keeps:
//! - every tool call of an assistant message is answered by exactly one result, and all
//!   results of one message go back together, in call order, in the next user message;
//! - messages arriving while tools are pending are added after those results, never
//!   between a call and its result;
//! - budgets and the iteration limit are checked before each model call, so a run that
//!   has spent its budget makes no further call.

use crate::applied::AppliedSpec;
use crate::approval::{ApprovalDecision, ApprovalRequest, Verdict};
use crate::error::SignalError;
use crate::outcome::RunOutcome;
use crate::output::OutputSpec;
use crate::signal::Signal;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeSet;
use troupe_core::FailureCode;
use troupe_core::{
    ContentBlock, ConversationId, Message, ModelRequest, Role, RunId, RunOutcomeKind, StopReason, ToolCallId, ToolSpec,
    Usage,
};
use troupe_model::ModelResponse;
use troupe_tools::{ToolCall, ToolResultOutcome};

/// The user message appended when a response stops at the output token limit.
pub const RESUME_INSTRUCTION: &str = "Output token limit hit. Resume directly from where you stopped.";

/// Where a run stands in its loop: working, waiting for a person, stopping, or ended.
/// The status a run is stored and listed under is [`troupe_store::RunStatus`], derived
/// from this and the outcome (`troupe_runtime::durable::stored_status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", content = "outcome", rename_all = "snake_case")]
pub enum LoopStatus {
    /// Working: calling the model or running tools.
    Running,
    /// Waiting for a person's decisions about tool calls.
    AwaitingApproval,
    /// Asked to stop; ends [`Cancelled`](RunOutcome::Cancelled) at the next boundary.
    Cancelling,
    /// Ended (or paused, for [`RunOutcomeKind::Paused`]).
    Finished(RunOutcomeKind),
}

/// What the run does next, in its loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// The model is to be called.
    CallModel,
    /// The tool calls of the last response are being decided and run.
    Tools,
    /// The model answered; the run completes unless new input arrived.
    Answered,
    /// The response stopped at the output token limit; it is resumed or the run ends
    /// incomplete.
    Truncated,
    /// The run has an outcome.
    Done,
}

/// A tool call's result, as the model will see it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CallResult {
    /// The result or error text.
    pub content: String,
    /// Whether the call failed (or was refused).
    pub is_error: bool,
    /// The images and PDFs the result carries, shown to the model after the results.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<ContentBlock>,
}

impl CallResult {
    /// A failed result.
    pub fn error(content: impl Into<String>) -> Self {
        CallResult { content: content.into(), is_error: true, attachments: Vec::new() }
    }

    /// A result of `content` (a failure when `is_error`), with nothing attached.
    pub fn text(content: impl Into<String>, is_error: bool) -> Self {
        CallResult { content: content.into(), is_error, attachments: Vec::new() }
    }
}

/// The text that introduces the attachments of call `call_id` of `tool` in the message of
/// tool results.
fn attachment_label(tool: &str, call_id: &ToolCallId, count: usize) -> String {
    let what = if count == 1 { "an attachment".to_owned() } else { format!("{count} attachments") };
    format!("{ATTACHMENT_LABEL}`{tool}` (call {call_id}) has {what}:")
}

/// How the text introducing a call's attachments begins.
const ATTACHMENT_LABEL: &str = "The result of ";

/// A tool call's result as a conversation holds it: what a recorded run's reader gives
/// back to the call it replays.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecordedToolResult {
    /// The result's text.
    pub content: String,
    /// Whether it was an error.
    pub is_error: bool,
    /// The images and PDFs it carried.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<ContentBlock>,
}

/// Every tool call's result in `messages`, by call id, with its attachments.
pub fn tool_results(messages: &[Message]) -> std::collections::BTreeMap<String, RecordedToolResult> {
    let mut results = std::collections::BTreeMap::new();
    for message in messages {
        for block in &message.content {
            if let ContentBlock::ToolResult { tool_use_id, content, is_error } = block {
                let result =
                    RecordedToolResult { content: content.clone(), is_error: *is_error, attachments: Vec::new() };
                results.insert(tool_use_id.to_string(), result);
            }
        }
        for (call_id, attachments) in tool_result_attachments(message) {
            if let Some(result) = results.get_mut(call_id.as_str()) {
                result.attachments = attachments;
            }
        }
    }
    results
}

/// The attachments each call's result carried, as a message of tool results holds them
/// (after the results, each call's introduced by a line naming it and how many follow):
/// what a recorded run's reader gives back to a call it replays. A line is read as a
/// label only for a call answered in the same message and only when as many images and
/// PDFs as it names follow it: other text that happens to read like one (a person's, a
/// model's) attaches nothing.
pub fn tool_result_attachments(message: &Message) -> Vec<(ToolCallId, Vec<ContentBlock>)> {
    let answered: BTreeSet<&str> = message
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::ToolResult { tool_use_id, .. } => Some(tool_use_id.as_str()),
            _ => None,
        })
        .collect();
    let mut found = Vec::new();
    if answered.is_empty() {
        return found;
    }
    let blocks = &message.content;
    let mut i = 0;
    while i < blocks.len() {
        if let ContentBlock::Text { text } = &blocks[i]
            && let Some((call_id, count)) = read_attachment_label(text)
            && answered.contains(call_id)
            // The count is read from a stored text: a corrupt one may be any number.
            && let Some(end) = count.checked_add(i + 1)
            && let Some(attached) = blocks.get(i + 1..end)
            && attached.iter().all(|b| matches!(b, ContentBlock::Image { .. } | ContentBlock::Document { .. }))
        {
            found.push((ToolCallId::new(call_id), attached.to_vec()));
            i = end;
        } else {
            i += 1;
        }
    }
    found
}

/// The call id and the number of attachments that [`attachment_label`] wrote in `text`.
fn read_attachment_label(text: &str) -> Option<(&str, usize)> {
    let rest = text.strip_prefix(ATTACHMENT_LABEL)?.strip_suffix(':')?;
    let (named, what) = rest.rsplit_once(") has ")?;
    let count = match what {
        "an attachment" => 1,
        many => many.strip_suffix(" attachments")?.parse().ok().filter(|n| *n > 1)?,
    };
    let (_, call_id) = named.rsplit_once(" (call ")?;
    Some((call_id, count))
}

/// A tool call of the last model response, with what was decided about it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PendingCall {
    /// The model's id for the call.
    pub call_id: ToolCallId,
    /// The tool's catalog name.
    pub tool: String,
    /// The arguments the model gave.
    pub arguments: Value,
    /// The approval policy's verdict, once evaluated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    /// A person's decision, where one was asked for and given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<ApprovalDecision>,
    /// The result, once known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<CallResult>,
    /// The call was interrupted by a crash and may or may not have happened: a person
    /// decides whether it is retried (approve), skipped (reject) or the run cancelled.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub uncertain: bool,
}

impl PendingCall {
    /// The arguments the tool runs with: a person's replacement, else the model's.
    pub fn effective_arguments(&self) -> &Value {
        match &self.decision {
            Some(ApprovalDecision::Modify { arguments }) => arguments,
            _ => &self.arguments,
        }
    }

    /// Whether the call waits for a person.
    pub fn is_awaiting(&self) -> bool {
        self.result.is_none() && self.decision.is_none() && matches!(self.verdict, Some(Verdict::Ask { .. }))
    }

    /// Whether the call is cleared to run and has not run yet.
    pub fn may_run(&self) -> bool {
        self.result.is_none()
            && match self.verdict {
                Some(Verdict::Allow) => true,
                Some(Verdict::Ask { .. }) => matches!(
                    self.decision,
                    Some(ApprovalDecision::Approve | ApprovalDecision::Modify { .. } | ApprovalDecision::AlwaysAllow)
                ),
                _ => false,
            }
    }

    pub(crate) fn request(&self) -> ApprovalRequest {
        let reason = match &self.verdict {
            Some(Verdict::Ask { reason }) => reason.clone(),
            _ => String::new(),
        };
        ApprovalRequest {
            call_id: self.call_id.clone(),
            tool: self.tool.clone(),
            arguments: self.arguments.clone(),
            reason,
        }
    }
}

/// What the runner is to do next.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Call the model with this request.
    CallModel(Box<ModelRequest>),
    /// Run these calls (the cleared calls of this turn, in order) and report their results.
    RunTools(Vec<ToolCall>),
    /// Ask a person about these calls and report the decisions as signals.
    AwaitApproval(Vec<ApprovalRequest>),
    /// The run is over.
    Finish(RunOutcome),
}

/// A group of tool calls to run together.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolBatch {
    /// The calls, in the model's order.
    pub calls: Vec<ToolCall>,
    /// Whether the batch is one call with side effects: it runs alone, after its start
    /// is on record (when the run is recorded), and a save follows its completion.
    pub side_effect: bool,
}

/// The machine's bookkeeping between an effect and its answer. Not part of what a run is:
/// never stored, equal to any other.
#[derive(Clone, Debug, Default)]
pub(crate) struct InFlight {
    /// A model turn came that no save holds yet.
    pub(crate) turn_unsaved: bool,
    /// The action decided before the turn's save, performed once it is saved.
    pub(crate) held: Option<Action>,
    /// The tool batch running, if any.
    pub(crate) batch: Option<ToolBatch>,
}

/// How many of the first messages are as the last save of the conversation left them.
/// Bookkeeping of this process, like [`InFlight`]: never stored (a state read back has
/// every message still to save), equal to any other.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SavedMessages(pub(crate) usize);

impl PartialEq for SavedMessages {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl PartialEq for InFlight {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

/// Everything a run knows between two steps. Plain data: it serializes, clones, and
/// resumes. A field at its default (an empty list, a zero count) is left out of the JSON
/// and read back as that default: a stored run rewrites its state at every checkpoint.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunState {
    /// The run.
    pub(crate) run_id: RunId,
    /// The agent's name.
    pub(crate) agent: String,
    /// The model's id (`provider/model`).
    pub(crate) model: String,
    /// The model's name on the wire, sent in requests.
    pub(crate) model_name: String,
    /// The conversation the run continues, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) conversation_id: Option<ConversationId>,
    /// The run that delegated this one, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) parent_run_id: Option<RunId>,
    /// The conversation so far.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) messages: Vec<Message>,
    /// Model calls made.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(crate) iteration: u32,
    /// Tokens used by all model calls.
    #[serde(default, serialize_with = "counted::usage")]
    pub(crate) usage: Usage,
    /// The usage of the last model call.
    #[serde(default, skip_serializing_if = "Option::is_none", serialize_with = "counted::last_usage")]
    pub(crate) last_usage: Option<Usage>,
    /// What the model calls cost, in USD.
    pub(crate) cost_usd: f64,
    /// Where the run stands.
    pub(crate) status: LoopStatus,
    /// What the loop does next.
    pub(crate) phase: Phase,
    /// Output-limit recoveries made in a row.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(crate) recoveries: u32,
    /// Tools a person chose to always allow in this run.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub(crate) always_allowed: BTreeSet<String>,
    /// The tool calls of the last response, until their results are in the conversation.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) pending_calls: Vec<PendingCall>,
    /// Messages (user input, steering, hook output) waiting for the next model call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) pending_input: Vec<Message>,
    /// Text of responses cut at the output limit, to be continued.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) continuation: String,
    /// The final answer, once the model gave it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) answer: String,
    /// The typed answer the run must end with, if any: part of the run, so a resumed run
    /// asks for the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) output: Option<OutputSpec>,
    /// Answers sent back for not matching [`output`](Self::output).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(crate) output_corrections: u32,
    /// Why the run is being cancelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) cancel_reason: Option<String>,
    /// Tool calls answered (refused ones included).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(crate) tool_calls: u32,
    /// Of those, the ones answered with an error.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(crate) tool_errors: u32,
    /// The sequence number of the run's next event: a resumed run numbers its events on
    /// from where it stopped.
    #[serde(default)]
    pub(crate) event_seq: u64,
    /// How the run ended, once it has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) outcome: Option<RunOutcome>,
    /// With a store: every stored signal up to this sequence number has been applied.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(crate) signal_cursor: i64,
    /// The agent's configuration as changed while the run was going, once it was: a
    /// resumed run goes on with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) applied_spec: Option<AppliedSpec>,
    /// The tools offered to the model that the run's client runs itself: their calls wait
    /// for the client's result.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) client_tools: Vec<ToolSpec>,
    /// The state shared with the run's client, which the agent changes with
    /// [`STATE_UPDATE_TOOL`](crate::STATE_UPDATE_TOOL); `None` when nothing is shared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) shared_state: Option<Value>,
    /// The machine's bookkeeping between an effect and its answer (never stored).
    #[serde(skip)]
    pub(crate) in_flight: InFlight,
    /// See [`messages_changed_from`](Self::messages_changed_from) (never stored).
    #[serde(skip)]
    pub(crate) saved_messages: SavedMessages,
}

impl RunState {
    /// A new run of `agent` on `model` (its id), sending `model_name` on the wire.
    pub fn new(
        run_id: RunId,
        agent: impl Into<String>,
        model: impl Into<String>,
        model_name: impl Into<String>,
    ) -> Self {
        RunState {
            run_id,
            agent: agent.into(),
            model: model.into(),
            model_name: model_name.into(),
            conversation_id: None,
            parent_run_id: None,
            messages: Vec::new(),
            iteration: 0,
            usage: Usage::default(),
            last_usage: None,
            cost_usd: 0.0,
            status: LoopStatus::Running,
            phase: Phase::CallModel,
            recoveries: 0,
            always_allowed: BTreeSet::new(),
            pending_calls: Vec::new(),
            pending_input: Vec::new(),
            continuation: String::new(),
            answer: String::new(),
            output: None,
            output_corrections: 0,
            cancel_reason: None,
            tool_calls: 0,
            tool_errors: 0,
            event_seq: 0,
            outcome: None,
            signal_cursor: 0,
            applied_spec: None,
            client_tools: Vec::new(),
            shared_state: None,
            in_flight: InFlight::default(),
            saved_messages: SavedMessages::default(),
        }
    }

    /// Offers the model `tools`, which the run's client runs itself (checked beforehand
    /// with [`validate_client_tools`](crate::validate_client_tools)).
    pub fn with_client_tools(mut self, tools: Vec<ToolSpec>) -> Self {
        self.client_tools = tools;
        self
    }

    /// Shares `state` with the run's client (none: nothing shared, and no
    /// [`STATE_UPDATE_TOOL`](crate::STATE_UPDATE_TOOL)).
    pub fn with_shared_state(mut self, state: Option<Value>) -> Self {
        self.shared_state = state;
        self
    }

    /// Starts from an earlier conversation.
    pub fn with_history(mut self, history: Vec<Message>) -> Self {
        self.messages = history;
        self
    }

    /// Continues `conversation` (none: a run of its own).
    pub fn with_conversation(mut self, conversation: Option<ConversationId>) -> Self {
        self.conversation_id = conversation;
        self
    }

    /// Ends with a typed answer of this shape (none: a text answer).
    pub fn with_output(mut self, output: Option<OutputSpec>) -> Self {
        self.output = output;
        self
    }

    /// The shape the run's answer must have, when it was given one.
    pub fn output_spec(&self) -> Option<&OutputSpec> {
        self.output.as_ref()
    }

    /// Delegated by the run `parent` (none: a run at the top of its tree).
    pub fn with_parent(mut self, parent: Option<RunId>) -> Self {
        self.parent_run_id = parent;
        self
    }

    /// Goes on with the model `model` (its id) from its next call: a switch made while
    /// the run was stopped. Its name on the wire is resolved again.
    pub fn switch_model(&mut self, model: impl Into<String>) {
        self.model = model.into();
    }

    /// Puts `earlier` (a stored conversation's turns) before the messages the run starts
    /// with.
    pub fn prepend_history(&mut self, mut earlier: Vec<Message>) {
        earlier.append(&mut self.messages);
        self.messages = earlier;
        self.changed_from(0);
    }

    /// The position of the first message changed or added since the conversation was
    /// last [saved](Self::messages_saved): a store that keeps the conversation apart
    /// writes it from there. Every message counts as changed in a state that was never
    /// saved (or was read back).
    pub fn messages_changed_from(&self) -> usize {
        self.saved_messages.0.min(self.messages.len())
    }

    /// Notes that the conversation, as it is now, is saved.
    pub fn messages_saved(&mut self) {
        self.saved_messages.0 = self.messages.len();
    }

    /// Notes that the messages from position `index` on are not as last saved.
    pub(crate) fn changed_from(&mut self, index: usize) {
        self.saved_messages.0 = self.saved_messages.0.min(index);
    }

    /// What `encode` makes of the state without its conversation (its `messages` empty):
    /// for a store that keeps the conversation apart. The messages are moved out and
    /// back, not copied.
    pub fn without_messages<R>(&mut self, encode: impl FnOnce(&RunState) -> R) -> R {
        let messages = std::mem::take(&mut self.messages);
        let encoded = encode(self);
        self.messages = messages;
        encoded
    }

    /// Takes the conversation out to be compacted: the shell hands it back before anything
    /// else, as [`Input::Compacted`](crate::machine::Input::Compacted) or, unchanged, as
    /// [`Input::Uncompacted`](crate::machine::Input::Uncompacted) (moved, not cloned: it
    /// is the run's largest part).
    pub fn take_messages(&mut self) -> Vec<Message> {
        std::mem::take(&mut self.messages)
    }

    /// The shell numbers the run's events; it says which number comes next before a
    /// save, so a resumed run numbers its events on from where it stopped.
    pub fn set_event_seq(&mut self, next: u64) {
        self.event_seq = next;
    }

    /// Adds the task as a user message (nothing for an empty task).
    pub fn with_instruction(mut self, instruction: &str) -> Self {
        if !instruction.is_empty() {
            self.append(Message::user(instruction));
        }
        self
    }

    /// Adds `attachments` (images, documents) to the task: to its message when the last
    /// message is the user's, else as a user message of their own.
    pub fn with_attachments(mut self, attachments: Vec<ContentBlock>) -> Self {
        if attachments.is_empty() {
            return self;
        }
        match self.messages.last_mut() {
            Some(last) if last.role == troupe_core::Role::User => {
                last.content.extend(attachments);
                self.changed_from(self.messages.len() - 1);
            }
            _ => self.append(Message::new(troupe_core::Role::User, attachments)),
        }
        self
    }

    /// Whether the run has an outcome (a paused run has one too).
    pub fn is_finished(&self) -> bool {
        self.outcome.is_some()
    }

    /// The calls waiting for a person.
    pub fn awaiting_approval(&self) -> Vec<ApprovalRequest> {
        self.pending_calls.iter().filter(|c| c.is_awaiting()).map(PendingCall::request).collect()
    }

    /// The pending calls cleared to run that have not run yet, in call order, with the
    /// arguments they run with.
    pub fn runnable_calls(&self) -> Vec<ToolCall> {
        self.pending_calls
            .iter()
            .filter(|c| c.may_run())
            .map(|c| ToolCall::new(c.call_id.clone(), c.tool.clone(), c.effective_arguments().clone()))
            .collect()
    }

    /// The text of the last model response.
    pub fn last_assistant_text(&self) -> String {
        self.messages.iter().rev().find(|m| m.role == Role::Assistant).map(Message::text).unwrap_or_default()
    }

    /// Refuses a pending call before approval is asked or the tool runs (a capability
    /// check failed); the model sees `reason` as the call's error result.
    pub fn deny_call(&mut self, call_id: &ToolCallId, reason: &str) {
        if let Some(call) = self.pending_calls.iter_mut().find(|c| &c.call_id == call_id && c.result.is_none()) {
            call.verdict = Some(Verdict::Deny { reason: reason.to_owned() });
            call.result = Some(CallResult::error(format!(
                "The tool call was denied by capability policy: {reason}. Do not repeat it; choose another approach."
            )));
        }
    }

    /// Appends the results of every pending call as one user message, in call order;
    /// calls without a result are answered with `not_run`.
    pub(crate) fn commit_results(&mut self, not_run: &str) {
        if self.pending_calls.is_empty() {
            return;
        }
        let mut blocks = Vec::with_capacity(self.pending_calls.len());
        // Images and PDFs go after every result: vendors want the results first.
        let mut attached = Vec::new();
        for call in std::mem::take(&mut self.pending_calls) {
            let result = call.result.unwrap_or_else(|| CallResult::error(not_run));
            self.tool_calls += 1;
            self.tool_errors += u32::from(result.is_error);
            if !result.attachments.is_empty() {
                attached.push(ContentBlock::text(attachment_label(
                    &call.tool,
                    &call.call_id,
                    result.attachments.len(),
                )));
                attached.extend(result.attachments);
            }
            blocks.push(ContentBlock::ToolResult {
                tool_use_id: call.call_id,
                content: result.content,
                is_error: result.is_error,
            });
        }
        blocks.extend(attached);
        self.messages.push(Message::new(Role::User, blocks));
        self.phase = Phase::CallModel;
    }

    /// Adds `message`, merging consecutive user messages so roles keep alternating.
    pub(crate) fn append(&mut self, message: Message) {
        match self.messages.last_mut() {
            Some(last) if last.role == Role::User && message.role == Role::User => {
                last.content.extend(message.content);
                self.changed_from(self.messages.len() - 1);
            }
            _ => self.messages.push(message),
        }
    }

    /// Adds tokens and cost of a model call.
    pub fn record_usage(&mut self, usage: Usage, cost_usd: f64) {
        self.usage += usage;
        self.last_usage = Some(usage);
        if cost_usd.is_finite() && cost_usd > 0.0 {
            self.cost_usd += cost_usd;
        }
    }

    /// Feeds back the model's response to the last [`Action::CallModel`] and its cost.
    pub fn apply_model_response(&mut self, response: ModelResponse, cost_usd: f64) {
        self.record_usage(response.usage, cost_usd);
        if self.outcome.is_some() || self.status == LoopStatus::Cancelling {
            return;
        }
        let message = response.message;
        let text = message.text();
        let calls: Vec<PendingCall> = message
            .tool_uses()
            .map(|(id, name, input)| PendingCall {
                call_id: id.clone(),
                tool: name.to_owned(),
                arguments: input.clone(),
                verdict: None,
                decision: None,
                result: None,
                uncertain: false,
            })
            .collect();
        // Providers reject an assistant turn without content in the history.
        if !message.content.is_empty() {
            self.messages.push(message);
        }
        if !calls.is_empty() {
            // Even a response cut at the limit mid-call gets its calls answered: the
            // catalog tells the model what was wrong with truncated arguments.
            self.pending_calls = calls;
            self.phase = Phase::Tools;
            self.recoveries = 0;
            self.continuation.clear();
            return;
        }
        match response.stop_reason {
            StopReason::MaxTokens => {
                self.continuation.push_str(&text);
                self.phase = Phase::Truncated;
            }
            StopReason::PauseTurn => {
                self.continuation.push_str(&text);
                self.phase = Phase::CallModel;
            }
            StopReason::Refusal => {
                self.finish(RunOutcome::failed(format!("the model declined to answer: {text}"), FailureCode::Refusal));
            }
            StopReason::ContextWindowExceeded => {
                self.finish(RunOutcome::failed(
                    "the conversation no longer fits the model's context window",
                    FailureCode::ContextWindowExceeded,
                ));
            }
            StopReason::EndTurn | StopReason::StopSequence | StopReason::ToolUse | StopReason::Other(_) => {
                self.answer = std::mem::take(&mut self.continuation) + &text;
                self.recoveries = 0;
                self.phase = Phase::Answered;
            }
        }
    }

    /// Feeds back the outcomes of the calls of the last [`Action::RunTools`]. Outcomes of
    /// calls that are not pending are ignored.
    pub fn apply_tool_results(&mut self, results: Vec<(ToolCallId, ToolResultOutcome)>) {
        for (call_id, outcome) in results {
            let Some(call) = self.pending_calls.iter_mut().find(|c| c.call_id == call_id && c.result.is_none()) else {
                tracing::warn!(call = %call_id, "a tool result for a call that is not pending was ignored");
                continue;
            };
            let content = match &call.decision {
                Some(ApprovalDecision::Modify { arguments }) => {
                    format!(
                        "(A person changed this call's arguments to {arguments} before it ran.)\n{}",
                        outcome.content
                    )
                }
                _ => outcome.content,
            };
            call.result = Some(CallResult { content, is_error: outcome.is_error, attachments: outcome.attachments });
        }
    }

    /// Applies a signal: queues input, records an approval decision, or starts
    /// cancellation. Whether the agent accepts the signal's kind is the caller's check
    /// ([`AgentSpec::accepts`](crate::AgentSpec::accepts)). A paused run is reopened by any signal.
    pub fn apply_signal(&mut self, signal: Signal) -> Result<(), SignalError> {
        match &self.outcome {
            Some(RunOutcome::Paused { .. }) => self.reopen(),
            Some(_) => return Err(SignalError::RunFinished),
            None => {}
        }
        match signal {
            Signal::UserMessage { text } | Signal::Steering { text } => self.pending_input.push(Message::user(text)),
            Signal::ExternalEvent { name, payload } => {
                self.pending_input.push(Message::user(format!("External event `{name}`: {payload}")));
            }
            Signal::Approval { call_id, decision } => self.decide(call_id, decision)?,
            Signal::ToolResult { call_id, content, is_error } => {
                let client_tools = &self.client_tools;
                let call = self
                    .pending_calls
                    .iter_mut()
                    .find(|c| c.call_id == call_id && c.is_awaiting() && client_tools.iter().any(|t| t.name == c.tool))
                    .ok_or(SignalError::NoClientCall { call_id })?;
                call.result = Some(CallResult::text(content, is_error));
            }
            Signal::Cancel { reason } => self.request_cancel(reason),
            Signal::Resume | Signal::SchedulerWake => {}
        }
        Ok(())
    }

    fn decide(&mut self, call_id: ToolCallId, decision: ApprovalDecision) -> Result<(), SignalError> {
        let Some(call) = self.pending_calls.iter_mut().find(|c| c.call_id == call_id && c.is_awaiting()) else {
            return Err(SignalError::UnknownCall { call_id });
        };
        // A client tool's call has nothing to run here: it takes the client's result, a
        // rejection, or the run's cancellation.
        let by_client = self.client_tools.iter().any(|t| t.name == call.tool);
        if by_client && !matches!(decision, ApprovalDecision::Reject { .. } | ApprovalDecision::Cancel) {
            return Err(SignalError::ClientRunsCall { call_id });
        }
        match &decision {
            ApprovalDecision::Reject { reason } if call.uncertain => {
                let why = reason.as_deref().map(|r| format!(" ({r})")).unwrap_or_default();
                call.result = Some(CallResult::error(format!(
                    "This call was interrupted and a person chose to skip it{why}: it may or may not have taken effect. Check before relying on it."
                )));
            }
            ApprovalDecision::Reject { reason } if by_client => {
                let why = reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default();
                call.result = Some(CallResult::error(format!(
                    "The client did not run this tool call{why}. Do not repeat it unchanged; adjust your approach or ask the user."
                )));
            }
            ApprovalDecision::Reject { reason } => {
                let why = reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default();
                call.result = Some(CallResult::error(format!(
                    "The user rejected this tool call{why}. Do not repeat it unchanged; adjust your approach or ask the user."
                )));
            }
            ApprovalDecision::AlwaysAllow => {
                self.always_allowed.insert(call.tool.clone());
            }
            ApprovalDecision::Cancel => {
                let reason = format!("cancelled while approving `{}`", call.tool);
                self.request_cancel(Some(reason));
                return Ok(());
            }
            ApprovalDecision::Approve | ApprovalDecision::Modify { .. } => {}
        }
        call.decision = Some(decision);
        Ok(())
    }

    /// Starts cancellation: the next action finishes the run
    /// [`Cancelled`](RunOutcome::Cancelled). The first reason given is kept.
    pub fn request_cancel(&mut self, reason: Option<String>) {
        if self.outcome.is_some() {
            return;
        }
        self.status = LoopStatus::Cancelling;
        if self.cancel_reason.is_none() {
            self.cancel_reason = reason;
        }
    }

    /// Adds messages (from a signal hook) for the next model call.
    pub fn inject(&mut self, messages: impl IntoIterator<Item = Message>) {
        self.pending_input.extend(messages);
    }

    /// Ends the run with `outcome` (the first outcome wins) and returns the outcome in
    /// force. Pending calls without a result are answered with an error, so the
    /// conversation stays valid; a [`Paused`](RunOutcome::Paused) outcome keeps them
    /// pending instead, for a later resume.
    pub fn finish(&mut self, outcome: RunOutcome) -> RunOutcome {
        if let Some(existing) = &self.outcome {
            return existing.clone();
        }
        if !matches!(outcome, RunOutcome::Paused { .. }) {
            let kind = serde_json::to_value(outcome.kind())
                .ok()
                .and_then(|v| v.as_str().map(|s| s.replace('_', " ")))
                .unwrap_or_default();
            self.commit_results(&format!("The tool call was not run: the run ended first ({kind})."));
            self.phase = Phase::Done;
        }
        self.status = LoopStatus::Finished(outcome.kind());
        self.outcome = Some(outcome.clone());
        outcome
    }

    /// Takes back a completion so the run can answer input that arrived as it finished
    /// (a signal acknowledged before the completion was recorded); no effect otherwise.
    pub fn reopen_completed(&mut self) {
        if let Some(RunOutcome::Completed { output }) = &self.outcome {
            self.answer.clone_from(output);
            self.outcome = None;
            self.phase = Phase::Answered;
            self.status = LoopStatus::Running;
        }
    }

    /// Reopens a run that failed for a transient reason ([`FailureCode::is_transient`]) so
    /// it goes on from here by calling the model again; returns the failure it takes back,
    /// `None` (and no effect) otherwise.
    pub fn reopen_failed(&mut self) -> Option<(FailureCode, String)> {
        let Some(RunOutcome::Failed { error, code: Some(code) }) = &self.outcome else { return None };
        if !code.is_transient() {
            return None;
        }
        let failure = (code.clone(), error.clone());
        self.outcome = None;
        self.status = LoopStatus::Running;
        self.phase = Phase::CallModel;
        Some(failure)
    }

    /// The state of a run stopped by cancellation made ready to go on (a team suspends a
    /// member that way): the outcome is cleared and the next step chosen from where the
    /// run stood. Any other state is returned as it is.
    pub fn reopened_after_cancel(mut self) -> Self {
        if matches!(self.outcome, Some(RunOutcome::Cancelled { .. })) {
            self.outcome = None;
            self.cancel_reason = None;
            self.status = LoopStatus::Running;
            let last_is_answer = self.messages.last().is_some_and(|m| m.role == Role::Assistant);
            self.phase = if !self.answer.is_empty() {
                Phase::Answered
            } else if last_is_answer && !self.continuation.is_empty() {
                Phase::Truncated
            } else {
                Phase::CallModel
            };
        }
        self
    }

    /// Reopens a paused run so it can take decisions and go on; no effect otherwise.
    pub fn reopen(&mut self) {
        if matches!(self.outcome, Some(RunOutcome::Paused { .. })) {
            self.outcome = None;
            self.status = LoopStatus::AwaitingApproval;
        }
    }
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;

/// Whether a count is zero, its default: such a field is left out of the state's JSON.
fn is_zero<T: Default + PartialEq>(n: &T) -> bool {
    *n == T::default()
}

/// A usage as a state stores it: only its counts that are not zero (a missing count reads
/// back as zero, [`Usage`] being `#[serde(default)]`). Most providers report no cache or
/// reasoning tokens, and the state is rewritten at every checkpoint.
mod counted {
    use serde::ser::{SerializeMap, Serializer};
    use troupe_core::Usage;

    pub(super) fn usage<S: Serializer>(usage: &Usage, serializer: S) -> Result<S::Ok, S::Error> {
        // Destructured whole: a count added to `Usage` does not compile until it is written.
        let Usage {
            input_tokens,
            output_tokens,
            cache_read_tokens,
            cache_write_tokens,
            cache_write_long_tokens,
            reasoning_tokens,
        } = *usage;
        let counted = [
            ("input_tokens", input_tokens),
            ("output_tokens", output_tokens),
            ("cache_read_tokens", cache_read_tokens),
            ("cache_write_tokens", cache_write_tokens),
            ("cache_write_long_tokens", cache_write_long_tokens),
            ("reasoning_tokens", reasoning_tokens),
        ]
        .into_iter()
        .filter(|(_, count)| *count != 0);
        let mut map = serializer.serialize_map(Some(counted.clone().count()))?;
        for (name, count) in counted {
            map.serialize_entry(name, &count)?;
        }
        map.end()
    }

    pub(super) fn last_usage<S: Serializer>(last: &Option<Usage>, serializer: S) -> Result<S::Ok, S::Error> {
        match last {
            Some(last) => usage(last, serializer),
            None => serializer.serialize_none(),
        }
    }
}
