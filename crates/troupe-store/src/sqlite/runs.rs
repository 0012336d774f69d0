//! Runs, their transitions and their signals. Reads go through the pool; writes (and the
//! look for pending signals, asked at every boundary of a run) run on the writer thread:
//! the statements that create a run, checkpoint it, store a signal and enqueue a run,
//! shared with the schedules' firings.

use super::evidence::insert_evidence;
use super::writer::execute;
use super::{SqliteStore, column, is_foreign_key, is_unique, json_column, json_text};
use crate::error::StoreError;
use crate::record::{
    Checkpoint, EvidenceHead, Millis, NewRun, RunFilter, RunRecord, RunStatus, RunSummary, SavedCheckpoint,
    StoredSignal, Transition,
};
use crate::repository::{RunRepository, SignalRepository, StoreFuture};
use rusqlite::{Connection, OptionalExtension, params};
use serde_json::Value;
use sqlx::sqlite::SqliteRow;

impl RunRepository for SqliteStore {
    fn create_run(&self, run: NewRun, now: Millis) -> StoreFuture<'_, ()> {
        Box::pin(self.writer.write(move |conn| insert_run(conn, &run, now)))
    }

    fn load_run<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Option<RunRecord>> {
        Box::pin(async move {
            let row = sqlx::query(
                "SELECT id, agent, status, activity, conversation_id, parent_run_id, input, state, created_at, \
                 updated_at, COALESCE(h.seq, 0) AS evidence_seq, COALESCE(h.hash, '') AS evidence_hash \
                 FROM runs LEFT JOIN evidence_heads h ON h.run_id = runs.id WHERE id = ?",
            )
            .bind(run_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(StoreError::database)?;
            row.as_ref().map(run_record).transpose()
        })
    }

    fn list_runs<'a>(&'a self, filter: &'a RunFilter) -> StoreFuture<'a, Vec<RunSummary>> {
        Box::pin(async move {
            // A negative LIMIT is no limit in SQLite.
            let limit = if filter.limit == 0 { -1 } else { i64::from(filter.limit) };
            let rows = sqlx::query(
                "SELECT id, agent, status, activity, conversation_id, parent_run_id, created_at, updated_at \
                 FROM runs \
                 WHERE (?1 IS NULL OR status = ?1) AND (?2 IS NULL OR agent = ?2) \
                   AND (?3 IS NULL OR conversation_id = ?3) AND (?5 IS NULL OR parent_run_id = ?5) \
                   AND (?6 IS NULL OR (id >= ?6 AND substr(id, 1, length(?6)) = ?6)) \
                 ORDER BY created_at DESC, id DESC LIMIT ?4",
            )
            .bind(filter.status.map(RunStatus::as_str))
            .bind(filter.agent.as_deref())
            .bind(filter.conversation_id.as_deref())
            .bind(limit)
            .bind(filter.parent_run_id.as_deref())
            .bind(filter.id_prefix.as_deref())
            .fetch_all(&self.pool)
            .await
            .map_err(StoreError::database)?;
            rows.iter().map(run_summary).collect()
        })
    }

    fn checkpoint(&self, checkpoint: Checkpoint, now: Millis) -> StoreFuture<'_, SavedCheckpoint> {
        Box::pin(self.writer.write_flushed(checkpoint.flush, move |conn| save_checkpoint(conn, &checkpoint, now)))
    }

    fn transitions<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Vec<Transition>> {
        Box::pin(async move {
            let rows = sqlx::query(
                "SELECT run_id, seq, from_status, to_status, at FROM run_transitions WHERE run_id = ? ORDER BY seq",
            )
            .bind(run_id)
            .fetch_all(&self.pool)
            .await
            .map_err(StoreError::database)?;
            rows.iter()
                .map(|row| {
                    let seq: i64 = column(row, "seq")?;
                    let what = || format!("transition {seq} of run `{run_id}`");
                    let from: Option<String> = column(row, "from_status")?;
                    let from = from.map(|name| parse_status(&name, what)).transpose()?;
                    let to: String = column(row, "to_status")?;
                    Ok(Transition {
                        run_id: column(row, "run_id")?,
                        seq,
                        from,
                        to: parse_status(&to, what)?,
                        at: column(row, "at")?,
                    })
                })
                .collect()
        })
    }
}

impl SignalRepository for SqliteStore {
    fn send_signal<'a>(&'a self, run_id: &'a str, kind: &'a str, payload: Value, now: Millis) -> StoreFuture<'a, i64> {
        let run_id = run_id.to_owned();
        let kind = kind.to_owned();
        Box::pin(self.writer.write(move |conn| insert_signal(conn, &run_id, &kind, &payload, now)))
    }

    fn pending_signals<'a>(&'a self, run_id: &'a str, after: i64) -> StoreFuture<'a, Vec<StoredSignal>> {
        let run_id = run_id.to_owned();
        Box::pin(self.writer.read(move |conn| pending_signals(conn, &run_id, after)))
    }

    fn signals<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Vec<StoredSignal>> {
        Box::pin(async move {
            let rows = sqlx::query(
                "SELECT run_id, seq, kind, payload, sent_at, consumed_at FROM signals WHERE run_id = ? ORDER BY seq",
            )
            .bind(run_id)
            .fetch_all(&self.pool)
            .await
            .map_err(StoreError::database)?;
            rows.iter().map(stored_signal).collect()
        })
    }
}

