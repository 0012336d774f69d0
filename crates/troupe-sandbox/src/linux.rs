//! Confinement on Linux: Landlock's file rules and scopes, a seccomp filter, and resource
//! limits, applied to the calling thread before it starts the program.

use crate::{
    PROCESSES_PER_COMMAND, READABLE_DEVICES, Sandbox, SandboxError, SandboxMode, SandboxReport, WRITABLE_DEVICES,
};
use landlock::{
    ABI, Access, AccessFs, CompatLevel, Compatible, LandlockStatus, Ruleset, RulesetAttr, RulesetCreatedAttr,
    RulesetStatus, Scope, path_beneath_rules,
};
use nix::sys::resource::{Resource, getrlimit, setrlimit};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule, TargetArch,
};
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The newest Landlock ABI whose rights are asked for; an older kernel enforces what it
/// has, which the report says.
const REQUESTED_ABI: ABI = ABI::V6;

/// System calls a confined program may not make (each fails with `EPERM`): reading or
/// writing another process's memory, the kernel's keyring, mounts and namespaces, loading
/// kernel code, `io_uring` (whose operations would pass this filter by).
const DENIED_SYSCALLS: &[libc::c_long] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
];

/// Resource limits are the process's, not the thread's: they are lowered around each
/// start (the program keeps them) and put back, one start at a time.
static LIMITS: Mutex<()> = Mutex::new(());

/// What one confined start applies.
pub(crate) struct Plan {
    mode: SandboxMode,
    network: bool,
    read: Vec<PathBuf>,
    write: Vec<PathBuf>,
}

impl Plan {
    pub(crate) fn new(sandbox: &Sandbox, workspace: &Path, temp: &Path) -> Self {
        let mut write = sandbox.write_paths(workspace);
        write.push(temp.to_path_buf());
        let mut read = sandbox.read_paths(workspace);
        read.extend(write.iter().cloned());
        Plan { mode: sandbox.mode(), network: sandbox.network(), read, write }
    }

    /// Confines this thread, then starts `command` from it.
    pub(crate) fn confine_and_spawn(
        self,
        mut command: tokio::process::Command,
        program: &str,
    ) -> Result<(tokio::process::Child, SandboxReport), SandboxError> {
        let unavailable = |reason: String| SandboxError::Unavailable { mode: self.mode, reason };
        let (landlock_abi, fully_enforced) = self.landlock().map_err(unavailable)?;
        self.seccomp().map_err(unavailable)?;
        let report = SandboxReport {
            mode: self.mode,
            landlock_abi: Some(landlock_abi),
            fully_enforced,
            seccomp: true,
            network: self.network,
        };
        let child = with_limits(|| command.spawn())
            .map_err(|source| SandboxError::Spawn { program: program.to_owned(), source })?;
        Ok((child, report))
    }

