//! [`AgentGroup`]: several members on one task, by a [`Strategy`].
//!
//! - **Pipeline**: each member's answer feeds the next; the last answer is the output.
//! - **Parallel**: every member gets the same task at once (bounded concurrency); the
//!   output gathers every answer.
//! - **Orchestrated**: a leader splits the task into delegations, the workers run them in
//!   parallel, and the leader synthesises their results into the output.
//!
//! Every member runs on its own task (plain `tokio::spawn`, no runtime of its own) and is
//! stopped when the group is cancelled or dropped. A member's failure is a failed
//! [`MemberResult`] in the output, not a failed group, unless the [`FailurePolicy`] is
//! [`FailFast`](FailurePolicy::FailFast).

mod orchestrated;
mod spawn;

use crate::brief::SharedContext;
use crate::delegation::{DelegationParser, JsonDelegationParser};
use crate::error::TeamError;
use crate::member::{EventSink, Member, MemberResult, MemberTask};
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use troupe_core::{RunId, Usage};

/// How many delegations of an orchestrated group run at once unless told otherwise.
pub const DEFAULT_MAX_CONCURRENCY: usize = 8;
/// How many times a leader whose delegation could not be read is asked again.
pub const DEFAULT_DELEGATION_RETRIES: u32 = 2;

/// How a group's members share the task.
#[derive(Clone)]
#[non_exhaustive]
pub enum Strategy {
    /// Member `i` gets the task with member `i - 1`'s answer as context; the last answer
    /// is the group's output.
    Pipeline,
    /// Every member gets the task, at most `max_concurrency` at once (0 counts as 1).
    Parallel {
        /// The most members running at once.
        max_concurrency: usize,
    },
    /// The leader (not one of the members) is shown the roster of members and asked for a
    /// delegation; the delegated workers run in parallel; the leader gets every result
    /// and its answer is the group's output.
    Orchestrated {
        /// The leader.
        leader: Arc<dyn Member>,
        /// Reads the leader's delegation.
        parser: Arc<dyn DelegationParser>,
        /// How many times the leader is asked again, with the parser's error, when its
        /// delegation cannot be used; then the group fails with
        /// [`TeamError::Delegation`].
        max_retries: u32,
        /// The most workers running at once (0 counts as 1).
        max_concurrency: usize,
    },
}

impl Strategy {
    /// [`Strategy::Parallel`] with at most `max_concurrency` members at once.
    pub fn parallel(max_concurrency: usize) -> Self {
        Strategy::Parallel { max_concurrency }
    }

    /// [`Strategy::Orchestrated`] by `leader`, with the [`JsonDelegationParser`],
    /// [`DEFAULT_DELEGATION_RETRIES`] and [`DEFAULT_MAX_CONCURRENCY`].
    pub fn orchestrated(leader: Arc<dyn Member>) -> Self {
        Strategy::Orchestrated {
            leader,
            parser: Arc::new(JsonDelegationParser),
            max_retries: DEFAULT_DELEGATION_RETRIES,
            max_concurrency: DEFAULT_MAX_CONCURRENCY,
        }
    }
}

impl fmt::Debug for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Strategy::Pipeline => f.write_str("Pipeline"),
            Strategy::Parallel { max_concurrency } => {
                f.debug_struct("Parallel").field("max_concurrency", max_concurrency).finish()
            }
            Strategy::Orchestrated { leader, max_retries, max_concurrency, .. } => f
                .debug_struct("Orchestrated")
                .field("leader", &leader.name())
                .field("max_retries", max_retries)
                .field("max_concurrency", max_concurrency)
                .finish_non_exhaustive(),
        }
    }
}

/// What a member's failure does to the group.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailurePolicy {
    /// The failure is a failed entry of the output; the others go on.
    #[default]
    Continue,
    /// The first failure stops the group: the members still running are cancelled and
    /// the group fails with [`TeamError::MemberFailed`].
    FailFast,
}

