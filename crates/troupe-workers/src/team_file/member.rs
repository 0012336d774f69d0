//! `[[team.members]]`: a member is an agent file of the config directories (`agent`), run
//! here or in a worker process, or an agent on another A2A server (`remote`), reached over
//! HTTP.

use super::positive_u64;
use crate::definition::Location;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Where a member runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Isolation {
    /// In the coordinator's process.
    #[default]
    Local,
    /// In a worker subprocess started as the agent file's `[agent.execution]` says.
    Process,
    /// On another A2A server (a `remote` member); never written as `isolation`.
    #[serde(skip_deserializing)]
    Remote,
}

impl Isolation {
    /// The name written in the file (and in a team's summary).
    pub fn as_str(self) -> &'static str {
        match self {
            Isolation::Local => "local",
            Isolation::Process => "process",
            Isolation::Remote => "remote",
        }
    }
}

/// `[[team.members]]`: exactly one of `agent` and `remote`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemberEntry {
    /// The member's agent id, an agent file's (`None` for a remote member).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// A remote A2A agent: its base URL, or its card's URL (`None` for an agent member).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<String>,
    /// A remote member's id in the team (channels and the leader's `delegate` tool name
    /// it); by default the name its card gives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Which of the remote server's skills (agents) runs the member's tasks; by default
    /// the first its card lists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skill: Option<String>,
    /// The environment variable holding the bearer token the remote server wants; read
    /// when the team is assembled, never written anywhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bearer_env: Option<String>,
    /// How long a remote member's task may take, in seconds (1 or more); by default
    /// [`DEFAULT_REMOTE_TIMEOUT_SECONDS`], within the team's `max_seconds`.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "positive_u64")]
    pub timeout_seconds: Option<u64>,
    /// Where an agent member runs (default local).
    #[serde(default)]
    pub isolation: Isolation,
    /// What a member reports: `"text"` (its answer, the default unless its agent file has
    /// an `[output]`), `"structured"` (the structured report: summary, artifacts,
    /// decisions, blockers) or the path of a JSON schema file, relative to the team file.
    /// A remote member's is asked of its server as its task's typed answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<String>,
}

/// How long a remote member's task may take when its entry does not say.
pub const DEFAULT_REMOTE_TIMEOUT_SECONDS: u64 = 600;

/// The keys only a remote member takes.
const REMOTE_KEYS: [&str; 4] = ["name", "skill", "bearer_env", "timeout_seconds"];

impl MemberEntry {
    /// The member's id in the team as the file tells it: its agent id, or a remote
    /// member's `name`; `None` for a remote member named by its card alone.
    pub fn id(&self) -> Option<&str> {
        self.agent.as_deref().or(self.name.as_deref())
    }

    /// Whether the member is a remote A2A agent.
    pub fn is_remote(&self) -> bool {
        self.remote.is_some()
    }

    /// Where it runs: [`Isolation::Remote`] for a remote member.
    pub fn placement(&self) -> Isolation {
        if self.is_remote() { Isolation::Remote } else { self.isolation }
    }
}

/// Where one `[[team.members]]` table and its keys are written.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct MemberPlaces {
    /// The table.
    pub(super) table: Option<Location>,
    /// Each key's value.
    pub(super) keys: BTreeMap<String, Location>,
}

impl MemberPlaces {
    /// Where `key`'s value is written, else the table.
    pub(super) fn of(&self, key: &str) -> Option<Location> {
        self.keys.get(key).copied().or(self.table)
    }

    /// Where the member's id is written: `agent`, or a remote member's `name`, else its
    /// `remote`.
    pub(super) fn id(&self) -> Option<Location> {
        ["agent", "name", "remote"].iter().find_map(|k| self.keys.get(*k).copied()).or(self.table)
    }
}

/// What is wrong with one entry on its own, and where: one of `agent` and `remote`, the
/// keys that go with it, a URL that can be one, a variable name that can be one.
pub(super) fn check_entry(entry: &MemberEntry, places: &MemberPlaces) -> Result<(), (Option<Location>, String)> {
    match (&entry.agent, &entry.remote) {
        (None, None) => {
            return Err((
                places.table,
                "a [[team.members]] entry needs `agent = \"ID\"` (an agent file) or `remote = \"https://…\"` (an A2A \
                 agent on another server)"
                    .to_owned(),
            ));
        }
        (Some(_), Some(_)) => {
            return Err((
                places.of("remote"),
                "a [[team.members]] entry has both `agent` and `remote`: a member is an agent file or a remote A2A \
                 agent, not both; keep one"
                    .to_owned(),
            ));
        }
        (Some(_), None) => {
            if let Some(key) = REMOTE_KEYS.iter().find(|k| places.keys.contains_key(**k)) {
                let why = if *key == "name" { "; an agent member's id in the team is its agent id" } else { "" };
                return Err((
                    places.of(key),
                    format!("`{key}` in [[team.members]] is for remote members (`remote = \"https://…\"`){why}"),
                ));
            }
        }
        (None, Some(url)) => {
            if places.keys.contains_key("isolation") {
                return Err((
                    places.of("isolation"),
                    "`isolation` in [[team.members]] is for agent members: a remote member runs on its own server"
                        .to_owned(),
                ));
            }
            troupe_a2a::agent_url(url)
                .map_err(|e| (places.of("remote"), format!("`remote` in [[team.members]]: {e}")))?;
            if entry.skill.as_deref().is_some_and(|s| s.trim().is_empty()) {
                return Err((places.of("skill"), "`skill` in [[team.members]] must not be empty".to_owned()));
            }
            if let Some(variable) = &entry.bearer_env {
                check_variable(variable)
                    .map_err(|e| (places.of("bearer_env"), format!("`bearer_env` in [[team.members]]: {e}")))?;
            }
        }
    }
    Ok(())
}

/// An environment variable's name: ASCII letters, digits and `_`, not starting with a
/// digit. The text is not repeated in the error: it may be a token written by mistake.
fn check_variable(name: &str) -> Result<(), String> {
    let valid = !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if valid {
        Ok(())
    } else {
        Err("it must name the environment variable that holds the token (ASCII letters, digits and `_`), such \
             as \"REVIEW_TOKEN\", never hold the token itself"
            .to_owned())
    }
}
