//! The stream parser on real transcripts, scripted turns, and bad input.

use super::{accumulate, parse, parse_chunks, parse_until_error, sse, without_signatures};
use proptest::prelude::*;
use serde_json::json;
use troupe_core::{ContentBlock, Message, Role, StopReason, StreamEvent, Usage};
use troupe_model::Error;
use troupe_testkit::encode::{AnthropicEncoder, WireEncoder};
use troupe_testkit::strategies::{TurnShape, split_at_points, split_points, turn};

/// The abbreviated real stream of `/work/shared/PROTOCOLS.md`, byte for byte.
const TRANSCRIPT: &str = r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_019Q","type":"message","role":"assistant","model":"claude-sonnet-4-20250514","content":[],"stop_reason":null,"usage":{"input_tokens":377,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: ping
data: {"type": "ping"}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"I'll check the weather."}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01NR","name":"get_weather","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"locati"}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"on\": \"Paris\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":65}}

event: message_stop
data: {"type":"message_stop"}

"#;

fn usage(input: u64, output: u64, cache_read: u64, cache_write: u64) -> Usage {
    Usage {
        input_tokens: input,
        output_tokens: output,
        cache_read_tokens: cache_read,
        cache_write_tokens: cache_write,
        cache_write_long_tokens: 0,
        reasoning_tokens: 0,
    }
}

#[test]
fn the_protocols_transcript_parses_to_the_exact_events() {
    let events = parse(TRANSCRIPT.as_bytes()).expect("parses");
    assert_eq!(
        events,
        vec![
            StreamEvent::MessageStart { id: Some("msg_019Q".into()), model: Some("claude-sonnet-4-20250514".into()) },
            StreamEvent::Usage { usage: usage(377, 1, 0, 0) },
            StreamEvent::TextDelta { index: 0, text: "I'll check the weather.".into() },
            StreamEvent::ToolUseStart { index: 1, id: "toolu_01NR".into(), name: "get_weather".into() },
            StreamEvent::ToolUseInputDelta { index: 1, partial_json: "{\"locati".into() },
            StreamEvent::ToolUseInputDelta { index: 1, partial_json: "on\": \"Paris\"}".into() },
            StreamEvent::ToolUseEnd { index: 1 },
            // `message_delta` reports only the output count: the input count is kept.
            StreamEvent::Usage { usage: usage(377, 65, 0, 0) },
            StreamEvent::MessageStop { stop_reason: StopReason::ToolUse },
        ]
    );
    let response = accumulate(&events).expect("complete");
    assert_eq!(
        response.message,
        Message::new(
            Role::Assistant,
            vec![
                ContentBlock::text("I'll check the weather."),
                ContentBlock::tool_use("toolu_01NR", "get_weather", json!({"location": "Paris"})),
            ]
        )
    );
    assert_eq!(response.id.as_deref(), Some("msg_019Q"));
}