/// What a group gave back.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GroupOutput {
    /// The group's answer: the last successful answer of a pipeline, every answer of a
    /// parallel group (a `## name` section each, failures included), the leader's
    /// synthesis of an orchestrated group.
    pub output: String,
    /// Every member call, in order: a pipeline's or a parallel group's members in member
    /// order; for an orchestrated group, the leader's delegation calls (one per attempt),
    /// the workers in delegation order, then the leader's synthesis.
    pub members: Vec<MemberResult>,
    /// The tokens of every member call.
    pub usage: Usage,
    /// The cost of every member call, in USD.
    pub cost_usd: f64,
}

impl GroupOutput {
    fn from_calls(output: String, members: Vec<MemberResult>) -> Self {
        let usage = members.iter().fold(Usage::default(), |sum, m| sum + m.usage);
        let cost_usd = members.iter().map(|m| m.cost_usd).sum();
        GroupOutput { output, members, usage, cost_usd }
    }

    /// Whether every member call succeeded.
    pub fn all_succeeded(&self) -> bool {
        self.members.iter().all(|m| m.success)
    }

    /// The member calls that failed.
    pub fn failures(&self) -> impl Iterator<Item = &MemberResult> {
        self.members.iter().filter(|m| !m.success)
    }
}

/// Several members on one task, by a [`Strategy`]; built with [`AgentGroup::builder`].
///
/// A group is itself a [`Member`], so groups nest (a pipeline whose second step is a
/// parallel review, say). Its inherent [`run`](AgentGroup::run) takes a plain task; call
/// the trait's as `Member::run(&group, ..)`.
pub struct AgentGroup {
    name: String,
    description: String,
    members: Vec<Arc<dyn Member>>,
    strategy: Strategy,
    policy: FailurePolicy,
    shared: Option<SharedContext>,
}

/// Builds an [`AgentGroup`].
pub struct AgentGroupBuilder {
    group: AgentGroup,
}

impl AgentGroup {
    /// Starts building a group named `name` (a pipeline unless told otherwise).
    pub fn builder(name: impl Into<String>) -> AgentGroupBuilder {
        AgentGroupBuilder {
            group: AgentGroup {
                name: name.into(),
                description: String::new(),
                members: Vec::new(),
                strategy: Strategy::Pipeline,
                policy: FailurePolicy::Continue,
                shared: None,
            },
        }
    }

    /// The group's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The members (an orchestrated group's workers), in order.
    pub fn members(&self) -> &[Arc<dyn Member>] {
        &self.members
    }

    /// The strategy.
    pub fn strategy(&self) -> &Strategy {
        &self.strategy
    }

    /// The failure policy.
    pub fn failure_policy(&self) -> FailurePolicy {
        self.policy
    }

    /// The context every member sees, when set.
    pub fn shared_context(&self) -> Option<&SharedContext> {
        self.shared.as_ref()
    }

    /// Runs the group on `task` to its end.
    pub async fn run(&self, task: &str) -> Result<GroupOutput, TeamError> {
        self.run_with(task, None, CancellationToken::new()).await
    }

    /// Runs the group on `task`, sending every member's live events to `events` and
    /// stopping every member when `cancel` is cancelled (the group then fails with
    /// [`TeamError::Cancelled`]).
    pub async fn run_with(
        &self,
        task: &str,
        events: Option<EventSink>,
        cancel: CancellationToken,
    ) -> Result<GroupOutput, TeamError> {
        self.run_under(task, None, events, cancel).await
    }

    /// [`run_with`](Self::run_with), the members' runs recorded as children of `parent`
    /// (the run of the team this group works for).
    pub async fn run_under(
        &self,
        task: &str,
        parent: Option<RunId>,
        events: Option<EventSink>,
        cancel: CancellationToken,
    ) -> Result<GroupOutput, TeamError> {
        self.run_inner(task, parent, events, cancel).await
    }

