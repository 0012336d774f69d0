//! [`Recorder`]: everything a run's loop records, behind one value.
//!
//! The loop says what happened (a boundary, a model turn, a signal, a side effect about
//! to start, the end); the recorder decides what that means for the store. A run without
//! a store has the recorder [`Recorder::Off`], whose every call does nothing. A run with
//! one records through its [`Journal`]: checkpoints at boundaries, evidence, signals
//! stored before they are applied, the lease kept alive, and the first store failure,
//! after which it writes nothing more.

use super::evidence::encoded;
use super::journal::Journal;
use super::{Durability, StoredInput};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use troupe_core::Message;
use troupe_run::RunOutcome;
use troupe_run::RunState;
use troupe_run::Signal;
use troupe_store::{
    EvidenceChain, EvidenceKind, NewEvidence, RunStatus as StoredStatus, StoreError, StoredSignal, now_millis,
};

/// How a run's recorder is to be set up when its task starts.
pub(crate) enum RecorderSetup {
    /// The run records nothing.
    Off,
    /// The run is new: create it in the store, with this input, and lease it.
    Create(Durability, Box<StoredInput>),
    /// The run is stored and leased already.
    Ready(Durability, Box<Journal>),
}

/// A run's recorder: off, or recording into a store.
pub(crate) enum Recorder {
    /// Nothing is recorded.
    Off,
    /// Recording into a store.
    Store(Box<Recording>),
}

/// A recorder's state while it records into a store.
pub(crate) struct Recording {
    journal: Journal,
    durability: Durability,
    /// Why the store stopped taking the run's records.
    error: Option<StoreError>,
    /// Whether the run's end is on record.
    end_recorded: bool,
    /// Whether signals were applied since the last checkpoint.
    unsaved_signals: bool,
}

/// What became of recording a run's end.
pub(crate) enum EndRecord {
    /// On record (or there is nothing to record it in).
    Recorded,
    /// Not yet: the run completed while a signal it has not applied was acknowledged.
    SignalsPending,
    /// The store failed.
    Failed(StoreError),
}

impl Recorder {
    /// Sets the recorder up: creates a new run in the store (with the conversation's
    /// history, when it continues one) and records its start, or takes a stored run's
    /// journal; then starts the lease's heartbeat, which trips `cancel` if the lease is
    /// taken over. A store that fails here returns its error with the recorder off.
    pub(crate) async fn open(
        setup: RecorderSetup,
        state: &mut RunState,
        instruction: &str,
        fresh: bool,
        cancel: &CancellationToken,
    ) -> Result<(Recorder, Option<JoinHandle<()>>), StoreError> {
        let (durability, mut journal) = match setup {
            RecorderSetup::Off => return Ok((Recorder::Off, None)),
            RecorderSetup::Ready(durability, journal) => (durability, *journal),
            RecorderSetup::Create(durability, input) => {
                let journal = create_run(&durability, state, &input).await?;
                (durability, journal)
            }
        };
        if fresh {
            let payload = RunStarted { agent: state.agent(), model: state.model(), instruction };
            journal.note(encoded(EvidenceKind::RunStarted, &payload));
        }
        let heartbeat = heartbeat(&journal, durability.lease_ttl(), cancel.clone());
        let recording = Recording { journal, durability, error: None, end_recorded: false, unsaved_signals: false };
        Ok((Recorder::Store(Box::new(recording)), heartbeat))
    }

    /// Whether the run records into a store.
    pub(crate) fn is_on(&self) -> bool {
        matches!(self, Recorder::Store(_))
    }

    /// Whether a store was given and writing has stopped (lease lost, store failure).
    pub(crate) fn is_stopped(&self) -> bool {
        matches!(self, Recorder::Store(recording) if recording.journal.is_stopped())
    }

    /// Whether a store was given and writing goes on.
    pub(crate) fn records(&self) -> bool {
        matches!(self, Recorder::Store(recording) if !recording.journal.is_stopped())
    }

    /// Whether the run's end is still to be recorded: a store was given, writing goes
    /// on, and the end is not on record yet.
    pub(crate) fn end_pending(&self) -> bool {
        matches!(self, Recorder::Store(recording) if !recording.journal.is_stopped() && !recording.end_recorded)
    }

    /// The recording, while it still writes.
    fn writing(&mut self) -> Option<&mut Recording> {
        match self {
            Recorder::Store(recording) if !recording.journal.is_stopped() => Some(recording),
            _ => None,
        }
    }

    /// Saves `state` with `entries` (and whatever the journal holds), on disk before this
    /// returns. Nothing to do without a store, or once writing has stopped.
    pub(crate) async fn checkpoint(
        &mut self,
        state: &mut RunState,
        entries: Vec<NewEvidence>,
        event_seq: u64,
    ) -> Saved {
        let Some(recording) = self.writing() else { return Ok(()) };
        state.set_event_seq(event_seq);
        let saved = recording.journal.checkpoint(state, entries).await;
        recording.settle(saved)
    }

