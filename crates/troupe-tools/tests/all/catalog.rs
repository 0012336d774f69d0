//! The catalog: registration, subsets, contained invocation and batches.

use crate::common;

use common::{Fixture, err, ok};
use futures::FutureExt;
use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use troupe_core::ContentBlock;
use troupe_tools::{
    CatalogError, Effect, Tool, ToolCall, ToolCatalog, ToolContext, ToolDeclaration, ToolError, ToolOutput, TypedTool,
    typed_tool,
};

/// Arguments of the test tools.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Step {
    /// A label for the event log.
    label: String,
    /// How long to work, in milliseconds.
    #[serde(default)]
    millis: u64,
}

type Log = Arc<Mutex<Vec<String>>>;

/// A tool that logs when it starts and ends and sleeps in between.
fn logging_tool(name: &str, effect: Effect, log: &Log) -> TypedTool {
    let log = Arc::clone(log);
    typed_tool(name, "logs and sleeps", effect, move |_ctx, step: Step| {
        let log = Arc::clone(&log);
        async move {
            log.lock().expect("log").push(format!("start {}", step.label));
            tokio::time::sleep(Duration::from_millis(step.millis)).await;
            log.lock().expect("log").push(format!("end {}", step.label));
            Ok(ToolOutput::text(step.label))
        }
    })
}

/// A read-only tool that only finishes when `parties` calls wait on the barrier together.
fn barrier_tool(parties: usize, patience: Duration) -> TypedTool {
    let barrier = Arc::new(tokio::sync::Barrier::new(parties));
    typed_tool("meet", "waits for the others", Effect::ReadOnly, move |_ctx, step: Step| {
        let barrier = Arc::clone(&barrier);
        async move {
            match tokio::time::timeout(patience, barrier.wait()).await {
                Ok(_) => Ok(ToolOutput::text(step.label)),
                Err(_) => Err(ToolError::failed("nobody else arrived")),
            }
        }
    })
}

struct PanicsWhenCalled(ToolDeclaration);

impl Tool for PanicsWhenCalled {
    fn declaration(&self) -> &ToolDeclaration {
        &self.0
    }

    fn call<'a>(&'a self, _ctx: &'a ToolContext, _args: Value) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        panic!("broke before returning a future")
    }
}

fn catalog_of(tools: Vec<Arc<dyn Tool>>) -> ToolCatalog {
    ToolCatalog::with_tools(tools).expect("catalog")
}

/// A run offers its tools at every model call: the specs share each declaration's schema
/// instead of copying it.
#[test]
fn offered_specs_share_the_declarations_schemas() {
    let log = Log::default();
    let catalog = catalog_of(vec![logging_tool("a", Effect::ReadOnly, &log).into_arc()]);
    let declared = &catalog.get("a").expect("registered").declaration().input_schema;
    let [first, second] = [catalog.specs(), catalog.specs()].map(|specs| specs.into_iter().next().expect("one tool"));
    assert!(Arc::ptr_eq(declared, &first.input_schema) && Arc::ptr_eq(declared, &second.input_schema));
    assert_eq!(*first.input_schema, **declared);
}

#[tokio::test]
async fn unknown_tools_list_the_known_ones() {
    let fx = Fixture::new();
    let outcome = fx.call("fs.raed", json!({"path": "a"})).await;
    let ToolError::UnknownTool { name, known } = err(&outcome) else { panic!("{:?}", outcome.error) };
    assert_eq!(name, "fs.raed");
    assert!(known.contains(&"fs.read".to_owned()));
    assert!(outcome.content.contains("Available tools: fs.read, fs.write, fs.edit"), "{}", outcome.content);
}

#[tokio::test]
async fn bad_arguments_are_results_the_model_can_correct() {
    let fx = Fixture::new();
    let missing = fx.call("fs.read", json!({})).await;
    assert_eq!(
        missing.content,
        "invalid arguments: missing required argument `path` (string). Fix the arguments to match the tool's input schema and call it again."
    );
    let unknown = fx.call("fs.read", json!({"path": "a", "lines": 3})).await;
    assert!(
        unknown.content.contains("unknown argument `lines`; accepted arguments: `limit`, `offset`, `path`"),
        "{}",
        unknown.content
    );
    let ill = fx.call("fs.read", json!({"path": 7})).await;
    assert!(ill.content.contains("argument `path`: invalid type: integer `7`, expected a string"), "{}", ill.content);
    assert!(ill.content.contains("(the schema expects string)"), "{}", ill.content);
    let string = fx.call("fs.read", Value::String("{\"path\": \"a.txt\"".into())).await;
    assert!(string.content.starts_with("invalid arguments: arguments are not valid JSON: "), "{}", string.content);
    for outcome in [&missing, &unknown, &ill, &string] {
        assert!(matches!(err(outcome), ToolError::InvalidArguments { .. }));
    }
}

