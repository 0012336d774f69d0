//! End-to-end tests of `troupe run`: the real binary, without a terminal (so `--approve ask`
//! takes its non-interactive path), on a fresh workspace, recording into a store file in
//! the working directory (unless a test says otherwise).

use serde_json::json;
use std::path::Path;
use std::process::{Command, Output};
use tempfile::TempDir;
use troupe_core::{AgentEvent, AgentEventKind, RunOutcomeKind, Usage};
use troupe_testkit::{MockLlmServer, MockTurn};

/// A working directory (no `troupe.toml` but the test's own) and a separate workspace
/// holding a README.
struct Dirs {
    cwd: TempDir,
    workspace: TempDir,
}

impl Dirs {
    fn new() -> Self {
        let dirs =
            Dirs { cwd: tempfile::tempdir().expect("a temp dir"), workspace: tempfile::tempdir().expect("a temp dir") };
        std::fs::write(dirs.workspace.path().join("README.md"), "# Gadget\n\nA gadget for tests.\n")
            .expect("writes the README");
        dirs
    }

    fn workspace(&self) -> &str {
        self.workspace.path().to_str().expect("a UTF-8 temp path")
    }

    fn demo_file(&self) -> std::path::PathBuf {
        self.workspace.path().join("TROUPE_DEMO.md")
    }
}

