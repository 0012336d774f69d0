//! Live calls to the real vendors. They run only with `TROUPE_LIVE=1` and the vendor's key
//! set; otherwise each test says why it skipped and passes. CI never sets `TROUPE_LIVE`.

use futures::StreamExt;
use tokio_util::sync::CancellationToken;
use troupe_core::{Message, ModelRequest, StreamEvent};
use troupe_model::anthropic::AnthropicWire;
use troupe_model::gemini::GeminiWire;
use troupe_model::openai_chat::OpenAiChatWire;
use troupe_model::openai_responses::OpenAiResponsesWire;
use troupe_model::{ApiKey, HttpConfig, HttpProvider, LlmProvider, WireFormat};

fn live_key(variables: &[&str]) -> Option<ApiKey> {
    if std::env::var("TROUPE_LIVE").as_deref() != Ok("1") {
        eprintln!("skipped: set TROUPE_LIVE=1 and {} to call the real API", variables.join(" or "));
        return None;
    }
    let key = ApiKey::from_env(variables);
    if key.is_none() {
        eprintln!("skipped: TROUPE_LIVE=1 but {} is not set", variables.join(" or "));
    }
    key
}

async fn say_pong<W: WireFormat>(name: &str, base_url: &str, key: ApiKey, wire: W, model: &str) {
    let provider = HttpProvider::new(HttpConfig::new(name, base_url, Some(key)), wire).expect("client builds");
    let request = ModelRequest::new(model).message(Message::user("Reply with the single word: pong")).max_tokens(64);
    let mut stream = provider.stream(&request, CancellationToken::new()).await.expect("the vendor accepts the request");
    let mut text = String::new();
    let mut stopped = false;
    while let Some(event) = stream.next().await {
        match event.expect("the stream is well formed") {
            StreamEvent::TextDelta { text: t, .. } => text.push_str(&t),
            StreamEvent::MessageStop { .. } => stopped = true,
            _ => {}
        }
    }
    assert!(stopped, "the stream ended with a stop reason");
    assert!(text.to_lowercase().contains("pong"), "{name} answered {text:?}");
}

#[tokio::test]
async fn anthropic_live() {
    if let Some(key) = live_key(&["ANTHROPIC_API_KEY"]) {
        say_pong("anthropic", "https://api.anthropic.com", key, AnthropicWire::default(), "claude-haiku-4-5").await;
    }
}

#[tokio::test]
async fn openai_chat_live() {
    if let Some(key) = live_key(&["OPENAI_API_KEY"]) {
        say_pong("openai", "https://api.openai.com/v1", key, OpenAiChatWire::default(), "gpt-4o-mini").await;
    }
}

#[tokio::test]
async fn openai_responses_live() {
    if let Some(key) = live_key(&["OPENAI_API_KEY"]) {
        say_pong("openai", "https://api.openai.com/v1", key, OpenAiResponsesWire::default(), "gpt-4o-mini").await;
    }
}

#[tokio::test]
async fn gemini_live() {
    if let Some(key) = live_key(&["GEMINI_API_KEY", "GOOGLE_API_KEY"]) {
        say_pong("gemini", "https://generativelanguage.googleapis.com", key, GeminiWire::default(), "gemini-2.5-flash")
            .await;
    }
}
