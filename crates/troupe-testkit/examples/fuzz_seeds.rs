//! Writes seed inputs for the parser fuzz targets: each vendor's real wire format for a
//! handful of scripted turns, so the fuzzer starts from valid streams and mutates them.
//!
//! Usage: `cargo run -p troupe-testkit --example fuzz_seeds -- DIR` writes
//! `DIR/<target>/seed_<n>.sse` for every target of `fuzz/`.

use std::path::PathBuf;
use troupe_core::StopReason;
use troupe_testkit::MockTurn;
use troupe_testkit::encode::{Vendor, encode_bytes};

fn turns() -> Vec<MockTurn> {
    vec![
        MockTurn::text("Hello, \"world\" — ünïcödé\n"),
        MockTurn::tool_call("call_1", "fs_read", serde_json::json!({"path": "README.md", "line": 3})),
        MockTurn::default()
            .with_reasoning("Let me think.")
            .with_text("Two calls:")
            .with_tool_call("a", "weather", serde_json::json!({"city": "Paris"}))
            .with_tool_call("b", "time", serde_json::json!({"tz": "CET"}))
            .with_delta_chars(3),
        MockTurn::text("cut short").with_stop(StopReason::MaxTokens),
    ]
}

fn main() -> std::io::Result<()> {
    let dir = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| "fuzz/corpus".into()));
    let targets = [
        ("anthropic", Vendor::Anthropic),
        ("openai_chat", Vendor::OpenAiChat),
        ("openai_responses", Vendor::OpenAiResponses),
        ("gemini", Vendor::Gemini),
    ];
    for (target, vendor) in targets {
        let target_dir = dir.join(target);
        std::fs::create_dir_all(&target_dir)?;
        for (n, turn) in turns().iter().enumerate() {
            std::fs::write(target_dir.join(format!("seed_{n}.sse")), encode_bytes(vendor, turn))?;
        }
    }
    let sse_dir = dir.join("sse");
    std::fs::create_dir_all(&sse_dir)?;
    std::fs::write(sse_dir.join("seed_0.sse"), encode_bytes(Vendor::Anthropic, &turns()[2]))?;
    println!("seeds written under {}", dir.display());
    Ok(())
}
