//! Anthropic's Messages API (`POST /v1/messages`), streamed.
//!
//! [`AnthropicWire`] writes a [`ModelRequest`] as a Messages body (top-level `system`,
//! `tool_use`/`tool_result` blocks, signed thinking blocks echoed back, `thinking` from
//! the request's `reasoning`, a `max_tokens` that Anthropic requires) and maps error
//! responses to typed [`Error`]s; [`AnthropicParser`] reads the SSE stream
//! (`message_start`, `content_block_*`, `message_delta`, `message_stop`, `ping`, `error`)
//! into [`StreamEvent`](troupe_core::StreamEvent)s.
//!
//! ```
//! use troupe_model::anthropic::AnthropicWire;
//! use troupe_model::{Error, RetryHint, WireFormat};
//! use troupe_core::{Message, ModelRequest};
//!
//! let wire = AnthropicWire::default();
//! let request = ModelRequest::new("claude-sonnet-4-5")
//!     .system("You are terse.")
//!     .message(Message::user("Hi"))
//!     .reasoning(2048);
//! let http = wire.build_request(&request)?;
//! assert_eq!(http.path, "/v1/messages");
//! assert_eq!(http.body["system"], "You are terse.");
//! assert_eq!(http.body["max_tokens"], 4096, "required by Anthropic, so always sent");
//! assert_eq!(http.body["thinking"]["budget_tokens"], 2048);
//! assert!(http.headers.contains(&("anthropic-version", "2023-06-01".to_owned())));
//!
//! let body = br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
//! let error = wire.map_error("anthropic", 529, RetryHint::default(), body);
//! assert!(matches!(error, Error::Overloaded { .. }));
//! # Ok::<(), Error>(())
//! ```

mod errors;
mod parser;
mod request;

pub use parser::{AnthropicParser, stop_reason};

use crate::error::{Error, Result, RetryHint};
use crate::wire::{EncodedRequest, WireFormat, WireRequest};
use troupe_core::ModelRequest;

/// The API version troupe speaks, sent as `anthropic-version`.
pub const API_VERSION: &str = "2023-06-01";

/// The Messages endpoint, after a base URL such as `https://api.anthropic.com`.
pub const MESSAGES_PATH: &str = "/v1/messages";

/// The Anthropic Messages wire format.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AnthropicWire {
    /// The `max_tokens` sent when the request sets none (Anthropic requires one). When the
    /// reasoning budget is not below it, the budget plus this is sent instead.
    pub default_max_tokens: u32,
    /// The `anthropic-version` header.
    pub api_version: String,
}

impl Default for AnthropicWire {
    fn default() -> Self {
        AnthropicWire { default_max_tokens: 4096, api_version: API_VERSION.to_owned() }
    }
}

impl WireFormat for AnthropicWire {
    type Parser = AnthropicParser;

    fn build_request(&self, request: &ModelRequest) -> Result<WireRequest> {
        let body = request::body(request, self.default_max_tokens);
        let body = serde_json::to_value(&body)
            .map_err(|e| Error::Config(format!("cannot write the Anthropic request body: {e}")))?;
        Ok(WireRequest {
            path: MESSAGES_PATH.to_owned(),
            body,
            headers: vec![("anthropic-version", self.api_version.clone())],
        })
    }

    fn encode_request(&self, request: &ModelRequest) -> Result<EncodedRequest> {
        let body = serde_json::to_vec(&request::body(request, self.default_max_tokens))
            .map_err(|e| Error::Config(format!("cannot write the Anthropic request body: {e}")))?;
        Ok(EncodedRequest {
            path: MESSAGES_PATH.to_owned(),
            body,
            headers: vec![("anthropic-version", self.api_version.clone())],
        })
    }

    fn adapt_output(
        &self,
        provider: &str,
        output: &troupe_core::OutputSchema,
    ) -> Result<Option<troupe_core::OutputSchema>> {
        crate::output_dialect::adapt(crate::output_dialect::Dialect::Anthropic, provider, output)
    }

    fn parser(&self, provider: &str) -> AnthropicParser {
        AnthropicParser::new(provider)
    }

    fn auth_headers(&self, api_key: &str) -> Vec<(&'static str, String)> {
        vec![("x-api-key", api_key.to_owned())]
    }

    fn map_error(&self, provider: &str, status: u16, hint: RetryHint, body: &[u8]) -> Error {
        errors::map_error(provider, status, hint, body)
    }
}
