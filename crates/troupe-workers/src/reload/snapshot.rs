//! The configuration in force, and what a new look at the files changes in it.
//!
//! A [`Snapshot`] holds every agent that is in force (by id, with its file) and the
//! settings. [`Snapshot::rescan`] reads the files again and keeps, for each file that no
//! longer reads (a parse error, a model that does not resolve, a duplicate id), what was
//! in force from it before. Files whose text did not change are not read into errors
//! again, so a broken file is reported once per edit, not once per look.

use super::error::ReloadError;
use super::settings::Settings;
use crate::definition::{AgentDefinition, DefinitionError, Location, value_location};
use crate::registry::AgentRegistry;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use troupe_model::ModelConfig;
use troupe_runtime::{AgentSpec, RateQuotas, SpecUpdate, changed_fields};

/// Checks that a model id can be used with a `troupe.toml`'s model configuration; `Err`
/// says why not.
pub type ModelCheck = dyn Fn(&str, &ModelConfig) -> Result<(), String> + Send;

/// A new or changed agent, checked: what to apply to it.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct AgentReload {
    /// The agent's id.
    pub id: String,
    /// The file it was read from.
    pub path: PathBuf,
    /// The definition now in force.
    pub definition: AgentDefinition,
    /// The definition in force before; `None` for an agent that is new.
    pub previous: Option<AgentDefinition>,
    /// The runtime spec: the definition's, with `troupe.toml`'s limits.
    pub spec: AgentSpec,
    /// The quotas of the agent's rate limit (unlimited when `troupe.toml` sets none).
    pub rate_quotas: RateQuotas,
    /// The parts a running agent takes live that changed
    /// ([`changed_fields`], then `rate_limit`); empty for a new agent.
    pub changed: Vec<String>,
    /// The parts that changed that a running agent does not take live (its tools, MCP
    /// servers, worker command, memory, reporting, retries, temperature, key): they count
    /// for agents built from the definition from now on.
    pub needs_restart: Vec<String>,
}

impl AgentReload {
    /// Whether the agent was not in force before.
    pub fn is_new(&self) -> bool {
        self.previous.is_none()
    }

    /// The change to give a running agent
    /// ([`Agent::reconfigure`](troupe_runtime::Agent::reconfigure)): instructions, model,
    /// limits and rate quotas as they are now.
    pub fn update(&self) -> SpecUpdate {
        SpecUpdate::from_spec(&self.spec).rate_quotas(self.rate_quotas)
    }
}

/// What a look at the files found.
#[derive(Debug)]
pub(crate) enum Change {
    Agent(Box<AgentReload>),
    Removed { id: String, path: PathBuf },
    Settings(Box<Settings>),
    Rejected(ReloadError),
}

/// An agent in force.
#[derive(Clone, Debug)]
struct Entry {
    definition: AgentDefinition,
    path: PathBuf,
    spec: AgentSpec,
    rate_quotas: RateQuotas,
}

/// The configuration in force.
#[derive(Default)]
pub(crate) struct Snapshot {
    settings: Settings,
    /// The text of `troupe.toml` last read; `None` when it was not there.
    settings_text: Option<String>,
    agents: BTreeMap<String, Entry>,
    /// The text of each agent file last read.
    texts: BTreeMap<PathBuf, String>,
}

impl Snapshot {
    /// The agents of `registry` as in force, under the settings already read.
    pub(crate) fn seed(&mut self, registry: &AgentRegistry) {
        for agent in registry.iter() {
            let definition = agent.definition.clone();
            let entry = Entry {
                spec: self.settings.spec_for(&definition),
                rate_quotas: self.settings.rate_quotas_for(definition.id()),
                path: agent.path.clone(),
                definition,
            };
            self.agents.insert(entry.definition.id().to_owned(), entry);
        }
    }

    /// The model id of the agent `id` in force, if it is.
    pub(crate) fn model_of(&self, id: &str) -> Option<&str> {
        self.agents.get(id).map(|entry| entry.spec.model.as_str())
    }

