//! End-to-end tests of `troupe team`: the real binary running the shipped example team
//! (`examples/team`) and the fixture teams on the demo model, in temp workspaces.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use tempfile::TempDir;
use troupe::store::EvidenceKind;
use troupe_core::Usage;
use troupe_testkit::{MockLlmServer, MockTurn};

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn example() -> PathBuf {
    root().join("examples/team")
}

fn fixtures() -> PathBuf {
    root().join("crates/troupe-testkit/fixtures")
}

/// A workspace holding a README whose first line is `first_line`.
fn workspace(first_line: &str) -> TempDir {
    let dir = tempfile::tempdir().expect("a temp dir");
    std::fs::write(dir.path().join("README.md"), format!("{first_line}\n\nA gadget for tests.\n")).expect("writes");
    dir
}

/// `troupe team ARGS` in `cwd` with an empty environment (no key: every agent is on the
/// demo model).
fn team(cwd: &Path, args: &[&str]) -> Output {
    team_with(cwd, args, &[])
}

/// `troupe team ARGS` in `cwd` with only `env` (and `PATH`) set.
fn team_with(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    troupe_with(cwd, "team", args, env)
}

/// `troupe COMMAND ARGS` in `cwd` with only `env` (and `PATH`) set.
fn troupe_with(cwd: &Path, command_name: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_troupe"));
    command.arg(command_name).args(args).current_dir(cwd).env_clear();
    // Process members find their shell and programs.
    if let Some(path) = std::env::var_os("PATH") {
        command.env("PATH", path);
    }
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

fn text(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}

/// The summary table's row of `member`, as cells.
fn row(err: &str, member: &str) -> Vec<String> {
    let line = err.lines().find(|l| l.starts_with(&format!("│ {member} "))).unwrap_or_default();
    line.split(['│', '┆']).map(str::trim).filter(|c| !c.is_empty()).map(str::to_owned).collect()
}

/// The example team file with `edit` applied, written next to a copy of its agents.
fn edited_example(edit: impl Fn(&str) -> String) -> TempDir {
    copied_example("team.toml", edit)
}

/// The example team file `name` with `edit` applied, written next to a copy of its agents
/// and its report schemas.
fn copied_example(name: &str, edit: impl Fn(&str) -> String) -> TempDir {
    let dir = tempfile::tempdir().expect("a temp dir");
    let team = std::fs::read_to_string(example().join(name)).expect("reads the example");
    std::fs::write(dir.path().join(name), edit(&team)).expect("writes the team file");
    for sub in ["agents", "schemas"] {
        std::fs::create_dir_all(dir.path().join(sub)).expect("creates the directory");
        for entry in std::fs::read_dir(example().join(sub)).expect("lists the example's files") {
            let path = entry.expect("an entry").path();
            std::fs::copy(&path, dir.path().join(sub).join(path.file_name().expect("a name"))).expect("copies");
        }
    }
    dir
}

#[test]
fn the_shipped_example_delegates_to_each_teammate() {
    let workspace = workspace("# Gadget");
    let team_file = example().join("team.toml");
    let output = team(
        workspace.path(),
        &["run", text(&team_file), "Describe", "this", "repository", "-w", text(workspace.path()), "--approve", "auto"],
    );
    let (out, err) = (stdout(&output), stderr(&output));
    assert_eq!(output.status.code(), Some(0), "{err}");
    assert!(out.starts_with("The team worked on “Describe this repository”"), "{out}");
    for teammate in ["researcher", "reviewer", "writer"] {
        let report = out.lines().find(|l| l.starts_with(&format!("- {teammate}: "))).unwrap_or_default();
        assert!(report.contains("“Gadget”"), "{teammate}'s finding reached the leader: {out}");
        assert!(err.contains(&format!("[{teammate}] started on demo, delegated by lead")), "{err}");
        assert!(err.contains(&format!("[{teammate}] ✓ fs.read README.md")), "{err}");
        assert!(err.contains(&format!("[{teammate}] finished: completed,")), "{err}");
        assert!(err.contains(&format!("[lead] ✓ delegate → {teammate}")), "{err}");
        // The researcher runs as a worker process, sandboxed; the reviewer in this process.
        let isolation = if teammate == "researcher" { "process" } else { "local" };
        let cells = row(&err, teammate);
        assert_eq!(cells.get(1..5), Some(&["member", isolation, "1", "completed"].map(String::from)[..]), "{err}");
    }
    assert!(err.contains("[researcher] worker sandbox:"), "the worker reports its sandbox: {err}");
    assert!(err.contains("[lead] started on demo") && err.contains("[lead] finished: completed"), "{err}");
    assert_eq!(row(&err, "lead").get(1..5), Some(&["leader", "local", "1", "completed"].map(String::from)[..]));
    assert_eq!(row(&err, "team").get(1), Some(&"4".to_owned()), "four member calls in all: {err}");
    assert!(err.contains("[writer] ✓ fs.write TROUPE_DEMO.md"), "{err}");
    assert!(workspace.path().join("TROUPE_DEMO.md").exists(), "the writer wrote its summary");
    assert!(err.contains("firewall: 3 reports passed, 0 dropped"), "{err}");
    assert!(!out.contains('✓') && !out.contains("[lead]"), "progress stays on stderr: {out}");
}

#[test]
fn the_typed_reports_example_passes_data_and_the_firewall_withholds_a_field() {
    let workspace = workspace("# Gadget");
    let team_file = example().join("reports.toml");
    let output = team(
        workspace.path(),
        &["run", text(&team_file), "Describe", "this", "repository", "-w", text(workspace.path())],
    );
    let (out, err) = (stdout(&output), stderr(&output));
    assert_eq!(output.status.code(), Some(0), "{err}");
    // The researcher, a worker process, ended with the structured report: the leader quotes
    // its summary. The reviewer's verdict is a document of its own schema.
    let researcher = out.lines().find(|l| l.starts_with("- researcher: ")).unwrap_or_default();
    assert!(researcher.contains("“Gadget”") && !researcher.contains('{'), "{out}");
    let reviewer = out.lines().find(|l| l.starts_with("- reviewer: ")).unwrap_or_default();
    let verdict: serde_json::Value =
        serde_json::from_str(reviewer.trim_start_matches("- reviewer: ")).expect("the verdict is JSON");
    assert!(verdict["approved"].is_boolean() && verdict["findings"].is_array(), "{verdict}");
    assert_eq!(row(&err, "researcher").get(1..5), Some(&["member", "process", "1", "completed"].map(String::from)[..]));
    assert!(err.contains("[firewall] withheld `artifacts` of a report researcher -> lead"), "{err}");
    assert!(
        err.contains("firewall: 2 reports passed, 0 dropped, 0 secrets redacted, 1 report field withheld"),
        "{err}"
    );

    // The team's record keeps each report as the leader read it.
    let path = workspace.path().join(".troupe/troupe.db");
    let root = err.lines().find_map(|l| l.strip_prefix("team run ")).and_then(|l| l.split_whitespace().next());
    let root = root.expect("the team's run is named").to_owned();
    let evidence =
        tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime").block_on(async {
            let store = troupe::store::open(&path.display().to_string()).await.expect("the store opens");
            store.evidence(&root, 0).await.expect("reads")
        });
    let reports: Vec<&serde_json::Value> =
        evidence.iter().filter(|e| e.kind == EvidenceKind::ReportReceived).map(|e| e.payload.value()).collect();
    let from = |member: &str| reports.iter().find(|r| r["member"] == member).copied().expect("a report");
    assert!(from("researcher")["structured"]["summary"].as_str().is_some_and(|s| s.contains("Gadget")));
    assert_eq!(from("researcher")["structured"].get("artifacts"), None, "{reports:?}");
    assert_eq!(from("researcher")["withheld_fields"], serde_json::json!(["artifacts"]));
    assert!(from("reviewer")["structured"]["approved"].is_boolean(), "{reports:?}");
}

