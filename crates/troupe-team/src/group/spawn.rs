//! Running members on their own tasks: bounded, in order, stoppable.

use super::{FailurePolicy, member_failed};
use crate::error::TeamError;
use crate::member::{EventSink, Member, MemberResult, MemberTask};
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use std::sync::Arc;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// Runs `member` on `task` on a task of its own and waits for its result.
///
/// Spawned, not awaited in place: a member's future dropped mid-run may leave work going
/// (an agent's run is itself a spawned task), while a spawned member outlives a dropped
/// caller just long enough to see `stop` cancelled and wind down.
pub(super) async fn run_one(
    member: &Arc<dyn Member>,
    task: MemberTask,
    events: Option<EventSink>,
    stop: &CancellationToken,
) -> MemberResult {
    let name = member.name().to_owned();
    let task_id = task.task_id.clone();
    let member = Arc::clone(member);
    let stop = stop.clone();
    match tokio::spawn(async move { member.run(task, events, stop).await }).await {
        Ok(result) => result,
        Err(error) => MemberResult::failed(name, task_id, format!("the member's task crashed: {error}")),
    }
}

/// Runs every `(member, task)`, at most `limit` at once (0 counts as 1), and returns the
/// results in the order given.
///
/// Under [`FailurePolicy::FailFast`] the first failure cancels `stop` (the group's own
/// token), the members still running wind down, and the failure is returned.
pub(super) async fn run_all(
    runs: Vec<(Arc<dyn Member>, MemberTask)>,
    limit: usize,
    events: Option<EventSink>,
    stop: &CancellationToken,
    policy: FailurePolicy,
) -> Result<Vec<MemberResult>, TeamError> {
    let permits = Arc::new(Semaphore::new(limit.max(1)));
    let mut pending = FuturesUnordered::new();
    let count = runs.len();
    for (index, (member, task)) in runs.into_iter().enumerate() {
        let name = member.name().to_owned();
        let task_id = task.task_id.clone();
        let (permits, events, stop) = (Arc::clone(&permits), events.clone(), stop.clone());
        let handle = tokio::spawn(async move {
            let permit = tokio::select! {
                biased;
                () = stop.cancelled() => None,
                permit = permits.acquire_owned() => permit.ok(),
            };
            let Some(_permit) = permit else {
                return MemberResult::failed(member.name(), task.task_id, "cancelled before it started");
            };
            member.run(task, events, stop).await
        });
        // Dropping a JoinHandle detaches its task rather than aborting it: a dropped group
        // leaves its members to see `stop` and end their runs cleanly.
        pending.push(async move {
            let result = handle.await.unwrap_or_else(|error| {
                MemberResult::failed(name, task_id, format!("the member's task crashed: {error}"))
            });
            (index, result)
        });
    }
    let mut results: Vec<Option<MemberResult>> = vec![None; count];
    let mut first_failure = None;
    while let Some((index, result)) = pending.next().await {
        if !result.success && policy == FailurePolicy::FailFast && first_failure.is_none() {
            first_failure = Some(member_failed(&result));
            stop.cancel();
        }
        results[index] = Some(result);
    }
    if let Some(failure) = first_failure {
        return Err(failure);
    }
    Ok(results.into_iter().flatten().collect())
}
