//! The kill test: a run whose agent appends one numbered line to a file per call (a
//! non-idempotent `shell` command) is SIGKILLed at random instants, during model calls,
//! tool calls and the boundaries between them, and resumed after each kill. At the end
//! the file holds every line exactly once, the run has completed, and every signal the
//! store acknowledged was applied exactly once.
//!
//! Against SQLite, the run is `troupe run`, resumed with `troupe runs resume` (or, where
//! a call was interrupted, decided with `troupe runs approve|reject`, which resume it).
//! Against PostgreSQL (when `TROUPE_TEST_DATABASE_URL` is set), two `troupe worker`
//! processes share the queue and the one holding the run's lease is killed each time.
//!
//! The person deciding an interrupted call looks at the file, as a person would, after
//! waiting for a command the killed process left running to end. The seed of the kill
//! schedule is printed; `TROUPE_KILL_SEED=N` replays one.

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tempfile::TempDir;
use troupe::runtime::Signal;
use troupe::runtime::durable::send_signal;
use troupe::store::{RunFilter, RunStatus, Store};
use troupe_testkit::{MockLlmServer, MockTurn, RecordedRequest};

const KILLS: usize = 20;
/// `troupe run` of the appending task.
const START: &[&str] =
    &["run", "-m", "anthropic/claude-sonnet-4-5", "--approve", "auto", "--max-iterations", "500", "Append the lines."];
const LINES_FILE: &str = "lines.txt";

/// A small deterministic generator (xorshift64*), so a failing schedule can be replayed.
struct Dice(u64);

impl Dice {
    fn seeded() -> Self {
        let seed = std::env::var("TROUPE_KILL_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(7, |d| d.as_nanos() as u64)
        });
        println!("kill schedule seed: {seed} (TROUPE_KILL_SEED={seed} replays it)");
        Dice(seed.max(1))
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n.max(1)
    }

    fn millis(&mut self, from: u64, to: u64) -> Duration {
        Duration::from_millis(from + self.below(to - from))
    }
}

/// The number of tool results an Anthropic request carries: the turn the model is at.
fn tool_results(request: &RecordedRequest) -> usize {
    let Some(messages) = request.body["messages"].as_array() else { return 0 };
    messages
        .iter()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|block| block["type"] == "tool_result")
        .count()
}

/// Turn `n` appends line `n + 1` until `calls` lines were asked for, then answers.
fn responder(calls: usize) -> impl Fn(&RecordedRequest) -> MockTurn + Send + Sync + 'static {
    move |request| {
        let n = tool_results(request);
        let turn = if n < calls {
            let line = n + 1;
            MockTurn::text(format!("Appending line {line}.")).with_tool_call(
                format!("toolu_{line:03}"),
                "shell",
                json!({"command": format!("sleep 0.03; echo {line} >> {LINES_FILE}; sleep 0.03")}),
            )
        } else {
            MockTurn::text("All lines are appended.")
        };
        turn.with_delta_chars(6).with_event_delay(Duration::from_millis(3))
    }
}

/// The model server, a workspace, the store and the processes' environment.
struct Scene {
    _runtime: tokio::runtime::Runtime,
    runtime: tokio::runtime::Handle,
    server: MockLlmServer,
    workspace: TempDir,
    cwd: TempDir,
    store_url: String,
    store: Arc<dyn Store>,
    dice: Dice,
    /// Signals the store acknowledged, by their text.
    acknowledged: Vec<String>,
    kills: usize,
    killed_while: Vec<String>,
}

