//! The replay itself: the recorded run started again through a runner of the current code
//! and configuration, its model and tools substituted, until it ends or first decides
//! differently.

use crate::compaction::RecordedCompaction;
use crate::divergence::{Divergence, DivergenceKind, unified};
use crate::error::ReplayError;
use crate::model::ReplayResolver;
use crate::recording::Recording;
use crate::session::Session;
use serde::Serialize;
use std::fmt;
use std::sync::Arc;
use troupe_core::{AgentEventKind, PauseReason, RunId};
use troupe_run::{AgentSpec, RunOutcome, Signal};
use troupe_runtime::{RunHandle, Runner, RuntimeError};

/// What a replay takes live instead of from the record.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplayOptions {
    /// Call the real model at each step (the recorded requests are then not compared: the
    /// model's new answers make them differ); its tool calls must be the recorded ones.
    pub live_model: bool,
    /// Run the real tools instead of answering with their recorded results.
    pub live_tools: bool,
}

/// How a replay went.
#[derive(Clone, Debug, Serialize)]
pub struct ReplayReport {
    /// The recorded run.
    pub run_id: String,
    /// The model steps the recorded run made.
    pub recorded_steps: u32,
    /// The model steps the replay reached.
    pub steps: u32,
    /// Tool calls answered.
    pub tool_calls: u32,
    /// Calls made to a real model (none unless live).
    pub model_calls: u32,
    /// The first point where the run decided differently; `None` when it is identical.
    pub divergence: Option<Divergence>,
    /// How the replay ended.
    pub outcome: String,
    /// What the report does not cover, or what differs without being a decision (a live
    /// model's different wording).
    pub notes: Vec<String>,
}

impl ReplayReport {
    /// Whether the run made every decision as recorded.
    pub fn identical(&self) -> bool {
        self.divergence.is_none()
    }
}

impl fmt::Display for ReplayReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.divergence {
            None => write!(
                f,
                "run {}: identical ({} model step(s), {} tool call(s), {} model call(s) made)",
                self.run_id, self.steps, self.tool_calls, self.model_calls
            )?,
            Some(divergence) => write!(
                f,
                "run {}: diverges at {divergence}\n({} of {} model step(s) reached, {} model call(s) made)",
                self.run_id, self.steps, self.recorded_steps, self.model_calls
            )?,
        }
        for note in &self.notes {
            write!(f, "\nnote: {note}")?;
        }
        Ok(())
    }
}