/// The README's main job: the team's answer is made of what its members found in the
/// repository they read — each by its role — not of what they were asked.
#[test]
fn the_main_job_answers_with_facts_the_members_read() {
    let readme = "# Gadget\n\nGadget turns widgets into gizmos. It is fast.\n\n## Install\n\n```sh\nmake install\n```\n\n\
                  ## Usage\n\nRun it.\n\n## Roadmap\n\nTODO: plugins\n";
    let workspace = workspace(readme);
    let team_file = example().join("team.toml");
    let ws = text(workspace.path());
    let output =
        team(workspace.path(), &["run", text(&team_file), "Describe this repository", "-w", ws, "--approve", "auto"]);
    let (out, err) = (stdout(&output), stderr(&output));
    assert_eq!(output.status.code(), Some(0), "{err}");
    let report = |who: &str| out.lines().find(|l| l.starts_with(&format!("- {who}: "))).unwrap_or_default().to_owned();
    let facts = [
        // What the researcher read: the title, the first sentence, the sections.
        (report("researcher"), "Gadget turns widgets into gizmos."),
        (report("researcher"), "Install, Usage, Roadmap"),
        // What the reviewer judged: its sections, its examples, what is left to do.
        (report("reviewer"), "3 sections, 1 code examples, 1 TODO or FIXME lines"),
        (report("reviewer"), "names no license"),
        // What the writer wrote.
        (report("writer"), "I wrote `TROUPE_DEMO.md`"),
    ];
    for (line, fact) in &facts {
        assert!(line.contains(fact), "`{fact}` is not in the answer's line {line:?}: {out}");
    }
    assert!(!out.contains("your part, as"), "the answer is the findings, not the briefs: {out}");
    // Each acted by its role: only the writer wrote.
    assert!(!err.contains("[researcher] ✓ fs.write") && !err.contains("[reviewer] ✓ fs.write"), "{err}");
    let summary = std::fs::read_to_string(workspace.path().join("TROUPE_DEMO.md")).expect("the writer's summary");
    assert!(
        summary.contains("Gadget turns widgets into gizmos.") && summary.contains("Install, Usage, Roadmap"),
        "{summary}"
    );
    // The first line on screen is the team, not a note.
    assert!(err.starts_with("team `project`"), "{err}");
}

/// Every strategy has an offline example next to the main one, and each answers with
/// what its members found in the repository.
#[test]
fn each_strategy_has_an_offline_example_that_answers_from_the_files() {
    for (file, strategy, members) in [
        ("orchestrated.toml", "orchestrated", &["researcher", "reviewer", "writer"][..]),
        ("parallel.toml", "parallel", &["researcher", "reviewer"][..]),
        ("pipeline.toml", "pipeline", &["researcher", "writer"][..]),
    ] {
        let workspace = workspace("# Gadget");
        let team_file = example().join(file);
        let ws = text(workspace.path());
        let output = team(
            workspace.path(),
            &["run", text(&team_file), "Describe this repository", "-w", ws, "--approve", "auto"],
        );
        let (out, err) = (stdout(&output), stderr(&output));
        assert_eq!(output.status.code(), Some(0), "{file}: {err}");
        assert!(err.contains(&format!("({strategy})")), "{file}: {err}");
        for member in members {
            assert!(err.contains(&format!("[{member}] finished: completed")), "{file}: {err}");
        }
        // The answer carries what was read, not only what was asked.
        assert!(out.contains("“Gadget”"), "{file}: {out}");
    }
}

#[test]
fn an_undeclared_channel_withholds_the_report() {
    let dir = edited_example(|team| {
        team.replace(
            r#"channels = ["researcher -> lead", "reviewer -> lead", "writer -> lead"]"#,
            r#"channels = ["researcher -> lead", "writer -> lead"]"#,
        )
    });
    let workspace = workspace("# Gadget");
    let output =
        team(dir.path(), &["run", "team.toml", "Describe this", "-w", text(workspace.path()), "--approve", "never"]);
    let (out, err) = (stdout(&output), stderr(&output));
    assert_eq!(output.status.code(), Some(0), "{err}");
    assert!(out.contains("- researcher: `README.md` is “Gadget”"), "the declared channel passes: {out}");
    assert!(
        out.contains("- reviewer: [firewall] the report of `reviewer` to `lead` was withheld"),
        "the leader read a notice instead of the report: {out}"
    );
    assert!(err.contains("[firewall] dropped a report reviewer -> lead: no channel is declared"), "{err}");
    assert!(err.contains("firewall: 2 reports passed, 1 dropped"), "{err}");
}

#[test]
fn secrets_are_redacted_before_the_leader_reads_a_report() {
    let secret = "sk-ant-api03-abcdefghijklmnopqrstuv";
    let workspace = workspace(&format!("# Gadget {secret}"));
    let team_file = example().join("team.toml");
    let output = team(
        workspace.path(),
        &["run", text(&team_file), "Describe", "-w", text(workspace.path()), "--json", "--approve", "never"],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let events: Vec<serde_json::Value> =
        stdout(&output).lines().map(|l| serde_json::from_str(l).expect("JSON lines only")).collect();
    let seen_by_lead: Vec<&str> = events
        .iter()
        .filter(|e| e["agent_id"] == "lead" && e["type"] == "tool_call_result")
        .filter_map(|e| e["content"].as_str())
        .collect();
    assert_eq!(seen_by_lead.len(), 3, "{seen_by_lead:?}");
    for report in seen_by_lead {
        assert!(!report.contains(secret) && report.contains("[REDACTED]"), "{report}");
    }
    let last = events.last().expect("a last line");
    assert_eq!(last["type"], "team_finished");
    assert_eq!(last["firewall"]["passed"], 3);
    assert!(last["firewall"]["secrets_redacted"].as_u64() >= Some(2), "{last}");
}

#[test]
fn unknown_members_are_named_and_exit_2() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let file = "[team]\nname = \"t\"\nstrategy = \"parallel\"\n\n[[team.members]]\nagent = \"researcher\"\n\n\
                [[team.members]]\nagent = \"ghost\"\n";
    std::fs::write(dir.path().join("team.toml"), file).expect("writes the team file");
    let agents = example().join("agents/..");
    let output = team(dir.path(), &["run", "team.toml", "x", "--config-dir", text(&agents)]);
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert!(
        err.contains("team.toml:9:9: unknown agent `ghost` (a member): the agents are lead, researcher, reviewer"),
        "{err}"
    );
    let validate = team(dir.path(), &["validate", "team.toml", "--config-dir", text(&agents)]);
    assert_eq!(validate.status.code(), Some(2));

    std::fs::write(dir.path().join("bad.toml"), "[team]\nname = \"t\"\nstrategy = \"solo\"\n").expect("writes");
    let bad = team(dir.path(), &["run", "bad.toml", "x"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("bad.toml:3:12: `strategy` in [team] cannot be \"solo\""), "{}", stderr(&bad));
}

#[test]
fn a_parallel_fixture_team_gathers_every_answer() {
    let workspace = workspace("# Gadget");
    let team_file = fixtures().join("teams/review.toml");
    let config = fixtures();
    let ok = team(workspace.path(), &["validate", text(&team_file), "--config-dir", text(&config)]);
    assert_eq!(stdout(&ok).trim(), "ok: team `review` (parallel), 2 agents", "{}", stderr(&ok));
    let output = team(
        workspace.path(),
        &["run", text(&team_file), "Review this", "-w", text(workspace.path()), "--config-dir", text(&config)],
    );
    let (out, err) = (stdout(&output), stderr(&output));
    assert_eq!(output.status.code(), Some(0), "{err}");
    assert!(out.contains("## reviewer") && out.contains("## summarizer"), "{out}");
    assert!(err.contains("[reviewer] finished: completed") && err.contains("[summarizer] finished: completed"));
}

#[test]
fn a_process_member_runs_in_a_worker() {
    let dir = edited_example(|team| {
        team.replace("agent = \"reviewer\"\nisolation = \"local\"", "agent = \"reviewer\"\nisolation = \"process\"")
    });
    let workspace = workspace("# Gadget");
    let output =
        team(dir.path(), &["run", "team.toml", "Describe this", "-w", text(workspace.path()), "--approve", "never"]);
    let (out, err) = (stdout(&output), stderr(&output));
    assert_eq!(output.status.code(), Some(0), "{err}");
    assert!(
        out.contains("- reviewer: `README.md` (“Gadget”)") && out.contains("- researcher: `README.md` is “Gadget”"),
        "{out}"
    );
    assert!(err.contains("[reviewer] worker sandbox:"), "the worker's first event: {err}");
    assert_eq!(row(&err, "reviewer").get(1..5), Some(&["member", "process", "1", "completed"].map(String::from)[..]));
}

#[test]
fn the_team_budget_stops_every_member() {
    let dir = edited_example(|team| team.replace("max_total_tokens = 200000", "max_total_tokens = 100"));
    let workspace = workspace("# Gadget");
    let output = team(dir.path(), &["run", "team.toml", "Describe this", "-w", text(workspace.path())]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert!(err.contains("budget ran out"), "{err}");
}

/// Puts `lines` in place of the example agent `agent`'s `model = "demo"`.
fn set_model(dir: &TempDir, agent: &str, lines: &str) {
    let path = dir.path().join(format!("agents/{agent}.toml"));
    let file = std::fs::read_to_string(&path).expect("reads the agent");
    std::fs::write(&path, file.replace("model = \"demo\"", lines)).expect("writes the agent");
}

/// A process member's model is called by the team's process, with the team's key (the
/// worker is granted none), and its spend is counted once: by the team as each call ends,
/// not again from the member's result. Counted twice, the researcher's 2,200 tokens would
/// have spent the budget of 3,000 and the reviewer's call after it would be refused.
#[test]
fn a_process_members_model_calls_are_made_by_the_team_and_counted_once() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    let server = runtime.block_on(MockLlmServer::start()).expect("the mock server starts");
    let usage = Usage { input_tokens: 1000, output_tokens: 100, ..Usage::default() };
    let read = MockTurn::tool_call("c1", "fs.read", serde_json::json!({"path": "README.md"})).with_usage(usage);
    server.push(read);
    server.push(MockTurn::text("The README says Gadget.").with_usage(usage));
    let small = Usage { input_tokens: 100, output_tokens: 10, ..Usage::default() };
    server.push(MockTurn::text("Reviewed: Gadget.").with_usage(small));
    let dir = edited_example(|_| {
        "[team]\nname = \"pair\"\nstrategy = \"pipeline\"\n\n[team.budget]\nmax_total_tokens = 3000\n\n\
         [[team.members]]\nagent = \"researcher\"\nisolation = \"process\"\n\n\
         [[team.members]]\nagent = \"reviewer\"\n"
            .to_owned()
    });
    for agent in ["researcher", "reviewer"] {
        set_model(&dir, agent, "model = \"anthropic/claude-sonnet-4-5\"");
    }
    let workspace = workspace("# Gadget");
    let url = server.url();
    let output = team_with(
        dir.path(),
        &["run", "team.toml", "Read the README", "-w", text(workspace.path()), "--approve", "never"],
        &[("ANTHROPIC_API_KEY", "sk-ant-team"), ("ANTHROPIC_BASE_URL", &url)],
    );
    let (out, err) = (stdout(&output), stderr(&output));
    assert_eq!(output.status.code(), Some(0), "{err}");
    assert!(out.contains("Reviewed: Gadget."), "{out}");
    assert!(err.contains("[researcher] worker sandbox:"), "the researcher ran in a worker: {err}");
    let requests = server.requests();
    assert_eq!(requests.len(), 3, "the researcher's two calls, then the reviewer's");
    for request in &requests {
        assert_eq!(request.header("x-api-key"), Some("sk-ant-team"), "the team's key, sent by the team");
    }
}

/// A key written in a process member's agent file is used by the team's process, which
/// calls the member's model; the worker, given none, still completes.
#[test]
fn a_process_members_file_key_is_used_by_the_team() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    let server = runtime.block_on(MockLlmServer::start()).expect("the mock server starts");
    server.push(MockTurn::text("Gadget."));
    let dir = edited_example(|_| {
        "[team]\nname = \"solo\"\nstrategy = \"parallel\"\n\n\
         [[team.members]]\nagent = \"researcher\"\nisolation = \"process\"\n"
            .to_owned()
    });
    set_model(&dir, "researcher", "model = \"anthropic/claude-sonnet-4-5\"\napi_key = \"sk-ant-file\"");
    let workspace = workspace("# Gadget");
    let url = server.url();
    let output = team_with(
        dir.path(),
        &["run", "team.toml", "Name it", "-w", text(workspace.path()), "--approve", "never"],
        &[("ANTHROPIC_BASE_URL", &url)],
    );
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{err}");
    assert!(stdout(&output).contains("Gadget."), "{}", stdout(&output));
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].header("x-api-key"), Some("sk-ant-file"));
}