    async fn run_inner(
        &self,
        task: &str,
        parent: Option<RunId>,
        events: Option<EventSink>,
        cancel: CancellationToken,
    ) -> Result<GroupOutput, TeamError> {
        // Our own token: FailFast may cancel it without touching the caller's, and
        // dropping this future cancels it, which stops the members' spawned tasks.
        let stop = cancel.child_token();
        let _stop_on_drop = stop.clone().drop_guard();
        let run = GroupRun {
            group: self,
            task,
            shared: self.shared.as_ref().map(SharedContext::render).unwrap_or_default(),
            parent,
            events,
            stop,
        };
        let output = match &self.strategy {
            Strategy::Pipeline => run.pipeline().await,
            Strategy::Parallel { max_concurrency } => run.parallel(*max_concurrency).await,
            Strategy::Orchestrated { leader, parser, max_retries, max_concurrency } => {
                let plan = orchestrated::Plan {
                    leader,
                    parser: parser.as_ref(),
                    max_retries: *max_retries,
                    max_concurrency: *max_concurrency,
                };
                run.orchestrated(plan).await
            }
        };
        if cancel.is_cancelled() {
            return Err(TeamError::Cancelled);
        }
        output
    }
}

impl fmt::Debug for AgentGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let members: Vec<&str> = self.members.iter().map(|m| m.name()).collect();
        f.debug_struct("AgentGroup")
            .field("name", &self.name)
            .field("members", &members)
            .field("strategy", &self.strategy)
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl Member for AgentGroup {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn run(
        &self,
        task: MemberTask,
        events: Option<EventSink>,
        cancel: CancellationToken,
    ) -> BoxFuture<'_, MemberResult> {
        Box::pin(async move {
            match self.run_inner(&task.full_prompt(), task.parent_run_id.clone(), events, cancel).await {
                Ok(output) => MemberResult {
                    name: self.name.clone(),
                    task_id: task.task_id,
                    content: output.output,
                    success: true,
                    error: None,
                    usage: output.usage,
                    cost_usd: output.cost_usd,
                    run_id: None,
                    report: None,
                },
                Err(error) => MemberResult::failed(&self.name, task.task_id, error.to_string()),
            }
        })
    }
}

impl AgentGroupBuilder {
    /// Describes the group, for a leader that delegates to it as a member.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.group.description = description.into();
        self
    }

    /// Adds a member.
    pub fn member(mut self, member: Arc<dyn Member>) -> Self {
        self.group.members.push(member);
        self
    }

    /// Adds members.
    pub fn members(mut self, members: impl IntoIterator<Item = Arc<dyn Member>>) -> Self {
        self.group.members.extend(members);
        self
    }

    /// Sets the strategy.
    pub fn strategy(mut self, strategy: Strategy) -> Self {
        self.group.strategy = strategy;
        self
    }

    /// Runs the members as a [pipeline](Strategy::Pipeline).
    pub fn pipeline(self) -> Self {
        self.strategy(Strategy::Pipeline)
    }

    /// Runs the members in [parallel](Strategy::Parallel), at most `max_concurrency` at once.
    pub fn parallel(self, max_concurrency: usize) -> Self {
        self.strategy(Strategy::parallel(max_concurrency))
    }

    /// [Orchestrates](Strategy::orchestrated) the members by `leader`, with the defaults.
    pub fn orchestrated(self, leader: Arc<dyn Member>) -> Self {
        self.strategy(Strategy::orchestrated(leader))
    }

    /// Sets what a member's failure does.
    pub fn failure_policy(mut self, policy: FailurePolicy) -> Self {
        self.group.policy = policy;
        self
    }

    /// Gives every member (the leader included) `shared` ahead of its task's own context.
    pub fn shared_context(mut self, shared: SharedContext) -> Self {
        self.group.shared = Some(shared);
        self
    }

    /// The group. Fails when it has no members or two members share a name (names are
    /// how results, events and delegations tell members apart).
    pub fn build(self) -> Result<AgentGroup, TeamError> {
        let group = self.group;
        if group.members.is_empty() {
            return Err(TeamError::Invalid(format!("group `{}` has no members", group.name)));
        }
        let mut seen = BTreeSet::new();
        for member in &group.members {
            if member.name().is_empty() || !seen.insert(member.name()) {
                return Err(TeamError::Invalid(format!(
                    "members of group `{}` need unique, non-empty names (`{}` is not)",
                    group.name,
                    member.name()
                )));
            }
        }
        Ok(group)
    }
}

