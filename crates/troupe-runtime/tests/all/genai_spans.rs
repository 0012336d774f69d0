//! The runner's spans on the OpenTelemetry GenAI conventions, read back by a `tracing`
//! layer: names, attributes, nesting (chat and tool spans under the run's, a delegated
//! run under the tool call that started it), errors, and content only when asked for.

use crate::common;

use common::{Harness, Wire};
use futures::FutureExt;
use futures::future::BoxFuture;
use serde_json::json;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use troupe_core::ConversationId;
use troupe_runtime::{
    AgentSpec, ContentFilter, Engine, Middleware, MiddlewareError, RunInput, Runner, ToolCallContext,
};
use troupe_testkit::{MockTurn, ScriptedModel};
use troupe_tools::{Effect, ToolCatalog, ToolError, ToolOutput, Workspace, typed_tool};

/// One span as the layer saw it.
#[derive(Clone, Debug)]
struct Seen {
    name: &'static str,
    /// The index of the parent span in the layer's list.
    parent: Option<usize>,
    fields: BTreeMap<String, String>,
    /// How each numeric field was recorded: `i64`, `u64` or `f64`.
    types: BTreeMap<String, &'static str>,
    closed: bool,
}

impl Seen {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }

    fn type_of(&self, name: &str) -> Option<&str> {
        self.types.get(name).copied()
    }
}

/// Collects every span, its fields (recorded later too) and its parent.
#[derive(Clone, Default)]
struct Collector {
    spans: Arc<Mutex<Vec<Seen>>>,
    /// Live span ids to indexes (ids are reused once a span closes).
    live: Arc<Mutex<HashMap<u64, usize>>>,
}

struct Fields<'a>(&'a mut BTreeMap<String, String>, &'a mut BTreeMap<String, &'static str>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().to_owned(), value.to_string());
        self.1.insert(field.name().to_owned(), "i64");
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_owned(), value.to_string());
        self.1.insert(field.name().to_owned(), "u64");
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().to_owned(), value.to_string());
        self.1.insert(field.name().to_owned(), "f64");
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> tracing_subscriber::Layer<S> for Collector {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let (mut fields, mut types) = (BTreeMap::new(), BTreeMap::new());
        attrs.record(&mut Fields(&mut fields, &mut types));
        let live = self.live.lock().expect("live");
        let parent = ctx.span(id).and_then(|s| s.parent()).and_then(|p| live.get(&p.id().into_u64()).copied());
        drop(live);
        let mut spans = self.spans.lock().expect("spans");
        spans.push(Seen { name: attrs.metadata().name(), parent, fields, types, closed: false });
        self.live.lock().expect("live").insert(id.into_u64(), spans.len() - 1);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _ctx: Context<'_, S>) {
        let Some(index) = self.live.lock().expect("live").get(&id.into_u64()).copied() else { return };
        let mut spans = self.spans.lock().expect("spans");
        let seen = &mut spans[index];
        values.record(&mut Fields(&mut seen.fields, &mut seen.types));
    }

    fn on_close(&self, id: Id, _ctx: Context<'_, S>) {
        if let Some(index) = self.live.lock().expect("live").remove(&id.into_u64()) {
            self.spans.lock().expect("spans")[index].closed = true;
        }
    }
}

impl Collector {
    fn install(&self) -> tracing::subscriber::DefaultGuard {
        // A callsite first reached by another test's thread while no collector exists is
        // cached as of no interest; a collector set up at that moment can miss it. A
        // global subscriber that wants everything keeps every callsite asking.
        static EVERY_CALLSITE: std::sync::Once = std::sync::Once::new();
        EVERY_CALLSITE.call_once(|| {
            let _ = tracing::subscriber::set_global_default(tracing_subscriber::registry());
        });
        tracing::subscriber::set_default(tracing_subscriber::registry().with(self.clone()))
    }

    fn all(&self) -> Vec<Seen> {
        self.spans.lock().expect("spans").clone()
    }

    /// The indexes of the spans named `name`.
    fn named(&self, name: &str) -> Vec<usize> {
        self.all().iter().enumerate().filter(|(_, s)| s.name == name).map(|(i, _)| i).collect()
    }
}

