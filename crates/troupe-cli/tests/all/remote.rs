//! `troupe team run` with a remote member: `troupe serve` (the demo agent, behind a bearer
//! token) in one process, a team whose demo leader delegates to it over A2A in another.
//! The token comes from the variable `bearer_env` names; the remote agent's write needs
//! approval, which the team's approval mode (or the person at the terminal) gives. And a
//! team killed while its remote member (on a server with a store, on the mock model)
//! works, then resumed.

use crate::serve::{Serving, start_with};
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;
use tempfile::TempDir;

pub(crate) const TOKEN: &str = "s3cret-review-token";

/// The serving side: `troupe serve` on the demo model, wanting [`TOKEN`], in a workspace
/// with a README (which its demo agent reads, then summarises into `TROUPE_DEMO.md`).
pub(crate) fn serving() -> (Serving, TempDir) {
    let workspace = tempfile::tempdir().expect("a workspace");
    std::fs::write(workspace.path().join("README.md"), "# Remote gadget\n").expect("writes");
    let serving = start_with(workspace.path(), &["--no-store"], &[("TROUPE_SERVER_TOKEN", TOKEN)]);
    (serving, workspace)
}

/// A team led by the example's demo `lead`, whose one member is the agent at `url`,
/// named `reviewer`, its token in `REVIEW_TOKEN`.
pub(crate) fn team(url: &str) -> TempDir {
    let dir = tempfile::tempdir().expect("a temp dir");
    let team = format!(
        "[team]\nname = \"audit\"\nstrategy = \"delegate\"\nleader = \"lead\"\n\n[[team.members]]\n\
         remote = \"{url}\"\nname = \"reviewer\"\nbearer_env = \"REVIEW_TOKEN\"\n\n\
         [firewall]\nchannels = [\"reviewer -> lead\"]\n"
    );
    std::fs::write(dir.path().join("team.toml"), team).expect("writes the team file");
    std::fs::create_dir_all(dir.path().join("agents")).expect("creates agents/");
    let lead = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/team/agents/lead.toml");
    std::fs::copy(lead, dir.path().join("agents/lead.toml")).expect("copies the leader");
    dir
}

/// `troupe team run team.toml "Review this" ARGS` in `dir` with only `env` (and `PATH`).
fn run_team(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_troupe"));
    command.args(["team", "run", "team.toml", "Review this", "-w"]).arg(dir).args(args).current_dir(dir).env_clear();
    command.env("PATH", std::env::var_os("PATH").unwrap_or_default());
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().expect("the binary runs")
}

fn text(output: &Output) -> (String, String) {
    (String::from_utf8_lossy(&output.stdout).into_owned(), String::from_utf8_lossy(&output.stderr).into_owned())
}

/// With its token, the remote member answers the leader through the firewall; under
/// `--approve auto` its write is approved for it and happens on the remote side, under
/// `never` it is refused. The token shows nowhere.
#[test]
fn a_remote_member_answers_the_leader_with_its_token_from_the_environment() {
    let (serving, remote_ws) = serving();
    let dir = team(&serving.url);
    let written = remote_ws.path().join("TROUPE_DEMO.md");
    for (mode, writes) in [("never", false), ("auto", true)] {
        let output = run_team(dir.path(), &["--approve", mode, "--no-store"], &[("REVIEW_TOKEN", TOKEN)]);
        let (out, err) = text(&output);
        assert_eq!(output.status.code(), Some(0), "{mode}: {err}");
        assert!(out.contains("- reviewer: "), "{mode}: the leader read the remote report: {out}");
        assert!(err.lines().any(|l| l.starts_with("│ reviewer ") && l.contains("remote")), "{mode}: {err}");
        assert_eq!(written.exists(), writes, "{mode}: {err}");
        assert!(!out.contains(TOKEN) && !err.contains(TOKEN), "{mode}: the token shows nowhere");
    }
    serving.stop();
}

/// A wrong token is refused by the remote server (the member fails, exit 1); a missing
/// variable stops the team before anything is sent (exit 2), naming the variable at its
/// place in the file.
#[test]
fn a_wrong_or_missing_token_fails_clearly() {
    let (serving, remote_ws) = serving();
    let dir = team(&serving.url);
    let wrong = run_team(dir.path(), &["--approve", "auto", "--no-store"], &[("REVIEW_TOKEN", "not-the-token")]);
    let (out, err) = text(&wrong);
    assert_eq!(wrong.status.code(), Some(1), "{err}");
    assert!(err.contains("reviewer") && err.contains("HTTP 401"), "{err}");
    assert!(!out.contains("not-the-token") && !err.contains("not-the-token"), "{out}\n{err}");

    let missing = run_team(dir.path(), &["--approve", "auto", "--no-store"], &[]);
    let (_, err) = text(&missing);
    assert_eq!(missing.status.code(), Some(2), "{err}");
    assert!(
        err.contains("team.toml:9:14: REVIEW_TOKEN is not set; export it with the bearer token of the remote agent at"),
        "{err}"
    );
    assert!(!remote_ws.path().join("TROUPE_DEMO.md").exists(), "nothing ran remotely");
    serving.stop();
}

