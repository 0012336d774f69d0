//! Team work queues on PostgreSQL. A claim locks its candidate with `FOR UPDATE SKIP
//! LOCKED`: concurrent claimers each take a different item, and one whose candidate was
//! claimed meanwhile moves on to the next. Every other change is a single statement.

use super::{PostgresStore, db, expiry, get, is_unique_violation};
use crate::error::StoreError;
use crate::record::Millis;
use crate::repository::{StoreFuture, WorkItemRepository};
use crate::work::{HolderOp, NewWork, WorkRecord, WorkState, WorkStats, refusal, stored_state};
use serde_json::Value;
use sqlx::Postgres;
use sqlx::postgres::{PgArguments, PgExecutor, PgRow};
use sqlx::query::Query;
use std::time::Duration;

/// The columns of a [`WorkRecord`], as every statement returns them.
macro_rules! columns {
    () => {
        "seq, queue, id, payload, priority, tags, state, attempts, max_attempts, worker, lease_expires_at, \
         available_at, last_error, result, enqueued_at, updated_at"
    };
}

/// The item held by `$3` with a live lease at `$4`: what every holder's operation updates.
macro_rules! held_by_worker {
    ($states:literal) => {
        concat!(
            " WHERE queue = $1 AND id = $2 AND worker = $3 AND state IN (",
            $states,
            ") AND lease_expires_at > $4 RETURNING ",
            columns!()
        )
    };
}

const START: &str = concat!("UPDATE work_items SET state = 'running', updated_at = $4", held_by_worker!("'claimed'"));

const HEARTBEAT: &str =
    concat!("UPDATE work_items SET lease_expires_at = $5, updated_at = $4", held_by_worker!("'claimed', 'running'"));

const COMPLETE: &str = concat!(
    "UPDATE work_items SET state = 'done', result = $5, last_error = NULL, lease_expires_at = NULL, updated_at = $4",
    held_by_worker!("'claimed', 'running'")
);

// A failed item keeps its last worker; one going back to the queue is nobody's.
const FAIL: &str = concat!(
    "UPDATE work_items SET state = CASE WHEN attempts >= max_attempts THEN 'failed' ELSE 'queued' END, \
     worker = CASE WHEN attempts >= max_attempts THEN worker ELSE NULL END, \
     lease_expires_at = NULL, last_error = $5, updated_at = $4",
    held_by_worker!("'claimed', 'running'")
);

impl WorkItemRepository for PostgresStore {
    fn enqueue_work<'a>(&'a self, item: &'a NewWork, now: Millis) -> StoreFuture<'a, WorkRecord> {
        Box::pin(async move {
            let row = sqlx::query(concat!(
                "INSERT INTO work_items (queue, id, payload, priority, tags, state, attempts, max_attempts, \
                 available_at, enqueued_at, updated_at) VALUES ($1, $2, $3, $4, $5, 'queued', 0, $6, $7, $8, $8) \
                 RETURNING ",
                columns!()
            ))
            .bind(&item.queue)
            .bind(&item.id)
            .bind(item.payload.to_string())
            .bind(item.priority)
            .bind(&item.tags)
            .bind(i64::from(item.max_attempts.max(1)))
            .bind(item.available_at)
            .bind(now)
            .fetch_one(&self.pool)
            .await
            .map_err(|e| {
                if is_unique_violation(&e) {
                    StoreError::WorkItemExists { queue: item.queue.clone(), id: item.id.clone() }
                } else {
                    db(e)
                }
            })?;
            work_record(&row)
        })
    }

