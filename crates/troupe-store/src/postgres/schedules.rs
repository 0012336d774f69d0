//! Schedules, and firing their ticks exactly once.

use super::queue::enqueue_on;
use super::runs::{insert_run, insert_signal};
use super::{PostgresStore, db, get};
use crate::error::StoreError;
use crate::record::{Firing, Millis, RunStatus, Schedule};
use crate::repository::{ScheduleRepository, StoreFuture};
use sqlx::postgres::{PgConnection, PgRow};

fn schedule(row: &PgRow) -> Result<Schedule, StoreError> {
    let id: String = get(row, "id")?;
    let trigger: String = get(row, "trigger_spec")?;
    let target: String = get(row, "target")?;
    Ok(Schedule {
        trigger: serde_json::from_str(&trigger)
            .map_err(|e| StoreError::decode(format!("trigger of schedule `{id}`"), e))?,
        target: serde_json::from_str(&target)
            .map_err(|e| StoreError::decode(format!("target of schedule `{id}`"), e))?,
        next_fire_at: get(row, "next_fire_at")?,
        last_fired_at: get(row, "last_fired_at")?,
        enabled: get(row, "enabled")?,
        id,
    })
}

/// Carries out a tick's firing in the transaction that claimed the tick.
async fn carry_out(conn: &mut PgConnection, firing: Firing, now: Millis) -> Result<(), StoreError> {
    match firing {
        Firing::Start(mut run) => {
            run.status = RunStatus::Queued;
            insert_run(conn, &run, now).await
        }
        Firing::Wake { run_id, kind, payload } => {
            // The queue row before the run row, as a fenced checkpoint locks them.
            enqueue_on(&mut *conn, &run_id, now).await?;
            insert_signal(conn, &run_id, &kind, &payload, now).await.map(drop)
        }
    }
}

impl ScheduleRepository for PostgresStore {
    fn put_schedule<'a>(&'a self, schedule: &'a Schedule) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let encode = |what: &str, e: serde_json::Error| {
                StoreError::database(format!("cannot encode the {what} of schedule `{}`: {e}", schedule.id))
            };
            let trigger = serde_json::to_string(&schedule.trigger).map_err(|e| encode("trigger", e))?;
            let target = serde_json::to_string(&schedule.target).map_err(|e| encode("target", e))?;
            sqlx::query(
                "INSERT INTO schedules (id, trigger_spec, target, next_fire_at, last_fired_at, enabled) \
                 VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO UPDATE SET \
                 trigger_spec = EXCLUDED.trigger_spec, target = EXCLUDED.target, \
                 next_fire_at = EXCLUDED.next_fire_at, last_fired_at = EXCLUDED.last_fired_at, \
                 enabled = EXCLUDED.enabled",
            )
            .bind(&schedule.id)
            .bind(trigger)
            .bind(target)
            .bind(schedule.next_fire_at)
            .bind(schedule.last_fired_at)
            .bind(schedule.enabled)
            .execute(&self.pool)
            .await
            .map_err(db)?;
            Ok(())
        })
    }

    fn schedules(&self) -> StoreFuture<'_, Vec<Schedule>> {
        Box::pin(async move {
            let rows = sqlx::query(
                "SELECT id, trigger_spec, target, next_fire_at, last_fired_at, enabled FROM schedules ORDER BY id",
            )
            .fetch_all(&self.pool)
            .await
            .map_err(db)?;
            rows.iter().map(schedule).collect()
        })
    }

    fn delete_schedule<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let deleted =
                sqlx::query("DELETE FROM schedules WHERE id = $1").bind(id).execute(&self.pool).await.map_err(db)?;
            Ok(deleted.rows_affected() > 0)
        })
    }

    fn due_schedules(&self, now: Millis) -> StoreFuture<'_, Vec<Schedule>> {
        Box::pin(async move {
            let rows = sqlx::query(
                "SELECT id, trigger_spec, target, next_fire_at, last_fired_at, enabled FROM schedules \
                 WHERE enabled AND next_fire_at <= $1 ORDER BY next_fire_at, id",
            )
            .bind(now)
            .fetch_all(&self.pool)
            .await
            .map_err(db)?;
            rows.iter().map(schedule).collect()
        })
    }

    fn fire_schedule<'a>(
        &'a self,
        id: &'a str,
        expected: Millis,
        next: Millis,
        firing: Firing,
        now: Millis,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let mut tx = self.pool.begin().await.map_err(db)?;
            // The row lock makes a second firer wait, then find the tick moved on.
            let claimed = sqlx::query(
                "UPDATE schedules SET next_fire_at = $3, last_fired_at = $2 \
                 WHERE id = $1 AND next_fire_at = $2 AND enabled",
            )
            .bind(id)
            .bind(expected)
            .bind(next)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
            if claimed.rows_affected() == 0 {
                return Ok(false);
            }
            carry_out(&mut tx, firing, now).await?;
            tx.commit().await.map_err(db)?;
            Ok(true)
        })
    }
}
