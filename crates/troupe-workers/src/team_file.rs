//! [`TeamFile`]: a team of agent files, written as TOML.
//!
//! ```toml
//! [team]
//! name = "project"
//! description = "Looks into a repository."   # optional
//! strategy = "delegate"        # delegate | orchestrated | parallel | pipeline
//! leader = "lead"              # an agent id; delegate and orchestrated teams only
//! max_concurrency = 4          # optional; members at once (parallel, orchestrated)
//!
//! [team.budget]                # optional: every member together
//! max_usd = 1.0
//! max_total_tokens = 200000
//! max_seconds = 600
//!
//! [[team.members]]
//! agent = "researcher"         # an agent id of the config directories
//! isolation = "local"          # local (default) | process (a worker subprocess)
//!
//! [[team.members]]
//! agent = "reviewer"
//!
//! [[team.members]]             # an agent on another A2A server
//! remote = "https://agents.example/"   # its base URL (or its card's URL); http or https
//! name = "auditor"             # optional; its id in the team (default: its card's name)
//! skill = "audit"              # optional; the remote agent to run (default: the card's first skill)
//! bearer_env = "AUDIT_TOKEN"   # optional; the variable holding its bearer token
//! timeout_seconds = 300        # optional; default 600, within the team's max_seconds
//!
//! [firewall]                   # optional
//! channels = ["researcher -> lead", "reviewer -> lead", "auditor -> lead"]
//!
//! [firewall.fields]            # optional: the fields of typed reports a channel carries
//! "researcher -> lead" = ["summary", "decisions", "blockers"]
//! ```
//!
//! A member's `report` (an agent member's, or a remote one's, asked of its server as its
//! task's typed answer) says what it gives back: `"text"` (its answer; the default
//! unless its agent file has an `[output]`), `"structured"` (the structured report:
//! summary, artifacts, decisions, blockers) or the path of a JSON schema file, relative to
//! the team file (`report = "schemas/review.json"`). A typed report reaches its recipient
//! as data; `[firewall.fields]` names the top-level fields each channel carries, and the
//! firewall withholds the others (each withheld field is a `firewall_drop` event).
//!
//! A member is exactly one of `agent` (an agent file of the config directories) and
//! `remote` (an A2A agent, found by its card when the team is assembled). A remote member
//! goes through the firewall like any member: its brief and its report pass the same
//! channels. Its token is read from `bearer_env` when the team is assembled (a variable
//! that is not set stops the assembly, naming the variable); the file never holds it,
//! and neither do the team's record, its events or its errors. What a remote member's
//! call that needs approval does follows the team's approval mode: the team's caller is
//! asked (a `RunPaused` of the member, its run being the remote task), or the call is
//! approved or refused for it.
//!
//! The leader is not one of `[[team.members]]`: the members are its teammates (a
//! `delegate` leader gets a `delegate` tool over them; an `orchestrated` leader splits the
//! task among them). A `parallel` or `pipeline` team has no leader.
//!
//! `[firewall] channels` are the `sender -> recipient` channels member reports may pass;
//! a report on an undeclared channel is withheld from its recipient. Every endpoint must
//! be the leader or a member.
//!
//! Like agent files, every table refuses keys it does not know, and every error names the
//! file, line and column ([`DefinitionError`]):
//!
//! ```text
//! team.toml:3:12: `strategy` in [team] cannot be "solo"; expected one of delegate, orchestrated, parallel, pipeline
//! ```
//!
//! Whether the agent ids name agents that exist is checked against a registry
//! ([`TeamFile::check_agents`]), since the file alone cannot tell; a remote member named
//! by its card alone is checked once the card is read ([`TeamFile::check_names`]).

mod member;

pub use member::{DEFAULT_REMOTE_TIMEOUT_SECONDS, Isolation, MemberEntry};

use crate::definition::{DefinitionError, Location, MAX_ID_LEN};
use crate::registry::AgentRegistry;
use member::{MemberPlaces, check_entry};
use serde::de::{Error as _, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;
use toml::de::{DeTable, DeValue};
use troupe_team::{ReportFormat, TeamBudget};

/// A team file: who is in the team, how they share the task, what they may spend, and
/// what may pass between them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TeamFile {
    /// `[team]`.
    pub team: TeamSection,
    /// `[firewall]`, when the file has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firewall: Option<FirewallSection>,
    /// The file it was read from.
    #[serde(skip)]
    source: PathBuf,
    /// Where the values later checks point at are written.
    #[serde(skip)]
    places: Places,
    /// Each member's report, its schema read.
    #[serde(skip)]
    reports: Vec<ReportFormat>,
}

/// How a team's members share the task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TeamStrategy {
    /// The leader gets a `delegate` tool over the members and decides itself whom to ask.
    Delegate,
    /// The leader splits the task into delegations (as JSON), the members run them in
    /// parallel, and the leader writes the answer from their results.
    Orchestrated,
    /// Every member gets the task at once; the answer gathers every member's.
    Parallel,
    /// Each member gets the previous member's answer; the last answer is the team's.
    Pipeline,
}

