//! [`AgentRegistry`]: the agents defined in the config directories, found with no
//! registration.
//!
//! In each config directory, in the order given ([`default_config_dirs`]: `./.troupe/`,
//! then `$XDG_CONFIG_HOME/troupe` or `~/.config/troupe`), `agents/*.toml` is read, then
//! `agents.d/**/*.toml`, each in path order, so discovery is the same on every run.
//! Files whose name starts with `.` (editor lock and backup files) are skipped. Every
//! file is validated; discovery fails if any is invalid or two define the same id, and
//! then reports every problem, not just the first.

use crate::definition::{AgentDefinition, DefinitionError, Location, ResolvedExecution, value_location};
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// The config directories, most specific first: `<cwd>/.troupe`, then
/// `$XDG_CONFIG_HOME/troupe` (when set and absolute) or `~/.config/troupe`.
pub fn default_config_dirs(cwd: &Path) -> Vec<PathBuf> {
    config_dirs_from(cwd, std::env::var_os("XDG_CONFIG_HOME").as_deref(), std::env::home_dir().as_deref())
}

/// [`default_config_dirs`] with the environment given.
pub fn config_dirs_from(cwd: &Path, xdg_config_home: Option<&OsStr>, home: Option<&Path>) -> Vec<PathBuf> {
    let mut dirs = vec![cwd.join(".troupe")];
    // The XDG spec says a relative value is invalid and must be ignored.
    let xdg = xdg_config_home.map(PathBuf::from).filter(|p| p.is_absolute());
    if let Some(base) = xdg.or_else(|| home.map(|h| h.join(".config"))) {
        dirs.push(base.join("troupe"));
    }
    dirs
}

/// One problem found while discovering agents.
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryProblem {
    /// A file is not a valid definition.
    #[error(transparent)]
    Definition(#[from] DefinitionError),
    /// Two files define the same id.
    #[error(
        "{}: duplicate agent id `{id}`: already defined at {}; agent ids must be unique across the config directories",
        place(second, *second_at),
        place(first, *first_at)
    )]
    DuplicateId {
        /// The id.
        id: String,
        /// The file read first.
        first: PathBuf,
        /// Where its id is written.
        first_at: Option<Location>,
        /// The file read second.
        second: PathBuf,
        /// Where its id is written.
        second_at: Option<Location>,
    },
    /// A directory could not be listed.
    #[error("{}: cannot list the directory: {source}", path.display())]
    Directory {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
}

fn place(path: &Path, at: Option<Location>) -> String {
    match at {
        Some(at) => format!("{}:{at}", path.display()),
        None => path.display().to_string(),
    }
}

/// Discovery failed; every problem found, in discovery order.
#[derive(Debug, thiserror::Error)]
pub struct RegistryError {
    /// The problems (at least one).
    pub problems: Vec<DiscoveryProblem>,
}

impl fmt::Display for RegistryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.problems.len();
        write!(f, "{n} problem{} in the agent definitions:", if n == 1 { "" } else { "s" })?;
        for problem in &self.problems {
            write!(f, "\n  {problem}")?;
        }
        Ok(())
    }
}

/// A discovered agent.
#[derive(Clone, Debug)]
pub struct RegisteredAgent {
    /// Its definition.
    pub definition: AgentDefinition,
    /// The file it was read from.
    pub path: PathBuf,
    /// The config directory the file was found in (`{config_dir}`).
    pub config_dir: PathBuf,
}

impl RegisteredAgent {
    /// How to start the agent's worker in `workspace`, `{config_dir}` being the directory
    /// the file was found in.
    pub fn execution(&self, workspace: &Path) -> ResolvedExecution {
        self.definition.render_templates(workspace, &self.config_dir)
    }
}

/// What `troupe agent list` shows of an agent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentSummary {
    /// The id.
    pub id: String,
    /// The name.
    pub name: String,
    /// The version, when the file gives one.
    pub version: Option<String>,
    /// The description.
    pub description: String,
    /// The file.
    pub path: PathBuf,
}

/// The agents found in the config directories, in discovery order.
#[derive(Clone, Debug, Default)]
pub struct AgentRegistry {
    agents: Vec<RegisteredAgent>,
    by_id: BTreeMap<String, usize>,
}

