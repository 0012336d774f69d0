//! Runs, their transitions and their signals.

use super::log::insert_evidence;
use super::queue::enqueue_on;
use super::{PostgresStore, db, get, hold_fence, is_unique_violation, json_column, lease_lost, parse_status};
use crate::error::StoreError;
use crate::record::{
    Checkpoint, EvidenceHead, Flush, Millis, NewRun, RunFilter, RunRecord, RunStatus, RunSummary, SavedCheckpoint,
    StoredSignal, Transition,
};
use crate::repository::{RunRepository, SignalRepository, StoreFuture};
use serde_json::Value;
use sqlx::postgres::{PgConnection, PgRow};

/// Creates `run` with its first transition, and enqueues it when it is queued.
pub(super) async fn insert_run(conn: &mut PgConnection, run: &NewRun, now: Millis) -> Result<(), StoreError> {
    let inserted = sqlx::query(
        "INSERT INTO runs (id, agent, status, activity, conversation_id, parent_run_id, input, state, \
         signal_seq, transition_seq, created_at, updated_at) \
         VALUES ($1, $2, $3, NULL, $4, $5, $6, $7, 0, 1, $8, $8)",
    )
    .bind(&run.id)
    .bind(&run.agent)
    .bind(run.status.as_str())
    .bind(run.conversation_id.as_deref())
    .bind(run.parent_run_id.as_deref())
    .bind(run.input.to_string())
    .bind(run.state.to_string())
    .bind(now)
    .execute(&mut *conn)
    .await;
    match inserted {
        Err(e) if is_unique_violation(&e) => return Err(StoreError::RunExists { run_id: run.id.clone() }),
        Err(e) => return Err(db(e)),
        Ok(_) => {}
    }
    sqlx::query("INSERT INTO run_transitions (run_id, seq, from_status, to_status, at) VALUES ($1, 1, NULL, $2, $3)")
        .bind(&run.id)
        .bind(run.status.as_str())
        .bind(now)
        .execute(&mut *conn)
        .await
        .map_err(db)?;
    if run.status == RunStatus::Queued {
        enqueue_on(&mut *conn, &run.id, now).await?;
    }
    Ok(())
}

/// Stores a signal for `run_id` and returns its sequence number. Bumping the run's
/// counter locks its row, which orders concurrent senders; all in one statement.
pub(super) async fn insert_signal(
    conn: &mut PgConnection,
    run_id: &str,
    kind: &str,
    payload: &Value,
    now: Millis,
) -> Result<i64, StoreError> {
    let seq: Option<i64> = sqlx::query_scalar(
        "WITH bumped AS (UPDATE runs SET signal_seq = signal_seq + 1 \
         WHERE id = $1 AND status IN ('queued', 'running', 'paused') RETURNING signal_seq) \
         INSERT INTO signals (run_id, seq, kind, payload, sent_at, consumed_at) \
         SELECT $1, signal_seq, $2, $3, $4, NULL FROM bumped RETURNING seq",
    )
    .bind(run_id)
    .bind(kind)
    .bind(payload.to_string())
    .bind(now)
    .fetch_optional(&mut *conn)
    .await
    .map_err(db)?;
    if let Some(seq) = seq {
        return Ok(seq);
    }
    // Unknown, or ended: an ended run takes no signal it could never apply.
    let status: Option<String> = sqlx::query_scalar("SELECT status FROM runs WHERE id = $1")
        .bind(run_id)
        .fetch_optional(&mut *conn)
        .await
        .map_err(db)?;
    Err(match status {
        Some(status) => StoreError::RunEnded { run_id: run_id.to_owned(), status },
        None => StoreError::UnknownRun { run_id: run_id.to_owned() },
    })
}

fn run_summary(row: &PgRow) -> Result<RunSummary, StoreError> {
    let id: String = get(row, "id")?;
    let status: String = get(row, "status")?;
    Ok(RunSummary {
        status: parse_status(&status, || format!("status of run `{id}`"))?,
        agent: get(row, "agent")?,
        activity: get(row, "activity")?,
        conversation_id: get(row, "conversation_id")?,
        parent_run_id: get(row, "parent_run_id")?,
        created_at: get(row, "created_at")?,
        updated_at: get(row, "updated_at")?,
        id,
    })
}