#[test]
fn an_orchestrated_team_reads_the_leaders_plan_through_the_firewall() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    let server = runtime.block_on(MockLlmServer::start()).expect("the mock server starts");
    let usage = Usage { input_tokens: 1000, output_tokens: 100, ..Usage::default() };
    let plan = "I'll split it.\n```json\n[{\"worker\": \"researcher\", \"task\": \"Read the README\"}, \
                {\"worker\": \"reviewer\", \"task\": \"Review it\"}]\n```\n";
    server.push(MockTurn::text(plan).with_usage(usage));
    server.push(MockTurn::text("The gadget is documented; the review was withheld.").with_usage(usage));
    let dir = edited_example(|_| {
        "[team]\nname = \"crew\"\nstrategy = \"orchestrated\"\nleader = \"boss\"\nmax_concurrency = 1\n\n\
         [[team.members]]\nagent = \"researcher\"\n\n[[team.members]]\nagent = \"reviewer\"\n\n\
         [firewall]\nchannels = [\"researcher -> boss\"]\n"
            .to_owned()
    });
    let boss = "[agent]\nid = \"boss\"\nname = \"Boss\"\n\n[provider]\nmodel = \"anthropic/claude-sonnet-4-5\"\n\n\
                [[tools]]\nname = \"fs.read\"\n";
    std::fs::write(dir.path().join("agents/boss.toml"), boss).expect("writes the leader");
    let workspace = workspace("# Gadget");
    let url = server.url();
    let output = team_with(
        dir.path(),
        &["run", "team.toml", "Report on the gadget", "-w", text(workspace.path())],
        &[("ANTHROPIC_API_KEY", "sk-ant-fake"), ("ANTHROPIC_BASE_URL", &url)],
    );
    let (out, err) = (stdout(&output), stderr(&output));
    assert_eq!(output.status.code(), Some(0), "{err}");
    assert_eq!(out, "The gadget is documented; the review was withheld.\n");
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "the plan, then the synthesis");
    let synthesis = requests[1].body["messages"].to_string();
    assert!(synthesis.contains("Done. Here is what I did for"), "the researcher's report passed: {synthesis}");
    assert!(synthesis.contains("the report of `reviewer` to `boss` was withheld"), "{synthesis}");
    assert!(err.contains("[firewall] dropped a report reviewer -> boss"), "{err}");
    let boss_row = row(&err, "boss");
    assert_eq!(boss_row.get(1..5), Some(&["leader", "local", "2", "completed"].map(String::from)[..]), "{err}");
    // Two calls of 1000 × $3 + 100 × $15 per million tokens.
    assert_eq!(boss_row.get(7).map(String::as_str), Some("$0.0090"), "{err}");
}

