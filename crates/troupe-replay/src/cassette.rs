//! Cassettes: a recorded run in a file, so that it replays in a test with no store, no
//! network and no key — a run a person recorded becomes a regression test of their crate.

use crate::error::ReplayError;
use crate::recording::Recording;
use crate::replay::{ReplayOptions, ReplayReport, replay};
use serde::{Deserialize, Serialize};
use std::path::Path;
use troupe_run::AgentSpec;
use troupe_runtime::Runner;

/// The cassette format this version writes and reads.
pub const CASSETTE_VERSION: u32 = 1;

/// A recorded run in a file (JSON).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Cassette {
    /// The format's version ([`CASSETTE_VERSION`]).
    pub version: u32,
    /// The run.
    pub recording: Recording,
}

/// Why a cassette could not be written or read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CassetteError {
    /// The file could not be read or written.
    #[error("cassette {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a cassette this version reads.
    #[error("cassette {path}: {reason}")]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
}

impl Cassette {
    /// A cassette of `recording`. The directory the run worked in is left out: it is the
    /// recording machine's, and the replay substitutes every tool.
    pub fn new(mut recording: Recording) -> Self {
        recording.input.workspace = None;
        Cassette { version: CASSETTE_VERSION, recording }
    }

    /// Writes it to `path`, pretty-printed so that a change to it reads as a diff.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<(), CassetteError> {
        let path = path.as_ref();
        let text = serde_json::to_string_pretty(self)
            .map_err(|e| CassetteError::Invalid { path: path.display().to_string(), reason: e.to_string() })?;
        std::fs::write(path, text + "\n")
            .map_err(|source| CassetteError::Io { path: path.display().to_string(), source })
    }

    /// Reads the cassette at `path`.
    pub fn load(path: impl AsRef<Path>) -> Result<Cassette, CassetteError> {
        let path = path.as_ref();
        let shown = || path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| CassetteError::Io { path: shown(), source })?;
        let value: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| CassetteError::Invalid { path: shown(), reason: format!("not JSON: {e}") })?;
        match value.get("version").and_then(serde_json::Value::as_u64) {
            Some(version) if version == u64::from(CASSETTE_VERSION) => {}
            Some(version) => {
                return Err(CassetteError::Invalid {
                    path: shown(),
                    reason: format!(
                        "format version {version}, and this troupe reads version {CASSETTE_VERSION}; export it again"
                    ),
                });
            }
            None => return Err(CassetteError::Invalid { path: shown(), reason: "no format `version`".to_owned() }),
        }
        serde_json::from_value(value).map_err(|e| CassetteError::Invalid { path: shown(), reason: e.to_string() })
    }

    /// Replays it as `agent` is declared now (its instructions, tools, policy and model
    /// configuration), nothing live. The agent must not record runs.
    pub async fn replay_agent(&self, agent: &troupe_runtime::Agent) -> Result<ReplayReport, ReplayError> {
        self.replay(agent.runner(), (*agent.current_spec()).clone()).await
    }

    /// Replays it as the agent `spec` with `runner` (which must not record), nothing live.
    pub async fn replay(&self, runner: &Runner, spec: AgentSpec) -> Result<ReplayReport, ReplayError> {
        replay(runner, spec, self.recording.clone(), ReplayOptions::default()).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_that_is_no_cassette_of_this_version_is_named_with_why() {
        let dir = tempfile::tempdir().expect("a dir");
        let read = |text: &str| {
            let path = dir.path().join("c.json");
            std::fs::write(&path, text).expect("written");
            Cassette::load(&path).expect_err("refused").to_string()
        };
        assert!(read("{").contains("not JSON"));
        assert!(read("{}").contains("no format `version`"));
        let newer = read(r#"{"version": 9, "recording": {}}"#);
        assert!(newer.contains("format version 9, and this troupe reads version 1"), "{newer}");
        assert!(read(r#"{"version": 1, "recording": {"run_id": 3}}"#).contains("c.json"));
        let missing = Cassette::load(dir.path().join("none.json")).expect_err("no file").to_string();
        assert!(missing.contains("none.json"), "{missing}");
    }
}