/// Saves `checkpoint` in the transaction `conn` is in.
fn save_checkpoint(conn: &Connection, checkpoint: &Checkpoint, now: Millis) -> Result<SavedCheckpoint, StoreError> {
    if let Some(lease) = &checkpoint.fence {
        super::queue::check_fence(conn, lease, &checkpoint.run_id)?;
    }
    let run_id = checkpoint.run_id.as_str();
    let current: Option<(String, i64, i64)> = conn
        .prepare_cached("SELECT status, transition_seq, signal_seq FROM runs WHERE id = ?1")
        .and_then(|mut select| select.query_row([run_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).optional())
        .map_err(StoreError::database)?;
    let Some((from, transition_seq, signal_seq)) = current else {
        return Err(StoreError::UnknownRun { run_id: run_id.to_owned() });
    };
    let from = parse_status(&from, || format!("status of run `{run_id}`"))?;
    if checkpoint.require_signals_consumed && signal_seq > checkpoint.signals_consumed_through.unwrap_or(0) {
        return Err(StoreError::SignalsPending { run_id: run_id.to_owned() });
    }
    let changed = from != checkpoint.status;
    execute(
        conn,
        "UPDATE runs SET status = ?1, activity = ?2, state = ?3, updated_at = ?4, \
         transition_seq = transition_seq + ?5 WHERE id = ?6",
        params![
            checkpoint.status.as_str(),
            checkpoint.activity,
            checkpoint.state.get(),
            now,
            i64::from(changed),
            run_id
        ],
    )
    .map_err(StoreError::database)?;
    if changed {
        insert_transition(conn, run_id, transition_seq + 1, Some(from), checkpoint.status, now)?;
    }
    for entry in &checkpoint.evidence {
        insert_evidence(conn, entry)?;
    }
    if let Some(through) = checkpoint.signals_consumed_through {
        execute(
            conn,
            "UPDATE signals SET consumed_at = ?1 WHERE run_id = ?2 AND seq <= ?3 AND consumed_at IS NULL",
            params![now, run_id, through],
        )
        .map_err(StoreError::database)?;
    }
    if let (true, Some(lease)) = (checkpoint.release, &checkpoint.fence) {
        super::queue::release_lease(conn, lease, None)?;
    }
    // The writer thread is the only writer: no signal can come between the read above
    // and this transaction's commit.
    Ok(SavedCheckpoint { latest_signal: signal_seq })
}

/// Creates `run` with its first transition, enqueued at `now` when it is queued.
pub(super) fn insert_run(conn: &Connection, run: &NewRun, now: Millis) -> Result<(), StoreError> {
    let input = json_text(&run.input, "run input")?;
    let state = json_text(&run.state, "run state")?;
    execute(
        conn,
        "INSERT INTO runs (id, agent, status, activity, conversation_id, parent_run_id, input, state, signal_seq, \
         transition_seq, created_at, updated_at) VALUES (?1, ?2, ?3, NULL, ?4, ?5, ?6, ?7, 0, 1, ?8, ?8)",
        params![run.id, run.agent, run.status.as_str(), run.conversation_id, run.parent_run_id, input, state, now],
    )
    .map_err(|e| {
        if is_unique(&e) { StoreError::RunExists { run_id: run.id.clone() } } else { StoreError::database(e) }
    })?;
    insert_transition(conn, &run.id, 1, None, run.status, now)?;
    if run.status == RunStatus::Queued {
        upsert_queue(conn, &run.id, now)?;
    }
    Ok(())
}

/// Stores a signal for `run_id` under the run's next sequence number, and returns it.
pub(super) fn insert_signal(
    conn: &Connection,
    run_id: &str,
    kind: &str,
    payload: &Value,
    now: Millis,
) -> Result<i64, StoreError> {
    let bumped: Option<i64> = conn
        .prepare_cached(
            "UPDATE runs SET signal_seq = signal_seq + 1 WHERE id = ?1 AND status IN ('queued', 'running', 'paused') \
             RETURNING signal_seq",
        )
        .and_then(|mut bump| bump.query_row([run_id], |r| r.get(0)).optional())
        .map_err(StoreError::database)?;
    let Some(seq) = bumped else {
        // Unknown, or ended: an ended run takes no signal it could never apply.
        let status: Option<String> = conn
            .prepare_cached("SELECT status FROM runs WHERE id = ?1")
            .and_then(|mut select| select.query_row([run_id], |r| r.get(0)).optional())
            .map_err(StoreError::database)?;
        return Err(match status {
            Some(status) => StoreError::RunEnded { run_id: run_id.to_owned(), status },
            None => StoreError::UnknownRun { run_id: run_id.to_owned() },
        });
    };
    execute(
        conn,
        "INSERT INTO signals (run_id, seq, kind, payload, sent_at, consumed_at) VALUES (?1, ?2, ?3, ?4, ?5, NULL)",
        params![run_id, seq, kind, payload.to_string(), now],
    )
    .map_err(StoreError::database)?;
    Ok(seq)
}

/// The signals of `run_id` after `after` not yet consumed, in order.
fn pending_signals(conn: &Connection, run_id: &str, after: i64) -> Result<Vec<StoredSignal>, StoreError> {
    let mut select = conn
        .prepare_cached(
            "SELECT seq, kind, payload, sent_at, consumed_at FROM signals \
             WHERE run_id = ?1 AND seq > ?2 AND consumed_at IS NULL ORDER BY seq",
        )
        .map_err(StoreError::database)?;
    let rows = select
        .query_map(params![run_id, after], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?, r.get(3)?, r.get(4)?))
        })
        .map_err(StoreError::database)?;
    rows.map(|row| {
        let (seq, kind, payload, sent_at, consumed_at) = row.map_err(StoreError::database)?;
        Ok(StoredSignal {
            payload: serde_json::from_str(&payload)
                .map_err(|e| StoreError::decode(format!("signal {seq} of run `{run_id}`"), e))?,
            run_id: run_id.to_owned(),
            seq,
            kind,
            sent_at,
            consumed_at,
        })
    })
    .collect()
}

