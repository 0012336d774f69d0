//! End-to-end tests of the `troupe` binary: real processes, a real loopback mock server.

use std::path::PathBuf;
use std::process::{Command, Output};
use troupe_core::Usage;
use troupe_testkit::{MockLlmServer, MockTurn};

/// A fresh working directory, so no `troupe.toml` but the test's own is read.
struct Workdir(PathBuf);

impl Workdir {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("troupe-cli-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("creates the temp dir");
        Workdir(dir)
    }

    fn with_config(self, text: &str) -> Self {
        std::fs::write(self.0.join("troupe.toml"), text).expect("writes troupe.toml");
        self
    }
}

impl Drop for Workdir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `troupe ARGS` in `dir` with only `env` set: no key of the machine running the tests leaks in.
fn troupe(dir: &Workdir, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_troupe"));
    command.args(args).current_dir(&dir.0).env_clear();
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

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("a runtime")
}

/// The binary allocates with mimalloc (main.rs's `ALLOCATOR`): with many runs in flight,
/// the system allocator's locks cost a server a third of its CPU and more
/// (docs/PERFORMANCE.md). Asked to be verbose, mimalloc names itself as the process starts;
/// unasked, it says nothing.
#[test]
fn the_binary_allocates_with_mimalloc() {
    let dir = Workdir::new("allocator");
    let verbose = troupe(&dir, &["--version"], &[("MIMALLOC_VERBOSE", "1")]);
    assert_eq!(verbose.status.code(), Some(0), "{}", stderr(&verbose));
    assert!(stderr(&verbose).starts_with("mimalloc: process init"), "{}", stderr(&verbose));
    let quiet = troupe(&dir, &["--version"], &[]);
    assert_eq!((quiet.status.code(), stderr(&quiet)), (Some(0), String::new()));
}