/// `troupe run ARGS` in the working directory with only `env` set (and `TROUPE_STORE`, a
/// file there, so that the workspace holds nothing but the test's files).
fn troupe(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_troupe"));
    command.arg("run").args(args).current_dir(cwd).env_clear().env("TROUPE_STORE", cwd.join("troupe.db"));
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().expect("the binary runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The value of a row of the summary table.
fn summary_row(err: &str, name: &str) -> Option<String> {
    let line = err.lines().find(|l| l.contains(&format!(" {name} ")))?;
    let cells: Vec<&str> = line.split(['│', '┆']).map(str::trim).filter(|c| !c.is_empty()).collect();
    (cells.first() == Some(&name)).then(|| cells.get(1).map(|c| (*c).to_owned())).flatten()
}

#[test]
fn the_demo_agent_lists_reads_and_writes_a_summary() {
    let dirs = Dirs::new();
    let output = troupe(
        dirs.cwd.path(),
        &["--model", "demo", "--workspace", dirs.workspace(), "--approve", "auto", "Summarise", "this", "repository"],
        &[],
    );
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{err}");

    let summary = std::fs::read_to_string(dirs.demo_file()).expect("TROUPE_DEMO.md was written");
    assert!(summary.contains("README.md") && summary.contains("# Gadget"), "{summary}");
    assert!(summary.contains("Summarise this repository"), "{summary}");

    let text = stdout(&output);
    assert!(text.contains("I wrote a summary to `TROUPE_DEMO.md`"), "{text}");
    assert!(!text.contains('✓'), "tool lines go to stderr: {text}");

    assert!(err.contains("✓ fs.list . (1 entry)"), "{err}");
    assert!(err.contains("✓ fs.read README.md (3 lines)"), "{err}");
    assert!(err.contains("✓ fs.write TROUPE_DEMO.md"), "{err}");
    assert_eq!(summary_row(&err, "outcome").as_deref(), Some("completed"), "{err}");
    assert_eq!(summary_row(&err, "model").as_deref(), Some("demo"), "{err}");
    assert_eq!(summary_row(&err, "steps").as_deref(), Some("4"), "{err}");
    assert_eq!(summary_row(&err, "tool calls").as_deref(), Some("3"), "{err}");
    assert_eq!(summary_row(&err, "cost (USD)").as_deref(), Some("$0.0000"), "{err}");
    for tokens in ["input tokens", "output tokens", "cache read tokens"] {
        let value = summary_row(&err, tokens).unwrap_or_default().replace(',', "");
        assert!(value.parse::<u64>().is_ok_and(|n| n > 0), "{tokens}: {err}");
    }
    assert!(summary_row(&err, "duration").is_some_and(|d| d.ends_with('s')), "{err}");
    assert!(!err.contains('\u{1b}'), "no colours without a terminal: {err}");
}

#[test]
fn json_output_is_the_event_stream_and_nothing_else() {
    let dirs = Dirs::new();
    let output = troupe(
        dirs.cwd.path(),
        &["--model", "demo", "-w", dirs.workspace(), "--approve", "auto", "--json", "Summarise this repository"],
        &[],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let events: Vec<AgentEvent> = stdout(&output)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not an AgentEvent ({e}): {line}")))
        .collect();
    assert!(
        matches!(&events.first().map(|e| &e.kind), Some(AgentEventKind::RunStarted { instruction, model })
            if instruction == "Summarise this repository" && model == "demo"),
        "{:?}",
        events.first()
    );
    let Some(AgentEventKind::RunFinished { outcome, output: Some(answer), usage, .. }) = events.last().map(|e| &e.kind)
    else {
        panic!("the last event is run_finished: {:?}", events.last())
    };
    assert_eq!(*outcome, RunOutcomeKind::Completed);
    assert!(answer.contains("TROUPE_DEMO.md") && usage.output_tokens > 0, "{answer} {usage:?}");
    let seqs: Vec<u64> = events.iter().map(|e| e.attribution.seq).collect();
    assert_eq!(seqs, (0..events.len() as u64).collect::<Vec<_>>(), "one line per event, none left out");
    let results = events.iter().filter(|e| matches!(e.kind, AgentEventKind::ToolCallResult { is_error: false, .. }));
    assert_eq!(results.count(), 3);
    assert!(summary_row(&stderr(&output), "tool calls").is_some(), "the summary is still on stderr");
}

#[test]
fn without_a_terminal_or_a_store_ask_rejects_and_never_rejects_side_effects() {
    for (flags, reason) in [
        (&["--no-store"][..], "no terminal to ask; rerun with --approve auto"),
        (&["--no-store", "--approve", "ask"][..], "no terminal to ask; rerun with --approve auto"),
        (&["--approve", "never"][..], "approvals are off (--approve never)"),
        (&["--no-store", "--approve", "never"][..], "approvals are off (--approve never)"),
    ] {
        let dirs = Dirs::new();
        let mut args = vec!["--model", "demo", "--workspace", dirs.workspace()];
        args.extend_from_slice(flags);
        args.push("Summarise this repository");
        let output = troupe(dirs.cwd.path(), &args, &[]);
        let err = stderr(&output);
        // The demo model answers after the rejection, so the run completes.
        assert_eq!(output.status.code(), Some(0), "{flags:?}: {err}");
        assert!(!dirs.demo_file().exists(), "{flags:?}: the write was rejected, so nothing was written");
        assert!(err.contains(&format!("? fs.write TROUPE_DEMO.md needs approval: rejected ({reason})")), "{err}");
        assert!(err.contains("✗ fs.write TROUPE_DEMO.md: The user rejected this tool call"), "{err}");
        assert!(err.contains("✓ fs.read README.md"), "reads need no approval: {err}");
        let text = stdout(&output);
        assert!(
            text.contains(&format!("I could not write `TROUPE_DEMO.md`: The user rejected this tool call: {reason}.")),
            "{text}"
        );
        assert_eq!(summary_row(&err, "tool calls").as_deref(), Some("3"), "refused calls count: {err}");
        let recorded = !flags.contains(&"--no-store");
        assert_eq!(err.lines().any(|l| l.starts_with("run run_")), recorded, "{flags:?}: {err}");
        assert_eq!(dirs.cwd.path().join("troupe.db").exists(), recorded, "{flags:?}");
    }
}

#[test]
fn without_a_terminal_ask_pauses_the_recorded_run_for_troupe_runs_approve() {
    let dirs = Dirs::new();
    let output = troupe(dirs.cwd.path(), &["--model", "demo", "-w", dirs.workspace(), "Summarise"], &[]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    let id = err.lines().find_map(|l| l.strip_prefix("run ")).expect("the run id is on stderr");
    assert!(err.contains("? fs.write TROUPE_DEMO.md needs approval: `fs.write` may have an effect"), "{err}");
    assert!(
        err.contains(&format!(
            "paused: approve with `troupe runs approve {id} call_demo_3` or reject with `troupe runs reject {id} call_demo_3`"
        )),
        "{err}"
    );
    assert_eq!(summary_row(&err, "outcome").as_deref(), Some("paused"), "{err}");
    assert!(err.ends_with("error: the run paused waiting for approval of fs.write\n"), "{err}");
    assert!(!dirs.demo_file().exists());
    assert!(!stdout(&output).contains("I could not write"), "the model was not told no: {}", stdout(&output));
}

#[test]
fn the_default_store_is_the_workspaces_own_outside_it() {
    let dirs = Dirs::new();
    let data = tempfile::tempdir().expect("a data directory");
    let output = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .args(["run", "--model", "demo", "-w", dirs.workspace(), "--approve", "auto", "--json", "Summarise"])
        .current_dir(dirs.cwd.path())
        .env_clear()
        .env("XDG_DATA_HOME", data.path())
        .output()
        .expect("the binary runs");
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{err}");
    assert!(!dirs.workspace.path().join(".troupe").exists(), "nothing of the record is in the workspace: {err}");
    let stores: Vec<_> = std::fs::read_dir(data.path().join("troupe/workspaces"))
        .expect("the workspaces' stores")
        .flatten()
        .map(|entry| entry.path())
        .collect();
    assert_eq!(stores.len(), 1, "{stores:?}");
    let name = dirs.workspace.path().file_name().and_then(|n| n.to_str()).expect("a name").to_owned();
    assert!(stores[0].file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(&format!("{name}-"))));
    assert!(stores[0].join("troupe.db").is_file());
    let id = err.lines().find_map(|l| l.strip_prefix("run ")).expect("the run id is on stderr");
    let started: AgentEvent =
        serde_json::from_str(stdout(&output).lines().next().unwrap_or_default()).expect("the first event");
    assert_eq!(started.attribution.run_id.to_string(), id, "stdout is still only the events");

    // `troupe runs` finds it from the workspace alone.
    let listed = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .args(["runs", "list", "-w", dirs.workspace()])
        .current_dir(dirs.cwd.path())
        .env_clear()
        .env("XDG_DATA_HOME", data.path())
        .output()
        .expect("the binary runs");
    assert!(stdout(&listed).contains(id), "{}", stderr(&listed));

    // A store an older troupe left in the workspace is still used, with a note to move it.
    let legacy = tempfile::tempdir().expect("a workspace");
    std::fs::create_dir_all(legacy.path().join(".troupe")).expect("its .troupe");
    for file in ["troupe.db", "troupe.db-wal"].iter().filter(|f| stores[0].join(f).exists()) {
        std::fs::copy(stores[0].join(file), legacy.path().join(".troupe").join(file)).expect("an old store");
    }
    let old = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .args(["runs", "list", "-w", legacy.path().to_str().expect("UTF-8")])
        .current_dir(dirs.cwd.path())
        .env_clear()
        .env("XDG_DATA_HOME", data.path())
        .output()
        .expect("the binary runs");
    assert!(stdout(&old).contains(id), "the old store is read: {}", stderr(&old));
    assert!(stderr(&old).contains("is inside the workspace, where the agent's tools and commands can reach it"));
}

#[test]
fn an_exhausted_iteration_limit_exits_1_with_the_reason() {
    let dirs = Dirs::new();
    let output = troupe(
        dirs.cwd.path(),
        &["--model", "demo", "-w", dirs.workspace(), "--max-iterations", "2", "Summarise"],
        &[],
    );
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert_eq!(summary_row(&err, "outcome").as_deref(), Some("max iterations"), "{err}");
    assert_eq!(summary_row(&err, "steps").as_deref(), Some("2"), "{err}");
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("error: the run stopped after 2 model calls") && last.contains("--max-iterations"),
        "{err}"
    );
}

#[test]
fn usage_and_configuration_errors_exit_2() {
    let dirs = Dirs::new();
    let cwd = dirs.cwd.path();
    let workspace = dirs.workspace();
    for args in [
        &["--model", "demo", "--frobnicate", "task"][..],
        &["--model", "demo", "--budget-usd", "lots", "task"][..],
        &["--model", "demo", "--budget-usd", "-1", "task"][..],
        &["--model", "demo", "--max-iterations", "0", "task"][..],
        &["--model", "demo", "--approve", "sometimes", "task"][..],
        &["--model", "demo"][..],
    ] {
        let output = troupe(cwd, args, &[]);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", stderr(&output));
        assert!(output.stdout.is_empty(), "{args:?}");
    }
    let budget = troupe(cwd, &["--budget-usd", "lots", "task"], &[]);
    assert!(stderr(&budget).contains("`lots` is not a number of US dollars"), "{}", stderr(&budget));

    let missing = troupe(cwd, &["--model", "demo", "--workspace", "/definitely/not/here", "task"], &[]);
    assert_eq!(missing.status.code(), Some(2));
    assert_eq!(stderr(&missing), "error: the workspace `/definitely/not/here` does not exist\n");

    let keyless = troupe(cwd, &["--model", "anthropic/claude-sonnet-4-5", "-w", workspace, "task"], &[]);
    assert_eq!(keyless.status.code(), Some(2));
    assert_eq!(stderr(&keyless), "error: ANTHROPIC_API_KEY is not set; export it or pass --model demo\n");
    assert!(!dirs.demo_file().exists());
}

#[test]
fn without_a_model_or_key_it_runs_the_demo_with_a_notice() {
    let dirs = Dirs::new();
    let output = troupe(dirs.cwd.path(), &["-w", dirs.workspace(), "--approve", "auto", "hi"], &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(err.lines().next().is_some_and(|l| l.starts_with("note:") && l.contains("demo")), "{err}");
    assert!(dirs.demo_file().exists());
}

#[test]
fn a_real_provider_runs_tools_and_is_priced() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    let server = runtime.block_on(MockLlmServer::start()).expect("the mock server starts");
    let usage = Usage { input_tokens: 1000, output_tokens: 100, ..Default::default() };
    server.push(
        MockTurn::tool_call("toolu_1", "fs_write", json!({"path": "notes/hello.txt", "content": "hi\n"}))
            .with_usage(usage),
    );
    server.push(MockTurn::text("Wrote notes/hello.txt.").with_usage(usage));
    let dirs = Dirs::new();
    let url = server.url();
    let output = troupe(
        dirs.cwd.path(),
        &[
            "--model",
            "anthropic/claude-sonnet-4-5",
            "-w",
            dirs.workspace(),
            "--approve",
            "auto",
            "--budget-usd",
            "1",
            "Say hi",
        ],
        &[("ANTHROPIC_API_KEY", "sk-ant-fake"), ("ANTHROPIC_BASE_URL", &url)],
    );
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{err}");
    assert_eq!(stdout(&output), "Wrote notes/hello.txt.\n");
    assert_eq!(std::fs::read_to_string(dirs.workspace.path().join("notes/hello.txt")).ok().as_deref(), Some("hi\n"));
    assert!(err.contains("✓ fs.write notes/hello.txt (3 bytes)"), "{err}");
    // Two calls of 1000 × $3 + 100 × $15 per million tokens.
    assert_eq!(summary_row(&err, "cost (USD)").as_deref(), Some("$0.0090"), "{err}");
    assert_eq!(summary_row(&err, "model").as_deref(), Some("anthropic/claude-sonnet-4-5"), "{err}");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let tools = requests[0].body["tools"].as_array().cloned().unwrap_or_default();
    assert!(tools.iter().any(|t| t["name"] == "fs_write") && tools.iter().any(|t| t["name"] == "shell"), "{tools:?}");
    assert!(requests[0].body["system"].to_string().contains("careful coding agent"), "{}", requests[0].body);
    assert!(requests[1].body["messages"].to_string().contains("tool_result"), "{}", requests[1].body);
}

#[test]
fn ctrl_c_cancels_the_run_and_exits_1() {
    use std::io::Read;
    let dirs = Dirs::new();
    let mut child = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .args(["run", "--model", "demo", "-w", dirs.workspace(), "Summarise"])
        .current_dir(dirs.cwd.path())
        .env_clear()
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the binary starts");
    // The first words arrive while the first reply is still streaming.
    // Kept open until the end, so the cancellation is the interrupt's, not a closed pipe's.
    let mut out = child.stdout.take().expect("piped stdout");
    let mut first = [0u8; 4];
    out.read_exact(&mut first).expect("text arrives");
    assert_eq!(&first, b"I'll");
    let signalled = Command::new("kill").args(["-INT", &child.id().to_string()]).status().expect("kill runs");
    assert!(signalled.success());
    let output = child.wait_with_output().expect("the binary ends");
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert_eq!(summary_row(&err, "outcome").as_deref(), Some("cancelled"), "{err}");
    assert!(err.contains("error: the run was cancelled: interrupted (Ctrl-C)"), "{err}");
    assert!(!dirs.demo_file().exists());
    drop(out);
}

#[test]
fn a_spent_budget_stops_the_run_before_the_next_call_and_exits_1() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    let server = runtime.block_on(MockLlmServer::start()).expect("the mock server starts");
    let usage = Usage { input_tokens: 1000, output_tokens: 100, ..Default::default() };
    server.push(MockTurn::tool_call("toolu_1", "fs_list", json!({})).with_usage(usage));
    server.push(MockTurn::text("never sent").with_usage(usage));
    let dirs = Dirs::new();
    let url = server.url();
    let output = troupe(
        dirs.cwd.path(),
        &["-m", "anthropic/claude-sonnet-4-5", "-w", dirs.workspace(), "--budget-usd", "0.001", "List the files"],
        &[("ANTHROPIC_API_KEY", "sk-ant-fake"), ("ANTHROPIC_BASE_URL", &url)],
    );
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert_eq!(server.requests().len(), 1, "the second call would overspend: {err}");
    assert!(err.contains("✓ fs.list (1 entry)"), "{err}");
    assert_eq!(summary_row(&err, "outcome").as_deref(), Some("budget exceeded"), "{err}");
    assert_eq!(summary_row(&err, "cost (USD)").as_deref(), Some("$0.0045"), "{err}");
    assert!(err.ends_with("error: the run stopped: its usd budget ran out (--budget-usd)\n"), "{err}");
}

/// `--sandbox`, over `troupe.toml`'s `[sandbox]`, over the default `workspace-write`: what
/// the command may do, and what the model is told about it.
#[test]
fn the_sandbox_is_the_flags_then_troupe_tomls_then_workspace_write() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    let server = runtime.block_on(MockLlmServer::start()).expect("the mock server starts");
    let url = server.url();
    let run = |dirs: &Dirs, extra: &[&str]| {
        server.push(MockTurn::tool_call("toolu_1", "shell", json!({"command": "echo made > made.txt"})));
        server.push(MockTurn::text("Done."));
        let mut args = vec!["--model", "anthropic/claude-sonnet-4-5", "-w", dirs.workspace(), "--approve", "auto"];
        args.extend_from_slice(extra);
        args.push("Make a file");
        let before = server.requests().len();
        let output = troupe(
            dirs.cwd.path(),
            &args,
            &[("ANTHROPIC_API_KEY", "sk-ant-fake"), ("ANTHROPIC_BASE_URL", &url), ("PATH", "/usr/bin:/bin")],
        );
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        let result = server.requests()[before + 1].body["messages"].to_string();
        (dirs.workspace.path().join("made.txt").exists(), result, stderr(&output))
    };

    let default = Dirs::new();
    let (made, result, _) = run(&default, &[]);
    assert!(made, "workspace-write writes the workspace");
    assert!(result.contains("sandbox: workspace-write ("), "the model is told the sandbox: {result}");

    let configured = Dirs::new();
    std::fs::write(configured.cwd.path().join("troupe.toml"), "[sandbox]\nmode = \"read-only\"\n")
        .expect("troupe.toml");
    let (made, result, _) = run(&configured, &[]);
    assert!(!made, "troupe.toml's read-only writes nothing");
    assert!(result.contains("sandbox: read-only ("), "{result}");

    let (made, result, err) = run(&configured, &["--sandbox", "full"]);
    assert!(made, "--sandbox full wins over troupe.toml");
    assert!(result.contains("sandbox: full (unconfined)"), "{result}");
    assert!(err.contains("sandbox: full: the commands the agent runs are not confined"), "{err}");

    let bad = troupe(default.cwd.path(), &["--sandbox", "open", "-w", default.workspace(), "hi"], &[]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("unknown sandbox mode `open`"), "{}", stderr(&bad));
    std::fs::write(configured.cwd.path().join("troupe.toml"), "[sandbox]\nnetwork = \"yes\"\n").expect("troupe.toml");
    let invalid = troupe(configured.cwd.path(), &["-w", configured.workspace(), "hi"], &[]);
    assert_eq!(invalid.status.code(), Some(2), "{}", stderr(&invalid));
    assert!(stderr(&invalid).contains("troupe.toml:2:11"), "the table's error names its place: {}", stderr(&invalid));
}

