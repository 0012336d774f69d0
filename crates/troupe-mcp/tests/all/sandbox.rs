//! A stdio MCP server runs confined: it writes in its workspace and nowhere else, cannot
//! read troupe's environment through `/proc`, and runs unconfined only when its
//! configuration says `mode = "full"`.

use crate::common::everything_script;
use troupe_mcp::{McpError, McpServerConfig, McpToolset};
use troupe_sandbox::{SandboxMode, SandboxSettings};

/// A server that first tries to write inside and outside its workspace and to copy the
/// environment of its parent (troupe) into the workspace, then serves as the reference
/// server.
fn probing_server(test: &str, workspace: &std::path::Path, outside: &std::path::Path) -> Option<McpServerConfig> {
    let script = everything_script(test)?;
    let shell = format!(
        "touch '{inside}' ; touch '{outside}' ; cat /proc/$PPID/environ > '{env}' 2>/dev/null ; exec node '{script}' stdio",
        inside = workspace.join("inside").display(),
        outside = outside.join("outside").display(),
        env = workspace.join("parent-environ").display(),
        script = script.display(),
    );
    // The script is named inside the shell's command, not as an argument of its own: its
    // packages are granted by hand, as a user would for such a server.
    let modules = script.ancestors().find(|a| a.ends_with("node_modules"))?.to_path_buf();
    let settings = SandboxSettings { read: vec![modules], ..SandboxSettings::default() };
    Some(McpServerConfig::stdio("probe", "sh", vec!["-c".into(), shell]).in_workspace(workspace).sandbox(settings))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_server_writes_only_in_its_workspace_and_cannot_read_troupes_environment() {
    let test = "a_stdio_server_writes_only_in_its_workspace_and_cannot_read_troupes_environment";
    let (workspace, outside) = (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir"));
    let Some(config) = probing_server(test, workspace.path(), outside.path()) else { return };
    let toolset = McpToolset::connect(&[config]).await.expect("the confined server starts and serves");
    assert!(!toolset.tools().is_empty(), "its tools are listed");
    assert!(workspace.path().join("inside").exists(), "it may write in its workspace");
    assert!(!outside.path().join("outside").exists(), "it may not write outside it");
    let leaked = std::fs::read(workspace.path().join("parent-environ")).unwrap_or_default();
    assert!(leaked.is_empty(), "troupe's environment stayed out of reach: {} bytes", leaked.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_in_full_mode_runs_unconfined() {
    let test = "a_server_in_full_mode_runs_unconfined";
    let (workspace, outside) = (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir"));
    let Some(config) = probing_server(test, workspace.path(), outside.path()) else { return };
    let config = config.sandbox(SandboxSettings::of_mode(SandboxMode::Full));
    let _toolset = McpToolset::connect(&[config]).await.expect("the server starts");
    assert!(outside.path().join("outside").exists(), "full confines nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_needs_more_than_its_sandbox_grants_says_where_to_grant_it() {
    let test = "a_server_that_needs_more_than_its_sandbox_grants_says_where_to_grant_it";
    let Some(script) = everything_script(test) else { return };
    let workspace = tempfile::tempdir().expect("tempdir");
    // The script's packages are not granted: node cannot load it.
    let shell = format!("exec node '{}' stdio", script.display());
    let config = McpServerConfig::stdio("starved", "sh", vec!["-c".into(), shell]).in_workspace(workspace.path());
    let error = McpToolset::connect(&[config]).await.expect_err("the server cannot read its packages");
    let McpError::Connect { message, .. } = &error else { panic!("a connect error: {error:?}") };
    assert!(message.contains("it ran confined, sandbox: workspace-write"), "{message}");
    assert!(message.contains("[mcp.servers.sandbox]"), "{message}");
}
