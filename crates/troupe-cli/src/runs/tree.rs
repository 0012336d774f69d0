//! The runs under a run: a team's members' runs, a leader's delegations, as a tree.

use crate::render::shorten;
use std::collections::BTreeSet;
use troupe::runtime::durable::{TEAM_RUN_KIND, state_from_value};
use troupe::store::{RunFilter, RunRecord, RunStatus, RunSummary, Store, StoreError};

/// How deep a tree is followed: deeper is a store written wrong (or a delegation chain no
/// team makes), and it is cut rather than followed forever.
const MAX_DEPTH: usize = 16;

/// One run under another, with what it spent.
#[derive(Debug)]
pub(super) struct Node {
    /// How far below the run asked about: 1 for its own children.
    pub(super) depth: usize,
    pub(super) id: String,
    pub(super) agent: String,
    pub(super) parent_run_id: Option<String>,
    pub(super) status: RunStatus,
    pub(super) tool_calls: Option<u32>,
    pub(super) tokens: Option<u64>,
    pub(super) cost_usd: Option<f64>,
    /// From its creation to its last write.
    pub(super) elapsed_ms: i64,
    /// The calls it waits on a person for: id and tool.
    pub(super) waiting: Vec<(String, String)>,
}

impl Node {
    /// As `runs show --json` prints it.
    pub(super) fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "depth": self.depth,
            "id": self.id,
            "agent": self.agent,
            "parent_run_id": self.parent_run_id,
            "status": self.status.as_str(),
            "tool_calls": self.tool_calls,
            "tokens": self.tokens,
            "cost_usd": self.cost_usd,
            "elapsed_ms": self.elapsed_ms,
            "waiting": self.waiting.iter().map(|(call, tool)| serde_json::json!({"call_id": call, "tool": tool})).collect::<Vec<_>>(),
        })
    }
}

/// The runs that `root` started, and theirs, depth first, oldest first among siblings,
/// each with its depth (1 for `root`'s own children). Reads only the run list.
pub(super) async fn walk(store: &dyn Store, root: &str) -> Result<Vec<(usize, RunSummary)>, StoreError> {
    let mut seen = BTreeSet::from([root.to_owned()]);
    let mut found = Vec::new();
    let mut stack: Vec<(usize, RunSummary)> = children(store, root).await?.into_iter().rev().map(|c| (1, c)).collect();
    while let Some((depth, run)) = stack.pop() {
        if !seen.insert(run.id.clone()) {
            continue;
        }
        if depth < MAX_DEPTH {
            stack.extend(children(store, &run.id).await?.into_iter().rev().map(|c| (depth + 1, c)));
        }
        found.push((depth, run));
    }
    Ok(found)
}

/// [`walk`], each run with what it spent (read from its state).
pub(super) async fn descendants(store: &dyn Store, root: &str) -> Result<Vec<Node>, StoreError> {
    let mut nodes = Vec::new();
    for (depth, run) in walk(store, root).await? {
        let record = store.load_run(&run.id).await?;
        nodes.push(node(depth, run, record.as_ref()));
    }
    Ok(nodes)
}

async fn children(store: &dyn Store, parent: &str) -> Result<Vec<RunSummary>, StoreError> {
    let filter = RunFilter { parent_run_id: Some(parent.to_owned()), ..RunFilter::default() };
    let mut runs = store.list_runs(&filter).await?;
    runs.reverse();
    Ok(runs)
}

fn node(depth: usize, run: RunSummary, record: Option<&RunRecord>) -> Node {
    let state = record.and_then(|r| state_from_value(&r.id, r.state.clone()).ok());
    Node {
        depth,
        tool_calls: state.as_ref().map(|s| s.tool_calls()),
        tokens: state.as_ref().map(|s| s.usage().total()),
        cost_usd: state.as_ref().map(|s| s.cost_usd()),
        elapsed_ms: run.updated_at.saturating_sub(run.created_at),
        waiting: state
            .iter()
            .flat_map(|s| s.pending_calls().iter().filter(|c| c.is_awaiting()))
            .map(|c| (c.call_id.to_string(), c.tool.clone()))
            .collect(),
        id: run.id,
        agent: run.agent,
        parent_run_id: run.parent_run_id,
        status: run.status,
    }
}

/// Whether `record` is a team's own run.
pub(super) fn is_team(record: &RunRecord) -> bool {
    record.state.get("kind").and_then(serde_json::Value::as_str) == Some(TEAM_RUN_KIND)
}

/// The team's run at the top of `record`'s tree (`record` itself when it is one), if the
/// run belongs to a team.
pub(super) async fn team_root(store: &dyn Store, record: &RunRecord) -> Result<Option<RunRecord>, StoreError> {
    let mut at = record.clone();
    for _ in 0..MAX_DEPTH {
        if is_team(&at) {
            return Ok(Some(at));
        }
        let Some(parent) = at.parent_run_id.clone() else { return Ok(None) };
        match store.load_run(&parent).await? {
            Some(up) => at = up,
            None => return Ok(None),
        }
    }
    Ok(None)
}

/// The rows `runs show` prints for a team's own run: its task, and what it came to.
pub(super) fn team_rows(record: &RunRecord) -> Vec<(&'static str, String)> {
    let text = |value: &serde_json::Value| value.as_str().map(str::to_owned);
    let state = &record.state;
    let mut rows = vec![("task", text(&record.input["instruction"]).unwrap_or_default())];
    if let Some(tokens) = state["tokens"].as_u64() {
        rows.push(("usage", format!("{tokens} tokens, every member together")));
    }
    if let Some(cost) = state["cost_usd"].as_f64() {
        rows.push(("cost", format!("${cost:.4}")));
    }
    if let Some(error) = text(&state["error"]) {
        rows.push(("outcome", error));
    } else if let Some(output) = text(&state["output"]) {
        rows.push(("answer", output));
    }
    rows
}

/// The tree as indented lines, one per run.
pub(super) fn lines(nodes: &[Node]) -> Vec<String> {
    nodes
        .iter()
        .map(|n| {
            let indent = "  ".repeat(n.depth);
            let name = shorten(&n.agent, 24);
            let calls = match n.tool_calls {
                Some(1) => "1 tool call".to_owned(),
                Some(c) => format!("{c} tool calls"),
                None => "-".to_owned(),
            };
            let tokens = n.tokens.map_or_else(|| "-".to_owned(), |t| format!("{t} tokens"));
            let cost = n.cost_usd.map_or_else(|| "-".to_owned(), |c| format!("${c:.4}"));
            let seconds = n.elapsed_ms as f64 / 1000.0;
            let waiting: Vec<String> = n.waiting.iter().map(|(call, tool)| format!("{call} ({tool})")).collect();
            let waiting = match waiting.is_empty() {
                true => String::new(),
                false => format!("  waiting for a person: {}", waiting.join(", ")),
            };
            format!("{indent}{name}  {}  {calls}  {tokens}  {cost}  {seconds:.1} s  {}{waiting}", n.status, n.id)
        })
        .collect()
}