/// The agent tries every way to the API key and to the record of its runs, through
/// `shell` and the file tools: the key is in none of what they return (so not in what the
/// model is sent, nor in the run's events or its store), and the store is intact.
#[test]
fn the_agent_reaches_neither_the_key_nor_the_store() {
    const KEY: &str = "sk-ant-the-secret-key-0123456789";
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    let server = runtime.block_on(MockLlmServer::start()).expect("the mock server starts");
    let dirs = Dirs::new();
    let home = tempfile::tempdir().expect("a home");
    let data = home.path().join(".local/share");
    let attempts = [
        "env".to_owned(),
        "cat /proc/$PPID/environ /proc/$PPID/cmdline".to_owned(),
        "for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do cat \"$f\"; done".to_owned(),
        "cat /proc/self/environ; tr '\\0' '\\n' < /proc/1/environ".to_owned(),
        format!("ls -R {0}; cat {0}/troupe/workspaces/*/troupe.db*", data.display()),
        format!("rm -rf {0}/troupe; echo gone > {0}/troupe/workspaces/x", data.display()),
        format!(
            "cat {0}/troupe/workspaces/*/audit.jsonl; echo forged >> {0}/troupe/workspaces/*/audit.jsonl",
            data.display()
        ),
        "ls -a; cat .troupe/troupe.db".to_owned(),
    ];
    let command = attempts.join("; ");
    server.push(MockTurn::tool_call("toolu_1", "shell", json!({"command": command})));
    server.push(MockTurn::tool_call("toolu_2", "fs_list", json!({"path": "."})));
    server.push(MockTurn::tool_call("toolu_3", "fs_read", json!({"path": ".troupe/troupe.db"})));
    server.push(MockTurn::text("Nothing found."));
    // A second run, whose command is refused: a decision for the audit log.
    server.push(MockTurn::tool_call("toolu_4", "shell", json!({"command": "echo refused"})));
    server.push(MockTurn::text("Refused."));
    let url = server.url();
    let data_dir = data.to_str().expect("UTF-8").to_owned();
    let home_dir = home.path().to_str().expect("UTF-8").to_owned();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_troupe"))
            .args(args)
            .current_dir(dirs.cwd.path())
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", &home_dir)
            .env("XDG_DATA_HOME", &data_dir)
            .env("ANTHROPIC_API_KEY", KEY)
            .env("ANTHROPIC_BASE_URL", &url)
            .output()
            .expect("the binary runs")
    };
    let args = ["run", "--model", "anthropic/claude-sonnet-4-5", "-w", dirs.workspace(), "--approve", "auto", "--json"];
    let output = run(&[&args[..], &["Find the key"]].concat());
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{err}");

    let refused =
        run(&["run", "--model", "anthropic/claude-sonnet-4-5", "-w", dirs.workspace(), "--approve", "never", "Echo"]);
    assert_eq!(refused.status.code(), Some(0), "{}", stderr(&refused));

    let requests = server.requests();
    assert_eq!(requests.len(), 6);
    let shell_result = requests[1].body["messages"].to_string();
    assert!(shell_result.contains("Permission denied"), "the attempts were made: {shell_result}");
    for (i, request) in requests.iter().enumerate() {
        assert!(!request.body.to_string().contains(KEY), "request {i} carries the key: {}", request.body);
    }
    assert!(requests[0].headers.iter().any(|(_, v)| v == KEY), "the key is sent where it belongs");
    assert!(!stdout(&output).contains(KEY) && !err.contains(KEY), "the key is not in the run's events");

    let store_dir = std::fs::read_dir(data.join("troupe/workspaces")).expect("the store survived").flatten().next();
    let store_dir = store_dir.expect("the workspace's store").path();
    // The audit log beside the store: the refused command's decision, with its sandbox,
    // and nothing the agent wrote.
    let audit = std::fs::read_to_string(store_dir.join("audit.jsonl")).expect("the audit log");
    let entries: Vec<serde_json::Value> =
        audit.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
    let decision = entries.iter().find(|e| e["tool"] == "shell").unwrap_or_else(|| panic!("no shell entry: {audit}"));
    assert_eq!(
        (decision["decision"].as_str(), decision["sandbox"].as_str()),
        (Some("denied"), Some("workspace-write"))
    );
    assert!(!audit.contains("forged"), "the agent could not write the audit log: {audit}");
    for file in std::fs::read_dir(&store_dir).expect("the store's files").flatten() {
        let bytes = std::fs::read(file.path()).expect("a store file");
        assert!(!String::from_utf8_lossy(&bytes).contains(KEY), "{} holds the key", file.path().display());
    }
    let id = err.lines().find_map(|l| l.strip_prefix("run ")).expect("the run id").to_owned();
    let verify = run(&["runs", "verify", &id, "-w", dirs.workspace()]);
    assert_eq!(verify.status.code(), Some(0), "{}", stderr(&verify));
    assert!(stdout(&verify).contains("ok"), "{}", stdout(&verify));
    assert!(!data.join("troupe/workspaces/x").exists());
    assert!(!dirs.workspace.path().join(".troupe").exists());
}

