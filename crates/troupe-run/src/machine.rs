//! The run as an effect machine: [`RunState::handle`] takes what the shell learned (an
//! [`Input`]) and returns what the shell is to do (a list of [`Effect`]s).
//!
//! The shell — the runner's task, a test, a replayer — performs effects and reports back.
//! It decides nothing: budgets and the deadline's consequence, failure codes, capability
//! and policy denials, when a model turn is saved before the run acts on it, how tool
//! calls are grouped (read-only calls together, a call with side effects alone between
//! its start record and a checkpoint), pausing when nobody can approve, and what a store
//! failure means are all decided here.
//!
//! The protocol:
//! - the shell delivers what it knows (signals, cancellation, the deadline), then sends
//!   [`Input::Continue`]; the answer names the next thing to do;
//! - an effect that yields a result ([`Effect::CallModel`], [`Effect::RunTools`],
//!   [`Effect::SaveTurn`], [`Effect::AskApproval`]) is answered by the input it names; the
//!   effects after it in the same list are not to be performed before that answer;
//! - [`Effect::Finish`] ends the loop.

use crate::applied::AppliedSpec;
use crate::approval::{ApprovalDecision, ApprovalRequest, Verdict};
use crate::outcome::RunOutcome;
use crate::signal::{Signal, SignalKind};
use crate::spec::AgentSpec;
pub use crate::state::ToolBatch;
use crate::state::{Action, CallResult, InFlight, PendingCall, RunState};
use serde_json::Value;
use troupe_core::{Budget, FailureCode, Message, ModelRequest, ToolCallId, Usage};
use troupe_model::ModelResponse;
use troupe_store::NewEvidence;
use troupe_tools::{ToolCall, ToolCatalog, ToolResultOutcome};

/// What the machine reads besides its state: the agent's configuration as it is now, its
/// tools, and what the shell can do.
#[derive(Clone, Copy)]
pub struct Context<'a> {
    /// The agent's spec (it may change between two inputs).
    pub spec: &'a AgentSpec,
    /// The agent's tools.
    pub tools: &'a ToolCatalog,
    /// Whether the run is recorded: saves and start records are asked for.
    pub recording: bool,
    /// Whether calls are checked against capabilities before approval is asked.
    pub authorizing: bool,
}

/// What the shell learned.
#[derive(Debug)]
pub enum Input {
    /// The shell has delivered everything it knows: decide what to do next.
    Continue,
    /// The run's model resolved to this id, sending `name` on the wire.
    ModelResolved {
        /// The model's id (`provider/model`).
        id: String,
        /// Its name on the wire.
        name: String,
    },
    /// The agent's configuration changed while the run was going; the run goes on with it
    /// (and a resumed run too).
    SpecApplied(AppliedSpec),
    /// The model answered the last [`Effect::CallModel`].
    ModelResponded {
        /// The response.
        response: ModelResponse,
        /// What it cost, in USD.
        cost_usd: f64,
    },
    /// Tokens billed outside a kept response: a broken-off answer, or a compaction's own
    /// call (`of_conversation: false`: the last call's usage keeps measuring the
    /// conversation).
    Billed {
        /// The tokens.
        usage: Usage,
        /// What they cost, in USD.
        cost_usd: f64,
        /// Whether they measure the conversation (a call with the run's messages).
        of_conversation: bool,
    },
    /// The conversation as compaction left it (taken out to be compacted, given back).
    Compacted(Vec<Message>),
    /// The conversation given back as it was taken out: compaction changed nothing.
    Uncompacted(Vec<Message>),
    /// A capability check refused a call of the last response.
    CapabilityDenied {
        /// The call.
        call_id: ToolCallId,
        /// Why.
        reason: String,
    },
    /// The calls of the last [`Effect::RunTools`] ended.
    ToolsFinished {
        /// Each call's outcome.
        results: Vec<(ToolCallId, ToolResultOutcome)>,
        /// Whether the deadline passed while they ran.
        timed_out: bool,
        /// The completion records of the calls that had a start record.
        completions: Vec<NewEvidence>,
    },
    /// A signal arrived (`seq`: its number in the store, when it went through one).
    Signal {
        /// The signal.
        signal: Signal,
        /// Its number in the store.
        seq: Option<i64>,
    },
    /// A stored signal that cannot be read: it is passed over (and reported by the shell).
    SignalUnreadable {
        /// Its number in the store.
        seq: i64,
    },
    /// The run is to stop; the first reason given is kept.
    Cancelled {
        /// Why, where known.
        reason: Option<String>,
    },
    /// The run's time limit passed.
    DeadlinePassed,
    /// The run is to pause at this boundary (its process is stopping).
    Suspended,
    /// Calls wait for a person and nobody will answer in this process.
    NobodyToApprove,
    /// Something the run needs failed; the run ends with `code`.
    Failed {
        /// What failed, in words.
        error: String,
        /// Its code.
        code: FailureCode,
    },
    /// The run's store failed (`lease_lost`: another worker took the run over).
    StoreFailed {
        /// Whether the run's lease was taken over.
        lease_lost: bool,
        /// The store's error, in words.
        error: String,
    },
    /// The lease was found taken over after the run ended here: whatever it did since its
    /// last save is not on record, and its outcome is that.
    LeaseTakenOver,
    /// The model turn is saved ([`Effect::SaveTurn`]); `signal_waiting` when the store
    /// said a signal waits, to be taken before the run acts on the turn.
    TurnSaved {
        /// Whether a stored signal waits.
        signal_waiting: bool,
    },
    /// The run's end could not be recorded: a signal it has not applied was acknowledged
    /// meanwhile. A completion is taken back so the run answers it.
    EndDeferred,
}

