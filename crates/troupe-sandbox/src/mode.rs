//! [`SandboxMode`]: how far a program an agent runs is confined.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// How far a program an agent runs is confined. Parsed from and shown as `read-only`,
/// `workspace-write` and `full`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// Reads the system and the workspace; writes only a private temporary directory; no
    /// network.
    ReadOnly,
    /// Reads the system and the workspace; writes the workspace and a private temporary
    /// directory; no network unless granted. The default.
    #[default]
    WorkspaceWrite,
    /// No confinement at all: an explicit choice, shown in every run summary.
    Full,
}

impl SandboxMode {
    /// Every mode, most confined first.
    pub const ALL: [SandboxMode; 3] = [SandboxMode::ReadOnly, SandboxMode::WorkspaceWrite, SandboxMode::Full];

    /// The mode's name: `read-only`, `workspace-write` or `full`.
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::ReadOnly => "read-only",
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::Full => "full",
        }
    }

    /// Whether the mode confines anything.
    pub fn confines(self) -> bool {
        self != SandboxMode::Full
    }
}

impl fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A sandbox mode name that is none of the three.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown sandbox mode `{0}`: expected read-only, workspace-write or full")]
pub struct UnknownMode(pub String);

impl FromStr for SandboxMode {
    type Err = UnknownMode;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        SandboxMode::ALL.into_iter().find(|mode| mode.as_str() == name).ok_or_else(|| UnknownMode(name.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mode_reads_back_from_its_name() {
        for mode in SandboxMode::ALL {
            assert_eq!(mode.as_str().parse::<SandboxMode>(), Ok(mode));
            let json = serde_json::to_string(&mode).expect("a mode serializes");
            assert_eq!(json, format!("\"{mode}\""));
        }
        assert_eq!("strict".parse::<SandboxMode>(), Err(UnknownMode("strict".to_owned())));
        assert_eq!(SandboxMode::default(), SandboxMode::WorkspaceWrite);
    }
}
