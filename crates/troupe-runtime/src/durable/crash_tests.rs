//! Property test of the effect machine under crashes: random model turns, random
//! decisions of a person, random messages and cancellations at boundaries, and crashes at
//! random points of the recording protocol. The shell below only performs what
//! [`RunState::handle`] asks — it decides nothing — the way the runner's task does: a
//! model turn's evidence is kept for the next save, a save is one transaction, a call's
//! start record is saved with the state when a person's decision is not on record yet
//! and appended alone otherwise. After each crash the run is restored from its last
//! checkpoint and its evidence, and resumed by [`plan_resume`], as `Runner::resume_run`
//! does.
//!
//! Invariants, whatever the crashes:
//! - a call with side effects runs at most once, plus once per retry a person chose after
//!   it was put to them as interrupted;
//! - the run ends, and every tool call of its conversation is answered exactly once;
//! - the state on record is the state the run ended with;
//! - the evidence is a gap-free chain that verifies.

use crate::durable::{ActionCompleted, ActionStarted, ModelTurn, UNCERTAIN_REASON, plan_resume};
use futures::FutureExt;
use futures::future::BoxFuture;
use proptest::prelude::*;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use troupe_core::{ContentBlock, Message, Role, RunId, StopReason, ToolCallId, Usage};
use troupe_model::ModelResponse;
use troupe_run::AgentSpec;
use troupe_run::RunOutcome;
use troupe_run::RunState;
use troupe_run::Signal;
use troupe_run::machine::{Context, Effect, Input};
use troupe_run::{ApprovalDecision, ApprovalPolicy};
use troupe_store::{EvidenceChain, EvidenceEntry, NewEvidence, verify_chain};
use troupe_tools::{
    Effect as ToolEffect, Tool, ToolCatalog, ToolContext, ToolDeclaration, ToolError, ToolOutput, ToolResultOutcome,
};

/// A tool that only declares itself: the shell runs calls, not the catalog.
struct Declared(ToolDeclaration);

impl Tool for Declared {
    fn declaration(&self) -> &ToolDeclaration {
        &self.0
    }

    fn call<'a>(&'a self, _ctx: &'a ToolContext, _args: Value) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        async { Ok(ToolOutput::text("not run by this test")) }.boxed()
    }
}

fn catalog() -> ToolCatalog {
    let tool = |name: &str, effect| -> Arc<dyn Tool> {
        Arc::new(Declared(ToolDeclaration::new(name, "a tool", json!({"type": "object"}), effect)))
    };
    ToolCatalog::with_tools([tool("read", ToolEffect::ReadOnly), tool("append", ToolEffect::ExternalSideEffect)])
        .expect("the catalog")
}

/// What a person answers when asked.
#[derive(Clone, Copy, Debug)]
enum Answer {
    Approve,
    Reject,
    AlwaysAllow,
}

/// One generated case.
#[derive(Clone, Debug)]
struct Case {
    /// The model's turns, by iteration: each the tools it calls (`true` for `append`); an
    /// empty turn, or the end of the list, is the final answer.
    turns: Vec<Vec<bool>>,
    /// Whether calls with side effects need a person's approval.
    ask: bool,
    /// The person's answers, taken in turn (the last repeats).
    answers: Vec<Answer>,
    /// The ticks of the recording protocol at which the process dies.
    crashes: BTreeSet<u32>,
    /// Signals that arrive at boundaries, by the boundary's number (counted across crashes).
    interjections: BTreeMap<u32, Interjection>,
}

/// A signal that arrives between two steps.
#[derive(Clone, Copy, Debug)]
enum Interjection {
    /// A user message.
    Message,
    /// A cancellation.
    Cancel,
}

fn case() -> impl Strategy<Value = Case> {
    let answer = prop_oneof![Just(Answer::Approve), Just(Answer::Reject), Just(Answer::AlwaysAllow)];
    // Cancellations are rare, so most runs go to their end.
    let interjection = prop_oneof![4 => Just(Interjection::Message), 1 => Just(Interjection::Cancel)];
    (
        prop::collection::vec(prop::collection::vec(any::<bool>(), 0..4), 0..5),
        any::<bool>(),
        prop::collection::vec(answer, 1..6),
        prop::collection::btree_set(0u32..60, 0..12),
        prop::collection::btree_map(0u32..40, interjection, 0..3),
    )
        .prop_map(|(turns, ask, answers, crashes, interjections)| Case {
            turns,
            ask,
            answers,
            crashes,
            interjections,
        })
}

