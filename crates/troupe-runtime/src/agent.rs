//! [`Agent`]: a spec bound to a runner, ready to run, and reconfigurable while it runs.

use crate::error::RuntimeError;
use crate::handle::{RunHandle, RunInput};
use crate::live_spec::{LiveSpec, SpecRevision, SpecUpdate, validate_limits};
use crate::metrics::MetricsSnapshot;
use crate::middleware::RateLimit;
use crate::outcome::RunOutput;
use crate::runner::{Runner, SpecSource};
use std::sync::Arc;
use troupe_run::AgentSpec;
use troupe_run::RunState;

/// A declared agent and the runner that runs it; cheap to clone (clones share the
/// agent's configuration). Built with [`Engine::agent`](crate::Engine::agent).
#[derive(Clone, Debug)]
pub struct Agent {
    runner: Runner,
    spec: Arc<AgentSpec>,
    live: LiveSpec,
    rate_limit: Option<Arc<RateLimit>>,
}

impl Agent {
    /// An agent of `spec` run by `runner`.
    pub fn new(runner: Runner, spec: AgentSpec) -> Self {
        let spec = Arc::new(spec);
        Agent { runner, live: LiveSpec::new(AgentSpec::clone(&spec)), spec, rate_limit: None }
    }

    /// The same agent, whose own rate limit is `limit` (already in the runner's
    /// middlewares): [`reconfigure`](Agent::reconfigure) changes its quotas.
    pub(crate) fn with_rate_limit(mut self, limit: Arc<RateLimit>) -> Self {
        self.live = LiveSpec::with_quotas(AgentSpec::clone(&self.spec), limit.quotas());
        self.rate_limit = Some(limit);
        self
    }

    /// The agent's declaration as it was built; [`current_spec`](Agent::current_spec) has
    /// it with the changes made since by [`reconfigure`](Agent::reconfigure).
    pub fn spec(&self) -> &AgentSpec {
        &self.spec
    }

    /// The agent's declaration as it is now: what a run started now works by.
    pub fn current_spec(&self) -> Arc<AgentSpec> {
        self.live.spec()
    }

    /// The agent's configuration as revisions that its runs follow.
    pub fn live_spec(&self) -> &LiveSpec {
        &self.live
    }

    /// The agent's own rate limit, when it was built with one
    /// ([`AgentBuilder::rate_limit`](crate::AgentBuilder::rate_limit)).
    pub fn rate_limit(&self) -> Option<&Arc<RateLimit>> {
        self.rate_limit.as_ref()
    }

    /// The runner.
    pub fn runner(&self) -> &Runner {
        &self.runner
    }

    /// Changes the agent's instructions, model, limits or rate limit: runs started from
    /// now on work by the new configuration, and every run in flight takes it at its next
    /// safe boundary (before a model call, between tool batches, or at once while it waits
    /// for approval), emitting [`ConfigChanged`](troupe_core::AgentEventKind::ConfigChanged).
    ///
    /// The change is checked first, and refused whole, the configuration in force staying
    /// so, when the new model does not resolve, a limit is impossible, or it sets quotas on
    /// an agent built without a rate limit. Returns the new revision, or `None` when the
    /// change changes nothing.
    ///
    /// A budget lowered below what a run has spent ends that run
    /// [`BudgetExceeded`](crate::RunOutcome::BudgetExceeded) before its next model call (a
    /// tool turn under way, approvals included, is finished first); a time limit already
    /// passed ends it at the boundary. New rate quotas apply to the agent's limiter at
    /// once: it is consulted only before a call, so no call in progress is affected.
    ///
    /// ```
    /// use troupe_runtime::{Engine, SpecUpdate};
    ///
    /// let engine = Engine::builder().build();
    /// let agent = engine.agent("greeter").model("demo").instructions("Be brief.").build()?;
    /// let revision = agent.reconfigure(SpecUpdate::new().instructions("Be warm."))?.expect("a change");
    /// assert_eq!((revision.revision, revision.changed.as_slice()), (1, &["instructions".to_owned()][..]));
    /// assert_eq!(agent.current_spec().instructions, "Be warm.");
    /// assert!(agent.reconfigure(SpecUpdate::new().model("nowhere/none")).is_err(), "it does not resolve");
    /// assert_eq!(agent.current_spec().model, "demo");
    /// # Ok::<(), troupe_runtime::RuntimeError>(())
    /// ```
    pub fn reconfigure(&self, update: SpecUpdate) -> Result<Option<Arc<SpecRevision>>, RuntimeError> {
        let current = self.live.spec();
        let next = update.apply_to(&current);
        validate_limits(&next.limits).map_err(RuntimeError::InvalidSpec)?;
        if next.model != current.model {
            self.runner.resolver().resolve(&next.model)?;
        }
        if let Some(quotas) = update.rate_quotas
            && self.rate_limit.is_none()
            && !quotas.is_unlimited()
        {
            return Err(RuntimeError::InvalidSpec(format!(
                "agent `{}` was built without a rate limit, so its quotas cannot change; \
                 build it with AgentBuilder::rate_limit",
                next.name
            )));
        }
        let revision = self.live.update(update);
        if let (Some(revision), Some(limit)) = (&revision, &self.rate_limit) {
            limit.set_quotas(revision.rate_quotas);
        }
        Ok(revision)
    }

