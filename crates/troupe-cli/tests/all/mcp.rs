//! MCP end to end with the real binary: `troupe mcp serve` driven by rmcp's client (agents
//! listed as tools, one run on the `demo` model), and an agent file whose MCP server (the
//! reference server, from `troupe.toml`) gives it a tool the model calls.

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, Tool};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::process::{Child, Command};
use troupe_testkit::{MockLlmServer, MockTurn, RecordedRequest, test_deps};

const EVERYTHING: &str = "@modelcontextprotocol/server-everything";

fn agent_file(id: &str, description: &str, tools: &[&str], extra: &str) -> String {
    let tools: String = tools.iter().map(|t| format!("[[tools]]\nname = \"{t}\"\n\n")).collect();
    format!(
        "[agent]\nid = \"{id}\"\nname = \"{id}\"\ndescription = \"{description}\"\n\n[provider]\nmodel = \"demo\"\n\n\
         {tools}{extra}"
    )
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

/// `troupe mcp serve ARGS` in `cwd`, its stdin and stdout piped for the MCP client.
fn serve(cwd: &Path, args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_troupe"))
        .args(["mcp", "serve"])
        .args(args)
        .current_dir(cwd)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("the binary starts")
}

/// Lists the tools of a `troupe mcp serve` child, then hands the client back.
async fn connect(child: &mut Child) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
    let stdout = child.stdout.take().expect("piped");
    let stdin = child.stdin.take().expect("piped");
    tokio::time::timeout(Duration::from_secs(20), ().serve((stdout, stdin)))
        .await
        .expect("the handshake is prompt")
        .expect("the handshake succeeds")
}

fn read_only(tool: &Tool) -> Option<bool> {
    tool.annotations.as_ref().and_then(|a| a.read_only_hint)
}

fn text_of(result: &rmcp::model::CallToolResult) -> String {
    result.content.iter().filter_map(|c| c.as_text().map(|t| t.text.clone())).collect::<Vec<_>>().join("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_serve_offers_the_agents_as_tools_and_runs_them() {
    let cwd = tempfile::tempdir().expect("tempdir");
    let conf = cwd.path().join("conf");
    write(&conf.join("agents/reader.toml"), &agent_file("reader", "Reads files.", &["fs.read", "fs.list"], ""));
    write(&conf.join("agents/writer.toml"), &agent_file("writer", "Writes files.", &["fs.read", "fs.write"], ""));
    let conf = conf.to_str().expect("UTF-8");

    let mut child = serve(cwd.path(), &["--config-dir", conf, "--approve", "auto"]);
    let client = connect(&mut child).await;
    let tools = client.peer().list_all_tools().await.expect("tools");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["reader", "writer"]);
    assert_eq!(read_only(&tools[0]), Some(true), "fs.read and fs.list only observe");
    assert_eq!(read_only(&tools[1]), Some(false), "the writer may write");
    assert!(tools[0].description.as_deref().is_some_and(|d| d.starts_with("Reads files.")), "{:?}", tools[0]);
    assert_eq!(tools[0].input_schema["required"], json!(["prompt"]));

    let arguments = json!({"prompt": "ping over MCP"}).as_object().cloned().expect("an object");
    let answer = client.peer().call_tool(CallToolRequestParams::new("reader").with_arguments(arguments)).await;
    let answer = answer.expect("the call is answered");
    assert_ne!(answer.is_error, Some(true), "{answer:?}");
    assert!(text_of(&answer).contains("ping over MCP"), "the demo model repeats the task: {}", text_of(&answer));

    client.cancel().await.expect("the client closes");
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait()).await.expect("it exits").expect("status");
    assert!(status.success(), "{status}");

    // One agent, under the default policy: nobody can approve its writes, so they are refused
    // and the agent only observes.
    let mut child = serve(cwd.path(), &["--config-dir", conf, "--agent", "writer"]);
    let client = connect(&mut child).await;
    let tools = client.peer().list_all_tools().await.expect("tools");
    assert_eq!(tools.iter().map(|t| t.name.as_ref()).collect::<Vec<_>>(), ["writer"]);
    assert_eq!(read_only(&tools[0]), Some(true), "its writes are denied whatever the arguments");
    client.cancel().await.expect("the client closes");

    let unknown = std::process::Command::new(env!("CARGO_BIN_EXE_troupe"))
        .args(["mcp", "serve", "--config-dir", conf, "--agent", "nobody"])
        .current_dir(cwd.path())
        .env_clear()
        .stdin(Stdio::null())
        .output()
        .expect("runs");
    assert_eq!(unknown.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no agent `nobody`; the agents are reader, writer"));
}

