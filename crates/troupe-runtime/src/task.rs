//! One run's task: the loop that asks [`RunState`] what to do and does it.
//!
//! Everything here is I/O: streaming the model and projecting it live, running tools
//! under the run's cancellation, waiting for decisions, announcing results. The decisions
//! themselves are the state's.

pub(crate) mod model_call;
pub(crate) mod reconfigure;
mod tool_calls;

use crate::approval::{ApprovalDecision, Verdict};
use crate::compaction::Compactor;
use crate::cost::CostTracker;
use crate::durable::recorder::{EndRecord, Recorder, RecorderSetup};
use crate::error::RuntimeError;
use crate::genai;
use crate::live::{Emitter, until};
use crate::metrics::Metrics;
use crate::middleware::MiddlewareStack;
use crate::outcome::{RunOutcome, RunOutput};
use crate::plugin::PluginContext;
use crate::plugins::PluginSet;
use crate::resolver::ModelResolver;
use crate::signal::Signal;
use crate::spec::AgentSpec;
use crate::state::{Action, PendingCall, RunState};
use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Span;
use troupe_core::Budget;
use troupe_core::FailureCode;
use troupe_core::{AgentEventKind, ContentBlock, PauseReason, Role, ToolCallId};
use troupe_model::ResolvedModel;
use troupe_store::{EvidenceKind, NewEvidence, StoreError};
use troupe_tools::{AuditEntry, AuditKind, AuditLog, Authorizer, ToolCatalog, Workspace};

