//! Confining a worker to its workspace with Landlock and the sandbox's system-call filter,
//! and saying how far that went.
//!
//! The worker may read and execute under the system directories and its workspace, and
//! write only under its workspace, `/tmp` and `/dev/null`-like device files; the system
//! calls no confined command may make (`ptrace`, `process_vm_*`, mounts, namespaces, the
//! keyring, `io_uring`, …) fail, and it dumps no core. It keeps the network only when its
//! policy says so ([`SandboxPolicy::network`]): a worker whose coordinator hosts its
//! model needs none, and opens no socket. The commands its agent runs are confined again,
//! by the sandbox of commands. Where the
//! kernel has no Landlock (or an older ABI), the [`SandboxReport`] says so; a worker sends
//! it as its first event, in its result's metrics and on stderr: never silently skipped.
//!
//! Landlock binds the calling thread and the threads it starts afterwards: call
//! [`confine`] before the async runtime starts its threads.

use landlock::{
    ABI, Access, AccessFs, CompatLevel, Compatible, LandlockStatus, Ruleset, RulesetAttr, RulesetCreatedAttr,
    RulesetStatus, path_beneath_rules,
};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::PathBuf;

/// The system directories a worker may read and execute from. Not `/proc` whole (another
/// process's directory holds its environment, a key among it; see
/// [`troupe_sandbox::readable_proc_entries`]) nor `/dev` whole (a terminal; see
/// [`troupe_sandbox::READABLE_DEVICES`]).
pub const SYSTEM_READ_PATHS: &[&str] =
    &["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc", "/opt", "/sys", "/run"];

/// The device files a worker may write (shell redirections use them): the sandbox's, no
/// terminal.
pub const WRITABLE_DEVICES: &[&str] = troupe_sandbox::WRITABLE_DEVICES;

/// What a worker may touch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SandboxPolicy {
    /// Read, write and execute.
    pub workspace: PathBuf,
    /// Read and execute only.
    pub readable: Vec<PathBuf>,
    /// Read, write and execute, besides the workspace.
    pub writable: Vec<PathBuf>,
    /// Whether the worker may open sockets (to reach its model itself).
    pub network: bool,
}

impl SandboxPolicy {
    /// The workspace, the system directories to read, `/tmp` and the usual devices to
    /// write.
    pub fn for_workspace(workspace: impl Into<PathBuf>) -> Self {
        let mut writable: Vec<PathBuf> = vec![PathBuf::from("/tmp")];
        writable.extend(WRITABLE_DEVICES.iter().map(PathBuf::from));
        SandboxPolicy { workspace: workspace.into(), readable: readable_system_paths(), writable, network: true }
    }

    /// Takes the network away: no socket can be opened (the coordinator calls the
    /// worker's model).
    pub fn without_network(mut self) -> Self {
        self.network = false;
        self
    }

    /// Also lets the worker read (and execute) under `path`.
    pub fn allow_read(mut self, path: impl Into<PathBuf>) -> Self {
        self.readable.push(path.into());
        self
    }

    /// Also lets the worker write under `path`.
    pub fn allow_write(mut self, path: impl Into<PathBuf>) -> Self {
        self.writable.push(path.into());
        self
    }
}

/// [`SYSTEM_READ_PATHS`], the readable devices, `/proc` without any process's directory
/// but the worker's own.
fn readable_system_paths() -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = SYSTEM_READ_PATHS.iter().map(PathBuf::from).collect();
    paths.extend(troupe_sandbox::READABLE_DEVICES.iter().map(PathBuf::from));
    paths.extend(troupe_sandbox::readable_proc_entries());
    paths.push(PathBuf::from(format!("/proc/{}", std::process::id())));
    paths.retain(|path| path.exists());
    paths
}

/// How far a sandbox was applied.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum SandboxReport {
    /// Every restriction asked for is enforced.
    Enforced {
        /// The Landlock ABI in use.
        abi: String,
        /// The workspace writes are confined to.
        workspace: PathBuf,
        /// Whether the system-call filter is installed.
        #[serde(default)]
        seccomp: bool,
        /// Whether that filter also refuses every socket.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        offline: bool,
    },
    /// Some restrictions are enforced; the kernel's Landlock lacks the rest.
    Partial {
        /// The Landlock ABI in use.
        abi: String,
        /// The workspace writes are confined to.
        workspace: PathBuf,
        /// Whether the system-call filter is installed.
        #[serde(default)]
        seccomp: bool,
        /// Whether that filter also refuses every socket.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        offline: bool,
    },
    /// Nothing is enforced.
    Unavailable {
        /// Why.
        reason: String,
    },
}

