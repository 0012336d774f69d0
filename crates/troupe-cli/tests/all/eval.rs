//! `troupe eval`: the shipped suite on the demo model, a suite on the mock model over HTTP,
//! a threshold missed, a grader that hangs, and a suite file with mistakes.

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use troupe_testkit::{MockLlmServer, MockTurn};

fn troupe(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_troupe"))
        .arg("eval")
        .args(args)
        .current_dir(cwd)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .stdin(Stdio::null())
        .output()
        .expect("the binary runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn the_shipped_suite_passes_on_the_demo_model_with_its_report() {
    let cwd = tempfile::tempdir().expect("a dir");
    let suite = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/evals/demo.toml");
    let html = cwd.path().join("report.html");
    let output = troupe(cwd.path(), &[suite.to_str().expect("utf-8"), "--json", "--html", "report.html"]);
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    let report: Value = serde_json::from_str(stdout(&output).trim()).expect("a JSON report");
    let cases = report["cases"].as_array().expect("cases");
    assert!(cases.len() >= 10, "{report}");
    assert_eq!((report["overall"]["passed"].as_u64(), report["overall"]["runs"].as_u64()), (Some(22), Some(22)));
    assert!(report["overall"]["low"].as_f64().expect("low") > 0.8, "{report}");
    let kinds: std::collections::BTreeSet<String> = cases
        .iter()
        .flat_map(|c| c["runs"][0]["verdicts"].as_array().cloned().unwrap_or_default())
        .filter_map(|v| v["grader"].as_str().map(str::to_owned))
        .collect();
    assert!(kinds.len() >= 8, "every kind of grader: {kinds:?}");
    for case in cases {
        assert_eq!(case["runs"].as_array().map(Vec::len), Some(2), "{case}");
        assert!(case["mean_tokens"].as_f64().unwrap_or_default() > 0.0, "{case}");
    }
    let page = std::fs::read_to_string(html).expect("the HTML report");
    assert!(page.starts_with("<!doctype html>") && !page.contains("<script"), "{page}");
    assert_eq!(page.matches("<tr><th scope=\"row\">").count(), cases.len());
    assert_eq!(page.matches("class=\"bar\"").count(), cases.len(), "a bar per case");
    assert!(page.contains("threshold 90%: met") && page.contains("100% (85–100%)"), "{page}");
}

#[test]
fn a_suite_on_the_mock_model_misses_its_threshold_and_names_why() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    let server = runtime.block_on(MockLlmServer::start()).expect("the mock server starts");
    server.push_all([MockTurn::text("The capital is Paris."), MockTurn::text("It is 41.")]);
    let cwd = tempfile::tempdir().expect("a dir");
    let config = format!("[providers.mock]\nkind = \"anthropic\"\nbase_url = \"{}\"\n", server.url());
    std::fs::write(cwd.path().join("troupe.toml"), config).expect("troupe.toml");
    let suite = "[suite]\nmodel = \"mock/claude\"\nconcurrency = 1\nthreshold = 0.75\n\
        [[cases]]\nname = \"capital\"\ntask = \"Capital of France?\"\n[[cases.expect]]\nkind = \"contains\"\nvalue = \"Paris\"\n\
        [[cases]]\nname = \"sum\"\ntask = \"20 + 22?\"\n[[cases.expect]]\nkind = \"regex\"\npattern = \"\\\\b42\\\\b\"\n";
    std::fs::write(cwd.path().join("s.toml"), suite).expect("the suite");
    let output = troupe(cwd.path(), &["s.toml"]);
    assert_eq!(output.status.code(), Some(1), "{}{}", stdout(&output), stderr(&output));
    let table = stdout(&output);
    assert!(table.contains("s: 1/2 passed, 50%"), "{table}");
    assert!(table.contains("regex: the answer \"It is 41.\" does not match"), "{table}");
    assert!(stderr(&output).contains("the pass rate 50% is under the suite's threshold of 75%"), "{}", stderr(&output));
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "one model call a case");
    assert!(requests[0].body.to_string().contains("Capital of France?"), "{}", requests[0].body);
}

