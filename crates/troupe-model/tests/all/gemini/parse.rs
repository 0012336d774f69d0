//! The stream parser: the real transcript, block and usage bookkeeping, stop reasons, error
//! objects, properties over random turns, and bad input.

use super::{fold, parse, parse_chunks, parse_until_error, sse};
use proptest::prelude::*;
use serde_json::json;
use troupe_core::{ContentBlock, StopReason, StreamEvent, Usage};
use troupe_model::Error;
use troupe_testkit::MockTurn;
use troupe_testkit::encode::{Vendor, encode_bytes};
use troupe_testkit::strategies::{TurnShape, split_at_points, split_points, turn};

/// The Gemini transcript of `PROTOCOLS.md`, byte for byte.
const TRANSCRIPT: &str = r#"data: {"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"weather","args":{"location":"Florence,Italy"}},"thoughtSignature":"CiQB"}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":54,"candidatesTokenCount":15,"totalTokenCount":123,"thoughtsTokenCount":54},"modelVersion":"gemini-2.5-flash"}"#;

#[test]
fn the_protocols_transcript_parses_to_the_exact_events() {
    let events = parse(format!("{TRANSCRIPT}\n\n").as_bytes()).expect("parses");
    assert_eq!(
        events,
        vec![
            StreamEvent::MessageStart { id: None, model: Some("gemini-2.5-flash".into()) },
            StreamEvent::ToolUseStart { index: 0, id: "call_0".into(), name: "weather".into() },
            StreamEvent::ToolUseInputDelta { index: 0, partial_json: r#"{"location":"Florence,Italy"}"#.into() },
            StreamEvent::Signature { index: 0, signature: "CiQB".into() },
            StreamEvent::ToolUseEnd { index: 0 },
            StreamEvent::Usage {
                usage: Usage { input_tokens: 54, output_tokens: 15 + 54, reasoning_tokens: 54, ..Default::default() }
            },
            StreamEvent::MessageStop { stop_reason: StopReason::ToolUse },
        ]
    );
    let response = fold(&events).expect("folds");
    assert_eq!(
        response.message.content,
        vec![ContentBlock::ToolUse {
            id: "call_0".into(),
            name: "weather".into(),
            input: json!({"location": "Florence,Italy"}),
            signature: Some("CiQB".into()),
        }]
    );
    // Without a final blank line (the stream just ends) it is the same response.
    assert_eq!(parse(TRANSCRIPT.as_bytes()).expect("parses"), events);
}

#[test]
fn text_continues_across_chunks_until_another_kind_of_part_interrupts() {
    let part = |p: serde_json::Value| json!({"candidates": [{"content": {"role": "model", "parts": [p]}, "index": 0}]});
    let mut chunks = vec![
        part(json!({"text": "Let me ", "thought": true})),
        part(json!({"text": "think.", "thought": true})),
        part(json!({"text": "Answer "})),
        part(json!({"text": "one."})),
        part(json!({"functionCall": {"id": "fc_7", "name": "lookup", "args": {"q": "x"}}})),
        part(json!({"functionCall": {"name": "other"}})),
        part(json!({"text": "After."})),
    ];
    chunks
        .push(json!({"candidates": [{"content": {"role": "model", "parts": [{"text": ""}]}, "finishReason": "STOP"}]}));
    let events = parse(&sse(&chunks)).expect("parses");
    let indices: Vec<(u32, &str)> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ReasoningDelta { index, .. } => Some((*index, "reasoning")),
            StreamEvent::TextDelta { index, .. } => Some((*index, "text")),
            StreamEvent::ToolUseStart { index, .. } => Some((*index, "call")),
            _ => None,
        })
        .collect();
    assert_eq!(
        indices,
        [(0, "reasoning"), (0, "reasoning"), (1, "text"), (1, "text"), (2, "call"), (3, "call"), (4, "text")]
    );
    let response = fold(&events).expect("folds");
    assert_eq!(response.stop_reason, StopReason::ToolUse, "STOP after a call means tool use");
    let calls: Vec<_> =
        response.message.tool_uses().map(|(id, name, input)| (id.to_string(), name, input.clone())).collect();
    // A missing id is generated from the call's position; a given one is kept.
    assert_eq!(calls, [("fc_7".to_owned(), "lookup", json!({"q": "x"})), ("call_1".to_owned(), "other", json!({}))]);
    assert_eq!(response.message.text(), "Answer one.After.");
}

