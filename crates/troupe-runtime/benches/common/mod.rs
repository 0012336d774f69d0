//! Shared by the runtime benchmarks: CPU and memory figures read from `/proc` (the
//! workspace forbids `unsafe`, so no `getrusage`), the lookup tool the scripted model
//! calls, and the mock server run in a child process so that its CPU and memory stay out
//! of the parent's figures.

// Each benchmark uses a part of this module.
#![allow(dead_code)]

use schemars::JsonSchema;
use serde::Deserialize;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use troupe_testkit::{MockLlmServer, MockTurn, RecordedRequest};
use troupe_tools::{Effect, Tool, ToolOutput, typed_tool};

/// Linux reports `utime`/`stime` in `USER_HZ` ticks, which the ABI fixes at 100 per second.
pub const TICK_MICROS: f64 = 10_000.0;

/// The process's CPU time so far (user + system, all threads, live or exited), in ticks.
pub fn process_cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat is readable");
    // The command name (field 2) may hold spaces and parentheses: fields are counted from
    // after its closing parenthesis, where field 3 (`state`) comes first.
    let rest = &stat[stat.rfind(')').expect("/proc/self/stat has a command name") + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| fields[n - 3].parse::<u64>().expect("utime and stime are integers");
    field(14) + field(15)
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
/// that a later peak is the peak of what came after.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// The soft limit on open files (`ulimit -n`).
pub fn open_files_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// How many `tool_result` blocks an Anthropic request carries: the turn the scripted
/// model is at.
pub fn tool_results(request: &RecordedRequest) -> usize {
    let Some(messages) = request.body["messages"].as_array() else { return 0 };
    messages
        .iter()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|block| block["type"] == "tool_result")
        .count()
}

/// Arguments of `lookup`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Lookup {
    /// The key to look up.
    key: String,
}

/// A cheap read-only tool: answers a fixed value for any key, so a tool call costs the
/// runtime's machinery and nothing else.
pub fn lookup_tool() -> Arc<dyn Tool> {
    typed_tool("lookup", "Looks up the value of a key.", Effect::ReadOnly, |_ctx, args: Lookup| async move {
        Ok(ToolOutput::text(format!("{} = 42", args.key)))
    })
    .into_arc()
}

const CHILD_ENV: &str = "TROUPE_BENCH_MOCK_SERVER";

/// In the child process this benchmark spawns (see [`ChildServer`]): serves `responder`
/// on a [`MockLlmServer`], prints its URL, and exits once the parent closes stdin.
/// Returns at once in the parent.
pub fn serve_if_child(responder: fn(&RecordedRequest) -> MockTurn) {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a Tokio runtime");
    let server = runtime.block_on(MockLlmServer::start()).expect("the mock server starts");
    server.respond_with(responder);
    let mut stdout = std::io::stdout();
    writeln!(stdout, "{}", server.url()).and_then(|()| stdout.flush()).expect("the parent reads the URL");
    // The runtime's workers serve while this thread waits for the parent to go away.
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    drop(server);
    std::process::exit(0);
}

/// The mock server running in a child process (this same benchmark binary, see
/// [`serve_if_child`]): its CPU time and memory are not the parent's.
pub struct ChildServer {
    child: Child,
    /// The server's base URL.
    pub url: String,
}

impl ChildServer {
    /// Starts the child and waits for its URL.
    pub fn start() -> Self {
        let exe = std::env::current_exe().expect("the benchmark knows its own path");
        let mut child = Command::new(exe)
            .env(CHILD_ENV, "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the mock server child starts");
        let stdout = child.stdout.take().expect("the child's stdout is piped");
        let mut url = String::new();
        BufReader::new(stdout).read_line(&mut url).expect("the child prints its URL");
        let url = url.trim().to_owned();
        assert!(url.starts_with("http://"), "the mock server child printed {url:?}");
        ChildServer { child, url }
    }
}

impl Drop for ChildServer {
    fn drop(&mut self) {
        // Closing its stdin ends the child; kill it in case it is stuck.
        drop(self.child.stdin.take());
        if !matches!(self.child.try_wait(), Ok(Some(_))) {
            std::thread::sleep(std::time::Duration::from_millis(100));
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}
