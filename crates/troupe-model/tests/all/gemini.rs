//! Google Gemini: stream parsing (the real transcript, properties, bad input), request
//! bodies, and the HTTP path end to end against the mock server.

// The crate root of a test resolves modules beside it, so the directory is named.
#[path = "gemini/http.rs"]
mod http;
#[path = "gemini/parse.rs"]
mod parse;
#[path = "gemini/request.rs"]
mod request;

use troupe_model::gemini::GeminiParser;
use troupe_model::{EventParser, ModelResponse, Result, StreamAccumulator, StreamEvent};

/// The events of `bytes` fed as one chunk.
fn parse(bytes: &[u8]) -> Result<Vec<StreamEvent>> {
    EventParser::new("gemini", GeminiParser::new("gemini")).parse_all(bytes)
}

/// The events of `chunks` fed one after another.
fn parse_chunks(chunks: &[&[u8]]) -> Result<Vec<StreamEvent>> {
    EventParser::new("gemini", GeminiParser::new("gemini")).parse_chunks(chunks)
}

/// The events parsed before the parser failed, and its error.
fn parse_until_error(bytes: &[u8]) -> (Vec<StreamEvent>, troupe_model::Error) {
    match EventParser::new("gemini", GeminiParser::new("gemini")).parse_partial(&[bytes]) {
        (out, Ok(())) => panic!("expected an error, parsed {out:?}"),
        (out, Err(e)) => (out, e),
    }
}

/// The response `events` fold into.
fn fold(events: &[StreamEvent]) -> Result<ModelResponse> {
    StreamAccumulator::fold(events)
}

/// `data:` events of the given JSON chunks, as Gemini frames them.
fn sse(chunks: &[serde_json::Value]) -> Vec<u8> {
    chunks.iter().map(|c| format!("data: {c}\r\n\r\n")).collect::<String>().into_bytes()
}
