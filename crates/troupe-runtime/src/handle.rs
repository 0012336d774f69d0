//! What starting a run takes ([`RunInput`]) and gives back ([`RunHandle`]).

use crate::error::RuntimeError;
use crate::outcome::RunOutput;
use futures::Stream;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use troupe_core::{AgentEvent, ConversationId, Message, RunId, ToolCallId, ToolSpec};
use troupe_run::ApprovalDecision;
use troupe_run::OutputSpec;
use troupe_run::Signal;

/// How many events a run buffers for a slow consumer before it waits.
pub const EVENT_BUFFER: usize = 1024;
/// How many signals a run buffers before a sender waits.
pub const SIGNAL_BUFFER: usize = 64;

/// What a run is started with.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunInput {
    /// The run's id; generated when `None`.
    pub run_id: Option<RunId>,
    /// The task, added as the last user message (nothing when empty).
    pub instruction: String,
    /// The conversation so far.
    pub history: Vec<Message>,
    /// The conversation this run continues.
    pub conversation_id: Option<ConversationId>,
    /// The run that delegated this one.
    pub parent_run_id: Option<RunId>,
    /// A model for this run only, instead of the agent's.
    pub model: Option<String>,
    /// A typed answer for this run only, instead of the agent's
    /// ([`AgentSpec::output`](troupe_run::AgentSpec::output)).
    pub output: Option<OutputSpec>,
    /// Tools the run's client runs itself, offered to the model beside the agent's: a call
    /// of one waits for the client's result ([`Signal::ToolResult`]). Their names must not
    /// be the agent's tools' ([`troupe_run::validate_client_tools`]); a run given a clash
    /// fails at once.
    pub client_tools: Vec<ToolSpec>,
    /// A state shared with the run's client: the run starts by announcing it
    /// (`StateSnapshot`), and the agent changes it with `state.update`, each change
    /// announced (`StateDelta`).
    pub shared_state: Option<serde_json::Value>,
    /// The recorded run this one was forked from, and the step it starts at.
    pub forked_from: Option<ForkOrigin>,
    /// Images and documents given with the task ([`troupe_core::attachment`]), sent in
    /// its message.
    pub attachments: Vec<troupe_core::ContentBlock>,
}

/// Where a forked run comes from: a recorded run and the model step it was forked at.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ForkOrigin {
    /// The recorded run.
    pub run_id: String,
    /// The model step (1 for the first model call) the fork starts at: it has the
    /// conversation as that step's request had it.
    pub step: u32,
}

impl RunInput {
    /// A run of `instruction`.
    pub fn new(instruction: impl Into<String>) -> Self {
        RunInput { instruction: instruction.into(), ..Default::default() }
    }

    /// Continues `history`.
    pub fn history(mut self, history: Vec<Message>) -> Self {
        self.history = history;
        self
    }

    /// Uses `model` for this run.
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// Sends an image or a document with the task (made by [`troupe_core::attachment`]).
    pub fn attach(mut self, attachment: troupe_core::ContentBlock) -> Self {
        self.attachments.push(attachment);
        self
    }

    /// Asks this run for a typed answer of this shape.
    pub fn output(mut self, output: OutputSpec) -> Self {
        self.output = Some(output);
        self
    }

    /// Offers the model `tools`, which the run's client runs itself.
    pub fn client_tools(mut self, tools: Vec<ToolSpec>) -> Self {
        self.client_tools = tools;
        self
    }

    /// Shares `state` with the run's client.
    pub fn shared_state(mut self, state: serde_json::Value) -> Self {
        self.shared_state = Some(state);
        self
    }

    /// Sets the run's id.
    pub fn run_id(mut self, run_id: RunId) -> Self {
        self.run_id = Some(run_id);
        self
    }

    /// Sets the conversation the run continues.
    pub fn conversation(mut self, conversation_id: ConversationId) -> Self {
        self.conversation_id = Some(conversation_id);
        self
    }

    /// Sets the run that delegated this one.
    pub fn parent(mut self, parent_run_id: RunId) -> Self {
        self.parent_run_id = Some(parent_run_id);
        self
    }
}

impl From<&str> for RunInput {
    fn from(instruction: &str) -> Self {
        RunInput::new(instruction)
    }
}

impl From<String> for RunInput {
    fn from(instruction: String) -> Self {
        RunInput::new(instruction)
    }
}

/// The live events of one run, in order; ends when the run has emitted its last event.
///
/// The run buffers up to [`EVENT_BUFFER`] events and then **waits** until the consumer
/// reads: read the stream as the run goes, or drop it (the run then goes on, and
/// [`RunOutput::events`] still has every event).
#[derive(Debug)]
pub struct RunEvents {
    rx: mpsc::Receiver<AgentEvent>,
}

impl RunEvents {
    pub(crate) fn new(rx: mpsc::Receiver<AgentEvent>) -> Self {
        RunEvents { rx }
    }

    /// The next event; `None` once the run has finished.
    pub async fn next_event(&mut self) -> Option<AgentEvent> {
        self.rx.recv().await
    }
}

impl Stream for RunEvents {
    type Item = AgentEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<AgentEvent>> {
        self.rx.poll_recv(cx)
    }
}

/// Sends [`Signal`]s to a run; cheap to clone.
///
/// A run whose senders are all gone can no longer be asked for approvals: when it needs
/// one, it ends [`Paused`](crate::RunOutcome::Paused) with its state ready to resume.
#[derive(Clone, Debug)]
pub struct SignalSender {
    tx: mpsc::Sender<Signal>,
    cancel: CancellationToken,
    defer: CancellationToken,
    suspend: CancellationToken,
}