impl TeamStrategy {
    /// The name written in the file.
    pub fn as_str(self) -> &'static str {
        match self {
            TeamStrategy::Delegate => "delegate",
            TeamStrategy::Orchestrated => "orchestrated",
            TeamStrategy::Parallel => "parallel",
            TeamStrategy::Pipeline => "pipeline",
        }
    }

    /// Whether the strategy needs a `leader`.
    pub fn has_leader(self) -> bool {
        matches!(self, TeamStrategy::Delegate | TeamStrategy::Orchestrated)
    }
}

impl fmt::Display for TeamStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `[team]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TeamSection {
    /// The team's name (task ids and the summary start with it).
    #[serde(deserialize_with = "not_empty")]
    pub name: String,
    /// What the team is for.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// How the members share the task.
    pub strategy: TeamStrategy,
    /// The leader's agent id (delegate and orchestrated teams).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader: Option<String>,
    /// The most members working at once (parallel and orchestrated teams; 1 or more).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "concurrency")]
    pub max_concurrency: Option<usize>,
    /// `[team.budget]`: what every member together may spend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<BudgetSection>,
    /// `[[team.members]]`, in order (a pipeline's order).
    #[serde(default)]
    pub members: Vec<MemberEntry>,
}

/// `[team.budget]`: limits on every member together.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetSection {
    /// The most USD, by the registry's prices (more than 0).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "usd")]
    pub max_usd: Option<f64>,
    /// The most tokens, input, cached and output (1 or more).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "positive_u64")]
    pub max_total_tokens: Option<u64>,
    /// The longest the team may work, in seconds (1 or more).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "positive_u64")]
    pub max_seconds: Option<u64>,
}

impl BudgetSection {
    /// The budget as the team crate counts it.
    pub fn to_team_budget(&self) -> TeamBudget {
        TeamBudget {
            max_total_tokens: self.max_total_tokens,
            max_usd: self.max_usd,
            max_wall_time: self.max_seconds.map(Duration::from_secs),
        }
    }
}

/// `[firewall]`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FirewallSection {
    /// The declared channels, each `"sender -> recipient"`.
    #[serde(default)]
    pub channels: Vec<String>,
    /// The top-level fields of typed reports each channel (`"sender -> recipient"`, one
    /// of `channels`) carries; a channel not named carries whole reports.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub fields: std::collections::BTreeMap<String, Vec<String>>,
}

/// A declared channel: reports from `from` may reach `to`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Channel {
    /// The sender.
    pub from: String,
    /// The recipient.
    pub to: String,
}

impl fmt::Display for Channel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} -> {}", self.from, self.to)
    }
}

impl Channel {
    /// Reads `sender -> recipient`.
    pub fn parse(text: &str) -> Result<Channel, String> {
        let Some((from, to)) = text.split_once("->") else {
            return Err(format!(
                "`{text}` is not a channel; write \"sender -> recipient\", such as \"reviewer -> lead\""
            ));
        };
        let (from, to) = (from.trim(), to.trim());
        for end in [from, to] {
            check_id(end).map_err(|e| format!("in the channel `{text}`: {e}"))?;
        }
        if from == to {
            return Err(format!("the channel `{text}` goes from `{from}` to itself"));
        }
        Ok(Channel { from: from.to_owned(), to: to.to_owned() })
    }
}

/// Where the values that later checks are about are written.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Places {
    team: Option<Location>,
    strategy: Option<Location>,
    leader: Option<Location>,
    members: Vec<MemberPlaces>,
    channels: Vec<Option<Location>>,
    fields: std::collections::BTreeMap<String, Location>,
}

impl TeamFile {
    /// Parses and validates the text of the team file `path` (used in errors; not read).
    ///
    /// ```
    /// use troupe_workers::team_file::{TeamFile, TeamStrategy};
    ///
    /// let text = "[team]\nname = \"t\"\nstrategy = \"parallel\"\n\n[[team.members]]\nagent = \"a\"\n";
    /// let team = TeamFile::parse(text, "team.toml")?;
    /// assert_eq!(team.team.strategy, TeamStrategy::Parallel);
    ///
    /// let typo = TeamFile::parse(&text.replace("agent =", "agnet ="), "team.toml").unwrap_err();
    /// assert_eq!(
    ///     typo.to_string(),
    ///     "team.toml:6:1: unknown key `agnet` in [[team.members]]; expected one of agent, remote, name, skill, \
    ///      bearer_env, timeout_seconds, isolation, report"
    /// );
    /// # Ok::<(), troupe_workers::definition::DefinitionError>(())
    /// ```
    pub fn parse(text: &str, path: impl AsRef<Path>) -> Result<Self, DefinitionError> {
        let path = path.as_ref();
        let mut file: TeamFile = toml::from_str(text).map_err(|e| DefinitionError::from_toml(path, text, &e))?;
        file.source = path.to_owned();
        file.places =
            Places::find(text, file.team.members.len(), file.firewall.as_ref().map_or(0, |f| f.channels.len()));
        file.check()?;
        file.reports = file.read_reports()?;
        Ok(file)
    }

    /// Each member's report, a schema file read next to the team file.
    fn read_reports(&self) -> Result<Vec<ReportFormat>, DefinitionError> {
        let mut reports = Vec::with_capacity(self.team.members.len());
        for (n, member) in self.team.members.iter().enumerate() {
            let at = self.places.members.get(n).and_then(|p| p.of("report"));
            let report = match member.report.as_deref() {
                None | Some("text") => ReportFormat::Text,
                Some("structured") => ReportFormat::Structured,
                Some(file) => ReportFormat::Schema(self.report_schema(file).map_err(|e| self.error(at, e))?),
            };
            reports.push(report);
        }
        Ok(reports)
    }

    /// The output spec of the schema file `file`, relative to the team file.
    fn report_schema(&self, file: &str) -> Result<troupe_runtime::OutputSpec, String> {
        if !file.ends_with(".json") {
            return Err(format!(
                "`report` in [[team.members]] cannot be \"{file}\"; expected \"text\", \"structured\" or the path of a \
                 JSON schema file (*.json)"
            ));
        }
        let path = self.source.parent().unwrap_or(Path::new("")).join(file);
        let text = std::fs::read_to_string(&path).map_err(|e| {
            format!("`report` in [[team.members]]: cannot read the schema file {}: {e}", path.display())
        })?;
        let schema: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
            format!("`report` in [[team.members]]: the schema file {} is not JSON: {e}", path.display())
        })?;
        let name = Path::new(file).file_stem().and_then(|s| s.to_str()).unwrap_or("Report");
        troupe_runtime::OutputSpec::new(troupe_core::OutputSchema::new(
            troupe_core::OutputSchema::name_from(name),
            schema,
        ))
        .map_err(|e| format!("`report` in [[team.members]]: {e}"))
    }

    /// The JSON schema files the members' `report`s name, next to the team file.
    pub fn report_files(&self) -> Vec<PathBuf> {
        let dir = self.source.parent().unwrap_or(Path::new(""));
        self.team
            .members
            .iter()
            .filter_map(|m| m.report.as_deref())
            .filter(|r| !matches!(*r, "text" | "structured"))
            .map(|r| dir.join(r))
            .collect()
    }

    /// What the `n`th member reports ([`ReportFormat::Text`] past the last member).
    pub fn report(&self, n: usize) -> ReportFormat {
        self.reports.get(n).cloned().unwrap_or_default()
    }

    /// The fields of typed reports each channel carries, as `[firewall.fields]` names them.
    pub fn report_fields(&self) -> Vec<(Channel, Vec<String>)> {
        let Some(firewall) = &self.firewall else {
            return Vec::new();
        };
        // Checked when the file was read.
        firewall
            .fields
            .iter()
            .filter_map(|(channel, fields)| Channel::parse(channel).ok().map(|c| (c, fields.clone())))
            .collect()
    }

    /// Reads, parses and validates the team file at `path`.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, DefinitionError> {
        let path = path.as_ref();
        let text =
            std::fs::read_to_string(path).map_err(|e| DefinitionError::new(path, format!("cannot read it: {e}")))?;
        Self::parse(&text, path)
    }

    /// The file the team was read from.
    pub fn path(&self) -> &Path {
        &self.source
    }

    /// The team's name.
    pub fn name(&self) -> &str {
        &self.team.name
    }

    /// The leader's agent id, if the team has one.
    pub fn leader(&self) -> Option<&str> {
        self.team.leader.as_deref()
    }

    /// The members' ids as the file tells them, in order: agent ids and remote members'
    /// `name`s (a remote member named by its card alone is left out).
    pub fn member_ids(&self) -> impl Iterator<Item = &str> {
        self.team.members.iter().filter_map(MemberEntry::id)
    }

    /// The agent ids of the members that are agent files, in order.
    pub fn agent_ids(&self) -> impl Iterator<Item = &str> {
        self.team.members.iter().filter_map(|m| m.agent.as_deref())
    }

    /// Where the `key` of the `n`th member is written (else its table), for errors about
    /// it found later (a remote member's card, its token's variable).
    pub fn member_error(&self, n: usize, key: &str, message: impl Into<String>) -> DefinitionError {
        self.error(self.places.members.get(n).and_then(|p| p.of(key)), message)
    }

    /// The declared channels (`None` without a `[firewall]` table).
    pub fn channels(&self) -> Option<Vec<Channel>> {
        let firewall = self.firewall.as_ref()?;
        // Checked when the file was read.
        Some(firewall.channels.iter().filter_map(|c| Channel::parse(c).ok()).collect())
    }

    /// The budget, when the file sets one.
    pub fn budget(&self) -> Option<TeamBudget> {
        self.team.budget.as_ref().map(BudgetSection::to_team_budget)
    }

    /// Checks that the leader and every member are agents of `registry`; every unknown id
    /// is reported, at the place it is written.
    pub fn check_agents(&self, registry: &AgentRegistry) -> Result<(), Vec<DefinitionError>> {
        let known: Vec<&str> = registry.iter().map(|a| a.definition.id()).collect();
        let unknown = |id: &str, at: Option<Location>, role: &str| -> Option<DefinitionError> {
            if registry.get(id).is_some() {
                return None;
            }
            let hint = if known.is_empty() {
                "no agent files were found (agents/*.toml or agents.d/**/*.toml in the config directories)".to_owned()
            } else {
                format!("the agents are {}", known.join(", "))
            };
            Some(DefinitionError::at(&self.source, at, format!("unknown agent `{id}` ({role}): {hint}")))
        };
        let mut problems = Vec::new();
        if let Some(leader) = self.leader() {
            problems.extend(unknown(leader, self.places.leader, "the leader"));
        }
        for (n, member) in self.team.members.iter().enumerate() {
            if let Some(agent) = &member.agent {
                problems.extend(unknown(agent, self.places.members.get(n).and_then(|p| p.of("agent")), "a member"));
            }
        }
        if problems.is_empty() { Ok(()) } else { Err(problems) }
    }

    /// Checks the members' ids once every remote member's is known: `names[n]` is the
    /// `n`th member's id in the team (a remote member's card name when its entry gives
    /// none). The same rules as the file's own: ids are ids, each is used once, none is
    /// the leader's, the channels connect the team; a problem is reported at the member's
    /// entry.
    pub fn check_names(&self, names: &[String]) -> Result<(), DefinitionError> {
        let ids: Vec<Option<&str>> = names.iter().map(|n| Some(n.as_str())).collect();
        self.check_team(&ids)
    }

    /// What the file alone can tell: each entry is an agent or a remote agent, ids are
    /// ids, members are listed once, the leader fits the strategy, channels connect the
    /// team.
    fn check(&self) -> Result<(), DefinitionError> {
        let team = &self.team;
        let places = &self.places;
        if team.members.is_empty() {
            return Err(
                self.error(places.team, "the team has no members; add a [[team.members]] table with `agent = \"ID\"`")
            );
        }
        for (n, member) in team.members.iter().enumerate() {
            let default = MemberPlaces::default();
            let at = places.members.get(n).unwrap_or(&default);
            check_entry(member, at).map_err(|(place, message)| self.error(place, message))?;
        }
        let ids: Vec<Option<&str>> = team.members.iter().map(MemberEntry::id).collect();
        self.check_team(&ids)
    }

    /// The rules about ids, `ids[n]` being the `n`th member's (`None`: not known yet, a
    /// remote member named by its card).
    fn check_team(&self, ids: &[Option<&str>]) -> Result<(), DefinitionError> {
        let team = &self.team;
        let places = &self.places;
        let at = |n: usize| places.members.get(n).and_then(MemberPlaces::id);
        let mut seen = BTreeSet::new();
        for (n, (member, id)) in team.members.iter().zip(ids).enumerate() {
            let Some(id) = id else { continue };
            let key = if member.is_remote() { "name" } else { "agent" };
            check_id(id).map_err(|e| {
                let hint = match (member.is_remote(), &member.name) {
                    (true, None) => " (the name its card gives); give the member `name = \"ID\"`",
                    _ => "",
                };
                self.error(at(n), format!("`{key}` in [[team.members]]: {e}{hint}"))
            })?;
            if !seen.insert(*id) {
                return Err(self.error(
                    at(n),
                    format!("`{id}` is listed twice in [[team.members]]; keep one entry{}", rename_hint(member)),
                ));
            }
        }
        match (&team.leader, team.strategy.has_leader()) {
            (None, true) => {
                return Err(self.error(
                    places.strategy,
                    format!("a {} team needs a leader: add `leader = \"ID\"` to [team]", team.strategy),
                ));
            }
            (Some(_), false) => {
                return Err(self.error(
                    places.leader,
                    format!(
                        "a {} team has no leader; remove `leader`, or use strategy \"delegate\" or \"orchestrated\"",
                        team.strategy
                    ),
                ));
            }
            (Some(leader), true) => {
                check_id(leader).map_err(|e| self.error(places.leader, format!("`leader` in [team]: {e}")))?;
                if let Some(n) = ids.iter().position(|id| *id == Some(leader.as_str())) {
                    return Err(self.error(
                        at(n),
                        format!(
                            "the leader `{leader}` is also listed in [[team.members]]; the members are its teammates, \
                             so remove this entry{}",
                            rename_hint(&team.members[n])
                        ),
                    ));
                }
            }
            (None, false) => {}
        }
        let Some(firewall) = &self.firewall else {
            return Ok(());
        };
        let everyone: Vec<&str> = self.leader().into_iter().chain(ids.iter().flatten().copied()).collect();
        // A channel may name a remote member its card will name: checked once it is read.
        let all_known = ids.iter().all(Option::is_some);
        let mut declared = BTreeSet::new();
        for (n, text) in firewall.channels.iter().enumerate() {
            let place = places.channels.get(n).copied().flatten();
            let channel =
                Channel::parse(text).map_err(|e| self.error(place, format!("`channels` in [firewall]: {e}")))?;
            for end in [&channel.from, &channel.to] {
                if all_known && !everyone.contains(&end.as_str()) {
                    return Err(self.error(
                        place,
                        format!(
                            "`channels` in [firewall]: `{end}` is not in the team; the team is {}",
                            everyone.join(", ")
                        ),
                    ));
                }
            }
            if !declared.insert(channel.clone()) {
                return Err(self.error(place, format!("the channel `{channel}` is declared twice; keep one")));
            }
        }
        for (text, fields) in &firewall.fields {
            let place = places.fields.get(text).copied();
            let channel = Channel::parse(text).map_err(|e| self.error(place, format!("[firewall.fields]: {e}")))?;
            if !declared.contains(&channel) {
                return Err(self.error(
                    place,
                    format!(
                        "[firewall.fields] names `{channel}`, which is not one of `channels`; declare it there \
                         first"
                    ),
                ));
            }
            if let Some(bad) = fields.iter().find(|f| f.trim().is_empty()) {
                return Err(
                    self.error(place, format!("[firewall.fields] `{channel}`: a field name is empty ({bad:?})"))
                );
            }
        }
        Ok(())
    }

    fn error(&self, at: Option<Location>, message: impl Into<String>) -> DefinitionError {
        DefinitionError::at(&self.source, at, message)
    }
}

