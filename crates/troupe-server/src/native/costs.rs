//! `GET /v1/costs`: what the runs of the last days cost, by agent, by team, by model and by
//! day, over every run the store holds (and the runs held here it does not), not a page.
//!
//! An agent's run counts once, a team's member's run included; a team's own run is told
//! apart (`by_team`), its cost being its members'. The store sums what its runs keep of
//! their spend beside their states ([`RunSpend`](troupe_store::RunSpend)), so no run's
//! state is read; a run that keeps none (written by an older build) is counted from its
//! record. The window (`?days=`, 30 by default) bounds what is summed.

use crate::error::ApiError;
use crate::hub::RunView;
use crate::launcher::TargetKind;
use crate::state::AppState;
use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};
use troupe_runtime::durable::{TEAM_RUN_KIND, state_from_value};
use troupe_store::{RunFilter, RunRecord, SpendGroup};

/// How many days the costs cover when the query does not say.
pub const DEFAULT_COST_DAYS: u32 = 30;

/// The most days the costs may cover.
pub const MAX_COST_DAYS: u32 = 366;

const DAY_MS: i64 = 86_400_000;

/// The query of `GET /v1/costs`.
#[derive(Debug, Default, Deserialize)]
pub(super) struct CostQuery {
    days: Option<u32>,
}

/// The runs of one agent, team, model or day, summed.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CostTotal {
    /// The agent, team, model (`provider/model`) or day (`YYYY-MM-DD`, UTC).
    pub name: String,
    /// How many runs.
    pub runs: u64,
    /// Their tokens.
    pub tokens: u64,
    /// Their cost, in USD.
    pub cost_usd: f64,
}

/// The answer of `GET /v1/costs`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Costs {
    /// Runs started since then count (milliseconds since the Unix epoch).
    pub since_ms: i64,
    /// Every agent's run: how many, their tokens and cost.
    pub total: CostTotal,
    /// By agent (a team's members included), most costly first.
    pub by_agent: Vec<CostTotal>,
    /// By team: each team run's cost, its members', most costly first.
    pub by_team: Vec<CostTotal>,
    /// By model, most costly first.
    pub by_model: Vec<CostTotal>,
    /// By day, oldest first.
    pub by_day: Vec<CostTotal>,
}

/// Sums of one kind, by name.
#[derive(Default)]
struct Sums(BTreeMap<String, CostTotal>);

impl Sums {
    fn add(&mut self, name: &str, tokens: u64, cost_usd: f64) {
        self.add_runs(name, 1, tokens, cost_usd);
    }

    fn add_runs(&mut self, name: &str, runs: u64, tokens: u64, cost_usd: f64) {
        let total = self
            .0
            .entry(name.to_owned())
            .or_insert_with(|| CostTotal { name: name.to_owned(), ..CostTotal::default() });
        total.runs += runs;
        total.tokens += tokens;
        total.cost_usd += cost_usd;
    }

    fn by_cost(self) -> Vec<CostTotal> {
        let mut totals: Vec<CostTotal> = self.0.into_values().collect();
        totals
            .sort_by(|a, b| b.cost_usd.total_cmp(&a.cost_usd).then(b.tokens.cmp(&a.tokens)).then(a.name.cmp(&b.name)));
        totals
    }
}

/// What the costs are gathered into.
#[derive(Default)]
struct Gathered {
    total: CostTotal,
    agents: Sums,
    teams: Sums,
    models: Sums,
    days: Sums,
}

impl Gathered {
    fn agent_run(&mut self, agent: &str, model: &str, started_ms: i64, tokens: u64, cost_usd: f64) {
        self.agent_runs(agent, model, &day(started_ms), 1, tokens, cost_usd);
    }

    /// `runs` runs of `agent` on `model` started on `day`, with what they spent together.
    fn agent_runs(&mut self, agent: &str, model: &str, day: &str, runs: u64, tokens: u64, cost_usd: f64) {
        self.total.runs += runs;
        self.total.tokens += tokens;
        self.total.cost_usd += cost_usd;
        self.agents.add_runs(agent, runs, tokens, cost_usd);
        self.models.add_runs(if model.is_empty() { "(unknown)" } else { model }, runs, tokens, cost_usd);
        self.days.add_runs(day, runs, tokens, cost_usd);
    }

    fn into_costs(self, since_ms: i64) -> Costs {
        let mut by_day: Vec<CostTotal> = self.days.0.into_values().collect();
        by_day.sort_by(|a, b| a.name.cmp(&b.name));
        Costs {
            since_ms,
            total: CostTotal { name: "all".to_owned(), ..self.total },
            by_agent: self.agents.by_cost(),
            by_team: self.teams.by_cost(),
            by_model: self.models.by_cost(),
            by_day,
        }
    }
}

