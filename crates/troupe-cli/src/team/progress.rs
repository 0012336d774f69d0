//! A team's live progress on stderr — one line per member event of interest, named by
//! the agent the event is attributed to — its events as JSON lines on stdout with
//! `--json`, and the per-member summary table.

use crate::render::{Style, call_label, first_line, result_detail, shorten};
use comfy_table::{CellAlignment, ContentArrangement, Table, presets};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::time::Duration;
use troupe::core::{AgentEvent, AgentEventKind, RunId, ToolCallId, Usage};
use troupe::team::DELEGATE_TOOL;
use troupe::team::firewall::{DropReason, FIREWALL_DROP_EVENT};
use troupe_workers::process::SANDBOX_EVENT;
use troupe_workers::team::{Record, Row};

/// What one agent did, from its events.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Activity {
    /// Tool calls that ended.
    pub(crate) tool_calls: u64,
    /// Whether every model call had a price.
    pub(crate) priced: bool,
}

/// Follows every member's events.
pub(crate) struct Progress {
    json: bool,
    style: Style,
    /// Calls in flight: the tool and its arguments so far.
    calls: HashMap<(RunId, ToolCallId), (String, String)>,
    /// The agent of each run seen.
    runs: HashMap<RunId, String>,
    /// Runs whose model calls were not all priced.
    unpriced_runs: Vec<RunId>,
    activity: BTreeMap<String, Activity>,
    /// Tokens of every model call so far.
    pub(crate) tokens: u64,
    /// Cost of every model call so far.
    pub(crate) cost_usd: f64,
    /// Whether stdout still takes lines.
    stdout_open: bool,
}

impl Progress {
    /// Progress printed as `style` allows, with events on stdout when `json`.
    pub(crate) fn new(json: bool, style: Style) -> Self {
        Progress {
            json,
            style,
            calls: HashMap::new(),
            runs: HashMap::new(),
            unpriced_runs: Vec::new(),
            activity: BTreeMap::new(),
            tokens: 0,
            cost_usd: 0.0,
            stdout_open: true,
        }
    }

    /// What `agent` did so far.
    pub(crate) fn activity(&self, agent: &str) -> Activity {
        self.activity.get(agent).copied().unwrap_or(Activity { tool_calls: 0, priced: true })
    }

    /// Takes one event.
    pub(crate) fn event(&mut self, event: &AgentEvent) {
        if self.json && self.stdout_open {
            self.stdout_open = write_json(event);
        }
        let agent = event.attribution.agent_id.as_str().to_owned();
        let run = event.attribution.run_id.clone();
        let who = format!("[{agent}]");
        let activity = self.activity.entry(agent.clone()).or_insert(Activity { tool_calls: 0, priced: true });
        match &event.kind {
            AgentEventKind::RunStarted { model, .. } => {
                let by = event.attribution.parent_run_id.as_ref().and_then(|p| self.runs.get(p));
                let by = by.map(|leader| format!(", delegated by {leader}")).unwrap_or_default();
                say(&format!("{who} started on {model}{by}"));
                self.runs.insert(run, agent);
            }
            AgentEventKind::ToolCallStart { call_id, tool, .. } => {
                self.calls.insert((run, call_id.clone()), (tool.clone(), String::new()));
            }
            AgentEventKind::ToolCallArgs { call_id, delta } => {
                if let Some((_, arguments)) = self.calls.get_mut(&(run, call_id.clone())) {
                    arguments.push_str(delta);
                }
            }
            AgentEventKind::ToolCallResult { call_id, content, is_error } => {
                activity.tool_calls += 1;
                let (tool, arguments) = self.calls.remove(&(run, call_id.clone())).unwrap_or_default();
                let label = match tool.as_str() {
                    DELEGATE_TOOL => format!("{DELEGATE_TOOL} → {}", delegate_target(&arguments)),
                    "" => call_id.to_string(),
                    _ => call_label(&tool, &arguments),
                };
                let line = if *is_error {
                    format!("{who} {} {label}: {}", self.style.bad("✗"), first_line(content, 160))
                } else {
                    let detail = self.style.dim(&format!("({})", result_detail(&tool, content)));
                    format!("{who} {} {label} {detail}", self.style.ok("✓"))
                };
                say(&line);
            }
            AgentEventKind::Usage { usage, cost_usd, .. } => {
                self.tokens = self.tokens.saturating_add(usage.total());
                match cost_usd {
                    Some(cost) if cost.is_finite() => self.cost_usd += cost,
                    _ => {
                        activity.priced = false;
                        self.unpriced_runs.push(run);
                    }
                }
            }
            AgentEventKind::RunFinished { outcome, usage, cost_usd, .. } => {
                let outcome = serde_json::to_value(outcome)
                    .ok()
                    .and_then(|v| v.as_str().map(|s| s.replace('_', " ")))
                    .unwrap_or_default();
                let cost = self.cost(*cost_usd, !self.unpriced_runs.contains(&run));
                say(&format!("{who} finished: {outcome}, {} tokens, {cost}", grouped(usage.total())));
            }
            AgentEventKind::RunError { message, .. } => {
                say(&format!("{who} {} {}", self.style.bad("error:"), first_line(message, 200)));
            }
            AgentEventKind::RunPaused { .. } => say(&format!("{who} paused")),
            AgentEventKind::Retrying { attempt, delay_ms, reason } => say(&format!(
                "{who} note: retry {attempt} in {:.1}s: {}",
                *delay_ms as f64 / 1000.0,
                first_line(reason, 160)
            )),
            AgentEventKind::ModelFallback { from, to, reason } => {
                say(&format!("{who} note: {from} failed ({}); falling back to {to}", first_line(reason, 120)));
            }
            AgentEventKind::Custom { name, value } if name == FIREWALL_DROP_EVENT => {
                let reason = value["reason"].as_str().unwrap_or_default();
                let reason = DropReason::ALL
                    .into_iter()
                    .find(|r| r.as_str() == reason)
                    .map_or_else(|| reason.to_owned(), |r| r.to_string());
                let (from, to) = (value["from"].as_str().unwrap_or_default(), value["to"].as_str().unwrap_or_default());
                let what = match value["field"].as_str() {
                    Some(field) => format!("withheld `{field}` of a report"),
                    None => "dropped a report".to_owned(),
                };
                say(&format!("{} {what} {from} -> {to}: {reason}", self.style.warn("[firewall]")));
            }
            AgentEventKind::Custom { name, value } if name == SANDBOX_EVENT => {
                let status = value["status"].as_str().unwrap_or("unknown");
                let workspace = value["workspace"].as_str().unwrap_or_default();
                say(&format!("{who} worker sandbox: {status} (writes confined to {workspace})"));
            }
            _ => {}
        }
    }

