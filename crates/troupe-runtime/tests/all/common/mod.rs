//! Shared fixtures: one harness over the in-process scripted model and over the mock
//! server for each of the four wires, and the checks every run's events must pass.

#![allow(dead_code, unreachable_pub)]

use futures::FutureExt;
use futures::future::BoxFuture;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tempfile::TempDir;
use tokio_util::sync::CancellationToken;
use troupe_core::{
    AgentEvent, AgentEventKind, ContentBlock, ModelRequest, PauseReason, RunOutcomeKind, StopReason, StreamEvent,
    ToolCallId,
};
use troupe_model::anthropic::AnthropicWire;
use troupe_model::gemini::GeminiWire;
use troupe_model::openai_chat::OpenAiChatWire;
use troupe_model::openai_responses::OpenAiResponsesWire;
use troupe_model::{ApiKey, EventStream, HttpConfig, HttpProvider, LlmProvider, Pricing, wire_name};
use troupe_runtime::{Engine, FixedModel, RunEvents};
use troupe_testkit::{MockLlmServer, MockTurn, ScriptedModel};

/// Generates one test per wire for each scenario `async fn scenario(wire: Wire)`.
#[macro_export]
macro_rules! per_wire {
    ($($scenario:ident),* $(,)?) => {
        $crate::per_wire!(@wire scripted, Wire::Scripted, $($scenario),*);
        $crate::per_wire!(@wire anthropic, Wire::Anthropic, $($scenario),*);
        $crate::per_wire!(@wire openai_chat, Wire::OpenAiChat, $($scenario),*);
        $crate::per_wire!(@wire openai_responses, Wire::OpenAiResponses, $($scenario),*);
        $crate::per_wire!(@wire gemini, Wire::Gemini, $($scenario),*);
    };
    (@wire $module:ident, $wire:expr, $($scenario:ident),*) => {
        mod $module {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    super::$scenario($wire).await
                }
            )*
        }
    };
}

/// Where the model's replies come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wire {
    /// The in-process [`ScriptedModel`].
    Scripted,
    /// Anthropic Messages over HTTP.
    Anthropic,
    /// OpenAI Chat Completions over HTTP.
    OpenAiChat,
    /// OpenAI Responses over HTTP.
    OpenAiResponses,
    /// Gemini over HTTP.
    Gemini,
}

enum Source {
    Scripted(ScriptedModel),
    Http(MockLlmServer, Arc<dyn LlmProvider>),
}

/// A model source and a temporary workspace.
pub struct Harness {
    pub wire: Wire,
    pub dir: TempDir,
    source: Source,
}

