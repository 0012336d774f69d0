//! Asking the person at the terminal about a member's call that needs approval, however
//! deep the member is: the question names the path that led to it
//! (`lead → coder: shell {"command": "cargo test"}`), and the answer goes to that member's
//! run through the team's control.

use crate::render::shorten;
use crate::run::{Lines, prompt};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use tokio_util::sync::CancellationToken;
use troupe::core::{AgentEvent, AgentEventKind, PauseReason, RunId};
use troupe::runtime::durable::UNCERTAIN_REASON;
use troupe::team::TeamControl;

/// How deep a delegation path is followed before it is cut (a loop guard).
const MAX_DEPTH: usize = 32;

/// Asks about members' waiting calls as their `RunPaused` events arrive.
pub(crate) struct Asker {
    control: TeamControl,
    /// Every run seen: its agent and the run that delegated it.
    runs: HashMap<RunId, (String, Option<RunId>)>,
    lines: Option<Lines>,
    /// Where the members' files are, for the diff of a write.
    workspace: Option<PathBuf>,
}

impl Asker {
    /// An asker answering through `control`.
    pub(crate) fn new(control: TeamControl) -> Self {
        Asker { control, runs: HashMap::new(), lines: None, workspace: None }
    }

    /// Shows the change a member's write would make to the files in `workspace`.
    pub(crate) fn in_workspace(mut self, workspace: &Path) -> Self {
        self.workspace = Some(workspace.to_path_buf());
        self
    }

    /// Takes one event; a member's call waiting for approval is asked about, and the
    /// answer sent to the member.
    pub(crate) async fn event(&mut self, event: &AgentEvent, cancel: &CancellationToken) {
        let attribution = &event.attribution;
        self.runs
            .entry(attribution.run_id.clone())
            .or_insert_with(|| (attribution.agent_id.as_str().to_owned(), attribution.parent_run_id.clone()));
        let (call_id, tool, arguments, reason) = match &event.kind {
            AgentEventKind::RunPaused { reason: PauseReason::Approval { call_id, tool, arguments, reason } } => {
                (call_id, tool, arguments, reason.as_str())
            }
            AgentEventKind::RunPaused { reason: PauseReason::UncertainAction { call_id, tool, arguments } } => {
                (call_id, tool, arguments, UNCERTAIN_REASON)
            }
            _ => return,
        };
        let path = self.path(&attribution.run_id);
        diagln!("? {path}: {tool} {} needs approval: {reason}", shorten(&arguments.to_string(), 200));
        let lines = self.lines.get_or_insert_with(Lines::spawn);
        let Some(decision) = prompt(lines, tool, arguments, self.workspace.as_deref(), cancel).await else {
            return;
        };
        if let Err(error) = self.control.decide(&attribution.run_id, call_id.clone(), decision).await {
            // The member's run ended meanwhile (the team was cancelled): nothing waits.
            tracing::debug!(%error, "the decision found no member run waiting");
        }
    }

    /// `lead → coder`: the agents from the team's first run down to `run`.
    fn path(&self, run: &RunId) -> String {
        let mut names = Vec::new();
        let mut at = Some(run.clone());
        while let Some(id) = at.take() {
            let Some((agent, parent)) = self.runs.get(&id) else { break };
            names.push(agent.clone());
            if names.len() >= MAX_DEPTH {
                break;
            }
            at.clone_from(parent);
        }
        names.reverse();
        names.join(" → ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_path_runs_from_the_leader_to_the_member() {
        let mut asker = Asker::new(TeamControl::new());
        asker.runs.insert(RunId::new("l"), ("lead".into(), Some(RunId::new("team"))));
        asker.runs.insert(RunId::new("c"), ("coder".into(), Some(RunId::new("l"))));
        assert_eq!(asker.path(&RunId::new("c")), "lead → coder");
        // A member whose leader was not seen is named alone.
        asker.runs.insert(RunId::new("x"), ("tester".into(), Some(RunId::new("gone"))));
        assert_eq!(asker.path(&RunId::new("x")), "tester");
    }
}