    /// Reads `troupe.toml` and the agent files of `dirs` again; returns what changed.
    pub(crate) fn rescan(
        &mut self,
        dirs: &[PathBuf],
        config_file: Option<&Path>,
        check: Option<&ModelCheck>,
    ) -> Vec<Change> {
        let mut changes = Vec::new();
        let settings_changed = match config_file {
            Some(path) => self.rescan_settings(path, &mut changes),
            None => false,
        };
        let old_by_path: BTreeMap<PathBuf, String> =
            self.agents.iter().map(|(id, entry)| (entry.path.clone(), id.clone())).collect();
        let mut agents: BTreeMap<String, Entry> = BTreeMap::new();
        let keep = |path: &Path, agents: &mut BTreeMap<String, Entry>| {
            // What the file made in force before stays so, unless its id is taken now.
            if let Some(id) = old_by_path.get(path)
                && let Some(entry) = self.agents.get(id)
            {
                agents.entry(id.clone()).or_insert_with(|| entry.clone());
            }
        };
        let mut texts = BTreeMap::new();
        for path in agent_files(dirs, &mut changes) {
            let text = match std::fs::read_to_string(&path) {
                Ok(text) => text,
                Err(e) => {
                    changes.push(Change::Rejected(DefinitionError::new(&path, format!("cannot read it: {e}")).into()));
                    keep(&path, &mut agents);
                    continue;
                }
            };
            let edited = self.texts.get(&path) != Some(&text);
            texts.insert(path.clone(), text.clone());
            if !edited && !settings_changed {
                keep(&path, &mut agents);
                continue;
            }
            match self.read(&path, &text, &agents, check) {
                Ok(entry) => {
                    agents.insert(entry.definition.id().to_owned(), entry);
                }
                Err(error) => {
                    // Only an edit (or new settings) is news; the same broken text is not.
                    let news = edited || matches!(error, ReloadError::Model { .. });
                    if news {
                        changes.push(Change::Rejected(error));
                    }
                    keep(&path, &mut agents);
                }
            }
        }
        for (id, entry) in &agents {
            let old = self.agents.get(id);
            if let Some(reload) = reload_of(id, entry, old) {
                changes.push(Change::Agent(Box::new(reload)));
            }
        }
        for (id, old) in &self.agents {
            if !agents.contains_key(id) {
                changes.push(Change::Removed { id: id.clone(), path: old.path.clone() });
            }
        }
        self.agents = agents;
        self.texts = texts;
        changes
    }

    /// Reads `troupe.toml` again; returns whether the settings in force changed.
    fn rescan_settings(&mut self, path: &Path, changes: &mut Vec<Change>) -> bool {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if self.settings_text.take().is_some() {
                    changes.push(Change::Rejected(ReloadError::SettingsRemoved { path: path.to_owned() }));
                }
                return false;
            }
            Err(e) => {
                let message = format!("{}: cannot read it: {e}", path.display());
                changes.push(Change::Rejected(ReloadError::Settings { path: path.to_owned(), message }));
                return false;
            }
        };
        if self.settings_text.as_ref() == Some(&text) {
            return false;
        }
        self.settings_text = Some(text.clone());
        match Settings::parse(&text, path) {
            Ok(settings) if settings == self.settings => false,
            Ok(settings) => {
                self.settings = settings.clone();
                changes.push(Change::Settings(Box::new(settings)));
                true
            }
            Err(error) => {
                changes.push(Change::Rejected(error));
                false
            }
        }
    }

    /// Reads one agent file's text into what would be in force, checked.
    fn read(
        &self,
        path: &Path,
        text: &str,
        taken: &BTreeMap<String, Entry>,
        check: Option<&ModelCheck>,
    ) -> Result<Entry, ReloadError> {
        let definition = AgentDefinition::parse(text, path)?;
        let id = definition.id().to_owned();
        if let Some(first) = taken.get(&id) {
            return Err(ReloadError::DuplicateId {
                id,
                path: path.to_owned(),
                location: value_location(text, &["agent", "id"]),
                first: first.path.clone(),
            });
        }
        let spec = self.settings.spec_for(&definition);
        let model_error = |reason: String| ReloadError::Model {
            path: path.to_owned(),
            location: model_location(text),
            agent: id.clone(),
            model: spec.model.clone(),
            reason,
        };
        spec.approval.validate().map_err(|reason| DefinitionError::new(path, reason))?;
        if let Some(check) = check {
            check(&spec.model, &self.settings.model).map_err(model_error)?;
        }
        let rate_quotas = self.settings.rate_quotas_for(&id);
        Ok(Entry { definition, path: path.to_owned(), spec, rate_quotas })
    }
}

/// Where the model is written: `[provider] model`.
fn model_location(text: &str) -> Option<Location> {
    value_location(text, &["provider", "model"])
}