/// The text of the first tool result in an Anthropic request, if any.
fn tool_result(request: &RecordedRequest) -> Option<String> {
    let messages = request.body["messages"].as_array()?;
    messages.iter().flat_map(|m| m["content"].as_array().into_iter().flatten()).find_map(|block| {
        if block["type"] != "tool_result" {
            return None;
        }
        match &block["content"] {
            Value::String(text) => Some(text.clone()),
            Value::Array(parts) => Some(parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("")),
            _ => None,
        }
    })
}

fn node() -> Option<PathBuf> {
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths).map(|dir| dir.join("node")).find(|p| p.is_file())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_gets_the_tools_of_the_workspace_mcp_servers() {
    let test = "an_agent_gets_the_tools_of_the_workspace_mcp_servers";
    let (Some(modules), Some(node)) = (test_deps::node_modules(EVERYTHING), node()) else {
        test_deps::skip(test, &format!("node or {EVERYTHING} is not installed"));
        return;
    };
    let script = modules.join(EVERYTHING).join("dist/index.js");
    let llm = MockLlmServer::start().await.expect("mock LLM");
    llm.push(MockTurn::tool_call("call_1", "everything_echo", json!({"message": "via the cli"})));
    llm.respond_with(|request| match tool_result(request) {
        Some(result) => MockTurn::text(format!("The server said: {result}")),
        None => MockTurn::text("nothing came back"),
    });

    let cwd = tempfile::tempdir().expect("tempdir");
    write(
        &cwd.path().join("troupe.toml"),
        &format!(
            "[[mcp.servers]]\nname = \"everything\"\ncommand = \"{}\"\nargs = [\"{}\", \"stdio\"]\nallow = [\"echo\", \"get-sum\"]\n",
            node.display(),
            script.display()
        ),
    );
    let mut file = agent_file("echoer", "Echoes.", &["fs.read", "everything/echo"], "");
    file = file.replace("model = \"demo\"", "model = \"anthropic/claude-sonnet-4-5\"");
    write(&cwd.path().join(".troupe/agents/echoer.toml"), &file);
    let url = llm.url();
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_troupe"))
        .args(["agent", "run", "--agent-id", "echoer", "--prompt", "Echo something.", "--approve", "auto"])
        .current_dir(cwd.path())
        .env_clear()
        .env("ANTHROPIC_API_KEY", "sk-ant-fake")
        .env("ANTHROPIC_BASE_URL", &url)
        .output()
        .await
        .expect("runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("The server said: Echo: via the cli"), "{stdout}\n{stderr}");
    let requests = llm.requests();
    let offered: Vec<&str> =
        requests[0].body["tools"].as_array().expect("tools").iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(offered, ["fs_read", "everything_echo"], "only the listed tool of the server is offered");
}

#[test]
fn an_mcp_server_that_cannot_start_is_a_configuration_error() {
    let cwd = tempfile::tempdir().expect("tempdir");
    let extra = "[[mcp.servers]]\nname = \"ghost\"\ncommand = \"/nonexistent/troupe-no-such-server\"\n";
    write(&cwd.path().join(".troupe/agents/haunted.toml"), &agent_file("haunted", "", &["fs.read"], extra));
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_troupe"))
        .args(["agent", "run", "--agent-id", "haunted", "--prompt", "hello"])
        .current_dir(cwd.path())
        .env_clear()
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("agent `haunted`"), "{stderr}");
    assert!(stderr.contains("MCP server `ghost`: cannot start `/nonexistent/troupe-no-such-server`"), "{stderr}");
}

#[test]
fn agent_show_hides_mcp_values_written_out_but_shows_references() {
    let cwd = tempfile::tempdir().expect("tempdir");
    let extra = "[[mcp.servers]]\nname = \"remote\"\nurl = \"https://mcp.example.com/mcp\"\n\
                 headers = { Authorization = \"Bearer ${REMOTE_TOKEN}\", X-Key = \"sk-written-out\" }\n";
    let file = cwd.path().join("remote.toml");
    write(&file, &agent_file("remote", "", &["fs.read"], extra));
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_troupe"))
        .args(["agent", "show", file.to_str().expect("UTF-8")])
        .current_dir(cwd.path())
        .env_clear()
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    let shown = String::from_utf8_lossy(&output.stdout);
    assert!(!shown.contains("sk-written-out"), "{shown}");
    assert!(shown.contains("<redacted>") && shown.contains("Bearer ${REMOTE_TOKEN}"), "{shown}");
}

/// `troupe mcp serve --http 127.0.0.1:0 ARGS` in `cwd`, serving an agent `echo` behind the
/// token `mcp-s3cret`: the child and the URL it says it serves at.
async fn serve_http(cwd: &Path, args: &[&str]) -> (Child, String) {
    let conf = cwd.join("conf");
    write(&conf.join("agents/echo.toml"), &agent_file("echo", "Answers.", &["grep"], ""));
    let mut child = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .args(["mcp", "serve", "--http", "127.0.0.1:0", "--config-dir"])
        .arg(&conf)
        .args(args)
        .current_dir(cwd)
        .env_clear()
        .env("TROUPE_SERVER_TOKEN", "mcp-s3cret")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("troupe mcp serve starts");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stderr));
    let url = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await.expect("stderr reads") {
            if let Some(rest) = line.strip_prefix("troupe mcp serving echo on ") {
                return rest.trim().to_owned();
            }
        }
        panic!("troupe mcp serve ended without saying where it listens");
    })
    .await
    .expect("it listens within a minute");
    assert!(url.ends_with("/mcp"), "{url}");
    // Read on: a closed pipe would fail the server's next line on stderr.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, url)
}