    /// Saves `state` with the model turn the journal holds, before the run acts on it: on
    /// disk when the run's durability says (`Durability::with_turn_flush`).
    pub(crate) async fn checkpoint_turn(&mut self, state: &mut RunState, event_seq: u64) -> Saved {
        let Some(recording) = self.writing() else { return Ok(()) };
        state.set_event_seq(event_seq);
        let flush = recording.durability.turn_flush();
        let saved = recording.journal.checkpoint_turn(state, Vec::new(), flush).await;
        recording.settle(saved)
    }

    /// Keeps a model turn's evidence (or a compaction's, before the turn) for the next save:
    /// the run saves it before it acts on the turn
    /// ([`Effect::SaveTurn`](troupe_run::machine::Effect::SaveTurn)), or with its end when
    /// the turn ended it (one commit, not two).
    pub(crate) fn note_turn(&mut self, entry: NewEvidence) {
        if let Recorder::Store(recording) = self {
            recording.journal.note(entry);
        }
    }

    /// Whether the store's last word was of a signal after `cursor`.
    pub(crate) fn signal_waits(&self, cursor: i64) -> bool {
        matches!(self, Recorder::Store(recording) if recording.journal.signal_waits(cursor))
    }

    /// Stores the signals `queued` on the run's handle, so they are applied through the
    /// store like any other (in order, once), and returns the stored signals after
    /// `cursor` that the run has not applied. A signal that could not be stored stays
    /// queued. Nothing without a store or once writing has stopped.
    pub(crate) async fn stored_signals(
        &mut self,
        run_id: &str,
        queued: &mut VecDeque<Signal>,
        cursor: i64,
    ) -> Result<Vec<StoredSignal>, StoreError> {
        let Some(recording) = self.writing() else { return Ok(Vec::new()) };
        while let Some(signal) = queued.pop_front() {
            if let Err(error) = recording.journal.store_signal(run_id, &signal).await {
                queued.push_front(signal);
                return Err(error);
            }
        }
        // A write's word on the latest signal counts for as long as a waiting run's poll.
        let fresh = recording.durability.signal_poll();
        recording.journal.signals_at_boundary(run_id, cursor, fresh).await
    }

    /// Notes that the stored `signal` was taken (applied, or `refused` with why) for the
    /// next checkpoint.
    pub(crate) fn note_signal(&mut self, signal: &StoredSignal, refused: Option<&str>) {
        if let Recorder::Store(recording) = self {
            recording.unsaved_signals = true;
            recording.journal.note_signal(signal, refused);
        }
    }

    /// The run is about to wait: how often to look for signals other processes store
    /// (none without a store), and what the store last said of them no longer counts.
    pub(crate) fn start_waiting(&mut self) -> Option<Duration> {
        let Recorder::Store(recording) = self else { return None };
        recording.journal.forget_latest_signal();
        Some(recording.durability.signal_poll())
    }

    /// Whether the store holds signals after `cursor` that the run has not applied.
    pub(crate) async fn has_stored_signals(&self, run_id: &str, cursor: i64) -> bool {
        let Recorder::Store(recording) = self else { return false };
        match recording.journal.pending_signals(run_id, cursor).await {
            Ok(pending) => !pending.is_empty(),
            Err(error) => {
                tracing::warn!(run = %run_id, %error, "could not look for stored signals");
                false
            }
        }
    }

    /// Records that a call with side effects starts, before it runs: with a checkpoint
    /// when signals were applied since the last one (what allowed the call must be on
    /// record with its start), else appended alone.
    /// Once writing has stopped this fails: a call must not start unrecorded.
    pub(crate) async fn action_started(&mut self, state: &mut RunState, started: NewEvidence, event_seq: u64) -> Saved {
        let Recorder::Store(recording) = self else { return Ok(()) };
        if recording.unsaved_signals && !recording.journal.is_stopped() {
            state.set_event_seq(event_seq);
            let saved = recording.journal.checkpoint(state, vec![started]).await;
            return recording.settle(saved);
        }
        recording.journal.append(vec![started]).await
    }

    /// Records the run's end once: its conversation turns (unless it paused), its final
    /// state with a `run finished` entry, and gives up its lease.
    pub(crate) async fn record_end(&mut self, state: &mut RunState, outcome: &RunOutcome, event_seq: u64) -> EndRecord {
        let Some(recording) = self.writing() else { return EndRecord::Recorded };
        if recording.end_recorded {
            return EndRecord::Recorded;
        }
        if let (Some(conversation), false) = (&state.conversation_id(), matches!(outcome, RunOutcome::Paused { .. })) {
            let store = Arc::clone(recording.journal.store());
            let instruction = recording.journal.instruction();
            if let Err(error) =
                append_conversation(store.as_ref(), conversation.as_str(), state, instruction, outcome).await
            {
                return EndRecord::Failed(error);
            }
        }
        let payload = RunFinished { outcome, usage: state.usage(), cost_usd: state.cost_usd() };
        let finished = encoded(EvidenceKind::RunFinished, &payload);
        state.set_event_seq(event_seq);
        match recording.journal.finish(state, vec![finished]).await {
            Ok(()) => {
                recording.end_recorded = true;
                EndRecord::Recorded
            }
            Err(StoreError::SignalsPending { .. }) => EndRecord::SignalsPending,
            Err(error) => EndRecord::Failed(error),
        }
    }

