//! [`SandboxSettings`]: the `[sandbox]` table of `troupe.toml` and of agent files, layered
//! into a [`Sandbox`].

use crate::{Sandbox, SandboxMode};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use troupe_core::line_column;

/// A `[sandbox]` table: what it sets, nothing for what it leaves out.
///
/// ```toml
/// [sandbox]
/// mode = "workspace-write"   # read-only | workspace-write | full
/// network = false            # whether confined commands may use the network
/// read = ["/srv/datasets"]   # more to read (relative paths: from the workspace; ~/: home)
/// write = ["~/.cache/pip"]   # more to write
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxSettings {
    /// The mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<SandboxMode>,
    /// Whether confined commands may use the network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<bool>,
    /// More paths to read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read: Vec<PathBuf>,
    /// More paths to write.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub write: Vec<PathBuf>,
}

impl SandboxSettings {
    /// Settings of `mode` alone.
    pub fn of_mode(mode: SandboxMode) -> Self {
        SandboxSettings { mode: Some(mode), ..SandboxSettings::default() }
    }

    /// Whether the table sets nothing.
    pub fn is_empty(&self) -> bool {
        self == &SandboxSettings::default()
    }

    /// These settings where they say something, `base` where they do not; the paths of
    /// both.
    pub fn over(&self, base: &SandboxSettings) -> SandboxSettings {
        SandboxSettings {
            mode: self.mode.or(base.mode),
            network: self.network.or(base.network),
            read: base.read.iter().chain(&self.read).cloned().collect(),
            write: base.write.iter().chain(&self.write).cloned().collect(),
        }
    }

    /// The sandbox these settings describe for `workspace` (the default mode,
    /// `workspace-write`, where none is set). A relative path is the workspace's; one
    /// starting with `~/`, under `$HOME`.
    pub fn sandbox(&self, workspace: &Path) -> Sandbox {
        let mut sandbox = Sandbox::new(self.mode.unwrap_or_default()).with_network(self.network.unwrap_or(false));
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let place = |path: &PathBuf| match (path.strip_prefix("~"), &home) {
            (Ok(rest), Some(home)) => home.join(rest),
            _ => workspace.join(path),
        };
        for path in &self.read {
            sandbox = sandbox.allow_read(place(path));
        }
        for path in &self.write {
            sandbox = sandbox.allow_write(place(path));
        }
        sandbox
    }
}

/// A `[sandbox]` table that is not valid.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{origin}:{line}:{column}: {message}")]
pub struct SandboxConfigError {
    /// The file.
    pub origin: String,
    /// Where, 1-based.
    pub line: usize,
    /// Where, 1-based, in characters.
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

/// The `[sandbox]` table of `troupe.toml` at `path`: empty when the file or the table is
/// missing.
pub fn load_project_settings(path: impl AsRef<Path>) -> Result<SandboxSettings, SandboxConfigError> {
    let path = path.as_ref();
    let origin = path.display().to_string();
    match std::fs::read_to_string(path) {
        Ok(text) => parse_project_settings(&text, &origin),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(SandboxSettings::default()),
        Err(e) => Err(SandboxConfigError { origin, line: 1, column: 1, message: format!("cannot read it: {e}") }),
    }
}

/// The `[sandbox]` table of `troupe.toml` text (other tables are other components').
pub fn parse_project_settings(text: &str, origin: &str) -> Result<SandboxSettings, SandboxConfigError> {
    #[derive(Deserialize)]
    struct Project {
        #[serde(default)]
        sandbox: SandboxSettings,
    }
    let project: Project = toml::from_str(text).map_err(|e| {
        let (line, column) = e.span().map_or((1, 1), |span| line_column(text, span.start));
        SandboxConfigError { origin: origin.to_owned(), line, column, message: e.message().trim_end().to_owned() }
    })?;
    Ok(project.sandbox)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_is_read_and_layered_over_another() {
        let text = "[model]\ndefault_model = \"demo\"\n\n[sandbox]\nmode = \"read-only\"\nread = [\"data\"]\n";
        let project = parse_project_settings(text, "troupe.toml").expect("valid");
        assert_eq!(project.mode, Some(SandboxMode::ReadOnly));
        let agent = SandboxSettings { network: Some(true), read: vec!["more".into()], ..SandboxSettings::default() };
        let layered = agent.over(&project);
        assert_eq!(layered.mode, Some(SandboxMode::ReadOnly), "the base's mode where the top says none");
        assert_eq!(layered.network, Some(true));
        assert_eq!(layered.read, vec![PathBuf::from("data"), PathBuf::from("more")]);
        let sandbox = layered.sandbox(Path::new("/ws"));
        assert!(sandbox.network());
        assert_eq!(sandbox.readable(), &[PathBuf::from("/ws/data"), PathBuf::from("/ws/more")]);
        assert_eq!(SandboxSettings::default().sandbox(Path::new("/ws")).mode(), SandboxMode::WorkspaceWrite);
    }

    #[test]
    fn a_path_from_home_is_under_home() {
        let home = std::env::var_os("HOME").map(PathBuf::from).expect("tests run with a HOME");
        let settings = SandboxSettings { write: vec!["~/.npm".into(), "cache".into()], ..SandboxSettings::default() };
        let sandbox = settings.sandbox(Path::new("/ws"));
        assert_eq!(sandbox.writable(), &[home.join(".npm"), PathBuf::from("/ws/cache")]);
    }

    #[test]
    fn a_bad_mode_or_key_is_named_with_its_place() {
        let bad = parse_project_settings("[sandbox]\nmode = \"open\"\n", "troupe.toml").expect_err("invalid");
        assert_eq!((bad.line, bad.column), (2, 8));
        assert!(bad.message.contains("unknown variant `open`"), "{bad}");
        let typo = parse_project_settings("[sandbox]\nnetwrok = true\n", "troupe.toml").expect_err("invalid");
        assert!(typo.to_string().starts_with("troupe.toml:2:1: unknown field `netwrok`"), "{typo}");
    }
}
