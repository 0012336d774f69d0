//! The projection of a run's [`AgentEvent`]s onto AG-UI [`Event`]s: a pure state
//! machine, fed one troupe event at a time.
//!
//! AG-UI is stricter about nesting than troupe's stream, and its clients verify it: the
//! first event is `RUN_STARTED`, nothing follows `RUN_FINISHED`/`RUN_ERROR`, and nothing
//! may be left open at the end. So the projection keeps, per run (the run itself and
//! each team member's run, a *lane*), which text message, reasoning message, tool calls
//! and steps are open. Within a lane, text and reasoning never overlap: text closes an
//! open reasoning message and reasoning closes open text (reopening the same message id
//! when its text goes on), and a tool call closes both. Before the run's last event,
//! everything still open is closed.

use super::conversation::Conversation;
use super::events::{
    Event, Interrupt, PROTOCOL_VERSION, ReasoningRole, RunOutcome, SubagentOutcome, TextRole, TokenUsage, ToolRole,
};
use super::input::Message;
use super::resume::approval_response_schema;
use crate::launcher::RunEnd;
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use troupe_core::{AgentEvent, AgentEventKind, Attribution, PauseReason, Role, RunId, RunOutcomeKind, Usage};
use troupe_runtime::{apply_patch, is_client_tool_wait};

/// The name of the `CUSTOM` event a troupe run's start becomes.
pub const RUN_STARTED_EVENT: &str = "troupe.run_started";
/// The name of the `CUSTOM` event a troupe run's end becomes (before `RUN_FINISHED`).
pub const RUN_FINISHED_EVENT: &str = "troupe.run_finished";
/// The name of the `CUSTOM` event a model call's usage becomes.
pub const USAGE_EVENT: &str = "troupe.usage";
/// The name of the `CUSTOM` event a model call's retry becomes.
pub const RETRYING_EVENT: &str = "troupe.retrying";
/// The name of the `CUSTOM` event a fallback to another model becomes.
pub const FALLBACK_EVENT: &str = "troupe.model_fallback";
/// The name of the `CUSTOM` event an artifact becomes.
pub const ARTIFACT_EVENT: &str = "troupe.artifact";
/// The `reason` of the interrupt a call of a client tool ends an AG-UI run with.
pub const CLIENT_TOOL_INTERRUPT: &str = "client_tool";

/// One AG-UI run's view of a troupe run.
///
/// ```
/// use troupe_core::{AgentEvent, AgentEventKind, AgentId, Attribution, RunId};
/// use troupe_server::agui::Projection;
///
/// let mut projection = Projection::new("thread-1", "run-1", RunId::new("troupe-run"));
/// let first = projection.start(&[]);
/// assert_eq!(first[0].kind(), "RUN_STARTED");
///
/// let at = |seq| Attribution::now(AgentId::new("coder"), RunId::new("troupe-run"), seq);
/// let delta = AgentEvent::new(at(1), AgentEventKind::MessageDelta { message_id: "m1".into(), delta: "Hi".into() });
/// let kinds: Vec<_> = projection.next(&delta).iter().map(|e| e.kind()).collect();
/// assert_eq!(kinds, ["TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT"]);
///
/// // The run's end closes the open message first.
/// let end = projection.end(None);
/// assert_eq!(end.first().map(|e| e.kind()), Some("TEXT_MESSAGE_END"));
/// assert!(projection.is_finished());
/// ```
#[derive(Debug)]
pub struct Projection {
    thread_id: String,
    run_id: String,
    parent_run_id: Option<String>,
    root: RunId,
    lanes: Vec<Lane>,
    roles: HashMap<String, Role>,
    reasoning_spans: HashMap<String, u32>,
    answered: HashSet<String>,
    usage: Vec<(String, Usage)>,
    /// The thread's messages, for the `MESSAGES_SNAPSHOT` before `RUN_FINISHED`; `None`
    /// sends none.
    conversation: Option<Conversation>,
    started: bool,
    finished: bool,
}

