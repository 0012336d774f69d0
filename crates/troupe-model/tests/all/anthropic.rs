//! Anthropic Messages: request bodies, stream parsing, and the HTTP path end to end
//! against the mock server.

// The crate root of a test resolves modules beside it, so the directory is named.
#[path = "anthropic/http.rs"]
mod http;
#[path = "anthropic/parse.rs"]
mod parse;
#[path = "anthropic/request.rs"]
mod request;

use troupe_core::{ContentBlock, Message};
use troupe_model::anthropic::AnthropicParser;
use troupe_model::{EventParser, ModelResponse, Result, StreamAccumulator, StreamEvent};

/// The events of `bytes` fed as one chunk.
fn parse(bytes: &[u8]) -> Result<Vec<StreamEvent>> {
    EventParser::new("anthropic", AnthropicParser::new("anthropic")).parse_all(bytes)
}

/// The events of `chunks` fed one after another.
fn parse_chunks(chunks: &[&[u8]]) -> Result<Vec<StreamEvent>> {
    EventParser::new("anthropic", AnthropicParser::new("anthropic")).parse_chunks(chunks)
}

/// The events parsed before the parser failed, and its error.
fn parse_until_error(bytes: &[u8]) -> (Vec<StreamEvent>, troupe_model::Error) {
    match EventParser::new("anthropic", AnthropicParser::new("anthropic")).parse_partial(&[bytes]) {
        (out, Ok(())) => panic!("expected an error, parsed {out:?}"),
        (out, Err(e)) => (out, e),
    }
}

fn accumulate(events: &[StreamEvent]) -> Result<ModelResponse> {
    StreamAccumulator::fold(events)
}

/// `message` with thinking signatures removed: Anthropic signs every thinking block, while
/// a script's expected message has no signature to compare with.
fn without_signatures(mut message: Message) -> Message {
    for block in &mut message.content {
        if let ContentBlock::Thinking { signature, .. } = block {
            *signature = None;
        }
    }
    message
}

/// SSE events from `(name, data)` pairs.
fn sse(events: &[(&str, &str)]) -> String {
    events.iter().map(|(name, data)| format!("event: {name}\ndata: {data}\n\n")).collect()
}
