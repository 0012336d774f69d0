//! The stream parser: the real transcript, random turns and chunkings, compatible servers'
//! deviations, and bad input.

use super::{accumulate, parse, parse_chunks, parse_until_error, stream};
use proptest::prelude::*;
use troupe_core::{ContentBlock, StopReason, StreamEvent, Usage};
use troupe_model::Error;
use troupe_testkit::MockTurn;
use troupe_testkit::encode::{OpenAiChatEncoder, WireEncoder};
use troupe_testkit::strategies::{TurnShape, split_at_points, split_points, turn};

/// The OpenAI transcript of PROTOCOLS.md, verbatim.
const TRANSCRIPT: &str = concat!(
    r#"data: {"id":"chatcmpl-ABfw","object":"chat.completion.chunk","model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_4Xzl","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}]}"#,
    "\n\n",
    r#"data: {"id":"chatcmpl-ABfw","object":"chat.completion.chunk","model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":\""}}]},"finish_reason":null}]}"#,
    "\n\n",
    r#"data: {"id":"chatcmpl-ABfw","object":"chat.completion.chunk","model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"New York City\"}"}}]},"finish_reason":null}]}"#,
    "\n\n",
    r#"data: {"id":"chatcmpl-ABfw","object":"chat.completion.chunk","model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
    "\n\n",
    r#"data: {"id":"chatcmpl-ABfw","object":"chat.completion.chunk","model":"gpt-4o-2024-08-06","choices":[],"usage":{"prompt_tokens":44,"completion_tokens":16,"total_tokens":60}}"#,
    "\n\n",
    "data: [DONE]\n\n",
);

#[test]
fn the_protocols_transcript_parses_to_the_expected_events() {
    let events = parse(TRANSCRIPT.as_bytes()).expect("parses");
    assert_eq!(
        events,
        vec![
            StreamEvent::MessageStart { id: Some("chatcmpl-ABfw".into()), model: Some("gpt-4o-2024-08-06".into()) },
            StreamEvent::ToolUseStart { index: 0, id: "call_4Xzl".into(), name: "get_weather".into() },
            StreamEvent::ToolUseInputDelta { index: 0, partial_json: "{\"city\":\"".into() },
            StreamEvent::ToolUseInputDelta { index: 0, partial_json: "New York City\"}".into() },
            StreamEvent::ToolUseEnd { index: 0 },
            StreamEvent::Usage { usage: Usage { input_tokens: 44, output_tokens: 16, ..Default::default() } },
            StreamEvent::MessageStop { stop_reason: StopReason::ToolUse },
        ]
    );
    let response = accumulate(&events).expect("complete");
    let calls: Vec<_> = response
        .message
        .tool_uses()
        .map(|(id, name, input)| (id.to_string(), name.to_owned(), input.clone()))
        .collect();
    assert_eq!(calls, vec![("call_4Xzl".into(), "get_weather".into(), serde_json::json!({"city": "New York City"}))]);
}

const SHAPE: TurnShape = TurnShape { reasoning: false, many_text_blocks: false };

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn encoded_turns_round_trip_under_any_chunking(
        (turn, points) in (turn(SHAPE), any::<bool>()).prop_map(|(turn, interleave)| MockTurn {
            // Half the cases stream several tool calls with their fragments interleaved.
            interleave_tool_calls: interleave,
            ..turn
        }).prop_flat_map(|turn| {
            let len = OpenAiChatEncoder.encode(&turn).concat().len();
            (Just(turn), split_points(len))
        })
    ) {
        let bytes = OpenAiChatEncoder.encode(&turn).concat().into_bytes();
        let whole = parse(&bytes).expect("whole stream parses");
        let split = parse_chunks(&split_at_points(&bytes, &points)).expect("split stream parses");
        prop_assert_eq!(&whole, &split);
        let response = accumulate(&whole).expect("accumulates");
        prop_assert_eq!(response.message, turn.expected_message());
        prop_assert_eq!(response.stop_reason, turn.stop.clone());
        prop_assert_eq!(response.usage, turn.usage);
        prop_assert_eq!(response.model.as_deref(), Some(turn.model.as_str()));
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = parse(&bytes);
        let mut prefixed = b"data: ".to_vec();
        prefixed.extend_from_slice(&bytes);
        let _ = parse(&prefixed);
    }

    #[test]
    fn random_chunk_json_never_panics(
        text in "[\\[\\]{}\",:0-9a-z_ ]{0,200}",
        key in prop::sample::select(vec!["choices", "delta", "tool_calls", "usage", "index", "function", "error"]),
    ) {
        let chunk = format!("{{\"choices\":[{{\"index\":0,\"delta\":{{\"{key}\":{text}}}}}]}}");
        let _ = parse(stream(&[&chunk], true).as_bytes());
    }
}