impl Scene {
    fn new(calls: usize, store_url: Option<String>) -> Self {
        let runtime =
            tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a runtime");
        let server = runtime.block_on(MockLlmServer::start()).expect("the mock server starts");
        server.respond_with(responder(calls));
        let workspace = tempfile::tempdir().expect("a workspace");
        let store_url = store_url.unwrap_or_else(|| {
            let path: PathBuf = workspace.path().join(".troupe").join("kill.db");
            format!("sqlite://{}", path.display())
        });
        let store = runtime.block_on(troupe::store::open(&store_url)).expect("the store opens");
        let handle = runtime.handle().clone();
        Scene {
            _runtime: runtime,
            runtime: handle,
            server,
            workspace,
            cwd: tempfile::tempdir().expect("a working directory"),
            store_url,
            store,
            dice: Dice::seeded(),
            acknowledged: Vec::new(),
            kills: 0,
            killed_while: Vec::new(),
        }
    }

    fn workspace(&self) -> &Path {
        self.workspace.path()
    }

    /// `troupe ARGS` with the store, the workspace and the model's environment.
    fn command(&self, args: &[&str]) -> Command {
        let workspace = self.workspace().to_str().expect("a UTF-8 path");
        let mut command = Command::new(env!("CARGO_BIN_EXE_troupe"));
        command
            .args(args)
            .args(["--store", &self.store_url, "--workspace", workspace])
            .current_dir(self.cwd.path())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("ANTHROPIC_API_KEY", "sk-ant-fake")
            .env("ANTHROPIC_BASE_URL", self.server.url())
            .env("TROUPE_LOG", "info")
            .stdin(Stdio::null());
        command
    }

    /// Starts `troupe ARGS`, its output in a log file.
    fn spawn(&self, args: &[&str]) -> Child {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.cwd.path().join("troupe.log"))
            .expect("a log file");
        self.command(args)
            .stdout(Stdio::from(log.try_clone().expect("a log file")))
            .stderr(Stdio::from(log))
            .spawn()
            .expect("the binary starts")
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.cwd.path().join("troupe.log")).unwrap_or_default()
    }

    /// SIGKILLs `child` and collects it.
    fn kill(&mut self, child: &mut Child, run_id: Option<&str>) {
        let _ = child.kill();
        let _ = child.wait();
        self.kills += 1;
        let activity = run_id
            .and_then(|id| self.runtime.block_on(self.store.load_run(id)).ok().flatten())
            .and_then(|r| r.activity)
            .unwrap_or_else(|| "starting".to_owned());
        self.killed_while.push(activity);
    }

    fn lines(&self) -> Vec<String> {
        std::fs::read_to_string(self.workspace().join(LINES_FILE))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    fn only_run(&self) -> Option<String> {
        let runs = self.runtime.block_on(self.store.list_runs(&RunFilter::default())).expect("lists runs");
        assert!(runs.len() <= 1, "one run only: {runs:?}");
        runs.first().map(|r| r.id.clone())
    }

    fn state(&self, run_id: &str) -> (RunStatus, Value) {
        let record = self.runtime.block_on(self.store.load_run(run_id)).expect("loads").expect("the run is stored");
        (record.status, record.state)
    }

    /// Sends the next note, keeping it when the store acknowledges it.
    fn send_note(&mut self, run_id: &str) {
        let text = format!("note-{:02}-end", self.acknowledged.len() + 1);
        let signal = Signal::user_message(text.clone());
        if self.runtime.block_on(send_signal(self.store.as_ref(), run_id, &signal)).is_ok() {
            self.acknowledged.push(text);
        }
    }

    /// The interrupted call a paused run waits on, with the line it appends.
    fn uncertain_call(&self, state: &Value) -> Option<(String, String)> {
        let calls = state["pending_calls"].as_array()?;
        let call = calls
            .iter()
            .find(|c| c["uncertain"] == true && c.get("result").is_none() && c.get("decision").is_none())?;
        let command = call["arguments"]["command"].as_str()?;
        let line = command.split("echo ").nth(1)?.split(' ').next()?.to_owned();
        Some((call["call_id"].as_str()?.to_owned(), line))
    }

    /// Decides like a careful person: waits for a command the killed process may have
    /// left running, then skips the call if its line is in the file and retries it if not.
    fn decide(&self, line: &str) -> bool {
        std::thread::sleep(Duration::from_millis(300));
        !self.lines().iter().any(|l| l == line)
    }

    /// The end of the test: every line once, completed, every acknowledged note once.
    fn check_end(&self, run_id: &str, calls: usize) {
        let (status, state) = self.state(run_id);
        assert_eq!(status, RunStatus::Completed, "the run completes; log:\n{}", self.log());
        let expected: Vec<String> = (1..=calls).map(|n| n.to_string()).collect();
        assert_eq!(self.lines(), expected, "every completed call's line exactly once");
        let conversation = state["messages"].to_string();
        for note in &self.acknowledged {
            assert_eq!(conversation.matches(note.as_str()).count(), 1, "{note} applied exactly once");
        }
        let log = self.runtime.block_on(self.store.evidence(run_id, 0)).expect("evidence");
        troupe::store::verify_chain(&log).expect("the evidence chain is intact across every process");
        assert!(self.kills >= KILLS, "{} kills", self.kills);
        // The activity on record when the process died: `model call N` once the last tool
        // result was checkpointed (so: in or before a model call), `running shell` once the
        // model's call was (in or before the tool call).
        let in_model = self.killed_while.iter().filter(|a| a.starts_with("model call")).count();
        let in_tool = self.killed_while.iter().filter(|a| a.starts_with("running")).count();
        println!(
            "{} kills; {} notes acknowledged and applied once; killed while: {:?}",
            self.kills,
            self.acknowledged.len(),
            self.killed_while
        );
        let log = self.log();
        let tail: Vec<&str> = log.lines().rev().take(80).collect::<Vec<_>>().into_iter().rev().collect();
        assert!(
            in_model > 0 && in_tool > 0,
            "kills landed in model calls and in tool calls: {:?}\nlog tail:\n{}",
            self.killed_while,
            tail.join("\n")
        );
    }
}

