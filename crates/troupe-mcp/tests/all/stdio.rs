//! The client against the real MCP reference server over stdio: tool listing and
//! declarations, calls, the child's environment, allow and deny, timeouts, lazy loading,
//! a server that dies (and one that cannot come back), and servers that never start.

use crate::common;

use common::{everything, everything_script};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use troupe_mcp::{
    CALL_TOOL, McpClient, McpError, McpServerConfig, McpToolset, SEARCH_TOOL, ToolLoading, VariableLookup,
    to_tool_output,
};
use troupe_tools::{Effect, Idempotency, ToolCatalog, ToolContext, ToolError, Workspace, is_object_schema};

fn context() -> (tempfile::TempDir, ToolContext) {
    let dir = tempfile::tempdir().expect("tempdir");
    let workspace = Workspace::new(dir.path()).expect("workspace");
    (dir, ToolContext::new(Arc::new(workspace)))
}

fn catalog(toolset: &McpToolset) -> ToolCatalog {
    ToolCatalog::with_tools(toolset.tools()).expect("MCP tools make a valid catalog")
}

fn variables(pairs: &[(&str, &str)]) -> VariableLookup {
    let map: BTreeMap<String, String> = pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    Arc::new(move |name: &str| map.get(name).cloned())
}

/// Kills the server process group of `client` and gives the session time to notice.
async fn kill_server(client: &McpClient) -> u32 {
    let pid = client.server_pid().expect("a stdio server has a pid");
    let group = nix::unistd::Pid::from_raw(i32::try_from(pid).expect("pid fits"));
    nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL).expect("the server is killed");
    tokio::time::sleep(Duration::from_millis(300)).await;
    pid
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_tools_become_catalog_tools_that_need_approval() {
    let Some(config) = everything("the_reference_tools_become_catalog_tools_that_need_approval") else { return };
    let toolset = McpToolset::connect(&[config]).await.expect("connects");
    let catalog = catalog(&toolset);
    let names = catalog.names();
    for expected in ["everything/echo", "everything/get-sum", "everything/get-env"] {
        assert!(names.contains(&expected), "{expected} in {names:?}");
    }
    let echo = catalog.get("everything/echo").expect("echo").declaration();
    assert_eq!(echo.effect, Effect::ExternalSideEffect, "an untrusted readOnlyHint lifts nothing");
    assert!(echo.requires_approval());
    assert_eq!(echo.idempotency, Idempotency::NonIdempotent);
    assert_eq!(echo.description, "Echoes back the input string");
    assert_eq!(echo.input_schema["properties"]["message"]["type"], "string");
    assert_eq!(echo.input_schema["required"], json!(["message"]));
    assert!(echo.input_schema.get("$schema").is_none(), "{}", echo.input_schema);
    // get-env takes no arguments: its schema still is an arguments object with properties.
    let get_env = &catalog.get("everything/get-env").expect("get-env").declaration().input_schema;
    assert!(is_object_schema(get_env) && get_env["properties"].is_object(), "{get_env}");
    let info = toolset.client("everything").expect("the client").tool("echo").expect("echo info");
    assert_eq!(info.hints.read_only, Some(true), "the hint is kept as sent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_sum_adds_and_echo_echoes() {
    let Some(config) = everything("get_sum_adds_and_echo_echoes") else { return };
    let toolset = McpToolset::connect(&[config]).await.expect("connects");
    let catalog = catalog(&toolset);
    let (_dir, ctx) = context();
    let sum = catalog.invoke("everything/get-sum", json!({"a": 2, "b": 3.5}), &ctx).await;
    assert!(!sum.is_error, "{}", sum.content);
    assert_eq!(sum.content, "The sum of 2 and 3.5 is 5.5.");
    let echo = catalog.invoke("everything/echo", json!({"message": "über ✓"}), &ctx).await;
    assert_eq!(echo.content, "Echo: über ✓");
    // Arguments sent as a JSON string by a model are accepted too.
    let text = catalog.invoke("everything/get-sum", json!("{\"a\": 1, \"b\": 1}"), &ctx).await;
    assert_eq!(text.content, "The sum of 1 and 1 is 2.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_arguments_come_back_as_errors_the_model_can_read() {
    let Some(config) = everything("bad_arguments_come_back_as_errors_the_model_can_read") else { return };
    let toolset = McpToolset::connect(&[config]).await.expect("connects");
    let catalog = catalog(&toolset);
    let (_dir, ctx) = context();
    let wrong = catalog.invoke("everything/get-sum", json!({"a": "two", "b": 3}), &ctx).await;
    assert!(wrong.is_error, "{}", wrong.content);
    assert!(wrong.content.to_lowercase().contains("number") || wrong.content.contains("invalid"), "{}", wrong.content);
    let array = catalog.invoke("everything/echo", json!([1, 2]), &ctx).await;
    assert!(matches!(array.error, Some(ToolError::InvalidArguments { .. })), "{array:?}");
    // The server is fine afterwards.
    assert_eq!(catalog.invoke("everything/echo", json!({"message": "ok"}), &ctx).await.content, "Echo: ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_child_sees_only_path_home_tmpdir_and_its_configured_variables() {
    let Some(config) = everything("the_child_sees_only_path_home_tmpdir_and_its_configured_variables") else {
        return;
    };
    let config = config.env("TROUPE_TEST_TOKEN", "${UPSTREAM_TOKEN}").env("PLAIN", "as written");
    let lookup = variables(&[("UPSTREAM_TOKEN", "tok-123456")]);
    let client = McpClient::connect_with_variables(config, lookup).await.expect("connects");
    let result = client.call("get-env", serde_json::Map::new(), true).await.expect("get-env answers");
    let text = to_tool_output(result).expect("success").content;
    let env: BTreeMap<String, Value> = serde_json::from_str(&text).expect("the environment as JSON");
    assert_eq!(env.get("TROUPE_TEST_TOKEN"), Some(&json!("tok-123456")), "the reference is filled in");
    assert_eq!(env.get("PLAIN"), Some(&json!("as written")));
    assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some(), "the test itself has cargo's variables");
    // TMPDIR: the sandbox's private temporary directory, the only one the server may write.
    let expected = ["PATH", "HOME", "TMPDIR", "TROUPE_TEST_TOKEN", "PLAIN"];
    let unexpected: Vec<&String> = env.keys().filter(|k| !expected.contains(&k.as_str())).collect();
    assert!(unexpected.is_empty(), "the environment is scrubbed, found {unexpected:?}");
    let tmpdir = env.get("TMPDIR").and_then(Value::as_str).unwrap_or_default();
    assert!(tmpdir.contains("troupe-sandbox-"), "a private TMPDIR: {tmpdir}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_and_deny_choose_the_tools_and_trust_lifts_approval() {
    let Some(config) = everything("allow_and_deny_choose_the_tools_and_trust_lifts_approval") else { return };
    let config = config.allow(["echo", "get-sum", "get-env", "no-such-tool"]).deny(["get-env"]).trust_annotations(true);
    let toolset = McpToolset::connect(&[config]).await.expect("connects");
    let catalog = catalog(&toolset);
    assert_eq!(catalog.names(), ["everything/echo", "everything/get-sum"]);
    let echo = catalog.get("everything/echo").expect("echo").declaration();
    assert_eq!((echo.effect, echo.idempotency), (Effect::ReadOnly, Idempotency::Idempotent));
    assert!(!echo.requires_approval(), "a trusted read-only tool needs no approval");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_call_times_out_and_the_session_stays_usable() {
    let Some(config) = everything("a_slow_call_times_out_and_the_session_stays_usable") else { return };
    let toolset = McpToolset::connect(&[config.timeout(Duration::from_secs(1))]).await.expect("connects");
    let catalog = catalog(&toolset);
    let (_dir, ctx) = context();
    let started = std::time::Instant::now();
    let slow =
        catalog.invoke("everything/trigger-long-running-operation", json!({"duration": 5, "steps": 5}), &ctx).await;
    assert!(matches!(slow.error, Some(ToolError::Timeout { after }) if after == Duration::from_secs(1)), "{slow:?}");
    assert!(started.elapsed() < Duration::from_secs(3), "abandoned at the timeout: {:?}", started.elapsed());
    let echo = catalog.invoke("everything/echo", json!({"message": "still here"}), &ctx).await;
    assert_eq!(echo.content, "Echo: still here");
    assert_eq!(toolset.client("everything").expect("client").reconnects(), 0, "a timeout is not a lost session");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_server_is_reconnected_once_per_call() {
    let Some(config) = everything("a_killed_server_is_reconnected_once_per_call") else { return };
    let toolset = McpToolset::connect(&[config]).await.expect("connects");
    let catalog = catalog(&toolset);
    let client = toolset.client("everything").expect("client");
    let (_dir, ctx) = context();
    assert_eq!(catalog.invoke("everything/echo", json!({"message": "one"}), &ctx).await.content, "Echo: one");
    let first = kill_server(client).await;
    let after = catalog.invoke("everything/echo", json!({"message": "two"}), &ctx).await;
    assert_eq!(after.content, "Echo: two", "{after:?}");
    assert_eq!(client.reconnects(), 1);
    let second = client.server_pid().expect("a new server");
    assert_ne!(first, second, "a new process serves the session");
    kill_server(client).await;
    let again = catalog.invoke("everything/get-sum", json!({"a": 1, "b": 2}), &ctx).await;
    assert_eq!(again.content, "The sum of 1 and 2 is 3.");
    assert_eq!(client.reconnects(), 2, "each lost session is reconnected");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_cannot_come_back_is_a_clear_error() {
    let Some(script) = everything_script("a_server_that_cannot_come_back_is_a_clear_error") else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let marker = dir.path().join("started");
    // Starts once; every later start fails.
    let shell = format!(
        "if [ -e '{m}' ]; then echo 'refusing to start twice' >&2; exit 7; fi; touch '{m}'; exec node '{s}' stdio",
        m = marker.display(),
        s = script.display()
    );
    // The script is inside the shell's command: its packages are granted by hand, and the
    // marker's directory is the server's workspace.
    let modules = script.ancestors().find(|a| a.ends_with("node_modules")).expect("installed by npm").to_path_buf();
    let settings = troupe_sandbox::SandboxSettings { read: vec![modules], ..Default::default() };
    let config =
        McpServerConfig::stdio("once", "sh", vec!["-c".into(), shell]).in_workspace(dir.path()).sandbox(settings);
    let toolset = McpToolset::connect(&[config]).await.expect("connects the first time");
    let catalog = catalog(&toolset);
    let (_dir, ctx) = context();
    kill_server(toolset.client("once").expect("client")).await;
    let lost = catalog.invoke("once/echo", json!({"message": "hello?"}), &ctx).await;
    assert!(lost.is_error);
    assert!(lost.content.contains("MCP server `once` is unavailable: reconnecting failed"), "{}", lost.content);
    assert!(lost.content.contains("refusing to start twice"), "the server's stderr explains: {}", lost.content);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_lost_mid_flight_is_retried_only_when_repeatable() {
    let Some(config) = everything("a_call_lost_mid_flight_is_retried_only_when_repeatable") else { return };
    let client = Arc::new(McpClient::connect(config).await.expect("connects"));
    let slow = json!({"duration": 1, "steps": 1});
    let Value::Object(arguments) = slow else { unreachable!() };

    let killer = {
        let client = Arc::clone(&client);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            kill_server(&client).await;
        })
    };
    let unknown = client.call("trigger-long-running-operation", arguments.clone(), false).await;
    killer.await.expect("killed");
    assert!(matches!(unknown, Err(McpError::OutcomeUnknown { .. })), "{unknown:?}");
    assert_eq!(client.reconnects(), 1, "reconnected, not retried");

    let killer = {
        let client = Arc::clone(&client);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            kill_server(&client).await;
        })
    };
    let retried = client.call("trigger-long-running-operation", arguments, true).await;
    killer.await.expect("killed");
    let text = to_tool_output(retried.expect("a repeatable call is retried")).expect("success").content;
    assert!(text.contains("completed"), "{text}");
    assert_eq!(client.reconnects(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lazy_servers_are_searched_and_called() {
    let Some(config) = everything("lazy_servers_are_searched_and_called") else { return };
    let toolset = McpToolset::connect(&[config.loading(ToolLoading::Lazy)]).await.expect("connects");
    let catalog = catalog(&toolset);
    assert_eq!(catalog.names(), [SEARCH_TOOL, CALL_TOOL]);
    let search = catalog.get(SEARCH_TOOL).expect("search").declaration();
    assert!(search.is_read_only(), "searching only reads the listed tools");
    let call = catalog.get(CALL_TOOL).expect("call").declaration();
    assert!(call.requires_approval(), "untrusted targets keep the call side-effecting");

    let (_dir, ctx) = context();
    let found = catalog.invoke(SEARCH_TOOL, json!({"query": "sum numbers"}), &ctx).await;
    assert!(!found.is_error, "{}", found.content);
    let matches = found.structured.as_ref().expect("structured")["matches"].as_array().expect("matches").clone();
    assert_eq!(matches[0]["tool"], "get-sum", "{matches:?}");
    assert_eq!(matches[0]["server"], "everything");
    assert_eq!(matches[0]["input_schema"]["required"], json!(["a", "b"]));
    let all = catalog.invoke(SEARCH_TOOL, json!({"query": "", "limit": 50}), &ctx).await;
    let listed = all.structured.as_ref().expect("structured")["matches"].as_array().expect("matches").len();
    assert_eq!(listed, toolset.client("everything").expect("client").tools().len(), "an empty query lists all");
    let none = catalog.invoke(SEARCH_TOOL, json!({"query": "zzzqqq"}), &ctx).await;
    assert!(none.content.starts_with("No tool matches"), "{}", none.content);

    let sum = catalog
        .invoke(CALL_TOOL, json!({"server": "everything", "tool": "get-sum", "arguments": {"a": 20, "b": 22}}), &ctx)
        .await;
    assert_eq!(sum.content, "The sum of 20 and 22 is 42.");
    let unknown = catalog.invoke(CALL_TOOL, json!({"server": "everything", "tool": "nope"}), &ctx).await;
    assert!(unknown.is_error && unknown.content.contains(SEARCH_TOOL), "{}", unknown.content);
    let server = catalog.invoke(CALL_TOOL, json!({"server": "elsewhere", "tool": "echo"}), &ctx).await;
    assert!(server.is_error && server.content.contains("the servers are everything"), "{}", server.content);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lazy_call_is_read_only_only_when_every_target_is() {
    let Some(config) = everything("a_lazy_call_is_read_only_only_when_every_target_is") else { return };
    let trusted = config.clone().loading(ToolLoading::Lazy).trust_annotations(true);
    let readers = McpToolset::connect(&[trusted.clone().allow(["echo", "get-sum"])]).await.expect("connects");
    let call = readers.tools().into_iter().find(|t| t.declaration().name == CALL_TOOL).expect("call tool");
    assert_eq!(call.declaration().effect, Effect::ReadOnly);
    assert!(!call.declaration().requires_approval());
    // toggle-simulated-logging changes the server's state: not read-only.
    let mixed = McpToolset::connect(&[trusted.allow(["echo", "toggle-simulated-logging"])]).await.expect("connects");
    let call = mixed.tools().into_iter().find(|t| t.declaration().name == CALL_TOOL).expect("call tool");
    assert!(call.declaration().requires_approval(), "one side-effecting target makes every call ask");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_that_never_start_are_typed_errors() {
    let bogus = McpServerConfig::stdio("bogus", "/nonexistent/troupe-no-such-mcp-server", vec![]);
    let error = McpToolset::connect(&[bogus]).await.expect_err("no such program");
    assert!(matches!(&error, McpError::Spawn { server, .. } if server == "bogus"), "{error:?}");
    assert!(error.to_string().contains("check `command`"), "{error}");

    let not_mcp =
        McpServerConfig::stdio("mute", "sh", vec!["-c".into(), "echo 'not an MCP server' >&2; exit 3".into()]);
    let error = McpClient::connect(not_mcp).await.expect_err("exits at once");
    let McpError::Connect { message, .. } = &error else { panic!("a connect error: {error:?}") };
    assert!(message.contains("not an MCP server"), "{message}");

    let secret =
        McpServerConfig::stdio("keyed", "sh", vec!["-c".into(), "exit 0".into()]).env("K", "${TROUPE_UNSET_X}");
    let error = McpClient::connect_with_variables(secret, variables(&[])).await.expect_err("unset variable");
    assert_eq!(error, McpError::MissingVariable { server: "keyed".into(), variable: "TROUPE_UNSET_X".into() });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_of_one_name_are_refused() {
    let Some(config) = everything("two_servers_of_one_name_are_refused") else { return };
    let error = McpToolset::connect(&[config.clone(), config]).await.expect_err("one name twice");
    assert!(matches!(&error, McpError::InvalidConfig { server, .. } if server == "everything"), "{error:?}");
}