    /// Keeps why the store stopped taking the run's records.
    pub(crate) fn fail(&mut self, error: StoreError) {
        if let Recorder::Store(recording) = self {
            recording.error = Some(error);
        }
    }

    /// Whether a store failure stopped the recording.
    pub(crate) fn has_failed(&self) -> bool {
        matches!(self, Recorder::Store(recording) if recording.error.is_some())
    }
}

/// A `run started` entry's payload.
#[derive(serde::Serialize)]
struct RunStarted<'a> {
    agent: &'a str,
    model: &'a str,
    instruction: &'a str,
}

/// A `run finished` entry's payload.
#[derive(serde::Serialize)]
struct RunFinished<'a> {
    outcome: &'a RunOutcome,
    usage: troupe_core::Usage,
    cost_usd: f64,
}

/// A save's result: `Err` when the store failed, and the run must stop.
pub(crate) type Saved = Result<(), StoreError>;

impl Recording {
    /// A checkpoint's result; a saved one leaves no signal unsaved.
    fn settle(&mut self, saved: Saved) -> Saved {
        if saved.is_ok() {
            self.unsaved_signals = false;
        }
        saved
    }
}

/// Renews the journal's lease every third of `ttl` until the task is aborted; when the
/// lease was taken over, stops the journal and trips `cancel`.
fn heartbeat(journal: &Journal, ttl: Duration, cancel: CancellationToken) -> Option<JoinHandle<()>> {
    let mut lease = journal.lease().cloned()?;
    let store = Arc::clone(journal.store());
    let stop = journal.stop_flag();
    Some(tokio::spawn(async move {
        loop {
            tokio::time::sleep(ttl / 3).await;
            match store.heartbeat(&lease, ttl, now_millis()).await {
                Ok(Some(renewed)) => lease = renewed,
                Ok(None) => {
                    tracing::warn!(run = %lease.run_id, "the run's lease was taken over; stopping");
                    stop.store(true, std::sync::atomic::Ordering::SeqCst);
                    cancel.cancel();
                    return;
                }
                Err(error) => tracing::warn!(run = %lease.run_id, %error, "heartbeat failed; retrying"),
            }
        }
    }))
}

/// Creates a new run in the store and leases it. A run that continues a conversation
/// without inline history gets the conversation's turns first.
async fn create_run(durability: &Durability, state: &mut RunState, input: &StoredInput) -> Result<Journal, StoreError> {
    let store = durability.store();
    if input.history.is_empty()
        && let Some(conversation) = &state.conversation_id()
    {
        let turns = store.conversation(conversation.as_str()).await?;
        let mut history = Vec::with_capacity(turns.len());
        for turn in turns {
            let message: Message = serde_json::from_value(turn.message)
                .map_err(|e| StoreError::decode(format!("turn {} of conversation `{conversation}`", turn.seq), e))?;
            history.push(message);
        }
        state.prepend_history(history);
    }
    let run_id = state.run_id().to_string();
    let record = input.new_run_at(state, StoredStatus::Running);
    let lease = store.create_leased_run(record, durability.owner(), durability.lease_ttl(), now_millis()).await?;
    Ok(Journal::new(Arc::clone(store), EvidenceChain::new(run_id), Some(lease))
        .with_instruction(&input.instruction)
        .created())
}

/// Adds the run's task and answer to its conversation, once: a run whose turns are there
/// already (it was interrupted after adding them) adds nothing.
async fn append_conversation(
    store: &dyn troupe_store::Store,
    conversation: &str,
    state: &RunState,
    instruction: &str,
    outcome: &RunOutcome,
) -> Result<(), StoreError> {
    let run_id = state.run_id().as_str();
    if store.conversation(conversation).await?.iter().any(|t| t.run_id == run_id) {
        return Ok(());
    }
    let mut turns = Vec::new();
    if !instruction.is_empty() {
        turns.push(("user".to_owned(), serde_json::to_value(Message::user(instruction)).unwrap_or_default()));
    }
    if let Some(answer) = outcome.text().filter(|t| !t.is_empty()) {
        turns.push(("assistant".to_owned(), serde_json::to_value(Message::assistant(answer)).unwrap_or_default()));
    }
    store.append_turns(conversation, run_id, turns, now_millis()).await
}
