//! Store calls over the worker protocol: a worker records its agent's run in the
//! coordinator's store, one [`StoreCall`] answered by one [`StoreReply`], so a worker
//! started again for the same task resumes the run instead of redoing it.
//!
//! The calls are the ones a run makes on its store (create, checkpoint, evidence, signals,
//! its lease); the coordinator answers only for the task's own run and the runs it creates
//! under it ([`StoreRefusal`]).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use troupe_store::{Checkpoint, EvidenceEntry, Lease, Millis, NewRun, StoreError};

/// A store call of a worker.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoreCall {
    /// The call's number, which its reply carries.
    pub id: u64,
    /// What is asked.
    pub op: StoreOp,
}

/// What a [`StoreCall`] asks: one method of [`troupe_store::Store`], with its arguments.
///
/// Externally tagged (`{"checkpoint": {...}}`): a checkpoint's state is raw JSON, which a
/// tag inside the object would make serde buffer and lose.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)] // Each variant is the store method of the same name.
pub enum StoreOp {
    CreateRun { run: NewRun, now: Millis },
    CreateLeasedRun { run: NewRun, owner: String, ttl_ms: u64, now: Millis },
    LoadRun { run_id: String },
    Checkpoint { checkpoint: Box<Checkpoint>, now: Millis },
    Transitions { run_id: String },
    SendSignal { run_id: String, kind: String, payload: Value, now: Millis },
    PendingSignals { run_id: String, after: i64 },
    Signals { run_id: String },
    AppendEvidence { entries: Vec<EvidenceEntry>, fence: Option<Lease> },
    Evidence { run_id: String, after: i64 },
    LastEvidence { run_id: String },
    AppendTurns { conversation_id: String, run_id: String, turns: Vec<(String, Value)>, now: Millis },
    Conversation { conversation_id: String },
    Acquire { run_id: String, owner: String, ttl_ms: u64, now: Millis },
    Heartbeat { lease: Lease, ttl_ms: u64, now: Millis },
    Release { lease: Lease, requeue_at: Option<Millis> },
    Queue,
}

impl StoreOp {
    /// The store method's name, as refusals quote it.
    pub fn name(&self) -> &'static str {
        match self {
            StoreOp::CreateRun { .. } => "create_run",
            StoreOp::CreateLeasedRun { .. } => "create_leased_run",
            StoreOp::LoadRun { .. } => "load_run",
            StoreOp::Checkpoint { .. } => "checkpoint",
            StoreOp::Transitions { .. } => "transitions",
            StoreOp::SendSignal { .. } => "send_signal",
            StoreOp::PendingSignals { .. } => "pending_signals",
            StoreOp::Signals { .. } => "signals",
            StoreOp::AppendEvidence { .. } => "append_evidence",
            StoreOp::Evidence { .. } => "evidence",
            StoreOp::LastEvidence { .. } => "last_evidence",
            StoreOp::AppendTurns { .. } => "append_turns",
            StoreOp::Conversation { .. } => "conversation",
            StoreOp::Acquire { .. } => "acquire",
            StoreOp::Heartbeat { .. } => "heartbeat",
            StoreOp::Release { .. } => "release",
            StoreOp::Queue => "queue",
        }
    }
}

/// The coordinator's answer to a [`StoreCall`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoreReply {
    /// The call's number.
    pub id: u64,
    /// What the store returned, or why it did not.
    #[serde(flatten)]
    pub answer: StoreAnswer,
}

/// What a store call came to.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StoreAnswer {
    /// The method's value, as JSON.
    Ok(Value),
    /// The method's error.
    Err(WireStoreError),
}

/// A [`StoreError`] on the wire: the errors a run acts on keep their kind (a lost lease
/// stops the run, an existing run is resumed), the rest travel as their message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[allow(missing_docs)] // The `StoreError` variants of the same names.
pub enum WireStoreError {
    UnknownRun {
        run_id: String,
    },
    RunExists {
        run_id: String,
    },
    LeaseLost {
        run_id: String,
        owner: String,
    },
    EvidenceConflict {
        run_id: String,
        seq: i64,
    },
    RunEnded {
        run_id: String,
        status: String,
    },
    SignalsPending {
        run_id: String,
    },
    /// Any other error, or a call the coordinator refused, in words.
    Other {
        message: String,
    },
}