impl AgentRegistry {
    /// Finds and validates every agent file of `dirs`; directories that do not exist are
    /// skipped, and a directory given twice is read once.
    pub fn discover(dirs: &[PathBuf]) -> Result<AgentRegistry, RegistryError> {
        let mut problems = Vec::new();
        let mut registry = AgentRegistry::default();
        let mut ids_at: BTreeMap<String, Option<Location>> = BTreeMap::new();
        let mut seen_dirs = BTreeSet::new();
        for dir in dirs {
            let canonical = dir.canonicalize().unwrap_or_else(|_| dir.clone());
            if !seen_dirs.insert(canonical) {
                continue;
            }
            for path in agent_files(dir, &mut problems) {
                let text = match std::fs::read_to_string(&path) {
                    Ok(text) => text,
                    Err(e) => {
                        problems.push(DefinitionError::new(&path, format!("cannot read it: {e}")).into());
                        continue;
                    }
                };
                let definition = match AgentDefinition::parse(&text, &path) {
                    Ok(definition) => definition,
                    Err(e) => {
                        problems.push(e.into());
                        continue;
                    }
                };
                let id = definition.agent.id.clone();
                let id_at = value_location(&text, &["agent", "id"]);
                if let Some(&first) = registry.by_id.get(&id) {
                    problems.push(DiscoveryProblem::DuplicateId {
                        first: registry.agents[first].path.clone(),
                        first_at: ids_at.get(&id).copied().flatten(),
                        second: path,
                        second_at: id_at,
                        id,
                    });
                    continue;
                }
                ids_at.insert(id.clone(), id_at);
                registry.by_id.insert(id, registry.agents.len());
                registry.agents.push(RegisteredAgent { definition, path, config_dir: dir.clone() });
            }
        }
        if problems.is_empty() { Ok(registry) } else { Err(RegistryError { problems }) }
    }

    /// The agent `id`.
    pub fn get(&self, id: &str) -> Option<&AgentDefinition> {
        self.entry(id).map(|a| &a.definition)
    }

    /// The agent `id` with where it was found.
    pub fn entry(&self, id: &str) -> Option<&RegisteredAgent> {
        self.by_id.get(id).map(|&n| &self.agents[n])
    }

    /// The file the agent `id` was read from.
    pub fn path_of(&self, id: &str) -> Option<&Path> {
        self.entry(id).map(|a| a.path.as_path())
    }

    /// Every agent, in discovery order.
    pub fn iter(&self) -> impl Iterator<Item = &RegisteredAgent> {
        self.agents.iter()
    }

    /// What `troupe agent list` shows, in discovery order.
    pub fn list(&self) -> Vec<AgentSummary> {
        self.agents
            .iter()
            .map(|a| {
                let agent = &a.definition.agent;
                AgentSummary {
                    id: agent.id.clone(),
                    name: agent.name.clone(),
                    version: agent.version.clone(),
                    description: agent.description.clone(),
                    path: a.path.clone(),
                }
            })
            .collect()
    }

    /// How many agents there are.
    pub fn len(&self) -> usize {
        self.agents.len()
    }

    /// Whether no agent was found.
    pub fn is_empty(&self) -> bool {
        self.agents.is_empty()
    }
}

/// `<dir>/agents/*.toml`, then `<dir>/agents.d/**/*.toml`, each sorted by path.
fn agent_files(dir: &Path, problems: &mut Vec<DiscoveryProblem>) -> Vec<PathBuf> {
    let mut top = Vec::new();
    list_toml(&dir.join("agents"), false, &mut top, problems);
    top.sort();
    let mut nested = Vec::new();
    list_toml(&dir.join("agents.d"), true, &mut nested, problems);
    nested.sort();
    top.extend(nested);
    top
}

fn list_toml(dir: &Path, recursive: bool, out: &mut Vec<PathBuf>, problems: &mut Vec<DiscoveryProblem>) {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return,
        Err(source) => {
            problems.push(DiscoveryProblem::Directory { path: dir.to_owned(), source });
            return;
        }
    };
    for entry in entries {
        let entry = match entry {
            Ok(entry) => entry,
            Err(source) => {
                problems.push(DiscoveryProblem::Directory { path: dir.to_owned(), source });
                continue;
            }
        };
        let path = entry.path();
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        // Symlinked files are followed; symlinked directories are not, so a link loop
        // cannot make discovery run forever.
        let Ok(kind) = entry.file_type() else { continue };
        if kind.is_dir() {
            if recursive {
                list_toml(&path, true, out, problems);
            }
        } else if path.extension().is_some_and(|e| e == "toml") && path.is_file() {
            out.push(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_dirs_prefer_the_workspace_then_xdg_then_home() {
        let cwd = Path::new("/w");
        let home = Path::new("/home/u");
        assert_eq!(
            config_dirs_from(cwd, Some(OsStr::new("/xdg")), Some(home)),
            [PathBuf::from("/w/.troupe"), PathBuf::from("/xdg/troupe")]
        );
        assert_eq!(
            config_dirs_from(cwd, None, Some(home)),
            [PathBuf::from("/w/.troupe"), PathBuf::from("/home/u/.config/troupe")]
        );
        assert_eq!(
            config_dirs_from(cwd, Some(OsStr::new("relative")), Some(home))[1],
            PathBuf::from("/home/u/.config/troupe"),
            "a relative XDG_CONFIG_HOME is ignored"
        );
        assert_eq!(config_dirs_from(cwd, None, None), [PathBuf::from("/w/.troupe")]);
    }
}
