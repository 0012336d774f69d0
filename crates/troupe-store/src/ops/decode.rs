//! Rows into records, once for every backend: each decoder reads its columns by name.

use crate::error::StoreError;
use crate::record::{
    ConversationTurn, EvidenceEntry, EvidenceHead, EvidenceKind, Lease, MemoryRecord, QueueEntry, RunRecord, RunStatus,
    RunSummary, Schedule, StoredSignal, Transition,
};
use crate::sql::Columns;
use crate::work::{WorkRecord, stored_state};

/// The run status stored as `name`; `what` names the value when it is unknown.
pub(crate) fn parse_status(name: &str, what: impl FnOnce() -> String) -> Result<RunStatus, StoreError> {
    RunStatus::parse(name).ok_or_else(|| StoreError::decode(what(), format!("unknown run status `{name}`")))
}

/// Column `seq`: a sequence number.
pub(crate) fn seq(row: &dyn Columns) -> Result<i64, StoreError> {
    row.int("seq")
}

/// Column `id`.
pub(crate) fn id(row: &dyn Columns) -> Result<i64, StoreError> {
    row.int("id")
}

/// A run's summary: its `id`, `agent`, `status`, `activity`, `conversation_id`,
/// `parent_run_id`, `created_at` and `updated_at`.
pub(crate) fn run_summary(row: &dyn Columns) -> Result<RunSummary, StoreError> {
    let id = row.text("id")?;
    let status = row.text("status")?;
    Ok(RunSummary {
        status: parse_status(&status, || format!("status of run `{id}`"))?,
        agent: row.text("agent")?,
        activity: row.opt_text("activity")?,
        conversation_id: row.opt_text("conversation_id")?,
        parent_run_id: row.opt_text("parent_run_id")?,
        created_at: row.int("created_at")?,
        updated_at: row.int("updated_at")?,
        id,
    })
}

/// A whole run: its summary's columns, `input`, `state`, `evidence_seq` and
/// `evidence_hash`.
pub(crate) fn run_record(row: &dyn Columns) -> Result<RunRecord, StoreError> {
    let RunSummary { id, agent, status, activity, conversation_id, parent_run_id, created_at, updated_at } =
        run_summary(row)?;
    Ok(RunRecord {
        input: row.json("input", || format!("input of run `{id}`"))?,
        state: row.json("state", || format!("state of run `{id}`"))?,
        evidence_head: EvidenceHead { seq: row.int("evidence_seq")?, hash: row.text("evidence_hash")? },
        id,
        agent,
        status,
        activity,
        conversation_id,
        parent_run_id,
        created_at,
        updated_at,
    })
}

/// A run with its conversation as kept apart from its state (`messages`, one JSON array;
/// `None` when it has no stored message).
pub(crate) fn run_record_with_messages(
    row: &dyn Columns,
) -> Result<(RunRecord, Option<Vec<serde_json::Value>>), StoreError> {
    let record = run_record(row)?;
    let messages = match row.opt_text("messages")? {
        None => None,
        Some(text) => Some(
            serde_json::from_str(&text)
                .map_err(|e| StoreError::decode(format!("the stored conversation of run `{}`", record.id), e))?,
        ),
    };
    Ok((record, messages))
}

/// A status change of a run.
pub(crate) fn transition(row: &dyn Columns) -> Result<Transition, StoreError> {
    let run_id = row.text("run_id")?;
    let seq = row.int("seq")?;
    let what = || format!("transition {seq} of run `{run_id}`");
    let from = row.opt_text("from_status")?.map(|name| parse_status(&name, what)).transpose()?;
    let to = parse_status(&row.text("to_status")?, what)?;
    Ok(Transition { from, to, at: row.int("at")?, run_id, seq })
}

/// A signal.
pub(crate) fn signal(row: &dyn Columns) -> Result<StoredSignal, StoreError> {
    let run_id = row.text("run_id")?;
    let seq = row.int("seq")?;
    Ok(StoredSignal {
        payload: row.json("payload", || format!("signal {seq} of run `{run_id}`"))?,
        kind: row.text("kind")?,
        sent_at: row.int("sent_at")?,
        consumed_at: row.opt_int("consumed_at")?,
        run_id,
        seq,
    })
}

