//! The rows a store keeps: runs, transitions, signals, evidence, conversation turns, queue
//! entries and schedules.
//!
//! The store does not interpret the run's state, its input or a signal's payload: those
//! are JSON documents of the runtime. What the store does understand is what it must
//! guarantee: statuses and their transitions, the order of signals, the append-only
//! evidence chain, leases and schedule ticks.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;
use std::fmt;

/// Milliseconds since the Unix epoch, as every timestamp in a store.
pub type Millis = i64;

/// The current time in [`Millis`].
pub fn now_millis() -> Millis {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Where a stored run stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Waiting in the queue for a worker.
    Queued,
    /// Being worked on (or it was, by a process that died: see its lease).
    Running,
    /// Waiting for a person: an approval, or a call that may or may not have happened.
    Paused,
    /// The agent answered.
    Completed,
    /// Cancelled.
    Cancelled,
    /// Failed.
    Failed,
    /// A budget (tokens, USD, time) ran out.
    BudgetExceeded,
    /// The iteration limit was reached.
    MaxIterations,
    /// The model kept stopping at its output limit.
    Incomplete,
}

impl RunStatus {
    /// Every status, in declaration order.
    pub const ALL: [RunStatus; 9] = [
        RunStatus::Queued,
        RunStatus::Running,
        RunStatus::Paused,
        RunStatus::Completed,
        RunStatus::Cancelled,
        RunStatus::Failed,
        RunStatus::BudgetExceeded,
        RunStatus::MaxIterations,
        RunStatus::Incomplete,
    ];

    /// The name stored in the database (`budget_exceeded`).
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Queued => "queued",
            RunStatus::Running => "running",
            RunStatus::Paused => "paused",
            RunStatus::Completed => "completed",
            RunStatus::Cancelled => "cancelled",
            RunStatus::Failed => "failed",
            RunStatus::BudgetExceeded => "budget_exceeded",
            RunStatus::MaxIterations => "max_iterations",
            RunStatus::Incomplete => "incomplete",
        }
    }

    /// The status named `name`, as [`as_str`](Self::as_str) writes it.
    pub fn parse(name: &str) -> Option<RunStatus> {
        RunStatus::ALL.into_iter().find(|s| s.as_str() == name)
    }

    /// Whether the run has ended for good (nothing resumes it).
    pub fn is_terminal(self) -> bool {
        !matches!(self, RunStatus::Queued | RunStatus::Running | RunStatus::Paused)
    }
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A run to create.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NewRun {
    /// The run's id.
    pub id: String,
    /// The agent's (or team's) name.
    pub agent: String,
    /// The first status: [`Queued`](RunStatus::Queued) for a run a worker is to take,
    /// [`Running`](RunStatus::Running) for one its creator runs.
    pub status: RunStatus,
    /// The conversation the run continues.
    pub conversation_id: Option<String>,
    /// The run that delegated this one.
    pub parent_run_id: Option<String>,
    /// What the run was started with (the agent's definition, the task): enough for any
    /// worker to run it.
    pub input: StoredJson,
    /// The run's first state.
    pub state: StoredJson,
    /// What the run has spent, kept beside its state for [`RunRepository::spend_since`]
    /// (`None`: not kept; a sum then reads the run's record).
    ///
    /// [`RunRepository::spend_since`]: crate::RunRepository::spend_since
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spend: Option<RunSpend>,
}

/// What a run has spent so far, kept in its row beside its state, so that sums over many
/// runs ([`RunRepository::spend_since`](crate::RunRepository::spend_since)) are the
/// store's, without reading each run's state.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunSpend {
    /// The model the run calls (`provider/model`), when it has one.
    pub model: Option<String>,
    /// Tokens used, every kind.
    pub tokens: u64,
    /// What they cost, in USD.
    pub cost_usd: f64,
    /// The spend is the sum of the run's children's (a team's run, whose members' runs are
    /// stored and counted themselves): sums keep it apart.
    pub rollup: bool,
}

impl RunSpend {
    /// The spend of a run whose children are its spend (a team's run): `tokens` and
    /// `cost_usd` are theirs summed.
    pub fn rollup(tokens: u64, cost_usd: f64) -> Self {
        RunSpend { model: None, tokens, cost_usd, rollup: true }
    }
}