impl Places {
    /// Finds the places in `text`, which parsed already.
    fn find(text: &str, members: usize, channels: usize) -> Places {
        let Ok(root) = DeTable::parse(text) else {
            return Places::default();
        };
        let root = root.get_ref();
        let location = |span: std::ops::Range<usize>| Some(Location::of_offset(text, span.start));
        let team = root.get("team");
        let team_table = team.and_then(|t| match t.get_ref() {
            DeValue::Table(table) => Some(table),
            _ => None,
        });
        let value_at = |key: &str| team_table.and_then(|t| t.get(key)).and_then(|v| location(v.span()));
        let list = |value: Option<&toml::Spanned<DeValue<'_>>>, wanted: usize| {
            let mut found = Vec::with_capacity(wanted);
            if let Some(DeValue::Array(items)) = value.map(|v| v.get_ref()) {
                found.extend(items.iter().map(|item| location(item.span())));
            }
            found.resize(wanted, None);
            found
        };
        let firewall_table = root.get("firewall").and_then(|f| match f.get_ref() {
            DeValue::Table(table) => Some(table),
            _ => None,
        });
        let firewall = firewall_table.and_then(|t| t.get("channels"));
        let mut fields = std::collections::BTreeMap::new();
        if let Some(DeValue::Table(table)) = firewall_table.and_then(|t| t.get("fields")).map(|f| f.get_ref()) {
            for (key, _) in table.iter() {
                if let Some(at) = location(key.span()) {
                    fields.insert(key.get_ref().to_string(), at);
                }
            }
        }
        Places {
            team: team.and_then(|t| location(t.span())),
            strategy: value_at("strategy"),
            leader: value_at("leader"),
            members: member_places(text, team_table.and_then(|t| t.get("members")), members),
            channels: list(firewall, channels),
            fields,
        }
    }
}

