//! The run queue and its leases, and the fence a lease puts on a run's writes.
//!
//! A lease is the run's while its owner and epoch are the queue row's: every claim raises
//! the epoch, so a holder that was taken over holds a stale one. Expiry alone does not lose
//! a lease that nobody took over.

use super::decode;
use crate::error::StoreError;
use crate::record::{Lease, Millis, QueueEntry};
use crate::sql::{Conn, Failure, Param, Statement};
use std::time::Duration;

const ENQUEUE: Statement = statement!(
    "INSERT INTO run_queue (run_id, available_at, owner, epoch, expires_at) VALUES ($1, $2, NULL, 0, NULL) \
     ON CONFLICT (run_id) DO UPDATE SET available_at = excluded.available_at WHERE run_queue.owner IS NULL"
);

// SKIP LOCKED: concurrent claimers each lock a different candidate, and one that finds its
// candidate claimed in the meantime moves on to the next.
const CLAIM: Statement = statement!(
    "UPDATE run_queue SET owner = $1, epoch = epoch + 1, expires_at = $2 \
     WHERE run_id = (SELECT run_id FROM run_queue \
       WHERE available_at <= $3 AND (owner IS NULL OR expires_at < $3) \
       ORDER BY available_at, run_id LIMIT 1",
    lock("FOR UPDATE SKIP LOCKED"),
    ") RETURNING run_id, owner, epoch, expires_at"
);

// No queue row can exist for a missing run, so the insert branch is taken and the foreign
// key refuses it.
const ACQUIRE: Statement = statement!(
    "INSERT INTO run_queue (run_id, available_at, owner, epoch, expires_at) VALUES ($1, $4, $2, 1, $3) \
     ON CONFLICT (run_id) DO UPDATE SET owner = excluded.owner, epoch = run_queue.epoch + 1, \
       expires_at = excluded.expires_at \
     WHERE run_queue.owner IS NULL OR run_queue.expires_at < $4 OR run_queue.owner = excluded.owner \
     RETURNING run_id, owner, epoch, expires_at"
);

const HEARTBEAT: Statement = statement!(
    "UPDATE run_queue SET expires_at = $4 WHERE run_id = $1 AND owner = $2 AND epoch = $3 \
     RETURNING run_id, owner, epoch, expires_at"
);

const DELETE_LEASED: Statement = statement!("DELETE FROM run_queue WHERE run_id = $1 AND owner = $2 AND epoch = $3");

const REQUEUE_LEASED: Statement = statement!(
    "UPDATE run_queue SET owner = NULL, expires_at = NULL, available_at = $4 \
     WHERE run_id = $1 AND owner = $2 AND epoch = $3"
);

// FOR SHARE: a takeover waits for the fenced transaction to end.
const FENCE: Statement =
    statement!("SELECT run_id FROM run_queue WHERE run_id = $1 AND owner = $2 AND epoch = $3", lock("FOR SHARE"), "");

const QUEUE: Statement =
    statement!("SELECT run_id, available_at, owner, epoch, expires_at FROM run_queue ORDER BY available_at, run_id");

/// Queues `run_id` from `available_at`, or moves it there if it waits unleased; a leased run
/// stays with its holder. [`StoreError::UnknownRun`] if there is no such run.
pub(crate) async fn enqueue(conn: &mut impl Conn, run_id: &str, available_at: Millis) -> Result<(), StoreError> {
    conn.execute(&ENQUEUE, &[Param::Text(run_id), Param::Int(available_at)])
        .await
        .map_err(|e| e.when(Failure::ForeignKey, || StoreError::UnknownRun { run_id: run_id.to_owned() }))?;
    Ok(())
}

/// Claims the queued run available longest whose lease is free or lapsed.
pub(crate) async fn claim(
    conn: &mut impl Conn,
    owner: &str,
    ttl: Duration,
    now: Millis,
) -> Result<Option<Lease>, StoreError> {
    let params = [Param::Text(owner), Param::Int(super::expiry(now, ttl)), Param::Int(now)];
    Ok(conn.fetch_optional(&CLAIM, &params, decode::lease).await?)
}

/// Takes the lease of `run_id` for `owner` unless another owner holds it unexpired.
pub(crate) async fn acquire(
    conn: &mut impl Conn,
    run_id: &str,
    owner: &str,
    ttl: Duration,
    now: Millis,
) -> Result<Option<Lease>, StoreError> {
    let params = [Param::Text(run_id), Param::Text(owner), Param::Int(super::expiry(now, ttl)), Param::Int(now)];
    conn.fetch_optional(&ACQUIRE, &params, decode::lease)
        .await
        .map_err(|e| e.when(Failure::ForeignKey, || StoreError::UnknownRun { run_id: run_id.to_owned() }))
}

/// Renews `lease` until `now + ttl`, if it is still the run's.
pub(crate) async fn heartbeat(
    conn: &mut impl Conn,
    lease: &Lease,
    ttl: Duration,
    now: Millis,
) -> Result<Option<Lease>, StoreError> {
    let params = [
        Param::Text(&lease.run_id),
        Param::Text(&lease.owner),
        Param::Int(lease.epoch),
        Param::Int(super::expiry(now, ttl)),
    ];
    Ok(conn.fetch_optional(&HEARTBEAT, &params, decode::lease).await?)
}

/// Gives `lease` up: the run leaves the queue, or goes back to it at `requeue_at`. A lease
/// no longer held changes nothing.
pub(crate) async fn release(conn: &mut impl Conn, lease: &Lease, requeue_at: Option<Millis>) -> Result<(), StoreError> {
    let held = [Param::Text(&lease.run_id), Param::Text(&lease.owner), Param::Int(lease.epoch)];
    match requeue_at {
        None => conn.execute(&DELETE_LEASED, &held).await?,
        Some(at) => conn.execute(&REQUEUE_LEASED, &[held[0], held[1], held[2], Param::Int(at)]).await?,
    };
    Ok(())
}

/// Refuses to go on, with [`StoreError::LeaseLost`], unless `lease` is still the lease of
/// `run_id` (a lease fences only its own run); holds it to the end of the transaction where
/// the dialect locks rows.
pub(crate) async fn hold_fence(conn: &mut impl Conn, lease: &Lease, run_id: &str) -> Result<(), StoreError> {
    let lost = |run_id: &str| StoreError::LeaseLost { run_id: run_id.to_owned(), owner: lease.owner.clone() };
    if lease.run_id != run_id {
        return Err(lost(run_id));
    }
    let params = [Param::Text(&lease.run_id), Param::Text(&lease.owner), Param::Int(lease.epoch)];
    match conn.fetch_optional(&FENCE, &params, |row| row.text("run_id")).await? {
        Some(_) => Ok(()),
        None => Err(lost(&lease.run_id)),
    }
}

/// The queue's entries, by availability.
pub(crate) async fn queue(conn: &mut impl Conn) -> Result<Vec<QueueEntry>, StoreError> {
    Ok(conn.fetch_all(&QUEUE, &[], decode::queue_entry).await?)
}