fn wait_or_timeout(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let start = Instant::now();
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if start.elapsed() >= limit {
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn killed_at_random_the_run_completes_with_every_side_effect_once_sqlite() {
    const CALLS: usize = 50;
    let mut scene = Scene::new(CALLS, None);
    let mut run_id: Option<String> = None;
    let mut deciding = false;
    let started = Instant::now();
    let mut child = scene.spawn(START);
    loop {
        assert!(started.elapsed() < Duration::from_secs(240), "the test took too long; log:\n{}", scene.log());
        // A decision's process gets longer: its first step is to store the decision.
        let window = match (scene.kills < KILLS, deciding) {
            (false, _) => Duration::from_secs(60),
            (true, true) => scene.dice.millis(150, 700),
            (true, false) => scene.dice.millis(20, 400),
        };
        let exited = wait_or_timeout(&mut child, window);
        if exited.is_none() {
            scene.kill(&mut child, run_id.as_deref());
        }
        run_id = run_id.or_else(|| scene.only_run());
        let Some(id) = run_id.clone() else {
            // Killed before the run was recorded: start it again.
            child = scene.spawn(START);
            continue;
        };
        let (status, state) = scene.state(&id);
        if status == RunStatus::Completed {
            break;
        }
        assert!(!status.is_terminal(), "the run ended {status}; log:\n{}", scene.log());
        if scene.dice.below(3) == 0 {
            scene.send_note(&id);
        }
        let uncertain = scene.uncertain_call(&state).filter(|_| status == RunStatus::Paused);
        deciding = uncertain.is_some();
        child = match uncertain {
            Some((call, line)) => {
                let verb = if scene.decide(&line) { "approve" } else { "reject" };
                scene.spawn(&["runs", verb, &id, &call])
            }
            None => scene.spawn(&["runs", "resume", &id]),
        };
    }
    let id = run_id.expect("the run was recorded");
    scene.check_end(&id, CALLS);
}

/// A worker's pid, from its owner name (`worker:host:pid:random`).
fn owner_pid(owner: &str) -> Option<u32> {
    owner.rsplit(':').nth(1)?.parse().ok()
}

#[test]
fn killed_at_random_the_run_completes_with_every_side_effect_once_postgres_workers() {
    let Ok(base) = std::env::var("TROUPE_TEST_DATABASE_URL") else {
        troupe_testkit::skip("the PostgreSQL kill test", "TROUPE_TEST_DATABASE_URL is not set");
        return;
    };
    const CALLS: usize = 60;
    let schema = format!("troupe_kill_{}", std::process::id());
    let setup = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    let admin = setup
        .block_on(troupe::store::postgres::PostgresStore::connect_in_schema(&base, &schema))
        .expect("a fresh schema");
    let separator = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{separator}options=-csearch_path%3D{schema}");
    let mut scene = Scene::new(CALLS, Some(url));

    let detach = scene.command(&[&["run", "--detach"], &START[1..]].concat()).output().expect("the binary runs");
    assert!(detach.status.success(), "{}", String::from_utf8_lossy(&detach.stderr));
    let id = String::from_utf8_lossy(&detach.stdout).trim().to_owned();
    assert_eq!(scene.only_run().as_deref(), Some(id.as_str()));

    let worker = |scene: &Scene| scene.spawn(&["worker", "--lease-ttl", "0.5", "--poll-ms", "50"]);
    let mut workers = vec![worker(&scene), worker(&scene)];
    let mut deadline: Option<(u32, Instant)> = None;
    let started = Instant::now();
    loop {
        assert!(started.elapsed() < Duration::from_secs(240), "the test took too long; log:\n{}", scene.log());
        std::thread::sleep(scene.dice.millis(20, 120));
        let (status, state) = scene.state(&id);
        if status == RunStatus::Completed {
            break;
        }
        assert!(!status.is_terminal(), "the run ended {status}; log:\n{}", scene.log());
        if scene.dice.below(3) == 0 {
            scene.send_note(&id);
        }
        if let (RunStatus::Paused, Some((call, line))) = (status, scene.uncertain_call(&state)) {
            let decision = if scene.decide(&line) {
                troupe::runtime::ApprovalDecision::Approve
            } else {
                troupe::runtime::ApprovalDecision::Reject { reason: Some(format!("line {line} is in the file")) }
            };
            let signal = Signal::approval(call.as_str(), decision);
            scene.runtime.block_on(send_signal(scene.store.as_ref(), &id, &signal)).expect("the decision is stored");
            continue;
        }
        if scene.kills >= KILLS {
            continue;
        }
        let queue = scene.runtime.block_on(scene.store.queue()).expect("the queue");
        let holder = queue.iter().find(|e| e.run_id == id).and_then(|e| e.owner.as_deref()).and_then(owner_pid);
        let Some(index) = holder.and_then(|pid| workers.iter().position(|w| w.id() == pid)) else { continue };
        // Each holder gets its own random time to work from when it is first seen holding
        // the run, so kills land at every stage of a run, not just after a takeover.
        let pid = workers[index].id();
        let (seen, at) = *deadline.get_or_insert((pid, Instant::now() + scene.dice.millis(0, 600)));
        if seen != pid {
            deadline = Some((pid, Instant::now() + scene.dice.millis(0, 600)));
            continue;
        }
        if Instant::now() < at {
            continue;
        }
        let mut holder = workers.swap_remove(index);
        scene.kill(&mut holder, Some(&id));
        deadline = None;
        workers.push(worker(&scene));
    }
    for mut worker in workers {
        let _ = Command::new("kill").args(["-TERM", &worker.id().to_string()]).status();
        if wait_or_timeout(&mut worker, Duration::from_secs(10)).is_none() {
            let _ = worker.kill();
            let _ = worker.wait();
        }
    }
    scene.check_end(&id, CALLS);
    setup.block_on(async {
        let statement = format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE");
        // The schema name is the test's own (`troupe_kill_<pid>`), not input.
        sqlx::query(sqlx::AssertSqlSafe(statement)).execute(admin.pool()).await.expect("the test schema is dropped");
        admin.pool().close().await;
    });
}