/// What changed for agent `id`, if anything.
fn reload_of(id: &str, entry: &Entry, old: Option<&Entry>) -> Option<AgentReload> {
    let (changed, needs_restart) = match old {
        None => (Vec::new(), Vec::new()),
        Some(old) => {
            let mut changed = changed_fields(&old.spec, &entry.spec);
            if old.rate_quotas != entry.rate_quotas {
                changed.push("rate_limit".to_owned());
            }
            let needs_restart = restart_fields(&old.definition, &entry.definition);
            let same = changed.is_empty()
                && needs_restart.is_empty()
                && old.definition == entry.definition
                && old.path == entry.path;
            if same {
                return None;
            }
            (changed, needs_restart)
        }
    };
    Some(AgentReload {
        id: id.to_owned(),
        path: entry.path.clone(),
        definition: entry.definition.clone(),
        previous: old.map(|o| o.definition.clone()),
        spec: entry.spec.clone(),
        rate_quotas: entry.rate_quotas,
        changed,
        needs_restart,
    })
}

/// The parts of a definition that differ and that a running agent cannot take.
fn restart_fields(old: &AgentDefinition, new: &AgentDefinition) -> Vec<String> {
    let parts = [
        ("tools", old.tools != new.tools),
        ("mcp", old.mcp != new.mcp),
        ("agent.execution", old.agent.execution != new.agent.execution),
        ("memory", old.memory != new.memory),
        ("reporting", old.reporting != new.reporting),
        ("retry", old.retry != new.retry),
        ("provider.temperature", old.provider.temperature != new.provider.temperature),
        ("provider.api_key", old.provider.api_key != new.provider.api_key),
    ];
    parts.into_iter().filter(|(_, differs)| *differs).map(|(name, _)| name.to_owned()).collect()
}

/// `<dir>/agents/*.toml`, then `<dir>/agents.d/**/*.toml`, each sorted by path, for each
/// directory once, as [`AgentRegistry::discover`] reads them.
fn agent_files(dirs: &[PathBuf], changes: &mut Vec<Change>) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for dir in dirs {
        if !seen.insert(dir.canonicalize().unwrap_or_else(|_| dir.clone())) {
            continue;
        }
        for (sub, recursive) in [("agents", false), ("agents.d", true)] {
            let mut found = Vec::new();
            list_toml(&dir.join(sub), recursive, &mut found, changes);
            found.sort();
            files.extend(found);
        }
    }
    files
}