/// What is open in one troupe run's part of the stream.
#[derive(Debug)]
struct Lane {
    run_id: RunId,
    /// `None` for the run itself; a team member's run id otherwise.
    subagent: Option<String>,
    /// For a subagent: started in this AG-UI run and not yet finished.
    active: bool,
    /// The open text message.
    text: Option<String>,
    /// The open reasoning message: the troupe message it belongs to, and its own id.
    reasoning: Option<(String, String)>,
    /// The open tool calls, in the order they began.
    tools: Vec<String>,
    /// The open steps, in the order they began.
    steps: Vec<u32>,
}

impl Lane {
    fn sub(&self) -> Option<String> {
        self.subagent.clone()
    }

    fn close_text(&mut self, out: &mut Vec<Event>) {
        if let Some(message_id) = self.text.take() {
            out.push(Event::TextMessageEnd { message_id, subagent_run_id: self.sub() });
        }
    }

    fn close_reasoning(&mut self, out: &mut Vec<Event>) {
        if let Some((_, id)) = self.reasoning.take() {
            out.push(Event::ReasoningMessageEnd { message_id: id.clone(), subagent_run_id: self.sub() });
            out.push(Event::ReasoningEnd { message_id: id, subagent_run_id: self.sub() });
        }
    }

    fn close_tool(&mut self, call: &str, out: &mut Vec<Event>) {
        if let Some(at) = self.tools.iter().position(|c| c == call) {
            let tool_call_id = self.tools.remove(at);
            out.push(Event::ToolCallEnd { tool_call_id, subagent_run_id: self.sub() });
        }
    }

    fn close(&mut self, out: &mut Vec<Event>) {
        self.close_reasoning(out);
        self.close_text(out);
        for tool_call_id in std::mem::take(&mut self.tools) {
            out.push(Event::ToolCallEnd { tool_call_id, subagent_run_id: self.sub() });
        }
        while let Some(step) = self.steps.pop() {
            out.push(Event::StepFinished { step_name: step_name(step), subagent_run_id: self.sub() });
        }
    }
}

fn step_name(step: u32) -> String {
    format!("step {step}")
}

impl Projection {
    /// The AG-UI run `run_id` on `thread_id`, showing the troupe run `root` (and the
    /// runs of its team members, as subagents).
    pub fn new(thread_id: impl Into<String>, run_id: impl Into<String>, root: RunId) -> Self {
        Projection {
            thread_id: thread_id.into(),
            run_id: run_id.into(),
            parent_run_id: None,
            root,
            lanes: Vec::new(),
            roles: HashMap::new(),
            reasoning_spans: HashMap::new(),
            answered: HashSet::new(),
            usage: Vec::new(),
            conversation: None,
            started: false,
            finished: false,
        }
    }

    /// Sends a `MESSAGES_SNAPSHOT` before `RUN_FINISHED`: `messages` (what the client
    /// sent) with what the run adds. A call whose result is among them gets no
    /// `TOOL_CALL_RESULT`: the client has it already.
    pub fn with_messages(mut self, messages: Vec<Message>) -> Self {
        self.conversation = Some(Conversation::new(messages));
        self
    }

    /// Names the AG-UI run this one follows, echoed in `RUN_STARTED`.
    pub fn with_parent_run(mut self, parent_run_id: Option<String>) -> Self {
        self.parent_run_id = parent_run_id;
        self
    }

    /// Skips the pauses for these interrupts: they were answered by the request that
    /// started this AG-UI run.
    pub fn with_answered(mut self, interrupt_ids: impl IntoIterator<Item = String>) -> Self {
        self.answered.extend(interrupt_ids);
        self
    }

