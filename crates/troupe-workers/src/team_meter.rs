//! [`TeamMeter`]: what a team's members have spent, counted as each model call ends, and
//! [`TeamGate`], the middleware that refuses a member's next model call once the team's
//! token or USD budget is spent.
//!
//! The team's run also counts the spend from its members' usage events, but after the fact:
//! a member whose teammate just spent the last of the budget could start its next call
//! before those events were read. The gate checks the meter before every call of a local
//! member, so none starts after the budget is spent; a worker or remote member's spend is
//! counted when its result comes back.

use crate::team_run::over_budget;
use futures::future::BoxFuture;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio_util::sync::CancellationToken;
use troupe_core::ModelRequest;
use troupe_model::{ModelRegistry, ModelResponse};
use troupe_runtime::{Middleware, MiddlewareError, ModelCallContext};
use troupe_team::TeamBudget;

/// The spend of one team run, shared by its members' gates.
#[derive(Debug)]
pub struct TeamMeter {
    budget: TeamBudget,
    registry: ModelRegistry,
    state: Mutex<Metered>,
}

#[derive(Debug, Default)]
struct Metered {
    tokens: u64,
    cost_usd: f64,
    /// The team run's cancellation, once it runs: a gate that is not armed counts nothing
    /// and refuses nothing (a replay of the team's runs builds the same agents).
    armed: Option<CancellationToken>,
    /// The budget a gate stopped the team for.
    stopped: Option<String>,
}

impl TeamMeter {
    /// A meter of `budget`, pricing calls by `registry`.
    pub fn new(budget: TeamBudget, registry: ModelRegistry) -> Arc<Self> {
        Arc::new(TeamMeter { budget, registry, state: Mutex::default() })
    }

    /// Starts counting from what the team spent before (a resumed team's record), stopping
    /// the team through `cancel` when the budget is spent.
    pub fn arm(&self, tokens: u64, cost_usd: f64, cancel: CancellationToken) {
        let mut state = self.lock();
        *state = Metered { tokens, cost_usd, armed: Some(cancel), stopped: None };
    }

    /// Adds a call's or a member's spend.
    pub fn add(&self, tokens: u64, cost_usd: f64) {
        let mut state = self.lock();
        if state.armed.is_some() {
            state.tokens += tokens;
            if cost_usd.is_finite() && cost_usd > 0.0 {
                state.cost_usd += cost_usd;
            }
        }
    }

    /// The budget that is spent, if one is, with its limit.
    pub fn over(&self) -> Option<String> {
        let state = self.lock();
        state.armed.as_ref()?;
        over_budget(&self.budget, state.tokens, state.cost_usd)
    }

    /// The tokens and USD counted so far (those of the team's record before included).
    pub fn spent(&self) -> (u64, f64) {
        let state = self.lock();
        (state.tokens, state.cost_usd)
    }

    /// The budget a gate stopped the team for, if one did.
    pub fn stopped(&self) -> Option<String> {
        self.lock().stopped.clone()
    }

    /// Refuses the next call when the budget is spent: stops the team (once) and says why.
    pub(crate) fn refuse(&self) -> Option<String> {
        let which = self.over()?;
        let mut state = self.lock();
        if state.stopped.is_none() {
            state.stopped = Some(which.clone());
            if let Some(cancel) = &state.armed {
                cancel.cancel();
            }
        }
        Some(which)
    }

    fn lock(&self) -> MutexGuard<'_, Metered> {
        // Plain numbers: a panic elsewhere leaves them usable.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The middleware every local member and the leader run with: it refuses a model call once
/// the team's budget is spent (stopping the team), and counts each call's spend.
#[derive(Debug, Clone)]
pub struct TeamGate(pub Arc<TeamMeter>);

impl Middleware for TeamGate {
    fn name(&self) -> &str {
        "team_budget"
    }

    fn before_model<'a>(
        &'a self,
        _ctx: &'a ModelCallContext,
        _request: &'a mut ModelRequest,
    ) -> BoxFuture<'a, Result<(), MiddlewareError>> {
        let verdict = match self.0.refuse() {
            None => Ok(()),
            Some(which) => {
                tracing::info!(budget = %which, "the team's budget is spent: no model call starts");
                Err(MiddlewareError::cancelled(self.name()))
            }
        };
        Box::pin(std::future::ready(verdict))
    }

    fn after_model<'a>(
        &'a self,
        ctx: &'a ModelCallContext,
        response: &'a mut ModelResponse,
    ) -> BoxFuture<'a, Result<(), MiddlewareError>> {
        let cost = self.0.registry.get(&ctx.model).map_or(0.0, |info| info.pricing.cost(&response.usage));
        self.0.add(response.usage.total(), cost);
        Box::pin(std::future::ready(Ok(())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unarmed_meter_counts_nothing_and_an_armed_one_says_when_the_budget_is_spent() {
        let budget = TeamBudget { max_total_tokens: Some(45), ..TeamBudget::default() };
        let meter = TeamMeter::new(budget, ModelRegistry::builtin());
        meter.add(100, 0.0);
        assert_eq!(meter.over(), None, "not armed: a replay's agents");
        let cancel = CancellationToken::new();
        meter.arm(30, 0.0, cancel.clone());
        assert_eq!(meter.over(), None);
        meter.add(15, 0.0);
        assert_eq!(meter.over().as_deref(), Some("tokens (max_total_tokens = 45)"));
        assert_eq!(meter.stopped(), None, "spent, but no call was refused yet");
        assert!(meter.refuse().is_some());
        assert!(cancel.is_cancelled(), "the team is stopped");
        assert_eq!(meter.stopped().as_deref(), Some("tokens (max_total_tokens = 45)"));
    }
}