#[test]
fn reasoning_content_deltas_become_a_reasoning_block_before_the_text() {
    let turn = MockTurn::default().with_reasoning("2 + 2 is 4.").with_text("The answer is 4.").with_usage(Usage {
        input_tokens: 12,
        output_tokens: 30,
        reasoning_tokens: 20,
        ..Default::default()
    });
    let bytes = OpenAiChatEncoder.encode(&turn).concat();
    assert!(bytes.contains("\"reasoning_content\":\"2 + 2 is\""), "{bytes}");
    let events = parse(bytes.as_bytes()).expect("parses");
    assert!(events.contains(&StreamEvent::ReasoningDelta { index: 0, text: "2 + 2 is".into() }), "{events:?}");
    assert!(events.contains(&StreamEvent::TextDelta { index: 1, text: "The answ".into() }), "{events:?}");
    let response = accumulate(&events).expect("complete");
    assert_eq!(response.message, turn.expected_message());
    assert_eq!(response.usage.reasoning_tokens, 20);
}

#[test]
fn the_reasoning_field_of_openrouter_and_vllm_is_reasoning_too() {
    let bytes = stream(
        &[
            r#"{"id":"gen-1","model":"deepseek/r1","choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning":"Think"}}]}"#,
            r#"{"id":"gen-1","model":"deepseek/r1","choices":[{"index":0,"delta":{"content":"Done","reasoning":null}}]}"#,
            r#"{"id":"gen-1","model":"deepseek/r1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
        ],
        true,
    );
    let response = accumulate(&parse(bytes.as_bytes()).expect("parses")).expect("complete");
    assert_eq!(
        response.message.content,
        vec![ContentBlock::Thinking { text: "Think".into(), signature: None }, ContentBlock::text("Done")]
    );
}

#[test]
fn interleaved_parallel_calls_are_assembled_per_index() {
    let bytes = stream(
        &[
            r#"{"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":"Both: "}}]}"#,
            r#"{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"weather","arguments":""}},{"index":1,"id":"b","type":"function","function":{"name":"time","arguments":"{\"tz\":"}}]}}]}"#,
            r#"{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"\"CET\"}"}},{"index":0,"function":{"arguments":"{\"city\":\"Paris\"}"}}]}}]}"#,
            r#"{"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
        ],
        true,
    );
    let events = parse(bytes.as_bytes()).expect("parses");
    assert!(events.contains(&StreamEvent::ToolUseStart { index: 1, id: "a".into(), name: "weather".into() }));
    assert!(events.contains(&StreamEvent::ToolUseStart { index: 2, id: "b".into(), name: "time".into() }));
    let response = accumulate(&events).expect("complete");
    let calls: Vec<_> = response.message.tool_uses().map(|(id, _, input)| (id.to_string(), input.clone())).collect();
    assert_eq!(
        calls,
        vec![("a".into(), serde_json::json!({"city": "Paris"})), ("b".into(), serde_json::json!({"tz": "CET"}))]
    );
    assert_eq!(response.message.text(), "Both: ");
}