/// What the shell is to do.
#[derive(Clone, Debug, PartialEq)]
pub enum Effect {
    /// Call the model with this request; answer [`Input::ModelResponded`] (or
    /// [`Input::Failed`], [`Input::Cancelled`], [`Input::DeadlinePassed`]).
    CallModel(ModelRequest),
    /// Check these calls against the agent's capabilities; answer each refusal with
    /// [`Input::CapabilityDenied`].
    Authorize(Vec<ToolCall>),
    /// Run these calls; answer [`Input::ToolsFinished`].
    RunTools(ToolBatch),
    /// Ask a person about these calls; their decisions come as signals, or
    /// [`Input::NobodyToApprove`].
    AskApproval(Vec<ApprovalRequest>),
    /// Put a refusal by the approval policy in the audit log.
    AuditDenial {
        /// The call.
        call_id: ToolCallId,
        /// Its tool.
        tool: String,
        /// Its arguments.
        arguments: Value,
        /// Why it was denied.
        reason: String,
    },
    /// Put a person's decision in the audit log.
    AuditDecision {
        /// The call.
        call_id: ToolCallId,
        /// Its tool and arguments, when the call is known.
        call: Option<(String, Value)>,
        /// The decision.
        decision: ApprovalDecision,
    },
    /// Report a signal the run refused, and why.
    RefuseSignal {
        /// The signal's kind.
        kind: SignalKind,
        /// Why it was refused.
        reason: String,
    },
    /// Save the state with the model turn before the run acts on it; answer
    /// [`Input::TurnSaved`] (or [`Input::StoreFailed`]).
    SaveTurn,
    /// Save the state with these records (and whatever the recorder holds).
    Checkpoint(Vec<NewEvidence>),
    /// The loop ends with this outcome.
    Finish(RunOutcome),
}