/// `troupe team run` records the team's run in the workspace's store, its members' runs
/// (the process member's too, through its worker's protocol) as children; `troupe runs
/// list` shows them.
#[test]
fn a_team_run_is_recorded_with_its_members_runs_as_children() {
    let workspace = workspace("# Gadget");
    let team_file = example().join("team.toml");
    let output = team(
        workspace.path(),
        &["run", text(&team_file), "Describe", "-w", text(workspace.path()), "--json", "--approve", "never"],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let finished: serde_json::Value = stdout(&output)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["type"] == "team_finished")
        .expect("a team_finished line");
    let root = finished["run_id"].as_str().expect("the team's run id").to_owned();
    assert!(stderr(&output).contains(&format!("team run {root} recorded")), "{}", stderr(&output));

    let runs_cli = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_troupe"))
            .arg("runs")
            .args(args)
            .args(["-w", text(workspace.path())])
            .current_dir(workspace.path())
            .env_clear()
            .output()
            .expect("the binary runs")
    };
    let listed = runs_cli(&["list", "--json"]);
    assert_eq!(listed.status.code(), Some(0), "{}", stderr(&listed));
    let runs: Vec<serde_json::Value> =
        stdout(&listed).lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
    let by_agent =
        |agent: &str| runs.iter().find(|r| r["agent"] == agent).unwrap_or_else(|| panic!("{agent}: {runs:?}"));
    let (team_run, lead) = (by_agent("project"), by_agent("lead"));
    assert_eq!((team_run["id"].as_str(), team_run["status"].as_str()), (Some(root.as_str()), Some("completed")));
    assert_eq!(lead["parent_run_id"].as_str(), Some(root.as_str()), "the leader's run is the team's child");
    assert_eq!(by_agent("reviewer")["parent_run_id"], lead["id"], "a delegated member's run is the leader's child");
    let researcher = by_agent("researcher");
    assert_eq!(researcher["parent_run_id"], lead["id"], "a process member's run is recorded, the leader's child");
    assert_eq!(researcher["status"].as_str(), Some("completed"), "{runs:?}");
    assert_eq!(runs.len(), 5, "{runs:?}");
    assert_eq!((team_run["runs_under"].as_u64(), lead["runs_under"].as_u64()), (Some(4), Some(3)), "{runs:?}");

    let shown = runs_cli(&["show", &root]);
    let text = stdout(&shown);
    assert_eq!(shown.status.code(), Some(0), "{}", stderr(&shown));
    assert!(text.contains("task       Describe"), "a team run shows its task: {text}");
    assert!(text.contains("answer     The team worked on"), "and its answer: {text}");
    let tree: Vec<&str> = text.lines().skip_while(|l| *l != "runs under it:").skip(1).take(3).collect();
    assert!(tree[0].starts_with("  lead  completed  "), "the leader's run under the team's: {tree:?}");
    assert!(tree[1].starts_with("    researcher  completed  "), "the worker's run under the leader's: {tree:?}");
    assert!(
        tree[2].starts_with("    reviewer  completed  2 tool calls  "),
        "the reviewer's under the leader's: {tree:?}"
    );
    let json: serde_json::Value = serde_json::from_str(&stdout(&runs_cli(&["show", &root, "--json"]))).expect("JSON");
    let depths: Vec<(u64, &str)> = json["runs_under"]
        .as_array()
        .expect("the runs under it")
        .iter()
        .map(|n| (n["depth"].as_u64().unwrap_or(0), n["agent"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(depths, [(1, "lead"), (2, "researcher"), (2, "reviewer"), (2, "writer")]);

    let events = stdout(&runs_cli(&["events", &root]));
    for agent in ["lead", "researcher", "reviewer", "writer"] {
        assert!(events.lines().any(|l| l.starts_with(&format!("[{agent}] "))), "{agent}'s evidence: {events}");
    }
    let verified = runs_cli(&["verify", &root]);
    let lines = stdout(&verified);
    assert_eq!(verified.status.code(), Some(0), "{}", stderr(&verified));
    assert_eq!(lines.lines().filter(|l| l.contains(") ok: ")).count(), 5, "every run of the tree verifies: {lines}");
    assert!(lines.contains("(project) ok: 8 entries"), "the team's own log, briefs and reports: {lines}");

    // The team's recorded state holds its budget and what its firewall did.
    let path = workspace.path().join(".troupe/troupe.db");
    let (state, evidence) =
        tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime").block_on(async {
            let store = troupe::store::open(&path.display().to_string()).await.expect("the store opens");
            let state = store.load_run(&root).await.expect("reads").expect("the team's run").state;
            (state, store.evidence(&root, 0).await.expect("reads"))
        });
    assert_eq!(state["budget"]["max_total_tokens"], 200000, "{state}");
    // Each brief and each report, as the firewall let it through, is the team's evidence.
    let of = |kind: EvidenceKind| evidence.iter().filter(|e| e.kind == kind).collect::<Vec<_>>();
    let (briefs, reports) = (of(EvidenceKind::BriefSent), of(EvidenceKind::ReportReceived));
    let members: Vec<&str> = briefs.iter().filter_map(|e| e.payload["member"].as_str()).collect();
    assert_eq!(members, ["lead", "researcher", "reviewer", "writer"], "the task, then each delegation: {evidence:?}");
    assert_eq!(reports.len(), 4, "{evidence:?}");
    let to_lead = reports.iter().filter(|e| e.payload["to"] == "lead" && e.payload["report"].is_string()).count();
    assert_eq!(to_lead, 3, "each member's report reached the leader: {reports:?}");
    assert!(state["firewall"]["passed"].as_u64().is_some_and(|n| n >= 3), "every report passed: {state}");
    assert_eq!(state["exceeded"], serde_json::Value::Null, "{state}");

    // A member's log changed after it was written breaks the team's verification.
    let reviewer = by_agent("reviewer")["id"].as_str().expect("the reviewer's run id").to_owned();
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime").block_on(async {
        use sqlx::Connection;
        let url = format!("sqlite://{}", path.display());
        let mut raw = sqlx::SqliteConnection::connect(&url).await.expect("the store file opens");
        sqlx::query("DROP TRIGGER evidence_is_append_only_update").execute(&mut raw).await.expect("drops the guard");
        sqlx::query("UPDATE evidence SET payload = '{\"forged\":true}' WHERE run_id = ? AND seq = 2")
            .bind(&reviewer)
            .execute(&mut raw)
            .await
            .expect("forges an entry");
        raw.close().await.expect("closes");
    });
    let verified = runs_cli(&["verify", &root]);
    let lines = stdout(&verified);
    assert_eq!(verified.status.code(), Some(1), "{lines}");
    assert!(lines.contains(&format!("{reviewer} (reviewer) broken: evidence entry 2")), "{lines}");
    assert_eq!(lines.lines().filter(|l| l.contains(") ok: ")).count(), 4, "the other runs still verify: {lines}");
    assert!(stderr(&verified).contains(&reviewer), "the error names the broken run: {}", stderr(&verified));
}

/// A team's run that an older troupe recorded (its input does not name its team file)
/// cannot be built again: `troupe runs resume` says so (exit 2) and changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_team_run_recorded_without_its_file_is_not_resumed() {
    use troupe::runtime::durable::TEAM_RUN_KIND;
    use troupe::store::{NewRun, RunStatus};
    let workspace = workspace("# Gadget");
    // The binary runs without HOME: its default store is the one in the workspace.
    let path = troupe::store::legacy_sqlite_path(workspace.path());
    std::fs::create_dir_all(path.parent().expect("a directory")).expect("creates .troupe");
    let store = troupe::store::open(text(&path)).await.expect("the store opens");
    let state = serde_json::json!({"kind": TEAM_RUN_KIND, "team": "project", "instruction": "Describe"});
    let run = NewRun {
        id: "run_team_crashed".into(),
        agent: "project".into(),
        status: RunStatus::Running,
        conversation_id: None,
        parent_run_id: None,
        input: state.clone().into(),
        state: state.into(),
        spend: None,
    };
    store.create_run(run, 1).await.expect("the team's run is stored");
    store.close().await.expect("the store closes");

    let output = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .args(["runs", "resume", "run_team_crashed", "-w", text(workspace.path())])
        .current_dir(workspace.path())
        .env_clear()
        .output()
        .expect("the binary runs");
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(err.contains("team run run_team_crashed does not say which team file it ran"), "{err}");
    let store = troupe::store::open(text(&path)).await.expect("the store opens again");
    let kept = store.load_run("run_team_crashed").await.expect("load_run").expect("kept");
    assert_eq!(kept.status, RunStatus::Running, "nothing changed");
}

/// A delegate team whose leader `lead` hands work to `coder`, which has `shell`; both on
/// the Anthropic wire (the mock server's), in a directory of their own.
fn approval_team() -> TempDir {
    let dir = tempfile::tempdir().expect("a temp dir");
    let team = "[team]\nname = \"ledger\"\nstrategy = \"delegate\"\nleader = \"lead\"\n\n\
                [[team.members]]\nagent = \"coder\"\n";
    std::fs::write(dir.path().join("team.toml"), team).expect("writes the team file");
    std::fs::create_dir_all(dir.path().join("agents")).expect("creates agents/");
    let agent = |id: &str, tool: &str| {
        format!(
            "[agent]\nid = \"{id}\"\nname = \"{id}\"\ndescription = \"Keeps the ledger.\"\n\n\
             [provider]\nmodel = \"anthropic/claude-sonnet-4-5\"\n\n[[tools]]\nname = \"{tool}\"\n"
        )
    };
    std::fs::write(dir.path().join("agents/lead.toml"), agent("lead", "fs.read")).expect("writes the leader");
    std::fs::write(dir.path().join("agents/coder.toml"), agent("coder", "shell")).expect("writes the coder");
    dir
}

