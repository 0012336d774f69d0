//! Runs, their transitions and their signals; the statements that create a run, store a
//! signal and enqueue a run, shared with the schedules' firings.

use super::evidence::insert_evidence;
use super::{SqliteStore, column, is_foreign_key_violation, is_unique_violation, json_column, json_text};
use crate::error::StoreError;
use crate::record::{
    Checkpoint, Millis, NewRun, RunFilter, RunRecord, RunStatus, RunSummary, StoredSignal, Transition,
};
use crate::repository::{RunRepository, SignalRepository, StoreFuture};
use serde_json::Value;
use sqlx::SqliteConnection;
use sqlx::sqlite::SqliteRow;

impl RunRepository for SqliteStore {
    fn create_run(&self, run: NewRun, now: Millis) -> StoreFuture<'_, ()> {
        Box::pin(self.writes.write(move |conn| Box::pin(async move { insert_run(conn, &run, now).await })))
    }

    fn load_run<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Option<RunRecord>> {
        Box::pin(async move {
            let row = sqlx::query(
                "SELECT id, agent, status, activity, conversation_id, parent_run_id, input, state, created_at, \
                 updated_at FROM runs WHERE id = ?",
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
                   AND (?3 IS NULL OR conversation_id = ?3) \
                 ORDER BY created_at DESC, id DESC LIMIT ?4",
            )
            .bind(filter.status.map(RunStatus::as_str))
            .bind(filter.agent.as_deref())
            .bind(filter.conversation_id.as_deref())
            .bind(limit)
            .fetch_all(&self.pool)
            .await
            .map_err(StoreError::database)?;
            rows.iter().map(run_summary).collect()
        })
    }

    fn checkpoint(&self, checkpoint: Checkpoint, now: Millis) -> StoreFuture<'_, ()> {
        Box::pin(self.writes.write(move |conn| Box::pin(save_checkpoint(conn, checkpoint, now))))
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
        Box::pin(
            self.writes
                .write(move |conn| Box::pin(async move { insert_signal(conn, &run_id, &kind, &payload, now).await })),
        )
    }

    fn pending_signals<'a>(&'a self, run_id: &'a str, after: i64) -> StoreFuture<'a, Vec<StoredSignal>> {
        Box::pin(async move {
            let rows = sqlx::query(
                "SELECT run_id, seq, kind, payload, sent_at, consumed_at FROM signals \
                 WHERE run_id = ? AND seq > ? AND consumed_at IS NULL ORDER BY seq",
            )
            .bind(run_id)
            .bind(after)
            .fetch_all(&self.pool)
            .await
            .map_err(StoreError::database)?;
            rows.iter().map(stored_signal).collect()
        })
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
async fn save_checkpoint(conn: &mut SqliteConnection, checkpoint: Checkpoint, now: Millis) -> Result<(), StoreError> {
    if let Some(lease) = &checkpoint.fence {
        super::queue::check_fence(conn, lease, &checkpoint.run_id).await?;
    }
    let run_id = checkpoint.run_id.as_str();
    let current = sqlx::query("SELECT status, transition_seq, signal_seq FROM runs WHERE id = ?")
        .bind(run_id)
        .fetch_optional(&mut *conn)
        .await
        .map_err(StoreError::database)?
        .ok_or_else(|| StoreError::UnknownRun { run_id: run_id.to_owned() })?;
    let from = status(&current, || format!("status of run `{run_id}`"))?;
    let transition_seq: i64 = column(&current, "transition_seq")?;
    let signal_seq: i64 = column(&current, "signal_seq")?;
    if checkpoint.require_signals_consumed && signal_seq > checkpoint.signals_consumed_through.unwrap_or(0) {
        return Err(StoreError::SignalsPending { run_id: run_id.to_owned() });
    }
    let changed = from != checkpoint.status;
    let state = json_text(&checkpoint.state, "run state")?;
    sqlx::query(
        "UPDATE runs SET status = ?, activity = ?, state = ?, updated_at = ?, \
         transition_seq = transition_seq + ? WHERE id = ?",
    )
    .bind(checkpoint.status.as_str())
    .bind(checkpoint.activity.as_deref())
    .bind(state)
    .bind(now)
    .bind(i64::from(changed))
    .bind(run_id)
    .execute(&mut *conn)
    .await
    .map_err(StoreError::database)?;
    if changed {
        insert_transition(conn, run_id, transition_seq + 1, Some(from), checkpoint.status, now).await?;
    }
    for entry in &checkpoint.evidence {
        insert_evidence(conn, entry).await?;
    }
    if let Some(through) = checkpoint.signals_consumed_through {
        sqlx::query("UPDATE signals SET consumed_at = ? WHERE run_id = ? AND seq <= ? AND consumed_at IS NULL")
            .bind(now)
            .bind(run_id)
            .bind(through)
            .execute(&mut *conn)
            .await
            .map_err(StoreError::database)?;
    }
    if let (true, Some(lease)) = (checkpoint.release, &checkpoint.fence) {
        super::queue::release_lease(conn, lease, None).await?;
    }
    Ok(())
}

/// Creates `run` with its first transition, enqueued at `now` when it is queued.
pub(super) async fn insert_run(conn: &mut SqliteConnection, run: &NewRun, now: Millis) -> Result<(), StoreError> {
    let input = json_text(&run.input, "run input")?;
    let state = json_text(&run.state, "run state")?;
    sqlx::query(
        "INSERT INTO runs (id, agent, status, activity, conversation_id, parent_run_id, input, state, signal_seq, \
         transition_seq, created_at, updated_at) VALUES (?, ?, ?, NULL, ?, ?, ?, ?, 0, 1, ?, ?)",
    )
    .bind(&run.id)
    .bind(&run.agent)
    .bind(run.status.as_str())
    .bind(run.conversation_id.as_deref())
    .bind(run.parent_run_id.as_deref())
    .bind(input)
    .bind(state)
    .bind(now)
    .bind(now)
    .execute(&mut *conn)
    .await
    .map_err(|e| {
        if is_unique_violation(&e) { StoreError::RunExists { run_id: run.id.clone() } } else { StoreError::database(e) }
    })?;
    insert_transition(conn, &run.id, 1, None, run.status, now).await?;
    if run.status == RunStatus::Queued {
        upsert_queue(conn, &run.id, now).await?;
    }
    Ok(())
}

/// Stores a signal for `run_id` under the run's next sequence number, and returns it.
pub(super) async fn insert_signal(
    conn: &mut SqliteConnection,
    run_id: &str,
    kind: &str,
    payload: &Value,
    now: Millis,
) -> Result<i64, StoreError> {
    let bumped: Option<i64> = sqlx::query_scalar(
        "UPDATE runs SET signal_seq = signal_seq + 1 WHERE id = ? AND status IN ('queued', 'running', 'paused') \
         RETURNING signal_seq",
    )
    .bind(run_id)
    .fetch_optional(&mut *conn)
    .await
    .map_err(StoreError::database)?;
    let Some(seq) = bumped else {
        // Unknown, or ended: an ended run takes no signal it could never apply.
        let status: Option<String> = sqlx::query_scalar("SELECT status FROM runs WHERE id = ?")
            .bind(run_id)
            .fetch_optional(&mut *conn)
            .await
            .map_err(StoreError::database)?;
        return Err(match status {
            Some(status) => StoreError::RunEnded { run_id: run_id.to_owned(), status },
            None => StoreError::UnknownRun { run_id: run_id.to_owned() },
        });
    };
    sqlx::query("INSERT INTO signals (run_id, seq, kind, payload, sent_at, consumed_at) VALUES (?, ?, ?, ?, ?, NULL)")
        .bind(run_id)
        .bind(seq)
        .bind(kind)
        .bind(payload.to_string())
        .bind(now)
        .execute(&mut *conn)
        .await
        .map_err(StoreError::database)?;
    Ok(seq)
}

/// Puts `run_id` in the queue from `available_at`, moving it if it waits there unleased.
pub(super) async fn upsert_queue(
    conn: &mut SqliteConnection,
    run_id: &str,
    available_at: Millis,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO run_queue (run_id, available_at, owner, epoch, expires_at) VALUES (?, ?, NULL, 0, NULL) \
         ON CONFLICT (run_id) DO UPDATE SET available_at = excluded.available_at WHERE run_queue.owner IS NULL",
    )
    .bind(run_id)
    .bind(available_at)
    .execute(&mut *conn)
    .await
    .map_err(|e| {
        if is_foreign_key_violation(&e) {
            StoreError::UnknownRun { run_id: run_id.to_owned() }
        } else {
            StoreError::database(e)
        }
    })?;
    Ok(())
}

async fn insert_transition(
    conn: &mut SqliteConnection,
    run_id: &str,
    seq: i64,
    from: Option<RunStatus>,
    to: RunStatus,
    at: Millis,
) -> Result<(), StoreError> {
    sqlx::query("INSERT INTO run_transitions (run_id, seq, from_status, to_status, at) VALUES (?, ?, ?, ?, ?)")
        .bind(run_id)
        .bind(seq)
        .bind(from.map(RunStatus::as_str))
        .bind(to.as_str())
        .bind(at)
        .execute(&mut *conn)
        .await
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
