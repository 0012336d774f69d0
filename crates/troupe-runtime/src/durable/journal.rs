//! [`Journal`]: one run's writer to its store. It keeps the head of the run's evidence
//! chain in memory, so a boundary costs one write; every write is fenced by the run's
//! lease, so a worker that was taken over cannot record anything more.

use super::evidence::to_value;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::time::Instant;
use troupe_core::RunOutcomeKind;
use troupe_run::RunOutcome;
use troupe_run::Signal;
use troupe_run::{LoopStatus, Phase, RunState};
use troupe_store::{
    Checkpoint, EvidenceChain, EvidenceKind, Flush, Lease, MessagesWrite, NewEvidence, RunStatus, Store, StoreError,
    StoredSignal, now_millis,
};

/// The store's status for a run in `state`.
pub fn stored_status(state: &RunState) -> RunStatus {
    match &state.outcome() {
        Some(outcome) => match outcome.kind() {
            RunOutcomeKind::Completed => RunStatus::Completed,
            RunOutcomeKind::Paused => RunStatus::Paused,
            RunOutcomeKind::Cancelled => RunStatus::Cancelled,
            RunOutcomeKind::BudgetExceeded => RunStatus::BudgetExceeded,
            RunOutcomeKind::MaxIterations => RunStatus::MaxIterations,
            RunOutcomeKind::Incomplete => RunStatus::Incomplete,
            _ => RunStatus::Failed,
        },
        None if state.status() == LoopStatus::AwaitingApproval => RunStatus::Paused,
        None => RunStatus::Running,
    }
}

/// What a run in `state` is doing or waiting for, in words.
pub fn activity(state: &RunState) -> Option<String> {
    if let Some(outcome) = &state.outcome() {
        return match outcome {
            RunOutcome::Paused { pending } => {
                Some(waiting_for(pending.iter().map(|p| (p.tool.as_str(), p.call_id.as_str()))))
            }
            RunOutcome::Failed { error, .. } => Some(error.chars().take(200).collect()),
            _ => None,
        };
    }
    let awaiting: Vec<_> = state.pending_calls().iter().filter(|c| c.is_awaiting()).collect();
    if !awaiting.is_empty() {
        return Some(waiting_for(awaiting.iter().map(|c| (c.tool.as_str(), c.call_id.as_str()))));
    }
    let running: Vec<&str> =
        state.pending_calls().iter().filter(|c| c.result.is_none()).map(|c| c.tool.as_str()).collect();
    Some(match state.phase() {
        Phase::Tools if !running.is_empty() => format!("running {}", running.join(", ")),
        _ => format!("model call {}", state.iteration() + 1),
    })
}

fn waiting_for<'a>(calls: impl Iterator<Item = (&'a str, &'a str)>) -> String {
    let calls: Vec<String> = calls.map(|(tool, id)| format!("{tool} ({id})")).collect();
    format!("waiting for a person: {}", calls.join(", "))
}

/// One run's writer.
pub(crate) struct Journal {
    store: Arc<dyn Store>,
    chain: EvidenceChain,
    lease: Option<Lease>,
    /// Evidence to go with the next checkpoint.
    buffered: Vec<NewEvidence>,
    /// Set when the lease was lost or the store failed: nothing more is written.
    stopped: Arc<AtomicBool>,
    /// The run's task, for its conversation.
    instruction: String,
    /// The run's latest signal as the store last told it (a created run has none; each
    /// checkpoint says), and when: a boundary soon after need not ask again.
    latest_signal: Option<(i64, Instant)>,
}

impl Journal {
    pub(crate) fn new(store: Arc<dyn Store>, chain: EvidenceChain, lease: Option<Lease>) -> Self {
        Journal {
            store,
            chain,
            lease,
            buffered: Vec::new(),
            stopped: Arc::new(AtomicBool::new(false)),
            instruction: String::new(),
            latest_signal: None,
        }
    }

    /// The journal of a run this process has just created: it has no signal yet.
    pub(crate) fn created(mut self) -> Self {
        self.latest_signal = Some((0, Instant::now()));
        self
    }

