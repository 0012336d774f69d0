//! A team file's remote members ([`RemoteMembers`]): each `remote = "…"` entry made into
//! a [`RemoteAgent`] once for every run of the team — its token read from the variable
//! `bearer_env` names, its card read, its skill, name and timeout set, its tools'
//! arguments' schemas read where its server gives them — then, for each run, told what
//! its calls that need approval do.

use crate::build::{Approvals, BuildError};
use crate::team_file::{DEFAULT_REMOTE_TIMEOUT_SECONDS, MemberEntry, TeamFile};
use std::collections::BTreeMap;
use std::time::Duration;
use troupe_a2a::RemoteAgent;
use troupe_runtime::ApprovalDecision;
use troupe_team::TeamControl;

/// How long reading a remote member's card may take.
const CARD_TIMEOUT: Duration = Duration::from_secs(30);

/// What a remote member's model is told of a call refused because nobody approves calls.
const REFUSED: &str = "refused: the team refuses calls that need approval";

/// The remote members of a team file, by their place among its members, ready to be
/// given a run.
#[derive(Clone, Debug, Default)]
pub struct RemoteMembers {
    agents: BTreeMap<usize, RemoteAgent>,
}

impl RemoteMembers {
    /// Makes each remote member of `team` ready: its token read from the environment (a
    /// variable that is not set is an error naming it, at its place in the file), its
    /// card read, the skill it names checked against the card (by default the card's
    /// first), its name (by default the card's) checked against the team, its timeout
    /// set (within the team's `max_seconds`).
    pub async fn resolve(team: &TeamFile) -> Result<RemoteMembers, BuildError> {
        let mut agents = BTreeMap::new();
        let team_time = team.budget().and_then(|b| b.max_wall_time);
        for (n, entry) in team.team.members.iter().enumerate() {
            let Some(url) = &entry.remote else { continue };
            // The token first: a missing variable is told before anything is sent.
            let token = match &entry.bearer_env {
                Some(variable) => Some(token(team, n, variable, url)?),
                None => None,
            };
            let card = tokio::time::timeout(CARD_TIMEOUT, RemoteAgent::resolve(url)).await;
            let mut agent = match card {
                Ok(Ok(agent)) => agent,
                Ok(Err(error)) => {
                    return Err(team.member_error(n, "remote", format!("cannot use the remote agent: {error}")).into());
                }
                Err(_) => {
                    return Err(team
                        .member_error(
                            n,
                            "remote",
                            format!("the remote agent's card did not come within {} s", CARD_TIMEOUT.as_secs()),
                        )
                        .into());
                }
            };
            agent = skill(team, n, entry, agent)?;
            if let Some(name) = &entry.name {
                agent = agent.named(name.clone());
            }
            if let Some(token) = token {
                agent = agent.bearer(token);
            }
            let own = Duration::from_secs(entry.timeout_seconds.unwrap_or(DEFAULT_REMOTE_TIMEOUT_SECONDS));
            agent = agent.timeout(team_time.map_or(own, |team| team.min(own)));
            agent = tool_inputs(agent).await;
            agents.insert(n, agent);
        }
        let remotes = RemoteMembers { agents };
        team.check_names(&remotes.names(team))?;
        Ok(remotes)
    }

    /// Each member's id in the team, in order: its agent id, or a remote member's name.
    pub fn names(&self, team: &TeamFile) -> Vec<String> {
        team.team
            .members
            .iter()
            .enumerate()
            .map(|(n, entry)| match (self.agents.get(&n), entry.id()) {
                (Some(agent), _) => troupe_team::Member::name(agent).to_owned(),
                (None, id) => id.unwrap_or_default().to_owned(),
            })
            .collect()
    }

    /// The `n`th member, when it is remote, for one run: its calls that need approval put
    /// to the team's caller through `control` ([`Approvals::Approver`]), approved
    /// ([`Approvals::Auto`]) or refused ([`Approvals::Refuse`]) for it.
    pub fn for_run(&self, n: usize, approvals: Approvals, control: &TeamControl) -> Option<RemoteAgent> {
        let agent = self.agents.get(&n)?.clone();
        Some(match approvals {
            Approvals::Approver => agent.with_control(control.clone()),
            Approvals::Auto => agent.answering(ApprovalDecision::Approve),
            Approvals::Refuse => agent.answering(ApprovalDecision::Reject { reason: Some(REFUSED.to_owned()) }),
        })
    }
}

/// `agent` with its tools' arguments' schemas read from its server, where it gives them:
/// what a person deciding one of its calls is shown. They help and are not needed: a
/// server that does not give them in time, or fails to, leaves them out.
async fn tool_inputs(agent: RemoteAgent) -> RemoteAgent {
    let fallback = agent.clone();
    match tokio::time::timeout(CARD_TIMEOUT, agent.read_tool_inputs()).await {
        Ok(Ok(read)) => read,
        Ok(Err(error)) => {
            tracing::debug!(agent = fallback.card_url(), %error, "the remote agent's tool inputs were not read");
            fallback
        }
        Err(_) => fallback,
    }
}

/// The token in `variable`; never shown, not even in the error.
fn token(team: &TeamFile, n: usize, variable: &str, url: &str) -> Result<String, BuildError> {
    let problem = match std::env::var(variable) {
        Ok(token) if !token.trim().is_empty() => return Ok(token),
        Ok(_) => "is empty",
        Err(std::env::VarError::NotPresent) => "is not set",
        Err(std::env::VarError::NotUnicode(_)) => "is not valid UTF-8",
    };
    Err(team
        .member_error(
            n,
            "bearer_env",
            format!("{variable} {problem}; export it with the bearer token of the remote agent at {url}"),
        )
        .into())
}

/// `agent` running the skill `entry` names, which its card must offer; by default the
/// card's first. Described as that skill is, when the card describes it.
fn skill(team: &TeamFile, n: usize, entry: &MemberEntry, agent: RemoteAgent) -> Result<RemoteAgent, BuildError> {
    let skills = agent.card().skills.clone();
    let chosen = match &entry.skill {
        Some(wanted) => match skills.iter().find(|s| &s.id == wanted) {
            Some(skill) => Some(skill.clone()),
            // A card that lists no skills cannot tell: the remote server decides.
            None if skills.is_empty() => None,
            None => {
                let offered: Vec<&str> = skills.iter().map(|s| s.id.as_str()).collect();
                return Err(team
                    .member_error(
                        n,
                        "skill",
                        format!(
                            "the remote agent at {} offers no skill `{wanted}`; it offers {}",
                            agent.card_url(),
                            offered.join(", ")
                        ),
                    )
                    .into());
            }
        },
        None => skills.first().cloned(),
    };
    let id = entry.skill.clone().or_else(|| chosen.as_ref().map(|s| s.id.clone()));
    let mut agent = match id {
        Some(id) => agent.skill(id),
        None => agent,
    };
    if let Some(skill) = chosen.filter(|s| !s.description.trim().is_empty() && skills.len() > 1) {
        agent = agent.described(skill.description);
    }
    Ok(agent)
}
