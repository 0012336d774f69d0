//! Recorded and hand-written streams parsed to exact events.

use super::*;

// Recorded streams (from the prism-php/prism test fixtures, recorded against
// api.openai.com; the `response` objects are cut down to the fields that matter).

const FC_SEARCH: &str = "fc_684b3e6bdeb8819b9ff56d3e0ad80b4c091e30eaec0a395b";
const FC_WEATHER: &str = "fc_684b3e6c2ab8819b9167b4bbbc53c35d091e30eaec0a395b";

fn recorded_parallel_tool_calls() -> String {
    let head =
        r#""id":"resp_684b3e6ac540819ba8d482c36f131496091e30eaec0a395b","object":"response","created_at":1749761642"#;
    let search_deltas = [
        "{",
        "\\\"query",
        "\\\":",
        "\\\"Detroit",
        " Tigers",
        " game",
        " schedule",
        " October",
        " ",
        "10",
        ",",
        " ",
        "202",
        "3",
        "\\\"}",
    ];
    let weather_deltas = ["{", "\\\"city", "\\\":", "\\\"Detroit", "\\\"}"];
    let mut lines = vec![
        format!(
            r#"{{"type":"response.created","sequence_number":0,"response":{{{head},"status":"in_progress","error":null,"incomplete_details":null,"instructions":null,"max_output_tokens":2048,"model":"gpt-4o-2024-08-06","output":[],"parallel_tool_calls":true,"store":true,"temperature":1.0,"tool_choice":"auto","usage":null,"metadata":{{}}}}}}"#
        ),
        format!(
            r#"{{"type":"response.in_progress","sequence_number":1,"response":{{{head},"status":"in_progress","model":"gpt-4o-2024-08-06","output":[],"usage":null}}}}"#
        ),
        format!(
            r#"{{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{{"id":"{FC_SEARCH}","type":"function_call","status":"in_progress","arguments":"","call_id":"call_okunv0eUNIXE8kqY81fgYvCs","name":"search"}}}}"#
        ),
    ];
    let mut seq = 3;
    for delta in search_deltas {
        lines.push(format!(
            r#"{{"type":"response.function_call_arguments.delta","sequence_number":{seq},"item_id":"{FC_SEARCH}","output_index":0,"delta":"{delta}"}}"#
        ));
        seq += 1;
    }
    let search_args = r#"{\"query\":\"Detroit Tigers game schedule October 10, 2023\"}"#;
    lines.push(format!(
        r#"{{"type":"response.function_call_arguments.done","sequence_number":18,"item_id":"{FC_SEARCH}","output_index":0,"arguments":"{search_args}"}}"#
    ));
    let search_item = format!(
        r#"{{"id":"{FC_SEARCH}","type":"function_call","status":"completed","arguments":"{search_args}","call_id":"call_okunv0eUNIXE8kqY81fgYvCs","name":"search"}}"#
    );
    lines.push(format!(
        r#"{{"type":"response.output_item.done","sequence_number":19,"output_index":0,"item":{search_item}}}"#
    ));
    lines.push(format!(
        r#"{{"type":"response.output_item.added","sequence_number":20,"output_index":1,"item":{{"id":"{FC_WEATHER}","type":"function_call","status":"in_progress","arguments":"","call_id":"call_ydtVlYcFLcDX2C7dcHgKZjl3","name":"weather"}}}}"#
    ));
    seq = 21;
    for delta in weather_deltas {
        lines.push(format!(
            r#"{{"type":"response.function_call_arguments.delta","sequence_number":{seq},"item_id":"{FC_WEATHER}","output_index":1,"delta":"{delta}"}}"#
        ));
        seq += 1;
    }
    let weather_args = r#"{\"city\":\"Detroit\"}"#;
    lines.push(format!(
        r#"{{"type":"response.function_call_arguments.done","sequence_number":26,"item_id":"{FC_WEATHER}","output_index":1,"arguments":"{weather_args}"}}"#
    ));
    let weather_item = format!(
        r#"{{"id":"{FC_WEATHER}","type":"function_call","status":"completed","arguments":"{weather_args}","call_id":"call_ydtVlYcFLcDX2C7dcHgKZjl3","name":"weather"}}"#
    );
    lines.push(format!(
        r#"{{"type":"response.output_item.done","sequence_number":27,"output_index":1,"item":{weather_item}}}"#
    ));
    lines.push(format!(
        r#"{{"type":"response.completed","sequence_number":28,"response":{{{head},"status":"completed","error":null,"incomplete_details":null,"model":"gpt-4o-2024-08-06","output":[{search_item},{weather_item}],"parallel_tool_calls":true,"usage":{{"input_tokens":92,"input_tokens_details":{{"cached_tokens":0}},"output_tokens":52,"output_tokens_details":{{"reasoning_tokens":0}},"total_tokens":144}},"user":null,"metadata":{{}}}}}}"#
    ));
    sse(&lines.iter().map(String::as_str).collect::<Vec<_>>())
}

