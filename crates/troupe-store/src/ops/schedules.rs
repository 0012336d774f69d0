//! Schedules, and firing a tick exactly once together with what it does.

use super::decode;
use super::queue::enqueue;
use super::runs::insert_run;
use super::signals::insert_signal;
use crate::error::StoreError;
use crate::record::{Firing, Millis, NewRun, RunStatus, Schedule};
use crate::sql::{Conn, Param, Statement};

const PUT: Statement = statement!(
    "INSERT INTO schedules (id, trigger_spec, target, next_fire_at, last_fired_at, enabled) \
     VALUES ($1, $2, $3, $4, $5, $6) \
     ON CONFLICT (id) DO UPDATE SET trigger_spec = excluded.trigger_spec, target = excluded.target, \
       next_fire_at = excluded.next_fire_at, last_fired_at = excluded.last_fired_at, enabled = excluded.enabled"
);

const SCHEDULES: Statement =
    statement!("SELECT id, trigger_spec, target, next_fire_at, last_fired_at, enabled FROM schedules ORDER BY id");

const DELETE: Statement = statement!("DELETE FROM schedules WHERE id = $1");

const DUE: Statement = statement!(
    "SELECT id, trigger_spec, target, next_fire_at, last_fired_at, enabled FROM schedules \
     WHERE enabled AND next_fire_at <= $1 ORDER BY next_fire_at, id"
);

// Only the firer that finds the tick still `expected` moves it on; where rows are locked, a
// second firer waits for the first, then finds it moved.
const CLAIM_TICK: Statement = statement!(
    "UPDATE schedules SET next_fire_at = $3, last_fired_at = $2 WHERE id = $1 AND next_fire_at = $2 AND enabled"
);

/// Creates or replaces `schedule`.
pub(crate) async fn put(conn: &mut impl Conn, schedule: &Schedule) -> Result<(), StoreError> {
    let encode = |what: &str, e: serde_json::Error| {
        StoreError::database(format!("cannot encode the {what} of schedule `{}`: {e}", schedule.id))
    };
    let trigger = serde_json::to_string(&schedule.trigger).map_err(|e| encode("trigger", e))?;
    let target = serde_json::to_string(&schedule.target).map_err(|e| encode("target", e))?;
    let params = [
        Param::Text(&schedule.id),
        Param::Text(&trigger),
        Param::Text(&target),
        Param::Int(schedule.next_fire_at),
        Param::OptInt(schedule.last_fired_at),
        Param::Bool(schedule.enabled),
    ];
    conn.execute(&PUT, &params).await?;
    Ok(())
}

/// Every schedule, by id.
pub(crate) async fn schedules(conn: &mut impl Conn) -> Result<Vec<Schedule>, StoreError> {
    Ok(conn.fetch_all(&SCHEDULES, &[], decode::schedule).await?)
}

/// Removes a schedule; whether it existed.
pub(crate) async fn delete(conn: &mut impl Conn, id: &str) -> Result<bool, StoreError> {
    Ok(conn.execute(&DELETE, &[Param::Text(id)]).await? > 0)
}

/// The enabled schedules due at `now`.
pub(crate) async fn due(conn: &mut impl Conn, now: Millis) -> Result<Vec<Schedule>, StoreError> {
    Ok(conn.fetch_all(&DUE, &[Param::Int(now)], decode::schedule).await?)
}

/// Fires the tick `expected` of schedule `id`, moving it to `next`, and carries out
/// `firing`; whether this call fired it. One transaction, which the caller opened.
pub(crate) async fn fire(
    conn: &mut impl Conn,
    id: &str,
    expected: Millis,
    next: Millis,
    firing: &Firing,
    now: Millis,
) -> Result<bool, StoreError> {
    let claimed = conn.execute(&CLAIM_TICK, &[Param::Text(id), Param::Int(expected), Param::Int(next)]).await?;
    if claimed == 0 {
        return Ok(false);
    }
    match firing {
        Firing::Start(run) => {
            let run = NewRun { status: RunStatus::Queued, ..run.clone() };
            insert_run(conn, &run, now).await?;
        }
        Firing::Wake { run_id, kind, payload } => {
            // The queue row before the run row, as a fenced checkpoint locks them.
            enqueue(conn, run_id, now).await?;
            insert_signal(conn, run_id, kind, payload, now).await?;
        }
    }
    Ok(true)
}