impl Harness {
    pub async fn new(wire: Wire) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let source = match wire {
            Wire::Scripted => Source::Scripted(ScriptedModel::new([])),
            _ => {
                let server = MockLlmServer::start().await.expect("mock server starts");
                let key = Some(ApiKey::new("test-key"));
                let provider: Arc<dyn LlmProvider> = match wire {
                    Wire::Anthropic => Arc::new(
                        HttpProvider::new(HttpConfig::new("anthropic", server.url(), key), AnthropicWire::default())
                            .expect("client"),
                    ),
                    Wire::OpenAiChat => Arc::new(
                        HttpProvider::new(
                            HttpConfig::new("openai", server.openai_url(), key),
                            OpenAiChatWire::default(),
                        )
                        .expect("client"),
                    ),
                    Wire::OpenAiResponses => Arc::new(
                        HttpProvider::new(
                            HttpConfig::new("openai-responses", server.openai_url(), key),
                            OpenAiResponsesWire::default(),
                        )
                        .expect("client"),
                    ),
                    _ => Arc::new(
                        HttpProvider::new(HttpConfig::new("gemini", server.url(), key), GeminiWire::default())
                            .expect("client"),
                    ),
                };
                Source::Http(server, provider)
            }
        };
        Harness { wire, dir, source }
    }

    /// Queues replies, in order.
    pub fn push(&self, turns: impl IntoIterator<Item = MockTurn>) {
        for turn in turns {
            match &self.source {
                Source::Scripted(model) => model.push(turn),
                Source::Http(server, _) => {
                    server.push(turn);
                }
            }
        }
    }

    /// The name a model uses on this wire for catalog tool `name`.
    pub fn name(&self, name: &str) -> String {
        match self.wire {
            Wire::Scripted => name.to_owned(),
            _ => wire_name(name).into_owned(),
        }
    }

    /// A reply calling `tool` (a catalog name) with `args`.
    pub fn call(&self, id: &str, tool: &str, args: Value) -> MockTurn {
        MockTurn::tool_call(id, self.name(tool), args)
    }

    pub fn provider(&self) -> Arc<dyn LlmProvider> {
        match &self.source {
            Source::Scripted(model) => Arc::new(model.clone()),
            Source::Http(_, provider) => Arc::clone(provider),
        }
    }

    pub fn model(&self) -> FixedModel {
        FixedModel::new(self.provider(), "mock-model")
    }

    pub fn engine(&self) -> Engine {
        Engine::builder().resolver(Arc::new(self.model())).build()
    }

    /// An engine over this model recording its runs in a SQLite store of its own; the store,
    /// and the directory its file is in (kept as long as the store is used).
    pub async fn recorded_engine(&self) -> (Engine, Arc<dyn troupe_store::Store>, TempDir) {
        let dir = tempfile::tempdir().expect("a directory");
        let file = dir.path().join("troupe.db");
        let store = troupe_store::open(file.to_str().expect("UTF-8")).await.expect("the store opens");
        let durability = troupe_runtime::durable::Durability::new(Arc::clone(&store));
        let engine = Engine::builder().resolver(Arc::new(self.model())).store(durability).build();
        (engine, store, dir)
    }

    pub fn priced_engine(&self, pricing: Pricing) -> Engine {
        Engine::builder().resolver(Arc::new(self.model().with_pricing(pricing))).build()
    }

    /// Every request the model received, as JSON text.
    pub fn bodies(&self) -> Vec<String> {
        match &self.source {
            Source::Scripted(model) => {
                model.requests().iter().map(|r| serde_json::to_string(r).expect("serializes")).collect()
            }
            Source::Http(server, _) => server.requests().iter().map(|r| r.body.to_string()).collect(),
        }
    }

    /// Every request the model received over HTTP, byte for byte (none for the scripted one).
    pub fn raw_bodies(&self) -> Vec<bytes::Bytes> {
        match &self.source {
            Source::Scripted(_) => Vec::new(),
            Source::Http(server, _) => server.requests().into_iter().map(|r| r.raw).collect(),
        }
    }

    pub fn write(&self, path: &str, content: &str) {
        std::fs::write(self.dir.path().join(path), content).expect("write fixture");
    }

    pub fn read(&self, path: &str) -> Option<String> {
        std::fs::read_to_string(self.dir.path().join(path)).ok()
    }
}

/// The event's `type` tag.
pub fn kind_name(event: &AgentEvent) -> String {
    serde_json::to_value(&event.kind).ok().and_then(|v| v["type"].as_str().map(str::to_owned)).unwrap_or_default()
}