#[test]
fn a_signature_on_an_answer_part_is_kept_in_a_signed_reasoning_block() {
    let chunks = [
        json!({"candidates": [{"content": {"parts": [{"text": "1+1 is "}]}}]}),
        json!({"candidates": [{"content": {"parts": [{"text": "2.", "thoughtSignature": "EjQK"}]}}]}),
        json!({"candidates": [{"content": {"parts": [{"text": "", "thoughtSignature": "second"}]}, "finishReason": "STOP"}]}),
    ];
    let response = fold(&parse(&sse(&chunks)).expect("parses")).expect("folds");
    assert_eq!(
        response.message.content,
        vec![
            ContentBlock::text("1+1 is 2."),
            ContentBlock::Thinking { text: String::new(), signature: Some("EjQK".into()) },
            ContentBlock::Thinking { text: String::new(), signature: Some("second".into()) },
        ],
        "each signature stays whole and in its place"
    );
    assert_eq!(response.stop_reason, StopReason::EndTurn);
}

#[test]
fn usage_merges_partial_counts_subtracts_the_cache_and_comes_before_the_stop() {
    let chunks = [
        json!({"candidates": [{"content": {"parts": [{"text": "a"}]}}],
               "usageMetadata": {"promptTokenCount": 1000, "cachedContentTokenCount": 800, "totalTokenCount": 1000}}),
        json!({"candidates": [{"content": {"parts": [{"text": "b"}]}, "finishReason": "MAX_TOKENS"}],
               "usageMetadata": {"promptTokenCount": 1000, "candidatesTokenCount": 7, "thoughtsTokenCount": 3,
                                 "totalTokenCount": 1010}}),
    ];
    let events = parse(&sse(&chunks)).expect("parses");
    let usages: Vec<Usage> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Usage { usage } => Some(*usage),
            _ => None,
        })
        .collect();
    let first = Usage { input_tokens: 200, cache_read_tokens: 800, ..Default::default() };
    let last = Usage { output_tokens: 10, reasoning_tokens: 3, ..first };
    assert_eq!(usages, [first, last], "the cached count is kept when a later chunk leaves it out");
    assert!(
        matches!(
            &events[events.len() - 2..],
            [StreamEvent::Usage { .. }, StreamEvent::MessageStop { stop_reason: StopReason::MaxTokens }]
        ),
        "{events:?}"
    );
}

#[test]
fn finish_reasons_map_to_stop_reasons() {
    for (reason, expected) in [
        ("STOP", StopReason::EndTurn),
        ("MAX_TOKENS", StopReason::MaxTokens),
        ("SAFETY", StopReason::Refusal),
        ("RECITATION", StopReason::Refusal),
        ("PROHIBITED_CONTENT", StopReason::Refusal),
        ("BLOCKLIST", StopReason::Refusal),
        ("SPII", StopReason::Refusal),
        ("MALFORMED_FUNCTION_CALL", StopReason::Other("MALFORMED_FUNCTION_CALL".into())),
        ("OTHER", StopReason::Other("OTHER".into())),
    ] {
        let chunk = json!({"candidates": [{"content": {"parts": [{"text": "x"}]}, "finishReason": reason}]});
        let response = fold(&parse(&sse(&[chunk])).expect("parses")).expect("folds");
        assert_eq!(response.stop_reason, expected, "{reason}");
    }
}

#[test]
fn a_blocked_prompt_is_a_refusal() {
    let chunk = json!({"promptFeedback": {"blockReason": "SAFETY"},
                       "usageMetadata": {"promptTokenCount": 12, "totalTokenCount": 12}});
    let events = parse(&sse(&[chunk])).expect("a blocked prompt is a complete answer");
    let response = fold(&events).expect("folds");
    assert_eq!(response.stop_reason, StopReason::Refusal);
    assert!(response.message.content.is_empty());
    assert_eq!(response.usage.input_tokens, 12);
}

#[test]
fn error_objects_in_the_stream_are_typed_errors_after_the_events_before_them() {
    let text = json!({"candidates": [{"content": {"parts": [{"text": "partial"}]}}]});
    for (status, check) in [
        ("RESOURCE_EXHAUSTED", (|e: &Error| matches!(e, Error::RateLimited { .. })) as fn(&Error) -> bool),
        ("UNAVAILABLE", |e| matches!(e, Error::Overloaded { .. })),
        ("INTERNAL", |e| matches!(e, Error::Server { status: 0, .. })),
    ] {
        let error = json!({"error": {"code": 500, "message": "went wrong", "status": status}});
        let (events, e) = parse_until_error(&sse(&[text.clone(), error]));
        assert!(check(&e), "{status}: {e:?}");
        assert!(e.to_string().contains("went wrong"), "{e}");
        assert!(matches!(events.as_slice(), [StreamEvent::MessageStart { .. }, StreamEvent::TextDelta { .. }]));
    }
}

#[test]
fn a_stream_cut_before_its_finish_reason_is_truncated() {
    let turn = MockTurn::text("several pieces of text").with_delta_chars(5);
    let events = Vendor::Gemini.encoder().encode(&turn);
    let cut = events[..events.len() - 1].concat();
    let (parsed, e) = parse_until_error(cut.as_bytes());
    assert!(matches!(e, Error::Truncated { .. }) && e.is_retryable(), "{e:?}");
    assert!(!parsed.is_empty(), "what arrived is still delivered");
    assert!(matches!(parse(b""), Err(Error::Truncated { .. })), "an empty body is no response");
    assert!(matches!(parse(b": keep-alive\n\n"), Err(Error::Truncated { .. })));
}

