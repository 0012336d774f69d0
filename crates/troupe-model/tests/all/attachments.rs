//! Images and PDFs in a task, on each wire over loopback HTTP against the mock server: each
//! vendor's own block for each, and a PDF by URL refused, before sending, where only bytes
//! are taken.

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use troupe_core::{ContentBlock, ImageSource, Message, ModelRequest, Role};
use troupe_model::anthropic::AnthropicWire;
use troupe_model::gemini::GeminiWire;
use troupe_model::openai_chat::OpenAiChatWire;
use troupe_model::openai_responses::OpenAiResponsesWire;
use troupe_model::{ApiKey, HttpConfig, HttpProvider, LlmProvider, WireFormat};
use troupe_testkit::{MockLlmServer, MockTurn};

const PNG: &[u8] = &[0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A, 1, 2, 3];
const PDF: &[u8] = b"%PDF-1.7\n1 0 obj\n";

fn request(model: &str) -> ModelRequest {
    let image = troupe_core::attachment::from_bytes("chart.png", PNG).expect("an image");
    let pdf = troupe_core::attachment::from_bytes("spec.pdf", PDF).expect("a PDF");
    ModelRequest::new(model).message(Message::new(Role::User, vec![ContentBlock::text("Compare them."), image, pdf]))
}

async fn body<W: WireFormat>(wire: W, openai_style: bool, request: &ModelRequest) -> Value {
    let server = MockLlmServer::start().await.expect("the mock server starts");
    server.push(MockTurn::text("Seen."));
    let url = if openai_style { server.openai_url() } else { server.url() };
    let provider = HttpProvider::new(HttpConfig::new("vendor", url, Some(ApiKey::new("k"))), wire).expect("builds");
    let response = provider.complete(request, CancellationToken::new()).await.expect("the call succeeds");
    assert_eq!(response.message.text(), "Seen.");
    server.requests()[0].body.clone()
}

const PNG_B64: &str = "iVBORw0KGgoBAgM=";
const PDF_B64: &str = "JVBERi0xLjcKMSAwIG9iago=";

#[tokio::test]
async fn each_wire_sends_an_image_and_a_pdf_its_own_way() {
    let anthropic = body(AnthropicWire::default(), false, &request("claude-sonnet-4-5")).await;
    assert_eq!(
        anthropic["messages"][0]["content"],
        json!([
            {"type": "text", "text": "Compare them."},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64}},
            {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": PDF_B64}, "title": "spec.pdf"}
        ])
    );
    let chat = body(OpenAiChatWire::default(), true, &request("gpt-5")).await;
    assert_eq!(
        chat["messages"][0]["content"],
        json!([
            {"type": "text", "text": "Compare them."},
            {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{PNG_B64}")}},
            {"type": "file", "file": {"filename": "spec.pdf", "file_data": format!("data:application/pdf;base64,{PDF_B64}")}}
        ])
    );
    let responses = body(OpenAiResponsesWire::default(), true, &request("gpt-5")).await;
    assert_eq!(
        responses["input"][0]["content"],
        json!([
            {"type": "input_text", "text": "Compare them."},
            {"type": "input_image", "image_url": format!("data:image/png;base64,{PNG_B64}"), "detail": "auto"},
            {"type": "input_file", "filename": "spec.pdf", "file_data": format!("data:application/pdf;base64,{PDF_B64}")}
        ])
    );
    let gemini = body(GeminiWire::default(), false, &request("gemini-2.5-flash")).await;
    assert_eq!(
        gemini["contents"][0]["parts"],
        json!([
            {"text": "Compare them."},
            {"inlineData": {"mimeType": "image/png", "data": PNG_B64}},
            {"inlineData": {"mimeType": "application/pdf", "data": PDF_B64}}
        ])
    );
}

#[tokio::test]
async fn a_pdf_by_url_is_refused_where_only_bytes_are_taken_and_nothing_is_sent() {
    let by_url =
        ContentBlock::Document { source: ImageSource::Url { url: "https://example.com/spec.pdf".into() }, name: None };
    let request =
        ModelRequest::new("gpt-5").message(Message::new(Role::User, vec![ContentBlock::text("Read it."), by_url]));
    let server = MockLlmServer::start().await.expect("the mock server starts");
    server.push(MockTurn::text("no"));
    let provider = HttpProvider::new(
        HttpConfig::new("openai", server.openai_url(), Some(ApiKey::new("k"))),
        OpenAiChatWire::default(),
    )
    .expect("builds");
    let error = provider.complete(&request, CancellationToken::new()).await.expect_err("refused");
    assert_eq!(
        error.to_string(),
        "openai does not take a PDF by URL: Chat Completions takes a file's bytes only; attach the file itself"
    );
    assert!(!error.is_retryable());
    assert_eq!(error.code(), "unsupported_input", "a run failing on it says so: {error:?}");
    assert!(server.requests().is_empty(), "nothing was sent");
    // The Responses wire takes the URL.
    let responses = body(OpenAiResponsesWire::default(), true, &request).await;
    assert_eq!(
        responses["input"][0]["content"][1],
        json!({"type": "input_file", "file_url": "https://example.com/spec.pdf"})
    );
}