#[test]
fn fragments_without_index_match_by_id_or_continue_the_last_call() {
    let bytes = stream(
        &[
            r#"{"id":"c","choices":[{"delta":{"tool_calls":[{"id":"a","type":"function","function":{"name":"one","arguments":"{\"x\":"}}]}}]}"#,
            r#"{"id":"c","choices":[{"delta":{"tool_calls":[{"function":{"arguments":"1}"}}]}}]}"#,
            r#"{"id":"c","choices":[{"delta":{"tool_calls":[{"id":"b","type":"function","function":{"name":"two","arguments":"{\"y\":"}}]}}]}"#,
            r#"{"id":"c","choices":[{"delta":{"tool_calls":[{"id":"a","function":{"arguments":""}}]}}]}"#,
            r#"{"id":"c","choices":[{"delta":{"tool_calls":[{"id":"b","function":{"arguments":"2}"}}]}}]}"#,
            r#"{"id":"c","choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
        ],
        true,
    );
    let response = accumulate(&parse(bytes.as_bytes()).expect("parses")).expect("complete");
    let calls: Vec<_> = response
        .message
        .tool_uses()
        .map(|(id, name, input)| (id.to_string(), name.to_owned(), input.clone()))
        .collect();
    assert_eq!(
        calls,
        vec![
            ("a".into(), "one".into(), serde_json::json!({"x": 1})),
            ("b".into(), "two".into(), serde_json::json!({"y": 2}))
        ]
    );
}

#[test]
fn calls_all_numbered_zero_are_told_apart_by_their_ids() {
    let bytes = stream(
        &[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"one","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"b","function":{"name":"two","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
        ],
        true,
    );
    let response = accumulate(&parse(bytes.as_bytes()).expect("parses")).expect("complete");
    let names: Vec<_> = response.message.tool_uses().map(|(id, name, _)| format!("{id}:{name}")).collect();
    assert_eq!(names, ["a:one", "b:two"]);
}

#[test]
fn usage_on_every_chunk_is_a_running_total_and_is_reported_once() {
    let bytes = stream(
        &[
            r#"{"id":"","choices":[{"index":0,"delta":{"content":"a"}}],"usage":{"prompt_tokens":30,"completion_tokens":1}}"#,
            r#"{"id":"","choices":[{"index":0,"delta":{"content":"b"}}],"usage":{"prompt_tokens":30,"completion_tokens":2}}"#,
            r#"{"id":"","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":30,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":20}}}"#,
        ],
        true,
    );
    let events = parse(bytes.as_bytes()).expect("parses");
    let usages: Vec<_> = events.iter().filter(|e| matches!(e, StreamEvent::Usage { .. })).collect();
    let expected = Usage { input_tokens: 10, output_tokens: 3, cache_read_tokens: 20, ..Default::default() };
    assert_eq!(usages, vec![&StreamEvent::Usage { usage: expected }]);
    assert_eq!(events.first(), Some(&StreamEvent::MessageStart { id: None, model: None }), "empty id is no id");
    assert_eq!(events.last(), Some(&StreamEvent::MessageStop { stop_reason: StopReason::EndTurn }));
    assert_eq!(events[events.len() - 2], StreamEvent::Usage { usage: expected }, "usage comes right before the stop");
}

#[test]
fn finish_reason_on_the_usage_chunk_and_chunks_without_choices_are_fine() {
    let bytes = stream(
        &[
            r#"{"id":"x","model":"llama"}"#,
            r#"{"id":"x","choices":[{"index":0,"delta":{"content":"hi"}}]}"#,
            r#"{"id":"x","choices":[{"index":0,"delta":{},"finish_reason":"length"}],"usage":{"prompt_tokens":5,"completion_tokens":1}}"#,
        ],
        true,
    );
    let response = accumulate(&parse(bytes.as_bytes()).expect("parses")).expect("complete");
    assert_eq!(response.stop_reason, StopReason::MaxTokens);
    assert_eq!(response.usage, Usage { input_tokens: 5, output_tokens: 1, ..Default::default() });
    assert_eq!(response.message.text(), "hi");
    assert_eq!(response.model.as_deref(), Some("llama"));
}

