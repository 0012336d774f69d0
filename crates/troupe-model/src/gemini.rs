//! Google Gemini (Generative Language API):
//! `POST /v1beta/models/{model}:streamGenerateContent?alt=sse`, key in `x-goog-api-key`.
//!
//! [`GeminiWire`] writes the request (camelCase `contents`, `systemInstruction`, `tools`,
//! `toolConfig`, `generationConfig`), rewriting tool schemas into Gemini's schema dialect
//! (see `schema.rs` for what is kept, rewritten and dropped), and maps error bodies to
//! typed errors. [`GeminiParser`] reads the stream: each `data:` line is a whole
//! `GenerateContentResponse`, there is no `[DONE]`, and a stream that ends before a
//! `finishReason` is truncated.
//!
//! Gemini's `thoughtSignature`s (opaque reasoning state it requires back, above all on
//! function calls) are kept on the blocks they came with, [`ContentBlock::ToolUse`]'s
//! `signature` and [`ContentBlock::Thinking`]'s, and sent back in the next request.
//!
//! [`ContentBlock::ToolUse`]: troupe_core::ContentBlock::ToolUse
//! [`ContentBlock::Thinking`]: troupe_core::ContentBlock::Thinking
//!
//! ```
//! use troupe_model::gemini::GeminiParser;
//! use troupe_model::{EventParser, StopReason, StreamAccumulator};
//!
//! let bytes = concat!(
//!     r#"data: {"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"weather","#,
//!     r#""args":{"location":"Florence,Italy"}},"thoughtSignature":"CiQB"}]},"finishReason":"STOP","index":0}],"#,
//!     r#""usageMetadata":{"promptTokenCount":54,"candidatesTokenCount":15,"totalTokenCount":123,"#,
//!     r#""thoughtsTokenCount":54},"modelVersion":"gemini-2.5-flash"}"#,
//!     "\n\n",
//! );
//! let events = EventParser::new("gemini", GeminiParser::new("gemini")).parse_all(bytes.as_bytes())?;
//! let mut accumulator = StreamAccumulator::new();
//! for event in &events {
//!     accumulator.push(event)?;
//! }
//! let response = accumulator.finish()?;
//! // Gemini says STOP for function calls; troupe says what it means.
//! assert_eq!(response.stop_reason, StopReason::ToolUse);
//! let (id, name, input) = response.message.tool_uses().next().expect("one call");
//! assert_eq!((id.as_str(), name), ("call_0", "weather"));
//! assert_eq!(input["location"], "Florence,Italy");
//! assert_eq!(response.usage.output_tokens, 15 + 54, "thoughts are output");
//! # Ok::<(), troupe_model::Error>(())
//! ```

mod errors;
mod parser;
mod request;
mod schema;

pub use parser::GeminiParser;

use crate::error::{Error, Result, RetryHint};
use crate::wire::{WireFormat, WireRequest};
use troupe_core::ModelRequest;

/// The default base URL of the Generative Language API.
pub const BASE_URL: &str = "https://generativelanguage.googleapis.com";

/// The Gemini wire format.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeminiWire {
    /// The API version in the path (`v1beta`, which has every feature used here).
    pub api_version: String,
    /// `maxOutputTokens` when the request sets no `max_tokens` (`None`: the model's own
    /// limit; Gemini does not require one).
    pub max_output_tokens: Option<u32>,
    /// Whether to send call ids (`functionCall.id`, `functionResponse.id`) back. Off by
    /// default: several Gemini endpoints refuse the field in requests ("Unknown name
    /// \"id\""), and Gemini pairs results with calls by name and order anyway.
    pub send_call_ids: bool,
}

impl Default for GeminiWire {
    fn default() -> Self {
        GeminiWire { api_version: "v1beta".to_owned(), max_output_tokens: None, send_call_ids: false }
    }
}

impl WireFormat for GeminiWire {
    type Parser = GeminiParser;

    fn build_request(&self, request: &ModelRequest) -> Result<WireRequest> {
        request::build(self, request)
    }

    fn adapt_output(
        &self,
        provider: &str,
        output: &troupe_core::OutputSchema,
    ) -> Result<Option<troupe_core::OutputSchema>> {
        let adapted = crate::output_dialect::adapt(crate::output_dialect::Dialect::Gemini, provider, output)?;
        // Converted once here too, so that a schema too large to inline is refused under the
        // provider's name before anything is sent (the work is bounded by the budget).
        let schema = adapted.as_ref().map_or(&output.schema, |adapted| &adapted.schema);
        schema::response_schema(schema, &mut schema::Budget::default()).map_err(|too_large| {
            Error::UnsupportedOutputSchema {
                provider: provider.to_owned(),
                name: output.name.clone(),
                reason: too_large.to_string(),
            }
        })?;
        Ok(adapted)
    }

    fn parser(&self, provider: &str) -> GeminiParser {
        GeminiParser::new(provider)
    }

    fn auth_headers(&self, api_key: &str) -> Vec<(&'static str, String)> {
        vec![("x-goog-api-key", api_key.to_owned())]
    }

    fn map_error(&self, provider: &str, status: u16, hint: RetryHint, body: &[u8]) -> Error {
        errors::map_error(provider, status, hint, body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use troupe_core::OutputSchema;

    #[test]
    fn an_output_schema_too_large_to_inline_is_refused_under_the_providers_name() {
        let ladder = schema::ladder(8, 16, serde_json::json!({"type": "string"}));
        let error = GeminiWire::default()
            .adapt_output("my-gemini", &OutputSchema::new("Deep", ladder))
            .expect_err("refused before anything is sent");
        assert!(
            matches!(&error, Error::UnsupportedOutputSchema { provider, name, .. } if provider == "my-gemini" && name == "Deep"),
            "{error}"
        );
    }
}