/// A run that failed because the provider was overloaded is resumed by `troupe runs
/// resume`, which says what it redoes, and completes without running its tool again.
#[test]
fn a_run_failed_for_a_transient_reason_is_resumed() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    let server = runtime.block_on(MockLlmServer::start()).expect("the mock server starts");
    server.push(MockTurn::tool_call("toolu_1", "shell", json!({"command": "echo ran >> log.txt"})));
    server.push(MockTurn::status(529, "overloaded"));
    server.push(MockTurn::text("Logged."));
    let dirs = Dirs::new();
    // No retries by the provider: the overload fails the run at once.
    std::fs::write(dirs.cwd.path().join("troupe.toml"), "[retry]\nmax_retries = 0\n").expect("troupe.toml");
    let url = server.url();
    let env = [("ANTHROPIC_API_KEY", "sk-ant-fake"), ("ANTHROPIC_BASE_URL", url.as_str()), ("PATH", "/usr/bin:/bin")];
    let model = ["--model", "anthropic/claude-sonnet-4-5", "-w", dirs.workspace(), "--approve", "auto"];
    let failed = troupe(dirs.cwd.path(), &[&model[..], &["Log it"]].concat(), &env);
    let err = stderr(&failed);
    assert_eq!(failed.status.code(), Some(1), "{err}");
    let id = err.lines().find_map(|l| l.strip_prefix("run ")).expect("the run id").to_owned();

    let mut resume = Command::new(env!("CARGO_BIN_EXE_troupe"));
    resume.args(["runs", "resume", &id, "-w", dirs.workspace(), "--approve", "auto"]);
    resume.current_dir(dirs.cwd.path()).env_clear().env("TROUPE_STORE", dirs.cwd.path().join("troupe.db"));
    for (name, value) in env {
        resume.env(name, value);
    }
    let resumed = resume.output().expect("the binary runs");
    let err = stderr(&resumed);
    assert_eq!(resumed.status.code(), Some(0), "{err}");
    assert!(err.contains(&format!("run {id} failed (")), "{err}");
    assert!(err.contains("the model call it was making is made again"), "{err}");
    assert_eq!(stdout(&resumed), "Logged.\n");
    assert_eq!(
        std::fs::read_to_string(dirs.workspace.path().join("log.txt")).ok().as_deref(),
        Some("ran\n"),
        "the command ran once"
    );
    assert_eq!(server.requests().len(), 3);
}