#[test]
fn thinking_signatures_redacted_thinking_and_cumulative_cache_usage() {
    let stream = sse(&[
        (
            "message_start",
            r#"{"type":"message_start","message":{"id":"msg_01T","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"cache_creation_input_tokens":2048,"cache_read_input_tokens":0,"output_tokens":3}}}"#,
        ),
        (
            "content_block_start",
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}"#,
        ),
        ("ping", r#"{"type": "ping"}"#),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Paris is in \"France\"."}}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCkgIBhAB"}}"#,
        ),
        ("content_block_stop", r#"{"type":"content_block_stop","index":0}"#),
        (
            "content_block_start",
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"redacted_thinking","data":"EmwKAhgBEgy3"}}"#,
        ),
        ("content_block_stop", r#"{"type":"content_block_stop","index":1}"#),
        (
            "content_block_start",
            r#"{"type":"content_block_start","index":2,"content_block":{"type":"text","text":""}}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":2,"delta":{"type":"text_delta","text":"It is sunny \u00e9t\u00e9."}}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":2,"delta":{"type":"citations_delta","citation":{"type":"char_location","cited_text":"x"}}}"#,
        ),
        ("content_block_stop", r#"{"type":"content_block_stop","index":2}"#),
        (
            "message_delta",
            r#"{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":12,"cache_creation_input_tokens":2048,"cache_read_input_tokens":null,"output_tokens":91}}"#,
        ),
        ("message_stop", r#"{"type":"message_stop"}"#),
    ]);
    let events = parse(stream.as_bytes()).expect("parses");
    assert_eq!(
        events,
        vec![
            StreamEvent::MessageStart { id: Some("msg_01T".into()), model: Some("claude-sonnet-4-5".into()) },
            StreamEvent::Usage { usage: usage(12, 3, 0, 2048) },
            StreamEvent::ReasoningDelta { index: 0, text: "Paris is in \"France\".".into() },
            StreamEvent::Signature { index: 0, signature: "EqQBCkgIBhAB".into() },
            StreamEvent::RedactedReasoning { index: 1, data: "EmwKAhgBEgy3".into() },
            StreamEvent::TextDelta { index: 2, text: "It is sunny été.".into() },
            StreamEvent::Usage { usage: usage(12, 91, 0, 2048) },
            StreamEvent::MessageStop { stop_reason: StopReason::EndTurn },
        ]
    );
    let response = accumulate(&events).expect("complete");
    assert_eq!(
        response.message.content,
        vec![
            ContentBlock::Thinking { text: "Paris is in \"France\".".into(), signature: Some("EqQBCkgIBhAB".into()) },
            ContentBlock::RedactedThinking { data: "EmwKAhgBEgy3".into() },
            ContentBlock::text("It is sunny été."),
        ]
    );
}

/// A minimal complete stream whose `message_delta` says `reason`.
fn stream_stopping_with(reason: &str) -> String {
    sse(&[
        ("message_start", r#"{"type":"message_start","message":{"id":"m","usage":{"input_tokens":1}}}"#),
        ("message_delta", &format!(r#"{{"type":"message_delta","delta":{{"stop_reason":"{reason}"}}}}"#)),
        ("message_stop", r#"{"type":"message_stop"}"#),
    ])
}

#[test]
fn every_stop_reason_maps_and_unknown_ones_are_kept() {
    for (wire, expected) in [
        ("end_turn", StopReason::EndTurn),
        ("tool_use", StopReason::ToolUse),
        ("max_tokens", StopReason::MaxTokens),
        ("stop_sequence", StopReason::StopSequence),
        ("refusal", StopReason::Refusal),
        ("pause_turn", StopReason::PauseTurn),
        ("model_context_window_exceeded", StopReason::ContextWindowExceeded),
        ("some_future_reason", StopReason::Other("some_future_reason".into())),
    ] {
        let events = parse(stream_stopping_with(wire).as_bytes()).expect("parses");
        assert_eq!(events.last(), Some(&StreamEvent::MessageStop { stop_reason: expected }), "{wire}");
    }
}

#[test]
fn unknown_events_blocks_and_deltas_are_skipped() {
    let stream = sse(&[
        ("message_start", r#"{"type":"message_start","message":{"id":"m","model":"c"}}"#),
        ("future_event", r#"{"type":"future_event","stuff":[1,2,3]}"#),
        (
            "content_block_start",
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}}}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"query\":\"x\"}"}}"#,
        ),
        ("content_block_stop", r#"{"type":"content_block_stop","index":0}"#),
        (
            "content_block_start",
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"text","text":"Hi"}}"#,
        ),
        ("content_block_delta", r#"{"type":"content_block_delta","index":1,"delta":{"type":"future_delta","x":1}}"#),
        ("content_block_stop", r#"{"type":"content_block_stop","index":1}"#),
        ("message_delta", r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":4}}"#),
        ("message_stop", r#"{"type":"message_stop"}"#),
        // Nothing after the end marker belongs to the message.
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"late"}}"#,
        ),
    ]);
    let events = parse(stream.as_bytes()).expect("parses");
    assert_eq!(
        events,
        vec![
            StreamEvent::MessageStart { id: Some("m".into()), model: Some("c".into()) },
            StreamEvent::TextDelta { index: 1, text: "Hi".into() },
            StreamEvent::Usage { usage: usage(0, 4, 0, 0) },
            StreamEvent::MessageStop { stop_reason: StopReason::EndTurn },
        ]
    );
}

#[test]
fn arguments_given_at_block_start_are_kept_unless_streamed() {
    let stream = sse(&[
        ("message_start", r#"{"type":"message_start","message":{"id":"m"}}"#),
        (
            "content_block_start",
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t0","name":"a","input":{"x":1}}}"#,
        ),
        ("content_block_stop", r#"{"type":"content_block_stop","index":0}"#),
        (
            "content_block_start",
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t1","name":"b","input":{"stale":true}}}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"y\":2}"}}"#,
        ),
        ("content_block_stop", r#"{"type":"content_block_stop","index":1}"#),
        // No stop reason at all: the calls make it a tool-use stop.
        ("message_stop", r#"{"type":"message_stop"}"#),
    ]);
    let response = accumulate(&parse(stream.as_bytes()).expect("parses")).expect("complete");
    let inputs: Vec<_> = response.message.tool_uses().map(|(_, _, input)| input.clone()).collect();
    assert_eq!(inputs, vec![json!({"x": 1}), json!({"y": 2})]);
    assert_eq!(response.stop_reason, StopReason::ToolUse);
}

/// An `error` event after a message start, of Anthropic error `kind`.
fn error_stream(kind: &str, message: &str) -> String {
    sse(&[
        ("message_start", r#"{"type":"message_start","message":{"id":"m","usage":{"input_tokens":5}}}"#),
        ("error", &json!({"type": "error", "error": {"type": kind, "message": message}}).to_string()),
    ])
}

#[test]
fn error_events_become_typed_errors_after_the_events_before_them() {
    let (events, error) = parse_until_error(error_stream("overloaded_error", "Overloaded").as_bytes());
    assert_eq!(events.len(), 2, "the start and its usage are delivered first: {events:?}");
    assert!(
        matches!(&error, Error::Overloaded { provider, message, .. } if provider == "anthropic" && message == "Overloaded")
    );

    let (_, error) = parse_until_error(error_stream("rate_limit_error", "slow down").as_bytes());
    assert!(matches!(error, Error::RateLimited { .. }), "{error:?}");
    let (_, error) = parse_until_error(error_stream("api_error", "Internal server error").as_bytes());
    assert!(matches!(error, Error::Server { status: 0, .. }), "{error:?}");
    assert!(error.is_retryable());
    let (_, error) = parse_until_error(error_stream("invalid_request_error", "prompt is too long: 1 > 0").as_bytes());
    assert!(matches!(error, Error::ContextWindowExceeded { .. }), "{error:?}");
    let (_, error) = parse_until_error(error_stream("invalid_request_error", "bad field").as_bytes());
    assert!(matches!(error, Error::InvalidRequest { status: 0, .. }), "{error:?}");
    let (_, error) = parse_until_error(error_stream("permission_error", "no").as_bytes());
    assert!(matches!(error, Error::Authentication { .. }), "{error:?}");
    let (_, error) = parse_until_error(error_stream("brand_new_error", "?").as_bytes());
    assert!(matches!(error, Error::Server { status: 0, .. }), "{error:?}");
}

/// A stream that ended before its end marker: retryable, unlike a malformed one.
fn assert_truncated(bytes: &[u8], what: &str) {
    match parse(bytes) {
        Err(error @ Error::Truncated { .. }) => assert!(error.is_retryable(), "{what}"),
        other => panic!("{what}: expected a truncation, got {other:?}"),
    }
}

fn assert_decode(bytes: &[u8], what: &str) {
    match parse(bytes) {
        Err(Error::Decode { provider, .. }) => assert_eq!(provider, "anthropic", "{what}"),
        other => panic!("{what}: expected a decode error, got {other:?}"),
    }
}

#[test]
fn a_stream_cut_before_message_stop_is_truncated_at_every_event_boundary() {
    let events: Vec<&str> = TRANSCRIPT.split_inclusive("\n\n").collect();
    assert_eq!(events.len(), 11);
    for cut in 0..events.len() {
        assert_truncated(events[..cut].concat().as_bytes(), &format!("cut after {cut} events"));
    }
    // A line cut mid-way is dispatched at the end and fails as JSON.
    assert_decode(&TRANSCRIPT.as_bytes()[..TRANSCRIPT.len() - 10], "cut inside the last event");
    assert!(parse(TRANSCRIPT.as_bytes()).is_ok());
}

#[test]
fn invalid_json_and_wrongly_shaped_events_are_decode_errors() {
    let start = r#"{"type":"message_start","message":{"id":"m"}}"#;
    let text_start = r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#;
    let stop = r#"{"type":"message_stop"}"#;
    let cases: &[(&str, Vec<(&str, &str)>)] = &[
        (
            "invalid JSON",
            vec![("message_start", start), ("content_block_delta", r#"{"this is": not json"#), ("message_stop", stop)],
        ),
        ("unnamed garbage", vec![("message_start", start)]),
        (
            "index as a string",
            vec![
                ("message_start", start),
                (
                    "content_block_start",
                    r#"{"type":"content_block_start","index":"0","content_block":{"type":"text"}}"#,
                ),
            ],
        ),
        (
            "start without its block",
            vec![("message_start", start), ("content_block_start", r#"{"type":"content_block_start","index":0}"#)],
        ),
        (
            "delta without an index",
            vec![
                ("message_start", start),
                ("content_block_start", text_start),
                ("content_block_delta", r#"{"type":"content_block_delta","delta":{"type":"text_delta","text":"x"}}"#),
            ],
        ),
        (
            "text delta without text",
            vec![
                ("message_start", start),
                ("content_block_start", text_start),
                ("content_block_delta", r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta"}}"#),
            ],
        ),
        (
            "text as a number",
            vec![
                ("message_start", start),
                ("content_block_start", text_start),
                (
                    "content_block_delta",
                    r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":5}}"#,
                ),
            ],
        ),
        ("message as a number", vec![("message_start", r#"{"type":"message_start","message":5}"#)]),
        (
            "delta for a block never started",
            vec![
                ("message_start", start),
                (
                    "content_block_delta",
                    r#"{"type":"content_block_delta","index":3,"delta":{"type":"text_delta","text":"x"}}"#,
                ),
                ("message_stop", stop),
            ],
        ),
        (
            "arguments for a text block",
            vec![
                ("message_start", start),
                ("content_block_start", text_start),
                (
                    "content_block_delta",
                    r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{}"}}"#,
                ),
            ],
        ),
        (
            "a block started twice",
            vec![("message_start", start), ("content_block_start", text_start), ("content_block_start", text_start)],
        ),
        (
            "a tool call without a name",
            vec![
                ("message_start", start),
                (
                    "content_block_start",
                    r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t"}}"#,
                ),
            ],
        ),
        (
            "usage as a string",
            vec![
                ("message_start", start),
                ("message_delta", r#"{"type":"message_delta","delta":{},"usage":{"output_tokens":"7"}}"#),
                ("message_stop", stop),
            ],
        ),
        (
            "stop of a stopped block",
            vec![
                ("message_start", start),
                ("content_block_start", text_start),
                ("content_block_stop", r#"{"type":"content_block_stop","index":0}"#),
                ("content_block_stop", r#"{"type":"content_block_stop","index":0}"#),
                ("message_stop", stop),
            ],
        ),
    ];
    for (what, events) in cases {
        let mut bytes = sse(events);
        if *what == "unnamed garbage" {
            bytes.push_str("data: {\"this is\": not json\n\n");
        }
        assert_decode(bytes.as_bytes(), what);
    }
    assert_truncated(b"", "an empty body");
}

#[test]
fn one_byte_chunks_give_the_same_events() {
    let whole = parse(TRANSCRIPT.as_bytes()).expect("parses");
    let chunks: Vec<&[u8]> = TRANSCRIPT.as_bytes().chunks(1).collect();
    assert_eq!(parse_chunks(&chunks).expect("parses"), whole);
}

const SHAPE: TurnShape = TurnShape { reasoning: true, many_text_blocks: true };

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn scripted_turns_round_trip_under_any_chunking(
        (turn, points) in turn(SHAPE).prop_flat_map(|turn| {
            let len = AnthropicEncoder.encode(&turn).concat().len();
            (Just(turn), split_points(len))
        })
    ) {
        let bytes = AnthropicEncoder.encode(&turn).concat().into_bytes();
        let whole = parse(&bytes).expect("the encoder's stream parses");
        let split = parse_chunks(&split_at_points(&bytes, &points)).expect("a split stream parses");
        prop_assert_eq!(&split, &whole);

        let response = accumulate(&whole).expect("complete");
        for block in &response.message.content {
            if let ContentBlock::Thinking { signature, .. } = block {
                prop_assert!(signature.as_deref().is_some_and(|s| !s.is_empty()), "thinking is signed");
            }
        }
        prop_assert_eq!(without_signatures(response.message), turn.expected_message());
        prop_assert_eq!(response.stop_reason, turn.stop.clone());
        prop_assert_eq!(response.usage, turn.usage);
        prop_assert_eq!(response.model.as_deref(), Some(turn.model.as_str()));
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = parse(&bytes);
    }

    #[test]
    fn corrupted_streams_never_panic(
        (bytes, edits) in turn(SHAPE).prop_flat_map(|turn| {
            let bytes = AnthropicEncoder.encode(&turn).concat().into_bytes();
            let len = bytes.len();
            (Just(bytes), proptest::collection::vec((0..len, any::<u8>()), 1..8))
        })
    ) {
        let mut bytes = bytes;
        for (at, byte) in edits {
            bytes[at] = byte;
        }
        let _ = parse(&bytes);
    }
}
