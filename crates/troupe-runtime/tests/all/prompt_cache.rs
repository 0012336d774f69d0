//! Prompt caching on a 10-turn tool loop, over HTTP on each wire: where the breakpoints are,
//! and that each request's cacheable prefix — tools, instructions, then the conversation, as
//! the mock server received them, byte for byte — is a prefix of the next request's.

use crate::common;

use common::{Harness, Wire};
use serde_json::value::RawValue;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// The marker Anthropic reads as a breakpoint: not content, and it moves from the last block
/// of one request to the last block of the next, so it is taken out before comparing.
const MARKER: &str = r#","cache_control":{"type":"ephemeral"}"#;

/// Runs 9 tool calls then an answer; the raw bodies of the 10 requests.
async fn ten_turns(wire: Wire) -> (Harness, Vec<bytes::Bytes>) {
    let h = Harness::new(wire).await;
    for i in 0..9 {
        h.write(&format!("f{i}.txt"), &format!("line {i}\n"));
    }
    let mut turns: Vec<_> =
        (0..9).map(|i| h.call(&format!("c{i}"), "fs.read", json!({"path": format!("f{i}.txt")}))).collect();
    turns.push(troupe_testkit::MockTurn::text("Read all nine."));
    h.push(turns);
    let agent = h
        .engine()
        .agent("reader")
        .instructions("Read every file, one at a time.")
        .workspace(h.dir.path())
        .readonly_tools()
        .build()
        .expect("agent builds");
    let output = agent.run("Read the files").await.expect("the run").into_result().expect("completed");
    assert_eq!(output.tool_calls, 9);
    let raw = h.raw_bodies();
    assert_eq!(raw.len(), 10);
    (h, raw)
}

/// The cacheable parts of a body in the order the vendor reads its prompt: the tools, the
/// instructions, then each message (or input item, or content), each as the exact bytes sent.
fn prefix(wire: Wire, body: &[u8]) -> Vec<String> {
    let top: BTreeMap<String, Box<RawValue>> = serde_json::from_slice(body).expect("a JSON object");
    let (system, items) = match wire {
        Wire::Anthropic => ("system", "messages"),
        Wire::OpenAiChat => ("", "messages"),
        Wire::OpenAiResponses => ("instructions", "input"),
        _ => ("systemInstruction", "contents"),
    };
    let mut parts = Vec::new();
    for key in ["tools", system] {
        if let Some(raw) = top.get(key) {
            parts.push(raw.get().to_owned());
        }
    }
    let items: Vec<Box<RawValue>> = serde_json::from_str(top[items].get()).expect("an array");
    parts.extend(items.iter().map(|item| item.get().to_owned()));
    parts.into_iter().map(|p| p.replace(MARKER, "")).collect()
}

