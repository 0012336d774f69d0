//! Peak resident memory of a process, as Linux reports it (`VmHWM` in `/proc/<pid>/status`).

/// The peak resident set size of process `pid`, in KiB; `None` where the system does not
/// say (another OS, a process gone or already a zombie).
pub fn peak_rss_kib(pid: u32) -> Option<u64> {
    read_vm_hwm(&format!("/proc/{pid}/status"))
}

/// The peak resident set size of this process, in KiB.
pub fn own_peak_rss_kib() -> Option<u64> {
    read_vm_hwm("/proc/self/status")
}

fn read_vm_hwm(path: &str) -> Option<u64> {
    let status = std::fs::read_to_string(path).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.trim_start_matches("VmHWM:").trim().trim_end_matches("kB").trim().parse().ok()
}
