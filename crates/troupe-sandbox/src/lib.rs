//! The sandbox of troupe: every program an agent runs (the `shell` tool, `git`, an MCP
//! server over stdio) is started confined, in one of three named modes.
//!
//! | mode | reads | writes | network |
//! | --- | --- | --- | --- |
//! | [`SandboxMode::ReadOnly`] | the system, the workspace | a private temporary directory | off |
//! | [`SandboxMode::WorkspaceWrite`] (the default) | the system, the workspace | the workspace, a private temporary directory | off unless granted |
//! | [`SandboxMode::Full`] | everything | everything | on |
//!
//! On Linux the confinement is Landlock (which files may be read, written, executed;
//! signals and abstract sockets kept inside the sandbox; no process's directory under
//! `/proc`, so no other process's environment), a seccomp filter (no sockets when the
//! network is off, no `ptrace`, no mounts, no namespaces, no `io_uring`, no kernel keyring)
//! and resource limits (no core dumps; a bounded number of processes). A mode other than
//! `full` that the kernel cannot enforce is refused with [`SandboxError::Unavailable`]:
//! a command never runs less confined than asked without saying so.
//!
//! The confinement is applied on a thread of its own, which then starts the program and
//! ends: Landlock and seccomp bind a thread and what it starts, so the calling process
//! stays unconfined and no code runs between `fork` and `exec`.
//!
//! ```no_run
//! # async fn example() -> Result<(), troupe_sandbox::SandboxError> {
//! use troupe_sandbox::{Sandbox, SandboxMode};
//! let mut command = tokio::process::Command::new("/bin/sh");
//! command.args(["-c", "cat /etc/hostname > copy.txt"]).current_dir("/srv/project");
//! let confined = Sandbox::new(SandboxMode::WorkspaceWrite).spawn(command, "/srv/project".as_ref()).await?;
//! println!("{}", confined.report);
//! # Ok(()) }
//! ```

// Library code answers with errors, never panics: `unwrap`/`expect` only in tests.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod calls;
mod error;
mod mode;
mod policy;
mod report;
mod settings;
mod spawn;

#[cfg(target_os = "linux")]
mod linux;

pub use calls::confine_calls;
pub use error::SandboxError;
pub use mode::{SandboxMode, UnknownMode};
pub use policy::{
    PROC_HIDDEN, PROCESSES_PER_COMMAND, READABLE_DEVICES, SYSTEM_READ_PATHS, Sandbox, WRITABLE_DEVICES,
    readable_proc_entries,
};
pub use report::SandboxReport;
pub use settings::{SandboxConfigError, SandboxSettings, load_project_settings, parse_project_settings};
pub use spawn::Confined;
