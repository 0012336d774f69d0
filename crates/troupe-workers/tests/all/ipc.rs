//! The frame codec: every frame type round-trips, any cutting of the byte stream gives the
//! same frames, and a bad stream (an oversized header, a truncated frame, bad JSON, an
//! unknown type) is a typed error, found without buffering what the header announced.

use bytes::{BufMut, Bytes, BytesMut};
use futures::{SinkExt, StreamExt};
use proptest::prelude::*;
use serde_json::json;
use tokio_util::codec::{Decoder, Encoder, FramedRead, FramedWrite};
use troupe_core::{AgentEvent, AgentEventKind, AgentId, Attribution, RunId, RunOutcomeKind, Usage};
use troupe_workers::ipc::store::{StoreAnswer, StoreCall, StoreOp, StoreReply, WireStoreError};
use troupe_workers::ipc::{
    AgentResult, AgentTask, ArtifactRef, CHUNK_LEN, Frame, FrameCodec, FrameType, HEADER_LEN, HostedModel, IpcError,
    MAX_FRAME_LEN, ModelAnswer, ModelCall, ModelCancel, ModelReply, PayloadEnd, PayloadReceiver, PayloadRef,
    PayloadSource, PayloadStart, ResultMetrics, TaskInput, TaskOutputs, ToolPolicy, WireModelError, send_payload,
};

fn event(seq: u64, kind: AgentEventKind) -> AgentEvent {
    AgentEvent::new(
        Attribution {
            agent_id: AgentId::new("coder"),
            run_id: RunId::new("run_1"),
            conversation_id: None,
            parent_run_id: None,
            seq,
            timestamp_ms: 1_700_000_000_000 + seq,
        },
        kind,
    )
}

/// One frame of every type, with every optional field of the JSON ones set.
fn every_frame() -> Vec<Frame> {
    let task = AgentTask {
        task_id: "t-1".into(),
        from: "lead".into(),
        to: "coder".into(),
        prompt: "Fix the build".into(),
        context: Some("The CI log says…".into()),
        input: TaskInput {
            data: Some(json!({"ticket": 42})),
            payloads: vec![PayloadRef { stream_id: 1, name: "log.txt".into(), total_len: Some(3) }],
        },
        deadline_ms: Some(1_800_000_000_000),
        parent_run_id: Some(RunId::new("run_0")),
        spec: Some(json!({"name": "coder", "model": "demo"})),
        tools: ToolPolicy::only(["fs.read", "shell"]).deny("shell"),
        outputs: TaskOutputs { files: vec!["out/report.md".into()], echo_payloads: true },
        heartbeat_ms: 250,
        missed_heartbeats: 4,
        approvals: Some(troupe_workers::build::Approvals::Auto),
        sandbox: Some(troupe_sandbox::SandboxSettings::of_mode(troupe_sandbox::SandboxMode::ReadOnly)),
        record_run: Some(RunId::new("run_member")),
        await_decisions: true,
        output: Some(troupe_team::report_spec()),
        skip_checksums: true,
        hosted_models: vec![HostedModel {
            name: "sonnet".into(),
            id: "anthropic/claude-sonnet-4-5".into(),
            model: "claude-sonnet-4-5".into(),
            info: troupe_model::ModelRegistry::builtin().get("anthropic/claude-sonnet-4-5").cloned(),
        }],
    };
    let result = AgentResult {
        task_id: "t-1".into(),
        status: RunOutcomeKind::Completed,
        output: "Done ✓".into(),
        data: Some(json!({"inputs": []})),
        error: None,
        metrics: ResultMetrics {
            usage: Usage { input_tokens: 10, output_tokens: 5, ..Usage::default() },
            cost_usd: 0.25,
            tool_calls: 3,
            duration_ms: 1200,
            peak_rss_kib: Some(12_345),
            sandbox: "landlock: enforced (ABI 6)".into(),
        },
        artifacts: vec![ArtifactRef { stream_id: 1, name: "report.md".into(), len: 9, sha256: Some("ab".repeat(32)) }],
        run_id: Some(RunId::new("run_1")),
    };
    vec![
        Frame::task(task),
        Frame::event(event(0, AgentEventKind::RunStarted { instruction: "Fix".into(), model: "demo".into() })),
        Frame::event(event(
            1,
            AgentEventKind::MessageDelta { message_id: "m".into(), delta: "héllo\n\"quoted\"".into() },
        )),
        Frame::result(result),
        Frame::Heartbeat,
        Frame::Cancel { reason: None },
        Frame::Cancel { reason: Some("the user pressed Ctrl-C".into()) },
        Frame::PayloadStart(PayloadStart {
            stream_id: 7,
            name: "data.bin".into(),
            total_len: Some(1 << 40),
            checksum: true,
        }),
        Frame::PayloadStart(PayloadStart {
            stream_id: 8,
            name: "unknown-length".into(),
            total_len: None,
            checksum: false,
        }),
        Frame::PayloadChunk { stream_id: 7, bytes: Bytes::new() },
        Frame::PayloadChunk { stream_id: 7, bytes: Bytes::from((0..=255u8).cycle().take(70_000).collect::<Vec<_>>()) },
        Frame::PayloadEnd(PayloadEnd { stream_id: 7, sha256: Some("0f".repeat(32)) }),
        Frame::PayloadEnd(PayloadEnd { stream_id: 8, sha256: None }),
        Frame::StoreCall(Box::new(StoreCall { id: 1, op: StoreOp::LoadRun { run_id: "run_1".into() } })),
        Frame::StoreCall(Box::new(StoreCall { id: 2, op: StoreOp::Queue })),
        Frame::StoreReply(Box::new(StoreReply { id: 1, answer: StoreAnswer::Ok(serde_json::Value::Null) })),
        Frame::StoreReply(Box::new(StoreReply {
            id: 2,
            answer: StoreAnswer::Err(WireStoreError::Other { message: "refused".into() }),
        })),
        Frame::ModelCall(Box::new(ModelCall {
            id: 1,
            model: "sonnet".into(),
            request: troupe_core::ModelRequest::new("claude-sonnet-4-5"),
        })),
        Frame::ModelReply(Box::new(ModelReply { id: 1, answer: ModelAnswer::Accepted })),
        Frame::ModelReply(Box::new(ModelReply {
            id: 1,
            answer: ModelAnswer::Event(troupe_core::StreamEvent::TextDelta { index: 0, text: "ça".into() }),
        })),
        Frame::ModelReply(Box::new(ModelReply { id: 1, answer: ModelAnswer::End })),
        Frame::ModelReply(Box::new(ModelReply {
            id: 2,
            answer: ModelAnswer::Failed(WireModelError::refused("the team's budget is spent")),
        })),
        Frame::ModelCancel(ModelCancel { id: 2 }),
    ]
}