    /// Whether `RUN_FINISHED` or `RUN_ERROR` was produced; nothing follows it.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// `RUN_STARTED`. When the AG-UI run continues a troupe run from the middle (a
    /// resume), `history` is what came before: the steps and subagents open at that
    /// point are opened again, so that what follows closes them properly.
    pub fn start(&mut self, history: &[AgentEvent]) -> Vec<Event> {
        let mut out = Vec::new();
        if self.started {
            return out;
        }
        self.started = true;
        out.push(Event::RunStarted {
            thread_id: self.thread_id.clone(),
            run_id: self.run_id.clone(),
            parent_run_id: self.parent_run_id.clone(),
            protocol_version: Some(PROTOCOL_VERSION.to_owned()),
        });
        // Which runs and steps are open at the end of `history`, in the order they began;
        // the state shared with the client, as it stands there.
        let mut open: Vec<(Attribution, Vec<u32>)> = Vec::new();
        let mut shared: Option<Value> = None;
        for event in history {
            self.converse(event);
            if event.attribution.run_id == self.root {
                match &event.kind {
                    AgentEventKind::StateSnapshot { state } => shared = Some(state.clone()),
                    AgentEventKind::StateDelta { patch } => {
                        shared = shared.and_then(|state| apply_patch(&state, patch).ok());
                    }
                    _ => {}
                }
            }
            let at = match open.iter().position(|(a, _)| a.run_id == event.attribution.run_id) {
                Some(at) => at,
                None => {
                    open.push((event.attribution.clone(), Vec::new()));
                    open.len() - 1
                }
            };
            match &event.kind {
                AgentEventKind::StepStarted { step } => open[at].1.push(*step),
                AgentEventKind::StepFinished { step } => open[at].1.retain(|s| s != step),
                AgentEventKind::RunFinished { .. } | AgentEventKind::RunError { .. } => {
                    open.remove(at);
                }
                _ => {}
            }
        }
        if let Some(snapshot) = shared {
            out.push(Event::StateSnapshot { snapshot, subagent_run_id: None });
        }
        // A resumed AG-UI run gives the client the thread as the run has it before the
        // rest arrives, so what follows lands in place even in a client that lost it.
        if let Some(conversation) = self.conversation.as_ref().filter(|_| !history.is_empty()) {
            out.push(Event::MessagesSnapshot { messages: conversation.messages().to_vec() });
        }
        for (attribution, steps) in open {
            let lane = self.lane(&attribution, &mut out);
            for step in steps {
                self.open_step(lane, step, &mut out);
            }
        }
        out
    }

    /// Adds what `event` says to the conversation, when one is kept.
    fn converse(&mut self, event: &AgentEvent) {
        let sub = (event.attribution.run_id != self.root).then(|| event.attribution.run_id.to_string());
        let sub = sub.as_deref();
        let Some(conversation) = self.conversation.as_mut() else { return };
        match &event.kind {
            AgentEventKind::MessageStart { message_id, role } => {
                self.roles.insert(message_id.clone(), *role);
            }
            AgentEventKind::MessageDelta { message_id, delta }
                if !delta.is_empty() && self.roles.get(message_id).is_none_or(|r| *r == Role::Assistant) =>
            {
                conversation.text(message_id, delta, sub);
            }
            AgentEventKind::ToolCallStart { call_id, tool, parent_message_id } => {
                conversation.call_started(call_id.as_str(), tool, parent_message_id.as_deref(), sub);
            }
            AgentEventKind::ToolCallArgs { call_id, delta } => conversation.call_arguments(call_id.as_str(), delta),
            AgentEventKind::ToolCallResult { call_id, content, .. } => {
                conversation.result(&format!("{call_id}-result"), call_id.as_str(), content, sub);
            }
            _ => {}
        }
    }

    /// `RUN_FINISHED`, after the conversation's snapshot when one is kept.
    fn run_finished(&mut self, result: Option<Value>, outcome: Option<RunOutcome>, out: &mut Vec<Event>) {
        if let Some(conversation) = &self.conversation {
            out.push(Event::MessagesSnapshot { messages: conversation.messages().to_vec() });
        }
        out.push(Event::RunFinished {
            thread_id: self.thread_id.clone(),
            run_id: self.run_id.clone(),
            result,
            outcome,
            usage: self.token_usage(),
        });
        self.finished = true;
    }

