//! Writing scripted turns in each vendor's real wire format.

use crate::script::MockTurn;

mod anthropic;
mod gemini;
mod openai_chat;
mod openai_responses;

pub use anthropic::AnthropicEncoder;
pub use gemini::GeminiEncoder;
pub use openai_chat::OpenAiChatEncoder;
pub use openai_responses::OpenAiResponsesEncoder;

/// The wire formats the mock server speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Vendor {
    /// Anthropic Messages (`POST /v1/messages`).
    Anthropic,
    /// OpenAI Chat Completions (`POST /v1/chat/completions`).
    OpenAiChat,
    /// OpenAI Responses (`POST /v1/responses`).
    OpenAiResponses,
    /// Google Gemini (`POST /v1beta/models/{model}:streamGenerateContent?alt=sse`).
    Gemini,
}

impl Vendor {
    /// Every vendor.
    pub const ALL: [Vendor; 4] = [Vendor::Anthropic, Vendor::OpenAiChat, Vendor::OpenAiResponses, Vendor::Gemini];

    /// The encoder of this vendor's format.
    pub fn encoder(self) -> &'static dyn WireEncoder {
        match self {
            Vendor::Anthropic => &AnthropicEncoder,
            Vendor::OpenAiChat => &OpenAiChatEncoder,
            Vendor::OpenAiResponses => &OpenAiResponsesEncoder,
            Vendor::Gemini => &GeminiEncoder,
        }
    }
}

/// Writes [`MockTurn`]s as one vendor's server would.
pub trait WireEncoder: Send + Sync {
    /// The turn as complete SSE events, each ending in a blank line, in order. Faults are
    /// not applied here: the server cuts and splices this list.
    fn encode(&self, turn: &MockTurn) -> Vec<String>;

    /// The JSON body of an HTTP error response with `status`.
    fn error_body(&self, status: u16, message: &str) -> String;

    /// An SSE event reporting overload mid-stream, as the vendor sends it (for vendors
    /// without such an event, the closest thing they send).
    fn overloaded_event(&self, message: &str) -> String;
}

/// The turn's events as one byte string.
pub fn encode_bytes(vendor: Vendor, turn: &MockTurn) -> Vec<u8> {
    vendor.encoder().encode(turn).concat().into_bytes()
}

/// One SSE event with an `event:` name.
pub fn named_event(name: &str, data: &serde_json::Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// One SSE event of only a `data:` line.
pub fn data_event(data: &serde_json::Value) -> String {
    format!("data: {data}\n\n")
}
