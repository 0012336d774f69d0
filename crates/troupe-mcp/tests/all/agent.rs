//! An agent using a real MCP server: the model (the mock Anthropic server, over HTTP, so
//! tool names go through the wire encoding) calls `everything/echo`; the call waits for a
//! person's approval, because MCP tools are side effects by default; once approved it
//! reaches the real server, and the model answers with what the server said.

use crate::common;

use common::everything;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use troupe_core::{AgentEventKind, PauseReason};
use troupe_mcp::McpToolset;
use troupe_model::anthropic::AnthropicWire;
use troupe_model::{ApiKey, HttpConfig, HttpProvider, LlmProvider};
use troupe_runtime::{Engine, FixedModel, RunHandle, RunOutcome};
use troupe_testkit::{MockLlmServer, MockTurn, RecordedRequest};

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

async fn next_pause(handle: &mut RunHandle) -> (String, String, String) {
    let wait = async {
        while let Some(event) = handle.events.next_event().await {
            if let AgentEventKind::RunPaused { reason: PauseReason::Approval { call_id, tool, reason, .. } } =
                event.kind
            {
                return Some((call_id.to_string(), tool, reason));
            }
        }
        None
    };
    tokio::time::timeout(Duration::from_secs(20), wait).await.expect("in time").expect("the run pauses")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_calls_echo_after_approval_and_answers_with_the_echo() {
    let Some(config) = everything("an_agent_calls_echo_after_approval_and_answers_with_the_echo") else { return };
    let mcp = McpToolset::connect(&[config]).await.expect("the MCP server connects");

    let llm = MockLlmServer::start().await.expect("mock LLM");
    // The model calls the tool by its wire name; the provider maps it back to `everything/echo`.
    llm.push(MockTurn::tool_call("call_echo", "everything_echo", json!({"message": "hello from troupe"})));
    llm.respond_with(|request| match tool_result(request) {
        Some(result) => MockTurn::text(format!("The server said: {result}")),
        None => MockTurn::text("no tool result reached me"),
    });
    let provider: Arc<dyn LlmProvider> = Arc::new(
        HttpProvider::new(
            HttpConfig::new("anthropic", llm.url(), Some(ApiKey::new("test-key"))),
            AnthropicWire::default(),
        )
        .expect("client"),
    );
    let engine = Engine::builder().resolver(Arc::new(FixedModel::new(provider, "mock-model"))).build();
    let dir = tempfile::tempdir().expect("tempdir");
    let agent = engine
        .agent("echoer")
        .workspace(dir.path())
        .tools(mcp.tools())
        .only_tools(["everything/echo"])
        .instructions("Repeat the user's words through the echo tool.")
        .build()
        .expect("the agent builds");

    let mut handle = agent.start("Echo: hello from troupe");
    let (call_id, tool, reason) = next_pause(&mut handle).await;
    assert_eq!((call_id.as_str(), tool.as_str()), ("call_echo", "everything/echo"));
    assert!(reason.contains("external side effect"), "{reason}");
    assert_eq!(llm.requests().len(), 1, "nothing more happens before the decision");
    let first = &llm.requests()[0];
    let offered: Vec<&str> =
        first.body["tools"].as_array().expect("tools").iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(offered, ["everything_echo"], "the provider sees the wire name");

    handle.signals.approve(call_id).await.expect("the approval is delivered");
    let RunHandle { events, signals, result, .. } = handle;
    drop((events, signals));
    let output = tokio::time::timeout(Duration::from_secs(20), result).await.expect("in time").expect("the run ends");
    assert_eq!(output.outcome, RunOutcome::Completed { output: "The server said: Echo: hello from troupe".into() });
    assert!(output.text.contains("Echo: hello from troupe"), "{}", output.text);
    assert_eq!(output.tool_calls, 1);
    assert_eq!(tool_result(&llm.requests()[1]).as_deref(), Some("Echo: hello from troupe"));
}