/// The mock model of [`approval_team`]'s one task: the leader delegates, the coder asks
/// to append `one` to `ledger.txt` (`call_s1`), then both answer. The runtime serves it.
fn ledger_model() -> (tokio::runtime::Runtime, MockLlmServer) {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    let server = runtime.block_on(MockLlmServer::start()).expect("the mock server starts");
    server.push(MockTurn::tool_call("call_d1", "delegate", serde_json::json!({"to": "coder", "brief": "Add a line"})));
    server.push(MockTurn::tool_call("call_s1", "shell", serde_json::json!({"command": "echo one >> ledger.txt"})));
    server.push(MockTurn::text("Appended one line."));
    server.push(MockTurn::text("The coder appended one line."));
    (runtime, server)
}

/// [`approval_team`] on [`ledger_model`], with a workspace of its own: what the ledger
/// tests share.
struct Ledger {
    runtime: tokio::runtime::Runtime,
    server: MockLlmServer,
    dir: TempDir,
    workspace: TempDir,
    url: String,
}

impl Ledger {
    fn new() -> Self {
        let (runtime, server) = ledger_model();
        let url = server.url();
        Ledger { runtime, server, dir: approval_team(), workspace: workspace("# Ledger"), url }
    }

    /// The same team with its coder in a worker process.
    fn coder_in_a_worker(self) -> Self {
        let path = self.dir.path().join("team.toml");
        let team = std::fs::read_to_string(&path).expect("the team file");
        let team = team.replace("agent = \"coder\"\n", "agent = \"coder\"\nisolation = \"process\"\n");
        std::fs::write(&path, team).expect("writes the team file");
        self
    }

    /// The same team with `more` at the end of its file.
    fn team_file_with(self, more: &str) -> Self {
        let path = self.dir.path().join("team.toml");
        let team = std::fs::read_to_string(&path).expect("the team file");
        std::fs::write(&path, format!("{team}{more}")).expect("writes the team file");
        self
    }

    /// The variables that point the agents at the mock model.
    fn env(&self) -> [(&'static str, &str); 2] {
        [("ANTHROPIC_API_KEY", "sk-ant-fake"), ("ANTHROPIC_BASE_URL", self.url.as_str())]
    }

    /// The workspace, as an argument.
    fn ws(&self) -> &str {
        text(self.workspace.path())
    }
}

/// Runs [`approval_team`] (in `dir`) on its ledger task in `ws` with nobody to ask: it
/// pauses for the coder's call (exit 1); the team's run id.
fn paused_ledger_team(dir: &Path, ws: &str, env: &[(&str, &str)]) -> String {
    let paused = team_with(dir, &["run", "team.toml", "Keep the ledger", "-w", ws, "--json"], env);
    assert_eq!(paused.status.code(), Some(1), "{}", stderr(&paused));
    let finished: serde_json::Value =
        serde_json::from_str(stdout(&paused).lines().last().expect("a last line")).expect("team_finished");
    finished["run_id"].as_str().expect("the team's run id").to_owned()
}

/// `troupe runs ARGS` in `cwd` with only `env` (and `PATH`) set.
fn runs_with(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    troupe_with(cwd, "runs", args, env)
}

/// Without a terminal, a member's call that needs approval pauses the whole team,
/// recorded, and says how to go on; `troupe runs approve TEAM_RUN CALL` sends the
/// decision to the member's run and resumes the team, which completes: the leader's
/// delegation is not started again, the approved command runs once, and every run of the
/// tree verifies.
#[test]
fn a_team_paused_for_a_members_call_goes_on_after_runs_approve() {
    let ledger = Ledger::new();
    let Ledger { server, dir, workspace, .. } = &ledger;
    let (env, ws) = (ledger.env(), ledger.ws());

    let output = team_with(dir.path(), &["run", "team.toml", "Keep the ledger", "-w", ws, "--json"], &env);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert!(err.contains("the team paused: 1 call of coder waits for a person"), "{err}");
    let finished: serde_json::Value =
        serde_json::from_str(stdout(&output).lines().last().expect("a last line")).expect("team_finished");
    let team_run = finished["run_id"].as_str().expect("the team's run id").to_owned();
    assert!(
        err.contains(&format!("approve with `troupe runs approve {team_run} call_s1`")),
        "it says how to go on: {err}"
    );
    assert!(!workspace.path().join("ledger.txt").exists(), "nothing ran before the decision");
    assert_eq!(server.requests().len(), 2, "the leader's delegation and the coder's call");
    let shown = runs_with(dir.path(), &["list", "--json", "-w", ws], &[]);
    let runs: Vec<serde_json::Value> =
        stdout(&shown).lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
    let status = |agent: &str| runs.iter().find(|r| r["agent"] == agent).map(|r| r["status"].clone());
    assert_eq!(status("ledger"), Some("paused".into()), "{runs:?}");
    assert_eq!(status("coder"), Some("paused".into()), "{runs:?}");

    let shown = runs_with(dir.path(), &["show", &team_run, "-w", ws], &[]);
    assert!(
        stdout(&shown).lines().any(
            |l| l.trim_start().starts_with("coder  paused") && l.ends_with("waiting for a person: call_s1 (shell)")
        ),
        "the tree says which call waits where: {}",
        stdout(&shown)
    );

    // A call that is not waiting is refused, naming the one that is.
    let wrong = runs_with(dir.path(), &["approve", &team_run, "call_nope", "-w", ws], &env);
    assert_eq!(wrong.status.code(), Some(2), "{}", stderr(&wrong));
    assert!(stderr(&wrong).contains("the calls waiting are: call_s1 (shell, coder run"), "{}", stderr(&wrong));

    let approved = runs_with(dir.path(), &["approve", &team_run, "call_s1", "-w", ws], &env);
    let err = stderr(&approved);
    assert_eq!(approved.status.code(), Some(0), "{err}");
    assert_eq!(stdout(&approved), "The coder appended one line.\n", "{err}");
    assert_eq!(std::fs::read_to_string(workspace.path().join("ledger.txt")).expect("the ledger"), "one\n");
    let requests = server.requests();
    assert_eq!(requests.len(), 4, "no model call was made twice: {:?}", requests.len());

    let listed = runs_with(dir.path(), &["list", "--json", "-w", ws], &[]);
    let runs: Vec<serde_json::Value> =
        stdout(&listed).lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
    assert_eq!(runs.len(), 3, "the team's run, the leader's and the coder's, none started twice: {runs:?}");
    assert!(runs.iter().all(|r| r["status"] == "completed"), "{runs:?}");
    let verified = runs_with(dir.path(), &["verify", &team_run, "-w", ws], &[]);
    assert_eq!(verified.status.code(), Some(0), "{}", stdout(&verified));
    assert_eq!(stdout(&verified).lines().filter(|l| l.contains(") ok: ")).count(), 3, "{}", stdout(&verified));
}

/// A schedule can start team runs: `troupe schedule add NAME --team TEAM.toml` queues
/// one at each tick, and `troupe worker` fires the tick and runs the team to its end.
#[test]
fn a_schedule_starts_team_runs_that_a_worker_runs() {
    let ledger = Ledger::new();
    let Ledger { dir, workspace, .. } = &ledger;
    let (env, ws) = (ledger.env(), ledger.ws());
    let args = ["add", "ledger", "--team", "team.toml", "--every", "1s", "--approve", "auto", "-w", ws, "Keep", "it"];
    let added = troupe_with(dir.path(), "schedule", &args, &env);
    assert_eq!(added.status.code(), Some(0), "{}", stderr(&added));
    assert!(stdout(&added).contains("schedule ledger added: team `ledger`"), "{}", stdout(&added));
    let missing = troupe_with(dir.path(), "schedule", &["add", "x", "--team", "nope.toml", "--every", "1s", "t"], &env);
    assert_eq!(missing.status.code(), Some(2), "a team file that is not there: {}", stderr(&missing));

    std::thread::sleep(std::time::Duration::from_millis(1100));
    let worker = troupe_with(dir.path(), "worker", &["--once", "--poll-ms", "50", "-w", ws], &env);
    let err = stderr(&worker);
    assert_eq!(worker.status.code(), Some(0), "{err}");
    let listed = runs_with(dir.path(), &["list", "--json", "-w", ws], &[]);
    let runs: Vec<serde_json::Value> =
        stdout(&listed).lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
    let team_run = runs.iter().find(|r| r["agent"] == "ledger").unwrap_or_else(|| panic!("{runs:?} {err}"));
    assert_eq!((team_run["status"].as_str(), team_run["runs_under"].as_u64()), (Some("completed"), Some(2)), "{err}");
    assert_eq!(std::fs::read_to_string(workspace.path().join("ledger.txt")).expect("the ledger"), "one\n");
}

/// A team run another process holds (a worker that claimed it, another resume) is not
/// resumed beside it: the resume is refused naming the holder; once it lets go, the
/// decision resumes the team, which completes.
#[test]
fn a_team_run_held_elsewhere_is_not_resumed_beside_it() {
    let ledger = Ledger::new();
    let Ledger { runtime, dir, workspace, .. } = &ledger;
    let (env, ws) = (ledger.env(), ledger.ws());
    let team_run = paused_ledger_team(dir.path(), ws, &env);

    let url = format!("sqlite://{}", workspace.path().join(".troupe/troupe.db").display());
    let store = runtime.block_on(troupe::store::open(&url)).expect("the workspace's store");
    let ttl = std::time::Duration::from_secs(30);
    let held = runtime
        .block_on(store.acquire(&team_run, "another-machine:7", ttl, troupe::store::now_millis()))
        .expect("acquires")
        .expect("the paused team's run is free");
    let refused = runs_with(dir.path(), &["approve", &team_run, "call_s1", "-w", ws], &env);
    let err = stderr(&refused);
    assert_eq!(refused.status.code(), Some(2), "{err}");
    assert!(err.contains(&format!("team run {team_run} is being run by another-machine:7")), "{err}");
    assert!(!workspace.path().join("ledger.txt").exists(), "nothing ran beside the holder");

    runtime.block_on(store.release(&held, None)).expect("lets go");
    let resumed = runs_with(dir.path(), &["resume", &team_run, "-w", ws, "--approve", "auto"], &env);
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr(&resumed));
    assert_eq!(std::fs::read_to_string(workspace.path().join("ledger.txt")).expect("the ledger"), "one\n");
    let queue = runtime.block_on(store.queue()).expect("reads the queue");
    assert!(queue.iter().all(|e| e.run_id != team_run), "the lease was given up: {queue:?}");
}