#[test]
fn deepseek_cache_hits_count_as_cache_reads() {
    let bytes = stream(
        &[
            r#"{"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":7,"prompt_cache_hit_tokens":64,"prompt_cache_miss_tokens":36}}"#,
        ],
        true,
    );
    let response = accumulate(&parse(bytes.as_bytes()).expect("parses")).expect("complete");
    assert_eq!(
        response.usage,
        Usage { input_tokens: 36, output_tokens: 7, cache_read_tokens: 64, ..Default::default() }
    );
}

#[test]
fn a_stream_with_a_finish_reason_but_no_done_is_complete() {
    let bytes = stream(&[r#"{"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}"#], false);
    let events = parse(bytes.as_bytes()).expect("accepted without [DONE]");
    assert_eq!(events.last(), Some(&StreamEvent::MessageStop { stop_reason: StopReason::EndTurn }));
}

#[test]
fn stop_with_tool_calls_is_tool_use_and_other_reasons_are_kept() {
    let with_call = stream(
        &[
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"t","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
        ],
        true,
    );
    assert_eq!(accumulate(&parse(with_call.as_bytes()).expect("parses")).expect("ok").stop_reason, StopReason::ToolUse);
    for (reason, expected) in [
        ("content_filter", StopReason::Refusal),
        ("function_call", StopReason::ToolUse),
        ("eos_token", StopReason::Other("eos_token".into())),
    ] {
        let chunk = format!(r#"{{"choices":[{{"index":0,"delta":{{"content":"x"}},"finish_reason":"{reason}"}}]}}"#);
        let events = parse(stream(&[&chunk], true).as_bytes()).expect("parses");
        assert_eq!(events.last(), Some(&StreamEvent::MessageStop { stop_reason: expected }), "{reason}");
    }
}

#[test]
fn a_refusal_is_text_and_ends_as_a_refusal() {
    let bytes = stream(
        &[
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":null,"refusal":""}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"refusal":"I can't help with that."}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
        ],
        true,
    );
    let response = accumulate(&parse(bytes.as_bytes()).expect("parses")).expect("complete");
    assert_eq!(response.message.text(), "I can't help with that.");
    assert_eq!(response.stop_reason, StopReason::Refusal);
}

#[test]
fn only_the_first_choice_is_read_and_frames_after_done_are_ignored() {
    let bytes = stream(
        &[
            r#"{"choices":[{"index":1,"delta":{"content":"other"}},{"index":0,"delta":{"content":"mine"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
        ],
        true,
    ) + "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"late\"}}]}\n\n";
    let response = accumulate(&parse(bytes.as_bytes()).expect("parses")).expect("complete");
    assert_eq!(response.message.text(), "mine");
}

#[test]
fn unknown_fields_comments_and_empty_data_are_ignored() {
    let bytes = format!(
        ": OPENROUTER PROCESSING\n\ndata: \n\n{}",
        stream(
            &[
                r#"{"choices":[{"index":0,"delta":{"content":"ok","audio":{"x":1},"annotations":[]},"logprobs":null,"finish_reason":"stop","native_finish_reason":"STOP"}],"provider":"x","obfuscation":"ab"}"#
            ],
            true,
        )
    );
    let response = accumulate(&parse(bytes.as_bytes()).expect("parses")).expect("complete");
    assert_eq!(response.message.text(), "ok");
}

#[test]
fn a_stream_cut_before_its_end_is_truncated() {
    let bytes = OpenAiChatEncoder.encode(&MockTurn::text("Hello there, world"));
    // Cut before the finish chunk (the last three events are finish, usage, [DONE]).
    let cut = bytes[..bytes.len() - 3].concat();
    let (events, error) = parse_until_error(cut.as_bytes());
    assert!(matches!(error, Error::Truncated { .. }) && error.is_retryable(), "{error:?}");
    assert!(events.iter().any(|e| matches!(e, StreamEvent::TextDelta { .. })), "earlier events are kept");
    assert!(!events.iter().any(|e| matches!(e, StreamEvent::MessageStop { .. })));
    let (_, error) = parse_until_error(b"");
    assert!(matches!(error, Error::Truncated { .. }), "an empty body is truncated too");
}

#[test]
fn invalid_json_and_wrong_shapes_are_decode_errors() {
    for bad in [
        "{\"choices\": [",
        "not json",
        r#"{"choices": 5}"#,
        r#"{"choices":[{"index":0,"delta":{"content":5}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":{"index":0}}}]}"#,
        r#"{"usage":{"prompt_tokens":"many"}}"#,
    ] {
        let (_, error) = parse_until_error(stream(&[bad], true).as_bytes());
        assert!(matches!(error, Error::Decode { .. }), "{bad}: {error:?}");
    }
}

#[test]
fn arguments_for_no_call_and_calls_without_names_are_decode_errors() {
    let orphan = r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"arguments":"{}"}}]}}]}"#;
    assert!(matches!(parse_until_error(stream(&[orphan], true).as_bytes()).1, Error::Decode { .. }));
    let nameless = r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"arguments":"{}"}}]},"finish_reason":"tool_calls"}]}"#;
    assert!(matches!(parse_until_error(stream(&[nameless], true).as_bytes()).1, Error::Decode { .. }));
}

