//! Figures about this process read from `/proc` (Linux), for benchmarks: CPU time,
//! resident memory and its peak, the open-files limit. Reading `/proc` rather than
//! calling `getrusage` keeps the workspace free of `unsafe`. Each reader answers `None`
//! (or `false`) where `/proc` lacks the figure, so a benchmark can print "unknown".

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// Linux reports `utime`/`stime` in `USER_HZ` ticks, which the ABI fixes at 100 per second.
pub const TICK_MICROS: f64 = 10_000.0;

/// The process's CPU time so far (user + system, all threads, live or exited), in ticks
/// of [`TICK_MICROS`].
pub fn process_cpu_ticks() -> Option<u64> {
    stat_cpu_ticks("/proc/self/stat")
}

/// [`process_cpu_ticks`] of process `pid` (a child's, say).
pub fn cpu_ticks_of(pid: u32) -> Option<u64> {
    stat_cpu_ticks(&format!("/proc/{pid}/stat"))
}

fn stat_cpu_ticks(path: &str) -> Option<u64> {
    let stat = std::fs::read_to_string(path).ok()?;
    // The command name (field 2) may hold spaces and parentheses: fields are counted from
    // after its closing parenthesis, where field 3 (`state`) comes first.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
    Some(field(14)? + field(15)?)
}

/// The calling thread's time on a CPU, in nanoseconds (`/proc/thread-self/schedstat`),
/// where the kernel keeps schedstats.
pub fn thread_cpu_nanos() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// A `kB` line of `/proc/self/status` (`VmRSS`, `VmHWM`), in bytes.
pub fn status_bytes(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.strip_prefix(field).is_some_and(|r| r.starts_with(':')))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Resets `VmHWM` to the current RSS (`5` to `/proc/self/clear_refs`, Linux ≥ 4.0), so
/// that a later peak is the peak of what came after. False when the kernel refused.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// The soft limit on open files (`ulimit -n`); `None` when unlimited or unknown.
pub fn open_files_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// Samples `VmRSS` on its own thread, keeping the highest: the peak where
/// [`reset_peak_rss`] is refused, and a cross-check of `VmHWM` where it is not.
#[derive(Debug)]
pub struct RssSampler {
    stop: Arc<AtomicBool>,
    max: Arc<AtomicU64>,
    thread: std::thread::JoinHandle<()>,
}

impl RssSampler {
    /// Starts sampling every `interval`.
    pub fn start(interval: Duration) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let max = Arc::new(AtomicU64::new(0));
        let (s, m) = (Arc::clone(&stop), Arc::clone(&max));
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                if let Some(rss) = status_bytes("VmRSS") {
                    m.fetch_max(rss, Ordering::Relaxed);
                }
                std::thread::sleep(interval);
            }
        });
        RssSampler { stop, max, thread }
    }

    /// Stops sampling; the highest `VmRSS` seen, in bytes (0 if none could be read).
    pub fn finish(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
        self.max.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_of_a_live_process_are_plausible() {
        if !std::path::Path::new("/proc/self/status").exists() {
            crate::skip("figures_of_a_live_process_are_plausible", "no /proc");
            return;
        }
        let rss = status_bytes("VmRSS").expect("a live process has a VmRSS");
        assert!(rss > 0);
        assert!(status_bytes("VmHWM").expect("and a VmHWM") >= rss / 2);
        assert_eq!(status_bytes("NoSuchField"), None);
        let before = process_cpu_ticks().expect("the CPU time is readable");
        // Spinning shows in `utime` within a tick or two, however loaded the machine.
        let spin = std::time::Instant::now();
        while process_cpu_ticks().expect("still readable") == before {
            assert!(spin.elapsed() < Duration::from_secs(10), "10 s of spinning did not show in utime");
            std::hint::black_box(spin.elapsed());
        }
        let sampler = RssSampler::start(Duration::from_millis(1));
        std::thread::sleep(Duration::from_millis(10));
        assert!(sampler.finish() > 0);
    }
}