/// A team's budget counts what its members spent before it paused: resumed, the ledger
/// team (15 tokens a model call) with 45 tokens for everyone stops at its third call,
/// where a budget counted from nothing would let it finish.
#[test]
fn a_resumed_team_goes_on_counting_its_budget() {
    let ledger = Ledger::new().team_file_with("\n[team.budget]\nmax_total_tokens = 45\n");
    let Ledger { server, dir, .. } = &ledger;
    let (env, ws) = (ledger.env(), ledger.ws());
    let team_run = paused_ledger_team(dir.path(), ws, &env);
    assert_eq!(server.requests().len(), 2, "two calls, 30 tokens, before the pause");

    let approved = runs_with(dir.path(), &["approve", &team_run, "call_s1", "-w", ws], &env);
    let err = stderr(&approved);
    assert_eq!(approved.status.code(), Some(1), "{err}");
    assert!(err.contains("budget ran out"), "{err}");
    // The third call spent the last of it: the leader's next call checks the team's spend
    // first, and does not start.
    assert_eq!(server.requests().len(), 3, "the third call spent the last of it: {err}");
    assert_eq!(row(&err, "lead").get(4).map(String::as_str), Some("failed: cancelled"), "{err}");
    assert!(
        row(&err, "team").get(3).is_some_and(|tokens| tokens.replace(',', "").parse::<u64>().is_ok_and(|t| t >= 45)),
        "{err}"
    );
}

/// A team's time budget counts the time it works, per sitting, not the time it waits
/// paused for a person: paused for longer than its `max_seconds`, it still completes once
/// the call is decided.
#[test]
fn a_teams_time_budget_does_not_count_its_pause() {
    let ledger = Ledger::new().team_file_with("\n[team.budget]\nmax_seconds = 5\n");
    let Ledger { dir, workspace, .. } = &ledger;
    let (env, ws) = (ledger.env(), ledger.ws());
    let team_run = paused_ledger_team(dir.path(), ws, &env);
    std::thread::sleep(std::time::Duration::from_millis(5500));
    let approved = runs_with(dir.path(), &["approve", &team_run, "call_s1", "-w", ws], &env);
    assert_eq!(approved.status.code(), Some(0), "{}", stderr(&approved));
    assert_eq!(std::fs::read_to_string(workspace.path().join("ledger.txt")).expect("the ledger"), "one\n");
}

/// A time budget past any clock (a file may say any number) is no limit: the team, with
/// its coder in a worker process, runs, pauses and completes; nothing panics.
#[test]
fn a_time_budget_past_any_clock_is_no_limit() {
    let ledger =
        Ledger::new().coder_in_a_worker().team_file_with("\n[team.budget]\nmax_seconds = 9223372036854775807\n");
    let Ledger { dir, workspace, .. } = &ledger;
    let (env, ws) = (ledger.env(), ledger.ws());
    let team_run = paused_ledger_team(dir.path(), ws, &env);
    let approved = runs_with(dir.path(), &["approve", &team_run, "call_s1", "-w", ws], &env);
    let err = stderr(&approved);
    assert_eq!(approved.status.code(), Some(0), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(std::fs::read_to_string(workspace.path().join("ledger.txt")).expect("the ledger"), "one\n");
}

/// The same with the coder in a worker process: its run, recorded through the worker
/// protocol, pauses the team; `troupe runs approve TEAM_RUN CALL` stores the decision for
/// it, and the worker started when the team resumes resumes that run, applies the
/// decision and runs the command once.
#[test]
fn a_team_paused_for_a_workers_call_goes_on_after_runs_approve() {
    let ledger = Ledger::new().coder_in_a_worker();
    let Ledger { server, dir, workspace, .. } = &ledger;
    let (env, ws) = (ledger.env(), ledger.ws());

    let team_run = paused_ledger_team(dir.path(), ws, &env);
    assert!(!workspace.path().join("ledger.txt").exists(), "nothing ran before the decision");
    assert_eq!(server.requests().len(), 2, "the leader's delegation and the coder's call");

    let approved = runs_with(dir.path(), &["approve", &team_run, "call_s1", "-w", ws], &env);
    let err = stderr(&approved);
    assert_eq!(approved.status.code(), Some(0), "{err}");
    assert_eq!(stdout(&approved), "The coder appended one line.\n", "{err}");
    assert_eq!(std::fs::read_to_string(workspace.path().join("ledger.txt")).expect("the ledger"), "one\n");
    assert_eq!(server.requests().len(), 4, "no model call was made twice");
    let listed = runs_with(dir.path(), &["list", "--json", "-w", ws], &[]);
    let runs: Vec<serde_json::Value> =
        stdout(&listed).lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
    assert_eq!(runs.len(), 3, "the team's run, the leader's and the worker's, none started twice: {runs:?}");
    assert!(runs.iter().all(|r| r["status"] == "completed"), "{runs:?}");
    let verified = runs_with(dir.path(), &["verify", &team_run, "-w", ws], &[]);
    assert_eq!(verified.status.code(), Some(0), "{}", stdout(&verified));
}

/// A worker member's commands are confined as its team chose: the team's `--sandbox`,
/// else the member's agent file's `[sandbox]`, over the worker's own directory's files.
#[test]
fn a_workers_commands_are_confined_as_its_team_chose() {
    let appended = |ledger: &Ledger, flags: &[&str]| {
        let mut args = vec!["run", "team.toml", "Keep the ledger", "-w", ledger.ws(), "--approve", "auto"];
        args.extend_from_slice(flags);
        let output = team_with(ledger.dir.path(), &args, &ledger.env());
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        let told = ledger.server.requests()[2].body["messages"].to_string();
        (ledger.workspace.path().join("ledger.txt").exists(), told)
    };

    let flagged = Ledger::new().coder_in_a_worker();
    let (written, told) = appended(&flagged, &["--sandbox", "read-only"]);
    assert!(!written, "the team's --sandbox read-only reaches the worker's shell");
    assert!(told.contains("sandbox: read-only ("), "the worker's model is told: {told}");

    let filed = Ledger::new().coder_in_a_worker();
    let coder = filed.dir.path().join("agents/coder.toml");
    let file = std::fs::read_to_string(&coder).expect("the coder's file");
    std::fs::write(&coder, format!("{file}\n[sandbox]\nmode = \"read-only\"\n")).expect("writes the coder's file");
    let (written, told) = appended(&filed, &[]);
    assert!(!written, "the member's own [sandbox] holds in its worker");
    assert!(told.contains("sandbox: read-only ("), "{told}");

    let (written, told) = appended(&Ledger::new().coder_in_a_worker(), &[]);
    assert!(written, "by default the worker's shell writes the workspace");
    assert!(told.contains("sandbox: workspace-write ("), "{told}");
}

/// A worker confines itself whatever its commands' sandbox: with `--sandbox full` its
/// shell's commands run unconfined by the command sandbox, yet read no other process's
/// `/proc/PID/environ` (the team's process holds the provider's key there).
#[test]
fn a_worker_reads_no_other_processs_environment_even_with_its_commands_unconfined() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    let server = runtime.block_on(MockLlmServer::start()).expect("the mock server starts");
    let look = "echo found:$(cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c sk-ant-fake)";
    server.push(MockTurn::tool_call("call_d1", "delegate", serde_json::json!({"to": "coder", "brief": "Look"})));
    server.push(MockTurn::tool_call("call_s1", "shell", serde_json::json!({"command": look})));
    server.push(MockTurn::text("Looked."));
    server.push(MockTurn::text("The coder looked."));
    let url = server.url();
    let ledger =
        Ledger { runtime, server, dir: approval_team(), workspace: workspace("# Ledger"), url }.coder_in_a_worker();
    let args = ["run", "team.toml", "Look around", "-w", ledger.ws(), "--approve", "auto", "--sandbox", "full"];
    let output = team_with(ledger.dir.path(), &args, &ledger.env());
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let told = ledger.server.requests()[2].body["messages"].to_string();
    assert!(told.contains("sandbox: full (unconfined)"), "the command ran outside the command sandbox: {told}");
    assert!(told.contains("found:0"), "no process's environment showed the key: {told}");
}