/// An agent file's `[sandbox]` confines the commands it runs (over `troupe.toml`'s, under
/// `--sandbox`), and a person asked to approve a command is told the sandbox.
#[test]
fn an_agent_files_sandbox_confines_its_commands_and_approvals_name_it() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    let server = runtime.block_on(MockLlmServer::start()).expect("the mock server starts");
    let url = server.url();
    let dirs = Dirs::new();
    let file = dirs.cwd.path().join("builder.toml");
    let agent_file = |sandbox: &str| {
        format!(
            "[agent]\nid = \"builder\"\nname = \"Builder\"\n\n[provider]\nname = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\n\n\
             [[tools]]\nname = \"shell\"\n\n{sandbox}"
        )
    };
    let run = |approve: &str| {
        let json = approve == "ask";
        server.push(MockTurn::tool_call("toolu_1", "shell", json!({"command": "echo made > made.txt"})));
        server.push(MockTurn::text("Done."));
        let output = Command::new(env!("CARGO_BIN_EXE_troupe"))
            .args(["agent", "run", "--agent-file", file.to_str().expect("UTF-8"), "--prompt", "Make a file"])
            .args(["-w", dirs.workspace(), "--approve", approve])
            .args(json.then_some("--json"))
            .current_dir(dirs.cwd.path())
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("ANTHROPIC_API_KEY", "sk-ant-fake")
            .env("ANTHROPIC_BASE_URL", &url)
            .env("XDG_DATA_HOME", dirs.cwd.path().join("data"))
            .output()
            .expect("the binary runs");
        (dirs.workspace.path().join("made.txt").exists(), format!("{}{}", stderr(&output), stdout(&output)))
    };

    std::fs::write(&file, agent_file("[sandbox]\nmode = \"read-only\"\n")).expect("the agent file");
    let (made, err) = run("auto");
    assert!(!made, "the file's read-only sandbox writes nothing: {err}");

    std::fs::write(&file, agent_file("")).expect("the agent file");
    std::fs::write(dirs.cwd.path().join("troupe.toml"), "[sandbox]\nmode = \"full\"\n").expect("troupe.toml");
    // A `troupe.toml` that loosens the sandbox is used only once trusted.
    let (made, err) = run("auto");
    assert!(!made && err.contains("troupe.toml is not trusted, and it runs commands unconfined"), "{err}");
    let trusted = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .arg("trust")
        .current_dir(dirs.cwd.path())
        .env_clear()
        .env("XDG_DATA_HOME", dirs.cwd.path().join("data"))
        .output()
        .expect("the binary runs");
    assert_eq!(trusted.status.code(), Some(0), "{}", stderr(&trusted));
    // The refused run asked the model nothing: its turns are still queued, as the next run's.
    let (made, err) = run("auto");
    assert!(made, "troupe.toml's full sandbox applies where the file says nothing: {err}");
    assert!(err.contains("note: builder: sandbox full: the commands it runs are not confined"), "{err}");
    std::fs::remove_file(dirs.workspace.path().join("made.txt")).expect("cleaned");

    std::fs::remove_file(dirs.cwd.path().join("troupe.toml")).expect("cleaned");
    let (made, err) = run("ask");
    assert!(!made, "nobody to ask: refused");
    assert!(
        err.contains("(sandbox: workspace-write)"),
        "the question (its `run_paused` event) names the sandbox: {err}"
    );
}

