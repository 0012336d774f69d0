//! [`TeamControl`]: what whoever watches a team holds over its members' runs while the
//! team works — a decision for any member's waiting call, approvals deferred to later,
//! and a halt that stops every member where it stands.
//!
//! A team's caller sees each member's `RunPaused` event (attributed to the member's run)
//! and answers it here with [`TeamControl::decide`]. When nobody can answer (no terminal,
//! no client), [`TeamControl::defer_approvals`] makes a member that needs a decision end
//! its run paused instead; the member then reports the pause here
//! ([`TeamControl::paused`]) and waits, so that the caller can [`halt`](TeamControl::halt)
//! the whole team and record it paused. Halting stops each member's run as a crash
//! would: nothing more is recorded, and a recorded team resumes from its members' last
//! checkpoints.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;
use troupe_core::{RunId, ToolCallId};
use troupe_runtime::{ApprovalDecision, ApprovalRequest, RunHalt, Signal, SignalSender};
use troupe_store::Store;

use crate::error::TeamError;

/// A handle on a team's members' runs, shared by every member built with it
/// ([`AgentMember::with_control`](crate::AgentMember::with_control)); cheap to clone.
#[derive(Clone, Default)]
pub struct TeamControl {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    live: Mutex<BTreeMap<RunId, LiveRun>>,
    /// Which member run waits on each call announced as waiting for a decision.
    waiting: Mutex<BTreeMap<ToolCallId, RunId>>,
    paused: Mutex<Vec<PausedRun>>,
    pause_noticed: Notify,
    defer: CancellationToken,
    halt: CancellationToken,
}

struct LiveRun {
    member: String,
    reach: Reach,
}

/// How decisions reach a member's run.
enum Reach {
    /// A run of this process: through its handle, and halted through it.
    InProcess { signals: SignalSender, halt: RunHalt },
    /// A run another process runs and records in this store (a worker's): a decision is
    /// stored as its signal, which that process applies. It stops when its member's task
    /// is dropped.
    Recorded(Arc<dyn Store>),
    /// A run elsewhere that its member relays decisions to (a remote agent's task).
    Relayed(mpsc::Sender<(ToolCallId, ApprovalDecision)>),
}

/// Where [`TeamControl::decide`] takes a decision, read out of the lock.
enum Reached {
    Signals(SignalSender),
    Store(Arc<dyn Store>),
    Relay(mpsc::Sender<(ToolCallId, ApprovalDecision)>),
}

/// A member's run that ended paused, waiting for decisions nobody was there to give.
#[derive(Clone, Debug, PartialEq)]
pub struct PausedRun {
    /// The member.
    pub member: String,
    /// Its run.
    pub run_id: RunId,
    /// The calls waiting for a decision.
    pub pending: Vec<ApprovalRequest>,
}

impl TeamControl {
    /// A control with no member runs yet.
    pub fn new() -> Self {
        TeamControl::default()
    }

    /// Sends `decision` about the call `call_id` to the member run `run_id`, which waits
    /// for it. Fails when no member run of the team by that id is going.
    pub async fn decide(
        &self,
        run_id: &RunId,
        call_id: impl Into<ToolCallId>,
        decision: ApprovalDecision,
    ) -> Result<(), TeamError> {
        let reach = lock(&self.inner.live).get(run_id).map(|run| match &run.reach {
            Reach::InProcess { signals, .. } => Reached::Signals(signals.clone()),
            Reach::Recorded(store) => Reached::Store(Arc::clone(store)),
            Reach::Relayed(relay) => Reached::Relay(relay.clone()),
        });
        match reach.ok_or_else(|| TeamError::Invalid(format!("no member run `{run_id}` is going")))? {
            Reached::Signals(signals) => signals.decide(call_id, decision).await.map_err(TeamError::Runtime),
            Reached::Relay(relay) => relay
                .send((call_id.into(), decision))
                .await
                .map_err(|_| TeamError::Invalid(format!("member run `{run_id}` no longer waits for a decision"))),
            Reached::Store(store) => {
                let signal = Signal::Approval { call_id: call_id.into(), decision };
                let payload = serde_json::to_value(&signal).map_err(|e| TeamError::Invalid(e.to_string()))?;
                let kind = signal.kind().to_string();
                store
                    .send_signal(run_id.as_str(), &kind, payload, troupe_store::now_millis())
                    .await
                    .map(|_| ())
                    .map_err(|e| TeamError::Runtime(e.into()))
            }
        }
    }

    /// Sends `decision` about the call `call_id` to whichever member run waits on it (the
    /// run whose `RunPaused` event announced it). Fails when no member run waits on it.
    ///
    /// `call_id` may also be the call as a team's stream names it ([`team_call_id`]),
    /// which names the member's run too.
    pub async fn decide_call(&self, call_id: &ToolCallId, decision: ApprovalDecision) -> Result<(), TeamError> {
        if let Some((call, run)) = call_id.as_str().rsplit_once('@') {
            let run = RunId::new(run);
            if lock(&self.inner.live).contains_key(&run) {
                let call = ToolCallId::new(call);
                self.decide(&run, call.clone(), decision).await?;
                lock(&self.inner.waiting).remove(&call);
                return Ok(());
            }
        }
        let run = lock(&self.inner.waiting).get(call_id).cloned();
        let run = run.ok_or_else(|| TeamError::Invalid(format!("no member run waits on call `{call_id}`")))?;
        self.decide(&run, call_id.clone(), decision).await?;
        lock(&self.inner.waiting).remove(call_id);
        Ok(())
    }

