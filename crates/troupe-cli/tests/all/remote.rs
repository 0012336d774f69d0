//! `troupe team run` with a remote member: `troupe serve` (the demo agent, behind a bearer
//! token) in one process, a team whose demo leader delegates to it over A2A in another.
//! The token comes from the variable `bearer_env` names; the remote agent's write needs
//! approval, which the team's approval mode (or the person at the terminal) gives.

use crate::serve::{Serving, start_with};
use std::path::Path;
use std::process::{Command, Output};
use tempfile::TempDir;

const TOKEN: &str = "s3cret-review-token";

/// The serving side: `troupe serve` on the demo model, wanting [`TOKEN`], in a workspace
/// with a README (which its demo agent reads, then summarises into `TROUPE_DEMO.md`).
fn serving() -> (Serving, TempDir) {
    let workspace = tempfile::tempdir().expect("a workspace");
    std::fs::write(workspace.path().join("README.md"), "# Remote gadget\n").expect("writes");
    let serving = start_with(workspace.path(), &["--no-store"], &[("TROUPE_SERVER_TOKEN", TOKEN)]);
    (serving, workspace)
}

/// A team led by the example's demo `lead`, whose one member is the agent at `url`,
/// named `reviewer`, its token in `REVIEW_TOKEN`.
fn team(url: &str) -> TempDir {
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