#[tokio::test]
async fn user_structs_report_serde_messages() {
    /// Arguments that accept unknown fields.
    #[derive(Deserialize, JsonSchema)]
    struct Open {
        /// A count.
        n: u8,
    }
    let tool =
        typed_tool(
            "open",
            "",
            Effect::ReadOnly,
            |_ctx, args: Open| async move { Ok(ToolOutput::text(args.n.to_string())) },
        );
    let catalog = catalog_of(vec![tool.into_arc()]);
    let fx = Fixture::new();
    assert_eq!(ok(&catalog.invoke("open", json!({"n": 3, "extra": true}), &fx.ctx).await), "3");
    let out_of_range = catalog.invoke("open", json!({"n": 300}), &fx.ctx).await;
    assert!(
        out_of_range.content.contains("argument `n`: invalid value: integer `300`, expected u8"),
        "{}",
        out_of_range.content
    );
}

#[tokio::test]
async fn panics_are_contained_whether_in_the_future_or_before_it() {
    let in_future = typed_tool("boom", "", Effect::ReadOnly, |_ctx, _step: Step| async move {
        if true {
            panic!("kaboom");
        }
        Ok(ToolOutput::default())
    });
    let in_call = PanicsWhenCalled(ToolDeclaration::new("early", "", json!({"type": "object"}), Effect::ReadOnly));
    let catalog = catalog_of(vec![in_future.into_arc(), Arc::new(in_call)]);
    let fx = Fixture::new();
    let outcome = catalog.invoke("boom", json!({"label": "x"}), &fx.ctx).await;
    assert_eq!(err(&outcome), &ToolError::Panicked { message: "kaboom".into() });
    assert!(outcome.content.contains("the tool crashed (panic: kaboom)"), "{}", outcome.content);
    let early = catalog.invoke("early", json!({}), &fx.ctx).await;
    assert_eq!(err(&early), &ToolError::Panicked { message: "broke before returning a future".into() });
    // The catalog still works afterwards.
    assert!(catalog.invoke("boom", json!({}), &fx.ctx).await.content.contains("missing required argument"));
}

#[tokio::test]
async fn the_declared_timeout_stops_a_call() {
    let log = Log::default();
    let slow = logging_tool("slow", Effect::ReadOnly, &log).timeout(Duration::from_millis(100));
    let catalog = catalog_of(vec![slow.into_arc()]);
    let fx = Fixture::new();
    let started = Instant::now();
    let outcome = catalog.invoke("slow", json!({"label": "s", "millis": 10_000}), &fx.ctx).await;
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    assert_eq!(err(&outcome), &ToolError::Timeout { after: Duration::from_millis(100) });
    assert!(outcome.content.contains("did not finish within 100ms"), "{}", outcome.content);
    assert_eq!(*log.lock().expect("log"), ["start s"], "the call was stopped, not finished");
}

#[tokio::test]
async fn cancellation_ends_calls_in_flight_and_refuses_new_ones() {
    let log = Log::default();
    let catalog = catalog_of(vec![logging_tool("slow", Effect::ReadOnly, &log).into_arc()]);
    let fx = Fixture::new();
    let cancel = fx.ctx.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        cancel.cancel();
    });
    let outcome = catalog.invoke("slow", json!({"label": "a", "millis": 10_000}), &fx.ctx).await;
    assert_eq!(err(&outcome), &ToolError::Cancelled);
    let after = catalog.invoke("slow", json!({"label": "b"}), &fx.ctx).await;
    assert_eq!(err(&after), &ToolError::Cancelled);
    assert_eq!(*log.lock().expect("log"), ["start a"]);
}

#[tokio::test]
async fn registration_refuses_duplicates_and_non_object_schemas() {
    let log = Log::default();
    let mut catalog = ToolCatalog::new();
    catalog.register(logging_tool("t", Effect::ReadOnly, &log).into_arc()).expect("first");
    assert_eq!(
        catalog.register(logging_tool("t", Effect::WriteState, &log).into_arc()),
        Err(CatalogError::DuplicateName { name: "t".into() })
    );
    let stringly = PanicsWhenCalled(ToolDeclaration::new("s", "", json!({"type": "string"}), Effect::ReadOnly));
    assert_eq!(catalog.register(Arc::new(stringly)), Err(CatalogError::InvalidSchema { name: "s".into() }));
    assert_eq!(catalog.names(), ["t"]);
}

#[tokio::test]
async fn subsets_restrict_and_specs_follow_registration_order() {
    let fx = Fixture::new();
    let subset = fx.catalog.subset(&["grep", "fs.read"]).expect("subset");
    assert_eq!(subset.names(), ["fs.read", "grep"]);
    let specs = subset.specs();
    assert_eq!(specs[0].name, "fs.read");
    assert_eq!(specs[0].input_schema["type"], "object");
    assert_eq!(subset.declarations()[1].effect, Effect::ReadOnly);
    let refused = subset.invoke("shell", json!({"command": "true"}), &fx.ctx).await;
    assert!(matches!(err(&refused), ToolError::UnknownTool { .. }));
    assert!(matches!(fx.catalog.subset(&["nope"]), Err(CatalogError::UnknownTool { .. })));
}