    /// The journal of a run started with `instruction`.
    pub(crate) fn with_instruction(mut self, instruction: &str) -> Self {
        instruction.clone_into(&mut self.instruction);
        self
    }

    /// The run's task.
    pub(crate) fn instruction(&self) -> &str {
        &self.instruction
    }

    pub(crate) fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    pub(crate) fn lease(&self) -> Option<&Lease> {
        self.lease.as_ref()
    }

    /// Whether writing has stopped (lease lost, store failure).
    pub(crate) fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }

    /// The flag a heartbeat sets when the lease is lost.
    pub(crate) fn stop_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.stopped)
    }

    /// Keeps `entry` for the next checkpoint.
    pub(crate) fn note(&mut self, entry: NewEvidence) {
        self.buffered.push(entry);
    }

    /// Appends `entries` at once, without a checkpoint: durable when this returns.
    pub(crate) async fn append(&mut self, entries: Vec<NewEvidence>) -> Result<(), StoreError> {
        self.guard()?;
        let sealed = self.chain.seal(entries, now_millis());
        let result = self.store.append_evidence(&sealed, self.lease.as_ref()).await;
        self.settle(result)?;
        self.chain.advance(&sealed);
        Ok(())
    }

    /// Saves `state` with the buffered evidence and `entries`, atomically; on disk when
    /// this returns.
    pub(crate) async fn checkpoint(
        &mut self,
        state: &mut RunState,
        entries: Vec<NewEvidence>,
    ) -> Result<(), StoreError> {
        self.save(state, entries, false, Flush::BeforeAnswer).await
    }

    /// Saves a model turn before the run acts on it, on disk when `flush` says (see
    /// [`Durability::with_turn_flush`](crate::Durability::with_turn_flush)).
    pub(crate) async fn checkpoint_turn(
        &mut self,
        state: &mut RunState,
        entries: Vec<NewEvidence>,
        flush: Flush,
    ) -> Result<(), StoreError> {
        self.save(state, entries, false, flush).await
    }

    /// The run's last checkpoint: saves `state` with the evidence and gives up the lease
    /// in the same transaction (the run leaves the queue).
    pub(crate) async fn finish(&mut self, state: &mut RunState, entries: Vec<NewEvidence>) -> Result<(), StoreError> {
        self.save(state, entries, true, Flush::BeforeAnswer).await?;
        self.lease = None;
        Ok(())
    }

    async fn save(
        &mut self,
        state: &mut RunState,
        entries: Vec<NewEvidence>,
        release: bool,
        flush: Flush,
    ) -> Result<(), StoreError> {
        self.guard()?;
        let unencodable = |e: serde_json::Error| StoreError::database(format!("cannot encode the run's state: {e}"));
        // Encoded straight to text: no `Value` tree is built, walked and dropped per boundary.
        // The conversation is kept apart, so a boundary writes only the messages it added
        // (or, after a compaction, the conversation from the first message it changed).
        let from = state.messages_changed_from();
        let messages = state.messages()[from..]
            .iter()
            .map(serde_json::value::to_raw_value)
            .collect::<Result<Vec<_>, _>>()
            .map_err(unencodable)?;
        let encoded = state.without_messages(serde_json::value::to_raw_value).map_err(unencodable)?;
        let status = stored_status(state);
        // A completion can be refused for a signal that waits, with nothing written: the
        // next boundary writes the buffered entries again, so a completion keeps a copy.
        // Any other failure stops the journal, and what it buffered is not written at all.
        let require_signals_consumed = status == RunStatus::Completed;
        let mut all = if require_signals_consumed { self.buffered.clone() } else { std::mem::take(&mut self.buffered) };
        all.extend(entries);
        let sealed = self.chain.seal(all, now_millis());
        let mut advanced = self.chain.clone();
        advanced.advance(&sealed);
        let checkpoint = Checkpoint {
            run_id: state.run_id().to_string(),
            status,
            activity: activity(state),
            state: encoded,
            evidence: sealed,
            signals_consumed_through: (state.signal_cursor() > 0).then_some(state.signal_cursor()),
            fence: self.lease.clone(),
            // A completion must not pass over a signal acknowledged meanwhile.
            require_signals_consumed,
            release: release && self.lease.is_some(),
            flush,
            messages: Some(MessagesWrite { from, messages }),
            spend: Some(super::input::spend_of(state)),
        };
        let result = self.store.checkpoint(checkpoint, now_millis()).await;
        if matches!(result, Err(StoreError::SignalsPending { .. })) {
            // The store says a signal waits: the next boundary asks for it.
            self.latest_signal = None;
        }
        let saved = self.settle(result)?;
        state.messages_saved();
        self.latest_signal = Some((saved.latest_signal, Instant::now()));
        self.chain = advanced;
        self.buffered.clear();
        Ok(())
    }

    /// Stores a signal that arrived on the run's handle, so it is applied through the
    /// store like any other: in order, once.
    pub(crate) async fn store_signal(&mut self, run_id: &str, signal: &Signal) -> Result<i64, StoreError> {
        self.guard()?;
        self.latest_signal = None;
        let kind = signal.kind().to_string();
        self.store.send_signal(run_id, &kind, to_value(signal), now_millis()).await
    }

    /// The stored signals after `cursor` not yet applied, for a boundary: none, with no
    /// call to the store, when a write less than `fresh` ago said the run's latest signal
    /// is at or before `cursor`. A signal stored since is then taken at a later boundary,
    /// no later than a run waiting for a person notices one (it polls that often).
    pub(crate) async fn signals_at_boundary(
        &mut self,
        run_id: &str,
        cursor: i64,
        fresh: Duration,
    ) -> Result<Vec<StoredSignal>, StoreError> {
        if let Some((latest, at)) = self.latest_signal
            && latest <= cursor
            && at.elapsed() < fresh
        {
            return Ok(Vec::new());
        }
        self.pending_signals(run_id, cursor).await
    }

    /// Whether the store's last word was of a signal after `cursor`.
    pub(crate) fn signal_waits(&self, cursor: i64) -> bool {
        self.latest_signal.is_some_and(|(latest, _)| latest > cursor)
    }

    /// Forgets what the store last said of the run's signals: the run is about to wait,
    /// and what ends the wait may be a stored signal.
    pub(crate) fn forget_latest_signal(&mut self) {
        self.latest_signal = None;
    }

    /// The stored signals after `cursor` not yet applied.
    pub(crate) async fn pending_signals(&self, run_id: &str, cursor: i64) -> Result<Vec<StoredSignal>, StoreError> {
        self.guard()?;
        self.store.pending_signals(run_id, cursor).await
    }

    /// The `signal applied` entry for the next checkpoint: applied, or refused with why.
    pub(crate) fn note_signal(&mut self, signal: &StoredSignal, refused: Option<&str>) {
        let payload = match refused {
            None => json!({"seq": signal.seq, "kind": signal.kind, "applied": true}),
            Some(why) => json!({"seq": signal.seq, "kind": signal.kind, "applied": false, "refused": why}),
        };
        self.note(NewEvidence::new(EvidenceKind::SignalApplied, payload));
    }

    fn guard(&self) -> Result<(), StoreError> {
        if self.is_stopped() {
            let (run_id, owner) = self.lease.as_ref().map(|l| (l.run_id.clone(), l.owner.clone())).unwrap_or_default();
            return Err(StoreError::LeaseLost { run_id, owner });
        }
        Ok(())
    }

    fn settle<T>(&self, result: Result<T, StoreError>) -> Result<T, StoreError> {
        // Signals pending is an answer, not a failure: nothing was written, the run goes on.
        if result.as_ref().is_err_and(|e| !matches!(e, StoreError::SignalsPending { .. })) {
            // A failed write leaves the chain's head unknown to this writer, and a lost
            // lease means someone else runs the run now: either way, stop writing.
            self.stopped.store(true, Ordering::SeqCst);
        }
        result
    }
}
