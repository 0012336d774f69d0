//! Team work queues: claims by priority and tags under leases, the holder's operations, and
//! the return (or failure) of items whose lease lapsed. The rules of an item's life are in
//! [`crate::work`]; these are its statements.

use super::decode;
use crate::error::StoreError;
use crate::record::Millis;
use crate::sql::{Conn, Failure, Param, Statement};
use crate::work::{HolderOp, NewWork, WorkRecord, WorkState, WorkStats, refusal};
use serde_json::Value;
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

const ENQUEUE: Statement = statement!(concat!(
    "INSERT INTO work_items (queue, id, payload, priority, tags, state, attempts, max_attempts, \
     available_at, enqueued_at, updated_at) VALUES ($1, $2, $3, $4, $5, 'queued', 0, $6, $7, $8, $8) RETURNING ",
    columns!()
));

// The best queued item carrying one of the tags `$5` (any, when there are none); concurrent
// claimers each lock a different candidate where rows are locked.
const CLAIM: Statement = statement!(
    "UPDATE work_items SET state = 'claimed', worker = $2, lease_expires_at = $3, attempts = attempts + 1, \
     updated_at = $4 WHERE seq = (SELECT c.seq FROM work_items AS c \
       WHERE c.queue = $1 AND c.state = 'queued' AND c.available_at <= $4 AND ",
    postgres(
        "(cardinality($5::text[]) = 0 OR c.tags && $5::text[]) \
         ORDER BY c.priority DESC, c.seq LIMIT 1 FOR UPDATE SKIP LOCKED"
    ),
    sqlite(
        "(json_array_length($5) = 0 OR EXISTS (SELECT 1 FROM json_each(c.tags) AS t \
                                               WHERE t.value IN (SELECT value FROM json_each($5)))) \
         ORDER BY c.priority DESC, c.seq LIMIT 1"
    ),
    concat!(") RETURNING ", columns!())
);

// An item another transaction has locked is left to it: a claimer expiring it, or a holder
// whose operation will be refused.
const EXPIRE: Statement = statement!(
    "UPDATE work_items SET \
       state = CASE WHEN attempts >= max_attempts THEN 'failed' ELSE 'queued' END, \
       worker = CASE WHEN attempts >= max_attempts THEN worker ELSE NULL END, \
       last_error = 'the lease of `' || COALESCE(worker, '') || '` lapsed', \
       lease_expires_at = NULL, updated_at = $2 \
     WHERE seq IN (SELECT seq FROM work_items \
       WHERE queue = $1 AND state IN ('claimed', 'running') AND lease_expires_at <= $2",
    lock("FOR UPDATE SKIP LOCKED"),
    ")"
);

const START: Statement =
    statement!(concat!("UPDATE work_items SET state = 'running', updated_at = $4", held_by_worker!("'claimed'")));

const HEARTBEAT: Statement = statement!(concat!(
    "UPDATE work_items SET lease_expires_at = $5, updated_at = $4",
    held_by_worker!("'claimed', 'running'")
));

const COMPLETE: Statement = statement!(concat!(
    "UPDATE work_items SET state = 'done', result = $5, last_error = NULL, lease_expires_at = NULL, updated_at = $4",
    held_by_worker!("'claimed', 'running'")
));

// A failed item keeps its last worker; one going back to the queue is nobody's.
const FAIL: Statement = statement!(concat!(
    "UPDATE work_items SET state = CASE WHEN attempts >= max_attempts THEN 'failed' ELSE 'queued' END, \
     worker = CASE WHEN attempts >= max_attempts THEN worker ELSE NULL END, \
     lease_expires_at = NULL, last_error = $5, updated_at = $4",
    held_by_worker!("'claimed', 'running'")
));

const ITEM: Statement = statement!(concat!("SELECT ", columns!(), " FROM work_items WHERE queue = $1 AND id = $2"));

const ITEMS: Statement = statement!(concat!(
    "SELECT ",
    columns!(),
    " FROM work_items WHERE queue = $1 AND (CAST($2 AS TEXT) IS NULL OR state = $2) ORDER BY seq"
));

const STATS: Statement = statement!("SELECT state, COUNT(*) AS n FROM work_items WHERE queue = $1 GROUP BY state");

const PURGE: Statement = statement!("DELETE FROM work_items WHERE queue = $1 AND state IN ('done', 'failed')");

/// Enqueues `item`; [`StoreError::WorkItemExists`] if its queue has one of that id.
pub(crate) async fn enqueue(conn: &mut impl Conn, item: &NewWork, now: Millis) -> Result<WorkRecord, StoreError> {
    let payload = crate::chain::json_text(&item.payload);
    let params = [
        Param::Text(&item.queue),
        Param::Text(&item.id),
        Param::Text(&payload),
        Param::Int(item.priority),
        Param::Texts(&item.tags),
        Param::Int(i64::from(item.max_attempts.max(1))),
        Param::Int(item.available_at),
        Param::Int(now),
    ];
    let exists = || StoreError::WorkItemExists { queue: item.queue.clone(), id: item.id.clone() };
    let stored = conn.fetch_optional(&ENQUEUE, &params, decode::work_record).await;
    stored.map_err(|e| e.when(Failure::Unique, exists))?.ok_or_else(exists)
}

