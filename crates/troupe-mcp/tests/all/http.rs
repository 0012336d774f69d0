//! The client against the real MCP reference server over streamable HTTP on a loopback
//! port: listing and calling, headers filled in from variables, and a server that goes away
//! and comes back on the same port.

use crate::common;

use common::everything_script;
use serde_json::json;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use troupe_mcp::{McpServerConfig, McpToolset};
use troupe_tools::{ToolCatalog, ToolContext, Workspace};

/// A free loopback port (free when asked; the server binds it right after).
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

/// Starts the reference server in streamable HTTP mode on `port` and waits until it listens.
async fn start_server(script: &Path, port: u16) -> Child {
    let mut child = Command::new("node")
        .arg(script)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("node starts");
    let stderr = child.stderr.take().expect("piped");
    let mut lines = BufReader::new(stderr).lines();
    let listening = async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains("listening on port") {
                return true;
            }
        }
        false
    };
    let up = tokio::time::timeout(Duration::from_secs(20), listening).await.unwrap_or(false);
    assert!(up, "the server listens on {port}");
    // Keep draining stderr so the server never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    child
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamable_http_lists_calls_and_survives_a_restart() {
    let Some(script) = everything_script("streamable_http_lists_calls_and_survives_a_restart") else { return };
    let port = free_port();
    let mut server = start_server(&script, port).await;
    let config = McpServerConfig::http("remote", format!("http://127.0.0.1:{port}/mcp"))
        .header("X-Troupe-Test", "Bearer ${TEST_TOKEN}")
        .timeout(Duration::from_secs(10));
    let lookup: troupe_mcp::VariableLookup =
        Arc::new(|name: &str| (name == "TEST_TOKEN").then(|| "http-secret-1".to_owned()));
    let toolset = McpToolset::connect_with_variables(&[config], lookup).await.expect("connects over HTTP");
    let catalog = ToolCatalog::with_tools(toolset.tools()).expect("catalog");
    assert!(catalog.names().contains(&"remote/get-sum"), "{:?}", catalog.names());
    let dir = tempfile::tempdir().expect("tempdir");
    let ctx = ToolContext::new(Arc::new(Workspace::new(dir.path()).expect("workspace")));

    let sum = catalog.invoke("remote/get-sum", json!({"a": 40, "b": 2}), &ctx).await;
    assert_eq!(sum.content, "The sum of 40 and 2 is 42.", "{sum:?}");
    let echo = catalog.invoke("remote/echo", json!({"message": "over http"}), &ctx).await;
    assert_eq!(echo.content, "Echo: over http");

    // The server goes away: the call fails clearly, without the header's secret.
    server.kill().await.expect("killed");
    let down = catalog.invoke("remote/echo", json!({"message": "anyone?"}), &ctx).await;
    assert!(down.is_error, "{down:?}");
    assert!(down.content.contains("MCP server `remote`"), "{}", down.content);
    assert!(!down.content.contains("http-secret-1"), "{}", down.content);

    // It comes back on the same port: the next call reconnects and goes through.
    let _server = start_server(&script, port).await;
    let back = catalog.invoke("remote/get-sum", json!({"a": 1, "b": 1}), &ctx).await;
    assert_eq!(back.content, "The sum of 1 and 1 is 2.", "{back:?}");
    assert!(toolset.client("remote").expect("client").reconnects() >= 1);
}
