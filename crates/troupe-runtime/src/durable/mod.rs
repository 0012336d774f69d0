//! Durable execution: runs recorded in a [`Store`], resumed after a crash without
//! repeating a completed side effect, taken over by another worker when theirs dies.
//!
//! With [`Runner::with_store`](crate::Runner::with_store), every run:
//! - is created in the store with its input and holds a lease, renewed by a heartbeat;
//! - checkpoints its state at each boundary (after each model response, after each tool
//!   call with side effects), atomically with the evidence of that boundary;
//! - appends `action started` before a tool call with side effects runs, so a crash
//!   during the call is known for what it is;
//! - applies signals through the store, in append order, each exactly once.
//!
//! [`Runner::resume_leased`](crate::Runner::resume_leased) continues a stored run whose
//! lease this process holds, by [`plan_resume`]. What works on stored runs from above the
//! runner (the queue consumer, schedules, taking a run's lease to resume it by its id,
//! signals sent through the store) is the crate `troupe-durable`.

mod child;
mod digester;
mod evidence;
mod input;
pub(crate) mod journal;
mod plan;
pub(crate) mod recorder;

pub use child::{child_run_id, finished_output};
pub use digester::RequestDigester;
pub use evidence::{ActionCompleted, ActionStarted, ModelTurn, RequestDigest, SUMMARY_CHARS, digest};
pub use input::{StoredInput, TEAM_RUN_KIND, state_from_value};
pub use journal::{activity, stored_status};
pub use plan::{CallPlan, CallResume, ResumePlan, UNCERTAIN_REASON, plan_resume};

use std::sync::Arc;
use std::time::Duration;
use troupe_store::{Flush, RunStatus, Store};

/// How long a lease lasts without a heartbeat, by default.
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(30);

/// How often a run waiting for a person looks for signals stored by other processes, by
/// default.
pub const DEFAULT_SIGNAL_POLL: Duration = Duration::from_millis(250);

/// Where and as whom runs are recorded.
#[derive(Clone)]
pub struct Durability {
    store: Arc<dyn Store>,
    owner: String,
    lease_ttl: Duration,
    signal_poll: Duration,
    turn_flush: Flush,
}

impl std::fmt::Debug for Durability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Durability")
            .field("store", &self.store.info())
            .field("owner", &self.owner)
            .field("lease_ttl", &self.lease_ttl)
            .field("turn_flush", &self.turn_flush)
            .finish_non_exhaustive()
    }
}

impl Durability {
    /// Records runs in `store`, as a process-unique owner (`host:pid:random`), with
    /// [`DEFAULT_LEASE_TTL`].
    pub fn new(store: Arc<dyn Store>) -> Self {
        Durability {
            store,
            owner: unique_owner("local"),
            lease_ttl: DEFAULT_LEASE_TTL,
            signal_poll: DEFAULT_SIGNAL_POLL,
            turn_flush: Flush::BeforeAnswer,
        }
    }

    /// Holds leases as `owner` (it must be unique among the processes sharing the store).
    pub fn with_owner(mut self, owner: impl Into<String>) -> Self {
        self.owner = owner.into();
        self
    }

    /// Leases last `ttl` without a heartbeat (heartbeats come every third of it); a run
    /// whose holder died is taken over that long after its last heartbeat.
    pub fn with_lease_ttl(mut self, ttl: Duration) -> Self {
        self.lease_ttl = ttl.max(Duration::from_millis(30));
        self
    }

    /// A run waiting for a person looks for stored signals this often.
    pub fn with_signal_poll(mut self, every: Duration) -> Self {
        self.signal_poll = every.max(Duration::from_millis(10));
        self
    }

