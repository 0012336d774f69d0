//! One run's task: the loop that asks [`RunState`] what to do and does it.
//!
//! Everything here is I/O: streaming the model and projecting it live, running tools
//! under the run's cancellation, waiting for decisions, announcing results. The decisions
//! themselves are the state's.

pub(crate) mod model_call;
pub(crate) mod reconfigure;
mod tool_calls;

use crate::compaction::Compactor;
use crate::cost::CostTracker;
use crate::durable::recorder::{EndRecord, Recorder, RecorderSetup};
use crate::error::RuntimeError;
use crate::genai;
use crate::live::{Emitter, until};
use crate::metrics::Metrics;
use crate::middleware::MiddlewareStack;
use crate::outcome::RunOutput;
use crate::plugin::PluginContext;
use crate::plugins::PluginSet;
use crate::resolver::ModelResolver;
use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Span;
use troupe_core::FailureCode;
use troupe_core::{AgentEventKind, ContentBlock, Role, ToolCallId};
use troupe_model::ResolvedModel;
use troupe_run::AgentSpec;
use troupe_run::ApprovalDecision;
use troupe_run::RunOutcome;
use troupe_run::RunState;
use troupe_run::Signal;
use troupe_run::machine::{Context, Effect, Input};
use troupe_store::{EvidenceKind, NewEvidence, StoreError};
use troupe_tools::{AuditEntry, AuditKind, AuditLog, Authorizer, ToolCall, ToolCatalog, Workspace};

/// One run's task.
pub(crate) struct Run {
    pub(crate) spec: Arc<AgentSpec>,
    pub(crate) catalog: Result<Arc<ToolCatalog>, RuntimeError>,
    /// The agent's tools (none when its catalog could not be made: the run fails first).
    pub(crate) tools: Arc<ToolCatalog>,
    pub(crate) resolver: Arc<dyn ModelResolver>,
    pub(crate) workspace: Arc<Workspace>,
    pub(crate) compactor: Option<Arc<dyn Compactor>>,
    pub(crate) authorizer: Option<Arc<dyn Authorizer>>,
    pub(crate) audit: Arc<dyn AuditLog>,
    pub(crate) tool_concurrency: usize,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) emitter: Emitter,
    pub(crate) signals: mpsc::Receiver<Signal>,
    /// Signals received while waiting for approval, for the next boundary.
    pub(crate) queued: VecDeque<Signal>,
    pub(crate) cancel: CancellationToken,
    pub(crate) deadline: Option<Instant>,
    pub(crate) costs: CostTracker,
    /// Messages before this index have had their tool results announced.
    pub(crate) announced: usize,
    /// Calls whose approval request was announced.
    pub(crate) paused: HashSet<ToolCallId>,
    pub(crate) step: u32,
    pub(crate) open_step: Option<u32>,
    /// What the run records, and where: set up when the task starts.
    pub(crate) recorder: Recorder,
    /// Tripped when nobody will answer approvals live: the run pauses instead of waiting.
    pub(crate) defer: CancellationToken,
    /// Tripped to pause the run at its next safe boundary ([`SignalSender::suspend`]).
    pub(crate) suspend: CancellationToken,
    /// Hooks around every model call and tool call.
    pub(crate) middleware: MiddlewareStack,
    /// Plugins to initialize before the run goes on.
    pub(crate) plugins: PluginSet,
    /// Whether spans record prompts, responses, arguments and results.
    pub(crate) capture_content: bool,
    /// The run's `invoke_agent` span.
    pub(crate) span: Span,
    /// The agent's live spec, for runs of an [`Agent`](crate::Agent).
    pub(crate) live: Option<reconfigure::LiveFeed>,
    /// When this process started (or resumed) the run: its time limit counts from here.
    pub(crate) launched: Instant,
    /// The digests of the run's requests, for its recorded model turns.
    pub(crate) digester: crate::durable::RequestDigester,
    /// Where the provider announces its retries while a model call's stream opens: one
    /// channel for all of the run's calls, made at its first (each channel's first block
    /// of events is a few KB to allocate and free).
    pub(crate) retry_watch: Option<RetryWatch>,
}

/// The two ends of [`Run::retry_watch`].
pub(crate) type RetryWatch = (
    tokio::sync::mpsc::UnboundedSender<troupe_core::StreamEvent>,
    tokio::sync::mpsc::UnboundedReceiver<troupe_core::StreamEvent>,
);