/// At a terminal, the remote member's call is asked about like a local member's, the
/// question naming its path; the answer reaches the remote server, once.
#[test]
fn at_a_terminal_a_remote_members_call_is_asked_about() {
    let (serving, remote_ws) = serving();
    let dir = team(&serving.url);
    for (answer, writes) in [("n\nnot wanted", false), ("y", true)] {
        let mut command = Command::new(env!("CARGO_BIN_EXE_troupe"));
        command
            .args(["team", "run", "team.toml", "Review this", "--no-store", "-w"])
            .arg(dir.path())
            .current_dir(dir.path())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("REVIEW_TOKEN", TOKEN);
        let (output, shown) = troupe_testkit::terminal::at_a_terminal(&mut command, &["[e]dit"], &[answer]);
        assert_eq!(output.status.code(), Some(0), "{shown}");
        assert!(shown.contains("? lead → reviewer: fs.write {"), "the question names the path: {shown}");
        assert_eq!(shown.matches("? lead → reviewer").count(), 1, "asked once: {shown}");
        assert_eq!(remote_ws.path().join("TROUPE_DEMO.md").exists(), writes, "{answer}: {shown}");
    }
    serving.stop();
}

/// The remote agent's model: it appends one line with `shell` (a side effect that shows
/// when it happens twice), then, slowly, answers.
fn appender_responder() -> impl Fn(&troupe_testkit::RecordedRequest) -> troupe_testkit::MockTurn + Send + Sync + 'static
{
    |request| {
        if request.body["messages"].to_string().contains("tool_result") {
            troupe_testkit::MockTurn::text("Appended.").with_latency(Duration::from_millis(1500))
        } else {
            troupe_testkit::MockTurn::text("Appending.").with_tool_call(
                "toolu_append",
                "shell",
                serde_json::json!({"command": "echo remote-line >> lines.txt"}),
            )
        }
    }
}

/// The leader's model: it delegates to the remote member, then answers.
fn leader_responder() -> impl Fn(&troupe_testkit::RecordedRequest) -> troupe_testkit::MockTurn + Send + Sync + 'static {
    |request| {
        if request.body["messages"].to_string().contains("tool_result") {
            troupe_testkit::MockTurn::text("The remote line is in.")
        } else {
            troupe_testkit::MockTurn::text("Asking the appender.").with_tool_call(
                "toolu_delegate",
                "delegate",
                serde_json::json!({"to": "appender", "brief": "Append your line."}),
            )
        }
    }
}