    /// The AG-UI events `event` becomes (often none or one; more when it closes what
    /// is open, or ends the run).
    pub fn next(&mut self, event: &AgentEvent) -> Vec<Event> {
        let mut out = self.start(&[]);
        if self.finished {
            return out;
        }
        // A result the client has already (it sent it) is not announced again.
        let known = match &event.kind {
            AgentEventKind::ToolCallResult { call_id, .. } => {
                self.conversation.as_ref().is_some_and(|c| c.has_result(call_id.as_str()))
            }
            _ => false,
        };
        self.converse(event);
        let lane = self.lane(&event.attribution, &mut out);
        let is_root = self.lanes[lane].subagent.is_none();
        let sub = self.lanes[lane].sub();
        match &event.kind {
            AgentEventKind::RunStarted { instruction, model } => {
                let value = json!({"runId": event.attribution.run_id, "agent": event.attribution.agent_id,
                                   "model": model, "instruction": instruction});
                out.push(custom(RUN_STARTED_EVENT, value, sub));
            }
            AgentEventKind::RunFinished { outcome, output, usage, cost_usd } => {
                let value = json!({"outcome": outcome, "usage": TokenUsage::of("", usage), "costUsd": cost_usd});
                if is_root {
                    self.close_all(None, &mut out);
                    out.push(custom(RUN_FINISHED_EVENT, value, None));
                    self.finish(output.clone(), *outcome, &mut out);
                } else {
                    self.lanes[lane].close(&mut out);
                    out.push(custom(RUN_FINISHED_EVENT, value, sub));
                    let outcome = (*outcome == RunOutcomeKind::Paused)
                        .then(|| SubagentOutcome::Suspended { interrupt_ids: Vec::new() });
                    self.end_subagent(lane, output.clone().map(Value::String), outcome, &mut out);
                }
            }
            AgentEventKind::RunError { message, code } => {
                if is_root {
                    self.close_all(None, &mut out);
                    self.fail(message.clone(), code.clone().unwrap_or_else(|| "run_failed".to_owned()), &mut out);
                } else {
                    let lane = &mut self.lanes[lane];
                    lane.close(&mut out);
                    // The client takes one end per subagent.
                    if let (true, Some(subagent_run_id)) = (lane.active, sub) {
                        lane.active = false;
                        out.push(Event::SubagentError {
                            subagent_run_id,
                            message: message.clone(),
                            code: code.clone(),
                        });
                    }
                }
            }
            AgentEventKind::RunPaused { reason } => {
                let interrupt = interrupt(reason, &event.attribution, sub);
                if !self.answered.contains(&interrupt.id) {
                    let waiting = interrupt.subagent_run_id.clone().map(|s| (s, interrupt.id.clone()));
                    self.close_all(waiting, &mut out);
                    let outcome = Some(RunOutcome::Interrupt { interrupts: vec![interrupt] });
                    self.run_finished(None, outcome, &mut out);
                }
            }
            AgentEventKind::StepStarted { step } => self.open_step(lane, *step, &mut out),
            AgentEventKind::StepFinished { step } => {
                let lane = &mut self.lanes[lane];
                // A step that is not open began before this AG-UI run and was not
                // reopened: it cannot be closed here.
                if let Some(at) = lane.steps.iter().position(|s| s == step) {
                    lane.steps.remove(at);
                    out.push(Event::StepFinished { step_name: step_name(*step), subagent_run_id: sub });
                }
            }
            AgentEventKind::MessageStart { message_id, role } => {
                self.roles.insert(message_id.clone(), *role);
            }
            AgentEventKind::MessageDelta { message_id, delta } => {
                if delta.is_empty() {
                    return out;
                }
                let role = match self.roles.get(message_id) {
                    Some(Role::User) => TextRole::User,
                    _ => TextRole::Assistant,
                };
                let lane = &mut self.lanes[lane];
                lane.close_reasoning(&mut out);
                if lane.text.as_deref() != Some(message_id.as_str()) {
                    lane.close_text(&mut out);
                    out.push(Event::TextMessageStart {
                        message_id: message_id.clone(),
                        role: Some(role),
                        subagent_run_id: sub.clone(),
                    });
                    lane.text = Some(message_id.clone());
                }
                out.push(Event::TextMessageContent {
                    message_id: message_id.clone(),
                    delta: delta.clone(),
                    subagent_run_id: sub,
                });
            }
            AgentEventKind::ReasoningDelta { message_id, delta } => {
                if delta.is_empty() {
                    return out;
                }
                let lane = &mut self.lanes[lane];
                lane.close_text(&mut out);
                if lane.reasoning.as_ref().is_some_and(|(of, _)| of != message_id) {
                    lane.close_reasoning(&mut out);
                }
                let id = match &lane.reasoning {
                    Some((_, id)) => id.clone(),
                    None => {
                        let n = self.reasoning_spans.entry(message_id.clone()).or_insert(0);
                        *n += 1;
                        let id = if *n == 1 {
                            format!("{message_id}-reasoning")
                        } else {
                            format!("{message_id}-reasoning-{n}")
                        };
                        out.push(Event::ReasoningStart { message_id: id.clone(), subagent_run_id: sub.clone() });
                        out.push(Event::ReasoningMessageStart {
                            message_id: id.clone(),
                            role: ReasoningRole::Reasoning,
                            subagent_run_id: sub.clone(),
                        });
                        lane.reasoning = Some((message_id.clone(), id.clone()));
                        id
                    }
                };
                out.push(Event::ReasoningMessageContent { message_id: id, delta: delta.clone(), subagent_run_id: sub });
            }
            AgentEventKind::MessageEnd { message_id } => {
                let lane = &mut self.lanes[lane];
                if lane.reasoning.as_ref().is_some_and(|(of, _)| of == message_id) {
                    lane.close_reasoning(&mut out);
                }
                if lane.text.as_deref() == Some(message_id.as_str()) {
                    lane.close_text(&mut out);
                }
            }
            AgentEventKind::ToolCallStart { call_id, tool, parent_message_id } => {
                let lane = &mut self.lanes[lane];
                lane.close_reasoning(&mut out);
                lane.close_text(&mut out);
                if !lane.tools.iter().any(|c| c == call_id.as_str()) {
                    lane.tools.push(call_id.to_string());
                    out.push(Event::ToolCallStart {
                        tool_call_id: call_id.to_string(),
                        tool_call_name: tool.clone(),
                        parent_message_id: parent_message_id.clone(),
                        subagent_run_id: sub,
                    });
                }
            }
            AgentEventKind::ToolCallArgs { call_id, delta } => {
                if !delta.is_empty() && self.lanes[lane].tools.iter().any(|c| c == call_id.as_str()) {
                    out.push(Event::ToolCallArgs {
                        tool_call_id: call_id.to_string(),
                        delta: delta.clone(),
                        subagent_run_id: sub,
                    });
                }
            }
            AgentEventKind::ToolCallEnd { call_id } => self.lanes[lane].close_tool(call_id.as_str(), &mut out),
            AgentEventKind::ToolCallResult { call_id, content, is_error } => {
                self.lanes[lane].close_tool(call_id.as_str(), &mut out);
                if known {
                    return out;
                }
                out.push(Event::ToolCallResult {
                    message_id: format!("{call_id}-result"),
                    tool_call_id: call_id.to_string(),
                    content: content.clone(),
                    role: Some(ToolRole::Tool),
                    metadata: is_error.then(|| json!({"isError": true})),
                    subagent_run_id: sub,
                });
            }
            AgentEventKind::StateSnapshot { state } => {
                out.push(Event::StateSnapshot { snapshot: state.clone(), subagent_run_id: sub });
            }
            AgentEventKind::StateDelta { patch } => {
                out.push(Event::StateDelta { delta: patch.clone(), subagent_run_id: sub });
            }
            AgentEventKind::Usage { model, usage, cost_usd } => {
                match self.usage.iter_mut().find(|(m, _)| m == model) {
                    Some((_, total)) => *total += *usage,
                    None => self.usage.push((model.clone(), *usage)),
                }
                let mut value = json!(TokenUsage::of(model, usage));
                if let (Some(cost), Some(map)) = (cost_usd, value.as_object_mut()) {
                    map.insert("costUsd".into(), json!(cost));
                }
                out.push(custom(USAGE_EVENT, value, sub));
            }
            AgentEventKind::Retrying { attempt, delay_ms, reason } => {
                let value = json!({"attempt": attempt, "delayMs": delay_ms, "reason": reason});
                out.push(custom(RETRYING_EVENT, value, sub));
            }
            AgentEventKind::ModelFallback { from, to, reason } => {
                out.push(custom(FALLBACK_EVENT, json!({"from": from, "to": to, "reason": reason}), sub));
            }
            AgentEventKind::Artifact { name, mime_type, content } => {
                let value = json!({"name": name, "mimeType": mime_type, "content": content});
                out.push(custom(ARTIFACT_EVENT, value, sub));
            }
            AgentEventKind::Custom { name, value } => out.push(custom(name, value.clone(), sub)),
            _ => out.push(Event::Raw {
                event: serde_json::to_value(event).unwrap_or(Value::Null),
                source: Some("troupe".to_owned()),
                subagent_run_id: sub,
            }),
        }
        out
    }

