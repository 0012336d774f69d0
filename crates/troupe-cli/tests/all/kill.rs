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
//! The same for a team: `troupe team run` of a leader that appends lines, delegates to a
//! local member and to a member in a worker process that append their own, and appends
//! more; its coordinator (and with it the worker, which dies with it) is killed at
//! random (20 times on SQLite, 10 on PostgreSQL) and the team resumed with `troupe runs
//! resume TEAM_RUN`, interrupted calls decided with `troupe runs approve|reject TEAM_RUN
//! CALL`. At the end every line is in the file once and in order, the tree holds one run
//! per agent (no member's run started twice), and every run's evidence verifies.
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
use troupe::durable::send_signal;
use troupe::runtime::Signal;
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
    /// The agent of the run written last at each kill.
    killed_in: Vec<String>,
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
            killed_in: Vec::new(),
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
        let record = run_id.and_then(|id| self.runtime.block_on(self.store.load_run(id)).ok().flatten());
        self.killed_in.push(record.as_ref().map(|r| r.agent.clone()).unwrap_or_default());
        let activity = record.and_then(|r| r.activity).unwrap_or_else(|| "starting".to_owned());
        self.killed_while.push(activity);
    }

    /// Whether to kill again: `KILLS` times, and on (up to twice that) until kills have
    /// landed both in a model call and in a tool call. A busy machine (the whole suite on
    /// two cores) spends more of each window starting a process, so the first `KILLS` can
    /// all miss the model calls; the test keeps killing rather than stop short of them.
    fn wants_kills(&self) -> bool {
        let landed = |what: &str| self.killed_while.iter().any(|a| a.starts_with(what));
        self.kills < KILLS || (self.kills < 2 * KILLS && !(landed("model call") && landed("running")))
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

/// The least a line takes: its command's two sleeps and the model's streamed turn.
const LINE_MS: u64 = 120;

/// The longest a process is given before its kill, in `from..=to` ms: `to`, or less when
/// the lines left run short of the kills still wanted. Without this a fast machine can
/// finish the run before the kills have landed; with it the windows shrink as the work
/// does, whatever the machine's speed.
fn paced(from: u64, to: u64, lines_left: usize, kills_left: usize) -> u64 {
    if kills_left == 0 {
        return to;
    }
    let per_kill = LINE_MS * lines_left as u64 / kills_left as u64;
    (from + per_kill).clamp(from + 50, to.max(from + 50))
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
        let upper = paced(20, 400, CALLS.saturating_sub(scene.lines().len()), KILLS.saturating_sub(scene.kills));
        let window = match (scene.wants_kills(), deciding) {
            (false, _) => Duration::from_secs(60),
            (true, true) => scene.dice.millis(150, upper + 300),
            (true, false) => scene.dice.millis(20, upper),
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
            match scene.runtime.block_on(send_signal(scene.store.as_ref(), &id, &signal)) {
                Ok(_) => {}
                // An earlier decision was applied meanwhile and the run went on to its end:
                // the next look sees it completed.
                Err(troupe::runtime::RuntimeError::RunFinished) => {}
                Err(troupe::runtime::RuntimeError::Store(troupe::store::StoreError::RunEnded { .. })) => {}
                Err(error) => panic!("the decision is stored: {error:?}"),
            }
            continue;
        }
        if !scene.wants_kills() {
            continue;
        }
        let queue = scene.runtime.block_on(scene.store.queue()).expect("the queue");
        let holder = queue.iter().find(|e| e.run_id == id).and_then(|e| e.owner.as_deref()).and_then(owner_pid);
        let Some(index) = holder.and_then(|pid| workers.iter().position(|w| w.id() == pid)) else { continue };
        // Each holder gets its own random time to work from when it is first seen holding
        // the run, so kills land at every stage of a run, not just after a takeover.
        let pid = workers[index].id();
        let upper = paced(0, 600, CALLS.saturating_sub(scene.lines().len()), KILLS.saturating_sub(scene.kills));
        let (seen, at) = *deadline.get_or_insert((pid, Instant::now() + scene.dice.millis(0, upper)));
        if seen != pid {
            deadline = Some((pid, Instant::now() + scene.dice.millis(0, upper)));
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

/// Lines the team's leader appends before it delegates, and after.
const LEAD_LINES: usize = 5;
/// Lines the leader's local teammate appends.
const CODER_LINES: usize = 30;
/// Lines the leader's teammate in a worker process appends.
const SCRIBE_LINES: usize = 10;
/// Every line the team appends.
const TEAM_LINES: usize = 2 * LEAD_LINES + CODER_LINES + SCRIBE_LINES;
/// The scribe's brief, by which its requests are told from the coder's.
const SCRIBE_BRIEF: &str = "Append the scribe's lines.";

/// The team's model: the leader (offered `delegate`) appends `lead-1..5`, delegates to
/// `scribe`, then to `coder`, appends `lead-6..10` and answers; the scribe (in its
/// worker) appends `scribe-1..10`, the coder `coder-1..30`, and each answers.
fn team_responder() -> impl Fn(&RecordedRequest) -> MockTurn + Send + Sync + 'static {
    move |request| {
        let n = tool_results(request);
        let leader =
            request.body["tools"].as_array().is_some_and(|tools| tools.iter().any(|t| t["name"] == "delegate"));
        let scribe = !leader && request.body["messages"].to_string().contains(SCRIBE_BRIEF);
        let append = |who: &str, line: usize| {
            MockTurn::text(format!("Appending {who}-{line}.")).with_tool_call(
                format!("toolu_{who}_{line:03}"),
                "shell",
                json!({"command": format!("sleep 0.03; echo {who}-{line} >> {LINES_FILE}; sleep 0.03")}),
            )
        };
        let turn = match (leader, scribe, n) {
            (true, _, n) if n < LEAD_LINES => append("lead", n + 1),
            (true, _, n) if n == LEAD_LINES => MockTurn::text("Handing over.").with_tool_call(
                "toolu_lead_delegate_scribe",
                "delegate",
                json!({"to": "scribe", "brief": SCRIBE_BRIEF}),
            ),
            (true, _, n) if n == LEAD_LINES + 1 => MockTurn::text("Now the coder.").with_tool_call(
                "toolu_lead_delegate",
                "delegate",
                json!({"to": "coder", "brief": "Append your lines."}),
            ),
            (true, _, n) if n <= 2 * LEAD_LINES + 1 => append("lead", n - 1),
            (true, _, _) => MockTurn::text("The ledger is complete."),
            (false, false, n) if n < CODER_LINES => append("coder", n + 1),
            (false, true, n) if n < SCRIBE_LINES => append("scribe", n + 1),
            (false, _, _) => MockTurn::text("My lines are appended."),
        };
        turn.with_delta_chars(6).with_event_delay(Duration::from_millis(3))
    }
}

/// `troupe team run` of the ledger team.
const TEAM_START: &[&str] = &["team", "run", "team.toml", "--approve", "auto", "Keep the ledger."];

impl Scene {
    /// The scene of a team: its files in the working directory, the team's model.
    fn team(store_url: Option<String>) -> Self {
        let scene = Scene::new(0, store_url);
        scene.server.respond_with(team_responder());
        let dir = scene.cwd.path();
        let team = "[team]\nname = \"ledger\"\nstrategy = \"delegate\"\nleader = \"lead\"\n\n\
                    [[team.members]]\nagent = \"coder\"\n\n\
                    [[team.members]]\nagent = \"scribe\"\nisolation = \"process\"\n";
        std::fs::write(dir.join("team.toml"), team).expect("writes the team file");
        std::fs::create_dir_all(dir.join("agents")).expect("creates agents/");
        for id in ["lead", "coder", "scribe"] {
            let agent = format!(
                "[agent]\nid = \"{id}\"\nname = \"{id}\"\ndescription = \"Appends lines.\"\n\n\
                 [provider]\nmodel = \"anthropic/claude-sonnet-4-5\"\n\n\
                 [[tools]]\nname = \"shell\"\n"
            );
            std::fs::write(dir.join(format!("agents/{id}.toml")), agent).expect("writes an agent file");
        }
        scene
    }

    /// Every run in the store.
    fn runs(&self) -> Vec<troupe::store::RunSummary> {
        self.runtime.block_on(self.store.list_runs(&RunFilter::default())).expect("lists runs")
    }

    /// The member run most recently written, where a kill lands.
    fn busiest_member(&self) -> Option<String> {
        let runs = self.runs();
        runs.into_iter().filter(|r| r.agent != "ledger").max_by_key(|r| r.updated_at).map(|r| r.id)
    }

    /// The interrupted call some paused run of the team waits on: the run, the call and
    /// its line.
    fn uncertain_in_team(&self) -> Option<(String, String, String)> {
        self.runs().iter().filter(|r| r.status == RunStatus::Paused && r.agent != "ledger").find_map(|r| {
            let (_, state) = self.state(&r.id);
            self.uncertain_call(&state).map(|(call, line)| (r.id.clone(), call, line))
        })
    }
}

/// Kills the coordinator of a team run `kills` times at random instants and resumes the
/// team each time; at the end the team has completed, every line is in the file exactly
/// once and in order, no member's run was started twice, and every run's evidence holds.
///
/// `window` is the range of milliseconds a process is given before it is killed (a
/// process on PostgreSQL takes longer to connect). Only kills that land once the team's
/// run exists count.
fn team_killed_at_random(store_url: Option<String>, kills: usize, window: (u64, u64)) {
    let mut scene = Scene::team(store_url);
    let mut team_run: Option<String> = None;
    let mut deciding = false;
    let mut decided = 0;
    let mut team_kills = 0;
    let started = Instant::now();
    let mut child = scene.spawn(TEAM_START);
    // The first kill lands while the worker runs a command, its coordinator (and so the
    // worker) killed then; the rest fall at random.
    let scribe_started = Instant::now();
    while child.try_wait().ok().flatten().is_none() && scribe_started.elapsed() < Duration::from_secs(60) {
        let scribe = scene.runs().into_iter().find(|r| r.agent == "scribe");
        if let Some(scribe) = scribe.filter(|r| r.activity.as_deref().is_some_and(|a| a.starts_with("running"))) {
            scene.kill(&mut child, Some(&scribe.id));
            team_kills += 1;
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    loop {
        assert!(started.elapsed() < Duration::from_secs(300), "the test took too long; log:\n{}", scene.log());
        let lines_left = TEAM_LINES.saturating_sub(scene.lines().len());
        let upper = paced(window.0, window.1, lines_left, kills.saturating_sub(team_kills));
        let limit = match (team_kills < kills, deciding) {
            (false, _) => Duration::from_secs(60),
            (true, true) => scene.dice.millis(window.0 + 150, upper + 200),
            (true, false) => scene.dice.millis(window.0, upper),
        };
        if wait_or_timeout(&mut child, limit).is_none() {
            let busiest = scene.busiest_member();
            scene.kill(&mut child, busiest.as_deref());
            team_kills += usize::from(team_run.is_some() || scene.runs().iter().any(|r| r.agent == "ledger"));
        }
        team_run = team_run.or_else(|| scene.runs().into_iter().find(|r| r.agent == "ledger").map(|r| r.id));
        let Some(id) = team_run.clone() else {
            // Killed before the team's run was recorded: start it again.
            child = scene.spawn(TEAM_START);
            continue;
        };
        let (status, _) = scene.state(&id);
        if status == RunStatus::Completed {
            break;
        }
        assert!(!status.is_terminal(), "the team ended {status}; log:\n{}", scene.log());
        let uncertain = scene.uncertain_in_team().filter(|_| status == RunStatus::Paused);
        deciding = uncertain.is_some();
        child = match uncertain {
            Some((member_run, call, line)) => {
                decided += 1;
                let verb = if scene.decide(&line) { "approve" } else { "reject" };
                // The team's run or the member's own: either decides and resumes the team.
                let target = if scene.dice.below(2) == 0 { &id } else { &member_run };
                scene.spawn(&["runs", verb, target, &call, "--approve", "auto"])
            }
            None => scene.spawn(&["runs", "resume", &id, "--approve", "auto"]),
        };
    }
    let mut expected: Vec<String> = (1..=LEAD_LINES).map(|n| format!("lead-{n}")).collect();
    expected.extend((1..=SCRIBE_LINES).map(|n| format!("scribe-{n}")));
    expected.extend((1..=CODER_LINES).map(|n| format!("coder-{n}")));
    expected.extend((LEAD_LINES + 1..=2 * LEAD_LINES).map(|n| format!("lead-{n}")));
    assert_eq!(scene.lines(), expected, "every line exactly once, in order; log:\n{}", scene.log());
    let runs = scene.runs();
    let mut agents: Vec<&str> = runs.iter().map(|r| r.agent.as_str()).collect();
    agents.sort_unstable();
    assert_eq!(agents, ["coder", "lead", "ledger", "scribe"], "no member's run was started twice: {runs:?}");
    assert!(runs.iter().all(|r| r.status == RunStatus::Completed), "{runs:?}");
    for run in &runs {
        let log = scene.runtime.block_on(scene.store.evidence(&run.id, 0)).expect("evidence");
        troupe::store::verify_chain(&log).unwrap_or_else(|e| {
            let entries: Vec<String> = log.iter().map(|e| format!("{} {:?} {}", e.seq, e.kind, e.payload)).collect();
            panic!("run {} ({}): {e}\n{}", run.id, run.agent, entries.join("\n"))
        });
    }
    let verified = scene.command(&["runs", "verify", team_run.as_deref().expect("the team's run")]).output();
    let verified = verified.expect("the binary runs");
    assert!(verified.status.success(), "{}", String::from_utf8_lossy(&verified.stdout));
    assert!(team_kills >= kills, "{team_kills} kills of the team");
    println!(
        "{} kills ({team_kills} of the running team), {decided} interrupted calls decided by a person; killed while: {:?}; in: {:?}",
        scene.kills, scene.killed_while, scene.killed_in
    );
    let in_tool = scene.killed_while.iter().filter(|a| a.starts_with("running")).count();
    assert!(in_tool > 0, "some kills landed in tool calls: {:?}", scene.killed_while);
    assert!(scene.killed_in.iter().any(|a| a == "scribe"), "a kill landed in the worker's run: {:?}", scene.killed_in);
}

#[test]
fn a_team_killed_at_random_completes_with_every_side_effect_once_sqlite() {
    team_killed_at_random(None, KILLS, (20, 500));
}

#[test]
fn a_team_killed_at_random_completes_with_every_side_effect_once_postgres() {
    let Ok(base) = std::env::var("TROUPE_TEST_DATABASE_URL") else {
        troupe_testkit::skip("the PostgreSQL team kill test", "TROUPE_TEST_DATABASE_URL is not set");
        return;
    };
    let schema = format!("troupe_kill_team_{}", std::process::id());
    let setup = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    let admin = setup
        .block_on(troupe::store::postgres::PostgresStore::connect_in_schema(&base, &schema))
        .expect("a fresh schema");
    let separator = if base.contains('?') { '&' } else { '?' };
    team_killed_at_random(Some(format!("{base}{separator}options=-csearch_path%3D{schema}")), 10, (100, 1500));
    setup.block_on(async {
        let statement = format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE");
        // The schema name is the test's own (`troupe_kill_team_<pid>`), not input.
        sqlx::query(sqlx::AssertSqlSafe(statement)).execute(admin.pool()).await.expect("the test schema is dropped");
        admin.pool().close().await;
    });
}
