//! [`StoreHost`]: the coordinator's side of a worker's store calls. It answers them on
//! the coordinator's store for one task's run (and the runs that run creates under
//! itself), and refuses every other run: a worker, and whatever its agent runs, can read
//! or write no record but its own.

use crate::ipc::store::{StoreAnswer, StoreCall, StoreOp, StoreRefusal, StoreReply, WireStoreError};
use serde::Serialize;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use troupe_store::{Store, StoreError};

/// Answers store calls for the run `run_id` on `store`; one per task, kept across its
/// attempts so a worker started again reaches the same record.
pub(crate) struct StoreHost {
    store: Arc<dyn Store>,
    /// The task's run and the runs created under it.
    runs: Mutex<HashSet<String>>,
    /// The conversations those runs continue.
    conversations: Mutex<HashSet<String>>,
}

impl StoreHost {
    pub(crate) fn new(store: Arc<dyn Store>, run_id: &str) -> Self {
        StoreHost {
            store,
            runs: Mutex::new(HashSet::from([run_id.to_owned()])),
            conversations: Mutex::new(HashSet::new()),
        }
    }

    /// The reply to `call`.
    pub(crate) async fn answer(&self, call: StoreCall) -> StoreReply {
        let id = call.id;
        let name = call.op.name();
        let answer = match self.perform(call.op).await {
            Ok(answer) => answer,
            Err(Refused::Store(error)) => StoreAnswer::Err(WireStoreError::from(&error)),
            Err(Refused::Foreign(refusal)) => {
                tracing::warn!(op = name, run = %refusal.run_id, "a worker's store call on another run was refused");
                StoreAnswer::Err(WireStoreError::Other { message: refusal.to_string() })
            }
        };
        StoreReply { id, answer }
    }

    async fn perform(&self, op: StoreOp) -> Result<StoreAnswer, Refused> {
        let name = op.name();
        let store = self.store.as_ref();
        match op {
            StoreOp::CreateRun { run, now } => {
                self.admit(name, &run)?;
                ok(store.create_run(run, now).await?)
            }
            StoreOp::CreateLeasedRun { run, owner, ttl_ms, now } => {
                self.admit(name, &run)?;
                ok(store.create_leased_run(run, &owner, ttl(ttl_ms), now).await?)
            }
            StoreOp::LoadRun { run_id } => {
                self.check(name, &run_id)?;
                ok(store.load_run(&run_id).await?)
            }
            StoreOp::Checkpoint { checkpoint, now } => {
                let checkpoint = *checkpoint;
                self.check(name, &checkpoint.run_id)?;
                for entry in &checkpoint.evidence {
                    self.check(name, &entry.run_id)?;
                }
                if let Some(fence) = &checkpoint.fence {
                    self.check(name, &fence.run_id)?;
                }
                ok(store.checkpoint(checkpoint, now).await?.latest_signal)
            }
            StoreOp::Transitions { run_id } => {
                self.check(name, &run_id)?;
                ok(store.transitions(&run_id).await?)
            }
            StoreOp::SendSignal { run_id, kind, payload, now } => {
                self.check(name, &run_id)?;
                ok(store.send_signal(&run_id, &kind, payload, now).await?)
            }
            StoreOp::PendingSignals { run_id, after } => {
                self.check(name, &run_id)?;
                ok(store.pending_signals(&run_id, after).await?)
            }
            StoreOp::Signals { run_id } => {
                self.check(name, &run_id)?;
                ok(store.signals(&run_id).await?)
            }
            StoreOp::AppendEvidence { entries, fence } => {
                for entry in &entries {
                    self.check(name, &entry.run_id)?;
                }
                if let Some(fence) = &fence {
                    self.check(name, &fence.run_id)?;
                }
                ok(store.append_evidence(&entries, fence.as_ref()).await?)
            }
            StoreOp::Evidence { run_id, after } => {
                self.check(name, &run_id)?;
                ok(store.evidence(&run_id, after).await?)
            }
            StoreOp::LastEvidence { run_id } => {
                self.check(name, &run_id)?;
                ok(store.last_evidence(&run_id).await?)
            }
            StoreOp::AppendTurns { conversation_id, run_id, turns, now } => {
                self.check(name, &run_id)?;
                self.check_conversation(name, &conversation_id)?;
                ok(store.append_turns(&conversation_id, &run_id, turns, now).await?)
            }
            StoreOp::Conversation { conversation_id } => {
                self.check_conversation(name, &conversation_id)?;
                ok(store.conversation(&conversation_id).await?)
            }
            StoreOp::Acquire { run_id, owner, ttl_ms, now } => {
                self.check(name, &run_id)?;
                ok(store.acquire(&run_id, &owner, ttl(ttl_ms), now).await?)
            }
            StoreOp::Heartbeat { lease, ttl_ms, now } => {
                self.check(name, &lease.run_id)?;
                ok(store.heartbeat(&lease, ttl(ttl_ms), now).await?)
            }
            StoreOp::Release { lease, requeue_at } => {
                self.check(name, &lease.run_id)?;
                ok(store.release(&lease, requeue_at).await?)
            }
            StoreOp::Queue => {
                // Only the entries of this task's runs: who else is queued is not the
                // worker's business.
                let runs = self.runs.lock().map(|r| r.clone()).unwrap_or_default();
                let mine: Vec<_> = store.queue().await?.into_iter().filter(|e| runs.contains(&e.run_id)).collect();
                ok(mine)
            }
        }
    }

