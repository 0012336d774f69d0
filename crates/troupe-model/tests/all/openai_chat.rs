//! OpenAI Chat Completions: request bodies, stream parsing (OpenAI's and compatible
//! servers' deviations), error mapping, and the HTTP path end to end against the mock server.

#[path = "openai_chat/http.rs"]
mod http;
#[path = "openai_chat/parse.rs"]
mod parse;
#[path = "openai_chat/request.rs"]
mod request;

use troupe_model::openai_chat::OpenAiChatParser;
use troupe_model::{EventParser, ModelResponse, Result, StreamAccumulator, StreamEvent};

/// The events of `bytes` fed as one chunk.
fn parse(bytes: &[u8]) -> Result<Vec<StreamEvent>> {
    EventParser::new("openai", OpenAiChatParser::new("openai")).parse_all(bytes)
}

/// The events of `chunks` fed one after another.
fn parse_chunks(chunks: &[&[u8]]) -> Result<Vec<StreamEvent>> {
    EventParser::new("openai", OpenAiChatParser::new("openai")).parse_chunks(chunks)
}

/// The events parsed before the parser failed, and its error.
fn parse_until_error(bytes: &[u8]) -> (Vec<StreamEvent>, troupe_model::Error) {
    match EventParser::new("openai", OpenAiChatParser::new("openai")).parse_partial(&[bytes]) {
        (out, Ok(())) => panic!("expected an error, parsed {out:?}"),
        (out, Err(e)) => (out, e),
    }
}

fn accumulate(events: &[StreamEvent]) -> Result<ModelResponse> {
    StreamAccumulator::fold(events)
}

/// A stream of `data:` lines, one per chunk, ending with `[DONE]` when `done`.
fn stream(chunks: &[&str], done: bool) -> String {
    let mut out: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    if done {
        out.push_str("data: [DONE]\n\n");
    }
    out
}
