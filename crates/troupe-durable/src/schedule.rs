//! Scheduled runs: a cron expression or an interval starts a run of an agent, or wakes
//! a waiting run, exactly once per tick however many workers watch the schedules (the
//! store claims each tick with a compare-and-set on its time).
//!
//! A tick missed while no worker was up fires once, late; the schedule then moves to its
//! next tick after now, so a long outage does not unleash a burst of runs.

use chrono::{DateTime, Utc};
use std::str::FromStr;
use troupe_core::RunId;
use troupe_run::AgentSpec;
use troupe_run::Signal;
use troupe_runtime::RunInput;
use troupe_runtime::RuntimeError;
use troupe_runtime::durable::{StoredInput, TEAM_RUN_KIND};
use troupe_store::{Firing, Millis, NewRun, RunSpend, RunStatus, Schedule, ScheduleTarget, Store, StoreError, Trigger};

/// The first tick of `trigger` strictly after `after`.
pub fn next_tick(trigger: &Trigger, after: Millis) -> Result<Millis, RuntimeError> {
    match trigger {
        Trigger::Interval { every_ms } if *every_ms > 0 => Ok(after.saturating_add(*every_ms)),
        Trigger::Interval { every_ms } => {
            Err(RuntimeError::InvalidSchedule(format!("an interval must be positive, not {every_ms} ms")))
        }
        Trigger::Cron { expression } => {
            let schedule = cron::Schedule::from_str(expression).map_err(|e| {
                // The parser's message may point at the column on a second line: keep one.
                let reason = e.to_string().split_whitespace().collect::<Vec<_>>().join(" ");
                RuntimeError::InvalidSchedule(format!(
                    "`{expression}` is not a cron expression ({reason}); use six or seven fields, seconds first: `0 */5 * * * *`"
                ))
            })?;
            let start = DateTime::<Utc>::from_timestamp_millis(after)
                .ok_or_else(|| RuntimeError::InvalidSchedule(format!("{after} ms is out of range")))?;
            schedule
                .after(&start)
                .next()
                .map(|t| t.timestamp_millis())
                .ok_or_else(|| RuntimeError::InvalidSchedule(format!("`{expression}` never fires again")))
        }
    }
}

/// Schedules runs of `spec` with `input`, first at the trigger's first tick after `now`.
pub async fn schedule_agent(
    store: &dyn Store,
    id: &str,
    trigger: Trigger,
    spec: &AgentSpec,
    input: &RunInput,
    now: Millis,
) -> Result<Schedule, RuntimeError> {
    let input = serde_json::to_value(StoredInput::new(spec, input)).unwrap_or_default();
    let target = ScheduleTarget::StartRun { agent: spec.name.clone(), input };
    put(store, id, trigger, target, now).await
}

/// Schedules runs of `agent` (an agent's or a team's name) with a stored `input`: an
/// agent's [`StoredInput`], or a team's input (`"kind": "team"`), which a worker that
/// takes team runs builds the team again from.
pub async fn schedule_run(
    store: &dyn Store,
    id: &str,
    trigger: Trigger,
    agent: &str,
    input: serde_json::Value,
    now: Millis,
) -> Result<Schedule, RuntimeError> {
    put(store, id, trigger, ScheduleTarget::StartRun { agent: agent.to_owned(), input }, now).await
}

/// Schedules scheduler wake-up signals to the run `run_id`.
pub async fn schedule_wake(
    store: &dyn Store,
    id: &str,
    trigger: Trigger,
    run_id: &str,
    now: Millis,
) -> Result<Schedule, RuntimeError> {
    put(store, id, trigger, ScheduleTarget::WakeRun { run_id: run_id.to_owned() }, now).await
}

async fn put(
    store: &dyn Store,
    id: &str,
    trigger: Trigger,
    target: ScheduleTarget,
    now: Millis,
) -> Result<Schedule, RuntimeError> {
    let next_fire_at = next_tick(&trigger, now)?;
    let schedule = Schedule { id: id.to_owned(), trigger, target, next_fire_at, last_fired_at: None, enabled: true };
    store.put_schedule(&schedule).await?;
    Ok(schedule)
}

/// A tick this process fired.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduleFired {
    /// The schedule.
    pub schedule_id: String,
    /// The tick.
    pub tick: Millis,
    /// The run started or woken.
    pub run_id: String,
}