impl Run {
    pub(crate) async fn run(
        mut self,
        mut state: RunState,
        instruction: String,
        fresh: bool,
        recorder: RecorderSetup,
    ) -> RunOutput {
        let started = std::time::Instant::now();
        let agent_metrics = self.metrics.agent(&self.spec.name);
        agent_metrics.run_started();
        let resolved = self.resolver.resolve(state.model());
        if let Ok(model) = &resolved {
            self.learn(&mut state, Input::ModelResolved { id: model.id.clone(), name: model.model.clone() });
        }
        if fresh {
            self.emitter
                .emit(AgentEventKind::RunStarted { instruction: instruction.clone(), model: state.model().to_owned() })
                .await;
            // The state shared with the client, as the run starts with it.
            if let Some(shared) = state.shared_state() {
                self.emitter.emit(AgentEventKind::StateSnapshot { state: shared.clone() }).await;
            }
        }
        // A run halted mid-way drops this future: the guard stops the heartbeat with it.
        let _heartbeat = self.open_recorder(&mut state, recorder, &instruction, fresh).await.map(AbortOnDrop);
        let clash = self.catalog.as_ref().ok().and_then(|catalog| {
            let names: Vec<String> = catalog.specs().into_iter().map(|t| t.name).collect();
            troupe_run::validate_client_tools(state.client_tools(), names.iter().map(String::as_str)).err()
        });
        let model = match (&self.catalog, resolved) {
            (Err(error), _) => {
                let error = error.to_string();
                self.learn(&mut state, Input::Failed { error, code: FailureCode::UnknownTool });
                None
            }
            (Ok(_), _) if clash.is_some() => {
                let error = clash.unwrap_or_default();
                self.learn(&mut state, Input::Failed { error, code: FailureCode::Config });
                None
            }
            (_, Err(error)) => {
                self.learn(&mut state, Input::Failed { error: error.to_string(), code: error.code().into() });
                None
            }
            (Ok(_), Ok(model)) => Some(model),
        };
        let model = match model {
            Some(found) if !state.is_finished() => self.initialize_plugins(&mut state).await.then_some(found),
            _ => None,
        };
        if let Some(mut model) = model {
            self.drive(&mut state, &mut model).await;
            // A signal acknowledged while the run completed reopens it: it is answered,
            // never lost.
            while !self.record_end(&mut state).await {
                self.learn(&mut state, Input::EndDeferred);
                self.drive(&mut state, &mut model).await;
            }
        }
        let output = self.end(state, started).await;
        agent_metrics.run_finished(&output);
        output
    }

    /// Initializes the runner's plugins (once, whichever run gets there first); a failure
    /// ends this run. Returns whether the run goes on.
    async fn initialize_plugins(&mut self, state: &mut RunState) -> bool {
        if self.plugins.is_empty() {
            return true;
        }
        let ctx = PluginContext::new(Arc::clone(&self.workspace), Arc::clone(&self.metrics));
        let initialized = tokio::select! {
            biased;
            () = self.cancel.cancelled() => return true,
            initialized = self.plugins.initialize(&ctx) => initialized,
        };
        match initialized {
            Ok(()) => true,
            Err(error) => {
                tracing::warn!(run = %state.run_id(), %error, "a plugin could not be initialized; the run stops");
                self.learn(state, Input::Failed { error: error.to_string(), code: FailureCode::Plugin });
                false
            }
        }
    }

    /// Sets up the run's recorder (see [`Recorder::open`]). A store that fails here ends
    /// the run before any model call. A resumed run's plan is on record before any step;
    /// a created run's first state is already stored, and its start goes with its first
    /// boundary.
    async fn open_recorder(
        &mut self,
        state: &mut RunState,
        setup: RecorderSetup,
        instruction: &str,
        fresh: bool,
    ) -> Option<tokio::task::JoinHandle<()>> {
        let resumed = matches!(setup, RecorderSetup::Ready(..));
        match Recorder::open(setup, state, instruction, fresh, &self.cancel).await {
            Ok((recorder, heartbeat)) => {
                self.recorder = recorder;
                if resumed {
                    self.checkpoint(state, Vec::new()).await;
                }
                heartbeat
            }
            Err(error) => {
                self.store_failed(state, error);
                None
            }
        }
    }