/// The runs of one agent (or team), model, day and kind, created in a window, with what
/// they spent together: one row of [`SpendSums`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpendGroup {
    /// The runs' agent or team.
    pub agent: String,
    /// Their model (`None`: none kept).
    pub model: Option<String>,
    /// The day they were created: whole days since the Unix epoch, in UTC.
    pub day: i64,
    /// Whether theirs is a [rollup](RunSpend::rollup) of their children's spend.
    pub rollup: bool,
    /// How many runs.
    pub runs: u64,
    /// Their tokens.
    pub tokens: u64,
    /// Their cost, in USD.
    pub cost_usd: f64,
}

/// What the runs created in a window spent: summed by the store where they keep their
/// [`RunSpend`], the others named to be read whole.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SpendSums {
    /// The runs that keep their spend, grouped.
    pub groups: Vec<SpendGroup>,
    /// The ids of the window's runs that do not (created by an older build, or without
    /// one): their records say what they spent.
    pub unsummed: Vec<String>,
}

/// A stored run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// The run's id.
    pub id: String,
    /// The agent's (or team's) name.
    pub agent: String,
    /// Where it stands.
    pub status: RunStatus,
    /// What it is doing or waiting for, in words (`running fs.write`).
    pub activity: Option<String>,
    /// The conversation it continues.
    pub conversation_id: Option<String>,
    /// The run that delegated it.
    pub parent_run_id: Option<String>,
    /// What it was started with.
    pub input: Value,
    /// Its last checkpointed state.
    pub state: Value,
    /// When it was created.
    pub created_at: Millis,
    /// When it last changed.
    pub updated_at: Millis,
    /// The head of its evidence chain as the store moved it with each write that appended
    /// entries: a log that falls short of it was cut ([`verify_log`](crate::verify_log)).
    pub evidence_head: EvidenceHead,
}

/// The last entry of a run's evidence chain, as its run record holds it: `seq` 0 and an
/// empty hash before the first entry.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvidenceHead {
    /// The last entry's sequence number.
    pub seq: i64,
    /// Its hash.
    pub hash: String,
}

/// A run as listed: everything but its input and state.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// The run's id.
    pub id: String,
    /// The agent's (or team's) name.
    pub agent: String,
    /// Where it stands.
    pub status: RunStatus,
    /// What it is doing or waiting for.
    pub activity: Option<String>,
    /// The conversation it continues.
    pub conversation_id: Option<String>,
    /// The run that delegated it.
    pub parent_run_id: Option<String>,
    /// When it was created.
    pub created_at: Millis,
    /// When it last changed.
    pub updated_at: Millis,
}

/// Which runs to list: newest first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunFilter {
    /// Only runs with this status.
    pub status: Option<RunStatus>,
    /// Only runs of this agent.
    pub agent: Option<String>,
    /// Only runs of this conversation.
    pub conversation_id: Option<String>,
    /// Only the runs this run started (its team's members, its delegations).
    pub parent_run_id: Option<String>,
    /// Only runs whose id begins with this (a person typing the first characters of a
    /// long id).
    pub id_prefix: Option<String>,
    /// Only runs this text finds, as a person searching a list types it: part of the
    /// run's agent (or team) name or of its model, letters in either case, or the start
    /// of its id.
    pub search: Option<String>,
    /// Only runs created at or after this time (a window of recent runs).
    pub created_since: Option<Millis>,
    /// At most this many (0 for no limit).
    pub limit: u32,
    /// Past this many of those selected first (the pages of a long list).
    pub offset: u32,
}

/// A change of a run's status, as recorded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transition {
    /// The run.
    pub run_id: String,
    /// Its position among the run's transitions, from 1.
    pub seq: i64,
    /// The status before (`None` for the creation).
    pub from: Option<RunStatus>,
    /// The status after.
    pub to: RunStatus,
    /// When.
    pub at: Millis,
}

