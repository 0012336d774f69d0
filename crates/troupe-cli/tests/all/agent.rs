//! End-to-end tests of `troupe agent`: the real binary on temp config directories, the
//! demo model for runs.

use std::path::Path;
use std::process::{Command, Output};
use tempfile::TempDir;

/// `troupe agent ARGS` in `cwd` with an empty environment (no key, no home, so no config
/// directory but the test's own).
fn agent(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_troupe"))
        .arg("agent")
        .args(args)
        .current_dir(cwd)
        .env_clear()
        .output()
        .expect("the binary runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn tempdir() -> TempDir {
    tempfile::tempdir().expect("a temp dir")
}

fn text(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 temp path")
}

const BROKEN: &str = "[agent]\nid = \"broken\"\nname = \"Broken\"\n\n[provider]\nmodle = \"demo\"\n";

#[test]
fn create_then_list_show_and_validate() {
    let cwd = tempdir();
    let config = cwd.path().join("conf");
    let dir = text(&config);
    let created =
        agent(cwd.path(), &["create", "--id", "scout", "--name", "Scout", "--from", "researcher", "--config-dir", dir]);
    assert_eq!(created.status.code(), Some(0), "{}", stderr(&created));
    let file = config.join("agents").join("scout.toml");
    assert_eq!(stdout(&created).trim(), file.display().to_string());
    assert!(std::fs::read_to_string(&file).expect("the file was written").contains("id = \"scout\""));

    let list = agent(cwd.path(), &["list", "--config-dir", dir]);
    assert_eq!(list.status.code(), Some(0), "{}", stderr(&list));
    let table = stdout(&list);
    let row = table.lines().find(|l| l.contains("scout")).expect("a row for scout");
    assert!(row.contains("Scout") && row.contains("0.1.0") && row.contains("scout.toml"), "{table}");
    assert!(table.contains("Finds and summarizes"), "the description is shown: {table}");

    let json = agent(cwd.path(), &["list", "--json", "--config-dir", dir]);
    let line: serde_json::Value = serde_json::from_str(stdout(&json).trim()).expect("one JSON line");
    assert_eq!((line["id"].as_str(), line["model"].as_str()), (Some("scout"), Some("demo")));

    let show = agent(cwd.path(), &["show", "scout", "--config-dir", dir]);
    assert_eq!(show.status.code(), Some(0), "{}", stderr(&show));
    let shown = stdout(&show);
    assert!(shown.contains("id = \"scout\"") && shown.contains("[provider]") && shown.contains("web.fetch"), "{shown}");
    let show_json = agent(cwd.path(), &["show", "scout", "--json", "--config-dir", dir]);
    let value: serde_json::Value = serde_json::from_str(stdout(&show_json).trim()).expect("JSON");
    assert_eq!(value["agent"]["name"], "Scout");
    assert_eq!(value["provider"]["temperature"], 0.3);

    let validate = agent(cwd.path(), &["validate", "--config-dir", dir]);
    assert_eq!(validate.status.code(), Some(0), "{}", stderr(&validate));
    assert_eq!(stdout(&validate).trim(), "ok: 1 agent file");
    let one = agent(cwd.path(), &["validate", "scout", "--config-dir", dir]);
    assert_eq!((one.status.code(), stdout(&one).trim()), (Some(0), "ok: 1 agent file"));

    // The default config directory is ./.troupe.
    let default = agent(cwd.path(), &["create", "--id", "helper", "--name", "Helper"]);
    assert_eq!(default.status.code(), Some(0), "{}", stderr(&default));
    assert!(cwd.path().join(".troupe/agents/helper.toml").is_file());
}

#[test]
fn create_refuses_bad_ids_templates_and_existing_agents() {
    let cwd = tempdir();
    let dir = text(cwd.path());
    let bad_id = agent(cwd.path(), &["create", "--id", "no spaces", "--name", "X", "--config-dir", dir]);
    assert_eq!(bad_id.status.code(), Some(2));
    assert!(stderr(&bad_id).contains("`no spaces` is not an agent id"), "{}", stderr(&bad_id));
    let bad_template =
        agent(cwd.path(), &["create", "--id", "x", "--name", "X", "--from", "poet", "--config-dir", dir]);
    assert_eq!(bad_template.status.code(), Some(2));
    assert!(stderr(&bad_template).contains("no template `poet`; the templates are researcher, coder"));

    let first = agent(cwd.path(), &["create", "--id", "x", "--name", "X", "--config-dir", dir]);
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    let before = std::fs::read_to_string(cwd.path().join("agents/x.toml")).expect("written");
    let again = agent(cwd.path(), &["create", "--id", "x", "--name", "Other", "--from", "coder", "--config-dir", dir]);
    assert_eq!(again.status.code(), Some(2));
    assert!(stderr(&again).contains("agent `x` is already defined"), "{}", stderr(&again));
    assert_eq!(std::fs::read_to_string(cwd.path().join("agents/x.toml")).expect("kept"), before, "not overwritten");
}

#[test]
fn show_never_prints_the_api_key() {
    let cwd = tempdir();
    let agents = cwd.path().join("agents");
    std::fs::create_dir_all(&agents).expect("creates agents/");
    let file = "[agent]\nid = \"keyed\"\nname = \"Keyed\"\n\n\
                [provider]\nname = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\n\
                api_key = \"sk-ant-api03-very-secret-key\"\n";
    std::fs::write(agents.join("keyed.toml"), file).expect("writes the file");
    for args in [&["show", "keyed"][..], &["show", "keyed", "--json"], &["show", "agents/keyed.toml"]] {
        let mut args = args.to_vec();
        args.extend(["--config-dir", text(cwd.path())]);
        let output = agent(cwd.path(), &args);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        let shown = stdout(&output);
        assert!(!shown.contains("very-secret") && shown.contains("<redacted>"), "{shown}");
        assert!(shown.contains("anthropic/claude-sonnet-4-5"), "{shown}");
    }
}

#[test]
fn a_broken_file_fails_validation_with_its_place() {
    let cwd = tempdir();
    let agents = cwd.path().join("agents");
    std::fs::create_dir_all(&agents).expect("creates agents/");
    std::fs::write(agents.join("broken.toml"), BROKEN).expect("writes the file");
    let dir = text(cwd.path());
    let all = agent(cwd.path(), &["validate", "--config-dir", dir]);
    assert_eq!(all.status.code(), Some(1), "{}", stderr(&all));
    let expected = format!(
        "{}:6:1: unknown key `modle` in [provider]; expected one of name, model, api_key, temperature, max_tokens, prompt_cache",
        agents.join("broken.toml").display()
    );
    assert_eq!(stdout(&all).trim(), expected);
    assert!(stderr(&all).contains("1 problem in the agent files"), "{}", stderr(&all));

    let one = agent(cwd.path(), &["validate", "agents/broken.toml"]);
    assert_eq!(one.status.code(), Some(1));
    assert!(stdout(&one).starts_with("agents/broken.toml:6:1: unknown key `modle`"), "{}", stdout(&one));

    // Commands that need the agents say what is wrong and exit 2.
    let list = agent(cwd.path(), &["list", "--config-dir", dir]);
    assert_eq!(list.status.code(), Some(2));
    assert!(stderr(&list).contains("broken.toml:6:1"), "{}", stderr(&list));
}

#[test]
fn duplicate_ids_name_both_files() {
    let cwd = tempdir();
    for dir in ["one", "two"] {
        let made = agent(cwd.path(), &["create", "--id", "twin", "--name", "Twin", "--dir", dir, "--config-dir", dir]);
        assert_eq!(made.status.code(), Some(0), "{}", stderr(&made));
    }
    let output = agent(cwd.path(), &["validate", "--config-dir", "one", "--config-dir", "two"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let problems = stdout(&output);
    assert!(problems.contains("two/agents/twin.toml:") && problems.contains("one/agents/twin.toml:"), "{problems}");
    assert!(problems.contains("duplicate agent id `twin`"), "{problems}");
}

#[test]
fn an_agent_runs_on_the_demo_model() {
    let cwd = tempdir();
    let workspace = tempdir();
    std::fs::write(workspace.path().join("README.md"), "# Gadget\n").expect("writes the README");
    let dir = text(cwd.path());
    let made =
        agent(cwd.path(), &["create", "--id", "scout", "--name", "Scout", "--from", "researcher", "--config-dir", dir]);
    assert_eq!(made.status.code(), Some(0), "{}", stderr(&made));

    let output = agent(
        cwd.path(),
        &["run", "--agent-id", "scout", "--prompt", "Describe this", "-w", text(workspace.path()), "--config-dir", dir],
    );
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{err}");
    let out = stdout(&output);
    assert!(out.contains("Done. Here is what I did for “Describe this”") && out.contains("# Gadget"), "{out}");
    assert!(err.contains("✓ fs.list") && err.contains("✓ fs.read README.md"), "{err}");
    assert!(err.contains("outcome") && err.contains("completed"), "the summary table: {err}");
    assert!(err.contains("web.search (no web search backend is configured)"), "what is left out is said: {err}");
    assert!(!workspace.path().join("TROUPE_DEMO.md").exists(), "a researcher has no fs.write");

    // By file, with the events as JSON lines.
    let file = cwd.path().join("agents/scout.toml");
    let json = agent(
        cwd.path(),
        &["run", "--agent-file", text(&file), "--prompt", "Describe", "-w", text(workspace.path()), "--json"],
    );
    assert_eq!(json.status.code(), Some(0), "{}", stderr(&json));
    let last = stdout(&json).lines().last().map(str::to_owned).unwrap_or_default();
    let event: serde_json::Value = serde_json::from_str(&last).expect("a JSON event");
    assert_eq!((event["type"].as_str(), event["agent_id"].as_str()), (Some("run_finished"), Some("scout")));
}

#[test]
fn run_needs_a_known_agent_and_a_prompt() {
    let cwd = tempdir();
    let dir = text(cwd.path());
    let unknown = agent(cwd.path(), &["run", "--agent-id", "ghost", "--prompt", "x", "--config-dir", dir]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(stderr(&unknown).contains("no agent `ghost`"), "{}", stderr(&unknown));
    let no_agent = agent(cwd.path(), &["run", "--prompt", "x"]);
    assert_eq!(no_agent.status.code(), Some(2));
    assert!(stderr(&no_agent).contains("--agent-id ID or --agent-file FILE"), "{}", stderr(&no_agent));
    let no_prompt = agent(cwd.path(), &["run", "--agent-id", "x"]);
    assert_eq!(no_prompt.status.code(), Some(2));
    let mixed = agent(cwd.path(), &["run", "--worker", "--prompt", "x"]);
    assert_eq!(mixed.status.code(), Some(2), "--worker and --prompt are different modes");
}

#[test]
fn validate_refuses_a_provider_nobody_configured_and_takes_one_without_its_key() {
    let cwd = tempdir();
    let config = cwd.path().join("conf");
    let agents = config.join("agents");
    std::fs::create_dir_all(&agents).expect("the agents directory");
    let file =
        |id: &str, model: &str| format!("[agent]\nid = \"{id}\"\nname = \"{id}\"\n\n[provider]\nmodel = \"{model}\"\n");
    // A known provider whose key is not set is valid: the key is the run's business.
    std::fs::write(agents.join("known.toml"), file("known", "anthropic/claude-sonnet-4-5")).expect("written");
    let dir = text(&config);
    let fine = agent(cwd.path(), &["validate", "--config-dir", dir]);
    assert_eq!((fine.status.code(), stdout(&fine).trim()), (Some(0), "ok: 1 agent file"), "{}", stderr(&fine));

    let typo = agents.join("typo.toml");
    std::fs::write(&typo, file("typo", "antropic/claude-sonnet-4-5")).expect("written");
    let all = agent(cwd.path(), &["validate", "--config-dir", dir]);
    assert_eq!(all.status.code(), Some(1), "{}", stdout(&all));
    let said = stdout(&all);
    assert!(said.contains(&typo.display().to_string()) && said.contains("no provider `antropic`"), "{said}");
    assert!(stderr(&all).contains("1 agent file names an unknown model"), "{}", stderr(&all));
    // Named alone, and as a file.
    let one = agent(cwd.path(), &["validate", "typo", "--config-dir", dir]);
    assert_eq!(one.status.code(), Some(1), "{}", stdout(&one));
    let path = agent(cwd.path(), &["validate", text(&typo)]);
    assert_eq!(path.status.code(), Some(1), "{}", stdout(&path));
    assert!(stdout(&path).contains("no provider `antropic`"), "{}", stdout(&path));
}