#[test]
fn a_cases_attachment_reaches_the_model_with_its_task() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    let server = runtime.block_on(MockLlmServer::start()).expect("the mock server starts");
    server.push_all([MockTurn::text("A red dot.")]);
    let cwd = tempfile::tempdir().expect("a dir");
    let config = format!("[providers.mock]\nkind = \"anthropic\"\nbase_url = \"{}\"\n", server.url());
    std::fs::write(cwd.path().join("troupe.toml"), config).expect("troupe.toml");
    std::fs::create_dir(cwd.path().join("fixtures")).expect("fixtures/");
    std::fs::write(cwd.path().join("fixtures/dot.png"), b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR").expect("the image");
    let suite = "[suite]\nmodel = \"mock/claude\"\n\
        [[cases]]\nname = \"dot\"\ntask = \"What is in the picture?\"\nattachments = [\"fixtures/dot.png\"]\n\
        [[cases.expect]]\nkind = \"contains\"\nvalue = \"dot\"\n";
    std::fs::write(cwd.path().join("s.toml"), suite).expect("the suite");
    let output = troupe(cwd.path(), &["s.toml"]);
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let content = &requests[0].body["messages"][0]["content"];
    let image = content.as_array().and_then(|blocks| blocks.iter().find(|b| b["type"] == "image"));
    assert_eq!(image.map(|b| b["source"]["media_type"].clone()), Some("image/png".into()), "{content}");
}

#[test]
fn a_grader_that_hangs_is_stopped_and_fails_its_case() {
    let cwd = tempfile::tempdir().expect("a dir");
    let suite = "[suite]\nmodel = \"demo\"\n[[cases]]\nname = \"slow\"\ntask = \"Who are you?\"\n\
        [[cases.expect]]\nkind = \"command\"\nrun = \"sleep 60\"\ntimeout_seconds = 0.5\n";
    std::fs::write(cwd.path().join("s.toml"), suite).expect("the suite");
    let started = Instant::now();
    let output = troupe(cwd.path(), &["s.toml", "--json"]);
    assert!(started.elapsed() < Duration::from_secs(30), "the hang was cut");
    assert_eq!(output.status.code(), Some(0), "no threshold: the report is the result; {}", stderr(&output));
    let report: Value = serde_json::from_str(stdout(&output).trim()).expect("a JSON report");
    let verdict = &report["cases"][0]["runs"][0]["verdicts"][0];
    assert_eq!(verdict["pass"], false);
    assert_eq!(verdict["reason"], "`sleep 60` did not finish within 0.5s and was stopped");
}