#[test]
fn recorded_parallel_tool_calls_parse_to_the_exact_events() {
    let events = parse(recorded_parallel_tool_calls().as_bytes()).expect("parses");
    let mut expected = vec![
        StreamEvent::MessageStart {
            id: Some("resp_684b3e6ac540819ba8d482c36f131496091e30eaec0a395b".into()),
            model: Some("gpt-4o-2024-08-06".into()),
        },
        StreamEvent::ToolUseStart { index: 0, id: "call_okunv0eUNIXE8kqY81fgYvCs".into(), name: "search".into() },
    ];
    for delta in [
        "{",
        "\"query",
        "\":",
        "\"Detroit",
        " Tigers",
        " game",
        " schedule",
        " October",
        " ",
        "10",
        ",",
        " ",
        "202",
        "3",
        "\"}",
    ] {
        expected.push(args(0, delta));
    }
    expected.push(StreamEvent::ToolUseEnd { index: 0 });
    expected.push(StreamEvent::ToolUseStart {
        index: 1,
        id: "call_ydtVlYcFLcDX2C7dcHgKZjl3".into(),
        name: "weather".into(),
    });
    for delta in ["{", "\"city", "\":", "\"Detroit", "\"}"] {
        expected.push(args(1, delta));
    }
    expected.push(StreamEvent::ToolUseEnd { index: 1 });
    expected.push(StreamEvent::Usage { usage: Usage { input_tokens: 92, output_tokens: 52, ..Default::default() } });
    expected.push(stop(StopReason::ToolUse));
    assert_eq!(events, expected);

    let response = accumulate(&events);
    let calls: Vec<_> =
        response.message.tool_uses().map(|(id, name, input)| (id.to_string(), name, input.clone())).collect();
    assert_eq!(
        calls,
        [
            (
                "call_okunv0eUNIXE8kqY81fgYvCs".to_owned(),
                "search",
                json!({"query": "Detroit Tigers game schedule October 10, 2023"})
            ),
            ("call_ydtVlYcFLcDX2C7dcHgKZjl3".to_owned(), "weather", json!({"city": "Detroit"})),
        ]
    );
}

const MSG_GPT5: &str = "msg_689a2422ff1c819aafd958795b1a87410caba6b0e06e935a";
const RS_GPT5: &str = "rs_689a24215ccc819aae0efab8490cbae90caba6b0e06e935a";
const GPT5_DELTAS: [(&str, &str); 10] = [
    ("I", "w1Urf0p1hclpVYY"),
    ("’m", "3JgemHiTl4pUxn"),
    (" an", "0fVwW8UhXF89m"),
    (" AI", "TK9yn6mQL5LgY"),
    (" assistant", "4X6aT3"),
    (" created", "xUf9FeEC"),
    (" by", "YKAF3lGPTnpof"),
    (" Open", "MLyL0ghLf81"),
    ("AI", "1EEhoc6bjM4oTm"),
    (".", "5QSOzg3OBjMDr7n"),
];