/// What happened at a boundary, saved atomically: the new state, its status and
/// activity, evidence entries, and how far the run has consumed its signals.
///
/// It serializes (its state as the raw JSON it holds), so a run in another process can
/// send it to the store's owner (a worker to its coordinator).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The run.
    pub run_id: String,
    /// Its status now (a change is recorded as a [`Transition`]).
    pub status: RunStatus,
    /// What it is doing or waiting for.
    pub activity: Option<String>,
    /// Its state now, as JSON text: a run encodes it once, straight from its own type
    /// ([`serde_json::value::to_raw_value`]), and the store writes it as it is.
    pub state: Box<RawValue>,
    /// Evidence sealed by the run's [`EvidenceChain`](crate::EvidenceChain), appended in
    /// the same transaction.
    pub evidence: Vec<EvidenceEntry>,
    /// Every signal up to this sequence number has been applied to `state`.
    pub signals_consumed_through: Option<i64>,
    /// When given, the checkpoint is only saved while this lease is held
    /// ([`StoreError::LeaseLost`](crate::StoreError::LeaseLost) otherwise).
    pub fence: Option<Lease>,
    /// Refuses the checkpoint ([`StoreError::SignalsPending`](crate::StoreError::SignalsPending))
    /// while the run has a signal numbered above `signals_consumed_through`: a run must
    /// not complete over a signal that was acknowledged but never applied.
    pub require_signals_consumed: bool,
    /// Gives up `fence`'s lease in the same transaction (the run leaves the queue): the
    /// last checkpoint of a run that ended, one commit instead of two.
    pub release: bool,
    /// When the checkpoint must be on disk: before the store answers (the default), or
    /// with the next write that is.
    pub flush: Flush,
    /// The messages of the run's conversation this checkpoint writes, when the run keeps
    /// its conversation apart from `state` (whose `messages` the store then fills from
    /// them when it loads the run); `None` leaves the stored messages as they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages: Option<MessagesWrite>,
    /// What the run has spent by this boundary, kept beside its state; `None` leaves what is
    /// kept as it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spend: Option<RunSpend>,
}

/// The messages of a run's conversation a [`Checkpoint`] writes: the stored messages
/// from position `from` on are replaced by `messages`. A boundary that only added
/// messages writes those alone; one that changed earlier messages (a compaction) writes
/// from the first it changed.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MessagesWrite {
    /// The position in the conversation (from 0) of the first message given.
    pub from: usize,
    /// The messages from `from` on, each as its JSON text.
    pub messages: Vec<Box<RawValue>>,
}

impl PartialEq for MessagesWrite {
    fn eq(&self, other: &Self) -> bool {
        self.from == other.from
            && self.messages.len() == other.messages.len()
            && self.messages.iter().zip(&other.messages).all(|(a, b)| a.get() == b.get())
    }
}

impl PartialEq for Checkpoint {
    // Raw JSON has no equality of its own: two states are equal when their text is.
    fn eq(&self, other: &Self) -> bool {
        self.run_id == other.run_id
            && self.status == other.status
            && self.activity == other.activity
            && self.state.get() == other.state.get()
            && self.evidence == other.evidence
            && self.signals_consumed_through == other.signals_consumed_through
            && self.fence == other.fence
            && self.require_signals_consumed == other.require_signals_consumed
            && self.release == other.release
            && self.flush == other.flush
            && self.messages == other.messages
    }
}

impl Checkpoint {
    /// A checkpoint of `run_id` to `status` with `state`, and nothing else: no evidence, no
    /// signals taken, no lease, flushed before the store answers.
    pub fn new(run_id: impl Into<String>, status: RunStatus, state: Box<RawValue>) -> Self {
        Checkpoint {
            run_id: run_id.into(),
            status,
            activity: None,
            state,
            evidence: Vec::new(),
            signals_consumed_through: None,
            fence: None,
            require_signals_consumed: false,
            release: false,
            flush: Flush::BeforeAnswer,
            messages: None,
            spend: None,
        }
    }

    /// This checkpoint, keeping `spend` as what the run has spent.
    pub fn with_spend(mut self, spend: RunSpend) -> Self {
        self.spend = Some(spend);
        self
    }
}

/// When a write must reach the disk.
///
/// Either way a write is atomic and survives a crash of the process the moment the store
/// answers, and writes reach the disk in the order they committed: a write that is on
/// disk takes every earlier one with it. They differ only when the machine loses power.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Flush {
    /// On disk before the store answers (one `fsync`, shared by writes committed
    /// together): no power loss can undo it.
    #[default]
    BeforeAnswer,
    /// On disk with the next [`BeforeAnswer`](Flush::BeforeAnswer) write, or when the
    /// database flushes on its own: a power loss before then undoes it and the deferred
    /// writes after it, as if the machine had stopped a moment earlier. For progress that can be redone and that nothing outside
    /// has acted on, such as a model's turn that only read-only tools follow.
    WithNextFlush,
}