fn encode_all(frames: &[Frame]) -> BytesMut {
    let mut codec = FrameCodec::new();
    let mut bytes = BytesMut::new();
    for frame in frames {
        codec.encode(frame.clone(), &mut bytes).expect("every frame encodes");
    }
    bytes
}

/// Decodes `bytes` fed to the decoder in the pieces that end at `cuts`.
fn decode_in_pieces(bytes: &[u8], cuts: &[usize]) -> Result<Vec<Frame>, IpcError> {
    let mut codec = FrameCodec::new();
    let mut buffer = BytesMut::new();
    let mut frames = Vec::new();
    let mut start = 0;
    for &end in cuts.iter().chain(std::iter::once(&bytes.len())) {
        let end = end.clamp(start, bytes.len());
        buffer.extend_from_slice(&bytes[start..end]);
        start = end;
        while let Some(frame) = codec.decode(&mut buffer)? {
            frames.push(frame);
        }
    }
    while let Some(frame) = codec.decode_eof(&mut buffer)? {
        frames.push(frame);
    }
    Ok(frames)
}

#[test]
fn every_frame_type_round_trips() {
    let frames = every_frame();
    let types: std::collections::HashSet<FrameType> = frames.iter().map(Frame::frame_type).collect();
    assert_eq!(types.len(), FrameType::ALL.len(), "the sample covers every type");
    for frame in &frames {
        let bytes = encode_all(std::slice::from_ref(frame));
        let len = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
        assert_eq!(len + HEADER_LEN, bytes.len(), "the length counts the payload only");
        assert_eq!(bytes[4], frame.frame_type().code());
        assert_eq!(decode_in_pieces(&bytes, &[]).expect("decodes"), vec![frame.clone()]);
    }
    assert_eq!(decode_in_pieces(&encode_all(&frames), &[]).expect("decodes"), frames);
    for code in 0..=255u8 {
        if let Some(kind) = FrameType::from_code(code) {
            assert_eq!(kind.code(), code);
        }
    }
}

