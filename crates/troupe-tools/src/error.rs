//! Why a tool call failed, worded for the model that made it.

use std::fmt;
use std::time::Duration;

/// A failed tool call. Every message says what happened and what to do next, because the
/// model reads it as the call's result and is expected to correct itself.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// The arguments do not match the tool's input schema.
    #[error("invalid arguments: {message}. Fix the arguments to match the tool's input schema and call it again.")]
    InvalidArguments {
        /// Which argument is wrong and what was expected.
        message: String,
    },
    /// No tool of that name is in the catalog.
    #[error("unknown tool `{name}`. Available tools: {}. Call one of them by its exact name.", KnownList(.known))]
    UnknownTool {
        /// The name the model called.
        name: String,
        /// The names the catalog does know.
        known: Vec<String>,
    },
    /// A path leads outside the agent's workspace.
    #[error(
        "path `{path}` is outside the workspace: {reason}. Use a path relative to the workspace root that stays inside it."
    )]
    PathOutsideWorkspace {
        /// The path as given.
        path: String,
        /// Why it was refused (absolute, climbs above the root, a symlink leading out, ...).
        reason: String,
    },
    /// A path does not exist.
    #[error("`{path}` does not exist. Check the path; fs.list or fs.glob show what exists.")]
    NotFound {
        /// The path as given.
        path: String,
    },
    /// The operating system refused an operation.
    #[error("I/O error on `{path}`: {message}")]
    Io {
        /// The path involved, relative to the workspace where known.
        path: String,
        /// The operating system's message.
        message: String,
    },
    /// The call ran longer than the tool's timeout and was stopped.
    #[error(
        "the tool did not finish within {} and was stopped. Try a smaller piece of work, or a longer timeout where the tool accepts one.",
        HumanDuration(*.after)
    )]
    Timeout {
        /// The limit that was exceeded.
        after: Duration,
    },
    /// The run was cancelled while the call was in flight.
    #[error("the tool call was cancelled before it finished; its effects may be incomplete.")]
    Cancelled,
    /// The tool panicked; the panic was contained.
    #[error(
        "the tool crashed (panic: {message}). This is a bug in the tool, not in your arguments; try another approach."
    )]
    Panicked {
        /// The panic's message, where it had one.
        message: String,
    },
    /// The tool ran and reports a failure in its own words.
    #[error("{message}")]
    Failed {
        /// What went wrong, for the model.
        message: String,
    },
    /// A policy or a person refused the call.
    #[error(
        "the tool call was denied: {reason}. Do not repeat the same call; choose another approach or ask the user."
    )]
    Denied {
        /// Why it was denied.
        reason: String,
    },
}

impl ToolError {
    /// An [`ToolError::InvalidArguments`] error.
    pub fn invalid_arguments(message: impl Into<String>) -> Self {
        ToolError::InvalidArguments { message: message.into() }
    }

    /// A [`ToolError::Failed`] error.
    pub fn failed(message: impl Into<String>) -> Self {
        ToolError::Failed { message: message.into() }
    }

    /// An [`ToolError::Io`] error for `path`, mapping "not found" to [`ToolError::NotFound`].
    pub fn io(path: impl Into<String>, error: &std::io::Error) -> Self {
        let path = path.into();
        if error.kind() == std::io::ErrorKind::NotFound {
            ToolError::NotFound { path }
        } else {
            ToolError::Io { path, message: error.to_string() }
        }
    }
}

struct KnownList<'a>(&'a [String]);

impl fmt::Display for KnownList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("(none)");
        }
        for (i, name) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(name)?;
        }
        Ok(())
    }
}

/// A tool's own failure in its own words ([`ToolError::Failed`]): what a `#[tool]`
/// function's `Err(String)` becomes.
impl From<String> for ToolError {
    fn from(message: String) -> Self {
        ToolError::Failed { message }
    }
}

/// A tool's own failure in its own words ([`ToolError::Failed`]).
impl From<&str> for ToolError {
    fn from(message: &str) -> Self {
        ToolError::Failed { message: message.to_owned() }
    }
}

/// A duration as a person writes it: `250ms`, `2s`, `1.5s`.
pub(crate) struct HumanDuration(pub Duration);

impl fmt::Display for HumanDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.0;
        if d < Duration::from_secs(1) {
            write!(f, "{}ms", d.as_millis())
        } else if d.subsec_millis() == 0 {
            write!(f, "{}s", d.as_secs())
        } else {
            write!(f, "{:.1}s", d.as_secs_f64())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_say_what_to_do() {
        let unknown = ToolError::UnknownTool { name: "fs.raed".into(), known: vec!["fs.read".into(), "grep".into()] };
        assert_eq!(
            unknown.to_string(),
            "unknown tool `fs.raed`. Available tools: fs.read, grep. Call one of them by its exact name."
        );
        let timeout = ToolError::Timeout { after: Duration::from_millis(1500) };
        assert!(timeout.to_string().contains("within 1.5s"), "{timeout}");
        assert!(ToolError::Timeout { after: Duration::from_millis(200) }.to_string().contains("200ms"));
    }

    #[test]
    fn not_found_io_errors_become_not_found() {
        let missing = std::io::Error::from(std::io::ErrorKind::NotFound);
        assert_eq!(ToolError::io("a.txt", &missing), ToolError::NotFound { path: "a.txt".into() });
        let denied = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        assert!(matches!(ToolError::io("a.txt", &denied), ToolError::Io { .. }));
    }
}