/// One run's task.
pub(crate) struct Run {
    pub(crate) spec: Arc<AgentSpec>,
    pub(crate) catalog: Result<Arc<ToolCatalog>, RuntimeError>,
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
}

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
        let resolved = self.resolver.resolve(&state.model);
        if let Ok(model) = &resolved {
            state.model.clone_from(&model.id);
            state.model_name.clone_from(&model.model);
        }
        if fresh {
            self.emitter
                .emit(AgentEventKind::RunStarted { instruction: instruction.clone(), model: state.model.clone() })
                .await;
        }
        // A run halted mid-way drops this future: the guard stops the heartbeat with it.
        let _heartbeat = self.open_recorder(&mut state, recorder, &instruction, fresh).await.map(AbortOnDrop);
        let catalog = match (&self.catalog, resolved) {
            (Err(error), _) => {
                state.finish(RunOutcome::failed(error.to_string(), FailureCode::UnknownTool));
                None
            }
            (_, Err(error)) => {
                state.finish(RunOutcome::failed(error.to_string(), error.code()));
                None
            }
            (Ok(catalog), Ok(model)) => Some((Arc::clone(catalog), model)),
        };
        let catalog = match catalog {
            Some(found) if !state.is_finished() => self.initialize_plugins(&mut state).await.then_some(found),
            _ => None,
        };
        if let Some((catalog, mut model)) = catalog {
            self.drive(&mut state, &catalog, &mut model).await;
            // A signal acknowledged while the run completed reopens it: it is answered,
            // never lost.
            while !self.record_end(&mut state).await {
                state.reopen_completed();
                self.drive(&mut state, &catalog, &mut model).await;
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
                tracing::warn!(run = %state.run_id, %error, "a plugin could not be initialized; the run stops");
                state.finish(RunOutcome::failed(error.to_string(), FailureCode::Plugin));
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
        tracing::warn!(run = %state.run_id, %error, "the run's store failed; the run stops");
        let outcome = match &error {
            StoreError::LeaseLost { .. } => RunOutcome::failed(
                "another worker took this run over (its lease lapsed); this process stopped working on it",
                FailureCode::LeaseLost,
            ),
            other => RunOutcome::failed(
                format!("the run's store failed ({other}); the run can be resumed from its last checkpoint"),
                FailureCode::Store,
            ),
        };
        state.finish(outcome);
        self.recorder.fail(error);
    }

    async fn drive(&mut self, state: &mut RunState, catalog: &ToolCatalog, model: &mut ResolvedModel) {
        loop {
            self.boundary(state, model).await;
            let denied = state.apply_policy(&self.spec, catalog);
            self.audit_denials(state, &denied);
            let action = state.next_action(&self.spec, catalog);
            self.announce_results(state).await;
            if !matches!(action, Action::Finish(_)) && self.recorder.turn_unsaved() {
                // The last model turn is on record before the run acts on it; a signal
                // that came meanwhile (the checkpoint says so) is taken first.
                self.checkpoint_turn(state).await;
                if state.is_finished() || self.recorder.signal_waits(state.signal_cursor) {
                    continue;
                }
            }
            match action {
                Action::Finish(_) => return,
                Action::CallModel(request) => {
                    let turn = self.call_model(state, model, request).await;
                    self.authorize_calls(state, catalog);
                    if let Some(turn) = turn {
                        self.recorder.note_turn(turn.evidence());
                    }
                }
                Action::RunTools(calls) => self.run_tools(state, catalog, calls).await,
                Action::AwaitApproval(requests) => {
                    let mut waits = Vec::new();
                    for mut request in requests {
                        if self.paused.insert(request.call_id.clone()) {
                            // A person deciding on a command sees how it will be confined (an
                            // interrupted call keeps the reason that says so, which callers read).
                            let uncertain =
                                state.pending_calls.iter().any(|c| c.call_id == request.call_id && c.uncertain);
                            if let Some(mode) = self.sandbox_of(&request.tool).filter(|_| !uncertain) {
                                request.reason = format!("{} (sandbox: {mode})", request.reason);
                            }
                            let payload = serde_json::json!({"tool": request.tool, "reason": request.reason});
                            waits.push(
                                NewEvidence::new(EvidenceKind::ApprovalWait, payload)
                                    .for_call(request.call_id.as_str()),
                            );
                            // An interrupted call is announced as what it is, so a
                            // handler can tell "may run" from "may have run already".
                            let reason = if uncertain {
                                PauseReason::UncertainAction {
                                    call_id: request.call_id,
                                    tool: request.tool,
                                    arguments: request.arguments,
                                }
                            } else {
                                PauseReason::Approval {
                                    call_id: request.call_id,
                                    tool: request.tool,
                                    arguments: request.arguments,
                                    reason: request.reason,
                                }
                            };
                            self.emitter.emit(AgentEventKind::RunPaused { reason }).await;
                        }
                    }
                    if !waits.is_empty() {
                        self.checkpoint(state, waits).await;
                    }
                    if !state.is_finished() {
                        self.await_decision(state).await;
                    }
                }
            }
        }
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
            let _ = self.deliver(state, signal).await;
        }
        self.take_revision(state, model).await;
        if self.cancel.is_cancelled() {
            state.request_cancel(None);
        } else if self.deadline.is_some_and(|d| Instant::now() >= d) {
            state.finish(RunOutcome::BudgetExceeded { budget: Budget::Time });
        } else if self.suspend.is_cancelled() && !state.is_finished() {
            let pending = state.awaiting_approval();
            state.finish(RunOutcome::Paused { pending });
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
    fn authorize_calls(&self, state: &mut RunState, catalog: &ToolCatalog) {
        let Some(authorizer) = &self.authorizer else { return };
        let mut denied = Vec::new();
        for call in state.pending_calls.iter().filter(|c| c.result.is_none() && c.verdict.is_none()) {
            // Unknown tools are not decisions: the catalog answers them with the known names.
            let Some(tool) = catalog.get(&call.tool) else { continue };
            let decision =
                authorizer.authorize_in(&self.spec.name, tool.declaration(), &call.arguments, &self.workspace);
            self.audit.record(
                AuditEntry::new(AuditKind::CapabilityCheck, &self.spec.name, decision.is_allowed(), decision.reason())
                    .with_run_id(state.run_id.as_str())
                    .with_tool(&call.tool)
                    .with_call_id(call.call_id.as_str())
                    .with_arguments(&call.arguments)
                    .with_sandbox(self.sandbox_of(&call.tool)),
            );
            if !decision.is_allowed() {
                denied.push((call.call_id.clone(), decision.reason().to_owned()));
            }
        }
        for (call_id, reason) in denied {
            state.deny_call(&call_id, &reason);
        }
    }

    /// Records the calls the approval policy refused.
    fn audit_denials(&self, state: &RunState, denied: &[PendingCall]) {
        for call in denied {
            let reason = match &call.verdict {
                Some(Verdict::Deny { reason }) => reason.as_str(),
                _ => "denied by the approval policy",
            };
            self.audit.record(
                AuditEntry::new(AuditKind::Denial, &self.spec.name, false, reason)
                    .with_run_id(state.run_id.as_str())
                    .with_tool(&call.tool)
                    .with_call_id(call.call_id.as_str())
                    .with_arguments(&call.arguments)
                    .with_sandbox(self.sandbox_of(&call.tool)),
            );
        }
    }

    /// Records a person's approval decision.
    fn audit_decision(&self, state: &RunState, signal: &Signal) {
        let Signal::Approval { call_id, decision } = signal else { return };
        let call = state.pending_calls.iter().find(|c| &c.call_id == call_id);
        let allowed = !matches!(decision, ApprovalDecision::Reject { .. } | ApprovalDecision::Cancel);
        let reason = serde_json::to_value(decision).map(|v| v.to_string()).unwrap_or_default();
        let mut entry = AuditEntry::new(AuditKind::Approval, &self.spec.name, allowed, reason)
            .with_run_id(state.run_id.as_str())
            .with_call_id(call_id.as_str());
        if let Some(call) = call {
            entry =
                entry.with_tool(&call.tool).with_arguments(&call.arguments).with_sandbox(self.sandbox_of(&call.tool));
        }
        self.audit.record(entry);
    }

    /// With a store, every signal goes through it: those that came on the handle are
    /// stored first (acknowledged), then all the run's stored signals after its cursor are
    /// applied in append order. A crash before the next checkpoint applies them again to
    /// the checkpointed state, never twice to the same state.
    async fn deliver_stored(&mut self, state: &mut RunState) {
        let run_id = state.run_id.to_string();
        let pending = match self.recorder.stored_signals(&run_id, &mut self.queued, state.signal_cursor).await {
            Ok(pending) => pending,
            Err(error) => {
                self.store_failed(state, error);
                return;
            }
        };
        for stored in pending {
            state.signal_cursor = state.signal_cursor.max(stored.seq);
            let refused = match serde_json::from_value::<Signal>(stored.payload.clone()) {
                Ok(signal) => self.deliver(state, signal).await.err(),
                Err(error) => {
                    tracing::warn!(run = %run_id, seq = stored.seq, %error, "a stored signal cannot be read; skipped");
                    Some(format!("it cannot be read: {error}"))
                }
            };
            // A refused signal (a second decision about a call already decided, say) is
            // recorded as refused, with why.
            self.recorder.note_signal(&stored, refused.as_deref());
        }
    }

    /// Runs the signal's hooks and applies it; a signal the run cannot take is reported,
    /// and why is returned.
    async fn deliver(&mut self, state: &mut RunState, signal: Signal) -> Result<(), String> {
        let kind = signal.kind();
        let refused = if !self.spec.accepts(kind) {
            Some(RuntimeError::SignalNotAccepted { kind })
        } else {
            let extra = self.spec.signal_hooks.run(&signal, state);
            self.audit_decision(state, &signal);
            match state.apply_signal(signal) {
                Ok(()) => {
                    state.inject(extra);
                    None
                }
                Err(error) => Some(error),
            }
        };
        if let Some(error) = refused {
            tracing::warn!(run = %state.run_id, %kind, %error, "signal refused");
            let value = serde_json::json!({"kind": kind, "error": error.to_string()});
            self.emitter.emit(AgentEventKind::Custom { name: "signal_refused".into(), value }).await;
            return Err(error.to_string());
        }
        Ok(())
    }

    /// Emits a result event for every tool result added to the conversation since the
    /// last call, in order: executed, refused and abandoned calls alike.
    async fn announce_results(&mut self, state: &RunState) {
        let start = self.announced.min(state.messages.len());
        let mut events = Vec::new();
        for message in state.messages[start..].iter().filter(|m| m.role == Role::User) {
            for block in &message.content {
                if let ContentBlock::ToolResult { tool_use_id, content, is_error } = block {
                    events.push(AgentEventKind::ToolCallResult {
                        call_id: tool_use_id.clone(),
                        content: content.clone(),
                        is_error: *is_error,
                    });
                }
            }
        }
        self.announced = state.messages.len();
        self.emitter.emit_all(events).await;
    }

    async fn close_step(&mut self) {
        if let Some(step) = self.open_step.take() {
            self.emitter.emit(AgentEventKind::StepFinished { step }).await;
        }
    }

    /// Waits for an approval decision or cancellation; other signals wait for the next
    /// boundary. With nobody left to decide, the run pauses.
    async fn await_decision(&mut self, state: &mut RunState) {
        let poll = self.recorder.start_waiting();
        loop {
            let signal = tokio::select! {
                biased;
                () = self.cancel.cancelled() => return,
                () = until(self.deadline) => {
                    state.finish(RunOutcome::BudgetExceeded { budget: Budget::Time });
                    return;
                }
                () = self.defer.cancelled() => None,
                () = self.suspend.cancelled() => None,
                signal = self.signals.recv() => signal,
                // The agent's configuration changed: the boundary takes it, then the wait goes on.
                () = reconfigure::next_revision(&mut self.live) => return,
                // A decision stored by another process (`troupe runs approve`) counts too.
                () = tokio::time::sleep(poll.unwrap_or_default()), if poll.is_some() => {
                    if self.recorder.has_stored_signals(state.run_id.as_str(), state.signal_cursor).await {
                        return;
                    }
                    continue;
                }
            };
            match signal {
                None => {
                    let pending = state.awaiting_approval();
                    state.finish(RunOutcome::Paused { pending });
                    return;
                }
                Some(signal @ (Signal::Approval { .. } | Signal::Cancel { .. })) => {
                    // Signals that came before this one are taken first, in order.
                    self.queued.push_back(signal);
                    return;
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
        let outcome = match state.outcome.clone() {
            Some(outcome) => outcome,
            None => state.finish(RunOutcome::failed("the run stopped without an outcome", FailureCode::Internal)),
        };
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

    async fn end(mut self, mut state: RunState, started: std::time::Instant) -> RunOutput {
        if self.recorder.is_stopped() && !self.recorder.has_failed() {
            // The heartbeat found the lease taken over: whatever the run did since is not
            // on record, and the new holder goes on from the last checkpoint.
            state.outcome = None;
            let run_id = state.run_id.to_string();
            self.store_failed(&mut state, StoreError::LeaseLost { run_id, owner: String::new() });
        }
        let outcome = match state.outcome.clone() {
            Some(outcome) => outcome,
            None => state.finish(RunOutcome::failed("the run stopped without an outcome", FailureCode::Internal)),
        };
        self.record_end(&mut state).await;
        // A store failure while recording the end shows in the outcome.
        let outcome = state.outcome.clone().unwrap_or(outcome);
        genai::record_run_end(&self.span, &outcome, &state.usage);
        self.announce_results(&state).await;
        self.close_step().await;
        let kind = match &outcome {
            RunOutcome::Failed { error, code } => {
                AgentEventKind::RunError { message: error.clone(), code: code.as_ref().map(|c| c.as_str().to_owned()) }
            }
            _ => AgentEventKind::RunFinished {
                outcome: outcome.kind(),
                output: outcome.text().map(str::to_owned),
                usage: state.usage,
                cost_usd: state.cost_usd,
            },
        };
        self.emitter.emit(kind).await;
        state.event_seq = self.emitter.next_seq();
        let cost_by_model = self.costs.by_model().clone();
        RunOutput::ended(state, outcome, cost_by_model, started.elapsed(), self.emitter.take_events())
    }
}

/// Aborts a spawned task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