/// A command that is not found exits 127: its line shows a failure, not a tick.
#[test]
fn a_command_that_fails_is_shown_as_failed() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    let server = runtime.block_on(MockLlmServer::start()).expect("the mock server starts");
    let url = server.url();
    server.push(MockTurn::tool_call("toolu_1", "shell", json!({"command": "no-such-command-anywhere"})));
    server.push(MockTurn::tool_call("toolu_2", "shell", json!({"command": "true"})));
    server.push(MockTurn::text("Done."));
    let dirs = Dirs::new();
    let args = ["--model", "anthropic/claude-sonnet-4-5", "-w", dirs.workspace(), "--approve", "auto", "Run it"];
    let env = [("ANTHROPIC_API_KEY", "sk-ant-fake"), ("ANTHROPIC_BASE_URL", url.as_str()), ("PATH", "/usr/bin:/bin")];
    let output = troupe(dirs.cwd.path(), &args, &env);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let err = stderr(&output);
    let failed = err.lines().find(|l| l.contains("no-such-command-anywhere")).expect("a line for the command");
    assert!(failed.contains('✗') && failed.contains("exit code 127"), "{err}");
    let worked = err.lines().find(|l| l.contains("shell") && l.contains("true")).expect("a line for `true`");
    assert!(worked.contains('✓'), "{err}");
}

/// A USD budget on a model without prices would never run out: it is refused, and kept
/// once troupe.toml prices the model.
#[test]
fn a_usd_budget_needs_a_priced_model() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    let server = runtime.block_on(MockLlmServer::start()).expect("the mock server starts");
    let url = server.openai_url();
    let dirs = Dirs::new();
    let env = [("OPENAI_API_KEY", "sk-fake"), ("OPENAI_BASE_URL", url.as_str())];
    let args = ["--model", "openai/house-model-7", "-w", dirs.workspace(), "--budget-usd", "0.5", "Say hi"];
    let refused = troupe(dirs.cwd.path(), &args, &env);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    let err = stderr(&refused);
    assert!(err.contains("--budget-usd 0.5 cannot be kept") && err.contains("openai/house-model-7"), "{err}");
    assert!(server.requests().is_empty(), "nothing was spent");

    std::fs::write(
        dirs.cwd.path().join("troupe.toml"),
        "[models.\"openai/house-model-7\"]\ncontext_window = 32000\nmax_output_tokens = 4096\ninput_price = 1.0\noutput_price = 2.0\n",
    )
    .expect("troupe.toml");
    server.push(MockTurn::text("hi"));
    let priced = troupe(dirs.cwd.path(), &args, &env);
    assert_eq!(priced.status.code(), Some(0), "{}", stderr(&priced));
    assert_eq!(stdout(&priced), "hi\n");
}

/// At a terminal, a person deciding on a write sees the diff it would make; a `no` asks
/// why and the model is told; `edit` opens the arguments in `$EDITOR`, and the edited
/// call is the one that runs.
#[test]
fn at_a_terminal_a_write_is_shown_as_a_diff_refused_with_a_reason_and_edited_in_the_editor() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    let server = runtime.block_on(MockLlmServer::start()).expect("the mock server starts");
    let url = server.url();
    server.push(MockTurn::tool_call("toolu_1", "fs_write", json!({"path": "hello.txt", "content": "greetings\n"})));
    server.push(MockTurn::tool_call("toolu_2", "fs_write", json!({"path": "hello.txt", "content": "greetings\n"})));
    server.push(MockTurn::text("Done."));
    let dirs = Dirs::new();
    std::fs::write(dirs.workspace.path().join("hello.txt"), "hi\n").expect("the file as it is");
    let mut command = Command::new(env!("CARGO_BIN_EXE_troupe"));
    command
        .args(["run", "--no-store", "--model", "anthropic/claude-sonnet-4-5", "-w", dirs.workspace(), "Greet"])
        .current_dir(dirs.cwd.path())
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("ANTHROPIC_API_KEY", "sk-ant-fake")
        .env("ANTHROPIC_BASE_URL", &url)
        // The editor the person uses: it changes the greeting in the file it is given.
        .env("EDITOR", "sed -i s/greetings/howdy/");
    let answers = ["n\nthe tone is wrong", "e"];
    let (output, shown) = troupe_testkit::terminal::at_a_terminal(&mut command, &["[e]dit"], &answers);
    assert_eq!(output.status.code(), Some(0), "{shown}");
    assert!(shown.contains("--- a/hello.txt") && shown.contains("-hi") && shown.contains("+greetings"), "{shown}");
    assert!(shown.contains("Why not?"), "{shown}");
    let requests = server.requests();
    assert!(
        requests[1].body["messages"].to_string().contains("the user said no: the tone is wrong"),
        "the model is told why: {}",
        requests[1].body["messages"]
    );
    assert_eq!(
        std::fs::read_to_string(dirs.workspace.path().join("hello.txt")).expect("the file"),
        "howdy\n",
        "the edited call ran: {shown}"
    );
}

/// `--continue` picks up the newest run's conversation (or the one named), the task as
/// its next message: the model sees the earlier task and answer.
#[test]
fn continue_carries_the_conversation_on() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    let server = runtime.block_on(MockLlmServer::start()).expect("the mock server starts");
    let url = server.url();
    let dirs = Dirs::new();
    let env = [("ANTHROPIC_API_KEY", "sk-ant-fake"), ("ANTHROPIC_BASE_URL", url.as_str())];
    let model = ["--model", "anthropic/claude-sonnet-4-5", "-w", dirs.workspace()];
    let run = |extra: &[&str], task: &str| {
        let mut args: Vec<&str> = model.to_vec();
        args.extend_from_slice(extra);
        args.push(task);
        troupe(dirs.cwd.path(), &args, &env)
    };
    server.push(MockTurn::text("The capital of France is Paris."));
    let first = run(&[], "What is the capital of France?");
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    let first_id = stderr(&first).lines().find_map(|l| l.strip_prefix("run ")).expect("the run id").to_owned();

    server.push(MockTurn::text("About 2.1 million people."));
    let second = run(&["--continue"], "And how many people live there?");
    assert_eq!(second.status.code(), Some(0), "{}", stderr(&second));
    assert!(stderr(&second).contains(&format!("continuing run {first_id}")), "{}", stderr(&second));
    let sent = server.requests()[1].body["messages"].to_string();
    for said in ["What is the capital of France?", "The capital of France is Paris.", "how many people live there"] {
        assert!(sent.contains(said), "the model sees `{said}`: {sent}");
    }

    // Named by the start of its id: the first run again, without the second's turn.
    server.push(MockTurn::text("Lyon."));
    let prefix = format!("--continue={}", &first_id[..24]);
    let third = run(&[&prefix], "And the second city?");
    assert_eq!(third.status.code(), Some(0), "{}", stderr(&third));
    let sent = server.requests()[2].body["messages"].to_string();
    assert!(sent.contains("The capital of France is Paris.") && !sent.contains("2.1 million"), "{sent}");

    let nothing = troupe(dirs.cwd.path(), &["--continue", "--no-store", "x"], &env);
    assert_eq!(nothing.status.code(), Some(2), "--continue needs the store: {}", stderr(&nothing));
}