/// What the store saw when it saved a [`Checkpoint`]: the sequence number of the run's
/// latest signal (0 when it has none). A run whose cursor is at or past it knows, with
/// no further call, that no signal waits for it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SavedCheckpoint {
    /// The run's latest signal when the checkpoint committed.
    pub latest_signal: i64,
}

/// A signal to a run, as stored: acknowledged once stored, applied once, in order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoredSignal {
    /// The run.
    pub run_id: String,
    /// Its position among the run's signals, from 1: signals are applied in this order.
    pub seq: i64,
    /// Its kind (`approval`, `user_message`, ...).
    pub kind: String,
    /// The signal itself.
    pub payload: Value,
    /// When it was stored.
    pub sent_at: Millis,
    /// When a checkpoint recorded it as applied.
    pub consumed_at: Option<Millis>,
}

/// What an evidence entry records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EvidenceKind {
    /// The run began: its instruction and model.
    RunStarted,
    /// A model response, once its message was complete.
    ModelTurn,
    /// A tool call with side effects is about to run.
    ActionStarted,
    /// A tool call with side effects has run: its result, as its evidence capture says.
    ActionCompleted,
    /// The run waits for a person's decision about a call.
    ApprovalWait,
    /// A signal was applied to the run.
    SignalApplied,
    /// A compaction of the conversation: the messages before and after, the step it came
    /// before, and its report (strategies, tokens).
    ContextDigest,
    /// A resume decided what to do with each call a crash left behind.
    ResumePlanned,
    /// A correction of an earlier entry (entries are never changed).
    Correction,
    /// A redaction of an earlier entry (entries are never deleted).
    Redaction,
    /// The run ended.
    RunFinished,
    /// A team gave a member its task: the member, the task, the brief as the member
    /// reads it (after the firewall).
    BriefSent,
    /// A member's report reached its recipient: as the recipient reads it (after the
    /// firewall), or the notice that it was withheld.
    ReportReceived,
}

impl EvidenceKind {
    /// Every kind, in declaration order.
    pub const ALL: [EvidenceKind; 13] = [
        EvidenceKind::RunStarted,
        EvidenceKind::ModelTurn,
        EvidenceKind::ActionStarted,
        EvidenceKind::ActionCompleted,
        EvidenceKind::ApprovalWait,
        EvidenceKind::SignalApplied,
        EvidenceKind::ContextDigest,
        EvidenceKind::ResumePlanned,
        EvidenceKind::Correction,
        EvidenceKind::Redaction,
        EvidenceKind::RunFinished,
        EvidenceKind::BriefSent,
        EvidenceKind::ReportReceived,
    ];

    /// The name stored in the database (`action_started`).
    pub fn as_str(self) -> &'static str {
        match self {
            EvidenceKind::RunStarted => "run_started",
            EvidenceKind::ModelTurn => "model_turn",
            EvidenceKind::ActionStarted => "action_started",
            EvidenceKind::ActionCompleted => "action_completed",
            EvidenceKind::ApprovalWait => "approval_wait",
            EvidenceKind::SignalApplied => "signal_applied",
            EvidenceKind::ContextDigest => "context_digest",
            EvidenceKind::ResumePlanned => "resume_planned",
            EvidenceKind::Correction => "correction",
            EvidenceKind::Redaction => "redaction",
            EvidenceKind::RunFinished => "run_finished",
            EvidenceKind::BriefSent => "brief_sent",
            EvidenceKind::ReportReceived => "report_received",
        }
    }

    /// The kind named `name`, as [`as_str`](Self::as_str) writes it.
    pub fn parse(name: &str) -> Option<EvidenceKind> {
        EvidenceKind::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

impl fmt::Display for EvidenceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An evidence entry before it is sealed into a run's chain.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NewEvidence {
    /// What it records.
    pub kind: EvidenceKind,
    /// The tool call it is about, if any.
    pub call_id: Option<String>,
    /// What is recorded.
    pub payload: StoredJson,
}

