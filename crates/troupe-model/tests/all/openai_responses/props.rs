//! Property tests against the testkit encoder, and bad input.

use super::*;

const SHAPE: TurnShape = TurnShape { reasoning: true, many_text_blocks: false };

fn encoded_turn_and_splits() -> impl Strategy<Value = (MockTurn, Vec<u8>, Vec<usize>)> {
    turn(SHAPE).prop_flat_map(|turn| {
        let bytes = OpenAiResponsesEncoder.encode(&turn).concat().into_bytes();
        let len = bytes.len();
        (Just(turn), Just(bytes), split_points(len))
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn encoded_turns_parse_the_same_however_split((turn, bytes, points) in encoded_turn_and_splits()) {
        let whole = parse(&bytes).expect("parses whole");
        let split = parse_chunks(&split_at_points(&bytes, &points)).expect("parses split");
        prop_assert_eq!(&whole, &split);
        let response = accumulate(&whole);
        prop_assert_eq!(response.message, turn.expected_message());
        prop_assert_eq!(response.stop_reason, turn.stop.clone());
        prop_assert_eq!(response.usage, turn.usage);
        prop_assert_eq!(response.model.as_deref(), Some(turn.model.as_str()));
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = parse(&bytes);
    }

    #[test]
    fn random_data_in_known_events_never_panics(
        kind in prop::sample::select(vec![
            "response.created", "response.output_item.added", "response.output_item.done",
            "response.output_text.delta", "response.function_call_arguments.delta", "response.completed",
            "response.failed", "error",
        ]),
        data in "[{}\\[\\]\":,a-z0-9_ ]{0,80}",
    ) {
        let bytes = format!(
            "event: response.output_item.added\ndata: {{\"output_index\":0,\"item\":{{\"type\":\"function_call\",\"call_id\":\"c\",\"name\":\"f\"}}}}\n\nevent: {kind}\ndata: {data}\n\n"
        );
        let _ = parse(bytes.as_bytes());
    }
}

// Bad input.

fn assert_decode(result: troupe_model::Result<Vec<StreamEvent>>) {
    match result {
        Err(Error::Decode { provider, .. }) => assert_eq!(provider, "openai"),
        other => panic!("expected a decode error, got {other:?}"),
    }
}

#[test]
fn a_stream_cut_before_its_end_marker_is_truncated() {
    let events = OpenAiResponsesEncoder.encode(&MockTurn::text("Hello there").with_tool_call("c", "f", json!({})));
    for cut in 0..events.len() {
        match parse(events[..cut].concat().as_bytes()) {
            Err(error @ Error::Truncated { .. }) => assert!(error.is_retryable()),
            other => panic!("cut after {cut} events: expected a truncation, got {other:?}"),
        }
    }
    assert!(parse(events.concat().as_bytes()).is_ok());
}

#[test]
fn invalid_json_and_wrong_shapes_are_decode_errors() {
    assert_decode(parse(b"event: response.output_text.delta\ndata: {\"this is\": not json\n\n"));
    assert_decode(parse(b"data: not json at all\n\n"));
    assert_decode(parse(
        b"event: response.output_text.delta\ndata: {\"output_index\":\"zero\",\"content_index\":0,\"delta\":5}\n\n",
    ));
    assert_decode(parse(
        b"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":\"done\"}\n\n",
    ));
    assert_decode(parse(b"event: response.completed\ndata: {\"type\":\"response.completed\"}\n\n"));
    assert_decode(parse(
        b"event: response.function_call_arguments.delta\ndata: {\"output_index\":3,\"item_id\":\"fc\",\"delta\":\"{}\"}\n\n",
    ));
    assert_decode(parse(
        b"event: response.output_item.added\ndata: {\"output_index\":0,\"item\":{\"type\":\"function_call\",\"id\":\"fc\"}}\n\n",
    ));
}