/// Where each `[[team.members]]` table and its keys' values are written.
fn member_places(text: &str, value: Option<&toml::Spanned<DeValue<'_>>>, wanted: usize) -> Vec<MemberPlaces> {
    let location = |offset: usize| Location::of_offset(text, offset);
    let mut found = Vec::with_capacity(wanted);
    if let Some(DeValue::Array(items)) = value.map(|v| v.get_ref()) {
        for item in items.iter() {
            let mut places = MemberPlaces { table: Some(location(item.span().start)), ..MemberPlaces::default() };
            if let DeValue::Table(table) = item.get_ref() {
                for (key, value) in table.iter() {
                    places.keys.insert(key.get_ref().to_string(), location(value.span().start));
                }
            }
            found.push(places);
        }
    }
    found.resize(wanted, MemberPlaces::default());
    found
}

/// For a remote member named by its card, how to give it another id.
fn rename_hint(member: &MemberEntry) -> &'static str {
    if member.is_remote() && member.name.is_none() {
        " (a remote member is named by its card unless its entry gives `name = \"ID\"`)"
    } else {
        ""
    }
}

/// An agent id: ASCII letters, digits, `-` and `_`, starting with a letter or digit (the
/// rule agent files follow).
fn check_id(id: &str) -> Result<(), String> {
    let valid = !id.is_empty()
        && id.len() <= MAX_ID_LEN
        && id.starts_with(|c: char| c.is_ascii_alphanumeric())
        && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if valid {
        Ok(())
    } else {
        Err(format!(
            "`{id}` is not an agent id; use 1 to {MAX_ID_LEN} ASCII letters, digits, `-` or `_`, starting with a \
             letter or digit"
        ))
    }
}

