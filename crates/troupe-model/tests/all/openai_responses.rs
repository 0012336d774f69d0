//! The OpenAI Responses provider: recorded streams, request bodies, property tests of the
//! parser against the testkit's encoder, bad input, and end to end over loopback HTTP.

#[path = "openai_responses/http.rs"]
mod http;
#[path = "openai_responses/parse.rs"]
mod parse;
#[path = "openai_responses/props.rs"]
mod props;
#[path = "openai_responses/request.rs"]
mod request;

use futures::StreamExt;
use proptest::prelude::*;
use serde_json::json;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use troupe_core::{ContentBlock, ImageSource, Message, ModelRequest, Role, ToolChoice, ToolSpec};
use troupe_model::openai_responses::{OpenAiResponsesParser, OpenAiResponsesWire};
use troupe_model::{
    ApiKey, Error, EventParser, HttpConfig, HttpProvider, LlmProvider, ModelResponse, StopReason, StreamAccumulator,
    StreamEvent, Usage, WireFormat,
};
use troupe_testkit::encode::{OpenAiResponsesEncoder, WireEncoder};
use troupe_testkit::strategies::{TurnShape, split_at_points, split_points, turn};
use troupe_testkit::{Fault, MockLlmServer, MockTurn};

fn parser() -> EventParser<OpenAiResponsesParser> {
    EventParser::new("openai", OpenAiResponsesParser::new("openai"))
}

fn parse(bytes: &[u8]) -> troupe_model::Result<Vec<StreamEvent>> {
    parser().parse_all(bytes)
}

fn parse_chunks(chunks: &[&[u8]]) -> troupe_model::Result<Vec<StreamEvent>> {
    parser().parse_chunks(chunks)
}

fn accumulate(events: &[StreamEvent]) -> ModelResponse {
    StreamAccumulator::fold(events).expect("the events fold into a complete response")
}

/// SSE events from their data lines, each named after its `type` as OpenAI does.
fn sse(data: &[&str]) -> String {
    data.iter()
        .map(|line| {
            let value: serde_json::Value = serde_json::from_str(line).expect("test data is JSON");
            format!("event: {}\ndata: {line}\n\n", value["type"].as_str().expect("a type"))
        })
        .collect()
}

fn text(index: u32, text: &str) -> StreamEvent {
    StreamEvent::TextDelta { index, text: text.into() }
}

fn args(index: u32, json: &str) -> StreamEvent {
    StreamEvent::ToolUseInputDelta { index, partial_json: json.into() }
}

fn stop(stop_reason: StopReason) -> StreamEvent {
    StreamEvent::MessageStop { stop_reason }
}
