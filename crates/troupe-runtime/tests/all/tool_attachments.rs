//! Tool results that carry an image or a PDF: `fs.read` on a PNG attaches it, and the next
//! request shows it to the model after the call's result, in each vendor's own form; a
//! recorded run keeps it, so a replay's recording gives it back.

use crate::common;

use base64::Engine as _;
use common::{Harness, Wire};
use serde_json::{Value, json};

/// A 1×1 PNG.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x48, 0x44, 0x52, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1F, 0x15, 0xC4, 0x89, 0x00, 0x00, 0x00, 0x0A, 0x49,
    0x44, 0x41, 0x54, 0x78, 0x9C, 0x63, 0x00, 0x01, 0x00, 0x00, 0x05, 0x00, 0x01, 0x0D, 0x0A, 0x2D, 0xB4, 0x00, 0x00,
    0x00, 0x00, 0x49, 0x45, 0x4E, 0x44, 0xAE, 0x42, 0x60, 0x82,
];

crate::per_wire!(an_image_a_tool_read_reaches_the_model_after_the_result);

async fn an_image_a_tool_read_reaches_the_model_after_the_result(wire: Wire) {
    let h = Harness::new(wire).await;
    std::fs::write(h.dir.path().join("chart.png"), PNG).expect("writes the image");
    h.push([h.call("c1", "fs.read", json!({"path": "chart.png"})), troupe_testkit::MockTurn::text("A dot.")]);
    let agent = h.engine().agent("viewer").workspace(h.dir.path()).readonly_tools().build().expect("builds");
    let output = agent.run("What is in chart.png?").await.expect("the run").into_result().expect("completed");
    assert_eq!(output.text, "A dot.");
    let data = base64::engine::general_purpose::STANDARD.encode(PNG);
    let bodies = h.bodies();
    assert_eq!(bodies.len(), 2, "{bodies:?}");
    let body: Value = serde_json::from_str(&bodies[1]).expect("JSON");
    let label = "The result of `fs.read` (call c1) has an attachment:";
    match wire {
        Wire::Anthropic => {
            let content = &body["messages"][2]["content"];
            assert_eq!(content[0]["type"], "tool_result", "the result comes first: {content}");
            assert_eq!(content[1], json!({"type": "text", "text": label}));
            assert_eq!(
                content[2]["source"],
                json!({"type": "base64", "media_type": "image/png", "data": data}),
                "{content}"
            );
        }
        Wire::OpenAiChat => {
            let messages = body["messages"].as_array().expect("messages");
            let tool = messages.iter().position(|m| m["role"] == "tool").expect("the tool message");
            let next = &messages[tool + 1];
            assert_eq!(next["role"], "user", "{body}");
            assert_eq!(next["content"][0], json!({"type": "text", "text": label}));
            assert_eq!(next["content"][1]["image_url"]["url"], format!("data:image/png;base64,{data}"));
        }
        Wire::OpenAiResponses => {
            let input = body["input"].as_array().expect("input");
            let output = input.iter().position(|i| i["type"] == "function_call_output").expect("the call's output");
            let text = input[output + 1].to_string();
            assert!(text.contains(label) && text.contains("input_image"), "{body}");
            assert!(text.contains(&format!("data:image/png;base64,{data}")), "{body}");
        }
        Wire::Gemini => {
            let contents = body["contents"].as_array().expect("contents");
            let parts = contents.last().expect("the last turn")["parts"].as_array().expect("parts");
            assert!(parts[0].get("functionResponse").is_some(), "{body}");
            assert_eq!(parts[1], json!({"text": label}));
            assert_eq!(parts[2]["inlineData"], json!({"mimeType": "image/png", "data": data}), "{body}");
        }
        Wire::Scripted => {
            let request: Value = body;
            let blocks = request["messages"][2]["content"].as_array().expect("blocks");
            assert!(blocks.iter().any(|b| b["type"] == "image"), "{request}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_run_keeps_the_attachment_for_its_replay() {
    let h = Harness::new(Wire::Anthropic).await;
    std::fs::write(h.dir.path().join("chart.png"), PNG).expect("writes the image");
    h.push([h.call("c1", "fs.read", json!({"path": "chart.png"})), troupe_testkit::MockTurn::text("A dot.")]);
    let (engine, store, _dir) = h.recorded_engine().await;
    let agent = engine.agent("viewer").workspace(h.dir.path()).readonly_tools().build().expect("builds");
    let output = agent.run("What is in chart.png?").await.expect("the run").into_result().expect("completed");
    let record = store.load_run(output.run_id.as_str()).await.expect("loads").expect("recorded");
    let state = troupe_runtime::durable::state_from_value(output.run_id.as_str(), record.state).expect("a state");
    let attached: Vec<_> = state.messages().iter().flat_map(troupe_run::tool_result_attachments).collect();
    assert_eq!(attached.len(), 1, "{:?}", state.messages());
    assert_eq!(attached[0].0.as_str(), "c1");
    assert!(matches!(&attached[0].1[..], [troupe_core::ContentBlock::Image { .. }]), "{attached:?}");
}