impl SignalSender {
    pub(crate) fn new(
        tx: mpsc::Sender<Signal>,
        cancel: CancellationToken,
        defer: CancellationToken,
        suspend: CancellationToken,
    ) -> Self {
        SignalSender { tx, cancel, defer, suspend }
    }

    /// Pauses the run at its next safe boundary, without cancelling anything: the model
    /// response or tool call in flight finishes and is kept, then the run ends
    /// [`Paused`](crate::RunOutcome::Paused) (recorded, with a store) with its state
    /// ready to resume. A run waiting for a decision pauses at once.
    pub fn suspend(&self) {
        self.suspend.cancel();
    }

    /// Stops waiting here for approvals: from now on, a run that needs a decision ends
    /// [`Paused`](crate::RunOutcome::Paused) (with a store, recorded, to be decided later
    /// with `troupe runs approve`) instead of waiting for this sender.
    pub fn defer_approvals(&self) {
        self.defer.cancel();
    }

    /// Sends a signal; it is taken at the run's next safe boundary. A
    /// [`Signal::Cancel`] also trips the run's cancellation token, so the run stops its
    /// model stream and tools at once.
    pub async fn send(&self, signal: Signal) -> Result<(), RuntimeError> {
        let cancels = matches!(signal, Signal::Cancel { .. });
        let sent = self.tx.send(signal).await.map_err(|_| RuntimeError::Disconnected);
        if cancels {
            self.cancel.cancel();
        }
        sent
    }

    /// Sends a signal without waiting; fails when the buffer is full or the run is gone.
    pub fn try_send(&self, signal: Signal) -> Result<(), RuntimeError> {
        let cancels = matches!(signal, Signal::Cancel { .. });
        let sent = self.tx.try_send(signal).map_err(|_| RuntimeError::Disconnected);
        if cancels {
            self.cancel.cancel();
        }
        sent
    }

    /// Sends a decision about `call_id`.
    pub async fn decide(&self, call_id: impl Into<ToolCallId>, decision: ApprovalDecision) -> Result<(), RuntimeError> {
        self.send(Signal::approval(call_id, decision)).await
    }

    /// Approves `call_id`.
    pub async fn approve(&self, call_id: impl Into<ToolCallId>) -> Result<(), RuntimeError> {
        self.decide(call_id, ApprovalDecision::Approve).await
    }

    /// Rejects `call_id`, telling the model why.
    pub async fn reject(&self, call_id: impl Into<ToolCallId>, reason: impl Into<String>) -> Result<(), RuntimeError> {
        self.decide(call_id, ApprovalDecision::Reject { reason: Some(reason.into()) }).await
    }

    /// Sends a user message.
    pub async fn user_message(&self, text: impl Into<String>) -> Result<(), RuntimeError> {
        self.send(Signal::user_message(text)).await
    }

    /// Cancels the run, recording `reason`.
    pub async fn cancel(&self, reason: impl Into<String>) -> Result<(), RuntimeError> {
        self.send(Signal::Cancel { reason: Some(reason.into()) }).await
    }
}

/// The run's result, once it ends: a future of [`RunOutput`].
///
/// Dropping it does not stop the run; cancel it for that.
#[derive(Debug)]
pub struct RunResult {
    join: JoinHandle<RunOutput>,
}

impl RunResult {
    pub(crate) fn new(join: JoinHandle<RunOutput>) -> Self {
        RunResult { join }
    }

    /// A way to halt the run where it stands, kept apart from this result.
    pub fn halter(&self) -> RunHalt {
        RunHalt { abort: self.join.abort_handle() }
    }
}

/// Halts a run where it stands, as a crash of its process would: its task is dropped at
/// once (its model stream, its tools, its lease's heartbeat), nothing more is recorded,
/// and its result is [`RuntimeError::Halted`]. A recorded run is left as its last
/// checkpoint says, to be resumed (`troupe_durable::ResumeRun`, or
/// [`Runner::resume_leased`](crate::Runner::resume_leased)) — which is what a team does
/// with its members' runs when it pauses for a person. To stop a run for good, cancel it
/// instead.
#[derive(Clone, Debug)]
pub struct RunHalt {
    abort: tokio::task::AbortHandle,
}

impl RunHalt {
    /// Halts the run (nothing happens when it has ended already).
    pub fn halt(&self) {
        self.abort.abort();
    }
}

impl Future for RunResult {
    type Output = Result<RunOutput, RuntimeError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.join).poll(cx).map(|joined| {
            joined.map_err(|e| match e.is_cancelled() {
                true => RuntimeError::Halted,
                false => RuntimeError::TaskFailed(e.to_string()),
            })
        })
    }
}

/// A started run: its live events, a way to signal it, its cancellation, its result.
///
/// The run is a spawned task and goes on whether or not the handle is kept. Read
/// [`events`](RunHandle::events) as the run goes or drop them: a run whose event buffer is
/// full waits for its reader.
#[derive(Debug)]
pub struct RunHandle {
    /// The run's id.
    pub run_id: RunId,
    /// The live events.
    pub events: RunEvents,
    /// Sends signals to the run.
    pub signals: SignalSender,
    /// Cancels the run: it stops its model stream and tools and ends
    /// [`Cancelled`](crate::RunOutcome::Cancelled).
    pub cancel: CancellationToken,
    /// The run's output, once it ends.
    pub result: RunResult,
}

impl RunHandle {
    /// Waits for the output, dropping the live events (they are still in
    /// [`RunOutput::events`]) and the signal sender (so a needed approval pauses the run).
    pub async fn output(self) -> Result<RunOutput, RuntimeError> {
        let RunHandle { events, signals, result, .. } = self;
        drop(events);
        drop(signals);
        result.await
    }
}