#[test]
fn models_list_shows_the_registry_with_prices() {
    let dir = Workdir::new("models");
    let output = troupe(&dir, &["models", "list"], &[("GROQ_API_KEY", "gsk")]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = stdout(&output);
    let sonnet = text.lines().find(|l| l.contains("anthropic/claude-sonnet-4-5")).expect("a claude-sonnet-4-5 row");
    assert!(sonnet.contains("200,000") && sonnet.contains("$3.00") && sonnet.contains("$15.00"), "{sonnet}");
    assert!(text.contains("GROQ_API_KEY (set)"), "{text}");
    assert!(text.contains("ANTHROPIC_API_KEY (not set)"), "{text}");
}

#[test]
fn models_list_json_is_one_object_per_line_and_includes_troupe_toml() {
    let dir = Workdir::new("models-json").with_config(
        "[providers.acme]\nkind = \"openai-chat\"\nbase_url = \"http://127.0.0.1:9/v1\"\n\n\
         [models.\"acme/rocket\"]\ncontext_window = 32000\nmax_output_tokens = 4000\ninput_price = 1.5\noutput_price = 2.5\n",
    );
    let output = troupe(&dir, &["models", "list", "--json"], &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let values: Vec<serde_json::Value> =
        stdout(&output).lines().map(|l| serde_json::from_str(l).expect("each line is JSON")).collect();
    let model = |id: &str| values.iter().find(|v| v["id"] == id).cloned().unwrap_or_default();
    assert_eq!(model("anthropic/claude-sonnet-4-5")["pricing"]["input"], 3.0);
    assert_eq!(model("acme/rocket")["context_window"], 32000);
    assert_eq!(model("acme/rocket")["pricing"]["output"], 2.5);
    let acme = values.iter().find(|v| v["type"] == "provider" && v["name"] == "acme").expect("the acme provider");
    assert_eq!(acme["kind"], "openai-chat");
}

#[test]
fn chat_with_the_demo_model_streams_text_and_reports_usage() {
    let dir = Workdir::new("demo");
    let output = troupe(&dir, &["chat", "--model", "demo", "hello"], &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(text.contains("troupe") && text.contains("\u{201c}hello\u{201d}"), "{text}");
    let err = stderr(&output);
    let usage = err.lines().last().unwrap_or_default();
    assert!(usage.starts_with("tokens: in ") && usage.contains(" · out ") && usage.contains("cost $0.0000"), "{err}");
}

#[test]
fn chat_without_any_key_falls_back_to_demo_with_a_notice() {
    let dir = Workdir::new("no-key");
    let output = troupe(&dir, &["chat", "hi"], &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(err.lines().next().is_some_and(|l| l.starts_with("note:") && l.contains("demo")), "{err}");
    assert!(stdout(&output).contains("\u{201c}hi\u{201d}"));
}

#[test]
fn chat_with_a_missing_key_is_a_one_line_usage_error() {
    let dir = Workdir::new("missing-key");
    let output = troupe(&dir, &["chat", "--model", "anthropic/claude-sonnet-4-5", "hi"], &[("OPENAI_API_KEY", "sk")]);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(stderr(&output), "error: ANTHROPIC_API_KEY is not set; export it or pass --model demo\n");
    assert!(output.stdout.is_empty());
}

#[test]
fn configuration_errors_exit_2_with_their_position() {
    let dir = Workdir::new("bad-config").with_config("[model]\ndefault_model = \"demo\"\ncolour = \"blue\"\n");
    let output = troupe(&dir, &["chat", "hi"], &[]);
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert!(err.starts_with("error: configuration error: troupe.toml:3:1: unknown field `colour`"), "{err}");

    let output = troupe(&Workdir::new("unknown-model"), &["chat", "--model", "acme/rocket", "hi"], &[]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("no provider `acme`"), "{}", stderr(&output));
}

#[test]
fn chat_streams_from_anthropic_at_the_configured_base_url() {
    let runtime = runtime();
    let server = runtime.block_on(MockLlmServer::start()).expect("the mock server starts");
    let usage = Usage { input_tokens: 12, output_tokens: 34, ..Default::default() };
    server.push(MockTurn::text("Hello from the mock server").with_usage(usage).with_delta_chars(4));
    let dir = Workdir::new("anthropic");
    let url = server.url();
    let output = troupe(
        &dir,
        &["chat", "--model", "anthropic/claude-sonnet-4-5", "--system", "Be brief.", "--max-tokens", "99", "hi"],
        &[("ANTHROPIC_API_KEY", "sk-ant-fake"), ("ANTHROPIC_BASE_URL", &url)],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout(&output), "Hello from the mock server\n");
    let err = stderr(&output);
    // 12 × $3 + 34 × $15 per million tokens.
    assert!(err.starts_with("tokens: in 12 · out 34 · cost $0.0005 · "), "{err}");
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].header("x-api-key"), Some("sk-ant-fake"));
    assert_eq!(requests[0].body["model"], "claude-sonnet-4-5");
    assert_eq!(requests[0].body["max_tokens"], 99);
    assert_eq!(requests[0].body["messages"][0]["content"][0]["text"], "hi");
    assert!(requests[0].body["system"].to_string().contains("Be brief."), "{}", requests[0].body);
}

#[test]
fn chat_uses_the_default_model_of_troupe_toml_and_a_configured_provider() {
    let runtime = runtime();
    let server = runtime.block_on(MockLlmServer::start()).expect("the mock server starts");
    server.push(MockTurn::text("acme says hi"));
    let dir = Workdir::new("acme").with_config(&format!(
        "default_model = \"acme/rocket\"\n\n[providers.acme]\nkind = \"openai-chat\"\nbase_url = \"{}\"\napi_key_env = \"ACME_KEY\"\n",
        server.openai_url()
    ));
    let data = dir.0.join("data");
    let data = data.to_str().expect("UTF-8");
    let trusted = troupe(&dir, &["trust"], &[("XDG_DATA_HOME", data)]);
    assert_eq!(trusted.status.code(), Some(0), "{}", stderr(&trusted));
    let output = troupe(&dir, &["chat", "--json", "hello"], &[("ACME_KEY", "acme-secret"), ("XDG_DATA_HOME", data)]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let events: Vec<serde_json::Value> =
        stdout(&output).lines().map(|l| serde_json::from_str(l).expect("each line is JSON")).collect();
    // The vocabulary of `troupe run --json`: the run's events.
    let text: String =
        events.iter().filter(|e| e["type"] == "message_delta").filter_map(|e| e["delta"].as_str()).collect();
    assert_eq!(text, "acme says hi");
    assert_eq!(events.first().map(|e| e["type"].clone()), Some("run_started".into()));
    assert_eq!(events.last().map(|e| e["type"].clone()), Some("run_finished".into()));
    // A model without prices has no cost.
    assert!(stderr(&output).contains("cost n/a"), "{}", stderr(&output));
    assert_eq!(server.requests()[0].header("authorization"), Some("Bearer acme-secret"));

    // TROUPE_MODEL beats the file.
    let output = troupe(
        &dir,
        &["chat", "hello"],
        &[("ACME_KEY", "acme-secret"), ("TROUPE_MODEL", "demo"), ("XDG_DATA_HOME", data)],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(stdout(&output).contains("demo model"));
    assert_eq!(server.requests().len(), 1);
}

/// A `troupe.toml` found where troupe starts (a cloned repository's, one an agent edited)
/// that sends a key to a URL of its own is used only once trusted, as it was then.
#[test]
fn a_troupe_toml_that_sends_a_key_elsewhere_is_used_only_once_trusted() {
    let runtime = runtime();
    let server = runtime.block_on(MockLlmServer::start()).expect("the mock server starts");
    server.push(MockTurn::text("acme says hi"));
    let config = format!(
        "default_model = \"acme/rocket\"\n\n[providers.acme]\nkind = \"openai-chat\"\nbase_url = \"{}\"\napi_key_env = \"ANTHROPIC_API_KEY\"\n",
        server.openai_url()
    );
    let dir = Workdir::new("untrusted").with_config(&config);
    let data = dir.0.join("data");
    let env = [("ANTHROPIC_API_KEY", "sk-ant-secret"), ("XDG_DATA_HOME", data.to_str().expect("UTF-8"))];

    let refused = troupe(&dir, &["chat", "hello"], &env);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    let said = stderr(&refused);
    assert!(said.contains("troupe.toml is not trusted, and it sends ANTHROPIC_API_KEY to http://127.0.0.1:"), "{said}");
    assert!(said.contains("run `troupe trust`") && !said.contains("sk-ant-secret"), "{said}");
    assert!(server.requests().is_empty(), "the key went nowhere");

    let trusted = troupe(&dir, &["trust"], &env);
    assert_eq!(trusted.status.code(), Some(0), "{}", stderr(&trusted));
    assert!(stdout(&trusted).contains("- it sends ANTHROPIC_API_KEY to http://127.0.0.1:"), "{}", stdout(&trusted));
    assert!(data.join("troupe/trusted.toml").is_file(), "kept in the user's data directory");
    let output = troupe(&dir, &["chat", "hello"], &env);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(server.requests()[0].header("authorization"), Some("Bearer sk-ant-secret"));

    // Changed, it is another file.
    std::fs::write(dir.0.join("troupe.toml"), format!("{config}# edited\n")).expect("edits troupe.toml");
    let changed = troupe(&dir, &["chat", "hello"], &env);
    assert_eq!(changed.status.code(), Some(2), "{}", stderr(&changed));
    assert_eq!(server.requests().len(), 1);
    // A file that routes no key and loosens nothing needs no trust.
    std::fs::write(dir.0.join("troupe.toml"), "default_model = \"demo\"\n").expect("rewrites troupe.toml");
    assert_eq!(troupe(&dir, &["chat", "hello"], &env).status.code(), Some(0));
}

#[test]
fn a_failed_call_exits_1() {
    let runtime = runtime();
    let server = runtime.block_on(MockLlmServer::start()).expect("the mock server starts");
    server.push(MockTurn::status(400, "max_tokens: too large"));
    let dir = Workdir::new("failure");
    let url = server.openai_url();
    let output = troupe(
        &dir,
        &["chat", "--model", "openai/gpt-4o", "hi"],
        &[("OPENAI_API_KEY", "sk"), ("OPENAI_BASE_URL", &url)],
    );
    assert_eq!(output.status.code(), Some(1));
    let err = stderr(&output);
    assert!(err.starts_with("error: the run failed") && err.contains("openai: invalid request (HTTP 400)"), "{err}");
    assert!(err.contains("too large"), "{err}");
}

#[test]
fn ctrl_c_cancels_the_stream() {
    use std::io::Read;
    let dir = Workdir::new("ctrl-c");
    let mut child = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .args(["chat", "--model", "demo", "hello"])
        .current_dir(&dir.0)
        .env_clear()
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the binary starts");
    // The first delta arrives while the reply is still streaming.
    let mut first = [0u8; 5];
    child.stdout.take().expect("piped stdout").read_exact(&mut first).expect("text arrives");
    assert_eq!(&first, b"Hello");
    let pid = child.id().to_string();
    let signalled = Command::new("kill").args(["-INT", &pid]).status().expect("kill runs");
    assert!(signalled.success());
    let output = child.wait_with_output().expect("the binary ends");
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("error: cancelled"), "{}", stderr(&output));
}

/// What users build and install is stripped: no debug info, no symbols (a debug build
/// of the binary is hundreds of megabytes); a profile to profile with keeps them.
#[test]
fn the_release_profile_strips_what_users_install() {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.toml");
    let text = std::fs::read_to_string(&manifest).expect("the workspace manifest");
    let manifest: toml::Table = toml::from_str(&text).expect("the manifest is TOML");
    let profile = |name: &str| manifest["profile"][name].as_table().cloned().unwrap_or_default();
    let release = profile("release");
    assert_eq!(release.get("strip").and_then(toml::Value::as_bool), Some(true), "{release:?}");
    assert!(release.get("debug").is_none_or(|d| d.as_bool() == Some(false)), "{release:?}");
    let profiling = profile("profiling");
    assert_eq!(profiling.get("inherits").and_then(toml::Value::as_str), Some("release"));
    assert_eq!(profiling.get("strip").and_then(toml::Value::as_str), Some("none"));
}