/// An MCP `initialize` posted to `url` without the bearer token.
async fn initialize_without_token(url: &str) -> reqwest::Response {
    reqwest::Client::new()
        .post(url)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}))
        .send()
        .await
        .expect("the server answers")
}

/// `troupe mcp serve --http` holds connections as `troupe serve` does: one that never
/// finishes its headers is closed after `--header-timeout`, and past `--max-connections`
/// a new client waits for a slot instead of being served at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_serve_over_http_closes_a_stalled_connection_and_keeps_its_connection_limit() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let cwd = tempfile::tempdir().expect("tempdir");
    let (_child, url) = serve_http(cwd.path(), &["--header-timeout", "1", "--max-connections", "1"]).await;
    let addr = url.trim_start_matches("http://").trim_end_matches("/mcp").to_owned();
    // The only slot, taken by a client that never finishes its headers.
    let mut stalled = tokio::net::TcpStream::connect(&addr).await.expect("connects");
    stalled.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ").await.expect("writes part of a header");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = std::time::Instant::now();
    let refused = initialize_without_token(&url).await;
    let waited = started.elapsed();
    assert_eq!(refused.status(), 401, "no token, no session");
    assert!(waited >= Duration::from_millis(700), "the second client waited for the only slot: {waited:?}");
    let closed = tokio::time::timeout(Duration::from_secs(5), async {
        let mut buffer = [0u8; 256];
        loop {
            match stalled.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(_) => continue,
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "the stalled connection was closed");
}

/// `troupe mcp serve --http` behind a token, driven by the official MCP Python SDK over
/// streamable HTTP: the agents listed as tools, one run; a request without the token is
/// refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_serve_over_http_answers_the_python_sdk_behind_the_token() {
    let Some(python) = test_deps::python_with("mcp.client.streamable_http") else {
        test_deps::skip("mcp_serve_over_http_answers_the_python_sdk", "the Python package mcp is not installed");
        return;
    };
    let cwd = tempfile::tempdir().expect("tempdir");
    let (mut child, url) = serve_http(cwd.path(), &[]).await;

    let refused = initialize_without_token(&url).await;
    assert_eq!(refused.status(), 401, "no token, no session");

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/http_client.py");
    let output = tokio::time::timeout(
        Duration::from_secs(90),
        Command::new(&python).arg(&script).arg(&url).arg("mcp-s3cret").kill_on_drop(true).output(),
    )
    .await
    .expect("the client finishes")
    .expect("python runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    let said: Vec<Value> = stdout.lines().map(|l| serde_json::from_str(l).expect("JSON")).collect();
    let find = |event: &str| said.iter().find(|l| l["event"] == event).cloned().expect(event);
    assert_eq!(find("initialized")["server"], "troupe");
    assert_eq!(find("tools")["names"], json!(["echo"]));
    let call = find("call");
    assert_eq!(call["is_error"], false, "{call}");
    assert!(call["text"].as_str().is_some_and(|t| t.contains("ping over HTTP")), "the demo model repeats it: {call}");
    // The structured report, which the SDK checked against the tool's output schema.
    let report = &call["structured"];
    assert_eq!(report["outcome"], "completed", "{call}");
    assert_eq!(report["answer"].as_str(), call["text"].as_str(), "{call}");
    assert!(report["run_id"].as_str().is_some_and(|id| id.starts_with("run_")), "{call}");
    assert_eq!(call["output_schema"]["required"], json!(["answer", "run_id", "outcome"]), "{call}");

    let pid = child.id().expect("a pid").to_string();
    std::process::Command::new("kill").args(["-TERM", &pid]).status().expect("kill runs");
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait()).await.expect("it exits").expect("status");
    assert!(status.success(), "{status}");
}

#[test]
fn mcp_serve_over_http_refuses_a_public_address_without_a_token() {
    let cwd = tempfile::tempdir().expect("tempdir");
    let conf = cwd.path().join("conf");
    write(&conf.join("agents/echo.toml"), &agent_file("echo", "Answers.", &["grep"], ""));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_troupe"))
        .args(["mcp", "serve", "--http", "0.0.0.0:0", "--config-dir"])
        .arg(&conf)
        .current_dir(cwd.path())
        .env_clear()
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("TROUPE_SERVER_TOKEN"), "{stderr}");
}