    /// The events that end the AG-UI run when the troupe run's stream stopped without
    /// its last event: from `end`, how the troupe run ended, when it has; otherwise
    /// (the server is closing) a `RUN_ERROR`. Nothing once the run is finished.
    pub fn end(&mut self, end: Option<&RunEnd>) -> Vec<Event> {
        let mut out = self.start(&[]);
        if self.finished {
            return out;
        }
        self.close_all(None, &mut out);
        match end {
            Some(end) if end.outcome == RunOutcomeKind::Failed => {
                let message = end.error.clone().unwrap_or_else(|| "the run failed".to_owned());
                self.fail(message, "run_failed".to_owned(), &mut out);
            }
            Some(end) => self.finish(end.output.clone(), end.outcome, &mut out),
            None => self.fail(
                "the run's event stream closed before the run ended (the server is shutting down)".to_owned(),
                "stream_closed".to_owned(),
                &mut out,
            ),
        }
        out
    }

    /// The lane of `attribution`'s run, created on first sight; a subagent's first
    /// event announces it.
    fn lane(&mut self, attribution: &Attribution, out: &mut Vec<Event>) -> usize {
        match self.lanes.iter().position(|l| l.run_id == attribution.run_id) {
            Some(at) => at,
            None => {
                let subagent = (attribution.run_id != self.root).then(|| attribution.run_id.to_string());
                self.lanes.push(Lane {
                    run_id: attribution.run_id.clone(),
                    subagent: subagent.clone(),
                    active: false,
                    text: None,
                    reasoning: None,
                    tools: Vec::new(),
                    steps: Vec::new(),
                });
                let at = self.lanes.len() - 1;
                if let Some(subagent_run_id) = subagent {
                    // The client only accepts a parent it saw start in this run.
                    let parent_subagent_run_id = attribution
                        .parent_run_id
                        .as_ref()
                        .filter(|parent| self.lanes.iter().any(|l| &l.run_id == *parent && l.subagent.is_some()))
                        .map(ToString::to_string);
                    self.lanes[at].active = true;
                    out.push(Event::SubagentStarted {
                        subagent_run_id,
                        name: attribution.agent_id.to_string(),
                        parent_subagent_run_id,
                    });
                }
                at
            }
        }
    }