/// Replays `recording` as the agent `spec` with `runner`'s models, tools, middleware and
/// policy, substituting what `options` does not take live.
///
/// `runner` must not record runs: a replay leaves the store as it found it.
pub async fn replay(
    runner: &Runner,
    spec: AgentSpec,
    recording: Recording,
    options: ReplayOptions,
) -> Result<ReplayReport, ReplayError> {
    if runner.durability().is_some() {
        return Err(ReplayError::Runtime(RuntimeError::InvalidSpec(
            "a replay runs without a store: give it a runner that records nothing".to_owned(),
        )));
    }
    let session = Session::new(Arc::new(recording));
    let tools = crate::tools::catalog(runner.catalog(), &session, options.live_tools)
        .map_err(|source| RuntimeError::Catalog { agent: spec.name.clone(), source })?;
    let resolver = ReplayResolver {
        inner: Arc::clone(runner.resolver()),
        session: Arc::clone(&session),
        live: options.live_model,
    };
    let mut replayer = runner.clone().with_resolver(Arc::new(resolver)).with_catalog(Arc::new(tools));
    let mut spec = spec;
    let mut notes = Vec::new();
    if !session.recording.compactions.is_empty() {
        // The recorded compactions take the place of the agent's own policy, which would
        // otherwise run first.
        spec.compaction = None;
        replayer = replayer.with_compactor(Arc::new(RecordedCompaction { session: Arc::clone(&session) }));
        let steps: Vec<String> = session.recording.compactions.iter().map(|c| c.step.to_string()).collect();
        notes.push(format!(
            "the recorded run compacted its conversation before step(s) {}: the replay took the conversation \
             each compaction left, without compacting again",
            steps.join(", ")
        ));
    }
    replayer.validate(&spec)?;
    let mut state = session.recording.initial_state(RunId::generate());
    // What the recorded run was sent before its first model call, it took at its first
    // boundary: the replay starts with it.
    state.inject(session.recording.inputs.iter().filter(|i| i.step == 1).filter_map(|i| i.message()));
    let handle = replayer.resume(Arc::new(spec), state);
    // Set before the run's first model call can ask for it: `resume` only spawns the run.
    session.signals.send_replace(Some(handle.signals.clone()));
    let outcome = drive(handle, &session).await?;

    let recording = &session.recording;
    let recorded_steps = u32::try_from(recording.turns.len()).unwrap_or(u32::MAX);
    if session.progress().divergence.is_none() {
        let steps = session.progress().step;
        let recorded_outcome = recording.outcome.as_ref();
        if steps < recorded_steps && !matches!(recorded_outcome, Some(RunOutcome::Paused { .. }) | None) {
            session.diverge(
                DivergenceKind::EndedEarly,
                format!(
                    "the run ended ({}) after {steps} of the recorded {recorded_steps} model step(s)",
                    kind(&outcome)
                ),
            );
        } else if let Some(recorded) = recorded_outcome
            && !matches!(recorded, RunOutcome::Paused { .. })
            && recorded.kind() != outcome.kind()
        {
            session.diverge(
                DivergenceKind::Outcome,
                format!("recorded: {}\nnow: {}", describe(recorded), describe(&outcome)),
            );
        } else if options.live_model
            && let (Some(RunOutcome::Completed { output: before }), RunOutcome::Completed { output: now }) =
                (recorded_outcome, &outcome)
            && before != now
        {
            notes.push(format!("the live model's final answer is worded differently:\n{}", unified(before, now)));
        }
    }
    if matches!(recording.outcome, None | Some(RunOutcome::Paused { .. })) {
        notes.push(format!(
            "the recorded run had not ended ({}): compared as far as it went",
            recording.status.as_str()
        ));
    }
    let progress = session.progress();
    Ok(ReplayReport {
        run_id: recording.run_id.clone(),
        recorded_steps,
        steps: progress.step,
        tool_calls: progress.tool_calls,
        model_calls: progress.live_model_calls,
        divergence: progress.divergence.clone(),
        outcome: kind(&outcome),
        notes,
    })
}

/// Follows the replay's events, answering each approval as the recorded person did, until
/// it ends; stops it at the first divergence.
async fn drive(handle: RunHandle, session: &Arc<Session>) -> Result<RunOutcome, ReplayError> {
    let RunHandle { mut events, signals, cancel, result, .. } = handle;
    let mut stopping = false;
    loop {
        let event = tokio::select! {
            event = events.next_event() => event,
            () = session.stop.cancelled(), if !stopping => {
                stopping = true;
                cancel.cancel();
                continue;
            }
        };
        let Some(event) = event else { break };
        let AgentEventKind::RunPaused { reason } = event.kind else { continue };
        match reason {
            PauseReason::Approval { call_id, tool, .. } => {
                let recorded = session.recorded_id(call_id.as_str());
                let recording = &session.recording;
                match recorded.filter(|id| recording.asked.contains(id)) {
                    Some(id) => {
                        session.progress().asked.insert(id.clone());
                        match recording.decisions.get(&id) {
                            Some(Signal::Approval { decision, .. }) => {
                                let signal = Signal::Approval { call_id: call_id.clone(), decision: decision.clone() };
                                if signals.send(signal).await.is_err() {
                                    break;
                                }
                            }
                            _ => {
                                // The recorded run still waits here: everything up to it matched.
                                cancel.cancel();
                            }
                        }
                    }
                    None => session.diverge(
                        DivergenceKind::ApprovalVerdict,
                        format!("{tool} ({call_id}) now waits for a person; the recorded run did not ask"),
                    ),
                }
            }
            other => session.diverge(
                DivergenceKind::ApprovalVerdict,
                format!("the run now pauses ({other:?}) where the recorded run did not"),
            ),
        }
    }
    drop(signals);
    let output = result.await?;
    Ok(output.outcome)
}

/// An outcome in a line.
fn describe(outcome: &RunOutcome) -> String {
    match outcome {
        RunOutcome::Completed { output } => format!("completed: {}", output.lines().next().unwrap_or_default()),
        other => kind(other),
    }
}

/// An outcome's kind by its wire name (`budget_exceeded`).
fn kind(outcome: &RunOutcome) -> String {
    serde_json::to_value(outcome.kind()).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}