/// The store as a crash leaves it: the last checkpoint and the evidence on record.
struct Stored {
    state: String,
    evidence: Vec<EvidenceEntry>,
}

/// The process: the run's state, what the shell has noted but not saved, and the world.
struct Shell<'c> {
    case: &'c Case,
    spec: AgentSpec,
    catalog: ToolCatalog,
    stored: Stored,
    chain: EvidenceChain,
    /// Evidence kept for the next checkpoint (a model turn that ended nothing).
    buffered: Vec<NewEvidence>,
    /// A person's decision applied since the last checkpoint.
    decision_unsaved: bool,
    /// Every tick of the protocol so far, across crashes.
    tick: u32,
    /// The boundaries passed so far, across crashes.
    boundaries: u32,
    /// The answers given so far.
    asked: usize,
    /// The world: how often each call with side effects ran.
    ran: BTreeMap<ToolCallId, u32>,
    /// How often a person chose to retry each interrupted call.
    retries_chosen: BTreeMap<ToolCallId, u32>,
    /// The outcome the run ended with, once it did.
    ended: Option<RunOutcome>,
    /// The call with side effects between its start record and the save that follows its
    /// result, if any.
    in_flight: Option<ToolCallId>,
    /// The calls the process died during.
    interrupted: BTreeSet<ToolCallId>,
}

/// The process died at this tick.
struct Crash;

impl<'c> Shell<'c> {
    fn new(case: &'c Case, state: &RunState) -> Self {
        let mut spec = AgentSpec::new("tester", "fake/model");
        spec.approval = if case.ask { ApprovalPolicy::default() } else { ApprovalPolicy::auto() };
        let run_id = state.run_id().as_str().to_owned();
        Shell {
            case,
            spec,
            catalog: catalog(),
            stored: Stored { state: serde_json::to_string(state).expect("the state encodes"), evidence: Vec::new() },
            chain: EvidenceChain::new(run_id),
            buffered: Vec::new(),
            decision_unsaved: false,
            tick: 0,
            boundaries: 0,
            asked: 0,
            ran: BTreeMap::new(),
            retries_chosen: BTreeMap::new(),
            ended: None,
            in_flight: None,
            interrupted: BTreeSet::new(),
        }
    }

    /// A point where the process may die.
    fn tick(&mut self) -> Result<(), Crash> {
        self.tick += 1;
        if !self.case.crashes.contains(&self.tick) {
            return Ok(());
        }
        self.interrupted.extend(self.in_flight.take());
        Err(Crash)
    }

    fn append(&mut self, entries: Vec<NewEvidence>) {
        let sealed = self.chain.seal(entries, 1);
        self.chain.advance(&sealed);
        self.stored.evidence.extend(sealed);
    }

    /// Saves `state` with the buffered evidence and `entries`, in one transaction.
    fn checkpoint(&mut self, state: &RunState, entries: Vec<NewEvidence>) {
        let mut all = std::mem::take(&mut self.buffered);
        all.extend(entries);
        self.append(all);
        self.stored.state = serde_json::to_string(state).expect("the state encodes");
        self.decision_unsaved = false;
    }

    /// The model's response at the state's iteration (the same one again when a crash
    /// lost the turn: the model is asked the same question).
    fn response(&self, state: &RunState) -> ModelResponse {
        let turn = state.iteration() as usize - 1;
        let calls = self.case.turns.get(turn).filter(|calls| !calls.is_empty());
        let blocks = match calls {
            Some(calls) => calls
                .iter()
                .enumerate()
                .map(|(i, append)| {
                    let tool = if *append { "append" } else { "read" };
                    ContentBlock::tool_use(format!("t{turn}c{i}"), tool, json!({"line": format!("{turn}.{i}")}))
                })
                .collect(),
            None => vec![ContentBlock::text("done")],
        };
        let stop_reason = if calls.is_some() { StopReason::ToolUse } else { StopReason::EndTurn };
        ModelResponse {
            message: Message::new(Role::Assistant, blocks),
            stop_reason,
            usage: Usage { input_tokens: 1, output_tokens: 1, ..Default::default() },
            model: None,
            id: None,
        }
    }

