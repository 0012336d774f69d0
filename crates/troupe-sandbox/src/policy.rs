//! [`Sandbox`]: a mode and what it grants beyond the mode's defaults.

use crate::SandboxMode;
use std::path::{Path, PathBuf};

/// The system directories a confined program may read and execute from. Home
/// directories, `/root`, `/tmp`, `/var`, `/run` and `/srv` are not among them, nor are
/// `/proc` whole (see [`PROC_HIDDEN`]) and `/dev` whole (see [`READABLE_DEVICES`]).
pub const SYSTEM_READ_PATHS: &[&str] = &["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc", "/opt", "/sys"];

/// The device files a confined program may read, besides the [`WRITABLE_DEVICES`]. Not a
/// terminal (`/dev/tty`, `/dev/pts`, `/dev/console`): a program that could open the
/// user's terminal could read what the user types to troupe (an approval) or write what
/// looks like troupe's prompts.
pub const READABLE_DEVICES: &[&str] = &["/dev/random", "/dev/urandom"];

/// What a confined program cannot read under `/proc`, besides every process's directory
/// (`/proc/PID`, its own included): the links to a process's directory, and the kernel's
/// memory, messages, symbols and keys. The rest of `/proc` (`cpuinfo`, `meminfo`, `sys`,
/// …) it can read.
pub const PROC_HIDDEN: &[&str] = &[
    "self",
    "thread-self",
    "net",
    "mounts",
    "kcore",
    "kmsg",
    "kallsyms",
    "keys",
    "key-users",
    "kpagecount",
    "kpageflags",
    "kpagecgroup",
    "sysrq-trigger",
    "timer_list",
    "sched_debug",
];

/// The device files a confined program may read and write (shell redirections use them).
pub const WRITABLE_DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full"];

/// How many processes (and threads) a confined command may run at once, beyond those its
/// user already runs: a fork bomb stops there.
pub const PROCESSES_PER_COMMAND: u64 = 1024;

/// How the programs an agent runs are confined: a [`SandboxMode`], whether they may use
/// the network, and the paths granted beyond the mode's defaults.
///
/// Besides the workspace and [`SYSTEM_READ_PATHS`], a confined program may read the Rust
/// toolchain's files where they are (`$RUSTUP_HOME`, and `bin`, `registry` and `git` of
/// `$CARGO_HOME`, not its credentials), so `cargo test` works in the sandbox, and git's
/// configuration (`~/.gitconfig`, `~/.config/git`; not `~/.git-credentials`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sandbox {
    mode: SandboxMode,
    network: bool,
    read: Vec<PathBuf>,
    write: Vec<PathBuf>,
}

impl Sandbox {
    /// A sandbox in `mode`, with no network and no path granted beyond the mode's.
    pub fn new(mode: SandboxMode) -> Self {
        Sandbox { mode, ..Sandbox::default() }
    }

    /// The mode.
    pub fn mode(&self) -> SandboxMode {
        self.mode
    }

    /// Whether confined programs may use the network (always, in `full`).
    pub fn network(&self) -> bool {
        self.network || self.mode == SandboxMode::Full
    }

    /// Lets confined programs use the network (or not).
    pub fn with_network(mut self, allowed: bool) -> Self {
        self.network = allowed;
        self
    }

    /// Also lets confined programs read (and execute) under `path`.
    pub fn allow_read(mut self, path: impl Into<PathBuf>) -> Self {
        self.read.push(path.into());
        self
    }

    /// Also lets confined programs write under `path` (in `read-only` too).
    pub fn allow_write(mut self, path: impl Into<PathBuf>) -> Self {
        self.write.push(path.into());
        self
    }

    /// The paths granted to read beyond the defaults.
    pub fn readable(&self) -> &[PathBuf] {
        &self.read
    }

    /// The paths granted to write beyond the defaults.
    pub fn writable(&self) -> &[PathBuf] {
        &self.write
    }

    /// Every path a program confined in `workspace` may read, those that exist.
    pub(crate) fn read_paths(&self, workspace: &Path) -> Vec<PathBuf> {
        let mut paths: Vec<PathBuf> = SYSTEM_READ_PATHS.iter().map(PathBuf::from).collect();
        paths.extend(readable_proc_entries());
        paths.push(workspace.to_path_buf());
        paths.extend(toolchain_paths());
        paths.extend(self.read.iter().cloned());
        paths.retain(|path| path.exists());
        paths
    }

    /// Every directory a program confined in `workspace` may write, besides its private
    /// temporary directory and [`WRITABLE_DEVICES`], those that exist.
    pub(crate) fn write_paths(&self, workspace: &Path) -> Vec<PathBuf> {
        let mut paths = Vec::new();
        if self.mode == SandboxMode::WorkspaceWrite {
            paths.push(workspace.to_path_buf());
        }
        paths.extend(self.write.iter().cloned());
        paths.retain(|path| path.exists());
        paths
    }
}

/// The entries of `/proc` a confined program may read: none of a process (see
/// [`PROC_HIDDEN`]).
pub fn readable_proc_entries() -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter(|entry| {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            !name.bytes().all(|b| b.is_ascii_digit()) && !PROC_HIDDEN.contains(&name.as_ref())
        })
        .map(|entry| entry.path())
        .collect()
}

/// The toolchains' readable files: rustup's toolchains, cargo's binaries and the
/// sources it downloaded, git's configuration. Not `$CARGO_HOME` whole: it holds `credentials.toml`.
fn toolchain_paths() -> Vec<PathBuf> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let under_home = |name: &str| home.as_ref().map(|home| home.join(name));
    let cargo = std::env::var_os("CARGO_HOME").map(PathBuf::from).or_else(|| under_home(".cargo"));
    let rustup = std::env::var_os("RUSTUP_HOME").map(PathBuf::from).or_else(|| under_home(".rustup"));
    let mut paths: Vec<PathBuf> = rustup.into_iter().collect();
    paths.extend(under_home(".gitconfig"));
    paths.extend(under_home(".config/git"));
    if let Some(cargo) = cargo {
        paths.extend(["bin", "registry", "git", "config.toml"].map(|part| cargo.join(part)));
    }
    paths
}
