//! [`SandboxError`]: why a program could not be started confined.

/// Why a program could not be started confined.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The kernel cannot enforce the mode asked for; nothing was started.
    #[error(
        "the `{mode}` sandbox cannot be enforced here: {reason}. Nothing was run; choose the `full` \
         sandbox mode to run commands unconfined"
    )]
    Unavailable {
        /// The mode asked for.
        mode: crate::SandboxMode,
        /// What the kernel lacks.
        reason: String,
    },
    /// The program could not be started (not found, not executable, out of resources).
    #[error("could not start `{program}`: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The system-call filter could not be installed on the calling thread
    /// ([`confine_calls`](crate::confine_calls)).
    #[error("the system-call filter could not be installed: {0}")]
    CallFilter(String),
    /// The sandbox's private temporary directory could not be made.
    #[error("could not make the sandbox's temporary directory: {0}")]
    TempDir(#[source] std::io::Error),
}