/// `troupe chat -w DIR` at a terminal: a session. Two turns, the second seeing the first;
/// an approval with its diff inline; slash commands; then `troupe run --continue` picks
/// the conversation up after the session ended.
#[test]
fn a_session_talks_turn_after_turn_and_run_continue_picks_it_up() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    let server = runtime.block_on(MockLlmServer::start()).expect("the mock server starts");
    let url = server.url();
    server.push(MockTurn::tool_call("toolu_1", "fs_write", json!({"path": "hello.txt", "content": "hello\n"})));
    server.push(MockTurn::text("I wrote hello.txt."));
    server.push(MockTurn::text("It says hello."));
    server.push(MockTurn::text("Nothing before."));
    let dirs = Dirs::new();
    let store = dirs.cwd.path().join("troupe.db");
    let store = store.to_str().expect("a UTF-8 path");
    let env = [("ANTHROPIC_API_KEY", "sk-ant-fake"), ("ANTHROPIC_BASE_URL", url.as_str()), ("PATH", "/usr/bin:/bin")];
    let mut command = Command::new(env!("CARGO_BIN_EXE_troupe"));
    command
        .args(["chat", "--model", "anthropic/claude-sonnet-4-5", "-w", dirs.workspace(), "--store", store])
        .current_dir(dirs.cwd.path())
        .env_clear()
        .envs(env);
    std::fs::write(dirs.workspace.path().join("hello.txt"), "hi\n").expect("the file as it was");
    let answers = [
        "Write a greeting to hello.txt",
        "y",
        "What does it say?",
        "/cost",
        "/model nosuch/x",
        "/undo",
        "/undo",
        "/clear",
        "Fresh start?",
        "/model demo",
        "/exit",
    ];
    let (output, shown) = troupe_testkit::terminal::at_a_terminal(&mut command, &["› ", "[e]dit"], &answers);
    assert_eq!(output.status.code(), Some(0), "{shown}");
    assert!(shown.contains("-hi") && shown.contains("+hello"), "the approval shows the diff: {shown}");
    assert_eq!(stdout(&output), "I wrote hello.txt.\nIt says hello.\nNothing before.\n", "{shown}");
    // `/undo` put the file back as it was before the turn that wrote it; a second has nothing left.
    assert_eq!(std::fs::read_to_string(dirs.workspace.path().join("hello.txt")).expect("the file"), "hi\n");
    assert!(shown.contains("hello.txt restored") && shown.contains("no file change to undo"), "{shown}");
    // The second turn's request holds the first turn whole.
    let second = server.requests()[2].body["messages"].to_string();
    assert!(second.contains("Write a greeting to hello.txt") && second.contains("I wrote hello.txt."), "{second}");
    assert!(shown.contains("2 turns; tokens: in"), "/cost: {shown}");
    assert!(shown.contains("cannot use nosuch/x"), "/model refuses an unknown provider: {shown}");
    assert!(shown.contains("the next turns use demo"), "/model takes a known one: {shown}");
    // After /clear, the model sees nothing of the turns before.
    let fresh = server.requests()[3].body["messages"].to_string();
    assert!(fresh.contains("Fresh start?") && !fresh.contains("hello.txt"), "{fresh}");

    server.push(MockTurn::text("Yes, hello."));
    let later = troupe(
        dirs.cwd.path(),
        &[
            "--model",
            "anthropic/claude-sonnet-4-5",
            "-w",
            dirs.workspace(),
            "--store",
            store,
            "--continue",
            "Still there?",
        ],
        &env,
    );
    assert_eq!(later.status.code(), Some(0), "{}", stderr(&later));
    // The newest run is the session's last turn: its conversation goes on.
    let sent = server.requests()[4].body["messages"].to_string();
    assert!(
        sent.contains("Fresh start?") && sent.contains("Nothing before.") && sent.contains("Still there?"),
        "{sent}"
    );
    assert!(!sent.contains("What does it say?"), "{sent}");
}

/// Ctrl-C in a session stops the turn under way, not the session: the next turn runs.
#[test]
fn ctrl_c_in_a_session_stops_the_turn_and_the_session_goes_on() {
    use troupe_testkit::terminal::{INTERRUPT, at_a_terminal};
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    let server = runtime.block_on(MockLlmServer::start()).expect("the mock server starts");
    let url = server.url();
    // Answered by what was asked: the first turn may be stopped before its request is sent.
    server.respond_with(|request| {
        let messages = request.body["messages"].to_string();
        if messages.contains("Are you there?") {
            MockTurn::text("Here I am.")
        } else {
            MockTurn::text("a very slow answer").with_latency(std::time::Duration::from_secs(60))
        }
    });
    let dirs = Dirs::new();
    let mut command = Command::new(env!("CARGO_BIN_EXE_troupe"));
    command
        .args(["chat", "--model", "anthropic/claude-sonnet-4-5", "-w", dirs.workspace()])
        .current_dir(dirs.cwd.path())
        .env_clear()
        .env("TROUPE_STORE", dirs.cwd.path().join("troupe.db"))
        .envs([("ANTHROPIC_API_KEY", "sk-ant-fake"), ("ANTHROPIC_BASE_URL", url.as_str()), ("PATH", "/usr/bin:/bin")]);
    let started = std::time::Instant::now();
    let answers = ["Tell me slowly", INTERRUPT, "Are you there?", "/exit"];
    let (output, shown) = at_a_terminal(&mut command, &["› ", "Ctrl-C stops this turn"], &answers);
    assert_eq!(output.status.code(), Some(0), "{shown}");
    assert!(started.elapsed() < std::time::Duration::from_secs(50), "the slow turn was stopped: {shown}");
    assert!(shown.contains("the run was cancelled"), "{shown}");
    assert_eq!(stdout(&output), "Here I am.\n", "{shown}");
}