fn run_record(row: &PgRow) -> Result<RunRecord, StoreError> {
    let summary = run_summary(row)?;
    let input = json_column(row, "input", || format!("input of run `{}`", summary.id))?;
    let state = json_column(row, "state", || format!("state of run `{}`", summary.id))?;
    let evidence_head = EvidenceHead { seq: get(row, "evidence_seq")?, hash: get(row, "evidence_hash")? };
    let RunSummary { id, agent, status, activity, conversation_id, parent_run_id, created_at, updated_at } = summary;
    Ok(RunRecord {
        id,
        agent,
        status,
        activity,
        conversation_id,
        parent_run_id,
        input,
        state,
        created_at,
        updated_at,
        evidence_head,
    })
}

fn signal(row: &PgRow) -> Result<StoredSignal, StoreError> {
    let run_id: String = get(row, "run_id")?;
    let seq: i64 = get(row, "seq")?;
    Ok(StoredSignal {
        payload: json_column(row, "payload", || format!("signal {seq} of run `{run_id}`"))?,
        kind: get(row, "kind")?,
        sent_at: get(row, "sent_at")?,
        consumed_at: get(row, "consumed_at")?,
        run_id,
        seq,
    })
}

async fn save_checkpoint(conn: &mut PgConnection, cp: &Checkpoint, now: Millis) -> Result<SavedCheckpoint, StoreError> {
    if let Some(lease) = &cp.fence {
        if lease.run_id != cp.run_id {
            return Err(lease_lost(&cp.run_id, lease));
        }
        hold_fence(&mut *conn, lease).await?;
    }
    // NO KEY UPDATE, not UPDATE: inserting a signal (whose foreign key share-locks the
    // run) need not wait for the checkpoint.
    let before: Option<(String, i64)> =
        sqlx::query_as("SELECT status, signal_seq FROM runs WHERE id = $1 FOR NO KEY UPDATE")
            .bind(&cp.run_id)
            .fetch_optional(&mut *conn)
            .await
            .map_err(db)?;
    let Some((before, signal_seq)) = before else { return Err(StoreError::UnknownRun { run_id: cp.run_id.clone() }) };
    // The row lock orders this against `insert_signal`'s bump of `signal_seq`.
    if cp.require_signals_consumed && signal_seq > cp.signals_consumed_through.unwrap_or(0) {
        return Err(StoreError::SignalsPending { run_id: cp.run_id.clone() });
    }
    let before = parse_status(&before, || format!("status of run `{}`", cp.run_id))?;
    let changed = before != cp.status;
    let transition_seq: i64 = sqlx::query_scalar(
        "UPDATE runs SET status = $2, activity = $3, state = $4, updated_at = $5, \
         transition_seq = transition_seq + $6 WHERE id = $1 RETURNING transition_seq",
    )
    .bind(&cp.run_id)
    .bind(cp.status.as_str())
    .bind(cp.activity.as_deref())
    .bind(cp.state.get())
    .bind(now)
    .bind(i64::from(changed))
    .fetch_one(&mut *conn)
    .await
    .map_err(db)?;
    if changed {
        sqlx::query(
            "INSERT INTO run_transitions (run_id, seq, from_status, to_status, at) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(&cp.run_id)
        .bind(transition_seq)
        .bind(before.as_str())
        .bind(cp.status.as_str())
        .bind(now)
        .execute(&mut *conn)
        .await
        .map_err(db)?;
    }
    for entry in &cp.evidence {
        insert_evidence(&mut *conn, entry).await?;
    }
    if let Some(through) = cp.signals_consumed_through {
        sqlx::query("UPDATE signals SET consumed_at = $3 WHERE run_id = $1 AND seq <= $2 AND consumed_at IS NULL")
            .bind(&cp.run_id)
            .bind(through)
            .bind(now)
            .execute(&mut *conn)
            .await
            .map_err(db)?;
    }
    if let (true, Some(lease)) = (cp.release, &cp.fence) {
        super::queue::release_on(&mut *conn, lease, None).await?;
    }
    // The row lock holds back any signal (its bump of `signal_seq`) until this commits.
    Ok(SavedCheckpoint { latest_signal: signal_seq })
}

impl RunRepository for PostgresStore {
    fn create_run(&self, run: NewRun, now: Millis) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            let mut tx = self.pool.begin().await.map_err(db)?;
            insert_run(&mut tx, &run, now).await?;
            tx.commit().await.map_err(db)
        })
    }

    fn load_run<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Option<RunRecord>> {
        Box::pin(async move {
            let row = sqlx::query(
                "SELECT id, agent, status, activity, conversation_id, parent_run_id, input, state, \
                 created_at, updated_at, COALESCE(h.seq, 0) AS evidence_seq, COALESCE(h.hash, '') AS evidence_hash \
                 FROM runs LEFT JOIN evidence_heads h ON h.run_id = runs.id WHERE id = $1",
            )
            .bind(run_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(db)?;
            row.as_ref().map(run_record).transpose()
        })
    }

    fn list_runs<'a>(&'a self, filter: &'a RunFilter) -> StoreFuture<'a, Vec<RunSummary>> {
        Box::pin(async move {
            // LIMIT NULL is no limit.
            let limit = (filter.limit > 0).then_some(i64::from(filter.limit));
            let rows = sqlx::query(
                "SELECT id, agent, status, activity, conversation_id, parent_run_id, created_at, updated_at \
                 FROM runs WHERE ($1::text IS NULL OR status = $1) AND ($2::text IS NULL OR agent = $2) \
                 AND ($3::text IS NULL OR conversation_id = $3) AND ($5::text IS NULL OR parent_run_id = $5) \
                 AND ($6::text IS NULL OR (id >= $6 AND left(id, length($6)) = $6)) \
                 ORDER BY created_at DESC, id DESC LIMIT $4",
            )
            .bind(filter.status.map(RunStatus::as_str))
            .bind(filter.agent.as_deref())
            .bind(filter.conversation_id.as_deref())
            .bind(limit)
            .bind(filter.parent_run_id.as_deref())
            .bind(filter.id_prefix.as_deref())
            .fetch_all(&self.pool)
            .await
            .map_err(db)?;
            rows.iter().map(run_summary).collect()
        })
    }

    fn checkpoint(&self, checkpoint: Checkpoint, now: Millis) -> StoreFuture<'_, SavedCheckpoint> {
        Box::pin(async move {
            let mut tx = self.pool.begin().await.map_err(db)?;
            if checkpoint.flush == Flush::WithNextFlush {
                // The commit returns before its WAL record is flushed; a later commit that
                // waits for its own flush takes this one with it.
                sqlx::query("SET LOCAL synchronous_commit = off").execute(&mut *tx).await.map_err(db)?;
            }
            let saved = save_checkpoint(&mut tx, &checkpoint, now).await?;
            tx.commit().await.map_err(db)?;
            Ok(saved)
        })
    }

    fn transitions<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Vec<Transition>> {
        Box::pin(async move {
            let rows = sqlx::query(
                "SELECT seq, from_status, to_status, at FROM run_transitions WHERE run_id = $1 ORDER BY seq",
            )
            .bind(run_id)
            .fetch_all(&self.pool)
            .await
            .map_err(db)?;
            rows.iter()
                .map(|row| {
                    let seq: i64 = get(row, "seq")?;
                    let what = || format!("transition {seq} of run `{run_id}`");
                    let from: Option<String> = get(row, "from_status")?;
                    let to: String = get(row, "to_status")?;
                    Ok(Transition {
                        run_id: run_id.to_owned(),
                        seq,
                        from: from.map(|f| parse_status(&f, what)).transpose()?,
                        to: parse_status(&to, what)?,
                        at: get(row, "at")?,
                    })
                })
                .collect()
        })
    }
}