/// The invariants of every run's events: numbered from 0 without gaps, `RunStarted` first,
/// one terminal event last, every announced tool call answered exactly once, after it
/// began, and every message started is ended.
pub fn check_events(events: &[AgentEvent]) {
    assert!(!events.is_empty(), "a run emits events");
    for (i, event) in events.iter().enumerate() {
        assert_eq!(event.attribution.seq, i as u64, "gap-free sequence");
    }
    assert!(matches!(events[0].kind, AgentEventKind::RunStarted { .. }), "RunStarted first: {:?}", events[0]);
    let last = events.last().expect("non-empty");
    assert!(
        matches!(last.kind, AgentEventKind::RunFinished { .. } | AgentEventKind::RunError { .. }),
        "a terminal event last: {last:?}"
    );
    let terminal = events
        .iter()
        .filter(|e| matches!(e.kind, AgentEventKind::RunFinished { .. } | AgentEventKind::RunError { .. }))
        .count();
    assert_eq!(terminal, 1, "exactly one terminal event");
    let mut starts: HashMap<ToolCallId, usize> = HashMap::new();
    let mut results: HashMap<ToolCallId, usize> = HashMap::new();
    let mut open_messages = Vec::new();
    for event in events {
        match &event.kind {
            AgentEventKind::ToolCallStart { call_id, .. } => *starts.entry(call_id.clone()).or_default() += 1,
            AgentEventKind::ToolCallResult { call_id, .. } => {
                assert!(starts.contains_key(call_id), "result of {call_id} before its start");
                *results.entry(call_id.clone()).or_default() += 1;
            }
            AgentEventKind::MessageStart { message_id, .. } => open_messages.push(message_id.clone()),
            AgentEventKind::MessageEnd { message_id } => {
                assert_eq!(open_messages.pop().as_ref(), Some(message_id), "messages end in order")
            }
            _ => {}
        }
    }
    // A paused run leaves the calls it waits for unanswered, for its resume to answer.
    let waiting: Vec<&ToolCallId> = match &last.kind {
        AgentEventKind::RunFinished { outcome: RunOutcomeKind::Paused, .. } => events
            .iter()
            .filter_map(|e| match &e.kind {
                AgentEventKind::RunPaused { reason: PauseReason::Approval { call_id, .. } } => Some(call_id),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    for id in waiting {
        if !results.contains_key(id) {
            starts.remove(id);
        }
    }
    assert_eq!(starts, results, "every tool call start has exactly one result");
    assert!(open_messages.is_empty(), "every message ends: {open_messages:?}");
}

/// Reads live events into `seen` until one matches `pred`; fails after 10 s.
pub async fn until_event(
    events: &mut RunEvents,
    seen: &mut Vec<AgentEvent>,
    pred: impl Fn(&AgentEventKind) -> bool,
) -> AgentEvent {
    let wait = async {
        while let Some(event) = events.next_event().await {
            seen.push(event.clone());
            if pred(&event.kind) {
                return event;
            }
        }
        panic!("the run ended without the awaited event: {:?}", seen.iter().map(kind_name).collect::<Vec<_>>())
    };
    tokio::time::timeout(Duration::from_secs(10), wait).await.expect("the awaited event came in time")
}

/// Reads the remaining live events.
pub async fn drain(events: &mut RunEvents, seen: &mut Vec<AgentEvent>) {
    while let Some(event) = events.next_event().await {
        seen.push(event);
    }
}

/// A deterministic provider for many concurrent runs: calls `fs.read` on `notes.txt`,
/// then answers with the result.
pub struct Reader;

impl LlmProvider for Reader {
    fn name(&self) -> &str {
        "reader"
    }

    fn stream<'a>(
        &'a self,
        request: &'a ModelRequest,
        _cancel: CancellationToken,
    ) -> BoxFuture<'a, troupe_model::Result<EventStream>> {
        let result = request.messages.last().and_then(|m| {
            m.content.iter().find_map(|b| match b {
                ContentBlock::ToolResult { content, .. } => Some(content.clone()),
                _ => None,
            })
        });
        let usage = troupe_core::Usage { input_tokens: 3, output_tokens: 2, ..Default::default() };
        let events = match result {
            None => vec![
                StreamEvent::ToolUseStart { index: 0, id: "call_1".into(), name: "fs.read".into() },
                StreamEvent::ToolUseInputDelta { index: 0, partial_json: r#"{"path": "notes.txt"}"#.into() },
                StreamEvent::Usage { usage },
                StreamEvent::MessageStop { stop_reason: StopReason::ToolUse },
            ],
            Some(content) => vec![
                StreamEvent::TextDelta { index: 0, text: format!("read: {content}") },
                StreamEvent::Usage { usage },
                StreamEvent::MessageStop { stop_reason: StopReason::EndTurn },
            ],
        };
        async move { Ok(futures::StreamExt::boxed(futures::stream::iter(events.into_iter().map(Ok)))) }.boxed()
    }
}

/// The lease on the stored run `run_id` for `runner`'s process: free, or lapsed (taking a
/// run's lease from a live holder is `troupe-durable`'s, above the runner).
pub async fn lease_of(runner: &troupe_runtime::Runner, run_id: &str) -> troupe_store::Lease {
    let durability = runner.durability().expect("a store");
    let (owner, ttl, now) = (durability.owner(), durability.lease_ttl(), troupe_store::now_millis());
    durability.store().acquire(run_id, owner, ttl, now).await.expect("the store answers").expect("the lease is free")
}