#[tokio::test]
async fn outcomes_become_tool_result_blocks() {
    let fx = Fixture::new();
    fx.write("a.txt", "x\n");
    let good = fx.call("fs.read", json!({"path": "a.txt"})).await;
    assert_eq!(good.to_block("c1"), ContentBlock::tool_result("c1", "     1\tx\n"));
    let bad = fx.call("fs.read", json!({"path": "missing"})).await;
    let ContentBlock::ToolResult { tool_use_id, is_error, .. } = bad.to_block("c2") else { panic!("not a result") };
    assert_eq!(tool_use_id.as_str(), "c2");
    assert!(is_error);
    let block = ContentBlock::tool_use("c3", "fs.read", json!({"path": "a.txt"}));
    assert_eq!(ToolCall::from_block(&block), Some(ToolCall::new("c3", "fs.read", json!({"path": "a.txt"}))));
}

#[tokio::test]
async fn read_only_calls_of_a_batch_run_concurrently() {
    let catalog = catalog_of(vec![barrier_tool(2, Duration::from_secs(5)).into_arc()]);
    let fx = Fixture::new();
    let calls =
        [ToolCall::new("c1", "meet", json!({"label": "one"})), ToolCall::new("c2", "meet", json!({"label": "two"}))];
    let outcomes = catalog.run_batch(&calls, &fx.ctx, 4).await;
    let contents: Vec<&str> = outcomes.iter().map(ok).collect();
    assert_eq!(contents, ["one", "two"], "both met at the barrier, results in call order");
}

#[tokio::test]
async fn the_concurrency_bound_is_honoured() {
    let in_flight = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let gauge = {
        let (in_flight, peak) = (Arc::clone(&in_flight), Arc::clone(&peak));
        typed_tool("gauge", "", Effect::ReadOnly, move |_ctx, step: Step| {
            let (in_flight, peak) = (Arc::clone(&in_flight), Arc::clone(&peak));
            async move {
                let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(step.millis)).await;
                in_flight.fetch_sub(1, Ordering::SeqCst);
                Ok(ToolOutput::text(step.label))
            }
        })
    };
    let catalog = catalog_of(vec![gauge.into_arc()]);
    let fx = Fixture::new();
    let calls: Vec<ToolCall> = (0..5)
        .map(|i| ToolCall::new(format!("c{i}"), "gauge", json!({"label": i.to_string(), "millis": 30})))
        .collect();
    for (limit, expected_peak) in [(1, 1), (2, 2), (0, 1)] {
        peak.store(0, Ordering::SeqCst);
        let outcomes = catalog.run_batch(&calls, &fx.ctx, limit).await;
        let labels: Vec<&str> = outcomes.iter().map(ok).collect();
        assert_eq!(labels, ["0", "1", "2", "3", "4"]);
        assert_eq!(peak.load(Ordering::SeqCst), expected_peak, "max_concurrency {limit}");
    }
}

#[tokio::test]
async fn side_effecting_calls_run_alone_and_in_order() {
    let log = Log::default();
    let catalog = catalog_of(vec![
        logging_tool("read", Effect::ReadOnly, &log).into_arc(),
        logging_tool("write", Effect::WriteState, &log).into_arc(),
    ]);
    let fx = Fixture::new();
    let calls = [
        ToolCall::new("1", "read", json!({"label": "r1", "millis": 80})),
        ToolCall::new("2", "read", json!({"label": "r2", "millis": 10})),
        ToolCall::new("3", "write", json!({"label": "w1", "millis": 60})),
        ToolCall::new("4", "write", json!({"label": "w2", "millis": 0})),
        ToolCall::new("5", "nope", json!({})),
        ToolCall::new("6", "read", json!({"label": "r3", "millis": 0})),
    ];
    let outcomes = catalog.run_batch(&calls, &fx.ctx, 8).await;
    let contents: Vec<&str> = outcomes.iter().map(|o| o.content.as_str()).collect();
    assert_eq!(&contents[..4], ["r1", "r2", "w1", "w2"]);
    assert!(outcomes[4].is_error && contents[5] == "r3");
    assert_eq!(
        *log.lock().expect("log"),
        ["start r1", "start r2", "end r2", "end r1", "start w1", "end w1", "start w2", "end w2", "start r3", "end r3"],
        "the reads overlapped; each write ran alone, after the reads before it and before the read after it"
    );
}

#[tokio::test]
async fn every_call_of_a_batch_gets_its_own_call_id() {
    let seen: Log = Log::default();
    let recorder = {
        let seen = Arc::clone(&seen);
        typed_tool("who", "", Effect::ReadOnly, move |ctx: ToolContext, _step: Step| {
            let seen = Arc::clone(&seen);
            async move {
                seen.lock().expect("seen").push(ctx.call_id.to_string());
                Ok(ToolOutput::default())
            }
            .boxed()
        })
    };
    let catalog = catalog_of(vec![recorder.into_arc()]);
    let fx = Fixture::new();
    let calls = [ToolCall::new("a", "who", json!({"label": "x"})), ToolCall::new("b", "who", json!({"label": "y"}))];
    catalog.run_batch(&calls, &fx.ctx, 2).await;
    let mut seen = seen.lock().expect("seen").clone();
    seen.sort();
    assert_eq!(seen, ["a", "b"]);
}