impl RunState {
    /// Takes what the shell learned and returns what it is to do (see the module's docs).
    pub fn handle(&mut self, input: Input, ctx: &Context<'_>) -> Vec<Effect> {
        match input {
            Input::Continue => self.next_step(ctx),
            Input::ModelResolved { id, name } => {
                self.model = id;
                self.model_name = name;
                Vec::new()
            }
            Input::ModelResponded { response, cost_usd } => {
                self.apply_model_response(response, cost_usd);
                self.in_flight.turn_unsaved = ctx.recording;
                if !ctx.authorizing {
                    return Vec::new();
                }
                // Unknown tools are not decisions: the catalog answers them with the known names.
                let calls: Vec<ToolCall> = self
                    .pending_calls
                    .iter()
                    .filter(|c| c.result.is_none() && c.verdict.is_none() && ctx.tools.get(&c.tool).is_some())
                    .map(|c| ToolCall::new(c.call_id.clone(), c.tool.clone(), c.arguments.clone()))
                    .collect();
                if calls.is_empty() { Vec::new() } else { vec![Effect::Authorize(calls)] }
            }
            Input::SpecApplied(applied) => {
                self.applied_spec = Some(applied);
                Vec::new()
            }
            Input::Billed { usage, cost_usd, of_conversation } => {
                let last = self.last_usage;
                self.record_usage(usage, cost_usd);
                if !of_conversation {
                    self.last_usage = last;
                }
                Vec::new()
            }
            Input::Compacted(messages) => {
                self.messages = messages;
                self.changed_from(0);
                Vec::new()
            }
            Input::Uncompacted(messages) => {
                self.messages = messages;
                Vec::new()
            }
            Input::CapabilityDenied { call_id, reason } => {
                self.deny_call(&call_id, &reason);
                Vec::new()
            }
            Input::ToolsFinished { results, timed_out, completions } => {
                self.tools_finished(results, timed_out, completions, ctx)
            }
            Input::Signal { signal, seq } => self.take_signal(signal, seq, ctx),
            Input::SignalUnreadable { seq } => {
                self.signal_cursor = self.signal_cursor.max(seq);
                Vec::new()
            }
            Input::Cancelled { reason } => {
                self.request_cancel(reason);
                Vec::new()
            }
            Input::DeadlinePassed => {
                self.finish(RunOutcome::BudgetExceeded { budget: Budget::Time });
                Vec::new()
            }
            Input::Suspended | Input::NobodyToApprove => {
                if !self.is_finished() {
                    let pending = self.awaiting_approval();
                    self.finish(RunOutcome::Paused { pending });
                }
                Vec::new()
            }
            Input::Failed { error, code } => {
                self.finish(RunOutcome::failed(error, code));
                Vec::new()
            }
            Input::StoreFailed { lease_lost, error } => {
                self.finish(store_failure(lease_lost, &error));
                self.in_flight = InFlight::default();
                Vec::new()
            }
            Input::LeaseTakenOver => {
                self.outcome = None;
                self.finish(store_failure(true, ""));
                Vec::new()
            }
            Input::TurnSaved { signal_waiting } => {
                self.in_flight.turn_unsaved = false;
                let held = self.in_flight.held.take();
                match held {
                    _ if self.is_finished() => Vec::new(),
                    Some(Action::CallModel(_)) if signal_waiting => {
                        // The call is decided again after the signal: it is counted then.
                        self.iteration = self.iteration.saturating_sub(1);
                        Vec::new()
                    }
                    Some(_) if signal_waiting => Vec::new(),
                    Some(action) => self.perform(action, ctx),
                    None => Vec::new(),
                }
            }
            Input::EndDeferred => {
                self.reopen_completed();
                Vec::new()
            }
        }
    }

    /// The next step: the policy's denials, then the action, with the model turn saved
    /// first when the run acts on it.
    fn next_step(&mut self, ctx: &Context<'_>) -> Vec<Effect> {
        let mut effects: Vec<Effect> = self
            .apply_policy(ctx.spec, ctx.tools)
            .into_iter()
            .map(|call| {
                let reason = match call.verdict {
                    Some(Verdict::Deny { reason }) => reason,
                    _ => "denied by the approval policy".to_owned(),
                };
                Effect::AuditDenial { call_id: call.call_id, tool: call.tool, arguments: call.arguments, reason }
            })
            .collect();
        let action = self.next_action_decided(ctx.spec, ctx.tools);
        match action {
            Action::Finish(outcome) => {
                // The turn goes with the end's record: one save, not two.
                self.in_flight = InFlight::default();
                effects.push(Effect::Finish(outcome));
            }
            action if self.in_flight.turn_unsaved => {
                self.in_flight.held = Some(action);
                effects.push(Effect::SaveTurn);
            }
            action => effects.extend(self.perform(action, ctx)),
        }
        effects
    }