#[test]
fn invalid_json_and_wrong_shapes_are_decode_errors() {
    for data in [
        r#"{"candidates": [{"content": "#,
        r#"{"candidates": "none"}"#,
        r#"{"candidates": [{"content": {"parts": [{"text": 5}]}}]}"#,
        r#"{"candidates": [{"content": {"parts": [{"functionCall": {"args": {}}}]}}]}"#,
        r#"{"usageMetadata": {"promptTokenCount": -1}}"#,
        r#"[{"candidates": []}]"#,
        "not json at all",
    ] {
        let e = parse(format!("data: {data}\n\n").as_bytes()).expect_err(data);
        assert!(matches!(e, Error::Decode { .. }), "{data}: {e:?}");
    }
}

#[test]
fn unknown_fields_and_part_kinds_are_ignored() {
    let chunk = json!({
        "candidates": [{
            "content": {"role": "model", "parts": [
                {"executableCode": {"language": "PYTHON", "code": "print(1)"}},
                {"inlineData": {"mimeType": "image/png", "data": "AAAA"}},
                {"text": "ok", "futureField": {"x": 1}}
            ]},
            "finishReason": "STOP",
            "safetyRatings": [{"category": "HARM_CATEGORY_HARASSMENT", "probability": "NEGLIGIBLE"}],
            "citationMetadata": {}
        }],
        "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 1, "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 3}]},
        "responseId": "resp-1"
    });
    let events = parse(&sse(&[chunk])).expect("parses");
    assert_eq!(events[0], StreamEvent::MessageStart { id: Some("resp-1".into()), model: None });
    assert_eq!(fold(&events).expect("folds").message.text(), "ok");
}

const SHAPE: TurnShape = TurnShape { reasoning: true, many_text_blocks: false };

/// `message` without the signatures the encoder adds (the scripted turn has none).
fn unsigned(mut message: troupe_core::Message) -> troupe_core::Message {
    for block in &mut message.content {
        match block {
            ContentBlock::ToolUse { signature, .. } | ContentBlock::Thinking { signature, .. } => *signature = None,
            _ => {}
        }
    }
    message
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn any_chunking_gives_the_same_events_and_the_scripted_response(
        (turn, points) in turn(SHAPE).prop_flat_map(|t| {
            let len = encode_bytes(Vendor::Gemini, &t).len();
            (Just(t), split_points(len))
        })
    ) {
        let bytes = encode_bytes(Vendor::Gemini, &turn);
        let whole = parse(&bytes)?;
        let split = parse_chunks(&split_at_points(&bytes, &points))?;
        prop_assert_eq!(&whole, &split);
        let response = fold(&whole)?;
        // The scripted ids come back because the encoder sends them, as newer Gemini does.
        prop_assert_eq!(unsigned(response.message), turn.expected_message());
        prop_assert_eq!(response.stop_reason, turn.stop.clone());
        prop_assert_eq!(response.usage, turn.usage);
        prop_assert_eq!(response.model.as_deref(), Some(turn.model.as_str()));
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = parse(&bytes);
        let mut framed = b"data: ".to_vec();
        framed.extend_from_slice(&bytes);
        let _ = parse(&framed);
    }

    #[test]
    fn corrupted_streams_never_panic(
        (turn, at, byte) in turn(SHAPE).prop_flat_map(|t| {
            let len = encode_bytes(Vendor::Gemini, &t).len();
            (Just(t), 0..len, any::<u8>())
        })
    ) {
        let mut bytes = encode_bytes(Vendor::Gemini, &turn);
        bytes[at] = byte;
        let _ = parse(&bytes);
        bytes.truncate(at);
        let _ = parse(&bytes);
    }
}

#[test]
fn generated_call_ids_carry_the_response_id_so_they_do_not_repeat_across_turns() {
    let chunk = |response_id: &str| {
        format!(
            "data: {}\n\n",
            json!({"responseId": response_id, "candidates": [{"content": {"role": "model", "parts": [
                {"functionCall": {"name": "a", "args": {}}}, {"functionCall": {"name": "b", "args": {}}}
            ]}, "finishReason": "STOP", "index": 0}]})
        )
    };
    let ids = |events: Vec<StreamEvent>| -> Vec<String> {
        events
            .into_iter()
            .filter_map(|e| match e {
                StreamEvent::ToolUseStart { id, .. } => Some(id),
                _ => None,
            })
            .collect()
    };
    let first = ids(parse(chunk("r1").as_bytes()).expect("parses"));
    let second = ids(parse(chunk("r2").as_bytes()).expect("parses"));
    assert_eq!(first, ["call_r1_0", "call_r1_1"]);
    assert_eq!(second, ["call_r2_0", "call_r2_1"]);
}