impl SandboxReport {
    /// Whether every restriction is enforced.
    pub fn is_enforced(&self) -> bool {
        matches!(self, SandboxReport::Enforced { seccomp: true, .. })
    }
}

impl fmt::Display for SandboxReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SandboxReport::Enforced { abi, workspace, seccomp, offline } => {
                write!(f, "landlock: enforced ({abi}); writes confined to {} and /tmp", workspace.display())?;
                f.write_str(calls(*seccomp, *offline))
            }
            SandboxReport::Partial { abi, workspace, seccomp, offline } => {
                write!(
                    f,
                    "landlock: partially enforced ({abi}: the kernel lacks some access rights); writes confined to {} and /tmp",
                    workspace.display()
                )?;
                f.write_str(calls(*seccomp, *offline))
            }
            SandboxReport::Unavailable { reason } => write!(f, "landlock unavailable: {reason}"),
        }
    }
}

fn calls(seccomp: bool, offline: bool) -> &'static str {
    match (seccomp, offline) {
        (true, true) => "; system calls filtered (seccomp), no network",
        (true, false) => "; system calls filtered (seccomp)",
        (false, _) => "; system calls not filtered",
    }
}

/// The newest Landlock ABI whose file-system rights the worker asks for; older kernels
/// enforce what they have (best effort), which the report says.
const REQUESTED_ABI: ABI = ABI::V5;

/// Confines this thread, and every thread it starts from now on, to `policy`, and filters
/// their system calls (see the module's documentation).
pub fn confine(policy: &SandboxPolicy) -> SandboxReport {
    let landlock = apply(policy);
    // The network stays when the worker reaches its model itself.
    let seccomp = match troupe_sandbox::confine_calls(policy.network) {
        Ok(()) => true,
        Err(error) => {
            tracing::warn!(%error, "the worker's system calls are not filtered");
            false
        }
    };
    match landlock {
        Ok(status) => {
            let abi = match status.landlock {
                LandlockStatus::Available { effective_abi, .. } => format!("ABI {}", effective_abi as i32),
                LandlockStatus::NotEnabled => "not enabled".to_owned(),
                LandlockStatus::NotImplemented => "not implemented".to_owned(),
            };
            let workspace = policy.workspace.clone();
            let offline = seccomp && !policy.network;
            match status.ruleset {
                RulesetStatus::FullyEnforced => SandboxReport::Enforced { abi, workspace, seccomp, offline },
                RulesetStatus::PartiallyEnforced => SandboxReport::Partial { abi, workspace, seccomp, offline },
                RulesetStatus::NotEnforced => SandboxReport::Unavailable {
                    reason: match status.landlock {
                        LandlockStatus::NotEnabled => {
                            "the kernel has Landlock but it is not enabled (boot with lsm=…,landlock)".to_owned()
                        }
                        LandlockStatus::NotImplemented => "the kernel is built without Landlock".to_owned(),
                        LandlockStatus::Available { .. } => {
                            "the kernel enforced none of the requested rights".to_owned()
                        }
                    },
                },
            }
        }
        Err(reason) => SandboxReport::Unavailable { reason },
    }
}

fn apply(policy: &SandboxPolicy) -> Result<landlock::RestrictionStatus, String> {
    if !policy.workspace.is_dir() {
        return Err(format!("the workspace {} is not a directory", policy.workspace.display()));
    }
    let all = AccessFs::from_all(REQUESTED_ABI);
    let read = AccessFs::from_read(REQUESTED_ABI);
    let mut writable = vec![policy.workspace.clone()];
    writable.extend(policy.writable.iter().cloned());
    Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)
        .and_then(|r| r.create())
        .and_then(|r| r.add_rules(path_beneath_rules(&policy.readable, read)))
        .and_then(|r| r.add_rules(path_beneath_rules(&writable, all)))
        .and_then(|r| r.restrict_self())
        .map_err(|e| format!("the ruleset could not be applied: {e}"))
}