    fn context(&self) -> Context<'_> {
        Context { spec: &self.spec, tools: &self.catalog, recording: true, authorizing: false }
    }

    /// Runs the state until it ends or the process dies: at each boundary the signals that
    /// arrive, then what the state asks, with each effect's answer fed back.
    fn drive(&mut self, state: &mut RunState) -> Result<RunOutcome, Crash> {
        loop {
            // The save after a call's result comes before the next boundary.
            self.in_flight = None;
            self.boundaries += 1;
            if let Some(interjection) = self.case.interjections.get(&self.boundaries) {
                let signal = match interjection {
                    Interjection::Message => Signal::user_message("also this"),
                    Interjection::Cancel => Signal::Cancel { reason: Some("enough".into()) },
                };
                // A signal taken is on record with the next save, like a decision.
                let effects = state.handle(Input::Signal { signal, seq: None }, &self.context());
                assert_taken(&effects);
                self.decision_unsaved = true;
            }
            let mut effects = state.handle(Input::Continue, &self.context());
            loop {
                let mut answer = None;
                for effect in effects {
                    if let Some(input) = self.perform(state, effect)? {
                        answer = Some(input);
                        break;
                    }
                    if let Some(outcome) = &self.ended {
                        return Ok(outcome.clone());
                    }
                }
                let Some(input) = answer else { break };
                effects = state.handle(input, &self.context());
            }
        }
    }

    /// Performs one effect; returns its answer.
    fn perform(&mut self, state: &mut RunState, effect: Effect) -> Result<Option<Input>, Crash> {
        Ok(match effect {
            Effect::CallModel(_) => {
                let response = self.response(state);
                let turn = ModelTurn {
                    iteration: state.iteration(),
                    model: "fake/model".into(),
                    message: response.message.clone(),
                    stop_reason: response.stop_reason.clone(),
                    usage: response.usage,
                    cost_usd: 0.0,
                    request: None,
                };
                self.buffered.push(turn.evidence());
                self.tick()?;
                Some(Input::ModelResponded { response, cost_usd: 0.0 })
            }
            Effect::SaveTurn => {
                self.checkpoint(state, Vec::new());
                self.tick()?;
                Some(Input::TurnSaved { signal_waiting: false })
            }
            Effect::Checkpoint(entries) => {
                self.checkpoint(state, entries);
                self.tick()?;
                None
            }
            Effect::AskApproval(requests) => {
                for request in requests {
                    let answer = self.case.answers[self.asked.min(self.case.answers.len() - 1)];
                    self.asked += 1;
                    let decision = match answer {
                        Answer::Approve => ApprovalDecision::Approve,
                        Answer::Reject => ApprovalDecision::Reject { reason: None },
                        Answer::AlwaysAllow => ApprovalDecision::AlwaysAllow,
                    };
                    if request.reason == UNCERTAIN_REASON {
                        // Only a call the process died during is put to a person as interrupted.
                        assert!(
                            self.interrupted.contains(&request.call_id),
                            "{} asked as interrupted",
                            request.call_id
                        );
                    }
                    if request.reason == UNCERTAIN_REASON && !matches!(answer, Answer::Reject) {
                        *self.retries_chosen.entry(request.call_id.clone()).or_default() += 1;
                    }
                    let signal = Signal::Approval { call_id: request.call_id, decision };
                    let effects = state.handle(Input::Signal { signal, seq: None }, &self.context());
                    assert_taken(&effects);
                    self.decision_unsaved = true;
                    self.tick()?;
                }
                None
            }
            Effect::RunTools(batch) => {
                let mut results = Vec::new();
                let mut completions = Vec::new();
                for call in &batch.calls {
                    let declaration = self.catalog.get(&call.name).expect("a known tool").declaration().clone();
                    assert_eq!(batch.side_effect, !declaration.is_read_only(), "{batch:?}");
                    if !batch.side_effect {
                        results.push((call.id.clone(), ok("read")));
                        continue;
                    }
                    assert_eq!(batch.calls.len(), 1, "a call with side effects runs alone");
                    self.in_flight = Some(call.id.clone());
                    let started = ActionStarted::evidence(call.id.as_str(), &declaration, &call.args);
                    if self.decision_unsaved {
                        self.checkpoint(state, vec![started]);
                    } else {
                        self.append(vec![started]);
                    }
                    self.tick()?;
                    *self.ran.entry(call.id.clone()).or_default() += 1;
                    self.tick()?;
                    let outcome = ok("appended");
                    completions.push(ActionCompleted::evidence(
                        call.id.as_str(),
                        &declaration,
                        &outcome.content,
                        false,
                    ));
                    results.push((call.id.clone(), outcome));
                }
                Some(Input::ToolsFinished { results, timed_out: false, completions })
            }
            Effect::Finish(outcome) => {
                // The end's record: the last save.
                self.checkpoint(state, Vec::new());
                self.ended = Some(outcome);
                None
            }
            Effect::Authorize(_) | Effect::AuditDenial { .. } | Effect::AuditDecision { .. } => None,
            Effect::RefuseSignal { reason, .. } => panic!("a signal was refused: {reason}"),
        })
    }

    /// The process starts again: the state of the last checkpoint, the evidence on
    /// record, and the resume plan applied.
    fn restore(&mut self) -> RunState {
        self.buffered.clear();
        self.decision_unsaved = false;
        let mut state: RunState = serde_json::from_str(&self.stored.state).expect("the stored state decodes");
        self.chain = EvidenceChain::after(state.run_id().as_str(), self.stored.evidence.last());
        plan_resume(&state, &self.stored.evidence, &[]).apply(&mut state);
        state
    }
}

