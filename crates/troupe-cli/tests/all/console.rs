//! The web console in a real browser: Chromium, driven by `playwright-core`
//! (tests/console/console.mjs), against the real `troupe serve` on loopback with a token,
//! its agents on the testkit's mock model (or the demo model). With `TROUPE_SCREENSHOTS`
//! set to a directory, the browser saves its screenshots there (docs/img holds the ones
//! the README shows).

use crate::serve::{Serving, start_with};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use troupe_testkit::{MockLlmServer, MockTurn, test_deps};

const TOKEN: &str = "tok-console-3b9e71";
const CHROMIUM: &str = "/usr/bin/chromium";

/// The node modules holding playwright-core, when it and Chromium are installed.
fn browser(test: &str) -> Option<PathBuf> {
    let modules = test_deps::node_modules("playwright-core");
    if modules.is_none() {
        test_deps::skip(test, "node or the npm package playwright-core is not installed");
        return None;
    }
    if !Path::new(CHROMIUM).is_file() {
        test_deps::skip(test, "Chromium (/usr/bin/chromium) is not installed");
        return None;
    }
    modules
}

/// The browser script with `plan`, its stdin kept for [`Browser::tell`].
struct Browser {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<Value>,
    seen: Vec<Value>,
}

impl Drop for Browser {
    /// A test that fails while its script waits (for [`Browser::tell`], or on a page that
    /// never answers) ends the script and its browser with it: left running, they would
    /// hold the test's output open, and with it whatever reads that output to its end.
    fn drop(&mut self) {
        use nix::sys::signal::{Signal, killpg};
        if !matches!(self.child.try_wait(), Ok(None)) {
            return;
        }
        // SIGTERM first: Playwright closes the browsers it launched (in groups of their
        // own) when its process is asked to end.
        let group = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = killpg(group, Signal::SIGTERM);
        for _ in 0..50 {
            if !matches!(self.child.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = killpg(group, Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

fn launch(modules: &Path, serving: &Serving, scenario: &str, mut plan: Value) -> Browser {
    plan["modules"] = json!(modules);
    plan["chromium"] = json!(CHROMIUM);
    plan["url"] = json!(serving.url);
    plan["token"] = json!(TOKEN);
    plan["scenario"] = json!(scenario);
    if let Some(dir) = std::env::var_os("TROUPE_SCREENSHOTS") {
        plan["screenshots"] = json!(dir.to_string_lossy());
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/console/console.mjs");
    let mut child = Command::new("node")
        .arg(script)
        .arg(plan.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        // A process group of its own, so that a failed test can end it and what it started.
        .process_group(0)
        .spawn()
        .expect("node starts");
    let stdout = child.stdout.take().expect("stdout");
    let (send, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let value = serde_json::from_str(&line).unwrap_or_else(|_| json!({"text": line}));
            let _ = send.send(value);
        }
    });
    Browser { child, lines, seen: Vec::new() }
}

impl Browser {
    /// Waits for the line `{"saw": name, …}`; panics on an error line or after a minute.
    fn saw(&mut self, name: &str) -> Value {
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|_| panic!("the browser never saw {name}: {:#?}", self.seen));
            self.seen.push(line.clone());
            assert!(line.get("error").is_none(), "the browser failed: {}\n{:#?}", line["error"], self.seen);
            if line["saw"] == name {
                return line;
            }
        }
    }

    /// Tells the script to go on (a line on its stdin).
    fn tell(&mut self) {
        let stdin = self.child.stdin.as_mut().expect("stdin");
        stdin.write_all(b"go\n").and_then(|()| stdin.flush()).expect("the script reads");
    }

    /// Waits for the script's end (no dialog opened, no page error); every line it printed.
    fn done(mut self) -> Vec<Value> {
        loop {
            match self.lines.recv_timeout(Duration::from_secs(60)) {
                Ok(line) => {
                    assert!(line.get("error").is_none(), "the browser failed: {}\n{:#?}", line["error"], self.seen);
                    let last = line.get("done").is_some();
                    self.seen.push(line);
                    if last {
                        break;
                    }
                }
                Err(_) => panic!("the browser did not finish: {:#?}", self.seen),
            }
        }
        let status = self.child.wait().expect("node exits");
        assert!(status.success(), "the browser script failed: {:#?}", self.seen);
        let dialogs: Vec<&Value> =
            self.seen.iter().filter(|l| l["saw"] == "dialog" || l["saw"] == "pageerror").collect();
        assert!(dialogs.is_empty(), "no dialog opened and no script failed: {dialogs:#?}");
        std::mem::take(&mut self.seen)
    }
}

/// A workspace serving agent `scribe` (`fs.read`, `fs.write`, `fs.edit`) on the mock model.
struct Place {
    runtime: tokio::runtime::Runtime,
    mock: MockLlmServer,
    workspace: tempfile::TempDir,
    client: reqwest::Client,
}

impl Place {
    fn new(turns: impl IntoIterator<Item = MockTurn>) -> Self {
        let runtime =
            tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
        let mock = runtime.block_on(MockLlmServer::start()).expect("the mock server starts");
        mock.push_all(turns);
        let workspace = tempfile::tempdir().expect("workspace");
        std::fs::write(workspace.path().join("README.md"), "# A small project\n").expect("write");
        std::fs::create_dir_all(workspace.path().join(".troupe/agents")).expect(".troupe/agents/");
        let scribe = "[agent]\nid = \"scribe\"\nname = \"Scribe\"\ndescription = \"Reads and writes notes.\"\n\n\
                      [provider]\nmodel = \"anthropic/claude-sonnet-4-5\"\n\n\
                      [[tools]]\nname = \"fs.read\"\n\n[[tools]]\nname = \"fs.write\"\n\n\
                      [[tools]]\nname = \"fs.edit\"\n";
        std::fs::write(workspace.path().join(".troupe/agents/scribe.toml"), scribe).expect("writes the agent");
        Place { runtime, mock, workspace, client: reqwest::Client::new() }
    }

    fn serve(&self, extra: &[&str]) -> Serving {
        let url = self.mock.url();
        let env = [("TROUPE_SERVER_TOKEN", TOKEN), ("ANTHROPIC_API_KEY", "sk-ant-fake"), ("ANTHROPIC_BASE_URL", &url)];
        start_with(self.workspace.path(), extra, &env)
    }

    /// Starts `agent` on `task`; its run id.
    fn start_run(&self, serving: &Serving, agent: &str, task: &str) -> String {
        self.start(serving, json!({"agent": agent, "instruction": task, "stream": false}))
    }

    /// Starts team `team` on `task`; its run id.
    fn start_team_run(&self, serving: &Serving, team: &str, task: &str) -> String {
        self.start(serving, json!({"team": team, "instruction": task, "stream": false}))
    }

    fn start(&self, serving: &Serving, body: Value) -> String {
        let request = self.client.post(format!("{}/v1/runs", serving.url)).bearer_auth(TOKEN).json(&body);
        let started: Value =
            self.runtime.block_on(async { request.send().await?.json().await }).expect("the run starts");
        started["run_id"].as_str().unwrap_or_else(|| panic!("a run id: {started}")).to_owned()
    }

    /// Waits until run `run` is in `phase`; its view.
    fn wait_phase(&self, serving: &Serving, run: &str, phase: &str) -> Value {
        let mut view = Value::Null;
        for _ in 0..1500 {
            let request = self.client.get(format!("{}/v1/runs/{run}", serving.url)).bearer_auth(TOKEN);
            view = self.runtime.block_on(async { request.send().await?.json().await }).unwrap_or(Value::Null);
            if view["phase"] == phase {
                return view;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("run {run} never reached {phase}: {view}");
    }
}

/// Without the token the console shows its token form and no run: every request for data
/// is refused; a wrong token is refused too; the right one, typed (by keyboard alone) or given in the
/// address's fragment (then taken out of the address bar), shows the runs.
#[test]
fn the_console_asks_for_the_token_and_shows_no_run_without_it() {
    let Some(modules) = browser("the_console_asks_for_the_token") else { return };
    let place = Place::new([MockTurn::text("Hello from the scribe.")]);
    let mut serving = place.serve(&[]);
    for _ in 0..500 {
        if serving.said("console: ") {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let said = serving.lines();
    let console = format!("console: {}/ (it asks for the token)", serving.url);
    assert!(said.contains(&console), "it says where the console is: {said:?}");
    assert!(!said.iter().any(|l| l.contains(TOKEN)), "no token is printed where no terminal is: {said:?}");
    let run = place.start_run(&serving, "scribe", "Say hello");
    place.wait_phase(&serving, &run, "ended");

    let mut page = launch(&modules, &serving, "auth", json!({"runId": run}));
    let shell = page.saw("shell");
    assert_eq!(shell["status"], 200, "the page itself needs no token");
    let csp = shell["csp"].as_str().expect("a Content-Security-Policy");
    assert!(csp.contains("script-src 'self'") && csp.contains("default-src 'none'"), "{csp}");
    assert_eq!(shell["nosniff"], "nosniff");
    let form = page.saw("token_form");
    assert_eq!(form["label"], "Bearer token");
    assert_eq!(form["shows_run"], false, "no run data without the token");
    let data = form["data"].as_array().expect("the data requests");
    assert!(!data.is_empty() && data.iter().all(|r| r["status"] == 401), "every data request was refused: {data:?}");
    assert_eq!(page.saw("wrong_token")["shows_run"], false);
    let right = page.saw("right_token");
    assert_eq!(right["stored"], true);
    assert!(right["tabs"].as_u64().is_some_and(|tabs| tabs < 10), "the field is reached by Tab: {right}");
    let row: Vec<&str> = right["row"].as_array().expect("the run's row").iter().filter_map(Value::as_str).collect();
    assert_eq!(
        row.get(..4),
        Some(&[run.as_str(), "scribe", "completed", "anthropic/claude-sonnet-4-5"][..]),
        "{row:?}"
    );
    assert!(row.get(5).is_some_and(|tokens| tokens.parse::<u64>().is_ok_and(|n| n > 0)), "its tokens: {row:?}");
    assert!(row.last().is_some_and(|d| d.ends_with(" ms") || d.ends_with(" s")), "its duration: {row:?}");
    let address = page.saw("fragment_token")["address"].as_str().expect("an address").to_owned();
    assert!(!address.contains(TOKEN) && !address.contains("token="), "the token left the address bar: {address}");
    page.done();
    serving.stop();
}

/// HTML a tool returns (`<script>`, `<img onerror>`) is shown as its text: no element of
/// it is made, nothing of it runs, and the page breaks no rule of its security policy.
#[test]
fn html_in_a_tool_result_is_shown_as_text_and_never_runs() {
    let Some(modules) = browser("html_in_a_tool_result_is_shown_as_text") else { return };
    let place = Place::new([
        MockTurn::tool_call("call_r1", "fs.read", json!({"path": "evil.html"})),
        MockTurn::text("I read the page."),
    ]);
    let evil = "<script>window.__injected = 'script'</script>\n<img src=x onerror=\"window.__injected = 'img'\">\n";
    std::fs::write(place.workspace.path().join("evil.html"), evil).expect("write");
    let serving = place.serve(&[]);
    let run = place.start_run(&serving, "scribe", "Read evil.html");
    place.wait_phase(&serving, &run, "ended");

    let mut page = launch(&modules, &serving, "inject", json!({"runId": run}));
    let seen = page.saw("injected");
    let result = seen["result"].as_str().expect("the result's text");
    assert!(result.contains("<script>window.__injected = 'script'</script>"), "shown as text: {result}");
    assert!(result.contains("<img src=x onerror="), "shown as text: {result}");
    assert_eq!(seen["timeline_imgs"], 0, "no image element was made");
    assert_eq!(seen["timeline_scripts"], 0, "no script element was made");
    assert_eq!(seen["scripts"], json!([format!("{}/console/console.js", serving.url)]), "only the console's script");
    assert_eq!(seen["marker"], Value::Null, "nothing of the result ran");
    assert_eq!(seen["violations"], json!([]), "nothing even tried to run");
    page.done();
    serving.stop();
}

/// A team run started from the browser's Start view: its tree grows as members start, it
/// waits for the writer's `fs.write`, the person approves it in the browser, and the run
/// finishes with the write done; the Costs view counts it.
#[test]
fn a_team_run_started_in_the_browser_finishes_once_a_members_call_is_approved_there() {
    let Some(modules) = browser("a_team_run_started_in_the_browser") else { return };
    let place = Place::new([]);
    let team = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/team/team.toml");
    let serving = place.serve(&["--team", team.to_str().expect("a UTF-8 path")]);

    let mut page =
        launch(&modules, &serving, "approve", json!({"agent": "project", "task": "Describe this repository"}));
    let waiting = page.saw("waiting");
    let asking = waiting["asking"].as_str().expect("what it asks");
    assert!(asking.contains("fs.write"), "{asking}");
    assert!(!place.workspace.path().join("TROUPE_DEMO.md").exists(), "nothing written before the approval");
    let tree: Vec<&str> = waiting["tree"].as_array().expect("the tree").iter().filter_map(Value::as_str).collect();
    assert!(tree.contains(&"project going") && tree.contains(&"writer going"), "the tree grew live: {tree:?}");
    let finished = page.saw("finished");
    assert!(finished["answer"].as_str().is_some_and(|a| !a.trim().is_empty()), "{finished}");
    let tree: Vec<&str> = finished["tree"].as_array().expect("the tree").iter().filter_map(Value::as_str).collect();
    for member in ["project", "lead", "writer"] {
        assert!(tree.contains(&member), "{member} is in the tree: {tree:?}");
    }
    let costs = page.saw("costs");
    let cells: Vec<&str> = costs["cells"].as_array().expect("the row").iter().filter_map(Value::as_str).collect();
    assert_eq!(cells.get(..2), Some(&["project", "1"][..]), "the team's one run is counted: {costs}");
    assert!(cells[2].parse::<u64>().is_ok_and(|tokens| tokens > 0), "its tokens: {costs}");
    // The store's runs, summed by the server: each member's run by agent and by model.
    let writer: Vec<&str> =
        costs["writer"].as_array().expect("the writer's row").iter().filter_map(Value::as_str).collect();
    assert_eq!(writer.get(..2), Some(&["writer", "1"][..]), "the writer's run is counted: {costs}");
    assert!(costs["bars"].as_u64().is_some_and(|bars| bars >= 7), "bars by agent, team, model and day: {costs}");
    assert_eq!(costs["models"], json!(["demo"]), "the members' runs count by their model: {costs}");
    assert!(costs["total"].as_str().is_some_and(|t| t.contains("4 agent runs")), "lead and three members: {costs}");
    page.done();
    assert!(place.workspace.path().join("TROUPE_DEMO.md").exists(), "the approved write ran");
    let run = waiting["run_id"].as_str().expect("the run id");
    assert_eq!(place.wait_phase(&serving, run, "ended")["end"]["outcome"], "completed");
    serving.stop();
}

/// The same on the mock model: a delegate team (`lead` hands the work to `coder`, which
/// has `shell`) started from the browser; the coder's command waits, is approved in the
/// browser, runs once, and the team answers with the model's last words.
#[test]
fn a_team_on_the_mock_model_started_and_approved_in_the_browser_runs_the_call_once() {
    let Some(modules) = browser("a_team_on_the_mock_model_started_and_approved_in_the_browser") else { return };
    let place = Place::new([
        MockTurn::tool_call("call_d1", "delegate", json!({"to": "coder", "brief": "Add a line"})),
        MockTurn::tool_call("call_s1", "shell", json!({"command": "echo one >> ledger.txt"})),
        MockTurn::text("Appended one line."),
        MockTurn::text("The coder appended one line."),
    ]);
    let team_dir = tempfile::tempdir().expect("a temp dir");
    std::fs::create_dir_all(team_dir.path().join("agents")).expect("agents/");
    let team = "[team]\nname = \"ledger\"\nstrategy = \"delegate\"\nleader = \"lead\"\n\n[[team.members]]\nagent = \"coder\"\n";
    std::fs::write(team_dir.path().join("team.toml"), team).expect("writes the team");
    for (id, tool) in [("lead", "fs.read"), ("coder", "shell")] {
        let agent = format!(
            "[agent]\nid = \"{id}\"\nname = \"{id}\"\ndescription = \"Keeps the ledger.\"\n\n\
             [provider]\nmodel = \"anthropic/claude-sonnet-4-5\"\n\n[[tools]]\nname = \"{tool}\"\n"
        );
        std::fs::write(team_dir.path().join(format!("agents/{id}.toml")), agent).expect("writes an agent");
    }
    let team_file = team_dir.path().join("team.toml");
    let serving = place.serve(&["--team", team_file.to_str().expect("a UTF-8 path")]);

    let mut page = launch(
        &modules,
        &serving,
        "approve",
        json!({"agent": "ledger", "task": "Keep the ledger", "noScreenshots": true}),
    );
    let waiting = page.saw("waiting");
    let asking = waiting["asking"].as_str().expect("what it asks");
    assert!(asking.contains("shell") && asking.contains("echo one >> ledger.txt"), "{asking}");
    let tree: Vec<&str> = waiting["tree"].as_array().expect("the tree").iter().filter_map(Value::as_str).collect();
    assert!(tree.contains(&"ledger going") && tree.contains(&"coder going"), "the tree grew live: {tree:?}");
    assert!(!place.workspace.path().join("ledger.txt").exists(), "nothing ran before the decision");
    let finished = page.saw("finished");
    assert_eq!(finished["answer"], "The coder appended one line.", "{finished}");
    page.saw("costs");
    page.done();
    let ledger = std::fs::read_to_string(place.workspace.path().join("ledger.txt")).expect("the approved command ran");
    assert_eq!(ledger, "one\n", "once");
    assert_eq!(place.mock.requests().len(), 4, "each model call once");
    serving.stop();
}

/// A team's run whose firewall withholds the reviewer's report from the leader: the run's
/// page lists what was withheld, from whom to whom, and marks it in the timeline; its
/// evidence verifies over the whole tree, until an entry of the reviewer's log is changed
/// in the store: then the page says it does not verify, naming the reviewer's run.
#[test]
fn a_team_runs_page_shows_what_its_firewall_withheld_and_whether_its_evidence_verifies() {
    let Some(modules) = browser("a_team_runs_page_shows_what_its_firewall_withheld") else { return };
    let place = Place::new([]);
    let team_dir = tempfile::tempdir().expect("a temp dir");
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/team");
    std::fs::create_dir_all(team_dir.path().join("agents")).expect("agents/");
    for entry in std::fs::read_dir(example.join("agents")).expect("the example's agents") {
        let path = entry.expect("an entry").path();
        std::fs::copy(&path, team_dir.path().join("agents").join(path.file_name().expect("a name"))).expect("copy");
    }
    let team = std::fs::read_to_string(example.join("team.toml")).expect("the example team");
    let narrowed = team.replace(r#""reviewer -> lead", "#, "");
    assert_ne!(narrowed, team, "the reviewer's channel is taken out");
    let team_file = team_dir.path().join("team.toml");
    std::fs::write(&team_file, narrowed).expect("writes the team");
    let store = team_dir.path().join("runs.db");
    let store_url = format!("sqlite://{}", store.display());
    let serving = place.serve(&["--team", team_file.to_str().expect("a UTF-8 path"), "--store", &store_url]);
    let run = place.start_team_run(&serving, "project", "Describe this repository");
    let waiting = place.wait_phase(&serving, &run, "waiting");
    let call = waiting["pending"][0]["call_id"].as_str().expect("a waiting call").to_owned();
    let signal = json!({"type": "approval", "call_id": call, "decision": {"type": "approve"}});
    let request = place.client.post(format!("{}/v1/runs/{run}/signals", serving.url)).bearer_auth(TOKEN).json(&signal);
    assert_eq!(place.runtime.block_on(request.send()).expect("the signal is posted").status(), 202);
    place.wait_phase(&serving, &run, "ended");

    let mut page = launch(&modules, &serving, "withheld", json!({"runId": run}));
    let seen = page.saw("withheld");
    let listed: Vec<&str> = seen["listed"].as_array().expect("the list").iter().filter_map(Value::as_str).collect();
    assert_eq!(listed.len(), 1, "{seen}");
    assert!(listed[0].contains("reviewer") && listed[0].contains("lead"), "{seen}");
    assert!(!listed.iter().any(|l| l.contains("researcher") || l.contains("writer")), "only the reviewer's: {seen}");
    assert_eq!(seen["entries"].as_array().map(Vec::len), Some(1), "marked in the timeline: {seen}");
    assert_eq!(seen["verified"], "true", "{seen}");
    assert!(seen["evidence"].as_str().is_some_and(|e| e.contains("over 5 runs")), "the team and its 4 members: {seen}");

    let request = place.client.get(format!("{}/v1/runs/{run}/evidence", serving.url)).bearer_auth(TOKEN);
    let report: Value = place.runtime.block_on(async { request.send().await?.json().await }).expect("the evidence");
    let reviewer = report["runs"]
        .as_array()
        .and_then(|runs| runs.iter().find(|r| r["agent"] == "reviewer"))
        .and_then(|r| r["run_id"].as_str())
        .unwrap_or_else(|| panic!("the reviewer's run: {report}"))
        .to_owned();
    place.runtime.block_on(async {
        use sqlx::Connection;
        let mut raw = sqlx::SqliteConnection::connect(&store_url).await.expect("the store file opens");
        sqlx::query("DROP TRIGGER evidence_is_append_only_update").execute(&mut raw).await.expect("drops the guard");
        sqlx::query("UPDATE evidence SET payload = '{\"forged\":true}' WHERE run_id = ? AND seq = 2")
            .bind(&reviewer)
            .execute(&mut raw)
            .await
            .expect("forges an entry");
        raw.close().await.expect("closes");
    });
    page.tell();
    let broken = page.saw("evidence_broken")["evidence"].as_str().expect("the evidence").to_owned();
    assert!(broken.contains("Does not verify"), "{broken}");
    assert!(broken.contains(&format!("reviewer {reviewer}: evidence entry 2")), "names the reviewer's run: {broken}");
    assert!(!broken.contains("researcher"), "only the broken run is named: {broken}");
    page.done();
    serving.stop();
}

/// A call rejected with a reason in the Approvals view (in a narrow window) is not run,
/// and the model is told the reason as the call's result.
#[test]
fn a_call_rejected_with_a_reason_in_the_browser_is_not_run_and_the_model_reads_why() {
    let Some(modules) = browser("a_call_rejected_with_a_reason") else { return };
    let place = Place::new([
        MockTurn::tool_call("call_w1", "fs.write", json!({"path": "note.txt", "content": "hi"})),
        MockTurn::text("I left the note alone."),
    ]);
    let serving = place.serve(&[]);
    let run = place.start_run(&serving, "scribe", "Write a note");
    place.wait_phase(&serving, &run, "waiting");

    let mut page = launch(&modules, &serving, "reject", json!({"runId": run, "reason": "not in this folder"}));
    let rejected = page.saw("rejected");
    assert!(rejected["result"].as_str().is_some_and(|r| r.contains("not in this folder")), "{rejected}");
    page.done();
    assert!(!place.workspace.path().join("note.txt").exists(), "the rejected write did not run");
    let requests = place.mock.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests[1].body["messages"].to_string().contains("not in this folder"), "the model read the reason");
    serving.stop();
}

/// The scribe asked to write `note.txt`, its call waiting for a person.
fn a_note_write_waiting() -> (Place, Serving, String) {
    let place = Place::new([
        MockTurn::tool_call("call_w1", "fs.write", json!({"path": "note.txt", "content": "hi"})),
        MockTurn::text("Written."),
    ]);
    let serving = place.serve(&[]);
    let run = place.start_run(&serving, "scribe", "Write a note");
    place.wait_phase(&serving, &run, "waiting");
    (place, serving, run)
}

/// The note written at `path`, where the person said, not where the model asked.
fn assert_written_at(place: &Place, path: &str) {
    assert!(!place.workspace.path().join("note.txt").exists(), "not where the model asked");
    let written = std::fs::read_to_string(place.workspace.path().join(path));
    assert_eq!(written.ok().as_deref(), Some("hi"), "written where the person said");
}

/// A waiting call's argument edited in its own field in the browser runs with the new
/// value, once: the file is written where the person said, not where the model asked.
#[test]
fn a_calls_argument_edited_in_its_field_in_the_browser_runs_as_edited() {
    let Some(modules) = browser("a_calls_argument_edited_in_its_field") else { return };
    let (place, serving, run) = a_note_write_waiting();

    let mut page = launch(&modules, &serving, "edit", json!({"runId": run, "path": "notes/edited.txt"}));
    let edited = page.saw("edited");
    assert_eq!(edited["before"], "note.txt", "the field held the model's value: {edited}");
    assert_eq!(edited["schema"], "used", "the fields came from the tool's schema: {edited}");
    page.done();
    assert_written_at(&place, "notes/edited.txt");
    let requests = place.mock.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests[1].body["messages"].to_string().contains("changed this call's arguments"), "the model is told");
    serving.stop();
}

/// A waiting call's argument a person edited before the tool's schema reached the page
/// keeps its edit: the schema's fields come around it, and the call runs as edited.
#[test]
fn an_edit_made_before_the_tools_schema_arrives_is_kept() {
    let Some(modules) = browser("an_edit_made_before_the_tools_schema_arrives") else { return };
    let (place, serving, run) = a_note_write_waiting();

    let mut page = launch(&modules, &serving, "lateSchema", json!({"runId": run, "path": "notes/kept.txt"}));
    let seen = page.saw("late_schema");
    assert_eq!(seen["before"], "asked", "the schema was still on its way: {seen}");
    assert_eq!(seen["schema"], "kept-edits", "{seen}");
    assert_eq!(seen["after"], "notes/kept.txt", "the edit stayed: {seen}");
    assert!(seen["labels"].as_array().is_some_and(|labels| labels.contains(&json!("content"))), "{seen}");
    page.done();
    assert_written_at(&place, "notes/kept.txt");
    serving.stop();
}

/// An argument the model left out of a waiting call has a field all the same, made from
/// the tool's schema with its description: `fs.edit` without `replace_all`, which would
/// fail on a text found twice, runs with it checked in the browser and replaces both.
#[test]
fn an_argument_the_model_left_out_is_given_in_its_field_from_the_tools_schema() {
    let Some(modules) = browser("an_argument_the_model_left_out_is_given") else { return };
    let edit = json!({"path": "note.txt", "old_string": "draft", "new_string": "final"});
    let place = Place::new([MockTurn::tool_call("call_e1", "fs.edit", edit), MockTurn::text("Edited.")]);
    std::fs::write(place.workspace.path().join("note.txt"), "draft one, draft two\n").expect("writes the note");
    let serving = place.serve(&[]);
    let run = place.start_run(&serving, "scribe", "Finalise the note");
    place.wait_phase(&serving, &run, "waiting");

    let mut page = launch(&modules, &serving, "schema", json!({"runId": run}));
    let seen = page.saw("schema");
    // The required ones first, in the order the tool declares them.
    assert_eq!(seen["labels"], json!(["path", "old_string", "new_string", "replace_all"]), "{seen}");
    assert!(seen["about"].as_str().is_some_and(|about| about.contains("Replace every occurrence")), "{seen}");
    page.done();
    let note = std::fs::read_to_string(place.workspace.path().join("note.txt")).expect("the note");
    assert_eq!(note, "final one, final two\n", "both replaced, as the person said");
    let requests = place.mock.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests[1].body["messages"].to_string().contains("changed this call's arguments"), "the model is told");
    serving.stop();
}

/// A typed answer is shown by its fields (a list as a list, yes/no for a boolean, its text
/// as text) in its schema's order (the required ones as the schema requires them), each
/// with its description, with the JSON a click away, in a narrow window.
#[test]
fn a_typed_answer_is_shown_by_its_fields() {
    let Some(modules) = browser("a_typed_answer_is_shown_by_its_fields") else { return };
    let answer = r#"{"approved": false, "reasons": ["<img src=x onerror=alert(1)>", "no tests"], "score": 0.4}"#;
    let place = Place::new([MockTurn::text(answer)]);
    let serving = place.serve(&[]);
    let schema = json!({
        "type": "object",
        "properties": {
            "approved": {"type": "boolean", "description": "Whether it may be merged."},
            "reasons": {"type": "array", "items": {"type": "string"}},
            "score": {"type": "number", "description": "How sure, from 0 to 1."},
        },
        "required": ["score", "approved", "reasons"],
    });
    let request = place.client.post(format!("{}/v1/runs", serving.url)).bearer_auth(TOKEN).json(&json!({
        "agent": "scribe", "instruction": "Review it", "stream": false, "output": {"name": "Verdict", "schema": schema},
    }));
    let started: Value = place.runtime.block_on(async { request.send().await?.json().await }).expect("started");
    let run = started["run_id"].as_str().expect("a run id").to_owned();
    place.wait_phase(&serving, &run, "ended");

    let mut page = launch(&modules, &serving, "typed", json!({"runId": run}));
    let typed = page.saw("typed");
    assert_eq!(
        typed["fields"],
        json!([
            ["score", "0.4", "How sure, from 0 to 1."],
            ["approved", "no", "Whether it may be merged."],
            ["reasons", "<img src=x onerror=alert(1)>no tests", null]
        ]),
        "{typed}"
    );
    assert!(typed["json"].as_str().is_some_and(|j| j.contains("\"approved\": false")), "{typed}");
    assert_eq!(typed["overflow"], false, "fits a 390-pixel window: {typed}");
    page.done();
    serving.stop();
}

/// A page following a waiting run goes on following it across a restart of the server
/// (the run recorded, adopted by the new process): approved there, it finishes.
#[test]
fn a_page_follows_a_run_across_a_server_restart() {
    let Some(modules) = browser("a_page_follows_a_run_across_a_server_restart") else { return };
    let place = Place::new([]);
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port").local_addr().expect("addr").port();
    let addr = format!("127.0.0.1:{port}");
    let first = place.serve(&["--addr", &addr]);
    let run = place.start_run(&first, "troupe", "Summarise this repository");
    place.wait_phase(&first, &run, "waiting");

    let mut page = launch(&modules, &first, "follow", json!({"runId": run}));
    page.saw("waiting");
    first.stop();
    let second = place.serve(&["--addr", &addr]);
    place.wait_phase(&second, &run, "waiting");
    page.tell();
    let finished = page.saw("finished");
    assert!(finished["answer"].as_str().is_some_and(|a| !a.trim().is_empty()), "{finished}");
    page.done();
    let summary =
        std::fs::read_to_string(place.workspace.path().join("TROUPE_DEMO.md")).expect("written once approved");
    assert!(summary.contains("README.md"), "{summary}");
    second.stop();
}

/// The runs list follows the server's announcements of changes to its runs: it reads its
/// first page once as it opens (at the first announcement, once subscribed), and a run
/// started while the list is open is listed before the list's next poll (ten seconds
/// away while the announcements come).
#[test]
fn a_run_started_while_the_list_is_open_is_listed_without_waiting_for_a_poll() {
    let Some(modules) = browser("a_run_started_while_the_list_is_open") else { return };
    let place = Place::new([MockTurn::text("Hello from the scribe.")]);
    let serving = place.serve(&[]);
    let mut page = launch(&modules, &serving, "live", json!({}));
    let listing = page.saw("listing");
    assert_eq!(listing["rows"], 0, "{listing}");
    assert_eq!(listing["reads"], 1, "the list was read once as it opened, after it subscribed: {listing}");
    let run = place.start_run(&serving, "scribe", "Say hello");
    page.tell();
    let listed = page.saw("listed");
    assert_eq!(listed["first"], run.as_str(), "{listed}");
    page.done();
    serving.stop();
}

/// Without the server's announcements of changes (the subscription refused, or held back
/// unanswered as a buffering proxy would), the runs list is read all the same, once.
#[test]
fn the_runs_list_is_read_without_the_servers_announcements() {
    let Some(modules) = browser("the_runs_list_is_read_without_the_servers_announcements") else { return };
    let place = Place::new([MockTurn::text("Hello from the scribe.")]);
    let serving = place.serve(&[]);
    let run = place.start_run(&serving, "scribe", "Say hello");
    place.wait_phase(&serving, &run, "ended");
    let mut page = launch(&modules, &serving, "unannounced", json!({}));
    let seen = page.saw("unannounced");
    for how in ["refused", "held"] {
        assert_eq!(seen[how]["rows"], 1, "the run is listed ({how}): {seen}");
        assert_eq!(seen[how]["live"], 0, "not shown as live ({how}): {seen}");
        assert_eq!(seen[how]["reads"], 1, "read once ({how}): {seen}");
    }
    page.done();
    serving.stop();
}

/// How many runs the large store of [`troupe_console_paints_the_first_page_of_a_large_store_within_a_second`] holds.
const LARGE_STORE_RUNS: usize = 10_000;

/// `troupe console` on a store of 10,000 runs, serving no agent: its runs need the token,
/// the browser's first paint of the runs list (the newest page of 100) takes under a
/// second, "Show older runs" appends the next page, and a search (an old run's id, part
/// of a team's name) or a status is looked up by the server through the whole store.
#[test]
fn troupe_console_paints_the_first_page_of_a_large_store_within_a_second() {
    let Some(modules) = browser("troupe_console_paints_the_first_page") else { return };
    let place = Place::new([]);
    let dir = tempfile::tempdir().expect("a temp dir");
    let url = format!("sqlite://{}", dir.path().join("runs.db").display());
    place.runtime.block_on(async {
        let store = troupe::store::open(&url).await.expect("the store opens");
        let now = troupe::store::now_millis();
        for chunk in (0..LARGE_STORE_RUNS).collect::<Vec<_>>().chunks(500) {
            let created = chunk.iter().map(|n| {
                let run = troupe::store::NewRun {
                    id: format!("run_{n:06}"),
                    agent: if n % 3 == 0 { "project".to_owned() } else { "troupe".to_owned() },
                    status: troupe::store::RunStatus::Completed,
                    conversation_id: None,
                    parent_run_id: None,
                    input: json!({"instruction": format!("task {n}")}).into(),
                    state: json!({}).into(),
                    // Nine in ten keep their spend beside their state, as this build writes
                    // them; the others are an older build's, counted from their records.
                    spend: (n % 10 != 0).then(|| troupe::store::RunSpend {
                        model: Some("demo".to_owned()),
                        tokens: 10,
                        cost_usd: 0.0,
                        rollup: false,
                    }),
                };
                store.create_run(run, now - (LARGE_STORE_RUNS - n) as i64 * 1000)
            });
            for result in futures::future::join_all(created).await {
                result.expect("a run is created");
            }
        }
    });

    let mut command = Command::new(env!("CARGO_BIN_EXE_troupe"));
    command
        .args(["console", "--addr", "127.0.0.1:0", "--store", &url])
        .env("TROUPE_SERVER_TOKEN", TOKEN)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let serving = Serving::spawn(command, "troupe console on ");
    let unauthorized = place.runtime.block_on(place.client.get(format!("{}/v1/runs", serving.url)).send());
    assert_eq!(unauthorized.expect("request").status(), 401, "no run data without the token");

    let mut page = launch(&modules, &serving, "paint", json!({}));
    let painted = page.saw("painted");
    let ms = painted["ms"].as_u64().expect("a time");
    eprintln!(
        "first paint of the runs list of {LARGE_STORE_RUNS} stored runs: {ms} ms (best of {})",
        painted["paints"]
    );
    assert_eq!(painted["rows"], 100, "the first page of runs: {painted}");
    assert!(ms < 1000, "first paint in {ms} ms");
    let older = page.saw("older");
    assert_eq!(older["rows"], 200, "the next page appended: {older}");
    let oldest = format!("run_{:06}", LARGE_STORE_RUNS - 200);
    assert_eq!(older["last"], oldest.as_str(), "the 200th newest is last: {older}");
    // Searches and filters are the server's, over the whole store.
    let by_id = page.saw("by id");
    assert_eq!((by_id["rows"].as_u64(), by_id["first"].as_str()), (Some(1), Some("run_000043")), "{by_id}");
    let by_agent = page.saw("by agent");
    assert_eq!(by_agent["agents"], json!(["project"]), "{by_agent}");
    assert_eq!(by_agent["rows"], 100, "a page of the team's runs: {by_agent}");
    let by_status = page.saw("by status");
    assert_eq!(by_status["rows"], 0, "{by_status}");
    let costs = page.saw("costs");
    eprintln!("the costs of {LARGE_STORE_RUNS} stored runs, summed by the server: {} ms", costs["ms"]);
    assert!(costs["total"].as_str().is_some_and(|t| t.contains("10000 agent runs")), "every run counts: {costs}");
    assert!(costs["total"].as_str().is_some_and(|t| t.contains("90000 tokens")), "the kept spend is summed: {costs}");
    assert_eq!(costs["project"][1], "3334", "a team of a third of them: {costs}");
    page.done();
    serving.stop();
}

/// A start whose answer the browser lost (the server started the run, the connection broke
/// before the page heard so) and that the person sends again unchanged starts nothing
/// more: the console sends both with one `Idempotency-Key`, and the server answers the
/// second with the first's run. A changed task is a new start, with a new key.
#[test]
fn a_start_sent_again_after_its_answer_was_lost_runs_once() {
    let Some(modules) = browser("a_start_sent_again_after_its_answer_was_lost_runs_once") else { return };
    let place = Place::new([MockTurn::text("Said once."), MockTurn::text("Said again.")]);
    let serving = place.serve(&[]);
    let plan = json!({"agent": "scribe", "task": "Say it once", "otherTask": "Say it again"});
    let mut page = launch(&modules, &serving, "lost_start", plan);
    let lost = page.saw("lost");
    assert!(lost["alert"].as_str().is_some_and(|a| !a.trim().is_empty()), "the page says the start failed: {lost}");
    assert!(lost["address"].as_str().is_some_and(|a| a.ends_with("#/start")), "{lost}");
    let started = page.saw("started");
    page.done();
    let sent = started["sent"].as_array().expect("the starts sent");
    assert_eq!(sent.len(), 3, "{started}");
    let (first, again, other) = (&sent[0], &sent[1], &sent[2]);
    assert!(first["key"].as_str().is_some_and(|k| k.len() > 16), "a key names the start: {started}");
    assert_eq!(again["key"], first["key"], "the same start sent again, with the same key: {started}");
    assert_eq!((&again["run_id"], &again["replayed"]), (&first["run_id"], &json!("true")), "{started}");
    assert_eq!(started["again"], first["run_id"], "the page shows the run the lost start started: {started}");
    assert_ne!(other["key"], first["key"], "a changed task is a new start: {started}");
    assert_eq!(started["other"], other["run_id"], "{started}");
    assert_eq!(other["replayed"], Value::Null, "{started}");
    assert_ne!(started["other"], started["again"], "{started}");

    let listed = place.client.get(format!("{}/v1/runs", serving.url)).bearer_auth(TOKEN);
    let listed: Value = place.runtime.block_on(async { listed.send().await?.json().await }).expect("the runs");
    let runs = listed["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 2, "one run per start: {listed}");
    assert_eq!(place.mock.requests().len(), 2, "the model was asked once per run");
    serving.stop();
}

/// A team served with a remote member (`troupe serve` on the demo model, behind a token
/// of its own): the remote agent's write waits for a person in the team's console, whose
/// fields for it come from the remote tool's schema (its server's extended card), with
/// their descriptions; the path edited there is where the remote agent writes.
#[test]
fn a_remote_members_waiting_call_is_edited_in_fields_from_its_servers_schema() {
    let Some(modules) = browser("a_remote_members_waiting_call_is_edited_in_fields") else { return };
    let (remote, remote_ws) = crate::remote::serving();
    let dir = crate::remote::team(&remote.url);
    let team_file = dir.path().join("team.toml");
    let env = [("TROUPE_SERVER_TOKEN", TOKEN), ("REVIEW_TOKEN", crate::remote::TOKEN)];
    let served = start_with(dir.path(), &["--team", team_file.to_str().expect("UTF-8"), "--no-store"], &env);

    let place = Place::new([]);
    let run = place.start_team_run(&served, "audit", "Review this");
    place.wait_phase(&served, &run, "waiting");

    // The README's screenshot of this view is the local test's.
    let plan = json!({"runId": run, "path": "REVIEWED.md", "shot": false});
    let mut page = launch(&modules, &served, "edit", plan);
    let edited = page.saw("edited");
    page.done();
    assert_eq!(edited["before"], "TROUPE_DEMO.md", "the field held the remote model's value: {edited}");
    assert_eq!(edited["schema"], "used", "the fields came from the remote tool's schema: {edited}");
    let fields = edited["fields"].to_string();
    assert!(fields.contains("relative to the workspace root"), "with the schema's descriptions: {edited}");
    assert!(remote_ws.path().join("REVIEWED.md").is_file(), "written where the person said");
    assert!(!remote_ws.path().join("TROUPE_DEMO.md").exists(), "not where the model asked");
    served.stop();
    remote.stop();
}