/// Puts `run_id` in the queue from `available_at`, moving it if it waits there unleased.
pub(super) fn upsert_queue(conn: &Connection, run_id: &str, available_at: Millis) -> Result<(), StoreError> {
    execute(
        conn,
        "INSERT INTO run_queue (run_id, available_at, owner, epoch, expires_at) VALUES (?1, ?2, NULL, 0, NULL) \
         ON CONFLICT (run_id) DO UPDATE SET available_at = excluded.available_at WHERE run_queue.owner IS NULL",
        params![run_id, available_at],
    )
    .map_err(|e| unknown_run_or(e, run_id))?;
    Ok(())
}

/// A refused reference to a missing run as [`StoreError::UnknownRun`], any other error as
/// it is.
pub(super) fn unknown_run_or(error: rusqlite::Error, run_id: &str) -> StoreError {
    if is_foreign_key(&error) {
        StoreError::UnknownRun { run_id: run_id.to_owned() }
    } else {
        StoreError::database(error)
    }
}

fn insert_transition(
    conn: &Connection,
    run_id: &str,
    seq: i64,
    from: Option<RunStatus>,
    to: RunStatus,
    at: Millis,
) -> Result<(), StoreError> {
    execute(
        conn,
        "INSERT INTO run_transitions (run_id, seq, from_status, to_status, at) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![run_id, seq, from.map(RunStatus::as_str), to.as_str(), at],
    )
    .map_err(StoreError::database)?;
    Ok(())
}

fn run_record(row: &SqliteRow) -> Result<RunRecord, StoreError> {
    let id: String = column(row, "id")?;
    Ok(RunRecord {
        status: status(row, || format!("status of run `{id}`"))?,
        agent: column(row, "agent")?,
        activity: column(row, "activity")?,
        conversation_id: column(row, "conversation_id")?,
        parent_run_id: column(row, "parent_run_id")?,
        input: json_column(row, "input", || format!("input of run `{id}`"))?,
        state: json_column(row, "state", || format!("state of run `{id}`"))?,
        created_at: column(row, "created_at")?,
        updated_at: column(row, "updated_at")?,
        evidence_head: EvidenceHead { seq: column(row, "evidence_seq")?, hash: column(row, "evidence_hash")? },
        id,
    })
}

fn run_summary(row: &SqliteRow) -> Result<RunSummary, StoreError> {
    let id: String = column(row, "id")?;
    Ok(RunSummary {
        status: status(row, || format!("status of run `{id}`"))?,
        agent: column(row, "agent")?,
        activity: column(row, "activity")?,
        conversation_id: column(row, "conversation_id")?,
        parent_run_id: column(row, "parent_run_id")?,
        created_at: column(row, "created_at")?,
        updated_at: column(row, "updated_at")?,
        id,
    })
}

fn stored_signal(row: &SqliteRow) -> Result<StoredSignal, StoreError> {
    let run_id: String = column(row, "run_id")?;
    let seq: i64 = column(row, "seq")?;
    Ok(StoredSignal {
        payload: json_column(row, "payload", || format!("signal {seq} of run `{run_id}`"))?,
        kind: column(row, "kind")?,
        sent_at: column(row, "sent_at")?,
        consumed_at: column(row, "consumed_at")?,
        run_id,
        seq,
    })
}

/// The run status in the row's `status` column.
fn status(row: &SqliteRow, what: impl FnOnce() -> String) -> Result<RunStatus, StoreError> {
    let name: String = column(row, "status")?;
    parse_status(&name, what)
}

fn parse_status(name: &str, what: impl FnOnce() -> String) -> Result<RunStatus, StoreError> {
    RunStatus::parse(name).ok_or_else(|| StoreError::decode(what(), format!("unknown run status `{name}`")))
}