fn not_empty<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let text = String::deserialize(d)?;
    if text.trim().is_empty() {
        return Err(D::Error::custom("must not be empty"));
    }
    Ok(text)
}

fn concurrency<'de, D: Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    let n = u64::deserialize(d)?;
    if n == 0 {
        return Err(D::Error::custom("0 members at once would run nothing; use 1 or more"));
    }
    usize::try_from(n).map(Some).map_err(|_| D::Error::custom(format!("{n} is too large")))
}

pub(crate) fn positive_u64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let n = u64::deserialize(d)?;
    if n == 0 {
        return Err(D::Error::custom("0 leaves nothing to spend; use 1 or more, or remove the key"));
    }
    Ok(Some(n))
}

fn usd<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    /// A number written as an integer (`1`) or a float (`0.5`).
    struct Number;
    impl Visitor<'_> for Number {
        type Value = f64;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a number of US dollars, such as 0.50")
        }
        fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<f64, E> {
            Ok(v)
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<f64, E> {
            Ok(v as f64)
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<f64, E> {
            Ok(v as f64)
        }
    }
    let usd = d.deserialize_any(Number)?;
    if !(usd.is_finite() && usd > 0.0) {
        return Err(D::Error::custom(format!(
            "{usd} is not a budget; use a positive number of US dollars, such as 0.50"
        )));
    }
    Ok(Some(usd))
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = r#"[team]
name = "project"
strategy = "delegate"
leader = "lead"
max_concurrency = 4

[team.budget]
max_usd = 1
max_total_tokens = 200000
max_seconds = 600

[[team.members]]
agent = "researcher"
isolation = "local"

[[team.members]]
agent = "reviewer"
isolation = "process"

[firewall]
channels = ["researcher -> lead", "reviewer->lead"]
"#;

    fn error(text: &str) -> String {
        TeamFile::parse(text, "team.toml").expect_err("invalid").to_string()
    }

    #[test]
    fn the_documented_schema_parses() {
        let team = TeamFile::parse(EXAMPLE, "team.toml").expect("valid");
        assert_eq!(team.name(), "project");
        assert_eq!(team.team.strategy, TeamStrategy::Delegate);
        assert_eq!(team.leader(), Some("lead"));
        assert_eq!(team.team.max_concurrency, Some(4));
        assert_eq!(team.member_ids().collect::<Vec<_>>(), ["researcher", "reviewer"]);
        assert_eq!(team.team.members[1].isolation, Isolation::Process);
        let budget = team.budget().expect("a budget");
        assert_eq!(budget.max_usd, Some(1.0), "an integer is a number of dollars too");
        assert_eq!(budget.max_total_tokens, Some(200_000));
        assert_eq!(budget.max_wall_time, Some(Duration::from_secs(600)));
        let channels: Vec<String> = team.channels().expect("a firewall").iter().map(Channel::to_string).collect();
        assert_eq!(channels, ["researcher -> lead", "reviewer -> lead"]);
        assert_eq!(team.path(), Path::new("team.toml"));
    }

    #[test]
    fn reports_and_report_fields_are_read_and_their_mistakes_placed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("team.toml");
        std::fs::create_dir(dir.path().join("schemas")).expect("mkdir");
        let verdict = r#"{"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}"#;
        std::fs::write(dir.path().join("schemas/verdict.json"), verdict).expect("writes");
        let text = EXAMPLE
            .replace("isolation = \"local\"", "isolation = \"local\"\nreport = \"structured\"")
            .replace("isolation = \"process\"", "isolation = \"process\"\nreport = \"schemas/verdict.json\"")
            + "\n[firewall.fields]\n\"researcher -> lead\" = [\"summary\", \"decisions\"]\n";
        let team = TeamFile::parse(&text, &path).expect("valid");
        assert_eq!(team.report(0), ReportFormat::Structured);
        let ReportFormat::Schema(spec) = team.report(1) else { panic!("a schema: {:?}", team.report(1)) };
        assert_eq!(spec.schema.name, "verdict");
        assert_eq!(team.report(2), ReportFormat::Text, "past the last member");
        let fields = team.report_fields();
        assert_eq!(fields.len(), 1);
        assert_eq!(
            (fields[0].0.to_string(), fields[0].1.clone()),
            ("researcher -> lead".into(), vec!["summary".into(), "decisions".into()])
        );

        let at = |text: &str| TeamFile::parse(text, &path).expect_err("invalid").to_string();
        let shown = path.display();
        let txt = at(&text.replace("schemas/verdict.json", "verdict.txt"));
        assert!(
            txt.starts_with(&format!("{shown}:20:10: `report` in [[team.members]] cannot be \"verdict.txt\"")),
            "{txt}"
        );
        let missing = at(&text.replace("schemas/verdict.json", "schemas/none.json"));
        assert!(
            missing.starts_with(&format!("{shown}:20:10:")) && missing.contains("cannot read the schema file"),
            "{missing}"
        );
        std::fs::write(dir.path().join("schemas/list.json"), r#"{"type": "array"}"#).expect("writes");
        let list = at(&text.replace("schemas/verdict.json", "schemas/list.json"));
        assert!(list.contains("must describe a JSON object"), "{list}");
        let undeclared = at(&text.replace("\"researcher -> lead\" = [", "\"lead -> researcher\" = ["));
        assert!(
            undeclared.starts_with(&format!(
                "{shown}:26:1: [firewall.fields] names `lead -> researcher`, which is not one of `channels`"
            )),
            "{undeclared}"
        );
        // A remote member's report is asked of its server as its task's typed answer.
        let remote = EXAMPLE
            .replace(
                "agent = \"reviewer\"\nisolation = \"process\"",
                "remote = \"https://agents.example/\"\nname = \"auditor\"\nreport = \"structured\"",
            )
            .replace("\"reviewer->lead\"", "\"auditor -> lead\"");
        let team = TeamFile::parse(&remote, &path).expect("a remote member may have a report");
        let auditor = team.team.members.iter().position(|m| m.name.as_deref() == Some("auditor")).expect("auditor");
        assert_eq!(team.report(auditor), ReportFormat::Structured);
    }

    #[test]
    fn serde_errors_name_the_place_and_what_is_accepted() {
        assert_eq!(
            error(&EXAMPLE.replace("strategy = \"delegate\"", "strategy = \"solo\"")),
            "team.toml:3:12: `strategy` in [team] cannot be \"solo\"; expected one of delegate, orchestrated, \
             parallel, pipeline"
        );
        assert_eq!(
            error(&EXAMPLE.replace("isolation = \"process\"", "isolation = \"docker\"")),
            "team.toml:18:13: `isolation` in [[team.members]] cannot be \"docker\"; expected one of local, process"
        );
        let unknown = error(&EXAMPLE.replace("max_seconds", "max_minutes"));
        assert!(unknown.starts_with("team.toml:10:1: unknown key `max_minutes` in [team.budget]"), "{unknown}");
        let top = error(&format!("{EXAMPLE}\n[extra]\n"));
        assert!(top.contains("unknown key `extra` in the top level"), "{top}");
        let zero = error(&EXAMPLE.replace("max_concurrency = 4", "max_concurrency = 0"));
        assert!(zero.starts_with("team.toml:5:19:") && zero.contains("use 1 or more"), "{zero}");
        let usd = error(&EXAMPLE.replace("max_usd = 1", "max_usd = -1"));
        assert!(usd.starts_with("team.toml:8:11:") && usd.contains("positive number"), "{usd}");
        assert!(error("").contains("missing the [team] table"));
    }

    #[test]
    fn members_and_leaders_must_fit_the_strategy() {
        let no_members = "[team]\nname = \"t\"\nstrategy = \"parallel\"\n";
        assert!(error(no_members).starts_with("team.toml:1:1: the team has no members"), "{}", error(no_members));
        let twice = EXAMPLE.replace("agent = \"reviewer\"", "agent = \"researcher\"");
        assert_eq!(error(&twice), "team.toml:17:9: `researcher` is listed twice in [[team.members]]; keep one entry");
        let leaderless = EXAMPLE.replace("leader = \"lead\"\n", "");
        assert!(
            error(&leaderless).starts_with("team.toml:3:12: a delegate team needs a leader"),
            "{}",
            error(&leaderless)
        );
        let parallel = EXAMPLE.replace("\"delegate\"", "\"parallel\"");
        assert!(error(&parallel).starts_with("team.toml:4:10: a parallel team has no leader"), "{}", error(&parallel));
        let leader_listed = EXAMPLE.replace("agent = \"reviewer\"", "agent = \"lead\"");
        assert!(error(&leader_listed).starts_with("team.toml:17:9: the leader `lead` is also listed"));
        let bad_id = EXAMPLE.replace("agent = \"reviewer\"", "agent = \"re viewer\"");
        assert!(
            error(&bad_id).starts_with("team.toml:17:9: `agent` in [[team.members]]: `re viewer` is not an agent id")
        );
    }

    #[test]
    fn channels_are_checked_where_they_are_written() {
        let syntax = EXAMPLE.replace("\"reviewer->lead\"", "\"reviewer lead\"");
        assert_eq!(
            error(&syntax),
            "team.toml:21:35: `channels` in [firewall]: `reviewer lead` is not a channel; \
             write \"sender -> recipient\", such as \"reviewer -> lead\""
        );
        let stranger = EXAMPLE.replace("\"reviewer->lead\"", "\"tester -> lead\"");
        assert!(
            error(&stranger).starts_with(
                "team.toml:21:35: `channels` in [firewall]: `tester` is not in the team; \
                 the team is lead, researcher, reviewer"
            ),
            "{}",
            error(&stranger)
        );
        let twice = EXAMPLE.replace("\"reviewer->lead\"", "\"researcher->lead\"");
        assert!(error(&twice).contains("the channel `researcher -> lead` is declared twice"));
        let to_itself = EXAMPLE.replace("\"reviewer->lead\"", "\"lead -> lead\"");
        assert!(error(&to_itself).contains("from `lead` to itself"));
        let none = TeamFile::parse(
            &EXAMPLE.replace("[firewall]\nchannels = [\"researcher -> lead\", \"reviewer->lead\"]\n", ""),
            "t.toml",
        )
        .expect("valid");
        assert_eq!(none.channels(), None);
    }

    const REMOTE: &str = "[team]\nname = \"t\"\nstrategy = \"delegate\"\nleader = \"lead\"\n\n[[team.members]]\n";

    #[test]
    fn a_remote_member_takes_its_keys() {
        let text = format!(
            "{REMOTE}remote = \"https://agents.example/\"\nname = \"auditor\"\nskill = \"audit\"\n\
             bearer_env = \"AUDIT_TOKEN\"\ntimeout_seconds = 30\n\n[firewall]\nchannels = [\"auditor -> lead\"]\n"
        );
        let team = TeamFile::parse(&text, "team.toml").expect("valid");
        let member = &team.team.members[0];
        assert_eq!(member.remote.as_deref(), Some("https://agents.example/"));
        assert_eq!((member.id(), member.agent.as_deref()), (Some("auditor"), None));
        assert_eq!((member.skill.as_deref(), member.bearer_env.as_deref()), (Some("audit"), Some("AUDIT_TOKEN")));
        assert_eq!((member.timeout_seconds, member.placement()), (Some(30), Isolation::Remote));
        assert_eq!(team.member_ids().collect::<Vec<_>>(), ["auditor"]);
        assert_eq!(team.agent_ids().count(), 0);
    }

    #[test]
    fn a_member_is_an_agent_or_a_remote_agent_said_where() {
        let both = format!("{REMOTE}agent = \"a\"\nremote = \"https://x.example/\"\n");
        assert_eq!(
            error(&both),
            "team.toml:8:10: a [[team.members]] entry has both `agent` and `remote`: a member is an agent file or a \
             remote A2A agent, not both; keep one"
        );
        let neither = format!("{REMOTE}isolation = \"local\"\n");
        let neither = error(&neither);
        assert!(neither.starts_with("team.toml:6:") && neither.contains("needs `agent = \"ID\"`"), "{neither}");
        assert!(neither.contains("or `remote = \"https://…\"`"), "{neither}");
        let ftp = error(&format!("{REMOTE}remote = \"ftp://x.example/\"\n"));
        assert_eq!(
            ftp,
            "team.toml:7:10: `remote` in [[team.members]]: `ftp://x.example/` is not an http or https URL; A2A agents \
             are reached over HTTP"
        );
        let garbage = error(&format!("{REMOTE}remote = \"reviewer\"\n"));
        assert!(
            garbage.starts_with("team.toml:7:10: `remote` in [[team.members]]: `reviewer` is not a URL"),
            "{garbage}"
        );
        let credentials = error(&format!("{REMOTE}remote = \"https://me:hunter2@x.example/\"\n"));
        assert!(credentials.starts_with("team.toml:7:10:") && !credentials.contains("hunter2"), "{credentials}");
        let token_in_place = error(&format!("{REMOTE}remote = \"https://x.example/\"\nbearer_env = \"sk-live 123\"\n"));
        assert!(token_in_place.starts_with("team.toml:8:14: `bearer_env`"), "{token_in_place}");
        assert!(!token_in_place.contains("sk-live"), "a token written by mistake is not repeated: {token_in_place}");
        let named_agent = error(&format!("{REMOTE}agent = \"a\"\nname = \"b\"\n"));
        assert!(
            named_agent.starts_with("team.toml:8:8: `name` in [[team.members]] is for remote members"),
            "{named_agent}"
        );
        let isolated = error(&format!("{REMOTE}remote = \"https://x.example/\"\nisolation = \"process\"\n"));
        assert!(
            isolated.starts_with("team.toml:8:13: `isolation` in [[team.members]] is for agent members"),
            "{isolated}"
        );
        let never = error(&format!("{REMOTE}remote = \"https://x.example/\"\ntimeout_seconds = 0\n"));
        assert!(never.starts_with("team.toml:8:19:") && never.contains("use 1 or more"), "{never}");
        let bad_name = error(&format!("{REMOTE}remote = \"https://x.example/\"\nname = \"a b\"\n"));
        assert!(
            bad_name.starts_with("team.toml:8:8: `name` in [[team.members]]: `a b` is not an agent id"),
            "{bad_name}"
        );
        let leader = error(&format!("{REMOTE}remote = \"https://x.example/\"\nname = \"lead\"\n"));
        assert!(leader.starts_with("team.toml:8:8: the leader `lead` is also listed"), "{leader}");
    }

    #[test]
    fn a_channel_may_name_a_remote_member_its_card_will_name() {
        let text =
            format!("{REMOTE}remote = \"https://x.example/\"\n\n[firewall]\nchannels = [\"reviewer -> lead\"]\n");
        let team = TeamFile::parse(&text, "team.toml").expect("checked once the card is read");
        assert_eq!(team.member_ids().count(), 0, "not known yet");
        team.check_names(&["reviewer".to_owned()]).expect("the card names it `reviewer`");
        let other = team.check_names(&["critic".to_owned()]).expect_err("the channel names nobody");
        assert!(
            other.to_string().starts_with("team.toml:10:13: `channels` in [firewall]: `reviewer` is not in the team")
        );
        let clash = team.check_names(&["lead".to_owned()]).expect_err("the card names the leader");
        assert!(clash.to_string().contains("unless its entry gives `name = \"ID\"`"), "{clash}");
        let spaced = team.check_names(&["Code Reviewer".to_owned()]).expect_err("not an id");
        assert!(
            spaced
                .to_string()
                .starts_with("team.toml:7:10: `name` in [[team.members]]: `Code Reviewer` is not an agent id")
                && spaced.to_string().contains("the name its card gives"),
            "{spaced}"
        );
    }

    #[test]
    fn unknown_agents_are_reported_at_their_place() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let agents = dir.path().join("agents");
        std::fs::create_dir_all(&agents).expect("creates agents/");
        for id in ["lead", "researcher"] {
            let text = crate::definition::AgentDefinition::template(id, id, None).expect("a template");
            std::fs::write(agents.join(format!("{id}.toml")), text).expect("writes the agent file");
        }
        let registry = AgentRegistry::discover(&[dir.path().to_owned()]).expect("discovers");
        let team = TeamFile::parse(EXAMPLE, "team.toml").expect("valid");
        let problems = team.check_agents(&registry).expect_err("reviewer is unknown");
        assert_eq!(problems.len(), 1);
        assert_eq!(
            problems[0].to_string(),
            "team.toml:17:9: unknown agent `reviewer` (a member): the agents are lead, researcher"
        );
        let empty = AgentRegistry::default();
        assert_eq!(team.check_agents(&empty).expect_err("nothing is known").len(), 3);
    }
}