const NOTE: &str = "the vault code is SECRET-NOTE-9";
const PROMPT: &str = "What do the notes say, Ada?";

fn provider_of(wire: Wire) -> &'static str {
    match wire {
        Wire::Scripted => "scripted",
        Wire::Anthropic => "anthropic",
        Wire::OpenAiChat | Wire::OpenAiResponses => "openai",
        Wire::Gemini => "gcp.gemini",
    }
}

// One current-thread runtime per wire: the layer is this thread's default subscriber, and
// every span of the run is made on this thread.
#[tokio::test]
async fn spans_follow_the_genai_conventions_on_every_wire() {
    for wire in [Wire::Scripted, Wire::Anthropic, Wire::OpenAiChat, Wire::OpenAiResponses, Wire::Gemini] {
        let collector = Collector::default();
        let _guard = collector.install();
        let h = Harness::new(wire).await;
        h.write("notes.txt", NOTE);
        h.push([h.call("c1", "fs.read", json!({"path": "notes.txt"})), MockTurn::text("They hold a code.")]);
        let agent = h
            .engine()
            .agent("reader")
            .workspace(h.dir.path())
            .readonly_tools()
            .max_output_tokens(512)
            .build()
            .expect("builds");
        let input = RunInput::new(PROMPT).conversation(ConversationId::new("conv-1"));
        let output = agent.run(input).await.expect("ends");
        assert!(output.is_completed(), "{wire:?}: {:?}", output.outcome);
        let spans = collector.all();

        let agents = collector.named("invoke_agent");
        assert_eq!(agents.len(), 1, "{wire:?}");
        let run = &spans[agents[0]];
        assert_eq!(run.parent, None);
        assert_eq!(run.field("otel.name"), Some("invoke_agent reader"));
        assert_eq!(run.field("gen_ai.operation.name"), Some("invoke_agent"));
        assert_eq!(run.field("gen_ai.agent.name"), Some("reader"));
        assert_eq!(run.field("gen_ai.conversation.id"), Some("conv-1"));
        assert_eq!(run.field("troupe.run.id"), Some(output.run_id.as_str()));
        assert_eq!(run.field("troupe.run.outcome"), Some("completed"));
        assert_eq!(run.field("gen_ai.usage.input_tokens"), Some("20"));
        // Integers, not strings, once exported: `tracing-opentelemetry` turns a u64 into text.
        assert_eq!(run.type_of("gen_ai.usage.input_tokens"), Some("i64"));
        assert_eq!(run.type_of("gen_ai.usage.output_tokens"), Some("i64"));
        assert_eq!(run.field("error.type"), None);

        let chats = collector.named("chat");
        assert_eq!(chats.len(), 2, "{wire:?}");
        for (index, reason) in chats.iter().zip(["tool_call", "stop"]) {
            let chat = &spans[*index];
            assert_eq!(chat.parent, Some(agents[0]), "{wire:?}: chat under invoke_agent");
            assert_eq!(chat.field("otel.name"), Some("chat mock-model"));
            assert_eq!(chat.field("otel.kind"), Some("client"));
            assert_eq!(chat.field("gen_ai.operation.name"), Some("chat"));
            assert_eq!(chat.field("gen_ai.provider.name"), Some(provider_of(wire)), "{wire:?}");
            assert_eq!(chat.field("gen_ai.request.model"), Some("mock-model"));
            assert_eq!(chat.field("gen_ai.response.model"), Some("mock-model"), "{wire:?}");
            assert_eq!(chat.field("gen_ai.response.finish_reasons"), Some(reason), "{wire:?}");
            assert_eq!(chat.field("gen_ai.usage.input_tokens"), Some("10"), "{wire:?}");
            assert_eq!(chat.field("gen_ai.usage.output_tokens"), Some("5"), "{wire:?}");
            for count in ["gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "gen_ai.request.max_tokens"] {
                assert_eq!(chat.type_of(count), Some("i64"), "{wire:?}: {count}");
            }
            assert_eq!(chat.field("gen_ai.request.max_tokens"), Some("512"), "{wire:?}");
            assert_eq!(chat.field("error.type"), None);
        }

        let tools = collector.named("execute_tool");
        assert_eq!(tools.len(), 1, "{wire:?}");
        let tool = &spans[tools[0]];
        assert_eq!(tool.parent, Some(agents[0]), "{wire:?}: execute_tool under invoke_agent");
        assert_eq!(tool.field("otel.name"), Some("execute_tool fs.read"));
        assert_eq!(tool.field("gen_ai.operation.name"), Some("execute_tool"));
        assert_eq!(tool.field("gen_ai.tool.name"), Some("fs.read"));
        assert_eq!(tool.field("gen_ai.tool.call.id"), Some("c1"));
        assert_eq!(tool.field("error.type"), None);

        for span in &spans {
            assert!(span.closed, "{wire:?}: {} still open", span.name);
            for (name, value) in &span.fields {
                for content in ["SECRET-NOTE", "What do the notes say", "They hold a code"] {
                    assert!(!value.contains(content), "{wire:?}: `{name}` of {} holds content: {value}", span.name);
                }
            }
        }
    }
}