#[test]
fn chunk_frames_carry_raw_bytes_after_a_stream_id() {
    let bytes =
        encode_all(&[Frame::PayloadChunk { stream_id: 0x0102_0304, bytes: Bytes::from_static(b"\x00raw\xff") }]);
    assert_eq!(&bytes[..], b"\x00\x00\x00\x09\x11\x01\x02\x03\x04\x00raw\xff");
    let heartbeat = encode_all(&[Frame::Heartbeat]);
    assert_eq!(&heartbeat[..], b"\x00\x00\x00\x00\x04");
}

#[test]
fn every_single_split_point_gives_the_same_frames() {
    let frames = every_frame();
    let bytes = encode_all(&frames);
    // Every cut in the small frames, and a stride through the 70 kB chunk.
    let points: Vec<usize> = (0..=bytes.len()).filter(|i| *i < 4000 || *i > bytes.len() - 400 || i % 97 == 0).collect();
    for cut in points {
        assert_eq!(decode_in_pieces(&bytes, &[cut]).expect("decodes"), frames, "cut at {cut}");
    }
    let bytewise: Vec<usize> = (0..bytes.len()).collect();
    assert_eq!(decode_in_pieces(&bytes, &bytewise).expect("decodes byte by byte"), frames);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn any_chunking_gives_the_same_frames(mut cuts in proptest::collection::vec(0usize..80_000, 0..40)) {
        let frames = every_frame();
        let bytes = encode_all(&frames);
        cuts.sort_unstable();
        prop_assert_eq!(decode_in_pieces(&bytes, &cuts).expect("decodes"), frames);
    }
}

#[test]
fn an_oversized_header_is_refused_at_once_without_allocating() {
    let mut codec = FrameCodec::new();
    let mut buffer = BytesMut::with_capacity(64);
    buffer.put_slice(&[0xff, 0xff, 0xff, 0xff, 0x02]);
    let capacity = buffer.capacity();
    match codec.decode(&mut buffer) {
        Err(IpcError::FrameTooLarge { len, max }) => {
            assert_eq!((len, max), (u64::from(u32::MAX), MAX_FRAME_LEN));
        }
        other => panic!("expected FrameTooLarge, got {other:?}"),
    }
    assert_eq!(buffer.capacity(), capacity, "nothing was reserved for the announced bytes");

    let mut small = FrameCodec::with_max_frame_len(1024);
    let mut at_max = BytesMut::new();
    at_max.put_u32(1024);
    at_max.put_u8(FrameType::PayloadChunk.code());
    assert!(small.decode(&mut at_max).expect("a header at the maximum is fine").is_none(), "it waits for the payload");
    let mut over = BytesMut::from(&[0, 0, 4, 1, FrameType::Event.code()][..]);
    assert!(matches!(small.decode(&mut over), Err(IpcError::FrameTooLarge { len: 1025, max: 1024 })));
    let message = IpcError::FrameTooLarge { len: 1025, max: 1024 }.to_string();
    assert_eq!(message, "a frame header announces 1025 bytes, more than the 1024-byte maximum");
}

#[test]
fn the_encoder_refuses_a_frame_over_the_maximum_and_writes_nothing() {
    let mut codec = FrameCodec::with_max_frame_len(16);
    let mut dst = BytesMut::from(&b"kept"[..]);
    let frame = Frame::event(event(0, AgentEventKind::MessageDelta { message_id: "m".into(), delta: "x".repeat(100) }));
    assert!(matches!(codec.encode(frame, &mut dst), Err(IpcError::FrameTooLarge { max: 16, .. })));
    assert_eq!(&dst[..], b"kept");
    let chunk = Frame::PayloadChunk { stream_id: 1, bytes: Bytes::from(vec![0u8; CHUNK_LEN]) };
    let mut default = FrameCodec::new();
    default.encode(chunk, &mut dst).expect("a 1 MiB chunk is well under 16 MiB");
}

