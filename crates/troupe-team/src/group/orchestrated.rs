//! The orchestrated strategy: leader → delegation → workers in parallel → synthesis.

use super::{GroupOutput, GroupRun, member_failed, spawn};
use crate::delegation::{Delegation, DelegationParser, valid_workers};
use crate::error::TeamError;
use crate::member::{Member, MemberResult};
use std::fmt::Write as _;
use std::sync::Arc;

/// What the orchestrated strategy is configured with.
pub(super) struct Plan<'a> {
    pub(super) leader: &'a Arc<dyn Member>,
    pub(super) parser: &'a dyn DelegationParser,
    pub(super) max_retries: u32,
    pub(super) max_concurrency: usize,
}

impl GroupRun<'_> {
    pub(super) async fn orchestrated(&self, plan: Plan<'_>) -> Result<GroupOutput, TeamError> {
        let workers = &self.group.members;
        let names: Vec<&str> = workers.iter().map(|w| w.name()).collect();
        let leader = plan.leader;
        let mut calls: Vec<MemberResult> = Vec::new();

        let roster = roster(workers, &names);
        let mut feedback: Option<String> = None;
        let mut attempt = 0;
        let (delegations, leader_run) = loop {
            let specific: Vec<String> = std::iter::once(roster.clone()).chain(feedback.take()).collect();
            let task = self.task_for(self.task_id(format_args!("delegation/{attempt}")), "user", self.task, &specific);
            let answer = spawn::run_one(leader, task, self.events.clone(), &self.stop).await;
            calls.push(answer.clone());
            if !answer.success {
                // Without a delegation there is nothing to continue with, whatever the policy.
                return Err(member_failed(&answer));
            }
            match plan.parser.parse(&answer.content, &names) {
                Ok(delegations) => break (delegations, answer.run_id),
                Err(error) if attempt < plan.max_retries => {
                    attempt += 1;
                    tracing::debug!(group = %self.group.name, attempt, %error, "the leader's delegation is asked again");
                    feedback = Some(format!(
                        "## Your previous delegation could not be used\n\n{error}\n\n\
                         Your previous answer was:\n\n{}\n\nReply again with a corrected delegation.",
                        answer.content.trim()
                    ));
                }
                Err(error) => return Err(TeamError::Delegation(error.to_string())),
            }
        };

        let runs = delegations
            .iter()
            .enumerate()
            .map(|(k, delegation)| {
                // A parser of one's own may name a worker the team does not have.
                let worker = workers.get(delegation.worker).ok_or_else(|| {
                    TeamError::Delegation(format!(
                        "the delegation names worker {}, and the team has {}",
                        delegation.worker,
                        workers.len()
                    ))
                })?;
                let mut task =
                    self.task_for(self.task_id(format_args!("worker/{k}")), leader.name(), &delegation.task, &[]);
                if leader_run.is_some() {
                    task.parent_run_id.clone_from(&leader_run);
                }
                Ok((Arc::clone(worker), task))
            })
            .collect::<Result<_, TeamError>>()?;
        let results =
            spawn::run_all(runs, plan.max_concurrency, self.events.clone(), &self.stop, self.group.policy).await?;

        let report = team_report(&delegations, &results);
        calls.extend(results);
        let task = self.task_for(self.task_id("synthesis"), "user", self.task, &[report]);
        let synthesis = spawn::run_one(leader, task, self.events.clone(), &self.stop).await;
        calls.push(synthesis.clone());
        if !synthesis.success {
            return Err(member_failed(&synthesis));
        }
        Ok(GroupOutput::from_calls(synthesis.content, calls))
    }
}

/// The leader's instructions for delegating: who is on the team and the JSON expected.
fn roster(workers: &[Arc<dyn Member>], names: &[&str]) -> String {
    let mut text = String::from(
        "## Your team\n\nYou lead this team. Split the task into self-contained tasks for your workers: \
         each worker sees only the task you give it, nothing of this conversation.\n",
    );
    for (i, worker) in workers.iter().enumerate() {
        let _ = write!(text, "\n- {i}: `{}`: {}", worker.name(), worker.description());
    }
    let _ = write!(
        text,
        "\n\nReply with your delegation as JSON in a ```json block, one entry per task, `worker` being the \
         worker's index ({}):\n\n```json\n[{{\"worker\": 0, \"task\": \"...\"}}]\n```\n\n\
         You will get every worker's result back to write the final answer.",
        valid_workers(names)
    );
    text
}

/// Every worker's result, for the leader's synthesis.
fn team_report(delegations: &[Delegation], results: &[MemberResult]) -> String {
    let mut text = String::from("## Your team's results");
    for (delegation, result) in delegations.iter().zip(results) {
        let status = if result.success { "completed" } else { "failed" };
        let _ = write!(
            text,
            "\n\n### `{}` (worker {}): {status}\n\nTask: {}\n\n",
            result.name, delegation.worker, delegation.task
        );
        if result.success {
            text.push_str(result.content.trim());
        } else {
            let _ = write!(text, "Error: {}", result.error.as_deref().unwrap_or("unknown error"));
            if !result.content.trim().is_empty() {
                let _ = write!(text, "\n\nPartial answer:\n\n{}", result.content.trim());
            }
        }
    }
    text.push_str(
        "\n\nCombine these results into one final answer to the task. Say plainly what a failed worker left undone.",
    );
    text
}