    /// The agent's metrics so far.
    pub fn metrics(&self) -> MetricsSnapshot {
        self.runner.metrics().agent(&self.spec.name).snapshot()
    }

    /// Starts a run and returns its handle at once: live events, signals, cancellation
    /// and the result. Must be called inside a Tokio runtime.
    pub fn start(&self, input: impl Into<RunInput>) -> RunHandle {
        self.runner.start(&self.live, input.into())
    }

    /// Runs to the end and returns the output.
    ///
    /// Nobody can answer approval requests here: a call that needs one ends the run
    /// [`Paused`](crate::RunOutcome::Paused); use [`start`](Agent::start) to decide them
    /// live, or [`resume`](Agent::resume) the paused state later.
    pub async fn run(&self, input: impl Into<RunInput>) -> Result<RunOutput, RuntimeError> {
        self.start(input).output().await
    }

    /// Runs to the end asking for a typed answer, and decodes it: the schema of `T` goes to
    /// the model by its vendor's structured-output mechanism, and an answer that does not
    /// match is sent back for correction (see [`OutputSpec`](troupe_run::OutputSpec)).
    /// A run that does not complete is [`RuntimeError::NotCompleted`]; one whose answer
    /// never matched failed with the code `output_invalid`.
    ///
    /// ```
    /// use schemars::JsonSchema;
    /// use serde::Deserialize;
    /// use troupe_runtime::Engine;
    ///
    /// #[derive(Deserialize, JsonSchema)]
    /// struct Summary {
    ///     title: String,
    ///     points: Vec<String>,
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), troupe_runtime::RuntimeError> {
    /// let agent = Engine::builder().build().agent("summarizer").model("demo").build()?;
    /// let summary = agent.run_typed::<Summary>("Summarise the README").await?;
    /// println!("{}: {} points", summary.value.title, summary.value.points.len());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn run_typed<T: serde::de::DeserializeOwned + schemars::JsonSchema>(
        &self,
        input: impl Into<RunInput>,
    ) -> Result<crate::typed::TypedOutput<T>, RuntimeError> {
        let input = input.into().output(crate::typed::output_spec_for::<T>());
        crate::typed::decode(self.start(input).output().await?)
    }

    /// Continues a run from `state` (see [`Runner::resume`]).
    pub fn resume(&self, state: RunState) -> RunHandle {
        self.runner.resume(&self.live, state)
    }

    /// Continues the stored run whose lease this process holds with this agent's spec,
    /// following its later revisions ([`Runner::resume_leased`]; by the run's id:
    /// `troupe_durable::ResumeRun`).
    pub async fn resume_leased(&self, lease: troupe_store::Lease) -> Result<RunHandle, RuntimeError> {
        self.runner.resume_stored(lease, Some(SpecSource::Live(&self.live))).await
    }

    /// Puts a run of this agent in the store's queue for a worker ([`Runner::enqueue`]).
    pub async fn enqueue(&self, input: impl Into<RunInput>) -> Result<troupe_core::RunId, RuntimeError> {
        self.runner.enqueue(&self.live.spec(), input.into()).await
    }
}