    fn claim_work<'a>(
        &'a self,
        queue: &'a str,
        worker: &'a str,
        tags: &'a [String],
        ttl: Duration,
        now: Millis,
    ) -> StoreFuture<'a, Option<WorkRecord>> {
        Box::pin(async move {
            let mut tx = self.pool.begin().await.map_err(db)?;
            expire(&mut *tx, queue, now).await?;
            let row = sqlx::query(concat!(
                "UPDATE work_items SET state = 'claimed', worker = $2, lease_expires_at = $3, \
                 attempts = attempts + 1, updated_at = $4 \
                 WHERE seq = (SELECT seq FROM work_items \
                   WHERE queue = $1 AND state = 'queued' AND available_at <= $4 \
                     AND (cardinality($5::text[]) = 0 OR tags && $5::text[]) \
                   ORDER BY priority DESC, seq LIMIT 1 FOR UPDATE SKIP LOCKED) \
                 RETURNING ",
                columns!()
            ))
            .bind(queue)
            .bind(worker)
            .bind(expiry(now, ttl))
            .bind(now)
            .bind(tags)
            .fetch_optional(&mut *tx)
            .await
            .map_err(db)?;
            let claimed = row.as_ref().map(work_record).transpose()?;
            tx.commit().await.map_err(db)?;
            Ok(claimed)
        })
    }

    fn start_work<'a>(
        &'a self,
        queue: &'a str,
        id: &'a str,
        worker: &'a str,
        now: Millis,
    ) -> StoreFuture<'a, WorkRecord> {
        Box::pin(async move {
            let query = held(START, queue, id, worker, now);
            self.by_holder(query, queue, id, worker, HolderOp::Start, now).await
        })
    }

    fn heartbeat_work<'a>(
        &'a self,
        queue: &'a str,
        id: &'a str,
        worker: &'a str,
        ttl: Duration,
        now: Millis,
    ) -> StoreFuture<'a, WorkRecord> {
        Box::pin(async move {
            let query = held(HEARTBEAT, queue, id, worker, now).bind(expiry(now, ttl));
            self.by_holder(query, queue, id, worker, HolderOp::Heartbeat, now).await
        })
    }

    fn complete_work<'a>(
        &'a self,
        queue: &'a str,
        id: &'a str,
        worker: &'a str,
        result: &'a Value,
        now: Millis,
    ) -> StoreFuture<'a, WorkRecord> {
        Box::pin(async move {
            let query = held(COMPLETE, queue, id, worker, now).bind(result.to_string());
            self.by_holder(query, queue, id, worker, HolderOp::Complete, now).await
        })
    }

    fn fail_work<'a>(
        &'a self,
        queue: &'a str,
        id: &'a str,
        worker: &'a str,
        error: &'a str,
        now: Millis,
    ) -> StoreFuture<'a, WorkRecord> {
        Box::pin(async move {
            let query = held(FAIL, queue, id, worker, now).bind(error);
            self.by_holder(query, queue, id, worker, HolderOp::Fail, now).await
        })
    }

    fn expire_work_leases<'a>(&'a self, queue: &'a str, now: Millis) -> StoreFuture<'a, u64> {
        Box::pin(expire(&self.pool, queue, now))
    }

    fn work_item<'a>(&'a self, queue: &'a str, id: &'a str) -> StoreFuture<'a, Option<WorkRecord>> {
        Box::pin(async move {
            let row = sqlx::query(concat!("SELECT ", columns!(), " FROM work_items WHERE queue = $1 AND id = $2"))
                .bind(queue)
                .bind(id)
                .fetch_optional(&self.pool)
                .await
                .map_err(db)?;
            row.as_ref().map(work_record).transpose()
        })
    }

    fn work_items<'a>(&'a self, queue: &'a str, state: Option<WorkState>) -> StoreFuture<'a, Vec<WorkRecord>> {
        Box::pin(async move {
            let rows = sqlx::query(concat!(
                "SELECT ",
                columns!(),
                " FROM work_items WHERE queue = $1 AND ($2::text IS NULL OR state = $2::text) ORDER BY seq"
            ))
            .bind(queue)
            .bind(state.map(WorkState::as_str))
            .fetch_all(&self.pool)
            .await
            .map_err(db)?;
            rows.iter().map(work_record).collect()
        })
    }

    fn work_stats<'a>(&'a self, queue: &'a str) -> StoreFuture<'a, WorkStats> {
        Box::pin(async move {
            let rows = sqlx::query("SELECT state, COUNT(*) AS n FROM work_items WHERE queue = $1 GROUP BY state")
                .bind(queue)
                .fetch_all(&self.pool)
                .await
                .map_err(db)?;
            let mut stats = WorkStats::default();
            for row in &rows {
                let state = stored_state(&get::<String>(row, "state")?)?;
                let count: i64 = get(row, "n")?;
                stats.add(state, u64::try_from(count).unwrap_or(0));
            }
            Ok(stats)
        })
    }

    fn purge_finished_work<'a>(&'a self, queue: &'a str) -> StoreFuture<'a, u64> {
        Box::pin(async move {
            let done = sqlx::query("DELETE FROM work_items WHERE queue = $1 AND state IN ('done', 'failed')")
                .bind(queue)
                .execute(&self.pool)
                .await
                .map_err(db)?;
            Ok(done.rows_affected())
        })
    }
}