impl NewEvidence {
    /// An entry of `kind` with `payload`, about no call.
    pub fn new(kind: EvidenceKind, payload: Value) -> Self {
        NewEvidence { kind, call_id: None, payload: StoredJson::from(payload) }
    }

    /// An entry of `kind` recording `payload` as the JSON value it serializes to, written
    /// straight to the text its hash is taken over (see [`StoredJson::encode`]).
    pub fn encoded<T: Serialize + ?Sized>(kind: EvidenceKind, payload: &T) -> Result<Self, serde_json::Error> {
        Ok(NewEvidence { kind, call_id: None, payload: StoredJson::encode(payload)? })
    }

    /// The same entry, about the call `call_id`.
    pub fn for_call(mut self, call_id: impl Into<String>) -> Self {
        self.call_id = Some(call_id.into());
        self
    }
}

/// A JSON value as the store writes it: its text, as [`json_text`](crate::json_text)
/// writes a `Value` of it (what an evidence entry's hash is taken over), or the
/// [`Value`], each made from the other when first asked for; it derefs to the `Value`. A
/// run writes what it records (its evidence, a new run's input and first state) straight
/// to that text ([`encode`](Self::encode)), which the store writes as it is: no `Value`
/// is built unless something reads one. What is read back is a `Value`, whose text is
/// made only when asked for (to verify an entry).
#[derive(Clone, Default)]
pub struct StoredJson {
    value: std::sync::OnceLock<Value>,
    /// The text, when known.
    text: std::sync::OnceLock<Box<str>>,
}

impl StoredJson {
    /// `value`, its text made when first asked for.
    pub fn new(value: Value) -> Self {
        StoredJson { value: std::sync::OnceLock::from(value), text: std::sync::OnceLock::new() }
    }

    /// The JSON `value` serializes to, written straight to its text: the same text a
    /// `Value` of it writes ([`canonical_text`](crate::canonical_text)), without the `Value`.
    pub fn encode<T: Serialize + ?Sized>(value: &T) -> Result<Self, serde_json::Error> {
        let text = crate::canonical_text(value)?;
        Ok(StoredJson { value: std::sync::OnceLock::new(), text: std::sync::OnceLock::from(text.into_boxed_str()) })
    }

    /// A value whose text is `text` as it is (written by the store as it is).
    #[cfg(test)]
    pub(crate) fn with_text(text: &str) -> Self {
        StoredJson { value: std::sync::OnceLock::new(), text: std::sync::OnceLock::from(Box::from(text)) }
    }

    /// Whether its `Value` was built.
    #[cfg(test)]
    pub(crate) fn has_value(&self) -> bool {
        self.value.get().is_some()
    }

    /// The text: what the store writes, and an evidence entry's hash is taken over.
    pub fn text(&self) -> &str {
        self.text.get_or_init(|| crate::chain::json_text(self.value()).into_boxed_str())
    }

    /// The `Value`.
    pub fn value(&self) -> &Value {
        // A text is set only by `encode`, which wrote it from a value: it parses.
        self.value.get_or_init(|| self.text.get().and_then(|text| serde_json::from_str(text).ok()).unwrap_or_default())
    }

    /// The `Value`, taken.
    pub fn into_value(self) -> Value {
        self.value();
        self.value.into_inner().unwrap_or_default()
    }
}

impl From<Value> for StoredJson {
    fn from(value: Value) -> Self {
        StoredJson::new(value)
    }
}

impl std::ops::Deref for StoredJson {
    type Target = Value;

    fn deref(&self) -> &Value {
        self.value()
    }
}

impl PartialEq for StoredJson {
    fn eq(&self, other: &Self) -> bool {
        self.value() == other.value()
    }
}

impl PartialEq<Value> for StoredJson {
    fn eq(&self, other: &Value) -> bool {
        self.value() == other
    }
}

impl PartialEq<StoredJson> for Value {
    fn eq(&self, other: &StoredJson) -> bool {
        self == other.value()
    }
}

impl fmt::Debug for StoredJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.value(), f)
    }
}

impl fmt::Display for StoredJson {
    /// Its text: the JSON a `Value` of it writes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.text())
    }
}