    /// Applies the file rules and scopes: the ABI that enforced them, and whether fully.
    fn landlock(&self) -> Result<(i32, bool), String> {
        let all = AccessFs::from_all(REQUESTED_ABI);
        let read = AccessFs::from_read(REQUESTED_ABI);
        let existing = |devices: &[&'static str]| -> Vec<&'static str> {
            devices.iter().copied().filter(|d| Path::new(d).exists()).collect()
        };
        let (devices, readable_devices) = (existing(WRITABLE_DEVICES), existing(READABLE_DEVICES));
        let read_file = AccessFs::from_read(REQUESTED_ABI) & AccessFs::from_file(REQUESTED_ABI);
        let status = Ruleset::default()
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(all)
            .and_then(|r| r.scope(Scope::from_all(REQUESTED_ABI)))
            .and_then(|r| r.create())
            .and_then(|r| r.add_rules(path_beneath_rules(&self.read, read)))
            .and_then(|r| r.add_rules(path_beneath_rules(&self.write, all)))
            .and_then(|r| r.add_rules(path_beneath_rules(&devices, AccessFs::from_file(REQUESTED_ABI))))
            .and_then(|r| r.add_rules(path_beneath_rules(&readable_devices, read_file)))
            .and_then(|r| r.restrict_self())
            .map_err(|e| format!("Landlock refused the rules: {e}"))?;
        let abi = match status.landlock {
            LandlockStatus::Available { effective_abi, .. } => effective_abi as i32,
            LandlockStatus::NotEnabled => {
                return Err("the kernel has Landlock but it is not enabled (boot with lsm=…,landlock)".to_owned());
            }
            LandlockStatus::NotImplemented => return Err("the kernel is built without Landlock".to_owned()),
        };
        match status.ruleset {
            RulesetStatus::FullyEnforced => Ok((abi, true)),
            RulesetStatus::PartiallyEnforced => Ok((abi, false)),
            RulesetStatus::NotEnforced => Err("the kernel enforced none of the Landlock rules".to_owned()),
        }
    }

    /// Installs the seccomp filter on this thread.
    fn seccomp(&self) -> Result<(), String> {
        install_call_filter(self.network)
    }
}

/// Installs the seccomp filter on the calling thread (and what it starts): the
/// [`DENIED_SYSCALLS`] fail with `EPERM`, as do the `ioctl`s that type into a terminal, a
/// `clone` that makes a namespace, and `socket` too without `network`; `clone3` fails with
/// `ENOSYS`.
pub(crate) fn install_call_filter(network: bool) -> Result<(), String> {
    let arch = TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|_| format!("seccomp filters are not built for {}", std::env::consts::ARCH))?;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = DENIED_SYSCALLS.iter().map(|&call| (call, Vec::new())).collect();
    // Nothing typed into a terminal: `TIOCSTI` pushes characters into a terminal's input
    // (the user's shell, or troupe's own approval prompt, would read them as typed), and
    // `TIOCLINUX` pastes the console's selection. A program inherits the terminal it was
    // started from even without opening one.
    let typed_in = [libc::TIOCSTI, libc::TIOCLINUX]
        .into_iter()
        .map(|request| {
            // An ioctl's request is `c_ulong` on glibc and `c_int` on musl.
            #[allow(clippy::unnecessary_cast)]
            let request = request as u64;
            let condition = SeccompCondition::new(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, request)?;
            SeccompRule::new(vec![condition])
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("the seccomp filter could not be built: {e}"))?;
    rules.insert(libc::SYS_ioctl, typed_in);
    // No namespace by `clone` either (`unshare` and `setns` are denied above): a process
    // made with any `CLONE_NEW*` flag is refused.
    let new_namespace = NAMESPACE_FLAGS
        .iter()
        .map(|&flag| {
            let flag = flag as u64;
            SeccompRule::new(vec![SeccompCondition::new(
                0,
                SeccompCmpArgLen::Qword,
                SeccompCmpOp::MaskedEq(flag),
                flag,
            )?])
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("the seccomp filter could not be built: {e}"))?;
    rules.insert(libc::SYS_clone, new_namespace);
    if !network {
        // No socket of any family: nothing reaches the network, nor a daemon's socket
        // by path (a pair of connected sockets, `socketpair`, still works).
        rules.insert(libc::SYS_socket, Vec::new());
    }
    let filter = SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(libc::EPERM as u32), arch)
        .map_err(|e| format!("the seccomp filter could not be built: {e}"))?;
    let program: BpfProgram =
        filter.try_into().map_err(|e| format!("the seccomp filter could not be compiled: {e}"))?;
    seccompiler::apply_filter(&program).map_err(|e| format!("the kernel refused the seccomp filter: {e}"))?;
    // `clone3` passes its flags in memory, where a filter cannot read them: it fails as if
    // the kernel lacked it (`ENOSYS`), and the C library falls back to `clone`, filtered
    // above. (`EPERM` would fail every thread a program starts.)
    let no_clone3 = SeccompFilter::new(
        BTreeMap::from([(libc::SYS_clone3, Vec::new())]),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    )
    .map_err(|e| format!("the seccomp filter could not be built: {e}"))?;
    let program: BpfProgram =
        no_clone3.try_into().map_err(|e| format!("the seccomp filter could not be compiled: {e}"))?;
    seccompiler::apply_filter(&program).map_err(|e| format!("the kernel refused the seccomp filter: {e}"))
}

/// The `clone` flags that make a namespace.
const NAMESPACE_FLAGS: [libc::c_int; 7] = [
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWNS,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWCGROUP,
];

/// Ends core dumps for this process (a dump would hold what it read).
pub(crate) fn no_core_dumps() -> Result<(), String> {
    let (_, hard) = getrlimit(Resource::RLIMIT_CORE).map_err(|e| format!("cannot read the core-dump limit: {e}"))?;
    setrlimit(Resource::RLIMIT_CORE, 0, hard).map_err(|e| format!("cannot end core dumps: {e}"))
}

/// Runs `start` with the process's limits lowered for the program it starts: no core
/// dumps (a dump would hold what the program read), and at most
/// [`PROCESSES_PER_COMMAND`] processes beyond those its user runs now. (Linux applies no
/// process limit to root.)
fn with_limits<T>(start: impl FnOnce() -> std::io::Result<T>) -> std::io::Result<T> {
    let _one_at_a_time = LIMITS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let saved = [Resource::RLIMIT_NPROC, Resource::RLIMIT_CORE].map(|resource| (resource, getrlimit(resource)));
    let processes = tasks_of_this_user().saturating_add(PROCESSES_PER_COMMAND);
    for (resource, limits) in &saved {
        if let Ok((soft, hard)) = limits {
            let lowered = if *resource == Resource::RLIMIT_CORE { 0 } else { processes.min(*soft) };
            setrlimit(*resource, lowered, *hard).map_err(std::io::Error::from)?;
        }
    }
    let started = start();
    for (resource, limits) in saved {
        if let Ok((soft, hard)) = limits {
            let _ = setrlimit(resource, soft, hard);
        }
    }
    started
}

/// The processes and threads this user runs (what `RLIMIT_NPROC` counts).
fn tasks_of_this_user() -> u64 {
    let uid = nix::unistd::getuid().as_raw();
    let Ok(entries) = std::fs::read_dir("/proc") else { return 0 };
    entries
        .flatten()
        .filter(|entry| entry.file_name().to_str().is_some_and(|name| name.bytes().all(|b| b.is_ascii_digit())))
        .filter(|entry| entry.metadata().is_ok_and(|meta| meta.uid() == uid))
        .map(|entry| std::fs::read_dir(entry.path().join("task")).map_or(1, |tasks| tasks.count() as u64))
        .sum()
}