async fn each_turns_prefix_is_a_prefix_of_the_next(wire: Wire) {
    let (_h, raw) = ten_turns(wire).await;
    let prefixes: Vec<String> = raw.iter().map(|body| prefix(wire, body).concat()).collect();
    for (n, pair) in prefixes.windows(2).enumerate() {
        assert!(
            pair[1].starts_with(&pair[0]),
            "{wire:?}: turn {}'s prefix is not a prefix of turn {}'s:\n{}\n---\n{}",
            n + 1,
            n + 2,
            pair[0],
            pair[1]
        );
        assert!(pair[1].len() > pair[0].len());
    }
    // How much of each request the previous request's cache covers, by bytes of prompt.
    let total: usize = prefixes.iter().map(String::len).sum();
    let readable: usize = prefixes.iter().take(prefixes.len() - 1).map(String::len).sum();
    println!(
        "{wire:?}: {readable} of {total} prompt bytes over 10 turns ({:.1}%) are the previous turn's prefix, readable from the cache",
        100.0 * readable as f64 / total as f64
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_each_turns_prefix_is_a_prefix_of_the_next() {
    each_turns_prefix_is_a_prefix_of_the_next(Wire::Anthropic).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_chat_each_turns_prefix_is_a_prefix_of_the_next() {
    each_turns_prefix_is_a_prefix_of_the_next(Wire::OpenAiChat).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_responses_each_turns_prefix_is_a_prefix_of_the_next() {
    each_turns_prefix_is_a_prefix_of_the_next(Wire::OpenAiResponses).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_each_turns_prefix_is_a_prefix_of_the_next() {
    each_turns_prefix_is_a_prefix_of_the_next(Wire::Gemini).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_marks_the_tools_the_instructions_and_the_last_block() {
    let (_h, raw) = ten_turns(Wire::Anthropic).await;
    for body in &raw {
        let text = std::str::from_utf8(body).expect("UTF-8");
        assert_eq!(text.matches("cache_control").count(), 3, "three of the four breakpoints allowed: {text}");
    }
    let last: Value = serde_json::from_slice(&raw[9]).expect("JSON");
    let marked = json!({"type": "ephemeral"});
    assert_eq!(
        last["system"],
        json!([{"type": "text", "text": "Read every file, one at a time.", "cache_control": marked}])
    );
    let tools = last["tools"].as_array().expect("tools");
    assert_eq!(tools.last().expect("a tool")["cache_control"], marked);
    assert!(tools[..tools.len() - 1].iter().all(|t| t.get("cache_control").is_none()));
    let messages = last["messages"].as_array().expect("messages");
    assert_eq!(messages.len(), 19, "the task, then 9 calls and their results");
    let final_block = messages[18]["content"].as_array().and_then(|c| c.last()).expect("a block");
    assert_eq!((final_block["type"].as_str(), &final_block["cache_control"]), (Some("tool_result"), &marked));
    assert!(messages[..18].iter().all(|m| !m.to_string().contains("cache_control")), "one moving breakpoint");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_sends_one_prompt_cache_key_for_the_whole_loop() {
    for wire in [Wire::OpenAiChat, Wire::OpenAiResponses] {
        let (_h, raw) = ten_turns(wire).await;
        let keys: Vec<Value> =
            raw.iter().map(|b| serde_json::from_slice::<Value>(b).expect("JSON")["prompt_cache_key"].clone()).collect();
        let first = keys[0].as_str().expect("a key");
        assert!(first.starts_with("troupe-"), "{first}");
        assert!(keys.iter().all(|k| k == &keys[0]), "{wire:?}: {keys:?}");
        assert!(raw.iter().all(|b| !std::str::from_utf8(b).expect("UTF-8").contains("prompt_cache_retention")));
    }
    // Gemini caches implicitly: nothing to send.
    let (_h, raw) = ten_turns(Wire::Gemini).await;
    assert!(raw.iter().all(|b| !std::str::from_utf8(b).expect("UTF-8").contains("cache")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_long_ttl_and_no_caching_are_the_agents_choice() {
    let h = Harness::new(Wire::Anthropic).await;
    h.push([troupe_testkit::MockTurn::text("a"), troupe_testkit::MockTurn::text("b")]);
    let mut spec = troupe_runtime::AgentSpec::new("a", "mock-model").instructions("Be brief.");
    spec.prompt_cache = Some(troupe_core::CacheTtl::Long);
    let engine = h.engine();
    engine.agent("a").spec(spec.clone()).build().expect("builds").run("hi").await.expect("run");
    spec.prompt_cache = None;
    engine.agent("a").spec(spec).build().expect("builds").run("hi").await.expect("run");
    let raw = h.raw_bodies();
    let long: Value = serde_json::from_slice(&raw[0]).expect("JSON");
    assert_eq!(long["system"][0]["cache_control"], json!({"type": "ephemeral", "ttl": "1h"}));
    let none: Value = serde_json::from_slice(&raw[1]).expect("JSON");
    assert_eq!(none["system"], json!("Be brief."));
    assert!(!none.to_string().contains("cache_control"));
}

/// Cache reads and writes are priced at their own prices, and the run says what the cache
/// saved: the usage comes back from the vendor (Anthropic's `cache_read_input_tokens`,
/// `cache_creation_input_tokens`) over HTTP.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_reads_and_writes_are_priced_and_the_saving_is_told() {
    use troupe_core::Usage;
    let h = Harness::new(Wire::Anthropic).await;
    let first = Usage { input_tokens: 100, cache_write_tokens: 10_000, output_tokens: 50, ..Usage::default() };
    let second = Usage {
        input_tokens: 200,
        cache_read_tokens: 10_000,
        cache_write_tokens: 300,
        output_tokens: 20,
        ..Usage::default()
    };
    h.write("a.txt", "a\n");
    h.push([
        h.call("c1", "fs.read", json!({"path": "a.txt"})).with_usage(first),
        troupe_testkit::MockTurn::text("Done.").with_usage(second),
    ]);
    let pricing = troupe_model::Pricing { input: 3.0, output: 15.0, cache_read: 0.30, cache_write: 3.75 };
    let agent = h.priced_engine(pricing).agent("a").workspace(h.dir.path()).readonly_tools().build().expect("builds");
    let output = agent.run("Read a").await.expect("run").into_result().expect("completed");
    assert_eq!(output.usage.cache_read_tokens, 10_000);
    assert_eq!(output.usage.cache_write_tokens, 10_300);
    let cost = (300.0 * 3.0 + 70.0 * 15.0 + 10_000.0 * 0.30 + 10_300.0 * 3.75) / 1e6;
    assert!((output.cost_usd - cost).abs() < 1e-9, "{} vs {cost}", output.cost_usd);
    // Reads saved 10,000 × $2.70; writes cost 10,300 × $0.75 more than input.
    let saved = (10_000.0 * 2.70 - 10_300.0 * 0.75) / 1e6;
    assert!((output.cache_saved_usd() - saved).abs() < 1e-9, "{} vs {saved}", output.cache_saved_usd());
}

/// Writes with the 1-hour TTL are priced at twice the input price, as Anthropic bills them:
/// the response's `cache_creation.ephemeral_1h_input_tokens`, read over HTTP, splits them
/// from the 5-minute writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_ttl_writes_are_priced_at_their_own_rate() {
    use troupe_core::Usage;
    let h = Harness::new(Wire::Anthropic).await;
    let usage =
        Usage { input_tokens: 100, cache_write_tokens: 10_000, cache_write_long_tokens: 8_000, ..Usage::default() };
    h.push([troupe_testkit::MockTurn::text("Done.").with_usage(usage)]);
    let pricing = troupe_model::Pricing { input: 3.0, output: 15.0, cache_read: 0.30, cache_write: 3.75 };
    let mut spec = troupe_runtime::AgentSpec::new("a", "mock-model");
    spec.prompt_cache = Some(troupe_core::CacheTtl::Long);
    let agent = h.priced_engine(pricing).agent("a").spec(spec).build().expect("builds");
    let output = agent.run("hi").await.expect("run").into_result().expect("completed");
    assert_eq!((output.usage.cache_write_tokens, output.usage.cache_write_long_tokens), (10_000, 8_000));
    // 100 × $3 + 2,000 five-minute writes × $3.75 + 8,000 one-hour writes × $6, a million.
    let cost = (100.0 * 3.0 + 2_000.0 * 3.75 + 8_000.0 * 6.0) / 1e6;
    assert!((output.cost_usd - cost).abs() < 1e-9, "{} vs {cost}", output.cost_usd);
    let saved = -(2_000.0 * 0.75 + 8_000.0 * 3.0) / 1e6;
    assert!((output.cache_saved_usd() - saved).abs() < 1e-9, "{} vs {saved}", output.cache_saved_usd());
}