    /// When the checkpoint that saves a model's turn, before the run acts on it, must be
    /// on disk. By default every checkpoint is flushed before the run goes on: no power
    /// loss undoes anything a run was told was saved.
    ///
    /// With [`Flush::WithNextFlush`] (opt-in), a turn's checkpoint is committed without
    /// an `fsync` of its own and reaches the disk with the run's next flushed write.
    /// Everything a repeat would harm stays flushed before it happens (a side effect's
    /// `action started`, an approval's wait, the run's end), and takes the turns before
    /// it to disk. A process crash undoes nothing. What a power loss can undo is the model
    /// turns, and the read-only tool calls, since the run's last flushed write: the run
    /// resumes from there and asks its model again (paying for those tokens twice, and
    /// possibly getting another answer than the one already streamed). A run of read-only
    /// tools then costs two `fsync`s, at its start and its end, instead of one per turn.
    /// In `docs/PERFORMANCE.md`'s benchmark that saved about a tenth of a short recorded
    /// run's CPU one run at a time, and nothing with 100 runs in flight, whose writes
    /// already share their `fsync`s.
    ///
    /// ```
    /// # async fn example(store: std::sync::Arc<dyn troupe_store::Store>) {
    /// use troupe_runtime::Durability;
    /// use troupe_store::Flush;
    ///
    /// let durability = Durability::new(store).with_turn_flush(Flush::WithNextFlush);
    /// assert_eq!(durability.turn_flush(), Flush::WithNextFlush);
    /// # }
    /// ```
    pub fn with_turn_flush(mut self, flush: Flush) -> Self {
        self.turn_flush = flush;
        self
    }

    /// When a model turn's checkpoint is on disk (see [`Durability::with_turn_flush`]).
    pub fn turn_flush(&self) -> Flush {
        self.turn_flush
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// Who holds this process's leases.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// How long a lease lasts without a heartbeat.
    pub fn lease_ttl(&self) -> Duration {
        self.lease_ttl
    }

    /// How often a waiting run polls for signals.
    pub fn signal_poll(&self) -> Duration {
        self.signal_poll
    }
}

/// A name no other process will have: `prefix:host:pid:random`.
pub fn unique_owner(prefix: &str) -> String {
    let random = troupe_core::RunId::generate().to_string();
    // The id's last characters are its random part (UUID v7 keeps time in front).
    let tail: String = random.chars().rev().take(8).collect::<Vec<_>>().into_iter().rev().collect();
    format!("{prefix}:{}:{}:{tail}", host_name(), std::process::id())
}

/// This machine's name, as owners carry it.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().replace(':', "_"))
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".to_owned())
}

/// Whether `owner` (as [`unique_owner`] makes them) names a process of this machine that
/// no longer exists: its lease can be taken at once instead of waiting for it to lapse.
/// Where that cannot be known (another machine, no `/proc`), `false`.
pub fn is_dead_local_owner(owner: &str) -> bool {
    let mut parts = owner.rsplitn(3, ':');
    let (Some(_random), Some(pid), Some(rest)) = (parts.next(), parts.next(), parts.next()) else { return false };
    let Some((_, host)) = rest.split_once(':') else { return false };
    if host != host_name() || pid.parse::<u32>().is_err() || !std::path::Path::new("/proc/self").exists() {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // A zombie has exited; only its parent has not collected it yet.
        Ok(stat) => stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => true,
    }
}

/// The failure of a stored run that failed for a transient reason
/// ([`FailureCode::is_transient`](troupe_core::FailureCode::is_transient)), as its message:
/// such a run can be resumed from its last checkpoint (`troupe_durable::ResumeRun`, or
/// [`Runner::resume_leased`](crate::Runner::resume_leased)). `None` for any other run.
pub fn resumable_failure(record: &troupe_store::RunRecord) -> Option<String> {
    if record.status != RunStatus::Failed {
        return None;
    }
    let outcome = record.state.get("outcome")?.clone();
    match serde_json::from_value::<crate::RunOutcome>(outcome).ok()? {
        crate::RunOutcome::Failed { error, code: Some(code) } if code.is_transient() => Some(error),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_gone_local_owner_is_dead() {
        let me = unique_owner("local");
        assert!(!is_dead_local_owner(&me), "this process is alive: {me}");
        let host = host_name();
        assert!(is_dead_local_owner(&format!("local:{host}:4294967295:abc")));
        assert!(!is_dead_local_owner("local:elsewhere:1:abc"), "another machine's process cannot be checked");
        assert!(!is_dead_local_owner("worker-a"));
        assert!(!is_dead_local_owner(&format!("local:{host}:notapid:abc")));
    }
}

#[cfg(test)]
mod crash_tests;
