//! [`confine_calls`]: the system-call filter of confined commands, for a process of
//! troupe's own that hosts an agent (a worker process), which needs the network for its
//! model and confines its files by itself.

use crate::SandboxError;

/// Denies the calling thread, and every thread and program it starts from then on, the
/// system calls every confined command is denied (`ptrace`, `process_vm_*`, the kernel
/// keyring, mounts, namespaces, module loading, `kexec`, `bpf`, `perf_event_open`,
/// `userfaultfd`, swap, `reboot`, `io_uring`), and `socket` too unless `network`; and ends
/// core dumps for the whole process. Call it before any other thread starts (an async
/// runtime's): seccomp binds a thread and its descendants only.
///
/// On systems other than Linux nothing is installed:
/// [`SandboxError::CallFilter`].
pub fn confine_calls(network: bool) -> Result<(), SandboxError> {
    #[cfg(target_os = "linux")]
    {
        crate::linux::install_call_filter(network).map_err(SandboxError::CallFilter)?;
        crate::linux::no_core_dumps().map_err(SandboxError::CallFilter)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = network;
        Err(SandboxError::CallFilter("system-call filters need Linux (seccomp)".to_owned()))
    }
}
