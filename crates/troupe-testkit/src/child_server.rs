//! A [`MockLlmServer`] in a child process, for benchmarks: the benchmark binary
//! re-executed, so that the server's CPU time and memory (its connections, its log of
//! every request) stay out of the figures of the process being measured. It still
//! shares the machine's cores.
//!
//! The binary calls [`serve_if_child`] first thing in `main`; in the parent that returns
//! at once, and [`ChildMockServer::start`] later spawns the child.

use crate::script::MockTurn;
use crate::server::{MockLlmServer, RecordedRequest};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};

/// Set in the child's environment: it is the server, not the benchmark.
const CHILD_ENV: &str = "TROUPE_BENCH_MOCK_SERVER";

/// In the child process [`ChildMockServer::start`] spawns: serves `responder` on a
/// [`MockLlmServer`] (multi-thread runtime) that keeps no log of the requests, prints its
/// URL on stdout, and exits once the parent closes stdin. Returns at once in any other
/// process.
pub fn serve_if_child(responder: fn(&RecordedRequest) -> MockTurn) {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let code = match serve(responder) {
        Ok(()) => 0,
        Err(error) => {
            eprintln!("mock server child: {error}");
            1
        }
    };
    std::process::exit(code);
}

fn serve(responder: fn(&RecordedRequest) -> MockTurn) -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let server = runtime.block_on(MockLlmServer::start())?;
    // Kept, every request of a benchmark's passes would grow the server by gigabytes.
    server.respond_with(responder).keep_no_requests();
    let mut stdout = std::io::stdout();
    writeln!(stdout, "{}", server.url())?;
    stdout.flush()?;
    // The runtime's workers serve while this thread waits for the parent to go away; an
    // error reading stdin means the same.
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    drop(server);
    Ok(())
}

/// The mock server running in a child process (this same binary, see
/// [`serve_if_child`]). Dropping it ends the child.
#[derive(Debug)]
pub struct ChildMockServer {
    child: Child,
    url: String,
}

impl ChildMockServer {
    /// Starts the child and waits for its URL.
    pub fn start() -> std::io::Result<Self> {
        let exe = std::env::current_exe()?;
        let mut child = Command::new(exe)
            .env(CHILD_ENV, "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let mut url = String::new();
        if let Some(stdout) = child.stdout.take() {
            BufReader::new(stdout).read_line(&mut url)?;
        }
        let url = url.trim().to_owned();
        let server = ChildMockServer { child, url };
        if !server.url.starts_with("http://") {
            // Dropping `server` ends the child.
            return Err(std::io::Error::other(format!("the mock server child printed {:?}, not its URL", server.url)));
        }
        Ok(server)
    }

    /// `http://127.0.0.1:PORT`: the base URL for Anthropic and Gemini clients.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The server's CPU time so far, in ticks of [`TICK_MICROS`](crate::process::TICK_MICROS):
    /// what serving a pass cost it, read around the pass. `None` where `/proc` lacks it.
    pub fn cpu_ticks(&self) -> Option<u64> {
        crate::process::cpu_ticks_of(self.child.id())
    }
}

impl Drop for ChildMockServer {
    fn drop(&mut self) {
        // Closing its stdin ends the child; kill it in case it is stuck.
        drop(self.child.stdin.take());
        for _ in 0..50 {
            if !matches!(self.child.try_wait(), Ok(None)) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}