impl PostgresStore {
    /// Runs a holder's operation; when it matched nothing, reads the item to say why.
    async fn by_holder(
        &self,
        query: Query<'_, Postgres, PgArguments>,
        queue: &str,
        id: &str,
        worker: &str,
        op: HolderOp,
        now: Millis,
    ) -> Result<WorkRecord, StoreError> {
        if let Some(row) = query.fetch_optional(&self.pool).await.map_err(db)? {
            return work_record(&row);
        }
        let found = self.work_item(queue, id).await?;
        Err(refusal(queue, id, worker, op, found.as_ref(), now))
    }
}

/// `sql`, a holder's operation, with its item, worker and time bound (`$1` to `$4`).
fn held<'q>(
    sql: &'static str,
    queue: &'q str,
    id: &'q str,
    worker: &'q str,
    now: Millis,
) -> Query<'q, Postgres, PgArguments> {
    sqlx::query(sql).bind(queue).bind(id).bind(worker).bind(now)
}

/// Puts the items of `queue` whose lease lapsed at `now` back in the queue, or fails those
/// with no attempt left; how many. An item another transaction has locked is left to it
/// (it is a claimer expiring it, or a holder whose operation will be refused).
async fn expire<'e>(executor: impl PgExecutor<'e>, queue: &str, now: Millis) -> Result<u64, StoreError> {
    let done = sqlx::query(
        "UPDATE work_items SET \
           state = CASE WHEN attempts >= max_attempts THEN 'failed' ELSE 'queued' END, \
           worker = CASE WHEN attempts >= max_attempts THEN worker ELSE NULL END, \
           last_error = 'the lease of `' || COALESCE(worker, '') || '` lapsed', \
           lease_expires_at = NULL, updated_at = $2 \
         WHERE seq IN (SELECT seq FROM work_items \
           WHERE queue = $1 AND state IN ('claimed', 'running') AND lease_expires_at <= $2 \
           FOR UPDATE SKIP LOCKED)",
    )
    .bind(queue)
    .bind(now)
    .execute(executor)
    .await
    .map_err(db)?;
    if done.rows_affected() > 0 {
        tracing::info!(queue, lapsed = done.rows_affected(), "work item leases lapsed");
    }
    Ok(done.rows_affected())
}

/// An attempt count, stored as a `BIGINT`.
fn count(row: &PgRow, name: &str) -> Result<u32, StoreError> {
    let value: i64 = get(row, name)?;
    u32::try_from(value).map_err(|e| StoreError::decode(format!("column `{name}`"), e))
}

fn work_record(row: &PgRow) -> Result<WorkRecord, StoreError> {
    let queue: String = get(row, "queue")?;
    let id: String = get(row, "id")?;
    let json = |name: &str, text: &str| {
        serde_json::from_str::<Value>(text)
            .map_err(|e| StoreError::decode(format!("{name} of work item `{id}` of queue `{queue}`"), e))
    };
    let payload = json("the payload", &get::<String>(row, "payload")?)?;
    let result = match get::<Option<String>>(row, "result")? {
        Some(text) => Some(json("the result", &text)?),
        None => None,
    };
    Ok(WorkRecord {
        seq: get(row, "seq")?,
        payload,
        priority: get(row, "priority")?,
        tags: get(row, "tags")?,
        state: stored_state(&get::<String>(row, "state")?)?,
        attempts: count(row, "attempts")?,
        max_attempts: count(row, "max_attempts")?,
        worker: get(row, "worker")?,
        lease_expires_at: get(row, "lease_expires_at")?,
        available_at: get(row, "available_at")?,
        last_error: get(row, "last_error")?,
        result,
        enqueued_at: get(row, "enqueued_at")?,
        updated_at: get(row, "updated_at")?,
        queue,
        id,
    })
}