#[test]
fn a_suite_file_with_a_mistake_is_named_at_its_place() {
    let cwd = tempfile::tempdir().expect("a dir");
    std::fs::write(
        cwd.path().join("s.toml"),
        "[[cases]]\nname = \"a\"\ntask = \"go\"\n[[cases.expect]]\nkind = \"regex\"\npattern = \"([a-z\"\n",
    )
    .expect("the suite");
    let output = troupe(cwd.path(), &["s.toml"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("s.toml:6:11: case `a`: the pattern is not a regular expression: unclosed"),
        "{}",
        stderr(&output)
    );
    let missing = troupe(cwd.path(), &["none.toml"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(stderr(&missing).contains("none.toml: cannot read it"), "{}", stderr(&missing));
}

#[test]
fn a_judge_grades_the_answer_by_its_rubric_on_the_mock_model() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    let server = runtime.block_on(MockLlmServer::start()).expect("the mock server starts");
    server.push_all([
        MockTurn::text("Paris is the capital."),
        MockTurn::text(r#"{"pass": false, "reason": "It does not name the river."}"#),
    ]);
    let cwd = tempfile::tempdir().expect("a dir");
    let config = format!("[providers.mock]\nkind = \"anthropic\"\nbase_url = \"{}\"\n", server.url());
    std::fs::write(cwd.path().join("troupe.toml"), config).expect("troupe.toml");
    let suite = "[suite]\nmodel = \"mock/claude\"\njudge_model = \"mock/judge\"\n[[cases]]\nname = \"river\"\n\
        task = \"Capital of France, and its river?\"\n[[cases.expect]]\nkind = \"judge\"\nrubric = \"Names Paris and the Seine.\"\n";
    std::fs::write(cwd.path().join("s.toml"), suite).expect("the suite");
    let output = troupe(cwd.path(), &["s.toml", "--json"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let report: Value = serde_json::from_str(stdout(&output).trim()).expect("a JSON report");
    let verdict = &report["cases"][0]["runs"][0]["verdicts"][0];
    assert_eq!((verdict["grader"].as_str(), verdict["pass"].as_bool()), (Some("judge"), Some(false)), "{report}");
    assert_eq!(verdict["reason"], "It does not name the river.");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let judged = &requests[1].body;
    assert_eq!(judged["model"], "judge", "the suite's judge model");
    assert!(
        judged.to_string().contains("Names Paris and the Seine.")
            && judged.to_string().contains("Paris is the capital.")
    );
    assert!(judged["output_config"]["format"]["schema"]["properties"]["pass"].is_object(), "{judged}");
}

#[test]
fn two_models_are_compared_case_by_case() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    let server = runtime.block_on(MockLlmServer::start()).expect("the mock server starts");
    server.push_all([MockTurn::text("I am a mock.")]);
    let cwd = tempfile::tempdir().expect("a dir");
    let config = format!("[providers.mock]\nkind = \"anthropic\"\nbase_url = \"{}\"\n", server.url());
    std::fs::write(cwd.path().join("troupe.toml"), config).expect("troupe.toml");
    let suite = "[suite]\nmodel = \"demo\"\nthreshold = 1.0\n[[cases]]\nname = \"offline\"\ntask = \"Who are you?\"\n\
        [[cases.expect]]\nkind = \"contains\"\nvalue = \"offline\"\n";
    std::fs::write(cwd.path().join("s.toml"), suite).expect("the suite");
    let output = troupe(cwd.path(), &["s.toml", "--compare", "mock/claude", "--json", "--html", "c.html"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let comparison: Value = serde_json::from_str(stdout(&output).trim()).expect("JSON");
    assert_eq!(comparison["a"]["overall"]["passed"], 1);
    assert_eq!(comparison["b"]["overall"]["passed"], 0);
    assert_eq!(comparison["b"]["subject"], "the coding agent on mock/claude");
    assert!(
        stderr(&output).contains("under the suite's threshold: the coding agent on mock/claude"),
        "{}",
        stderr(&output)
    );
    let page = std::fs::read_to_string(cwd.path().join("c.html")).expect("the page");
    assert!(page.contains("<td>-100 points</td>") && !page.contains("<script"), "{page}");
}

#[test]
fn a_case_is_made_from_a_recorded_run_and_passes_again() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    let server = runtime.block_on(MockLlmServer::start()).expect("the mock server starts");
    let write = || MockTurn::tool_call("t1", "fs_write", serde_json::json!({"path": "hello.txt", "content": "hi\n"}));
    server.push_all([write(), MockTurn::text("Wrote hello.txt.")]);
    let cwd = tempfile::tempdir().expect("a dir");
    let config = format!("[providers.mock]\nkind = \"anthropic\"\nbase_url = \"{}\"\n", server.url());
    std::fs::write(cwd.path().join("troupe.toml"), config).expect("troupe.toml");
    let run = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .args(["run", "--model", "mock/claude", "--approve", "auto", "-w", ".", "--store", "runs.db", "Write hello"])
        .current_dir(cwd.path())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .output()
        .expect("runs");
    assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));
    let id = stderr(&run).lines().find_map(|l| l.strip_prefix("run ")).expect("the run id").to_owned();

    let added =
        troupe(cwd.path(), &["add-from-run", &id, "--store", "runs.db", "--suite", "s.toml", "--name", "hello"]);
    assert_eq!(added.status.code(), Some(0), "{}", stderr(&added));
    let text = std::fs::read_to_string(cwd.path().join("s.toml")).expect("the suite");
    assert!(
        text.contains(&format!("# From run {id}"))
            && text.contains("name = \"hello\"")
            && text.contains("task = \"Write hello\""),
        "{text}"
    );
    assert!(text.contains("kind = \"tool_call\"") && text.contains("tool = \"fs.write\""), "{text}");

    std::fs::write(cwd.path().join("s.toml"), format!("[suite]\nmodel = \"mock/claude\"\n\n{text}")).expect("a model");
    server.push_all([write(), MockTurn::text("Wrote hello.txt.")]);
    let again = troupe(cwd.path(), &["s.toml"]);
    assert_eq!(again.status.code(), Some(0), "{}{}", stdout(&again), stderr(&again));
    assert!(stdout(&again).contains("1/1 passed"), "{}", stdout(&again));
}

/// The shipped suite's HTML report in Chromium (a narrow window): its figures, a row and a
/// drawn bar per case, no script, no error.
#[test]
fn the_html_report_shows_its_figures_and_chart_in_a_browser() {
    let Some(modules) = troupe_testkit::test_deps::node_modules("playwright-core") else {
        troupe_testkit::test_deps::skip("the eval report browser test", "node or playwright-core is not installed");
        return;
    };
    if !Path::new("/usr/bin/chromium").is_file() {
        troupe_testkit::test_deps::skip(
            "the eval report browser test",
            "Chromium (/usr/bin/chromium) is not installed",
        );
        return;
    }
    let cwd = tempfile::tempdir().expect("a dir");
    let suite = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/evals/demo.toml");
    let output = troupe(cwd.path(), &[suite.to_str().expect("utf-8"), "--runs", "1", "--html", "report.html"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/eval/report.mjs");
    let browser = Command::new("node")
        .args([script, modules.to_str().expect("utf-8"), "/usr/bin/chromium"])
        .arg(cwd.path().join("report.html"))
        .output()
        .expect("node runs");
    assert!(browser.status.success(), "{}", stderr(&browser));
    let seen: Value = serde_json::from_str(stdout(&browser).trim()).expect("one JSON line");
    assert_eq!(seen["problems"], serde_json::json!([]), "{seen}");
    assert_eq!(seen["title"], "Eval: demo");
    assert_eq!(seen["overall"], "100% (74–100%)", "11 of 11: {seen}");
    assert_eq!(seen["rows"].as_array().map(Vec::len), Some(11), "{seen}");
    let bars = seen["bars"].as_array().expect("bars");
    assert_eq!(bars.len(), 11);
    assert!(bars.iter().all(|w| w.as_f64().unwrap_or_default() > 100.0), "every bar drawn full: {seen}");
    assert_eq!(seen["scripts"], 0);
    assert_eq!(seen["overflows"], false, "fits a narrow window: {seen}");
}

#[test]
fn a_team_is_evaluated_with_every_members_tool_calls() {
    let cwd = tempfile::tempdir().expect("a dir");
    let suite = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/evals/team.toml");
    let output = troupe(cwd.path(), &[suite.to_str().expect("utf-8"), "--json"]);
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    let report: Value = serde_json::from_str(stdout(&output).trim()).expect("a JSON report");
    assert_eq!(report["subject"], "team `project`");
    let run = &report["cases"][0]["runs"][0];
    assert_eq!(run["pass"], true, "{run}");
    assert_eq!(run["verdicts"].as_array().map(Vec::len), Some(3), "{run}");

    // A case asking for a call nobody made fails, naming the calls that were made.
    let text = std::fs::read_to_string(&suite).expect("the suite").replace("to = \"researcher\"", "to = \"nobody\"");
    let team = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/team/team.toml");
    let text = text.replace("../team/team.toml", team.to_str().expect("utf-8"));
    std::fs::write(cwd.path().join("s.toml"), text).expect("the suite");
    let output = troupe(cwd.path(), &["s.toml", "--json"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let report: Value = serde_json::from_str(stdout(&output).trim()).expect("a JSON report");
    let reason = report["cases"][0]["runs"][0]["verdicts"][0]["reason"].as_str().unwrap_or_default().to_owned();
    assert!(
        reason.starts_with("no call of delegate with {\"to\":\"nobody\"}; the calls were [")
            && reason.contains("fs.read"),
        "{reason}"
    );

    // A team's task takes no attachment: the case fails saying so, and no team runs.
    std::fs::write(cwd.path().join("dot.png"), b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR").expect("the image");
    let attached = std::fs::read_to_string(cwd.path().join("s.toml")).expect("the suite").replace(
        "task = \"Describe this repository\"",
        "task = \"Describe this repository\"\nattachments = [\"dot.png\"]",
    );
    std::fs::write(cwd.path().join("s.toml"), attached).expect("the suite");
    let output = troupe(cwd.path(), &["s.toml", "--json"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let report: Value = serde_json::from_str(stdout(&output).trim()).expect("a JSON report");
    let error = report["cases"][0]["runs"][0]["error"].as_str().unwrap_or_default().to_owned();
    assert!(error.starts_with("a team's task takes no attachments"), "{error}");
    assert!(!cwd.path().join("TROUPE_DEMO.md").exists());
}