    /// `$0.0123`, or `unpriced`.
    fn cost(&self, usd: f64, priced: bool) -> String {
        if priced { format!("${usd:.4}") } else { "unpriced".to_owned() }
    }
}

/// A line on stderr.
fn say(line: &str) {
    diagln!("{line}");
}

fn write_json(event: &AgentEvent) -> bool {
    let Ok(line) = serde_json::to_string(event) else { return true };
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").and_then(|()| out.flush()).is_ok()
}

/// The teammate a `delegate` call names.
fn delegate_target(arguments: &str) -> String {
    let value: Value = serde_json::from_str(arguments).unwrap_or(Value::Null);
    value["to"].as_str().map_or_else(|| shorten(arguments, 40), str::to_owned)
}

/// `1234567` as `1,234,567`.
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// One member's calls, summed.
#[derive(Default)]
struct Sum {
    tasks: usize,
    failed: Option<String>,
    usage: Usage,
    cost_usd: f64,
    elapsed: Duration,
}

/// The summary: a row per member (calls, outcome, tool calls, tokens, cost, time) and the
/// team's total; the members in `paused` wait for a person.
pub(crate) fn summary_table(rows: &[Row], records: &[Record], paused: &[&str], progress: &Progress) -> String {
    let mut sums: BTreeMap<&str, Sum> = BTreeMap::new();
    for record in records {
        let sum = sums.entry(record.name.as_str()).or_default();
        sum.tasks += 1;
        sum.usage += record.usage;
        sum.cost_usd += record.cost_usd;
        sum.elapsed += record.elapsed;
        if !record.success {
            sum.failed = Some(record.error.clone().unwrap_or_else(|| "failed".to_owned()));
        }
    }
    let mut table = Table::new();
    table.load_preset(presets::UTF8_FULL_CONDENSED).set_content_arrangement(ContentArrangement::Disabled);
    table.set_header(["member", "role", "isolation", "tasks", "outcome", "tool calls", "tokens", "cost (USD)", "time"]);
    let (mut tasks, mut calls, mut tokens, mut cost, mut priced) = (0, 0, 0_u64, 0.0, true);
    for row in rows {
        let sum = sums.remove(row.name.as_str()).unwrap_or_default();
        let activity = progress.activity(&row.name);
        let outcome = match (&sum.failed, sum.tasks) {
            _ if paused.contains(&row.name.as_str()) => "paused".to_owned(),
            (_, 0) => "not asked".to_owned(),
            (Some(error), _) => format!("failed: {}", shorten(&first_line(error, 60), 60)),
            (None, _) => "completed".to_owned(),
        };
        tasks += sum.tasks;
        calls += activity.tool_calls;
        tokens = tokens.saturating_add(sum.usage.total());
        cost += sum.cost_usd;
        priced &= activity.priced;
        table.add_row([
            row.name.clone(),
            row.role.to_owned(),
            row.isolation.as_str().to_owned(),
            sum.tasks.to_string(),
            outcome,
            activity.tool_calls.to_string(),
            grouped(sum.usage.total()),
            progress.cost(sum.cost_usd, activity.priced),
            format!("{:.1}s", sum.elapsed.as_secs_f64()),
        ]);
    }
    table.add_row([
        "team".to_owned(),
        String::new(),
        String::new(),
        tasks.to_string(),
        String::new(),
        calls.to_string(),
        grouped(tokens),
        progress.cost(cost, priced),
        String::new(),
    ]);
    for column in [3, 5, 6, 7, 8] {
        if let Some(column) = table.column_mut(column) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    table.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delegations_name_their_teammate() {
        assert_eq!(delegate_target(r#"{"to": "reviewer", "brief": "x"}"#), "reviewer");
        assert_eq!(delegate_target("oops"), "oops");
        assert_eq!(grouped(1_234_567), "1,234,567");
    }
}