/// Expires the queue's lapsed leases, then claims the best item for `worker`; one
/// transaction, which the caller opened.
pub(crate) async fn claim(
    conn: &mut impl Conn,
    queue: &str,
    worker: &str,
    tags: &[String],
    ttl: Duration,
    now: Millis,
) -> Result<Option<WorkRecord>, StoreError> {
    expire(conn, queue, now).await?;
    let params = [
        Param::Text(queue),
        Param::Text(worker),
        Param::Int(super::expiry(now, ttl)),
        Param::Int(now),
        Param::Texts(tags),
    ];
    Ok(conn.fetch_optional(&CLAIM, &params, decode::work_record).await?)
}

/// Returns the items of `queue` whose lease lapsed at `now` to the queue, or fails those with
/// no attempt left; how many.
pub(crate) async fn expire(conn: &mut impl Conn, queue: &str, now: Millis) -> Result<u64, StoreError> {
    let lapsed = conn.execute(&EXPIRE, &[Param::Text(queue), Param::Int(now)]).await?;
    if lapsed > 0 {
        tracing::info!(queue, lapsed, "work item leases lapsed");
    }
    Ok(lapsed)
}

/// A holder's operation on the item `id` of `queue`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Held<'a> {
    /// The queue.
    pub(crate) queue: &'a str,
    /// The item.
    pub(crate) id: &'a str,
    /// Who holds it.
    pub(crate) worker: &'a str,
    /// When.
    pub(crate) now: Millis,
}

/// `held.worker` starts the item.
pub(crate) async fn start(conn: &mut impl Conn, held: Held<'_>) -> Result<WorkRecord, StoreError> {
    by_holder(conn, held, HolderOp::Start, &START, None).await
}

/// `held.worker` renews its lease until `now + ttl`.
pub(crate) async fn heartbeat(conn: &mut impl Conn, held: Held<'_>, ttl: Duration) -> Result<WorkRecord, StoreError> {
    let until = Param::Int(super::expiry(held.now, ttl));
    by_holder(conn, held, HolderOp::Heartbeat, &HEARTBEAT, Some(until)).await
}

/// `held.worker` finished the item with `result`.
pub(crate) async fn complete(conn: &mut impl Conn, held: Held<'_>, result: &Value) -> Result<WorkRecord, StoreError> {
    let result = crate::chain::json_text(result);
    by_holder(conn, held, HolderOp::Complete, &COMPLETE, Some(Param::Text(&result))).await
}

/// `held.worker` failed the item with `error`.
pub(crate) async fn fail(conn: &mut impl Conn, held: Held<'_>, error: &str) -> Result<WorkRecord, StoreError> {
    by_holder(conn, held, HolderOp::Fail, &FAIL, Some(Param::Text(error))).await
}

/// Runs a holder's operation; when it matched nothing, reads the item to say why.
async fn by_holder(
    conn: &mut impl Conn,
    held: Held<'_>,
    op: HolderOp,
    statement: &Statement,
    extra: Option<Param<'_>>,
) -> Result<WorkRecord, StoreError> {
    let Held { queue, id, worker, now } = held;
    let mut params = vec![Param::Text(queue), Param::Text(id), Param::Text(worker), Param::Int(now)];
    params.extend(extra);
    if let Some(record) = conn.fetch_optional(statement, &params, decode::work_record).await? {
        return Ok(record);
    }
    let found = item(conn, queue, id).await?;
    Err(refusal(queue, id, worker, op, found.as_ref(), now))
}

/// The item `id` of `queue`.
pub(crate) async fn item(conn: &mut impl Conn, queue: &str, id: &str) -> Result<Option<WorkRecord>, StoreError> {
    Ok(conn.fetch_optional(&ITEM, &[Param::Text(queue), Param::Text(id)], decode::work_record).await?)
}

/// The items of `queue` (in `state`, when given), in enqueue order.
pub(crate) async fn items(
    conn: &mut impl Conn,
    queue: &str,
    state: Option<WorkState>,
) -> Result<Vec<WorkRecord>, StoreError> {
    let params = [Param::Text(queue), Param::OptText(state.map(WorkState::as_str))];
    Ok(conn.fetch_all(&ITEMS, &params, decode::work_record).await?)
}

/// How many items of `queue` stand where.
pub(crate) async fn stats(conn: &mut impl Conn, queue: &str) -> Result<WorkStats, StoreError> {
    let counts = conn.fetch_all(&STATS, &[Param::Text(queue)], decode::state_count).await?;
    let mut stats = WorkStats::default();
    for (state, count) in counts {
        stats.add(state, count);
    }
    Ok(stats)
}

/// Removes the done and failed items of `queue`; how many.
pub(crate) async fn purge(conn: &mut impl Conn, queue: &str) -> Result<u64, StoreError> {
    Ok(conn.execute(&PURGE, &[Param::Text(queue)]).await?)
}