#[test]
fn a_name_after_the_first_fragment_still_starts_the_call_with_its_arguments() {
    let bytes = stream(
        &[
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"arguments":"{\"k\":"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"late","arguments":"1}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
        ],
        true,
    );
    let response = accumulate(&parse(bytes.as_bytes()).expect("parses")).expect("complete");
    let calls: Vec<_> = response.message.tool_uses().map(|(_, name, input)| (name.to_owned(), input.clone())).collect();
    assert_eq!(calls, vec![("late".into(), serde_json::json!({"k": 1}))]);
}

#[test]
fn error_chunks_map_to_typed_errors_after_the_earlier_events() {
    let text = r#"{"id":"c","choices":[{"index":0,"delta":{"content":"partial"}}]}"#;
    type Check = fn(&Error) -> bool;
    let cases: [(&str, Check); 5] = [
        (
            r#"{"error":{"message":"Our servers are currently overloaded.","type":"service_unavailable_error","param":null,"code":"server_is_overloaded"}}"#,
            |e| matches!(e, Error::Overloaded { .. }),
        ),
        (
            r#"{"error":{"message":"That model is currently overloaded with other requests.","type":"server_error","param":null,"code":null}}"#,
            |e| matches!(e, Error::Overloaded { .. }),
        ),
        (
            r#"{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}"#,
            |e| matches!(e, Error::RateLimited { .. }),
        ),
        (
            r#"{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}"#,
            |e| matches!(e, Error::Server { status: 0, .. }),
        ),
        (
            r#"{"object":"error","message":"This model's maximum context length is 4096 tokens.","type":"BadRequestError","param":null,"code":400}"#,
            |e| matches!(e, Error::ContextWindowExceeded { .. }),
        ),
    ];
    for (error_chunk, expected) in cases {
        let (events, error) = parse_until_error(stream(&[text, error_chunk], true).as_bytes());
        assert!(expected(&error), "{error_chunk}: {error:?}");
        assert!(events.contains(&StreamEvent::TextDelta { index: 0, text: "partial".into() }));
        assert!(!error.to_string().is_empty());
    }
    let (_, error) = parse_until_error(b"event: error\ndata: {\"message\":\"boom\"}\n\n");
    assert!(matches!(error, Error::Server { ref message, .. } if message == "boom"), "{error:?}");
}
