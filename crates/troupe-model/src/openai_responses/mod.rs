//! OpenAI Responses API (`POST /v1/responses`), streamed.
//!
//! [`OpenAiResponsesWire`] writes a [`ModelRequest`] as a Responses body and
//! [`OpenAiResponsesParser`] reads the typed event stream back. The base URL includes
//! `/v1` (`https://api.openai.com/v1`); the key travels as `Authorization: Bearer`.
//!
//! How troupe's request maps onto the wire, and what cannot:
//!
//! - `system` becomes `instructions`; messages become `input` items: text and images as
//!   `message` items (`input_text`/`input_image` for the user, `output_text` for the
//!   assistant), tool calls as `function_call` and results as `function_call_output`.
//!   The wire has no error flag on results, so a failed one is sent as `Error: <text>`.
//! - Earlier reasoning is not sent back: echoing it would need the server's encrypted
//!   reasoning items, which troupe does not keep, and with `store: false` the server
//!   keeps nothing either. The model reasons afresh on each turn.
//! - `reasoning` becomes `reasoning: {effort, summary}`; the budget maps to an effort level:
//!   under 4096 tokens `low`, under 16384 `medium`, else `high`. Summaries (`auto` by
//!   default, see [`OpenAiResponsesWire::reasoning_summary`]) stream back as reasoning.
//! - Stop sequences do not exist in the Responses API and are dropped.
//! - `temperature`, `metadata` and `parallel_tool_calls` are forwarded as given (OpenAI's
//!   reasoning models reject `temperature`; that is the model's rule, not the wire's).
//! - Tools are sent with `strict: false`, since catalog schemas rarely meet strict mode's rules.
//!
//! Parsing needs no network:
//!
//! ```
//! use troupe_model::{EventParser, StreamAccumulator, StopReason};
//! use troupe_model::openai_responses::OpenAiResponsesParser;
//!
//! let bytes = concat!(
//!     "event: response.created\n",
//!     "data: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"model\":\"gpt-4.1\",\"status\":\"in_progress\",\"output\":[]}}\n\n",
//!     "event: response.output_text.delta\n",
//!     "data: {\"type\":\"response.output_text.delta\",\"sequence_number\":1,\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"Hello\"}\n\n",
//!     "event: response.completed\n",
//!     "data: {\"type\":\"response.completed\",\"sequence_number\":2,\"response\":{\"id\":\"resp_1\",\"status\":\"completed\",",
//!     "\"usage\":{\"input_tokens\":12,\"input_tokens_details\":{\"cached_tokens\":2},\"output_tokens\":3,\"output_tokens_details\":{\"reasoning_tokens\":0}}}}\n\n",
//! );
//! let events = EventParser::new("openai", OpenAiResponsesParser::new("openai")).parse_all(bytes.as_bytes())?;
//! let mut accumulator = StreamAccumulator::new();
//! for event in &events {
//!     accumulator.push(event)?;
//! }
//! let response = accumulator.finish()?;
//! assert_eq!(response.message.text(), "Hello");
//! assert_eq!(response.stop_reason, StopReason::EndTurn);
//! assert_eq!((response.usage.input_tokens, response.usage.cache_read_tokens), (10, 2));
//! # Ok::<(), troupe_model::Error>(())
//! ```

mod errors;
mod parser;
mod request;

pub use parser::OpenAiResponsesParser;

use crate::error::{Error, Result, RetryHint};
use crate::wire::{EncodedRequest, WireFormat, WireRequest};
use troupe_core::ModelRequest;

/// The OpenAI Responses wire format.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenAiResponsesWire {
    /// The `reasoning.summary` requested when a request enables reasoning (`auto`,
    /// `concise`, `detailed`); `None` asks for no summary, for organisations the API
    /// does not allow summaries.
    pub reasoning_summary: Option<String>,
    /// Whether the server may store the response. `false` by default: troupe sends the
    /// whole conversation with every request and never refers to stored responses.
    pub store: bool,
}

impl Default for OpenAiResponsesWire {
    fn default() -> Self {
        OpenAiResponsesWire { reasoning_summary: Some("auto".to_owned()), store: false }
    }
}

/// Where a Responses request goes, under the base URL.
const PATH: &str = "/responses";

fn unwritable(e: serde_json::Error) -> Error {
    Error::Config(format!("cannot write the Responses request body: {e}"))
}

impl OpenAiResponsesWire {
    /// The switches the request body reads.
    fn options(&self) -> request::Options<'_> {
        request::Options { reasoning_summary: self.reasoning_summary.as_deref(), store: self.store }
    }
}

impl WireFormat for OpenAiResponsesWire {
    type Parser = OpenAiResponsesParser;

    fn build_request(&self, request: &ModelRequest) -> Result<WireRequest> {
        let body = serde_json::to_value(request::body(request, self.options())).map_err(unwritable)?;
        Ok(WireRequest { path: PATH.to_owned(), body, headers: Vec::new() })
    }

    fn encode_request(&self, request: &ModelRequest) -> Result<EncodedRequest> {
        let body = serde_json::to_vec(&request::body(request, self.options())).map_err(unwritable)?;
        Ok(EncodedRequest { path: PATH.to_owned(), body, headers: Vec::new() })
    }

    fn adapt_output(
        &self,
        provider: &str,
        output: &troupe_core::OutputSchema,
    ) -> Result<Option<troupe_core::OutputSchema>> {
        crate::output_dialect::adapt(crate::output_dialect::Dialect::OpenAi, provider, output)
    }

    fn parser(&self, provider: &str) -> Self::Parser {
        OpenAiResponsesParser::new(provider)
    }

    fn auth_headers(&self, api_key: &str) -> Vec<(&'static str, String)> {
        vec![("authorization", format!("Bearer {api_key}"))]
    }

    fn map_error(&self, provider: &str, status: u16, hint: RetryHint, body: &[u8]) -> Error {
        errors::http_error(provider, status, hint, body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use troupe_core::{ContentBlock, Message, ReasoningConfig, Role};

    #[test]
    fn budgets_map_to_effort_levels() {
        let effort = |budget_tokens| request::effort(ReasoningConfig { budget_tokens });
        assert_eq!(
            [effort(0), effort(4_095), effort(4_096), effort(16_383), effort(16_384)],
            ["low", "low", "medium", "medium", "high"]
        );
    }

    #[test]
    fn blocks_keep_their_order_across_items() {
        let request = ModelRequest::new("gpt-4.1").message(Message::new(
            Role::User,
            vec![
                ContentBlock::tool_result("call_1", "ok"),
                ContentBlock::text("and then"),
                ContentBlock::tool_error("call_2", "boom"),
            ],
        ));
        let body = OpenAiResponsesWire::default().build_request(&request).expect("builds").body;
        let kinds: Vec<_> = body["input"].as_array().expect("a list").iter().map(|i| i["type"].clone()).collect();
        assert_eq!(kinds, ["function_call_output", "message", "function_call_output"]);
        assert_eq!(body["input"][2]["output"], "Error: boom");
    }

    #[test]
    fn temperature_keeps_its_decimal_form_and_options_apply() {
        let request = ModelRequest::new("o4-mini").temperature(0.7).reasoning(2_000);
        let wire = OpenAiResponsesWire { reasoning_summary: None, store: true };
        let body = wire.build_request(&request).expect("builds").body;
        assert_eq!(body["temperature"].as_f64(), Some(0.7));
        assert_eq!(body["reasoning"], serde_json::json!({"effort": "low"}));
        assert_eq!(body["store"], true);
    }
}
