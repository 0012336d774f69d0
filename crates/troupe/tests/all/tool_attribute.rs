//! `#[tool]`: a function with doc comments, given to an agent, called by a model over the
//! OpenAI Chat wire.

use super::engine;
use serde_json::json;
use std::sync::Arc;
use troupe::prelude::*;
use troupe::tools::Workspace;
use troupe_testkit::{MockLlmServer, MockTurn};

/// Tells the capital of a country.
#[tool(read_only)]
async fn capital(
    /// The country's English name.
    country: String,
) -> Result<String, String> {
    match country.as_str() {
        "France" => Ok("Paris".into()),
        other => Err(format!("I do not know the capital of {other}")),
    }
}

/// Writes a note into the workspace.
///
/// The note replaces any earlier one.
#[tool(write_state, name = "notes.write")]
fn write_note(
    ctx: ToolContext,
    /// What to write.
    text: String,
) -> Result<ToolOutput, ToolError> {
    let path = ctx.workspace.root().join("note.txt");
    std::fs::write(&path, &text).map_err(|e| ToolError::from(e.to_string()))?;
    Ok(ToolOutput::text(format!("wrote {} bytes", text.len())))
}

/// The tool results the model was sent in the request at `index`.
fn tool_results(server: &MockLlmServer, index: usize) -> Vec<String> {
    let requests = server.requests();
    let messages = requests[index].body["messages"].as_array().cloned().unwrap_or_default();
    messages
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().map(str::to_owned).unwrap_or_else(|| m["content"].to_string()))
        .collect()
}

#[tokio::test]
async fn a_tool_function_is_declared_from_its_doc_comments_and_called_by_the_model() {
    let server = MockLlmServer::start().await.expect("the mock server starts");
    server.push_all([
        MockTurn::tool_call("c1", "capital", json!({"country": "France"})),
        MockTurn::tool_call("c2", "capital", json!({"country": "Atlantis"})),
        MockTurn::text("Paris; Atlantis is unknown."),
    ]);
    let agent = engine(&server).agent("geographer").model("openai/gpt-4o").tool(Capital).build().expect("builds");
    let output = agent.run("Capitals of France and Atlantis?").await.expect("runs").into_result().expect("completes");
    assert_eq!(output.text, "Paris; Atlantis is unknown.");
    assert_eq!(output.tool_calls, 2);

    // What the model was told the tool is.
    let first = &server.requests()[0].body;
    let declared = &first["tools"][0]["function"];
    assert_eq!(declared["name"], "capital");
    assert_eq!(declared["description"], "Tells the capital of a country.");
    assert_eq!(declared["parameters"]["properties"]["country"]["description"], "The country's English name.");
    // The function's own answer, and its `Err` as the call's failure.
    assert_eq!(tool_results(&server, 1), ["Paris"]);
    let results = tool_results(&server, 2);
    assert!(results[1].contains("I do not know the capital of Atlantis"), "{results:?}");
}

#[tokio::test]
async fn a_tool_takes_its_context_its_name_and_its_effect_from_the_attribute() {
    let declaration = WriteNote.declaration();
    assert_eq!(declaration.name, "notes.write");
    assert_eq!(declaration.effect, Effect::WriteState);
    assert_eq!(declaration.description, "Writes a note into the workspace.\n\nThe note replaces any earlier one.");
    let schema = &declaration.input_schema;
    assert_eq!(schema["required"], json!(["text"]), "the context is not an argument: {schema}");
    assert!(schema["properties"].get("ctx").is_none(), "{schema}");

    let dir = tempfile::tempdir().expect("a temporary directory");
    let ctx = ToolContext::new(Arc::new(Workspace::new(dir.path()).expect("a workspace")));
    let out = WriteNote.call(&ctx, json!({"text": "hello"})).await.expect("the call runs");
    assert_eq!(out.content, "wrote 5 bytes");
    assert_eq!(std::fs::read_to_string(dir.path().join("note.txt")).expect("the note"), "hello");
    // Arguments the schema does not take never reach the function.
    let refused = WriteNote.call(&ctx, json!({"text": "x", "path": "/etc/passwd"})).await;
    assert!(matches!(refused, Err(ToolError::InvalidArguments { .. })), "{refused:?}");
    assert_eq!(std::fs::read_to_string(dir.path().join("note.txt")).expect("the note"), "hello");
}