/// `troupe ARGS` in `cwd` with `env`, its stdin and stderr a pseudo-terminal: each time
/// the screen shows a new `[e]dit` question, the next of `answers` is typed. Returns the
/// output (stdout captured) and everything the terminal showed.
fn at_a_terminal(cwd: &Path, args: &[&str], env: &[(&str, &str)], answers: &[&str]) -> (Output, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_troupe"));
    command.args(args).current_dir(cwd).env_clear().env("PATH", std::env::var_os("PATH").unwrap_or_default());
    for (name, value) in env {
        command.env(name, value);
    }
    troupe_testkit::terminal::at_a_terminal(&mut command, &["[e]dit"], answers)
}

/// Asked at a terminal (a pseudo-terminal) about the coder's call, the person says yes:
/// the question names the member's path, the answer reaches the member's run, and the
/// team completes.
fn asked_at_a_terminal(ledger: Ledger) {
    let Ledger { server, dir, workspace, .. } = &ledger;
    let env = ledger.env();
    let args = ["team", "run", "team.toml", "Keep the ledger", "-w", text(workspace.path())];
    let (output, shown) = at_a_terminal(dir.path(), &args, &env, &["y"]);
    assert_eq!(output.status.code(), Some(0), "{shown}");
    assert!(shown.contains("lead → coder: shell {\"command\":\"echo one >> ledger.txt\"} needs approval"), "{shown}");
    assert_eq!(stdout(&output), "The coder appended one line.\n", "{shown}");
    assert_eq!(std::fs::read_to_string(workspace.path().join("ledger.txt")).expect("the ledger"), "one\n");
    assert_eq!(server.requests().len(), 4);
}

#[test]
fn at_a_terminal_a_members_call_is_asked_about_naming_its_path() {
    asked_at_a_terminal(Ledger::new());
}

/// The same with the coder in a worker process: its run waits, and the answer reaches the
/// worker as a signal of its recorded run.
#[test]
fn at_a_terminal_a_workers_call_is_asked_about_too() {
    asked_at_a_terminal(Ledger::new().coder_in_a_worker());
}

/// The README's main job at a terminal: the example team asks before its writer writes,
/// and a `no` is told to the writer, which writes nothing.
#[test]
fn the_shipped_example_asks_before_a_members_write_at_a_terminal() {
    let workspace = workspace("# Gadget");
    let team_file = example().join("team.toml");
    let args = ["team", "run", text(&team_file), "Describe this repository", "-w", text(workspace.path())];
    let (output, shown) = at_a_terminal(workspace.path(), &args, &[], &["n\nthe summary is not wanted"]);
    assert_eq!(output.status.code(), Some(0), "{shown}");
    assert!(shown.contains("? lead → writer: fs.write {"), "the question names the path: {shown}");
    // The person sees the file the write would make, as a diff, and is asked why not.
    assert!(shown.contains("--- /dev/null") && shown.contains("+++ b/TROUPE_DEMO.md"), "{shown}");
    assert!(shown.contains("Allow fs.write?") && shown.contains("Why not?"), "{shown}");
    assert!(!workspace.path().join("TROUPE_DEMO.md").exists(), "refused, nothing was written");
    assert!(stdout(&output).contains("- writer: "), "the writer still reported: {}", stdout(&output));
}

/// `troupe team run --detach` queues the team's run; `troupe worker` claims it like a
/// single run, builds the team again from its files and runs it to its end.
#[test]
fn a_queued_team_run_is_run_by_a_worker() {
    let workspace = workspace("# Gadget");
    let ws = text(workspace.path());
    let team_file = example().join("team.toml");
    let queued =
        team(workspace.path(), &["run", text(&team_file), "Describe this", "-w", ws, "--detach", "--approve", "auto"]);
    assert_eq!(queued.status.code(), Some(0), "{}", stderr(&queued));
    let run_id = stdout(&queued).trim().to_owned();
    assert!(run_id.starts_with("run_"), "the id on stdout: {run_id}");
    assert!(!workspace.path().join("TROUPE_DEMO.md").exists(), "nothing ran yet");

    let worker = troupe_with(workspace.path(), "worker", &["--once", "--poll-ms", "50", "-w", ws], &[]);
    let err = stderr(&worker);
    assert_eq!(worker.status.code(), Some(0), "{err}");
    assert!(err.contains(&format!("claimed {run_id}")) && err.contains(&format!("ended {run_id} completed")), "{err}");
    assert!(workspace.path().join("TROUPE_DEMO.md").exists(), "the team's writer wrote (--approve auto): {err}");
    let listed = runs_with(workspace.path(), &["list", "--json", "-w", ws], &[]);
    let runs: Vec<serde_json::Value> =
        stdout(&listed).lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
    let team_run = runs.iter().find(|r| r["id"] == run_id.as_str()).expect("the team's run");
    assert_eq!(
        (team_run["status"].as_str(), team_run["runs_under"].as_u64()),
        (Some("completed"), Some(4)),
        "the leader, the researcher (in its worker), the reviewer and the writer: {runs:?}"
    );
}

/// A decision stored with `--no-resume` for a paused team's member puts the team (not
/// the member alone) back in the queue; a worker resumes the whole team.
#[test]
fn a_paused_team_decided_without_resuming_is_taken_up_by_a_worker() {
    let ledger = Ledger::new();
    let Ledger { server, dir, workspace, .. } = &ledger;
    let (env, ws) = (ledger.env(), ledger.ws());
    let team_run = paused_ledger_team(dir.path(), ws, &env);

    let stored = runs_with(dir.path(), &["approve", &team_run, "call_s1", "--no-resume", "-w", ws], &env);
    assert_eq!(stored.status.code(), Some(0), "{}", stderr(&stored));
    assert!(!workspace.path().join("ledger.txt").exists(), "stored, not applied");
    let worker = troupe_with(dir.path(), "worker", &["--once", "--poll-ms", "50", "-w", ws], &env);
    let err = stderr(&worker);
    assert_eq!(worker.status.code(), Some(0), "{err}");
    assert!(err.contains(&format!("ended {team_run} completed")), "the worker took the team, not the member: {err}");
    assert_eq!(std::fs::read_to_string(workspace.path().join("ledger.txt")).expect("the ledger"), "one\n");
    assert_eq!(server.requests().len(), 4, "no model call made twice");
}