    /// Saves `state` with `entries` (and whatever the recorder holds); a failure ends the
    /// run, which stays resumable from its last checkpoint.
    async fn checkpoint(&mut self, state: &mut RunState, entries: Vec<NewEvidence>) {
        let seq = self.emitter.next_seq();
        if let Err(error) = self.recorder.checkpoint(state, entries, seq).await {
            self.store_failed(state, error);
        }
    }

    /// Saves `state` with the model turn the recorder holds, before the run acts on it.
    async fn checkpoint_turn(&mut self, state: &mut RunState) {
        let seq = self.emitter.next_seq();
        if let Err(error) = self.recorder.checkpoint_turn(state, seq).await {
            self.store_failed(state, error);
        }
    }

    /// Ends the run because its store failed or its lease was taken over.
    fn store_failed(&mut self, state: &mut RunState, error: StoreError) {
        tracing::warn!(run = %state.run_id(), %error, "the run's store failed; the run stops");
        let lease_lost = matches!(error, StoreError::LeaseLost { .. });
        self.learn(state, Input::StoreFailed { lease_lost, error: error.to_string() });
        self.recorder.fail(error);
    }

    /// Learns `input` where it can ask for nothing to be done (a failure, a resolution, a
    /// usage): the state decides, and the next step comes at the next boundary.
    pub(crate) fn learn(&self, state: &mut RunState, input: Input) {
        let effects = state.handle(input, &self.context());
        debug_assert!(effects.is_empty(), "an input outside the loop asked for {effects:?}");
    }

