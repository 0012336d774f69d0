//! Budgets: what a team may spend, and what each agent and its descendants spent.

use crate::TeamError;
use crate::bus::lock;
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use troupe_core::Budget;
use troupe_core::Usage;

/// What a whole team may spend before it is stopped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TeamBudget {
    /// The most tokens (input, cached and output) of every run together.
    pub max_total_tokens: Option<u64>,
    /// The most USD of every run together.
    pub max_usd: Option<f64>,
    /// The longest the team may work, from the supervisor's creation.
    #[serde(
        with = "troupe_core::duration_ms",
        default,
        skip_serializing_if = "Option::is_none",
        rename = "max_wall_time_ms"
    )]
    pub max_wall_time: Option<Duration>,
}

impl TeamBudget {
    /// No limit.
    pub fn unlimited() -> Self {
        Self::default()
    }

    /// At most `tokens` tokens.
    pub fn tokens(mut self, tokens: u64) -> Self {
        self.max_total_tokens = Some(tokens);
        self
    }

    /// At most `usd` USD.
    pub fn usd(mut self, usd: f64) -> Self {
        self.max_usd = Some(usd);
        self
    }

    /// At most `time` of wall time.
    pub fn wall_time(mut self, time: Duration) -> Self {
        self.max_wall_time = Some(time);
        self
    }
}

/// Tokens and USD spent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Spend {
    /// Tokens.
    pub usage: Usage,
    /// USD.
    pub cost_usd: f64,
}

impl Spend {
    fn add(&mut self, usage: Usage, cost_usd: f64) {
        self.usage += usage;
        if cost_usd.is_finite() && cost_usd > 0.0 {
            self.cost_usd += cost_usd;
        }
    }
}

/// One agent's spending, its descendants' included: what is added to it is added to every
/// ancestor's too.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    spend: Mutex<Spend>,
    parent: Option<Arc<Ledger>>,
}

impl Ledger {
    pub(crate) fn child_of(parent: Option<Arc<Ledger>>) -> Arc<Ledger> {
        Arc::new(Ledger { spend: Mutex::default(), parent })
    }

    pub(crate) fn add(&self, usage: Usage, cost_usd: f64) {
        let mut ledger = Some(self);
        while let Some(current) = ledger {
            lock(&current.spend).add(usage, cost_usd);
            ledger = current.parent.as_deref();
        }
    }

    pub(crate) fn spend(&self) -> Spend {
        *lock(&self.spend)
    }
}

/// The team's account: its budget, what it spent, and the token that stops it.
#[derive(Debug)]
pub(crate) struct TeamAccount {
    budget: TeamBudget,
    started: Instant,
    spend: Mutex<Spend>,
    /// The budget that ran out first, once one did.
    exceeded: Mutex<Option<Budget>>,
    pub(crate) cancel: CancellationToken,
}

impl TeamAccount {
    pub(crate) fn new(budget: TeamBudget) -> Self {
        TeamAccount {
            budget,
            started: Instant::now(),
            spend: Mutex::default(),
            exceeded: Mutex::new(None),
            cancel: CancellationToken::new(),
        }
    }

    pub(crate) fn budget(&self) -> TeamBudget {
        self.budget
    }

    pub(crate) fn spend(&self) -> Spend {
        *lock(&self.spend)
    }

    /// When the team's time is up, if it has a limit.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.budget.max_wall_time.and_then(|t| self.started.checked_add(t))
    }

    /// Adds spending; crossing a budget stops the team.
    pub(crate) fn add(&self, usage: Usage, cost_usd: f64) {
        let spend = {
            let mut spend = lock(&self.spend);
            spend.add(usage, cost_usd);
            *spend
        };
        if self.budget.max_usd.is_some_and(|max| spend.cost_usd >= max) {
            self.exceed(Budget::Usd);
        } else if self.budget.max_total_tokens.is_some_and(|max| spend.usage.total() >= max) {
            self.exceed(Budget::Tokens);
        }
    }

    /// Stops the team because its `budget` ran out (the first reason is kept).
    pub(crate) fn exceed(&self, budget: Budget) {
        {
            let mut exceeded = lock(&self.exceeded);
            if exceeded.is_none() {
                tracing::warn!(%budget, "the team's budget ran out; stopping every agent");
                *exceeded = Some(budget);
            }
        }
        self.cancel.cancel();
    }

    /// The budget that ran out, if one did.
    pub(crate) fn exceeded(&self) -> Option<Budget> {
        *lock(&self.exceeded)
    }

    /// Fails once a budget ran out (the wall time is checked here too).
    pub(crate) fn check(&self) -> Result<(), TeamError> {
        if self.deadline().is_some_and(|d| Instant::now() >= d) {
            self.exceed(Budget::Time);
        }
        match self.exceeded() {
            Some(budget) => Err(TeamError::BudgetExceeded { budget }),
            None if self.cancel.is_cancelled() => Err(TeamError::Cancelled),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spending_rolls_up_to_every_ancestor() {
        let root = Ledger::child_of(None);
        let child = Ledger::child_of(Some(Arc::clone(&root)));
        let grandchild = Ledger::child_of(Some(Arc::clone(&child)));
        let usage = Usage { input_tokens: 10, output_tokens: 5, ..Usage::default() };
        grandchild.add(usage, 0.5);
        child.add(usage, 0.25);
        assert_eq!(root.spend().usage.total(), 30);
        assert!((root.spend().cost_usd - 0.75).abs() < 1e-9);
        assert!((grandchild.spend().cost_usd - 0.5).abs() < 1e-9);
    }

    #[test]
    fn crossing_a_budget_stops_the_team_for_good() {
        let team = TeamAccount::new(TeamBudget::unlimited().tokens(100));
        team.add(Usage { input_tokens: 60, ..Usage::default() }, 0.0);
        assert!(team.check().is_ok());
        team.add(Usage { input_tokens: 60, ..Usage::default() }, 0.0);
        assert!(matches!(team.check(), Err(TeamError::BudgetExceeded { budget }) if budget == Budget::Tokens));
        assert!(team.cancel.is_cancelled());
    }
}