    /// The effect of an action decided.
    fn perform(&mut self, action: Action, ctx: &Context<'_>) -> Vec<Effect> {
        match action {
            Action::CallModel(request) => vec![Effect::CallModel(*request)],
            Action::AwaitApproval(requests) => vec![Effect::AskApproval(requests)],
            Action::Finish(outcome) => vec![Effect::Finish(outcome)],
            Action::RunTools(calls) => self.next_batch(calls, ctx).into_iter().collect(),
        }
    }

    /// The first batch of `calls` (the cleared calls of this turn, in order): the
    /// read-only calls up to the first with side effects, run together, or that call alone.
    fn next_batch(&mut self, calls: Vec<ToolCall>, ctx: &Context<'_>) -> Option<Effect> {
        let side_effect = |call: &ToolCall| ctx.tools.get(&call.name).is_some_and(|t| !t.declaration().is_read_only());
        let readers = calls.iter().take_while(|c| !side_effect(c)).count();
        let mut calls = calls;
        calls.truncate(readers.max(1));
        if calls.is_empty() {
            return None;
        }
        let batch = ToolBatch { calls, side_effect: readers == 0 };
        self.in_flight.batch = Some(batch.clone());
        Some(Effect::RunTools(batch))
    }

    /// Takes a batch's results: the deadline ends the run, a call with side effects is
    /// saved with its completion, and the turn's next batch follows at once.
    fn tools_finished(
        &mut self,
        results: Vec<(ToolCallId, ToolResultOutcome)>,
        timed_out: bool,
        completions: Vec<NewEvidence>,
        ctx: &Context<'_>,
    ) -> Vec<Effect> {
        let batch = self.in_flight.batch.take();
        self.apply_tool_results(results);
        // A call the shell did not report on is answered, so the loop never runs it again.
        for call in batch.iter().flat_map(|b| &b.calls) {
            if let Some(pending) = self.pending_calls.iter_mut().find(|c| c.call_id == call.id && c.result.is_none()) {
                pending.result = Some(CallResult::error("The tool reported no result."));
            }
        }
        if timed_out {
            self.finish(RunOutcome::BudgetExceeded { budget: Budget::Time });
        }
        let mut effects = Vec::new();
        // Read-only results need no save of their own: a resume may run them again, and the
        // next model turn's save records them.
        let side_effect = batch.as_ref().is_some_and(|b| b.side_effect);
        if ctx.recording && (side_effect || timed_out) {
            effects.push(Effect::Checkpoint(completions));
        }
        if !self.is_finished() {
            let runnable = self.runnable_calls();
            effects.extend(self.next_batch(runnable, ctx));
        }
        effects
    }

    /// Applies a signal the agent accepts, with what its hooks add; a refused one is
    /// reported.
    fn take_signal(&mut self, signal: Signal, seq: Option<i64>, ctx: &Context<'_>) -> Vec<Effect> {
        if let Some(seq) = seq {
            self.signal_cursor = self.signal_cursor.max(seq);
        }
        let kind = signal.kind();
        if !ctx.spec.accepts(kind) {
            let reason = crate::error::SignalError::NotAccepted { kind }.to_string();
            return vec![Effect::RefuseSignal { kind, reason }];
        }
        let extra = ctx.spec.signal_hooks.run(&signal, self);
        let mut effects = Vec::new();
        if let Signal::Approval { call_id, decision } = &signal {
            let call = self
                .pending_calls
                .iter()
                .find(|c| &c.call_id == call_id)
                .map(|c: &PendingCall| (c.tool.clone(), c.arguments.clone()));
            effects.push(Effect::AuditDecision { call_id: call_id.clone(), call, decision: decision.clone() });
        }
        match self.apply_signal(signal) {
            Ok(()) => self.inject(extra),
            Err(error) => effects.push(Effect::RefuseSignal { kind, reason: error.to_string() }),
        }
        effects
    }
}

/// The outcome of a run whose store failed or whose lease was taken over.
fn store_failure(lease_lost: bool, error: &str) -> RunOutcome {
    if lease_lost {
        RunOutcome::failed(
            "another worker took this run over (its lease lapsed); this process stopped working on it",
            FailureCode::LeaseLost,
        )
    } else {
        RunOutcome::failed(
            format!("the run's store failed ({error}); the run can be resumed from its last checkpoint"),
            FailureCode::Store,
        )
    }
}