/// `troupe` alone opens a session at a terminal; without one it prints the usage and
/// exits 2.
#[test]
fn troupe_alone_is_a_session_at_a_terminal_and_the_usage_elsewhere() {
    let dirs = Dirs::new();
    let mut command = Command::new(env!("CARGO_BIN_EXE_troupe"));
    command.current_dir(dirs.workspace.path()).env_clear().env("TROUPE_STORE", dirs.cwd.path().join("troupe.db"));
    let (output, shown) = troupe_testkit::terminal::at_a_terminal(&mut command, &["› "], &["/help", "/exit"]);
    assert_eq!(output.status.code(), Some(0), "{shown}");
    assert!(shown.contains("troupe session on") && shown.contains("with demo"), "{shown}");
    assert!(shown.contains("/undo") && shown.contains("/model ID"), "/help lists the commands: {shown}");

    let piped = Command::new(env!("CARGO_BIN_EXE_troupe")).env_clear().output().expect("the binary runs");
    assert_eq!(piped.status.code(), Some(2));
    assert!(stdout(&piped).contains("Usage: troupe"), "{}", stdout(&piped));
}

/// `--output-schema FILE`: the schema goes to the model, a mismatch is sent back, and the
/// matching document is what stdout shows; one never corrected exits 1 `output_invalid`;
/// a schema file that cannot be one is a usage error.
#[test]
fn an_output_schema_makes_the_answer_a_matching_json_document() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    let server = runtime.block_on(MockLlmServer::start()).expect("the mock server starts");
    let url = server.openai_url();
    let dirs = Dirs::new();
    let schema = dirs.cwd.path().join("verdict.json");
    std::fs::write(
        &schema,
        r#"{"type": "object", "properties": {"approved": {"type": "boolean"}}, "required": ["approved"], "additionalProperties": false}"#,
    )
    .expect("the schema file");
    let schema = schema.to_str().expect("UTF-8");
    let env = [("OPENAI_API_KEY", "sk-fake"), ("OPENAI_BASE_URL", url.as_str())];
    let args = ["--model", "openai/gpt-4o", "-w", dirs.workspace(), "--output-schema", schema, "Review it"];

    server.push(MockTurn::text("Looks good to me."));
    server.push(MockTurn::text(r#"{"approved": true}"#));
    let typed = troupe(dirs.cwd.path(), &args, &env);
    assert_eq!(typed.status.code(), Some(0), "{}", stderr(&typed));
    assert!(stdout(&typed).ends_with("{\"approved\": true}\n"), "{}", stdout(&typed));
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "one correction");
    assert_eq!(requests[0].body["response_format"]["json_schema"]["name"], json!("verdict"));
    assert_eq!(requests[0].body["response_format"]["json_schema"]["strict"], json!(true));
    assert!(requests[1].body.to_string().contains("not a JSON document"));

    for _ in 0..3 {
        server.push(MockTurn::text("Yes."));
    }
    let never = troupe(dirs.cwd.path(), &args, &env);
    assert_eq!(never.status.code(), Some(1), "{}", stderr(&never));
    assert!(stderr(&never).contains("did not match the output schema"), "{}", stderr(&never));

    // The demo model answers with a document of the schema.
    let demo_args = ["--model", "demo", "-w", dirs.workspace(), "--approve", "auto", "--output-schema", schema, "hi"];
    let demo = troupe(dirs.cwd.path(), &demo_args, &[]);
    assert_eq!(demo.status.code(), Some(0), "{}", stderr(&demo));
    let document: serde_json::Value =
        serde_json::from_str(stdout(&demo).trim().lines().last().unwrap_or_default()).expect("JSON on stdout");
    assert_eq!(document, json!({"approved": true}));

    std::fs::write(dirs.cwd.path().join("list.json"), r#"{"type": "array"}"#).expect("a file");
    for (file, message) in [("list.json", "must describe a JSON object"), ("nothing.json", "cannot read it")] {
        let path = dirs.cwd.path().join(file);
        let bad =
            troupe(dirs.cwd.path(), &["--model", "demo", "--output-schema", path.to_str().expect("UTF-8"), "hi"], &[]);
        assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
        assert!(stderr(&bad).contains(message), "{}", stderr(&bad));
    }
}

#[test]
fn attached_files_go_with_the_task_and_bad_ones_are_refused_before_any_call() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    let server = runtime.block_on(MockLlmServer::start()).expect("the mock server starts");
    server.push(MockTurn::text("A chart and a spec."));
    let dirs = Dirs::new();
    let png = [0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A, 7];
    std::fs::write(dirs.cwd.path().join("chart.png"), png).expect("a png");
    std::fs::write(dirs.cwd.path().join("spec.pdf"), b"%PDF-1.4\n").expect("a pdf");
    std::fs::write(dirs.cwd.path().join("notes.txt"), "hello").expect("a text file");
    std::fs::write(dirs.cwd.path().join("huge.png"), [&png[..], &vec![0; 5 * 1024 * 1024]].concat())
        .expect("a big png");
    let url = server.url();
    let env = [("ANTHROPIC_API_KEY", "sk-ant-fake"), ("ANTHROPIC_BASE_URL", url.as_str())];
    let model = ["--model", "anthropic/claude-sonnet-4-5", "-w", dirs.workspace(), "--no-store"];
    let ok = troupe(
        dirs.cwd.path(),
        &[&model[..], &["--attach", "chart.png", "--attach", "spec.pdf", "What are these?"]].concat(),
        &env,
    );
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    assert_eq!(stdout(&ok), "A chart and a spec.\n");
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let content = &requests[0].body["messages"][0]["content"];
    let kinds: Vec<&str> = content.as_array().expect("blocks").iter().filter_map(|b| b["type"].as_str()).collect();
    assert_eq!(kinds, ["text", "image", "document"], "{content}");
    assert_eq!(content[2]["source"]["media_type"], "application/pdf");

    for (file, why) in [
        ("notes.txt", "cannot attach notes.txt: it is text"),
        ("huge.png", "over the 5242880 bytes an image may have"),
        ("missing.pdf", "cannot attach missing.pdf:"),
    ] {
        let refused = troupe(dirs.cwd.path(), &[&model[..], &["--attach", file, "What is it?"]].concat(), &env);
        assert_eq!(refused.status.code(), Some(2), "{file}: {}", stderr(&refused));
        assert!(stderr(&refused).contains(why), "{file}: {}", stderr(&refused));
    }
    assert_eq!(server.requests().len(), 1, "no call for a refused attachment");
}
