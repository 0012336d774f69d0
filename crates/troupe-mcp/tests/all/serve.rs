//! Agents served as MCP tools, driven by rmcp's own client over an in-memory pipe: the
//! tool list and its honest annotations, a call answered by the agent on the `demo` model,
//! and the errors a client can get.

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation};
use serde_json::json;
use troupe_mcp::{AgentServer, ServedAgent, serve_agents};
use troupe_runtime::{ApprovalRule, Engine};

fn text_of(result: &rmcp::model::CallToolResult) -> String {
    result.content.iter().filter_map(|c| c.as_text().map(|t| t.text.clone())).collect::<Vec<_>>().join("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_are_tools_with_honest_annotations_and_answer_prompts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Engine::builder().build();
    let reader = engine.agent("reader").workspace(dir.path()).readonly_tools().model("demo").build().expect("reader");
    let coder = engine.agent("coder").workspace(dir.path()).coding_tools().model("demo").build().expect("coder");
    // The coding tools, with every one that is not read-only denied whatever its arguments.
    let mut careful = engine.agent("careful coder").workspace(dir.path()).coding_tools().model("demo");
    for tool in troupe_tools::coding_tools() {
        if !tool.declaration().is_read_only() {
            careful = careful.approval_rule(ApprovalRule::deny(tool.declaration().name.clone()));
        }
    }
    let careful = careful.build().expect("careful");
    let server = AgentServer::new(vec![
        ServedAgent::new(reader, "Answers questions about the workspace."),
        ServedAgent::new(coder, ""),
        ServedAgent::new(careful, "Looks, never touches."),
    ])
    .expect("distinct names");

    let (client_side, server_side) = tokio::io::duplex(64 * 1024);
    let (read, write) = tokio::io::split(server_side);
    let serving = tokio::spawn(serve_agents(server, read, write));
    let info = ClientConfig::new(ClientCapabilities::default(), Implementation::new("test-client", "1.0"));
    let client = info.serve(client_side).await.expect("the handshake succeeds");

    let tools = client.peer().list_all_tools().await.expect("tools");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["reader", "coder", "careful_coder"]);
    let hints = |n: usize| tools[n].annotations.clone().expect("annotated");
    assert_eq!(hints(0).read_only_hint, Some(true), "only read-only tools");
    assert_eq!(hints(0).open_world_hint, Some(false));
    assert_eq!(hints(1).read_only_hint, Some(false), "shell and writes");
    assert_eq!(hints(1).destructive_hint, Some(true));
    assert_eq!(hints(1).open_world_hint, Some(true));
    assert_eq!(hints(2).read_only_hint, Some(true), "what its policy always denies does not count");
    assert_eq!(tools[0].input_schema["required"], json!(["prompt"]));
    assert!(tools[1].description.as_deref().is_some_and(|d| d.contains("`coder`")), "{:?}", tools[1].description);

    let params = CallToolRequestParams::new("reader")
        .with_arguments(json!({"prompt": "what is in here?"}).as_object().cloned().expect("an object"));
    let answer = client.peer().call_tool(params).await.expect("answered");
    assert_ne!(answer.is_error, Some(true), "{answer:?}");
    assert!(text_of(&answer).contains("what is in here?"), "the demo model repeats the prompt: {}", text_of(&answer));

    let missing = client.peer().call_tool(CallToolRequestParams::new("reader")).await.expect("answered");
    assert_eq!(missing.is_error, Some(true));
    assert!(text_of(&missing).contains("`prompt`"), "{}", text_of(&missing));
    let unknown = client.peer().call_tool(CallToolRequestParams::new("nobody")).await;
    let error = unknown.expect_err("no such tool").to_string();
    assert!(error.contains("the tools are reader, coder, careful_coder"), "{error}");

    client.cancel().await.expect("the client closes");
    let served = tokio::time::timeout(std::time::Duration::from_secs(5), serving).await.expect("the server ends");
    served.expect("joined").expect("a clean end");
}

#[test]
fn two_agents_of_one_tool_name_are_refused() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        let engine = Engine::builder().build();
        let a = engine.agent("a b").model("demo").build().expect("a");
        let b = engine.agent("a_b").model("demo").build().expect("b");
        let error = AgentServer::new(vec![ServedAgent::new(a, ""), ServedAgent::new(b, "")]).expect_err("clash");
        assert!(error.to_string().contains("`a_b`"), "{error}");
    });
}