/// An evidence entry.
pub(crate) fn evidence_entry(row: &dyn Columns) -> Result<EvidenceEntry, StoreError> {
    let run_id = row.text("run_id")?;
    let seq = row.int("seq")?;
    let kind = row.text("kind")?;
    let what = || format!("evidence entry {seq} of run `{run_id}`");
    // Chains number entries 1, 2, ...: an entry with no next number is corrupt, and no
    // chain could go on after it.
    if seq.checked_add(1).is_none() {
        return Err(StoreError::decode(what(), "its sequence number leaves no room for another entry"));
    }
    Ok(EvidenceEntry {
        kind: EvidenceKind::parse(&kind)
            .ok_or_else(|| StoreError::decode(what(), format!("unknown evidence kind `{kind}`")))?,
        call_id: row.opt_text("call_id")?,
        payload: crate::StoredJson::new(row.json("payload", what)?),
        recorded_at: row.int("recorded_at")?,
        prev_hash: row.text("prev_hash")?,
        hash: row.text("hash")?,
        run_id,
        seq,
    })
}

/// A conversation's turn.
pub(crate) fn conversation_turn(row: &dyn Columns) -> Result<ConversationTurn, StoreError> {
    let conversation_id = row.text("conversation_id")?;
    let seq = row.int("seq")?;
    Ok(ConversationTurn {
        message: row.json("message", || format!("turn {seq} of conversation `{conversation_id}`"))?,
        run_id: row.text("run_id")?,
        role: row.text("role")?,
        recorded_at: row.int("recorded_at")?,
        conversation_id,
        seq,
    })
}

/// A lease: `run_id`, `owner`, `epoch` and `expires_at`.
pub(crate) fn lease(row: &dyn Columns) -> Result<Lease, StoreError> {
    Ok(Lease {
        run_id: row.text("run_id")?,
        owner: row.text("owner")?,
        epoch: row.int("epoch")?,
        expires_at: row.int("expires_at")?,
    })
}

/// A run queue's entry.
pub(crate) fn queue_entry(row: &dyn Columns) -> Result<QueueEntry, StoreError> {
    Ok(QueueEntry {
        run_id: row.text("run_id")?,
        available_at: row.int("available_at")?,
        owner: row.opt_text("owner")?,
        epoch: row.int("epoch")?,
        expires_at: row.opt_int("expires_at")?,
    })
}

/// A schedule.
pub(crate) fn schedule(row: &dyn Columns) -> Result<Schedule, StoreError> {
    let id = row.text("id")?;
    let trigger = row.text("trigger_spec")?;
    let target = row.text("target")?;
    Ok(Schedule {
        trigger: serde_json::from_str(&trigger)
            .map_err(|e| StoreError::decode(format!("trigger of schedule `{id}`"), e))?,
        target: serde_json::from_str(&target)
            .map_err(|e| StoreError::decode(format!("target of schedule `{id}`"), e))?,
        next_fire_at: row.int("next_fire_at")?,
        last_fired_at: row.opt_int("last_fired_at")?,
        enabled: row.flag("enabled")?,
        id,
    })
}

/// A memory.
pub(crate) fn memory(row: &dyn Columns) -> Result<MemoryRecord, StoreError> {
    Ok(MemoryRecord {
        id: row.int("id")?,
        namespace: row.text("namespace")?,
        content: row.text("content")?,
        saved_at: row.int("created_at")?,
    })
}

/// An attempt count, stored as an integer.
fn count(row: &dyn Columns, name: &str) -> Result<u32, StoreError> {
    let value = row.int(name)?;
    u32::try_from(value).map_err(|e| StoreError::decode(format!("column `{name}`"), e))
}

/// A team work item, as every statement on `work_items` returns it.
pub(crate) fn work_record(row: &dyn Columns) -> Result<WorkRecord, StoreError> {
    let queue = row.text("queue")?;
    let id = row.text("id")?;
    let what = |name: &str| format!("{name} of work item `{id}` of queue `{queue}`");
    let payload = row.json("payload", || what("the payload"))?;
    let tags = row.texts("tags", &|| what("the tags"))?;
    let result = match row.opt_text("result")? {
        Some(text) => Some(serde_json::from_str(&text).map_err(|e| StoreError::decode(what("the result"), e))?),
        None => None,
    };
    Ok(WorkRecord {
        seq: row.int("seq")?,
        payload,
        priority: row.int("priority")?,
        tags,
        state: stored_state(&row.text("state")?)?,
        attempts: count(row, "attempts")?,
        max_attempts: count(row, "max_attempts")?,
        worker: row.opt_text("worker")?,
        lease_expires_at: row.opt_int("lease_expires_at")?,
        available_at: row.int("available_at")?,
        last_error: row.opt_text("last_error")?,
        result,
        enqueued_at: row.int("enqueued_at")?,
        updated_at: row.int("updated_at")?,
        queue,
        id,
    })
}

/// A count of work items in one state: `state` and `n`.
pub(crate) fn state_count(row: &dyn Columns) -> Result<(crate::work::WorkState, u64), StoreError> {
    let state = stored_state(&row.text("state")?)?;
    Ok((state, u64::try_from(row.int("n")?).unwrap_or(0)))
}