/// Fires every schedule due at `now`; returns the ticks this call fired (another process
/// may have fired the rest). A schedule whose stored target cannot be read is skipped
/// with a warning.
pub async fn fire_due(store: &dyn Store, now: Millis) -> Result<Vec<ScheduleFired>, RuntimeError> {
    let mut fired = Vec::new();
    for schedule in store.due_schedules(now).await? {
        let next = match next_tick(&schedule.trigger, now.max(schedule.next_fire_at)) {
            Ok(next) => next,
            Err(error) => {
                tracing::warn!(schedule = %schedule.id, %error, "schedule skipped");
                continue;
            }
        };
        let (firing, run_id) = match &schedule.target {
            ScheduleTarget::StartRun { agent, input }
                if input.get("kind").and_then(|k| k.as_str()) == Some(TEAM_RUN_KIND) =>
            {
                // A team's run: its state says so, and a worker that takes teams builds the
                // team again from the files its input names.
                let run_id = RunId::generate();
                let state = serde_json::json!({
                    "kind": TEAM_RUN_KIND,
                    "team": input.get("team").cloned().unwrap_or_else(|| agent.clone().into()),
                    "instruction": input.get("instruction").cloned().unwrap_or_default(),
                });
                let run = NewRun {
                    id: run_id.to_string(),
                    agent: agent.clone(),
                    status: RunStatus::Queued,
                    conversation_id: None,
                    parent_run_id: None,
                    input: input.clone().into(),
                    state: state.into(),
                    spend: Some(RunSpend::rollup(0, 0.0)),
                };
                (Firing::Start(run), run_id.to_string())
            }
            ScheduleTarget::StartRun { input, .. } => {
                let input: StoredInput = match serde_json::from_value(input.clone()) {
                    Ok(input) => input,
                    Err(error) => {
                        tracing::warn!(schedule = %schedule.id, %error, "schedule skipped: its input cannot be read");
                        continue;
                    }
                };
                let run_id = RunId::generate();
                (Firing::Start(input.new_run(&run_id, RunStatus::Queued)), run_id.to_string())
            }
            ScheduleTarget::WakeRun { run_id } => {
                let payload = serde_json::to_value(Signal::SchedulerWake).unwrap_or_default();
                let firing = Firing::Wake { run_id: run_id.clone(), kind: "scheduler_wake".to_owned(), payload };
                (firing, run_id.clone())
            }
        };
        match store.fire_schedule(&schedule.id, schedule.next_fire_at, next, firing, now).await {
            Ok(true) => {
                fired.push(ScheduleFired { schedule_id: schedule.id.clone(), tick: schedule.next_fire_at, run_id });
            }
            Ok(false) => {}
            // The run a schedule wakes is gone: the schedule can never fire again.
            Err(StoreError::UnknownRun { .. }) => {
                tracing::warn!(schedule = %schedule.id, run = %run_id, "the run to wake is gone; schedule disabled");
                let disabled = Schedule { enabled: false, ..schedule.clone() };
                store.put_schedule(&disabled).await?;
            }
            // One schedule's failure does not hold the others back; its tick stays due.
            Err(error) => tracing::warn!(schedule = %schedule.id, %error, "schedule tick not fired"),
        }
    }
    Ok(fired)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_and_cron_expressions_tick() {
        assert_eq!(next_tick(&Trigger::Interval { every_ms: 1000 }, 5).ok(), Some(1005));
        assert!(next_tick(&Trigger::Interval { every_ms: 0 }, 5).is_err());
        // Every five minutes, on the minute: 00:00:00 → 00:05:00.
        let five = Trigger::Cron { expression: "0 */5 * * * *".into() };
        assert_eq!(next_tick(&five, 0).ok(), Some(5 * 60 * 1000));
        assert_eq!(next_tick(&five, 5 * 60 * 1000).ok(), Some(10 * 60 * 1000));
        let bad = Trigger::Cron { expression: "every day".into() };
        assert!(next_tick(&bad, 0).is_err_and(|e| e.to_string().contains("not a cron expression")));
        assert!(next_tick(&bad, 0).is_err_and(|e| !e.to_string().contains('\n')), "one line");
    }
}