impl From<&StoreError> for WireStoreError {
    fn from(error: &StoreError) -> Self {
        match error {
            StoreError::UnknownRun { run_id } => WireStoreError::UnknownRun { run_id: run_id.clone() },
            StoreError::RunExists { run_id } => WireStoreError::RunExists { run_id: run_id.clone() },
            StoreError::LeaseLost { run_id, owner } => {
                WireStoreError::LeaseLost { run_id: run_id.clone(), owner: owner.clone() }
            }
            StoreError::EvidenceConflict { run_id, seq } => {
                WireStoreError::EvidenceConflict { run_id: run_id.clone(), seq: *seq }
            }
            StoreError::RunEnded { run_id, status } => {
                WireStoreError::RunEnded { run_id: run_id.clone(), status: status.clone() }
            }
            StoreError::SignalsPending { run_id } => WireStoreError::SignalsPending { run_id: run_id.clone() },
            StoreError::Database { message } => WireStoreError::Other { message: message.clone() },
            other => WireStoreError::Other { message: other.to_string() },
        }
    }
}

impl From<WireStoreError> for StoreError {
    fn from(error: WireStoreError) -> Self {
        match error {
            WireStoreError::UnknownRun { run_id } => StoreError::UnknownRun { run_id },
            WireStoreError::RunExists { run_id } => StoreError::RunExists { run_id },
            WireStoreError::LeaseLost { run_id, owner } => StoreError::LeaseLost { run_id, owner },
            WireStoreError::EvidenceConflict { run_id, seq } => StoreError::EvidenceConflict { run_id, seq },
            WireStoreError::RunEnded { run_id, status } => StoreError::RunEnded { run_id, status },
            WireStoreError::SignalsPending { run_id } => StoreError::SignalsPending { run_id },
            WireStoreError::Other { message } => StoreError::Database { message },
        }
    }
}

/// Why the coordinator refused a store call: it names a run that is not the task's.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("a worker's {op} call on run `{run_id}` was refused: a worker records only its own task's run")]
pub struct StoreRefusal {
    /// The store method.
    pub op: &'static str,
    /// The run it named.
    pub run_id: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::value::RawValue;
    use troupe_store::{Flush, RunStatus};

    #[test]
    fn a_checkpoint_keeps_every_field_on_the_wire() {
        let mut checkpoint =
            Checkpoint::new("r1", RunStatus::Paused, RawValue::from_string(r#"{"a":[1,2]}"#.to_owned()).expect("raw"));
        checkpoint.activity = Some("waiting".into());
        checkpoint.signals_consumed_through = Some(3);
        checkpoint.require_signals_consumed = true;
        checkpoint.release = true;
        checkpoint.flush = Flush::WithNextFlush;
        checkpoint.fence = Some(Lease { run_id: "r1".into(), owner: "w".into(), epoch: 2, expires_at: 9 });
        let call = StoreCall { id: 7, op: StoreOp::Checkpoint { checkpoint: Box::new(checkpoint), now: 5 } };
        let text = serde_json::to_string(&call).expect("encodes");
        let back: StoreCall = serde_json::from_str(&text).expect("decodes");
        let StoreOp::Checkpoint { checkpoint, now } = back.op else { panic!("a checkpoint: {text}") };
        assert_eq!((back.id, now), (7, 5));
        assert_eq!(checkpoint.state.get(), r#"{"a":[1,2]}"#);
        assert_eq!(checkpoint.flush, Flush::WithNextFlush);
        assert_eq!(checkpoint.fence.map(|l| l.epoch), Some(2));
        assert!(checkpoint.require_signals_consumed && checkpoint.release);
    }

    #[test]
    fn errors_a_run_acts_on_keep_their_kind() {
        let lost = StoreError::LeaseLost { run_id: "r".into(), owner: "w".into() };
        let wire = WireStoreError::from(&lost);
        let text = serde_json::to_string(&StoreReply { id: 1, answer: StoreAnswer::Err(wire) }).expect("encodes");
        let back: StoreReply = serde_json::from_str(&text).expect("decodes");
        let StoreAnswer::Err(error) = back.answer else { panic!("an error: {text}") };
        assert!(matches!(StoreError::from(error), StoreError::LeaseLost { .. }));
        let other = WireStoreError::from(&StoreError::database("disk full"));
        assert_eq!(StoreError::from(other).to_string(), "store error: disk full");
    }
}
