//! [`ReloadError`]: why an edit was not applied (the configuration before it stays).

use crate::definition::{DefinitionError, Location};
use std::path::{Path, PathBuf};

/// An edit that was refused, or a watch that failed. The configuration read before the
/// edit stays in force.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReloadError {
    /// An agent file does not parse or is not a valid definition (`path:line:column:`).
    #[error(transparent)]
    Definition(#[from] DefinitionError),
    /// `troupe.toml` does not parse or is not valid; `message` starts with its
    /// `path:line:column` where the problem is at one place.
    #[error("{message}")]
    Settings {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// `troupe.toml` was removed: its settings stay in force until it is back.
    #[error("{}: the file was removed; the settings read from it before stay in force", path.display())]
    SettingsRemoved {
        /// The file.
        path: PathBuf,
    },
    /// An agent's model cannot be used (the caller's check refused it).
    #[error("{}: agent `{agent}`: model `{model}` cannot be used: {reason}", place(path, *location))]
    Model {
        /// The agent file.
        path: PathBuf,
        /// Where its model is written.
        location: Option<Location>,
        /// The agent.
        agent: String,
        /// The model id.
        model: String,
        /// Why, as the check said.
        reason: String,
    },
    /// Two agent files define the same id; the second is not taken.
    #[error(
        "{}: duplicate agent id `{id}`: already defined in {}; agent ids must be unique across the config directories",
        place(path, *location),
        first.display()
    )]
    DuplicateId {
        /// The id.
        id: String,
        /// The file that was not taken.
        path: PathBuf,
        /// Where its id is written.
        location: Option<Location>,
        /// The file that defines the id.
        first: PathBuf,
    },
    /// A directory could not be watched or listed, or the watch reported an error.
    #[error("{}: {reason}", path.display())]
    Watch {
        /// The directory or file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
}

impl ReloadError {
    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            ReloadError::Definition(error) => &error.path,
            ReloadError::Settings { path, .. }
            | ReloadError::SettingsRemoved { path }
            | ReloadError::Model { path, .. }
            | ReloadError::DuplicateId { path, .. }
            | ReloadError::Watch { path, .. } => path,
        }
    }

    /// The line the error is at, where it is at one place.
    pub fn line(&self) -> Option<usize> {
        match self {
            ReloadError::Definition(error) => error.line(),
            ReloadError::Model { location, .. } | ReloadError::DuplicateId { location, .. } => location.map(|l| l.line),
            ReloadError::Settings { message, path } => {
                // `path:line:column: …`
                let rest = message.strip_prefix(&path.display().to_string())?.strip_prefix(':')?;
                rest.split(':').next()?.parse().ok()
            }
            ReloadError::SettingsRemoved { .. } | ReloadError::Watch { .. } => None,
        }
    }
}

fn place(path: &Path, at: Option<Location>) -> String {
    match at {
        Some(at) => format!("{}:{at}", path.display()),
        None => path.display().to_string(),
    }
}