    /// Lets a run be created: the task's run, or one whose parent is among this task's.
    fn admit(&self, op: &'static str, run: &troupe_store::NewRun) -> Result<(), Refused> {
        let mut runs = self.runs.lock().map_err(|_| poisoned())?;
        let allowed = runs.contains(&run.id) || run.parent_run_id.as_ref().is_some_and(|p| runs.contains(p));
        if !allowed {
            return Err(Refused::Foreign(StoreRefusal { op, run_id: run.id.clone() }));
        }
        runs.insert(run.id.clone());
        if let Some(conversation) = &run.conversation_id
            && let Ok(mut conversations) = self.conversations.lock()
        {
            conversations.insert(conversation.clone());
        }
        Ok(())
    }

    fn check(&self, op: &'static str, run_id: &str) -> Result<(), Refused> {
        let runs = self.runs.lock().map_err(|_| poisoned())?;
        if runs.contains(run_id) {
            Ok(())
        } else {
            Err(Refused::Foreign(StoreRefusal { op, run_id: run_id.to_owned() }))
        }
    }

    fn check_conversation(&self, op: &'static str, conversation_id: &str) -> Result<(), Refused> {
        let known = self.conversations.lock().map_err(|_| poisoned())?.contains(conversation_id);
        if known {
            Ok(())
        } else {
            Err(Refused::Foreign(StoreRefusal { op, run_id: format!("conversation {conversation_id}") }))
        }
    }
}

/// Why a call was not carried out.
enum Refused {
    Store(StoreError),
    Foreign(StoreRefusal),
}

impl From<StoreError> for Refused {
    fn from(error: StoreError) -> Self {
        Refused::Store(error)
    }
}

fn poisoned() -> Refused {
    Refused::Store(StoreError::database("the coordinator's record of the task's runs is poisoned"))
}

fn ok<T: Serialize>(value: T) -> Result<StoreAnswer, Refused> {
    serde_json::to_value(value)
        .map(StoreAnswer::Ok)
        .map_err(|e| Refused::Store(StoreError::database(format!("cannot encode the answer: {e}"))))
}

fn ttl(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use troupe_store::{NewRun, RunStatus};

    fn new_run(id: &str, parent: Option<&str>) -> NewRun {
        NewRun {
            id: id.to_owned(),
            agent: "coder".to_owned(),
            status: RunStatus::Running,
            conversation_id: None,
            parent_run_id: parent.map(str::to_owned),
            input: json!({}).into(),
            state: json!({}).into(),
            spend: None,
        }
    }

    async fn ask(host: &StoreHost, op: StoreOp) -> StoreAnswer {
        host.answer(StoreCall { id: 1, op }).await.answer
    }

    fn refused(answer: &StoreAnswer) -> bool {
        matches!(answer, StoreAnswer::Err(WireStoreError::Other { message }) if message.contains("was refused"))
    }

    #[tokio::test]
    async fn a_worker_reaches_its_own_run_and_the_runs_it_creates_and_nothing_else() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let store =
            troupe_store::open(&format!("sqlite://{}", dir.path().join("t.db").display())).await.expect("opens");
        // Queued, so the queue has an entry that is not this task's.
        let queued = NewRun { status: RunStatus::Queued, ..new_run("someone_else", None) };
        store.create_run(queued, 1).await.expect("creates");
        assert_eq!(store.queue().await.expect("reads").len(), 1);
        let host = StoreHost::new(Arc::clone(&store), "mine");

        let op = StoreOp::CreateLeasedRun { run: new_run("mine", None), owner: "w".into(), ttl_ms: 30_000, now: 1 };
        assert!(matches!(ask(&host, op).await, StoreAnswer::Ok(_)));
        let child = StoreOp::CreateRun { run: new_run("child", Some("mine")), now: 2 };
        assert!(matches!(ask(&host, child).await, StoreAnswer::Ok(_)));
        let loaded = ask(&host, StoreOp::LoadRun { run_id: "child".into() }).await;
        assert!(matches!(loaded, StoreAnswer::Ok(ref v) if v["id"] == "child"), "{loaded:?}");

        // Another run: not to be read, written, signalled, leased or adopted.
        for op in [
            StoreOp::LoadRun { run_id: "someone_else".into() },
            StoreOp::Evidence { run_id: "someone_else".into(), after: 0 },
            StoreOp::SendSignal { run_id: "someone_else".into(), kind: "cancel".into(), payload: json!({}), now: 3 },
            StoreOp::Acquire { run_id: "someone_else".into(), owner: "w".into(), ttl_ms: 1, now: 3 },
            StoreOp::CreateRun { run: new_run("stray", None), now: 3 },
            StoreOp::CreateRun { run: new_run("adopted", Some("someone_else")), now: 3 },
            StoreOp::Conversation { conversation_id: "c1".into() },
        ] {
            let name = op.name();
            assert!(refused(&ask(&host, op).await), "{name} was not refused");
        }
        // The queue shows this task's runs only.
        let StoreAnswer::Ok(queue) = ask(&host, StoreOp::Queue).await else { panic!("the queue") };
        let ids: Vec<&str> = queue.as_array().expect("a list").iter().filter_map(|e| e["run_id"].as_str()).collect();
        assert!(!ids.is_empty() && ids.iter().all(|id| ["mine", "child"].contains(id)), "{ids:?}");
        assert!(store.load_run("stray").await.expect("reads").is_none());
    }
}