impl Serialize for StoredJson {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.value().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for StoredJson {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Value::deserialize(deserializer).map(StoredJson::new)
    }
}

/// An entry of a run's append-only evidence log, chained to the one before by its hash.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EvidenceEntry {
    /// The run.
    pub run_id: String,
    /// Its position in the run's log, from 1.
    pub seq: i64,
    /// What it records.
    pub kind: EvidenceKind,
    /// The tool call it is about, if any.
    pub call_id: Option<String>,
    /// What is recorded. An entry this process sealed keeps it as the text its hash was
    /// taken over, which the store writes as it is.
    pub payload: StoredJson,
    /// When it was sealed.
    pub recorded_at: Millis,
    /// The hash of the entry before (empty for the first).
    pub prev_hash: String,
    /// This entry's hash: SHA-256 over `prev_hash` and the entry's fields
    /// ([`entry_hash`](crate::entry_hash)).
    pub hash: String,
}

/// One turn of a conversation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConversationTurn {
    /// The conversation.
    pub conversation_id: String,
    /// Its position in the conversation, from 1.
    pub seq: i64,
    /// The run that added it.
    pub run_id: String,
    /// `user` or `assistant`.
    pub role: String,
    /// The message.
    pub message: Value,
    /// When it was added.
    pub recorded_at: Millis,
}

/// A worker's claim on a run: while it holds it, nobody else works on the run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// The run.
    pub run_id: String,
    /// Who holds it (a worker's unique name).
    pub owner: String,
    /// Counts the claims of this run: a fencing token, so a holder that was taken over
    /// cannot write as if it still held the lease.
    pub epoch: i64,
    /// When the lease lapses unless renewed by a heartbeat.
    pub expires_at: Millis,
}

/// A run's place in the queue.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueEntry {
    /// The run.
    pub run_id: String,
    /// From when a worker may take it.
    pub available_at: Millis,
    /// Who holds its lease, if anyone.
    pub owner: Option<String>,
    /// The number of claims so far.
    pub epoch: i64,
    /// When the lease lapses.
    pub expires_at: Option<Millis>,
}

/// When a schedule fires.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Trigger {
    /// On a cron expression (seconds field first: `0 */5 * * * *`), in UTC.
    Cron {
        /// The expression.
        expression: String,
    },
    /// Every so many milliseconds.
    Interval {
        /// The period.
        every_ms: i64,
    },
}

/// What a schedule does when it fires.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ScheduleTarget {
    /// Enqueues a new run of an agent with this input.
    StartRun {
        /// The agent's (or team's) name.
        agent: String,
        /// The run's input, as for [`NewRun::input`].
        input: Value,
    },
    /// Sends a scheduler wake-up signal to a waiting run.
    WakeRun {
        /// The run.
        run_id: String,
    },
}

/// A schedule.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Schedule {
    /// Its unique name.
    pub id: String,
    /// When it fires.
    pub trigger: Trigger,
    /// What it does.
    pub target: ScheduleTarget,
    /// The next tick.
    pub next_fire_at: Millis,
    /// The last tick that fired.
    pub last_fired_at: Option<Millis>,
    /// Whether it fires at all.
    pub enabled: bool,
}

/// What a schedule's tick does, decided by the scheduler and carried out by the store in
/// the same transaction that claims the tick.
#[derive(Clone, Debug, PartialEq)]
pub enum Firing {
    /// Creates this run (status [`Queued`](RunStatus::Queued)) and enqueues it.
    Start(NewRun),
    /// Stores this signal for the run and enqueues the run.
    Wake {
        /// The run.
        run_id: String,
        /// The signal's kind.
        kind: String,
        /// The signal.
        payload: Value,
    },
}

/// What a store is and where.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreInfo {
    /// `sqlite` or `postgres`.
    pub backend: String,
    /// Where (a file path, or a redacted URL).
    pub location: String,
    /// The schema version in force.
    pub schema_version: i64,
}

/// A memory an agent saved.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryRecord {
    /// Its number, in saving order across the store.
    pub id: i64,
    /// Whose it is: `agent:<id>` for an isolated memory, `shared:<category>` for a shared one.
    pub namespace: String,
    /// What was saved.
    pub content: String,
    /// When.
    pub saved_at: Millis,
}