/// `YYYY-MM-DD` (UTC) of a time in milliseconds since the Unix epoch.
fn day(ms: i64) -> String {
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let days = ms.div_euclid(DAY_MS);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

pub(super) async fn costs(State(state): State<AppState>, query: Result<Query<CostQuery>, QueryRejection>) -> Response {
    let Ok(Query(query)) = query else {
        return ApiError::bad_request("invalid_query", "`days` is a whole number of days").into_response();
    };
    let days = query.days.unwrap_or(DEFAULT_COST_DAYS);
    if !(1..=MAX_COST_DAYS).contains(&days) {
        return ApiError::bad_request("invalid_query", format!("`days` is from 1 to {MAX_COST_DAYS}, not {days}"))
            .into_response();
    }
    let since_ms = troupe_store::now_millis() - i64::from(days) * DAY_MS;
    match gather(&state, since_ms).await {
        Ok(costs) => Json(costs).into_response(),
        Err(error) => error.into_response(),
    }
}

async fn gather(state: &AppState, since_ms: i64) -> Result<Costs, ApiError> {
    let mut gathered = Gathered::default();
    let mut held: Vec<RunView> =
        state.hub.list().into_iter().filter(|view| view.started_ms as i64 >= since_ms).collect();
    if let Some(runs) = &state.stored {
        let store = runs.store();
        // Summed by the store, from what each run keeps of its spend beside its state.
        let sums = store.spend_since(since_ms).await.map_err(crate::stored::unavailable)?;
        for group in &sums.groups {
            count_group(&mut gathered, group);
        }
        let window = RunFilter { created_since: Some(since_ms), ..RunFilter::default() };
        if !sums.unsummed.is_empty() {
            // Runs that keep none (an older build's): their records, without their
            // conversations, in one read.
            let unsummed: HashSet<&str> = sums.unsummed.iter().map(String::as_str).collect();
            let records = store.list_run_records(&window).await.map_err(crate::stored::unavailable)?;
            for record in records.iter().filter(|record| unsummed.contains(record.id.as_str())) {
                count_stored(&mut gathered, record);
            }
        }
        // The runs held here that are stored are counted already: only their ids are read.
        if !held.is_empty() {
            let stored: HashSet<String> =
                store.list_runs(&window).await.map_err(crate::stored::unavailable)?.into_iter().map(|r| r.id).collect();
            held.retain(|view| !stored.contains(view.run_id.as_str()));
        }
    }
    let teams: HashSet<String> =
        state.launcher.targets().into_iter().filter(|t| t.kind == TargetKind::Team).map(|t| t.name).collect();
    for view in &held {
        count_held(&mut gathered, view, teams.contains(&view.target));
    }
    Ok(gathered.into_costs(since_ms))
}

/// The stored runs of one agent or team, model and day, summed by the store: a rollup's
/// (a team's run) by team, the others by agent, model and day.
fn count_group(gathered: &mut Gathered, group: &SpendGroup) {
    if group.rollup {
        gathered.teams.add_runs(&group.agent, group.runs, group.tokens, group.cost_usd);
        return;
    }
    let model = group.model.as_deref().unwrap_or_default();
    let day = day(group.day.saturating_mul(DAY_MS));
    gathered.agent_runs(&group.agent, model, &day, group.runs, group.tokens, group.cost_usd);
}

/// A stored run: a team's by its own totals, an agent's by its state.
fn count_stored(gathered: &mut Gathered, record: &RunRecord) {
    if record.input.get("kind").and_then(|k| k.as_str()) == Some(TEAM_RUN_KIND) {
        let tokens = record.state.get("tokens").and_then(|t| t.as_u64()).unwrap_or(0);
        let cost = record.state.get("cost_usd").and_then(|c| c.as_f64()).unwrap_or(0.0);
        gathered.teams.add(&record.agent, tokens, cost);
        return;
    }
    match state_from_value(&record.id, record.state.clone()) {
        Ok(run) => {
            gathered.agent_run(&record.agent, run.model(), record.created_at, run.usage().total(), run.cost_usd())
        }
        // A run whose state this build cannot read still counts, with nothing spent known.
        Err(_) => gathered.agent_run(&record.agent, "", record.created_at, 0, 0.0),
    }
}

/// A run held here and not stored (a server without a store).
fn count_held(gathered: &mut Gathered, view: &RunView, team: bool) {
    let (tokens, cost) = view.end.as_ref().map_or((0, 0.0), |end| (end.usage.total(), end.cost_usd));
    if team {
        gathered.teams.add(&view.target, tokens, cost);
    } else {
        let model = view.model.as_deref().unwrap_or_default();
        gathered.agent_run(&view.target, model, view.started_ms as i64, tokens, cost);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_are_civil_dates_in_utc() {
        assert_eq!(day(0), "1970-01-01");
        assert_eq!(day(951_782_400_000), "2000-02-29");
        assert_eq!(day(1_796_428_800_000 - 1), "2026-12-04");
        assert_eq!(day(1_796_428_800_000), "2026-12-05");
    }

    #[test]
    fn totals_are_ranked_by_cost_then_tokens() {
        let mut sums = Sums::default();
        sums.add("cheap", 10, 0.01);
        sums.add("dear", 5, 1.0);
        sums.add("dear", 5, 1.0);
        sums.add("free", 100, 0.0);
        let ranked: Vec<(String, u64)> = sums.by_cost().into_iter().map(|t| (t.name, t.runs)).collect();
        assert_eq!(ranked, [("dear".to_owned(), 2), ("cheap".to_owned(), 1), ("free".to_owned(), 1)]);
    }
}