#[tokio::test]
async fn content_is_recorded_when_asked_and_as_the_middlewares_left_it() {
    let collector = Collector::default();
    let _guard = collector.install();
    let h = Harness::new(Wire::Scripted).await;
    h.write("notes.txt", NOTE);
    h.push([h.call("c1", "fs.read", json!({"path": "notes.txt"})), MockTurn::text("They hold a code.")]);
    let engine = Engine::builder()
        .resolver(Arc::new(h.model()))
        .middleware(Arc::new(ContentFilter::new()))
        .capture_content(true)
        .build();
    let agent = engine
        .agent("reader")
        .workspace(h.dir.path())
        .readonly_tools()
        .instructions("Answer from the files.")
        .build()
        .expect("builds");
    let output = agent.run(format!("{PROMPT} Mail me at ada@example.com.")).await.expect("ends");
    assert!(output.is_completed(), "{:?}", output.outcome);
    let spans = collector.all();
    let chats = collector.named("chat");
    let (first, second) = (&spans[chats[0]], &spans[chats[1]]);

    let input: serde_json::Value =
        serde_json::from_str(first.field("gen_ai.input.messages").expect("recorded")).expect("JSON");
    assert_eq!(input[0]["role"], "user");
    let prompt = input[0]["parts"][0]["content"].as_str().expect("text");
    assert!(prompt.contains(PROMPT), "{prompt}");
    assert!(prompt.contains("[redacted:email]") && !prompt.contains("ada@example.com"), "what was sent: {prompt}");
    assert!(first.field("gen_ai.system_instructions").is_some_and(|s| s.contains("Answer from the files.")));
    let calls: serde_json::Value =
        serde_json::from_str(first.field("gen_ai.output.messages").expect("recorded")).expect("JSON");
    assert_eq!(calls[0]["parts"][0]["type"], "tool_call");
    assert_eq!(calls[0]["finish_reason"], "tool_call");

    assert!(second.field("gen_ai.input.messages").is_some_and(|m| m.contains("SECRET-NOTE")));
    assert!(second.field("gen_ai.output.messages").is_some_and(|m| m.contains("They hold a code.")));
    let tool = &spans[collector.named("execute_tool")[0]];
    assert!(tool.field("gen_ai.tool.call.arguments").is_some_and(|a| a.contains("notes.txt")));
    assert!(tool.field("gen_ai.tool.call.result").is_some_and(|r| r.contains(NOTE)), "{tool:?}");
}

/// Refuses every call of `fs.list`.
struct NoListing;

impl Middleware for NoListing {
    fn name(&self) -> &str {
        "no_listing"
    }

    fn before_tool<'a>(
        &'a self,
        ctx: &'a ToolCallContext,
        _arguments: &'a mut serde_json::Value,
    ) -> BoxFuture<'a, Result<(), MiddlewareError>> {
        let verdict =
            if ctx.tool == "fs.list" { Err(MiddlewareError::refused(self.name(), "no listing")) } else { Ok(()) };
        async move { verdict }.boxed()
    }
}

