//! Schedules, and firing a tick exactly once together with what it does.

use super::runs::{insert_run, insert_signal, upsert_queue};
use super::writer::execute;
use super::{SqliteStore, column, json_text};
use crate::error::StoreError;
use crate::record::{Firing, Millis, RunStatus, Schedule};
use crate::repository::{ScheduleRepository, StoreFuture};
use rusqlite::params;
use sqlx::sqlite::SqliteRow;

impl ScheduleRepository for SqliteStore {
    fn put_schedule<'a>(&'a self, schedule: &'a Schedule) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            sqlx::query(
                "INSERT INTO schedules (id, trigger_spec, target, next_fire_at, last_fired_at, enabled) \
                 VALUES (?, ?, ?, ?, ?, ?) \
                 ON CONFLICT (id) DO UPDATE SET trigger_spec = excluded.trigger_spec, target = excluded.target, \
                     next_fire_at = excluded.next_fire_at, last_fired_at = excluded.last_fired_at, \
                     enabled = excluded.enabled",
            )
            .bind(&schedule.id)
            .bind(json_text(&schedule.trigger, "schedule trigger")?)
            .bind(json_text(&schedule.target, "schedule target")?)
            .bind(schedule.next_fire_at)
            .bind(schedule.last_fired_at)
            .bind(schedule.enabled)
            .execute(&self.pool)
            .await
            .map_err(StoreError::database)?;
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
            .map_err(StoreError::database)?;
            rows.iter().map(schedule).collect()
        })
    }

    fn delete_schedule<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let done = sqlx::query("DELETE FROM schedules WHERE id = ?")
                .bind(id)
                .execute(&self.pool)
                .await
                .map_err(StoreError::database)?;
            Ok(done.rows_affected() > 0)
        })
    }

    fn due_schedules(&self, now: Millis) -> StoreFuture<'_, Vec<Schedule>> {
        Box::pin(async move {
            let rows = sqlx::query(
                "SELECT id, trigger_spec, target, next_fire_at, last_fired_at, enabled FROM schedules \
                 WHERE enabled = 1 AND next_fire_at <= ? ORDER BY next_fire_at, id",
            )
            .bind(now)
            .fetch_all(&self.pool)
            .await
            .map_err(StoreError::database)?;
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
        let id = id.to_owned();
        Box::pin(self.writer.write(move |conn| {
            let claimed = execute(
                conn,
                "UPDATE schedules SET next_fire_at = ?1, last_fired_at = ?2 \
                 WHERE id = ?3 AND next_fire_at = ?2 AND enabled = 1",
                params![next, expected, id],
            )
            .map_err(StoreError::database)?;
            if claimed == 0 {
                return Ok(false);
            }
            match firing {
                Firing::Start(mut run) => {
                    run.status = RunStatus::Queued;
                    insert_run(conn, &run, now)?;
                }
                Firing::Wake { run_id, kind, payload } => {
                    insert_signal(conn, &run_id, &kind, &payload, now)?;
                    upsert_queue(conn, &run_id, now)?;
                }
            }
            Ok(true)
        }))
    }
}

fn schedule(row: &SqliteRow) -> Result<Schedule, StoreError> {
    let id: String = column(row, "id")?;
    let trigger: String = column(row, "trigger_spec")?;
    let target: String = column(row, "target")?;
    Ok(Schedule {
        trigger: serde_json::from_str(&trigger)
            .map_err(|e| StoreError::decode(format!("trigger of schedule `{id}`"), e))?,
        target: serde_json::from_str(&target)
            .map_err(|e| StoreError::decode(format!("target of schedule `{id}`"), e))?,
        next_fire_at: column(row, "next_fire_at")?,
        last_fired_at: column(row, "last_fired_at")?,
        enabled: column(row, "enabled")?,
        id,
    })
}
