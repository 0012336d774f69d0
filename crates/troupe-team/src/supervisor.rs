//! [`Supervisor`]: spawns agents from specs and keeps the team within bounds.
//!
//! - **Lifecycles**: each agent is an [`AgentHandle`] — created, running, suspended,
//!   completed, failed, terminated — that can be started, suspended and resumed (its run
//!   state is kept), switched to another model, given new instructions, and terminated.
//! - **Recursion**: a [`RecursiveSpawnGuard`] bounds how deep agents spawn agents and how
//!   many children each may have.
//! - **A child never gets more than its parent**: its tools are a subset of its parent's,
//!   its limits are clamped to what its parent has left, and its approval policy is never
//!   more permissive ([`narrow_approval`]). What it spends rolls up into its parent's
//!   [`spent`](AgentHandle::spent).
//! - **Team budgets** ([`TeamBudget`]: tokens, USD, wall time) are counted live, from every
//!   run's usage events; crossing one cancels every live run and refuses new ones.
//! - **Delegation loops**: [`Supervisor::delegate`] records each hand-over in a
//!   [`DelegationChain`] and stops a task bouncing between the same two agents.
//!
//! Suspending stops the live run at once (the runtime has no "pause after this step"
//! signal): the response or tool batch in flight is abandoned, calls that did not run are
//! answered as not run, and the resumed run asks the model again from the kept state.

mod budget;
mod factory;
mod handle;
mod spawn;

pub use budget::{Spend, TeamBudget};
pub use factory::{AgentFactory, EngineFactory};
pub use handle::{AgentHandle, AgentStatus};
pub use spawn::{RecursiveSpawnGuard, narrow_approval};

use crate::bus::lock;
use crate::coordination::{DEFAULT_MAX_BOUNCES, DelegationChain};
use crate::{MemberResult, MemberTask, TeamError};
use budget::TeamAccount;
use std::collections::BTreeSet;
use std::fmt;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;
use troupe_runtime::AgentSpec;

struct Shared {
    factory: Arc<dyn AgentFactory>,
    guard: RecursiveSpawnGuard,
    team: Arc<TeamAccount>,
    delegations: DelegationChain,
    agents: Mutex<Vec<AgentHandle>>,
}

/// Spawns and oversees a team's agents; cheap to clone (clones share the team).
///
/// ```
/// use troupe_runtime::{AgentSpec, Engine};
/// use troupe_team::MemberTask;
/// use troupe_team::supervisor::{AgentStatus, EngineFactory, Supervisor, TeamBudget};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), troupe_team::TeamError> {
/// let supervisor = Supervisor::builder(EngineFactory::new(Engine::builder().build()))
///     .budget(TeamBudget::unlimited().usd(1.0))
///     .build();
/// let lead = supervisor.spawn(AgentSpec::new("lead", "demo"))?;
/// let result = lead.run(MemberTask::new("t1", "user", "hello")).await?;
/// assert!(result.success);
/// assert_eq!(lead.status(), AgentStatus::Completed);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Supervisor {
    shared: Arc<Shared>,
}

impl fmt::Debug for Supervisor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Supervisor")
            .field("guard", &self.shared.guard)
            .field("budget", &self.shared.team.budget())
            .field("spent", &self.spent())
            .field("agents", &self.agents())
            .finish_non_exhaustive()
    }
}

/// Builds a [`Supervisor`].
pub struct SupervisorBuilder {
    factory: Arc<dyn AgentFactory>,
    guard: RecursiveSpawnGuard,
    budget: TeamBudget,
    max_bounces: u32,
}

impl fmt::Debug for SupervisorBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SupervisorBuilder")
            .field("guard", &self.guard)
            .field("budget", &self.budget)
            .field("max_bounces", &self.max_bounces)
            .finish_non_exhaustive()
    }
}

impl SupervisorBuilder {
    /// Bounds spawning with `guard`.
    pub fn guard(mut self, guard: RecursiveSpawnGuard) -> Self {
        self.guard = guard;
        self
    }

    /// Stops the team when it crosses `budget`; its wall time counts from
    /// [`build`](Self::build).
    pub fn budget(mut self, budget: TeamBudget) -> Self {
        self.budget = budget;
        self
    }

    /// Stops a delegation bouncing between the same two agents more than `n` times.
    pub fn max_bounces(mut self, n: u32) -> Self {
        self.max_bounces = n;
        self
    }

    /// The supervisor.
    pub fn build(self) -> Supervisor {
        Supervisor {
            shared: Arc::new(Shared {
                factory: self.factory,
                guard: self.guard,
                team: Arc::new(TeamAccount::new(self.budget)),
                delegations: DelegationChain::new(self.max_bounces),
                agents: Mutex::new(Vec::new()),
            }),
        }
    }
}

impl Supervisor {
    /// Starts building a supervisor whose agents `factory` builds.
    pub fn builder(factory: impl AgentFactory + 'static) -> SupervisorBuilder {
        SupervisorBuilder {
            factory: Arc::new(factory),
            guard: RecursiveSpawnGuard::default(),
            budget: TeamBudget::default(),
            max_bounces: DEFAULT_MAX_BOUNCES,
        }
    }