#[test]
fn a_stream_ending_inside_a_frame_is_truncated() {
    let bytes = encode_all(&[Frame::Cancel { reason: Some("stop now".into()) }]);
    for cut in 1..bytes.len() {
        match decode_in_pieces(&bytes[..cut], &[]) {
            Err(IpcError::Truncated { expected, got }) => {
                assert_eq!(got, cut);
                assert_eq!(expected, if cut < HEADER_LEN { HEADER_LEN } else { bytes.len() });
            }
            other => panic!("cut at {cut}: expected Truncated, got {other:?}"),
        }
    }
    assert_eq!(decode_in_pieces(&[], &[]).expect("an empty stream is no frames"), Vec::<Frame>::new());
}

#[tokio::test]
async fn framed_read_reports_truncation_at_the_end_of_a_real_stream() {
    let mut bytes = encode_all(&[Frame::Heartbeat]).to_vec();
    bytes.extend_from_slice(&[0, 0, 0, 20, FrameType::Result.code(), b'{']);
    let mut frames = FramedRead::new(&bytes[..], FrameCodec::new());
    assert_eq!(frames.next().await.map(|r| r.expect("a heartbeat")), Some(Frame::Heartbeat));
    let error = frames.next().await.expect("an error item").expect_err("truncated");
    assert!(matches!(error, IpcError::Truncated { expected: 25, got: 6 }), "{error}");
}

fn raw_frame(code: u8, payload: &[u8]) -> BytesMut {
    let mut bytes = BytesMut::new();
    bytes.put_u32(payload.len() as u32);
    bytes.put_u8(code);
    bytes.put_slice(payload);
    bytes
}

#[test]
fn bad_json_is_malformed_with_a_short_excerpt() {
    let mut codec = FrameCodec::new();
    let mut bad = raw_frame(FrameType::Event.code(), b"{\"type\": \"run_started\", oops");
    match codec.decode(&mut bad) {
        Err(IpcError::Malformed { frame, reason, excerpt }) => {
            assert_eq!(frame, "event");
            assert!(reason.contains("line 1"), "{reason}");
            assert_eq!(excerpt, "{\"type\": \"run_started\", oops");
        }
        other => panic!("expected Malformed, got {other:?}"),
    }
    let huge = format!("[{}", "1,".repeat(500_000));
    let mut big = raw_frame(FrameType::Result.code(), huge.as_bytes());
    let error = codec.decode(&mut big).expect_err("not a result");
    let text = error.to_string();
    assert!(text.len() < 400, "the message quotes only the start: {} bytes", text.len());
    assert!(text.contains("malformed result frame") && text.contains('…'), "{text}");
    // Valid JSON of the wrong shape is malformed too.
    let mut wrong = raw_frame(FrameType::Task.code(), b"{\"task_id\": 5}");
    assert!(matches!(codec.decode(&mut wrong), Err(IpcError::Malformed { frame: "task", .. })));
}

#[test]
fn other_bad_payloads_are_malformed_and_unknown_types_refused() {
    let mut codec = FrameCodec::new();
    let cases: [(u8, &[u8], &str); 3] = [
        (FrameType::Heartbeat.code(), b"x", "heartbeat"),
        (FrameType::PayloadChunk.code(), b"\x00\x01", "payload_chunk"),
        (FrameType::Cancel.code(), b"\xff\xfe", "cancel"),
    ];
    for (code, payload, name) in cases {
        let mut bytes = raw_frame(code, payload);
        match codec.decode(&mut bytes) {
            Err(IpcError::Malformed { frame, .. }) => assert_eq!(frame, name),
            other => panic!("{name}: expected Malformed, got {other:?}"),
        }
    }
    // An unknown type is refused from its header alone.
    let mut unknown = BytesMut::from(&[0, 0, 0, 9, 0x7f][..]);
    assert!(matches!(codec.decode(&mut unknown), Err(IpcError::UnknownFrameType { code: 0x7f })));
    // Text where frames belong: "hell" is a length of 1.7 GB.
    let mut garbage = BytesMut::from(&b"hello, world\n"[..]);
    assert!(matches!(codec.decode(&mut garbage), Err(IpcError::FrameTooLarge { len: 0x6865_6c6c, .. })));
}

