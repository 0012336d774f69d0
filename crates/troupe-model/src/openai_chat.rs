//! OpenAI Chat Completions: `POST {base}/chat/completions`, the wire of OpenAI and of every
//! OpenAI-compatible server (vLLM, llama.cpp, Ollama's `/v1`, DeepSeek, Groq, OpenRouter,
//! Together, Mistral, ...).
//!
//! The base URL includes the version (`https://api.openai.com/v1`,
//! `http://localhost:11434/v1`); the key travels as `Authorization: Bearer`. The request is
//! written by [`OpenAiChatWire`] and the stream read by [`OpenAiChatParser`], which also
//! understands the `reasoning_content` / `reasoning` deltas of DeepSeek, vLLM and OpenRouter.
//!
//! ```
//! use troupe_core::{Message, ModelRequest, StopReason, StreamEvent};
//! use troupe_model::openai_chat::{OpenAiChatParser, OpenAiChatWire};
//! use troupe_model::{EventParser, StreamAccumulator, WireFormat};
//!
//! let wire = OpenAiChatWire::default();
//! let request = wire.build_request(&ModelRequest::new("gpt-4o").message(Message::user("Hi")).max_tokens(64))?;
//! assert_eq!(request.path, "/chat/completions");
//! assert_eq!(request.body["max_completion_tokens"], 64);
//! assert_eq!(request.body["messages"][0]["content"], "Hi");
//!
//! let bytes = concat!(
//!     "data: {\"id\":\"chatcmpl-1\",\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hel\"},\"finish_reason\":null}]}\n\n",
//!     "data: {\"id\":\"chatcmpl-1\",\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"},\"finish_reason\":\"stop\"}]}\n\n",
//!     "data: {\"id\":\"chatcmpl-1\",\"model\":\"gpt-4o\",\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":2,",
//!     "\"prompt_tokens_details\":{\"cached_tokens\":4}}}\n\n",
//!     "data: [DONE]\n\n",
//! );
//! let events = EventParser::new("openai", OpenAiChatParser::new("openai")).parse_all(bytes.as_bytes())?;
//! assert_eq!(events.last(), Some(&StreamEvent::MessageStop { stop_reason: StopReason::EndTurn }));
//! let mut accumulator = StreamAccumulator::new();
//! for event in &events {
//!     accumulator.push(event)?;
//! }
//! let response = accumulator.finish()?;
//! assert_eq!(response.message.text(), "Hello");
//! // `prompt_tokens` includes the cached tokens; troupe counts them apart.
//! assert_eq!((response.usage.input_tokens, response.usage.cache_read_tokens), (5, 4));
//! # Ok::<(), troupe_model::Error>(())
//! ```

mod errors;
mod parser;
mod request;

pub use parser::OpenAiChatParser;

use crate::error::{Error, Result, RetryHint};
use crate::wire::{EncodedRequest, WireFormat, WireRequest};
use troupe_core::ModelRequest;

/// Where a Chat Completions request goes, under the base URL.
const PATH: &str = "/chat/completions";

fn unwritable(e: serde_json::Error) -> Error {
    Error::Config(format!("cannot write the request body: {e}"))
}

/// The Chat Completions wire format, with the switches compatible servers need.
///
/// Every [`ModelRequest`] field is written: `system` as the first message, tool results as
/// `role: tool` messages (one per result, in order; a failed result says `Error:` in its
/// content since the wire has no flag), images as `image_url` parts (base64 as `data:`
/// URLs), tools, `tool_choice`, `parallel_tool_calls`, `max_completion_tokens`,
/// `temperature`, `stop`, and the reasoning budget as `reasoning_effort`. Reasoning blocks
/// of earlier turns are dropped: Chat Completions accepts none back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenAiChatWire {
    /// Write the token limit as `max_tokens` (deprecated by OpenAI) instead of
    /// `max_completion_tokens`, for servers that only know the old name.
    pub legacy_max_tokens: bool,
    /// Ask for a final usage chunk (`stream_options: {include_usage: true}`); turn off for
    /// servers that reject `stream_options`.
    pub stream_usage: bool,
    /// Send `store: true`, letting OpenAI keep the completion, and with it the request's
    /// `metadata` (OpenAI refuses metadata without `store`). Off by default.
    pub store: bool,
    /// Ask for a typed answer ([`ModelRequest::output`]) with a forced `final_answer` tool
    /// rather than a `json_schema` response format, for OpenAI-compatible servers that do
    /// not support response formats. Off by default.
    pub answer_tool: bool,
}

impl Default for OpenAiChatWire {
    fn default() -> Self {
        OpenAiChatWire { legacy_max_tokens: false, stream_usage: true, store: false, answer_tool: false }
    }
}

impl WireFormat for OpenAiChatWire {
    type Parser = OpenAiChatParser;

    fn build_request(&self, request: &ModelRequest) -> Result<WireRequest> {
        let body = serde_json::to_value(request::body(self, request)).map_err(unwritable)?;
        Ok(WireRequest { path: PATH.to_owned(), body, headers: Vec::new() })
    }

    fn encode_request(&self, request: &ModelRequest) -> Result<EncodedRequest> {
        let body = serde_json::to_vec(&request::body(self, request)).map_err(unwritable)?;
        Ok(EncodedRequest { path: PATH.to_owned(), body, headers: Vec::new() })
    }

    fn native_output(&self) -> bool {
        !self.answer_tool
    }

    fn adapt_output(
        &self,
        provider: &str,
        output: &troupe_core::OutputSchema,
    ) -> Result<Option<troupe_core::OutputSchema>> {
        crate::output_dialect::adapt(crate::output_dialect::Dialect::OpenAi, provider, output)
    }

    fn check_input(&self, provider: &str, request: &troupe_core::ModelRequest) -> Result<()> {
        let by_url = request.messages.iter().flat_map(|m| &m.content).any(|block| {
            matches!(block, troupe_core::ContentBlock::Document { source: troupe_core::ImageSource::Url { .. }, .. })
        });
        if by_url {
            return Err(crate::Error::UnsupportedInput {
                provider: provider.to_owned(),
                what: "a PDF by URL".to_owned(),
                reason: "Chat Completions takes a file's bytes only; attach the file itself".to_owned(),
            });
        }
        Ok(())
    }

    fn parser(&self, provider: &str) -> Self::Parser {
        OpenAiChatParser::new(provider)
    }

    fn auth_headers(&self, api_key: &str) -> Vec<(&'static str, String)> {
        vec![("authorization", format!("Bearer {api_key}"))]
    }

    /// `code: "context_length_exceeded"` (or a compatible server's context-length wording)
    /// is [`Error::ContextWindowExceeded`]; a 429 for an exhausted quota
    /// (`insufficient_quota`) is [`Error::RateLimited`] that must not be retried.
    fn map_error(&self, provider: &str, status: u16, hint: RetryHint, body: &[u8]) -> Error {
        errors::from_status(provider, status, hint, &errors::ErrorInfo::from_body(body))
    }
}