/// A gpt-5 answer with a reasoning item whose summary was not requested (so it stays
/// empty), logprobs and obfuscation padding; the text is cut after its first sentence.
fn recorded_reasoning_model_text() -> String {
    let head =
        r#""id":"resp_689a2420c578819a8722f5fe893f5ce40caba6b0e06e935a","object":"response","created_at":1754932256"#;
    let answer = "I’m an AI assistant created by OpenAI.";
    let part = format!(r#"{{"type":"output_text","annotations":[],"logprobs":[],"text":"{answer}"}}"#);
    let message =
        format!(r#"{{"id":"{MSG_GPT5}","type":"message","status":"completed","content":[{part}],"role":"assistant"}}"#);
    let reasoning = format!(r#"{{"id":"{RS_GPT5}","type":"reasoning","summary":[]}}"#);
    let mut lines = vec![
        format!(
            r#"{{"type":"response.created","sequence_number":0,"response":{{{head},"status":"in_progress","model":"gpt-5-2025-08-07","output":[],"reasoning":{{"effort":"low","summary":null}},"usage":null}}}}"#
        ),
        format!(
            r#"{{"type":"response.in_progress","sequence_number":1,"response":{{{head},"status":"in_progress","model":"gpt-5-2025-08-07","output":[],"reasoning":{{"effort":"low","summary":null}},"usage":null}}}}"#
        ),
        format!(r#"{{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{reasoning}}}"#),
        format!(r#"{{"type":"response.output_item.done","sequence_number":3,"output_index":0,"item":{reasoning}}}"#),
        format!(
            r#"{{"type":"response.output_item.added","sequence_number":4,"output_index":1,"item":{{"id":"{MSG_GPT5}","type":"message","status":"in_progress","content":[],"role":"assistant"}}}}"#
        ),
        format!(
            r#"{{"type":"response.content_part.added","sequence_number":5,"item_id":"{MSG_GPT5}","output_index":1,"content_index":0,"part":{{"type":"output_text","annotations":[],"logprobs":[],"text":""}}}}"#
        ),
    ];
    for (n, (delta, padding)) in GPT5_DELTAS.iter().enumerate() {
        lines.push(format!(
            r#"{{"type":"response.output_text.delta","sequence_number":{},"item_id":"{MSG_GPT5}","output_index":1,"content_index":0,"delta":"{delta}","logprobs":[],"obfuscation":"{padding}"}}"#,
            n + 6
        ));
    }
    lines.push(format!(
        r#"{{"type":"response.output_text.done","sequence_number":16,"item_id":"{MSG_GPT5}","output_index":1,"content_index":0,"text":"{answer}","logprobs":[]}}"#
    ));
    lines.push(format!(
        r#"{{"type":"response.content_part.done","sequence_number":17,"item_id":"{MSG_GPT5}","output_index":1,"content_index":0,"part":{part}}}"#
    ));
    lines.push(format!(
        r#"{{"type":"response.output_item.done","sequence_number":18,"output_index":1,"item":{message}}}"#
    ));
    lines.push(format!(
        r#"{{"type":"response.completed","sequence_number":19,"response":{{{head},"status":"completed","error":null,"incomplete_details":null,"model":"gpt-5-2025-08-07","output":[{reasoning},{message}],"reasoning":{{"effort":"low","summary":null}},"usage":{{"input_tokens":10,"input_tokens_details":{{"cached_tokens":0}},"output_tokens":127,"output_tokens_details":{{"reasoning_tokens":64}},"total_tokens":137}}}}}}"#
    ));
    sse(&lines.iter().map(String::as_str).collect::<Vec<_>>())
}

#[test]
fn recorded_reasoning_model_text_parses_to_the_exact_events() {
    let events = parse(recorded_reasoning_model_text().as_bytes()).expect("parses");
    let mut expected = vec![StreamEvent::MessageStart {
        id: Some("resp_689a2420c578819a8722f5fe893f5ce40caba6b0e06e935a".into()),
        model: Some("gpt-5-2025-08-07".into()),
    }];
    // The empty reasoning item opens no block: the text is block 0, and `.done` events
    // do not repeat it.
    expected.extend(GPT5_DELTAS.iter().map(|(delta, _)| text(0, delta)));
    expected.push(StreamEvent::Usage {
        usage: Usage { input_tokens: 10, output_tokens: 127, reasoning_tokens: 64, ..Default::default() },
    });
    expected.push(stop(StopReason::EndTurn));
    assert_eq!(events, expected);
    assert_eq!(accumulate(&events).message, Message::assistant("I’m an AI assistant created by OpenAI."));
}

#[test]
fn recorded_failed_response_is_a_typed_error_after_the_start() {
    let head =
        r#""id":"resp_6867f1cae59481a0a6d8b23d1b93e4aa02dfa4dca8f6376f","object":"response","created_at":1751642570"#;
    let bytes = sse(&[
        &format!(
            r#"{{"type":"response.created","sequence_number":0,"response":{{{head},"status":"in_progress","model":"gpt-4o-2024-08-06","output":[],"usage":null}}}}"#
        ),
        &format!(
            r#"{{"type":"response.in_progress","sequence_number":1,"response":{{{head},"status":"in_progress","model":"gpt-4o-2024-08-06","output":[],"usage":null}}}}"#
        ),
        r#"{"type":"error","sequence_number":2,"error":{"code":"unknown-error","message":"Foobar","param":null}}"#,
        &format!(
            r#"{{"type":"response.failed","sequence_number":3,"response":{{{head},"status":"failed","error":{{"code":"rate_limit_exceeded","message":"Request too large for gpt-4o on tokens per min (TPM): Limit 1, Requested 30."}},"incomplete_details":null,"model":"gpt-4o-2024-08-06","output":[],"usage":null}}}}"#
        ),
    ]);
    let mut parser = parser();
    let mut out = Vec::new();
    let err = parser.feed(bytes.as_bytes(), &mut out).expect_err("the response failed");
    assert!(matches!(&out[..], [StreamEvent::MessageStart { .. }]), "{out:?}");
    // `response.failed` names the cause better than the `error` event before it.
    let Error::RateLimited { message, .. } = err else { panic!("rate limited, got {err:?}") };
    assert!(message.starts_with("Request too large"), "{message}");
}

// Streams written from the SDK's event types, for what the recordings do not show.

#[test]
fn reasoning_summaries_refusals_and_cached_usage() {
    let bytes = sse(&[
        r#"{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","model":"o4-mini","output":[]}}"#,
        r#"{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[]}}"#,
        r#"{"type":"response.reasoning_summary_part.added","sequence_number":2,"item_id":"rs_1","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":""}}"#,
        r#"{"type":"response.reasoning_summary_text.delta","sequence_number":3,"item_id":"rs_1","output_index":0,"summary_index":0,"delta":"**Plan**"}"#,
        r#"{"type":"response.reasoning_summary_text.delta","sequence_number":4,"item_id":"rs_1","output_index":0,"summary_index":1,"delta":"Then \"answer\"."}"#,
        r#"{"type":"response.reasoning_summary_text.done","sequence_number":5,"item_id":"rs_1","output_index":0,"summary_index":1,"text":"Then \"answer\"."}"#,
        r#"{"type":"response.output_item.added","sequence_number":6,"output_index":1,"item":{"id":"msg_1","type":"message","status":"in_progress","content":[],"role":"assistant"}}"#,
        r#"{"type":"response.output_text.delta","sequence_number":7,"item_id":"msg_1","output_index":1,"content_index":0,"delta":"Part","logprobs":[]}"#,
        r#"{"type":"response.refusal.delta","sequence_number":8,"item_id":"msg_1","output_index":1,"content_index":1,"delta":"I can't help with that."}"#,
        r#"{"type":"response.refusal.done","sequence_number":9,"item_id":"msg_1","output_index":1,"content_index":1,"refusal":"I can't help with that."}"#,
        r#"{"type":"response.completed","sequence_number":10,"response":{"id":"resp_1","status":"completed","usage":{"input_tokens":1000,"input_tokens_details":{"cached_tokens":800},"output_tokens":20,"output_tokens_details":{"reasoning_tokens":12},"total_tokens":1020}}}"#,
    ]);
    let events = parse(bytes.as_bytes()).expect("parses");
    assert_eq!(
        events,
        [
            StreamEvent::MessageStart { id: Some("resp_1".into()), model: Some("o4-mini".into()) },
            StreamEvent::ReasoningDelta { index: 0, text: "**Plan**".into() },
            StreamEvent::ReasoningDelta { index: 1, text: "Then \"answer\".".into() },
            text(2, "Part"),
            text(3, "I can't help with that."),
            StreamEvent::Usage {
                usage: Usage {
                    input_tokens: 200,
                    output_tokens: 20,
                    cache_read_tokens: 800,
                    reasoning_tokens: 12,
                    ..Default::default()
                }
            },
            stop(StopReason::Refusal),
        ]
    );
}

#[test]
fn incomplete_responses_say_why() {
    let end = |reason: &str| {
        sse(&[&format!(
            r#"{{"type":"response.incomplete","sequence_number":0,"response":{{"id":"r","status":"incomplete","incomplete_details":{{"reason":"{reason}"}},"usage":null}}}}"#
        )])
    };
    assert_eq!(parse(end("max_output_tokens").as_bytes()).expect("parses"), [stop(StopReason::MaxTokens)]);
    assert_eq!(parse(end("content_filter").as_bytes()).expect("parses"), [stop(StopReason::Refusal)]);
    assert_eq!(
        parse(end("something_new").as_bytes()).expect("parses"),
        [stop(StopReason::Other("something_new".into()))]
    );
}

#[test]
fn calls_and_text_without_deltas_are_read_from_their_done_events() {
    // Some compatible servers skip the deltas (or even `output_item.added`) and
    // send only the finished items.
    let bytes = sse(&[
        r#"{"type":"response.output_text.done","sequence_number":0,"item_id":"m","output_index":0,"content_index":0,"text":"Hi"}"#,
        r#"{"type":"response.output_item.done","sequence_number":1,"output_index":1,"item":{"id":"fc","type":"function_call","status":"completed","arguments":"{\"a\":1}","call_id":"call_9","name":"f"}}"#,
        r#"{"type":"response.completed","sequence_number":2,"response":{"id":"r","status":"completed"}}"#,
    ]);
    assert_eq!(
        parse(bytes.as_bytes()).expect("parses"),
        [
            text(0, "Hi"),
            StreamEvent::ToolUseStart { index: 1, id: "call_9".into(), name: "f".into() },
            args(1, "{\"a\":1}"),
            StreamEvent::ToolUseEnd { index: 1 },
            stop(StopReason::ToolUse),
        ]
    );
}

#[test]
fn untyped_frames_unknown_events_and_a_trailing_done_marker() {
    let bytes = concat!(
        "data: {\"type\":\"response.output_text.delta\",\"output_index\":0,\"content_index\":0,\"delta\":\"a\"}\n\n",
        "event: response.web_search_call.searching\ndata: {\"type\":\"response.web_search_call.searching\",\"output_index\":1}\n\n",
        "event: response.some_future_event\ndata: {\"whatever\":[1,2,3]}\n\n",
        "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\"}}\n\n",
        "data: [DONE]\n\n",
    );
    assert_eq!(parse(bytes.as_bytes()).expect("parses"), [text(0, "a"), stop(StopReason::EndTurn)]);
}

#[test]
fn a_lone_error_event_ends_the_stream_with_its_error() {
    let bytes = sse(&[
        r#"{"type":"response.created","sequence_number":0,"response":{"id":"r","model":"m"}}"#,
        r#"{"type":"error","sequence_number":1,"code":"server_is_overloaded","message":"Selected model is at capacity.","param":null}"#,
    ]);
    let err = parse(bytes.as_bytes()).expect_err("overloaded");
    assert!(
        matches!(&err, Error::Overloaded { message, .. } if message == "Selected model is at capacity."),
        "{err:?}"
    );
}