impl SignalRepository for PostgresStore {
    fn send_signal<'a>(&'a self, run_id: &'a str, kind: &'a str, payload: Value, now: Millis) -> StoreFuture<'a, i64> {
        Box::pin(async move {
            let mut conn = self.pool.acquire().await.map_err(db)?;
            insert_signal(&mut conn, run_id, kind, &payload, now).await
        })
    }

    fn pending_signals<'a>(&'a self, run_id: &'a str, after: i64) -> StoreFuture<'a, Vec<StoredSignal>> {
        Box::pin(async move {
            let rows = sqlx::query(
                "SELECT run_id, seq, kind, payload, sent_at, consumed_at FROM signals \
                 WHERE run_id = $1 AND seq > $2 AND consumed_at IS NULL ORDER BY seq",
            )
            .bind(run_id)
            .bind(after)
            .fetch_all(&self.pool)
            .await
            .map_err(db)?;
            rows.iter().map(signal).collect()
        })
    }

    fn signals<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Vec<StoredSignal>> {
        Box::pin(async move {
            let rows = sqlx::query(
                "SELECT run_id, seq, kind, payload, sent_at, consumed_at FROM signals WHERE run_id = $1 ORDER BY seq",
            )
            .bind(run_id)
            .fetch_all(&self.pool)
            .await
            .map_err(db)?;
            rows.iter().map(signal).collect()
        })
    }
}