    /// A supervisor with the default guard, no team budget and the default bounce limit.
    pub fn new(factory: impl AgentFactory + 'static) -> Self {
        Self::builder(factory).build()
    }

    /// The spawn guard.
    pub fn guard(&self) -> RecursiveSpawnGuard {
        self.shared.guard
    }

    /// The team's budget.
    pub fn budget(&self) -> TeamBudget {
        self.shared.team.budget()
    }

    /// What the whole team spent.
    pub fn spent(&self) -> Spend {
        self.shared.team.spend()
    }

    /// Fails once a team budget ran out (or the team was stopped).
    pub fn check_budget(&self) -> Result<(), TeamError> {
        self.shared.team.check()
    }

    /// The token that stops the whole team; cancelling it stops every live run.
    pub fn cancellation(&self) -> CancellationToken {
        self.shared.team.cancel.clone()
    }

    /// The delegations made through [`delegate`](Self::delegate).
    pub fn delegations(&self) -> &DelegationChain {
        &self.shared.delegations
    }

    /// Every agent spawned, in spawn order.
    pub fn agents(&self) -> Vec<AgentHandle> {
        lock(&self.shared.agents).clone()
    }

    /// The agent named `name` that is not terminated.
    pub fn agent(&self, name: &str) -> Option<AgentHandle> {
        lock(&self.shared.agents).iter().find(|a| a.name() == name && a.status() != AgentStatus::Terminated).cloned()
    }

    /// Spawns a root agent (depth 0) from `spec`. Refused when a live agent has its name
    /// or the factory cannot build it.
    pub fn spawn(&self, spec: AgentSpec) -> Result<AgentHandle, TeamError> {
        self.register(spec, None)
    }

    /// Spawns a child of `parent` from `spec`, narrowed to its parent: tools a subset of
    /// the parent's (all of them when `spec` names none), limits clamped to what the
    /// parent has left, approval never more permissive. Refused past the guard's depth or
    /// children limits, or when it asks for a tool its parent lacks.
    pub fn spawn_child(&self, parent: &AgentHandle, spec: AgentSpec) -> Result<AgentHandle, TeamError> {
        if parent.status() == AgentStatus::Terminated {
            return Err(TeamError::SpawnRefused(format!("`{}` is terminated", parent.name())));
        }
        self.shared.guard.check(parent.name(), parent.depth(), parent.live_children(), &spec.name)?;
        let parent_agent = parent.agent();
        let parent_tools: BTreeSet<String> =
            parent_agent.runner().agent_catalog(parent_agent.spec())?.names().into_iter().map(str::to_owned).collect();
        let spec = spawn::narrow_spec(spec, parent_agent.spec(), &parent_tools, parent.spent(), parent.elapsed())?;
        let child = self.register(spec, Some(parent))?;
        parent.adopt(child.clone());
        Ok(child)
    }

    fn register(&self, spec: AgentSpec, parent: Option<&AgentHandle>) -> Result<AgentHandle, TeamError> {
        if self.agent(&spec.name).is_some() {
            return Err(TeamError::Invalid(format!("an agent named `{}` is in the team already", spec.name)));
        }
        let agent = self.shared.factory.build(spec.clone())?;
        let depth = parent.map_or(0, |p| p.depth() + 1);
        let handle = AgentHandle::new(
            spec,
            agent,
            depth,
            parent,
            Arc::clone(&self.shared.team),
            Arc::clone(&self.shared.factory),
        );
        let mut agents = lock(&self.shared.agents);
        // Checked again under the lock, against a concurrent spawn of the same name.
        if agents.iter().any(|a| a.name() == handle.name() && a.status() != AgentStatus::Terminated) {
            return Err(TeamError::Invalid(format!("an agent named `{}` is in the team already", handle.name())));
        }
        agents.push(handle.clone());
        Ok(handle)
    }

    /// `from` delegates `prompt` to `to` (within the task `within`, when `from` is working
    /// on one): records it in the [chain](Self::delegations), runs it, reports the result.
    /// Refused with [`TeamError::DelegationLoop`] when the task bounced between the same
    /// two agents too often.
    pub async fn delegate(
        &self,
        from: &str,
        to: &AgentHandle,
        within: Option<&str>,
        prompt: impl Into<String>,
    ) -> Result<MemberResult, TeamError> {
        let prompt = prompt.into();
        let chain = &self.shared.delegations;
        let task_id = match within {
            Some(parent) => {
                let holder = chain.get(parent).map(|r| r.to);
                if holder.as_deref() != Some(from) {
                    return Err(TeamError::Invalid(format!("`{from}` is not working on the task `{parent}`")));
                }
                chain.delegate_within(parent, to.name(), prompt.clone())?
            }
            None => chain.delegate(from, to.name(), prompt.clone())?,
        };
        let result = to.run(MemberTask::new(task_id.clone(), from, prompt)).await?;
        chain.report(&task_id, result.clone())?;
        Ok(result)
    }

    /// Terminates every agent and stops the team.
    pub fn terminate_all(&self) {
        self.shared.team.cancel.cancel();
        for agent in self.agents() {
            agent.terminate();
        }
    }
}