    /// What the state reads besides itself.
    pub(crate) fn context(&self) -> Context<'_> {
        Context {
            spec: &self.spec,
            tools: &self.tools,
            recording: self.recorder.is_on(),
            authorizing: self.authorizer.is_some(),
        }
    }

    /// The loop: at each boundary, deliver what came and ask the state what to do; perform
    /// its effects, feeding back each one's answer, until it says the run is over.
    async fn drive(&mut self, state: &mut RunState, model: &mut ResolvedModel) {
        loop {
            self.boundary(state, model).await;
            let mut effects = state.handle(Input::Continue, &self.context());
            self.announce_results(state).await;
            loop {
                let mut answer = None;
                for effect in effects {
                    let acts = matches!(
                        effect,
                        Effect::CallModel(_) | Effect::RunTools(_) | Effect::AskApproval(_) | Effect::SaveTurn
                    );
                    match effect {
                        Effect::Finish(_) => return,
                        // A save that failed ended the run: nothing more is done.
                        _ if acts && state.is_finished() => break,
                        effect => {
                            if let Some(input) = self.perform(state, model, effect).await {
                                answer = Some(input);
                                break;
                            }
                        }
                    }
                }
                let Some(input) = answer else { break };
                effects = state.handle(input, &self.context());
            }
        }
    }

    /// Performs one effect; returns its answer, for those that have one.
    async fn perform(&mut self, state: &mut RunState, model: &mut ResolvedModel, effect: Effect) -> Option<Input> {
        match effect {
            Effect::CallModel(request) => self.call_model(state, model, request).await,
            Effect::Authorize(calls) => {
                self.authorize_calls(state, &calls);
                None
            }
            Effect::RunTools(batch) => self.run_tools(state, batch).await,
            Effect::AskApproval(requests) => self.ask_approval(state, requests).await,
            Effect::AuditDenial { call_id, tool, arguments, reason } => {
                self.audit.record(
                    AuditEntry::new(AuditKind::Denial, &self.spec.name, false, reason)
                        .with_run_id(state.run_id().as_str())
                        .with_tool(&tool)
                        .with_call_id(call_id.as_str())
                        .with_arguments(&arguments)
                        .with_sandbox(self.sandbox_of(&tool)),
                );
                None
            }
            Effect::AuditDecision { call_id, call, decision } => {
                self.audit_decision(state, &call_id, call, &decision);
                None
            }
            Effect::RefuseSignal { kind, reason } => {
                self.refuse_signal(state, kind, &reason).await;
                None
            }
            Effect::SaveTurn => {
                // The last model turn is on record before the run acts on it; a signal
                // that came meanwhile (the save says so) is taken first.
                self.checkpoint_turn(state).await;
                Some(Input::TurnSaved { signal_waiting: self.recorder.signal_waits(state.signal_cursor()) })
            }
            Effect::Checkpoint(entries) => {
                self.checkpoint(state, entries).await;
                None
            }
            Effect::Finish(_) => None,
        }
    }

    /// Asks a person about `requests`: each is announced once (and recorded as waiting),
    /// then the run waits for a decision.
    async fn ask_approval(
        &mut self,
        state: &mut RunState,
        requests: Vec<troupe_run::ApprovalRequest>,
    ) -> Option<Input> {
        let mut waits = Vec::new();
        for mut request in requests {
            if self.paused.insert(request.call_id.clone()) {
                // A person deciding on a command sees how it will be confined (an
                // interrupted call keeps the reason that says so, which callers read).
                let uncertain = state.pending_calls().iter().any(|c| c.call_id == request.call_id && c.uncertain);
                if let Some(mode) = self.sandbox_of(&request.tool).filter(|_| !uncertain) {
                    request.reason = format!("{} (sandbox: {mode})", request.reason);
                }
                let payload = serde_json::json!({"tool": request.tool, "reason": request.reason});
                waits.push(NewEvidence::new(EvidenceKind::ApprovalWait, payload).for_call(request.call_id.as_str()));
                let reason = request.into_pause_reason(uncertain);
                self.emitter.emit(AgentEventKind::RunPaused { reason }).await;
            }
        }
        if !waits.is_empty() {
            self.checkpoint(state, waits).await;
        }
        if state.is_finished() {
            return None;
        }
        self.await_decision(state).await
    }

    /// The safe boundary: takes every waiting signal and the agent's latest configuration,
    /// then cancellation and the deadline (a changed time limit counts at once).
    async fn boundary(&mut self, state: &mut RunState, model: &mut ResolvedModel) {
        while let Ok(signal) = self.signals.try_recv() {
            self.queued.push_back(signal);
        }
        if self.recorder.is_on() {
            self.deliver_stored(state).await;
        }
        while let Some(signal) = self.queued.pop_front() {
            // Refused live signals are reported as events (`signal_refused`); none is stored.
            let _ = self.deliver(state, signal, None).await;
        }
        self.take_revision(state, model).await;
        if self.cancel.is_cancelled() {
            self.learn(state, Input::Cancelled { reason: None });
        } else if self.deadline.is_some_and(|d| Instant::now() >= d) {
            self.learn(state, Input::DeadlinePassed);
        } else if self.suspend.is_cancelled() {
            self.learn(state, Input::Suspended);
        }
    }

    /// The sandbox mode `tool` runs its commands in, when it runs commands: what a person
    /// approving it is told and what the audit log records.
    fn sandbox_of(&self, tool: &str) -> Option<String> {
        let catalog = self.catalog.as_ref().ok()?;
        let runs_commands = catalog.get(tool)?.declaration().access.contains(&troupe_tools::Access::Shell);
        runs_commands.then(|| self.workspace.sandbox().mode().to_string())
    }

    /// Checks the calls the model just requested against the agent's capabilities, before
    /// any approval is asked; every decision goes to the audit log.
    fn authorize_calls(&self, state: &mut RunState, calls: &[ToolCall]) {
        let Some(authorizer) = &self.authorizer else { return };
        for call in calls {
            let Some(tool) = self.tools.get(&call.name) else { continue };
            let decision = authorizer.authorize_in(&self.spec.name, tool.declaration(), &call.args, &self.workspace);
            self.audit.record(
                AuditEntry::new(AuditKind::CapabilityCheck, &self.spec.name, decision.is_allowed(), decision.reason())
                    .with_run_id(state.run_id().as_str())
                    .with_tool(&call.name)
                    .with_call_id(call.id.as_str())
                    .with_arguments(&call.args)
                    .with_sandbox(self.sandbox_of(&call.name)),
            );
            if !decision.is_allowed() {
                let reason = decision.reason().to_owned();
                self.learn(state, Input::CapabilityDenied { call_id: call.id.clone(), reason });
            }
        }
    }

    /// Records a person's approval decision.
    fn audit_decision(
        &self,
        state: &RunState,
        call_id: &ToolCallId,
        call: Option<(String, serde_json::Value)>,
        decision: &ApprovalDecision,
    ) {
        let allowed = !matches!(decision, ApprovalDecision::Reject { .. } | ApprovalDecision::Cancel);
        let reason = serde_json::to_value(decision).map(|v| v.to_string()).unwrap_or_default();
        let mut entry = AuditEntry::new(AuditKind::Approval, &self.spec.name, allowed, reason)
            .with_run_id(state.run_id().as_str())
            .with_call_id(call_id.as_str());
        if let Some((tool, arguments)) = call {
            entry = entry.with_tool(&tool).with_arguments(&arguments).with_sandbox(self.sandbox_of(&tool));
        }
        self.audit.record(entry);
    }

    /// With a store, every signal goes through it: those that came on the handle are
    /// stored first (acknowledged), then all the run's stored signals after its cursor are
    /// applied in append order. A crash before the next checkpoint applies them again to
    /// the checkpointed state, never twice to the same state.
    async fn deliver_stored(&mut self, state: &mut RunState) {
        let (run_id, cursor) = (state.run_id().clone(), state.signal_cursor());
        let pending = match self.recorder.stored_signals(run_id.as_str(), &mut self.queued, cursor).await {
            Ok(pending) => pending,
            Err(error) => {
                self.store_failed(state, error);
                return;
            }
        };
        for stored in pending {
            let refused = match serde_json::from_value::<Signal>(stored.payload.clone()) {
                Ok(signal) => self.deliver(state, signal, Some(stored.seq)).await.err(),
                Err(error) => {
                    self.learn(state, Input::SignalUnreadable { seq: stored.seq });
                    tracing::warn!(run = %run_id, seq = stored.seq, %error, "a stored signal cannot be read; skipped");
                    Some(format!("it cannot be read: {error}"))
                }
            };
            // A refused signal (a second decision about a call already decided, say) is
            // recorded as refused, with why.
            self.recorder.note_signal(&stored, refused.as_deref());
        }
    }

    /// Delivers a signal (`seq`: its number in the store); a signal the run cannot take is
    /// reported, and why is returned.
    async fn deliver(&mut self, state: &mut RunState, signal: Signal, seq: Option<i64>) -> Result<(), String> {
        let mut refused = Ok(());
        for effect in state.handle(Input::Signal { signal, seq }, &self.context()) {
            if let Effect::RefuseSignal { reason, .. } = &effect {
                refused = Err(reason.clone());
            }
            self.perform_record(state, effect).await;
        }
        refused
    }

    /// Performs an effect that only records or reports.
    async fn perform_record(&mut self, state: &mut RunState, effect: Effect) {
        match effect {
            Effect::AuditDecision { call_id, call, decision } => self.audit_decision(state, &call_id, call, &decision),
            Effect::RefuseSignal { kind, reason } => self.refuse_signal(state, kind, &reason).await,
            other => debug_assert!(false, "a signal asked for {other:?}"),
        }
    }

    /// Reports a refused signal as a `signal_refused` event.
    async fn refuse_signal(&mut self, state: &RunState, kind: troupe_run::SignalKind, reason: &str) {
        tracing::warn!(run = %state.run_id(), %kind, error = reason, "signal refused");
        let value = serde_json::json!({"kind": kind, "error": reason});
        self.emitter.emit(AgentEventKind::Custom { name: "signal_refused".into(), value }).await;
    }

    /// Emits a result event for every tool result added to the conversation since the
    /// last call, in order: executed, refused and abandoned calls alike. A change of the
    /// shared state (a successful `state.update`) is announced just before its result,
    /// with its patch.
    async fn announce_results(&mut self, state: &RunState) {
        let start = self.announced.min(state.messages().len());
        let mut events = Vec::new();
        for message in state.messages()[start..].iter().filter(|m| m.role == Role::User) {
            for block in &message.content {
                if let ContentBlock::ToolResult { tool_use_id, content, is_error } = block {
                    let own_tool = self.tools.get(troupe_run::STATE_UPDATE_TOOL).is_some();
                    if let Some(patch) = state_patch(state, tool_use_id).filter(|_| !is_error && !own_tool) {
                        events.push(AgentEventKind::StateDelta { patch });
                    }
                    events.push(AgentEventKind::ToolCallResult {
                        call_id: tool_use_id.clone(),
                        content: content.clone(),
                        is_error: *is_error,
                    });
                }
            }
        }
        self.announced = state.messages().len();
        self.emitter.emit_all(events).await;
    }

    async fn close_step(&mut self) {
        if let Some(step) = self.open_step.take() {
            self.emitter.emit(AgentEventKind::StepFinished { step }).await;
        }
    }

    /// Waits for an approval decision or cancellation; other signals wait for the next
    /// boundary. With nobody left to decide, the run pauses.
    async fn await_decision(&mut self, state: &RunState) -> Option<Input> {
        let poll = self.recorder.start_waiting();
        loop {
            let signal = tokio::select! {
                biased;
                () = self.cancel.cancelled() => return None,
                () = until(self.deadline) => return Some(Input::DeadlinePassed),
                () = self.defer.cancelled() => None,
                () = self.suspend.cancelled() => None,
                signal = self.signals.recv() => signal,
                // The agent's configuration changed: the boundary takes it, then the wait goes on.
                () = reconfigure::next_revision(&mut self.live) => return None,
                // A decision stored by another process (`troupe runs approve`) counts too.
                () = tokio::time::sleep(poll.unwrap_or_default()), if poll.is_some() => {
                    if self.recorder.has_stored_signals(state.run_id().as_str(), state.signal_cursor()).await {
                        return None;
                    }
                    continue;
                }
            };
            match signal {
                None => return Some(Input::NobodyToApprove),
                Some(signal @ (Signal::Approval { .. } | Signal::ToolResult { .. } | Signal::Cancel { .. })) => {
                    // Signals that came before this one are taken first, in order.
                    self.queued.push_back(signal);
                    return None;
                }
                Some(other) => self.queued.push_back(other),
            }
        }
    }

    /// Records the run's end once (see [`Recorder::record_end`]). `false` when the run may
    /// not end yet: it completed while a signal it has not applied was acknowledged.
    async fn record_end(&mut self, state: &mut RunState) -> bool {
        if !self.recorder.end_pending() {
            return true;
        }
        let outcome = self.outcome(state);
        let seq = self.emitter.next_seq();
        match self.recorder.record_end(state, &outcome, seq).await {
            EndRecord::Recorded => true,
            EndRecord::SignalsPending => false,
            EndRecord::Failed(error) => {
                self.store_failed(state, error);
                true
            }
        }
    }

    /// The run's outcome; a run that stopped without one failed.
    fn outcome(&self, state: &mut RunState) -> RunOutcome {
        if state.outcome().is_none() {
            let error = "the run stopped without an outcome".to_owned();
            self.learn(state, Input::Failed { error, code: FailureCode::Internal });
        }
        state.outcome().cloned().unwrap_or_else(|| RunOutcome::failed("the run has no outcome", FailureCode::Internal))
    }

    async fn end(mut self, mut state: RunState, started: std::time::Instant) -> RunOutput {
        if self.recorder.is_stopped() && !self.recorder.has_failed() {
            // The heartbeat found the lease taken over: whatever the run did since is not
            // on record, and the new holder goes on from the last checkpoint.
            tracing::warn!(run = %state.run_id(), "the run's lease was taken over; the run stops");
            self.learn(&mut state, Input::LeaseTakenOver);
            let run_id = state.run_id().to_string();
            self.recorder.fail(StoreError::LeaseLost { run_id, owner: String::new() });
        }
        let outcome = self.outcome(&mut state);
        self.record_end(&mut state).await;
        // A store failure while recording the end shows in the outcome.
        let outcome = state.outcome().cloned().unwrap_or(outcome);
        genai::record_run_end(&self.span, &outcome, &state.usage());
        self.announce_results(&state).await;
        self.close_step().await;
        let kind = match &outcome {
            RunOutcome::Failed { error, code } => {
                AgentEventKind::RunError { message: error.clone(), code: code.as_ref().map(|c| c.as_str().to_owned()) }
            }
            _ => AgentEventKind::RunFinished {
                outcome: outcome.kind(),
                output: outcome.text().map(str::to_owned),
                usage: state.usage(),
                cost_usd: state.cost_usd(),
            },
        };
        self.emitter.emit(kind).await;
        state.set_event_seq(self.emitter.next_seq());
        let cost_by_model = self.costs.by_model().clone();
        RunOutput::ended(state, outcome, cost_by_model, started.elapsed(), self.emitter.take_events())
    }
}

/// The patch of the `state.update` call `call_id`, when it is one (the run shares a state).
fn state_patch(state: &RunState, call_id: &ToolCallId) -> Option<serde_json::Value> {
    state.shared_state()?;
    state.messages().iter().rev().filter(|m| m.role == Role::Assistant).find_map(|m| {
        m.tool_uses()
            .find(|(id, name, _)| *id == call_id && *name == troupe_run::STATE_UPDATE_TOOL)
            .map(|(_, _, arguments)| arguments.get("patch").cloned().unwrap_or_default())
    })
}

/// Aborts a spawned task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
