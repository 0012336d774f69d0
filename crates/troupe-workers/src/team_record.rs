//! A team's own run in the store: what it records as it starts ([`TeamInput`]: the task,
//! where the team file and its agents are, and a digest of each file), how it ends or
//! pauses, and what a resume checks first ([`TeamInput::changes`]: a team whose files
//! changed since it started is not resumed as if they had not, unless forced).

use crate::build::Approvals;
use crate::team_run::TeamFiles;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use troupe_runtime::durable::{TEAM_RUN_KIND, digest};
use troupe_store::{RunRecord, RunStatus, StoreError};

/// A file a team run was started from, and its content's SHA-256.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Source {
    /// The file.
    pub path: PathBuf,
    /// SHA-256 (hex) of its bytes.
    pub sha256: String,
}

impl Source {
    /// `path` as it is now (`None` when it cannot be read).
    fn read(path: &Path) -> Option<Source> {
        let bytes = std::fs::read(path).ok()?;
        Some(Source { path: path.to_owned(), sha256: digest(&String::from_utf8_lossy(&bytes)) })
    }
}

/// What a team's run records as its input: enough for another process to build the same
/// team again and to tell whether its files changed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TeamInput {
    /// Always [`TEAM_RUN_KIND`]: a team's run is never taken for an agent's.
    pub kind: String,
    /// The team's name.
    pub team: String,
    /// Its task.
    pub instruction: String,
    /// The team file, absolute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<PathBuf>,
    /// Where its agents' files were found, absolute.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agent_dirs: Vec<PathBuf>,
    /// The directory its members work in, absolute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<PathBuf>,
    /// The team file, each agent file it names and each report schema file, with their
    /// digests.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<Source>,
    /// What its members' calls that need approval did (a resumed team does the same).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approvals: Option<Approvals>,
}

impl TeamInput {
    /// The input of a run of `files`' team on `task`, its members working in `workspace`,
    /// their calls that need approval doing as `approvals` says.
    pub fn new(files: &TeamFiles, task: &str, workspace: &Path, approvals: Approvals) -> Self {
        let absolute = |path: &Path| std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
        let team = files.team();
        let file = (!team.path().as_os_str().is_empty()).then(|| absolute(team.path()));
        let agents: Vec<_> =
            team.leader().into_iter().chain(team.agent_ids()).filter_map(|id| files.registry().entry(id)).collect();
        let agent_dirs: BTreeSet<PathBuf> = agents.iter().map(|a| absolute(&a.config_dir)).collect();
        let mut paths: Vec<PathBuf> = file.iter().cloned().collect();
        paths.extend(agents.iter().map(|a| absolute(&a.path)));
        // A report's schema decides what a member answers, as much as its agent file.
        paths.extend(team.report_files().iter().map(|p| absolute(p)));
        TeamInput {
            kind: TEAM_RUN_KIND.to_owned(),
            team: team.name().to_owned(),
            instruction: task.to_owned(),
            file,
            agent_dirs: agent_dirs.into_iter().collect(),
            workspace: Some(absolute(workspace)),
            sources: paths.iter().filter_map(|p| Source::read(p)).collect::<BTreeSet<_>>().into_iter().collect(),
            approvals: Some(approvals),
        }
    }

    /// Reads a team run's input from its record; `None` when the run is not a team's.
    pub fn read(record: &RunRecord) -> Result<Option<Self>, StoreError> {
        if record.input.get("kind").and_then(serde_json::Value::as_str) != Some(TEAM_RUN_KIND) {
            return Ok(None);
        }
        serde_json::from_value(record.input.clone())
            .map(Some)
            .map_err(|e| StoreError::decode(format!("input of team run `{}`", record.id), e))
    }

    /// What differs between the files this run was started from and `now`'s: each file
    /// that changed, is gone, or is new, in words. Empty when nothing changed.
    pub fn changes(&self, now: &TeamInput) -> Vec<String> {
        let mut changes = Vec::new();
        for then in &self.sources {
            match now.sources.iter().find(|s| s.path == then.path) {
                None => {
                    changes.push(format!("{} is no longer part of the team (or cannot be read)", then.path.display()))
                }
                Some(source) if source.sha256 != then.sha256 => {
                    changes.push(format!("{} changed", then.path.display()))
                }
                Some(_) => {}
            }
        }
        for source in &now.sources {
            if !self.sources.iter().any(|s| s.path == source.path) {
                changes.push(format!("{} is new to the team", source.path.display()));
            }
        }
        changes
    }
}

/// Why a team's run cannot be resumed.
#[derive(Debug, thiserror::Error)]
pub enum TeamResumeError {
    /// The team was built without a store ([`TeamRun::store`](crate::team_run::TeamRun::store)).
    #[error("this team records no runs: it has no store")]
    NoStore,
    /// No run has that id.
    #[error("no run `{0}` in the store")]
    UnknownRun(String),
    /// The run is an agent's, not a team's.
    #[error("run `{run_id}` is a run of agent `{agent}`, not a team's run")]
    NotTeamRun {
        /// The run.
        run_id: String,
        /// Its agent.
        agent: String,
    },
    /// The run is another team's.
    #[error("run `{run_id}` is a run of team `{recorded}`, not of team `{this}`")]
    OtherTeam {
        /// The run.
        run_id: String,
        /// The team that made it.
        recorded: String,
        /// The team asked to resume it.
        this: String,
    },
    /// The run has finished.
    #[error("team run `{run_id}` has finished ({status}); it takes nothing more")]
    Finished {
        /// The run.
        run_id: String,
        /// How it ended.
        status: RunStatus,
    },
    /// The team's files changed since the run started.
    #[error(
        "the files of team run `{run_id}` changed since it started: {}; resuming would go on with another team than the one that began (force it to resume as the files are now)",
        changes.join("; ")
    )]
    Changed {
        /// The run.
        run_id: String,
        /// What changed, in words.
        changes: Vec<String>,
    },
    /// The store failed, or holds what this version cannot read.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The team's members could not be built again.
    #[error(transparent)]
    Build(#[from] crate::build::BuildError),
}