    /// The member whose run `run_id` is going, if one is.
    pub fn member_of(&self, run_id: &RunId) -> Option<String> {
        lock(&self.inner.live).get(run_id).map(|run| run.member.clone())
    }

    /// From now on, a member's run that needs a decision ends paused (recorded, with a
    /// store) instead of waiting for one; the member reports it ([`paused`](Self::paused)).
    pub fn defer_approvals(&self) {
        self.inner.defer.cancel();
        for run in lock(&self.inner.live).values() {
            if let Reach::InProcess { signals, .. } = &run.reach {
                signals.defer_approvals();
            }
        }
    }

    /// Whether approvals are deferred.
    pub fn defers_approvals(&self) -> bool {
        self.inner.defer.is_cancelled()
    }

    /// The member runs that ended paused so far.
    pub fn paused(&self) -> Vec<PausedRun> {
        lock(&self.inner.paused).clone()
    }

    /// Waits until some member's run has ended paused.
    pub async fn pause_noticed(&self) {
        loop {
            let noticed = self.inner.pause_noticed.notified();
            if !lock(&self.inner.paused).is_empty() {
                return;
            }
            noticed.await;
        }
    }

    /// Halts every member's run where it stands, now and from now on (see
    /// [`RunHalt`]); a halted member never answers its caller, which is being stopped too.
    pub fn halt(&self) {
        self.inner.halt.cancel();
        for run in lock(&self.inner.live).values() {
            if let Reach::InProcess { halt, .. } = &run.reach {
                halt.halt();
            }
        }
    }

    /// Whether the team was halted.
    pub fn is_halted(&self) -> bool {
        self.inner.halt.is_cancelled()
    }

    /// Waits until the team is halted.
    pub async fn halted(&self) {
        self.inner.halt.cancelled().await;
    }

    /// Follows a member's run that has started: decisions can reach it, deferral and a
    /// halt apply to it.
    pub(crate) fn enter(&self, member: &str, run_id: &RunId, signals: &SignalSender, halt: RunHalt) {
        if self.defers_approvals() {
            signals.defer_approvals();
        }
        if self.is_halted() {
            halt.halt();
        }
        let run = LiveRun { member: member.to_owned(), reach: Reach::InProcess { signals: signals.clone(), halt } };
        lock(&self.inner.live).insert(run_id.clone(), run);
    }

    /// Follows a member's run that another process runs and records in `store` (a worker
    /// process's, recorded through its coordinator): a decision for it
    /// ([`decide`](Self::decide)) is stored as its signal, which that process applies.
    /// [`leave`](Self::leave) forgets it.
    pub fn enter_recorded(&self, member: &str, run_id: &RunId, store: Arc<dyn Store>) {
        let run = LiveRun { member: member.to_owned(), reach: Reach::Recorded(store) };
        lock(&self.inner.live).insert(run_id.clone(), run);
    }

    /// Follows a member's run that its member relays decisions to (a remote agent's task
    /// waiting for input): a decision for it ([`decide`](Self::decide)) is sent to
    /// `relay`. [`leave`](Self::leave) forgets it.
    pub fn enter_relayed(&self, member: &str, run_id: &RunId, relay: mpsc::Sender<(ToolCallId, ApprovalDecision)>) {
        let run = LiveRun { member: member.to_owned(), reach: Reach::Relayed(relay) };
        lock(&self.inner.live).insert(run_id.clone(), run);
    }

    /// Forgets a member's run that has ended.
    pub fn leave(&self, run_id: &RunId) {
        lock(&self.inner.live).remove(run_id);
        lock(&self.inner.waiting).retain(|_, run| run != run_id);
    }

    /// Notes that the member run `run_id` waits for a decision about `call_id`, so that
    /// [`decide_call`](Self::decide_call) finds it by the call alone (a member of another
    /// kind than [`AgentMember`](crate::AgentMember) notes its own).
    pub fn note_waiting(&self, run_id: &RunId, call_id: &ToolCallId) {
        lock(&self.inner.waiting).insert(call_id.clone(), run_id.clone());
    }

    /// Reports a member's run that ended paused (a member of another kind than
    /// [`AgentMember`](crate::AgentMember), such as a worker process, reports its own):
    /// whoever waits on [`pause_noticed`](Self::pause_noticed) learns of it.
    pub fn note_paused(&self, paused: PausedRun) {
        lock(&self.inner.paused).push(paused);
        self.inner.pause_noticed.notify_waiters();
    }
}

/// A member's call as one stream of a whole team names it (`call@run`): the model's call
/// ids are unique within a run, not across a team's members, and a client that follows
/// the whole team (AG-UI) needs them unique. [`TeamControl::decide_call`] reads it back.
pub fn team_call_id(run_id: &RunId, call_id: &ToolCallId) -> ToolCallId {
    ToolCallId::new(format!("{call_id}@{run_id}"))
}

impl std::fmt::Debug for TeamControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TeamControl")
            .field("live", &lock(&self.inner.live).len())
            .field("paused", &lock(&self.inner.paused).len())
            .field("defer", &self.defers_approvals())
            .field("halted", &self.is_halted())
            .finish()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Plain maps of handles: a panic elsewhere leaves them usable.
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