/// One run of a group: what every strategy needs.
struct GroupRun<'a> {
    group: &'a AgentGroup,
    task: &'a str,
    /// The rendered shared context (empty when none).
    shared: String,
    parent: Option<RunId>,
    events: Option<EventSink>,
    stop: CancellationToken,
}

impl GroupRun<'_> {
    /// A task for a member: `prompt` with the shared context, then `specific`, as context.
    fn task_for(&self, task_id: String, from: &str, prompt: &str, specific: &[String]) -> MemberTask {
        let parts: Vec<&str> = std::iter::once(self.shared.as_str())
            .chain(specific.iter().map(String::as_str))
            .filter(|p| !p.trim().is_empty())
            .collect();
        let mut task = MemberTask::new(task_id, from, prompt);
        if !parts.is_empty() {
            task.context = Some(parts.join("\n\n"));
        }
        task.parent_run_id.clone_from(&self.parent);
        task
    }

    fn task_id(&self, what: impl fmt::Display) -> String {
        format!("{}/{what}", self.group.name)
    }

    async fn pipeline(&self) -> Result<GroupOutput, TeamError> {
        let mut results: Vec<MemberResult> = Vec::with_capacity(self.group.members.len());
        for (i, member) in self.group.members.iter().enumerate() {
            if self.stop.is_cancelled() {
                return Err(TeamError::Cancelled);
            }
            let mut specific = Vec::new();
            let last_ok = results.iter().rposition(|r| r.success);
            if let Some(at) = last_ok {
                let which = if at + 1 == i { "the previous step" } else { "an earlier step" };
                specific.push(format!("## Output of {which} (`{}`)\n\n{}", results[at].name, results[at].content));
            }
            if let Some(failed) = results.last().filter(|r| !r.success) {
                let error = failed.error.as_deref().unwrap_or("unknown error");
                specific.push(format!(
                    "## Note\n\nThe previous step (`{}`) failed: {error}. Work from the task{}.",
                    failed.name,
                    if last_ok.is_some() { " and the earlier output above" } else { " itself" }
                ));
            }
            let from = results.last().map_or("user", |r| r.name.as_str());
            let task = self.task_for(self.task_id(i), from, self.task, &specific);
            let result = spawn::run_one(member, task, self.events.clone(), &self.stop).await;
            if !result.success && self.group.policy == FailurePolicy::FailFast {
                return Err(member_failed(&result));
            }
            results.push(result);
        }
        let output = results.iter().rev().find(|r| r.success).map(|r| r.content.clone()).unwrap_or_default();
        Ok(GroupOutput::from_calls(output, results))
    }

    async fn parallel(&self, max_concurrency: usize) -> Result<GroupOutput, TeamError> {
        let runs = self
            .group
            .members
            .iter()
            .enumerate()
            .map(|(i, member)| (Arc::clone(member), self.task_for(self.task_id(i), "user", self.task, &[])))
            .collect();
        let results = spawn::run_all(runs, max_concurrency, self.events.clone(), &self.stop, self.group.policy).await?;
        let output = results.iter().map(section).collect::<Vec<_>>().join("\n\n");
        Ok(GroupOutput::from_calls(output, results))
    }
}

/// A member's answer as a `## name` section (its error, when it failed).
fn section(result: &MemberResult) -> String {
    if result.success {
        format!("## {}\n\n{}", result.name, result.content)
    } else {
        format!("## {} (failed)\n\n{}", result.name, result.error.as_deref().unwrap_or("unknown error"))
    }
}

fn member_failed(result: &MemberResult) -> TeamError {
    TeamError::MemberFailed {
        member: result.name.clone(),
        error: result.error.clone().unwrap_or_else(|| "it did not complete its task".to_owned()),
    }
}