/// A team killed (SIGKILL) while its remote member works on its task, then resumed with
/// `troupe runs resume`: the leader's interrupted delegation is given again without asking
/// anyone (the member's server, which has a store, declares that a message sent again
/// finds its task), the server answers with the task the first sending started, and the
/// remote agent's side effect happens once.
#[test]
fn a_team_killed_while_its_remote_member_works_resumes_without_running_the_task_again() {
    use std::os::unix::process::CommandExt;
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    let (remote_model, team_model) = runtime.block_on(async {
        let remote = troupe_testkit::MockLlmServer::start().await.expect("the remote's mock starts");
        let team = troupe_testkit::MockLlmServer::start().await.expect("the team's mock starts");
        (remote, team)
    });
    remote_model.respond_with(appender_responder());
    team_model.respond_with(leader_responder());

    let remote_ws = tempfile::tempdir().expect("a workspace");
    std::fs::create_dir_all(remote_ws.path().join(".troupe/agents")).expect(".troupe/agents/");
    let appender = "[agent]\nid = \"appender\"\nname = \"Appender\"\ndescription = \"Appends a line.\"\n\n\
                    [provider]\nmodel = \"anthropic/claude-sonnet-4-5\"\n\n[[tools]]\nname = \"shell\"\n";
    std::fs::write(remote_ws.path().join(".troupe/agents/appender.toml"), appender).expect("writes the agent");
    let remote_url = remote_model.url();
    let env =
        [("TROUPE_SERVER_TOKEN", TOKEN), ("ANTHROPIC_API_KEY", "sk-ant-fake"), ("ANTHROPIC_BASE_URL", &remote_url)];
    let serving = start_with(remote_ws.path(), &[], &env);

    let dir = tempfile::tempdir().expect("the team's directory");
    let team = format!(
        "[team]\nname = \"relay\"\nstrategy = \"delegate\"\nleader = \"lead\"\n\n[[team.members]]\n\
         remote = \"{}\"\nname = \"appender\"\nskill = \"appender\"\nbearer_env = \"REVIEW_TOKEN\"\n\n\
         [firewall]\nchannels = [\"appender -> lead\"]\n",
        serving.url
    );
    std::fs::write(dir.path().join("team.toml"), team).expect("writes the team file");
    std::fs::create_dir_all(dir.path().join("agents")).expect("agents/");
    let lead = "[agent]\nid = \"lead\"\nname = \"Lead\"\ndescription = \"Leads.\"\n\n\
                [provider]\nmodel = \"anthropic/claude-sonnet-4-5\"\n";
    std::fs::write(dir.path().join("agents/lead.toml"), lead).expect("writes the leader");
    let store = format!("sqlite://{}", dir.path().join("team.db").display());
    let team_url = team_model.url();
    let troupe = |args: &[&str]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_troupe"));
        command.args(args).args(["--approve", "auto", "--store", &store, "-w"]).arg(dir.path());
        command.current_dir(dir.path()).env_clear().env("PATH", std::env::var_os("PATH").unwrap_or_default());
        command.env("REVIEW_TOKEN", TOKEN).env("ANTHROPIC_API_KEY", "sk-ant-fake").env("ANTHROPIC_BASE_URL", &team_url);
        command.stdin(std::process::Stdio::null()).process_group(0);
        command
    };

    // Killed once the remote agent has appended its line and waits for its answer.
    let mut first = troupe(&["team", "run", "team.toml", "Relay the line."])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the team starts");
    let waited = std::time::Instant::now();
    while remote_model.requests().len() < 2 {
        assert!(waited.elapsed() < Duration::from_secs(60), "the remote agent never reached its answer");
        assert!(first.try_wait().expect("waits").is_none(), "the team ended before its kill");
        std::thread::sleep(Duration::from_millis(5));
    }
    let group = nix::unistd::Pid::from_raw(first.id() as i32);
    nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL).expect("SIGKILL");
    let _ = first.wait();
    let lines = || std::fs::read_to_string(remote_ws.path().join("lines.txt")).unwrap_or_default();
    assert_eq!(lines(), "remote-line\n", "the remote agent appended its line before the kill");

    let opened = runtime.block_on(troupe::store::open(&store)).expect("the team's store");
    let runs = runtime.block_on(opened.list_runs(&troupe::store::RunFilter::default())).expect("runs");
    let team_run = runs.iter().find(|r| r.agent == "relay").expect("the team's run is recorded").id.clone();
    assert!(!runs.iter().any(|r| r.status.is_terminal()), "nothing ended before the kill: {runs:?}");

    let resumed = troupe(&["runs", "resume", &team_run]).output().expect("resume runs");
    let (out, err) = text(&resumed);
    assert_eq!(resumed.status.code(), Some(0), "{out}\n{err}");
    assert!(out.contains("The remote line is in."), "the team answered: {out}\n{err}");
    assert_eq!(lines(), "remote-line\n", "the remote agent's line was appended once");
    assert_eq!(remote_model.requests().len(), 2, "the remote task was not run again");
    let record = runtime.block_on(opened.load_run(&team_run)).expect("loads").expect("stored");
    assert_eq!(record.status, troupe::store::RunStatus::Completed);

    let listed = reqwest::Client::new().get(format!("{}/v1/runs", serving.url)).bearer_auth(TOKEN);
    let listed: serde_json::Value =
        runtime.block_on(async { listed.send().await?.json().await }).expect("the remote server's runs");
    let remote_runs = listed["runs"].as_array().expect("runs");
    assert_eq!(remote_runs.len(), 1, "one remote task: {listed}");
    serving.stop();
}

/// `troupe serve --team` of a team with a remote member lists, among the team's tools'
/// arguments' schemas (what a person editing a waiting call fills in), those of the
/// remote agent's tools, read from its server's extended card with the member's token.
#[test]
fn a_served_team_lists_its_remote_members_tools_schemas() {
    let (remote, _remote_ws) = serving();
    let dir = team(&remote.url);
    let team_file = dir.path().join("team.toml");
    let team_file = team_file.to_str().expect("a UTF-8 path");
    let served = start_with(dir.path(), &["--team", team_file, "--no-store"], &[("REVIEW_TOKEN", TOKEN)]);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let agents: serde_json::Value = runtime
        .block_on(async { reqwest::get(format!("{}/v1/agents", served.url)).await?.json().await })
        .expect("the served agents");
    let audit = agents["agents"].as_array().and_then(|a| a.iter().find(|t| t["name"] == "audit")).expect("the team");
    // The leader does not write: `fs.write` is the remote agent's.
    assert_eq!(audit["inputs"]["fs.write"]["required"], serde_json::json!(["path", "content"]), "{audit}");
    assert!(audit["inputs"]["delegate"].is_object(), "the leader's own tools too: {audit}");
    served.stop();
    remote.stop();
}