fn list_toml(dir: &Path, recursive: bool, out: &mut Vec<PathBuf>, changes: &mut Vec<Change>) {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
        Err(e) => {
            let error = ReloadError::Watch { path: dir.to_owned(), reason: format!("cannot list the directory: {e}") };
            changes.push(Change::Rejected(error));
            return;
        }
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        // Symlinked directories are not followed, so a link loop cannot make a look endless.
        let Ok(kind) = entry.file_type() else { continue };
        if kind.is_dir() {
            if recursive {
                list_toml(&path, true, out, changes);
            }
        } else if path.extension().is_some_and(|e| e == "toml") && path.is_file() {
            out.push(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(id: &str, model: &str, prompt: &str) -> String {
        format!(
            "[agent]\nid = \"{id}\"\nname = \"A\"\n\n[provider]\nmodel = \"{model}\"\n\n[system]\nprompt = \"{prompt}\"\n"
        )
    }

    struct Dir {
        dir: tempfile::TempDir,
    }

    impl Dir {
        fn new() -> Self {
            let dir = tempfile::tempdir().expect("tempdir");
            std::fs::create_dir_all(dir.path().join("agents")).expect("agents");
            Dir { dir }
        }

        fn write(&self, name: &str, text: &str) -> PathBuf {
            let path = self.dir.path().join(name);
            std::fs::write(&path, text).expect("write");
            path
        }

        fn dirs(&self) -> Vec<PathBuf> {
            vec![self.dir.path().to_owned()]
        }
    }

    fn no_bad_models(model: &str, _: &ModelConfig) -> Result<(), String> {
        if model.starts_with("bad/") { Err("no provider `bad`".into()) } else { Ok(()) }
    }

    fn scan(snapshot: &mut Snapshot, dir: &Dir) -> Vec<Change> {
        snapshot.rescan(&dir.dirs(), Some(&dir.dir.path().join("troupe.toml")), Some(&no_bad_models))
    }

    #[test]
    fn edits_are_reported_once_and_broken_files_keep_what_was_in_force() {
        let dir = Dir::new();
        let file = dir.write("agents/coder.toml", &agent("coder", "demo", "one"));
        let mut snapshot = Snapshot::default();
        let first = scan(&mut snapshot, &dir);
        assert!(matches!(&first[..], [Change::Agent(a)] if a.is_new() && a.id == "coder"), "{first:?}");
        assert!(scan(&mut snapshot, &dir).is_empty(), "nothing changed");

        dir.write("agents/coder.toml", &agent("coder", "demo", "two"));
        let changes = scan(&mut snapshot, &dir);
        let [Change::Agent(reload)] = &changes[..] else { panic!("{changes:?}") };
        assert_eq!(
            (reload.changed.as_slice(), reload.spec.instructions.as_str()),
            (&["instructions".to_owned()][..], "two")
        );

        dir.write("agents/coder.toml", "[agent]\nid = \"coder\"\nnme = \"A\"\n");
        let changes = scan(&mut snapshot, &dir);
        let [Change::Rejected(error)] = &changes[..] else { panic!("{changes:?}") };
        assert_eq!((error.path(), error.line()), (file.as_path(), Some(3)));
        assert!(scan(&mut snapshot, &dir).is_empty(), "the same broken text is reported once");
        assert_eq!(snapshot.agents["coder"].spec.instructions, "two", "the old one stays in force");

        dir.write("agents/coder.toml", &agent("coder", "bad/model", "three"));
        let changes = scan(&mut snapshot, &dir);
        let [Change::Rejected(error @ ReloadError::Model { .. })] = &changes[..] else { panic!("{changes:?}") };
        assert_eq!(error.line(), Some(6), "{error}");
        assert!(error.to_string().contains("no provider `bad`"), "{error}");
        assert_eq!(snapshot.agents["coder"].spec.model, "demo");

        dir.write("agents/coder.toml", &agent("coder", "demo", "four"));
        let changes = scan(&mut snapshot, &dir);
        assert!(matches!(&changes[..], [Change::Agent(a)] if a.spec.instructions == "four"), "{changes:?}");
    }

    #[test]
    fn settings_change_limits_and_quotas_and_a_removed_file_is_reported() {
        let dir = Dir::new();
        dir.write("agents/coder.toml", &agent("coder", "demo", "one"));
        dir.write("troupe.toml", "[limits]\nmax_usd = 1.0\n");
        let mut snapshot = Snapshot::default();
        scan(&mut snapshot, &dir);
        assert_eq!(snapshot.agents["coder"].spec.limits.max_usd, Some(1.0));

        dir.write("troupe.toml", "[limits]\nmax_usd = 0.5\n[rate_limit]\nmodel_calls = 10\n");
        let changes = scan(&mut snapshot, &dir);
        assert!(matches!(&changes[0], Change::Settings(_)), "{changes:?}");
        let Change::Agent(reload) = &changes[1] else { panic!("{changes:?}") };
        assert_eq!(reload.changed, ["limits.max_usd", "rate_limit"]);
        assert_eq!(reload.update().limits.and_then(|l| l.max_usd), Some(0.5));

        dir.write("troupe.toml", "[limits]\nmax_usd = \"lots\"\n");
        let changes = scan(&mut snapshot, &dir);
        let [Change::Rejected(error)] = &changes[..] else { panic!("{changes:?}") };
        assert_eq!(error.line(), Some(2), "{error}");
        std::fs::remove_file(dir.dir.path().join("troupe.toml")).expect("remove");
        let changes = scan(&mut snapshot, &dir);
        assert!(matches!(&changes[..], [Change::Rejected(ReloadError::SettingsRemoved { .. })]), "{changes:?}");
        assert_eq!(snapshot.agents["coder"].spec.limits.max_usd, Some(0.5), "the settings stay");

        std::fs::remove_file(dir.dir.path().join("agents/coder.toml")).expect("remove");
        let changes = scan(&mut snapshot, &dir);
        assert!(matches!(&changes[..], [Change::Removed { id, .. }] if id == "coder"), "{changes:?}");
    }

    #[test]
    fn a_second_file_with_a_taken_id_is_refused() {
        let dir = Dir::new();
        dir.write("agents/a.toml", &agent("coder", "demo", "one"));
        let mut snapshot = Snapshot::default();
        scan(&mut snapshot, &dir);
        dir.write("agents/b.toml", &agent("coder", "demo", "two"));
        let changes = scan(&mut snapshot, &dir);
        let [Change::Rejected(error @ ReloadError::DuplicateId { .. })] = &changes[..] else { panic!("{changes:?}") };
        assert_eq!(error.line(), Some(2));
        assert_eq!(snapshot.agents["coder"].spec.instructions, "one");
    }

    #[test]
    fn changes_that_need_a_restart_are_named() {
        let dir = Dir::new();
        dir.write("agents/a.toml", &agent("coder", "demo", "one"));
        let mut snapshot = Snapshot::default();
        scan(&mut snapshot, &dir);
        dir.write("agents/a.toml", &(agent("coder", "demo", "one") + "\n[[tools]]\nname = \"fs.read\"\n"));
        let changes = scan(&mut snapshot, &dir);
        let [Change::Agent(reload)] = &changes[..] else { panic!("{changes:?}") };
        assert!(reload.changed.is_empty());
        assert_eq!(reload.needs_restart, ["tools"]);
    }
}