    fn open_step(&mut self, lane: usize, step: u32, out: &mut Vec<Event>) {
        let lane = &mut self.lanes[lane];
        if !lane.steps.contains(&step) {
            lane.steps.push(step);
            out.push(Event::StepStarted { step_name: step_name(step), subagent_run_id: lane.sub() });
        }
    }

    fn end_subagent(
        &mut self,
        lane: usize,
        result: Option<Value>,
        outcome: Option<SubagentOutcome>,
        out: &mut Vec<Event>,
    ) {
        let lane = &mut self.lanes[lane];
        if let (true, Some(subagent_run_id)) = (lane.active, lane.subagent.clone()) {
            lane.active = false;
            out.push(Event::SubagentFinished { subagent_run_id, result, outcome });
        }
    }

    /// Closes everything open: the subagents' items and the subagents (suspended when
    /// the run waits, the one in `waiting` naming its interrupt), then the run's own.
    fn close_all(&mut self, waiting: Option<(String, String)>, out: &mut Vec<Event>) {
        let suspended = waiting.is_some();
        let members: Vec<usize> = (0..self.lanes.len()).filter(|&l| self.lanes[l].subagent.is_some()).collect();
        for lane in members {
            self.lanes[lane].close(out);
            let outcome = suspended.then(|| SubagentOutcome::Suspended {
                interrupt_ids: waiting
                    .iter()
                    .filter(|(sub, _)| self.lanes[lane].subagent.as_ref() == Some(sub))
                    .map(|(_, id)| id.clone())
                    .collect(),
            });
            self.end_subagent(lane, None, outcome, out);
        }
        for lane in self.lanes.iter_mut().filter(|l| l.subagent.is_none()) {
            lane.close(out);
        }
    }