#[tokio::test]
async fn payloads_stream_through_a_pipe_into_files_with_their_checksums() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let source_path = dir.path().join("source.bin");
    let data: Vec<u8> = (0..(3 * CHUNK_LEN + 12_345)).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(&source_path, &data).expect("writes the source");
    let (writer, reader) = tokio::io::duplex(64 * 1024);
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Frame>(4);
    let send = tokio::spawn(async move {
        let from_file = send_payload(&tx, 1, "from-file.bin", &PayloadSource::File(source_path), true).await?;
        let small = PayloadSource::Bytes(Bytes::from_static(b"hi\n"));
        let from_memory = send_payload(&tx, 2, "small.txt", &small, true).await?;
        let unchecked = send_payload(&tx, 3, "unchecked.txt", &small, false).await?;
        assert_eq!(unchecked.sha256, None);
        Ok::<_, troupe_workers::ipc::PayloadError>((from_file, from_memory))
    });
    let pump = tokio::spawn(async move {
        let mut sink = FramedWrite::new(writer, FrameCodec::new());
        while let Some(frame) = rx.recv().await {
            sink.send(frame).await.expect("writes");
        }
    });
    let out = dir.path().join("received");
    let mut frames = FramedRead::new(reader, FrameCodec::new());
    let mut receivers = std::collections::HashMap::new();
    let mut received = Vec::new();
    while let Some(frame) = frames.next().await {
        match frame.expect("a valid frame") {
            Frame::PayloadStart(start) => {
                receivers.insert(start.stream_id, PayloadReceiver::create(&start, &out).await.expect("creates"));
            }
            Frame::PayloadChunk { stream_id, bytes } => {
                assert!(bytes.len() <= CHUNK_LEN);
                receivers.get_mut(&stream_id).expect("started").write(bytes).await.expect("writes");
            }
            Frame::PayloadEnd(end) => {
                let receiver = receivers.remove(&end.stream_id).expect("started");
                received.push(receiver.finish(&end).await.expect("the checksum matches"));
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    pump.await.expect("the pump ends");
    let (from_file, from_memory) = send.await.expect("joins").expect("sends");
    assert_eq!(received.len(), 3);
    assert_eq!(received[0].sha256, from_file.sha256);
    assert_eq!(received[1].sha256, from_memory.sha256);
    assert!(from_file.sha256.is_some() && received[2].sha256.is_none());
    assert_eq!(std::fs::read(out.join("unchecked.txt")).expect("reads"), b"hi\n");
    assert_eq!(std::fs::read(out.join("from-file.bin")).expect("reads"), data);
    assert_eq!(std::fs::read(out.join("small.txt")).expect("reads"), b"hi\n");
}

#[tokio::test]
async fn a_payload_that_is_not_what_was_announced_is_refused() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let start = PayloadStart { stream_id: 1, name: "a.bin".into(), total_len: Some(4), checksum: true };
    let mut receiver = PayloadReceiver::create(&start, dir.path()).await.expect("creates");
    receiver.write(Bytes::from_static(b"abcd")).await.expect("writes");
    let wrong = PayloadEnd { stream_id: 1, sha256: Some("00".repeat(32)) };
    let error = receiver.finish(&wrong).await.expect_err("the checksum differs");
    assert!(error.to_string().contains("SHA-256"), "{error}");

    let mut long = PayloadReceiver::create(&start, dir.path()).await.expect("creates");
    let error = long.write(Bytes::from_static(b"abcde")).await.expect_err("one byte too many");
    assert!(error.to_string().contains("announced 4 bytes but 5 arrived"), "{error}");

    let short = PayloadReceiver::create(&start, dir.path()).await.expect("creates");
    let error = short.finish(&PayloadEnd { stream_id: 1, sha256: None }).await.expect_err("too short");
    assert!(error.to_string().contains("announced 4 bytes but 0 arrived"), "{error}");

    let mut unsigned = PayloadReceiver::create(&start, dir.path()).await.expect("creates");
    unsigned.write(Bytes::from_static(b"abcd")).await.expect("writes");
    let error = unsigned.finish(&PayloadEnd { stream_id: 1, sha256: None }).await.expect_err("the checksum is missing");
    assert!(error.to_string().contains("announced a SHA-256 but its end frame carries none"), "{error}");

    for name in ["", ".", "..", "a/b", "../x"] {
        let start = PayloadStart { stream_id: 2, name: name.into(), total_len: None, checksum: false };
        assert!(PayloadReceiver::create(&start, dir.path()).await.is_err(), "{name:?} is refused");
    }
}