/// The team's approval mode reaches a process member's worker: under `--approve auto`
/// the worker's write runs; under `never` it is refused and the member still reports.
#[test]
fn a_workers_calls_follow_the_teams_approval_mode() {
    let dir = edited_example(|team| {
        team.replace("agent = \"writer\"\nisolation = \"local\"", "agent = \"writer\"\nisolation = \"process\"")
    });
    for (mode, writes) in [("auto", true), ("never", false)] {
        let workspace = workspace("# Gadget");
        let args = ["run", "team.toml", "Describe this", "-w", text(workspace.path()), "--approve", mode];
        let output = team(dir.path(), &args);
        let err = stderr(&output);
        assert_eq!(output.status.code(), Some(0), "{mode}: {err}");
        assert_eq!(row(&err, "writer").get(1..3), Some(&["member", "process"].map(String::from)[..]), "{err}");
        assert_eq!(workspace.path().join("TROUPE_DEMO.md").exists(), writes, "{mode}: {err}");
    }
}

/// A team whose agent file changed after it paused is not resumed as if it had not: the
/// resume is refused (exit 2) naming the file; `--force` resumes it as the files are now.
#[test]
fn a_team_whose_files_changed_resumes_only_when_forced() {
    let ledger = Ledger::new();
    let Ledger { dir, workspace, .. } = &ledger;
    let (env, ws) = (ledger.env(), ledger.ws());
    let team_run = paused_ledger_team(dir.path(), ws, &env);
    let coder = dir.path().join("agents/coder.toml");
    let text_now = std::fs::read_to_string(&coder).expect("reads the coder");
    std::fs::write(&coder, format!("{text_now}\n# edited after the pause\n")).expect("edits the coder");

    let stored = runs_with(dir.path(), &["approve", &team_run, "call_s1", "--no-resume", "-w", ws], &env);
    assert_eq!(stored.status.code(), Some(0), "{}", stderr(&stored));
    let refused = runs_with(dir.path(), &["resume", &team_run, "-w", ws], &env);
    let err = stderr(&refused);
    assert_eq!(refused.status.code(), Some(2), "{err}");
    assert!(err.contains("coder.toml changed") && err.contains("force"), "{err}");
    assert!(!workspace.path().join("ledger.txt").exists(), "nothing ran");

    let forced = runs_with(dir.path(), &["resume", &team_run, "--force", "-w", ws], &env);
    assert_eq!(forced.status.code(), Some(0), "{}", stderr(&forced));
    assert_eq!(std::fs::read_to_string(workspace.path().join("ledger.txt")).expect("the ledger"), "one\n");
}

/// The README's main job, recorded, replays identical — every run of its tree, the worker
/// member's included — with no model call; an edited agent file is found in that agent's
/// run, at its first step, as a diff.
#[test]
fn the_main_job_replays_identical_and_an_edited_agent_diverges_in_its_own_run() {
    let workspace = workspace("# Gadget");
    let team_dir = edited_example(|team| team.to_owned());
    let team_file = team_dir.path().join("team.toml");
    let ws = text(workspace.path());
    let store = workspace.path().join("runs.db");
    let store = text(&store);
    let output = team(
        workspace.path(),
        &["run", text(&team_file), "Describe this repository", "-w", ws, "--approve", "auto", "--store", store],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let id = stderr(&output)
        .lines()
        .find_map(|l| l.strip_prefix("team run ").and_then(|rest| rest.split(' ').next()))
        .expect("the team run's id")
        .to_owned();
    std::fs::remove_file(workspace.path().join("TROUPE_DEMO.md")).expect("the writer's file goes");

    let replay = troupe_with(workspace.path(), "runs", &["replay", &id, "--store", store, "-w", ws, "--json"], &[]);
    assert_eq!(replay.status.code(), Some(0), "{}{}", stdout(&replay), stderr(&replay));
    let report: serde_json::Value = serde_json::from_str(stdout(&replay).trim()).expect("a JSON report");
    assert_eq!(report["identical"], true, "{report}");
    let runs = report["runs"].as_array().expect("runs");
    let agents: Vec<&str> = runs.iter().filter_map(|r| r["agent"].as_str()).collect();
    assert_eq!(agents, ["lead", "researcher", "reviewer", "writer"]);
    for run in runs {
        assert_eq!(run["report"]["model_calls"], 0, "{run}");
        assert!(run["report"]["steps"].as_u64().unwrap_or_default() >= 2, "{run}");
    }
    assert!(!workspace.path().join("TROUPE_DEMO.md").exists(), "no tool ran");

    let writer = team_dir.path().join("agents/writer.toml");
    let edited =
        std::fs::read_to_string(&writer).expect("the writer").replace("You are a technical writer.", "You are a poet.");
    std::fs::write(&writer, edited).expect("edited");
    let replay = troupe_with(workspace.path(), "runs", &["replay", &id, "--store", store, "-w", ws], &[]);
    assert_eq!(replay.status.code(), Some(1), "{}", stderr(&replay));
    let out = stdout(&replay);
    assert!(out.starts_with(&format!("team run {id}: diverges in the run of writer:")), "{out}");
    assert!(out.contains("-You are a technical writer.") && out.contains("+You are a poet."), "{out}");
    assert!(stderr(&replay).contains("in the run of writer at step 1"), "{}", stderr(&replay));
}

/// A typed-reports team, recorded, replays identical, its firewall's decisions included;
/// with `[firewall.fields]` edited, every run still decides as it did, but the report the
/// firewall now passes whole is found, recorded against now.
#[test]
fn a_team_replay_checks_the_firewalls_decisions_again() {
    let workspace = workspace("# Gadget");
    let team_dir = copied_example("reports.toml", str::to_owned);
    let team_file = team_dir.path().join("reports.toml");
    let example_text = std::fs::read_to_string(&team_file).expect("reads the copy");
    let (ws, store) = (text(workspace.path()), workspace.path().join("runs.db"));
    let store = text(&store);
    let output =
        team(workspace.path(), &["run", text(&team_file), "Describe this repository", "-w", ws, "--store", store]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let id = stderr(&output)
        .lines()
        .find_map(|l| l.strip_prefix("team run ").and_then(|rest| rest.split(' ').next()))
        .expect("the team run's id")
        .to_owned();

    let replay = troupe_with(workspace.path(), "runs", &["replay", &id, "--store", store, "-w", ws, "--json"], &[]);
    assert_eq!(replay.status.code(), Some(0), "{}{}", stdout(&replay), stderr(&replay));
    let report: serde_json::Value = serde_json::from_str(stdout(&replay).trim()).expect("a JSON report");
    assert_eq!((report["identical"].as_bool(), report["firewall"].as_array().map(Vec::len)), (Some(true), Some(0)));

    let carried = example_text
        .replace(r#"["summary", "decisions", "blockers"]"#, r#"["summary", "artifacts", "decisions", "blockers"]"#);
    assert_ne!(carried, example_text);
    std::fs::write(&team_file, carried).expect("edited");
    let replay = troupe_with(workspace.path(), "runs", &["replay", &id, "--store", store, "-w", ws], &[]);
    assert_eq!(replay.status.code(), Some(1), "{}{}", stdout(&replay), stderr(&replay));
    let out = stdout(&replay);
    assert!(out.contains("its runs decide as they did, but the firewall now decides differently"), "{out}");
    assert!(
        out.contains("the report of researcher to lead")
            && out.contains("- recorded: passed without `artifacts`; + now: passed whole"),
        "{out}"
    );
    assert!(stderr(&replay).contains("the firewall, for the report of researcher to lead"), "{}", stderr(&replay));

    let closed = example_text
        .replace(r#"channels = ["researcher -> lead", "reviewer -> lead"]"#, r#"channels = ["researcher -> lead"]"#);
    assert_ne!(closed, example_text);
    std::fs::write(&team_file, closed).expect("edited");
    let replay = troupe_with(workspace.path(), "runs", &["replay", &id, "--store", store, "-w", ws], &[]);
    assert_eq!(replay.status.code(), Some(1), "{}{}", stdout(&replay), stderr(&replay));
    assert!(
        stdout(&replay).contains("the report of reviewer to lead")
            && stdout(&replay).contains("+ now: withheld (no channel)"),
        "{}",
        stdout(&replay)
    );
}