    fn finish(&mut self, output: Option<String>, outcome: RunOutcomeKind, out: &mut Vec<Event>) {
        let outcome = (outcome == RunOutcomeKind::Cancelled).then_some(RunOutcome::Cancelled);
        self.run_finished(output.map(Value::String), outcome, out);
    }

    fn fail(&mut self, message: String, code: String, out: &mut Vec<Event>) {
        out.push(Event::RunError { message, code: Some(code), usage: self.token_usage() });
        self.finished = true;
    }

    fn token_usage(&self) -> Vec<TokenUsage> {
        self.usage.iter().map(|(model, usage)| TokenUsage::of(model, usage)).collect()
    }
}

fn custom(name: &str, value: Value, subagent_run_id: Option<String>) -> Event {
    Event::Custom { name: name.to_owned(), value, subagent_run_id }
}

/// The interrupt a pause becomes; its id is what a resume names.
fn interrupt(reason: &PauseReason, attribution: &Attribution, subagent_run_id: Option<String>) -> Interrupt {
    match reason {
        PauseReason::Approval { call_id, tool, arguments, .. } if is_client_tool_wait(reason) => Interrupt {
            id: call_id.to_string(),
            reason: CLIENT_TOOL_INTERRUPT.to_owned(),
            message: Some(format!("`{tool}` is the client's tool: run it and resume with its result as the payload")),
            tool_call_id: Some(call_id.to_string()),
            response_schema: None,
            metadata: Some(json!({"tool": tool, "arguments": arguments})),
            subagent_run_id,
        },
        PauseReason::Approval { call_id, tool, arguments, reason } => Interrupt {
            id: call_id.to_string(),
            reason: "approval".to_owned(),
            // The runtime's reason usually names the tool already.
            message: Some(if reason.contains(tool.as_str()) { reason.clone() } else { format!("`{tool}`: {reason}") }),
            tool_call_id: Some(call_id.to_string()),
            response_schema: Some(approval_response_schema()),
            metadata: Some(json!({"tool": tool, "arguments": arguments})),
            subagent_run_id,
        },
        PauseReason::UncertainAction { call_id, tool, arguments } => Interrupt {
            id: call_id.to_string(),
            reason: "uncertain_action".to_owned(),
            message: Some(format!(
                "`{tool}` was interrupted and may or may not have taken effect: approve to run it again, \
                 reject to skip it"
            )),
            tool_call_id: Some(call_id.to_string()),
            response_schema: Some(approval_response_schema()),
            metadata: Some(json!({"tool": tool, "arguments": arguments})),
            subagent_run_id,
        },
        PauseReason::Input { prompt } => Interrupt {
            id: format!("{}-input-{}", attribution.run_id, attribution.seq),
            reason: "input".to_owned(),
            message: Some(prompt.clone()),
            tool_call_id: None,
            response_schema: None,
            metadata: None,
            subagent_run_id,
        },
    }
}

#[cfg(test)]
#[path = "projection_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "projection_frontend_tests.rs"]
mod frontend_tests;