/// A signal the shell sends is one the run takes: a refusal would be a shell's mistake.
fn assert_taken(effects: &[Effect]) {
    for effect in effects {
        assert!(!matches!(effect, Effect::RefuseSignal { .. }), "a signal was refused: {effect:?}");
    }
}

fn ok(content: &str) -> ToolResultOutcome {
    ToolResultOutcome::success(ToolOutput::text(content), Duration::ZERO)
}

/// Every tool use of the conversation answered exactly once, in the message after it.
fn every_call_answered_once(messages: &[Message]) -> Result<(), String> {
    for (i, message) in messages.iter().enumerate() {
        let uses: Vec<&ToolCallId> = message.tool_uses().map(|(id, _, _)| id).collect();
        if uses.is_empty() {
            continue;
        }
        let next = messages.get(i + 1).ok_or(format!("message {i}'s calls are never answered"))?;
        let answers: Vec<&ToolCallId> = next
            .content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::ToolResult { tool_use_id, .. } => Some(tool_use_id),
                _ => None,
            })
            .collect();
        for id in &uses {
            let times = answers.iter().filter(|a| *a == id).count();
            if times != 1 {
                return Err(format!("call {id} answered {times} times"));
            }
        }
        if answers.len() != uses.len() {
            return Err(format!("message {} answers {} calls, {} were made", i + 1, answers.len(), uses.len()));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn a_run_survives_any_crashes_without_repeating_a_side_effect(case in case()) {
        let first = RunState::new(RunId::new("run_p"), "tester", "fake/model", "model").with_instruction("go");
        let mut shell = Shell::new(&case, &first);
        let mut state = first;
        let mut lives = 0;
        let outcome = loop {
            lives += 1;
            prop_assert!(lives <= case.crashes.len() + 1, "more lives than crashes");
            match shell.drive(&mut state) {
                Ok(outcome) => break outcome,
                Err(Crash) => state = shell.restore(),
            }
        };
        prop_assert!(!matches!(outcome, RunOutcome::Paused { .. } | RunOutcome::Failed { .. }), "{outcome:?}");
        for (call, runs) in &shell.ran {
            let retries = shell.retries_chosen.get(call).copied().unwrap_or(0);
            prop_assert!(*runs <= 1 + retries, "{call} ran {runs} times with {retries} retries chosen by a person");
        }
        // The state on record is the state the run ended with.
        let stored: RunState = serde_json::from_str(&shell.stored.state).expect("decodes");
        prop_assert_eq!(&stored, &state);
        if let Err(problem) = every_call_answered_once(state.messages()) {
            prop_assert!(false, "{}", problem);
        }
        prop_assert!(verify_chain(&shell.stored.evidence).is_ok(), "the evidence chain verifies");
    }
}