#[tokio::test]
async fn failures_set_error_type_and_the_error_status() {
    let collector = Collector::default();
    let _guard = collector.install();
    let h = Harness::new(Wire::Scripted).await;
    // A read of a missing file, a refused listing, then the script runs dry: the model fails.
    h.push([h.call("c1", "fs.read", json!({"path": "missing.txt"})).with_tool_call(
        "c2",
        "fs.list",
        json!({"path": "."}),
    )]);
    let engine = Engine::builder().resolver(Arc::new(h.model())).middleware(Arc::new(NoListing)).build();
    let agent = engine.agent("a").workspace(h.dir.path()).readonly_tools().build().expect("builds");
    let output = agent.run("go").await.expect("ends");
    assert!(matches!(output.outcome, troupe_runtime::RunOutcome::Failed { .. }), "{:?}", output.outcome);
    let spans = collector.all();
    let tools: Vec<&Seen> = collector.named("execute_tool").into_iter().map(|i| &spans[i]).collect();
    let by_call = |id: &str| *tools.iter().find(|s| s.field("gen_ai.tool.call.id") == Some(id)).expect("a span");
    assert_eq!(by_call("c1").field("error.type"), Some("not_found"));
    assert_eq!(by_call("c2").field("error.type"), Some("middleware_refused"));
    assert_eq!(by_call("c2").field("otel.status_code"), Some("error"));
    let chats: Vec<&Seen> = collector.named("chat").into_iter().map(|i| &spans[i]).collect();
    assert_eq!(chats.len(), 2);
    assert_eq!(chats[0].field("error.type"), None);
    assert_eq!(chats[1].field("error.type"), Some("invalid_request"), "the model had no reply left");
    assert_eq!(chats[1].field("otel.status_code"), Some("error"));
    let run = &spans[collector.named("invoke_agent")[0]];
    assert_eq!(run.field("error.type"), Some("invalid_request"));
    assert_eq!(run.field("troupe.run.outcome"), Some("failed"));
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Ask {
    /// The question for the helper.
    question: String,
}

#[tokio::test]
async fn a_run_started_by_a_tool_nests_under_that_tool_call() {
    let collector = Collector::default();
    let _guard = collector.install();
    let dir = tempfile::tempdir().expect("tempdir");
    let workspace = Arc::new(Workspace::new(dir.path()).expect("workspace"));
    let helper_model = ScriptedModel::new([MockTurn::text("the helper's answer")]);
    let helper = Runner::new(
        Arc::new(troupe_runtime::FixedModel::new(Arc::new(helper_model), "helper-model")),
        Arc::new(ToolCatalog::new()),
        Arc::clone(&workspace),
    );
    let ask = typed_tool("ask.helper", "Asks the helper.", Effect::ReadOnly, move |_ctx, args: Ask| {
        let helper = helper.clone();
        async move {
            let output = helper
                .start(Arc::new(AgentSpec::new("helper", "helper-model")), RunInput::new(args.question))
                .output()
                .await
                .map_err(|e| ToolError::failed(e.to_string()))?;
            Ok(ToolOutput::text(output.text))
        }
    })
    .into_arc();
    let lead_model = ScriptedModel::new([
        MockTurn::tool_call("c1", "ask.helper", json!({"question": "what now?"})),
        MockTurn::text("done"),
    ]);
    let lead = Runner::new(
        Arc::new(troupe_runtime::FixedModel::new(Arc::new(lead_model), "lead-model")),
        Arc::new(ToolCatalog::with_tools([ask]).expect("catalog")),
        workspace,
    );
    let output = lead.start(Arc::new(AgentSpec::new("lead", "lead-model")), "delegate".into()).output().await;
    assert!(output.expect("ends").is_completed());

    let spans = collector.all();
    let runs = collector.named("invoke_agent");
    assert_eq!(runs.len(), 2);
    let by_agent =
        |name: &str| *runs.iter().find(|i| spans[**i].field("gen_ai.agent.name") == Some(name)).expect("run");
    let (lead_run, helper_run) = (by_agent("lead"), by_agent("helper"));
    let tool = collector.named("execute_tool")[0];
    assert_eq!(spans[tool].parent, Some(lead_run));
    assert_eq!(spans[helper_run].parent, Some(tool), "the helper's run is a child of the call that started it");
    let helper_chats: Vec<usize> =
        collector.named("chat").into_iter().filter(|i| spans[*i].parent == Some(helper_run)).collect();
    assert_eq!(helper_chats.len(), 1);
    assert_eq!(spans[helper_chats[0]].field("otel.name"), Some("chat helper-model"));
}
