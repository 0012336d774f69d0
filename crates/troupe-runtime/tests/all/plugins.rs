//! Plugins registered in code: their tools join the agents' catalogs (within each agent's
//! allow-list), their middlewares the stack; they are initialized once, before the first
//! run goes on, and shut down once with the engine.

use crate::common;

use common::{Harness, Wire, check_events};
use futures::FutureExt;
use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use troupe_core::FailureCode;
use troupe_runtime::{
    Engine, Middleware, MiddlewareError, Plugin, PluginContext, PluginError, RunOutcome, Runner, RuntimeError,
    ToolCallContext,
};
use troupe_testkit::MockTurn;
use troupe_tools::{Effect, Tool, ToolCatalog, ToolOutput, ToolResultOutcome, Workspace, typed_tool};

#[derive(Deserialize, JsonSchema)]
struct Lookup {
    /// The term to look up.
    term: String,
}

/// A glossary loaded from a workspace file at initialization: contributes `glossary.lookup`
/// and a middleware that signs every tool result it sees.
#[derive(Default)]
struct Glossary {
    entries: Arc<OnceLock<Vec<(String, String)>>>,
    inits: AtomicU32,
    shutdowns: AtomicU32,
    /// Fail this many initializations first.
    failures: AtomicU32,
    /// The context it was initialized with.
    seen: Mutex<Option<PluginContext>>,
}

/// Appends ` [glossary]` to every tool result.
struct Signature;

impl Middleware for Signature {
    fn name(&self) -> &str {
        "glossary.signature"
    }

    fn after_tool<'a>(
        &'a self,
        _ctx: &'a ToolCallContext,
        result: &'a mut ToolResultOutcome,
    ) -> BoxFuture<'a, Result<(), MiddlewareError>> {
        result.content.push_str(" [glossary]");
        async { Ok(()) }.boxed()
    }
}

impl Plugin for Glossary {
    fn name(&self) -> &str {
        "glossary"
    }

    fn tools(&self) -> Vec<Arc<dyn Tool>> {
        let entries = Arc::clone(&self.entries);
        vec![
            typed_tool("glossary.lookup", "Looks a term up.", Effect::ReadOnly, move |_ctx, args: Lookup| {
                let entries = Arc::clone(&entries);
                async move {
                    let found = entries.get().and_then(|all| all.iter().find(|(t, _)| *t == args.term).cloned());
                    Ok(ToolOutput::text(found.map_or_else(|| "unknown term".to_owned(), |(_, meaning)| meaning)))
                }
            })
            .into_arc(),
        ]
    }

    fn middlewares(&self) -> Vec<Arc<dyn Middleware>> {
        vec![Arc::new(Signature)]
    }

    fn initialize<'a>(&'a self, ctx: &'a PluginContext) -> BoxFuture<'a, Result<(), PluginError>> {
        async move {
            self.inits.fetch_add(1, Ordering::SeqCst);
            *self.seen.lock().expect("context") = Some(ctx.clone());
            if self.failures.load(Ordering::SeqCst) > 0 {
                self.failures.fetch_sub(1, Ordering::SeqCst);
                return Err(PluginError::failed("glossary", "the glossary server is down"));
            }
            let file = ctx.config["file"].as_str().unwrap_or("glossary.txt");
            let text = std::fs::read_to_string(ctx.workspace.root().join(file))
                .map_err(|e| PluginError::failed("glossary", format!("cannot read {file}: {e}")))?;
            let entries = text
                .lines()
                .filter_map(|line| line.split_once('=').map(|(t, m)| (t.trim().to_owned(), m.trim().to_owned())))
                .collect();
            let _ = self.entries.set(entries);
            Ok(())
        }
        .boxed()
    }

    fn shutdown(&self) -> BoxFuture<'_, ()> {
        self.shutdowns.fetch_add(1, Ordering::SeqCst);
        async {}.boxed()
    }
}

/// Whether a request (the scripted model's, as JSON) offers the plugin's tool.
fn offers_lookup(body: &str) -> bool {
    let request: serde_json::Value = serde_json::from_str(body).expect("a request");
    request["tools"].as_array().is_some_and(|tools| tools.iter().any(|t| t["name"] == "glossary.lookup"))
}

fn first_result(output: &troupe_runtime::RunOutput) -> Option<String> {
    output.messages.iter().flat_map(|m| &m.content).find_map(|b| match b {
        troupe_core::ContentBlock::ToolResult { content, .. } => Some(content.clone()),
        _ => None,
    })
}

#[tokio::test]
async fn a_plugin_contributes_a_tool_and_a_middleware_and_is_initialized_once() {
    let h = Harness::new(Wire::Scripted).await;
    h.write("terms.txt", "troupe = a company of actors\n");
    h.push([MockTurn::text("hi"), MockTurn::text("hi")]);
    let glossary = Arc::new(Glossary::default());
    let engine = Engine::builder()
        .resolver(Arc::new(h.model()))
        .plugin_with_config(Arc::clone(&glossary) as Arc<dyn Plugin>, json!({"file": "terms.txt"}))
        .build();
    assert_eq!(engine.plugin_names(), ["glossary"]);
    assert_eq!(engine.middleware().names(), ["glossary.signature"]);
    let scholar = engine.agent("scholar").workspace(h.dir.path()).build().expect("builds");
    let reader = engine
        .agent("reader")
        .workspace(h.dir.path())
        .readonly_tools()
        .only_tools(["fs.read"])
        .build()
        .expect("builds");
    assert_eq!(glossary.inits.load(Ordering::SeqCst), 0, "nothing is initialized before a run");

    let (first, second) = tokio::join!(scholar.run("hello"), reader.run("hello"));
    let (first, second) = (first.expect("ends"), second.expect("ends"));
    assert!(first.is_completed() && second.is_completed(), "{:?} / {:?}", first.outcome, second.outcome);
    assert_eq!(glossary.inits.load(Ordering::SeqCst), 1, "two concurrent runs, one initialization");
    let seen = glossary.seen.lock().expect("context").clone().expect("initialized");
    assert!(Arc::ptr_eq(&seen.metrics, engine.metrics()), "the engine's metrics");
    assert_eq!(seen.workspace.root(), Workspace::new(h.dir.path()).expect("workspace").root());
    assert_eq!(seen.config, json!({"file": "terms.txt"}));

    h.push([h.call("c1", "glossary.lookup", json!({"term": "troupe"})), MockTurn::text("A company of actors.")]);
    let looked_up = scholar.run("what is a troupe?").await.expect("ends");
    assert!(looked_up.is_completed(), "{:?}", looked_up.outcome);
    check_events(&looked_up.events);
    assert_eq!(
        first_result(&looked_up).as_deref(),
        Some("a company of actors [glossary]"),
        "the tool answered from what initialize loaded, and the plugin's middleware signed it"
    );
    h.push([h.call("c2", "fs.read", json!({"path": "terms.txt"})), MockTurn::text("Read it.")]);
    let read = reader.run("read the terms").await.expect("ends");
    assert!(first_result(&read).is_some_and(|r| r.ends_with(" [glossary]")), "the middleware sees every agent's tools");
    assert_eq!(glossary.inits.load(Ordering::SeqCst), 1);

    // The allow-list holds: the reader is never offered the plugin's tool.
    let offered: Vec<bool> = h.bodies().iter().map(|b| offers_lookup(b)).collect();
    assert_eq!(
        offered.iter().filter(|o| **o).count(),
        3,
        "the scholar's three requests, not the reader's: {offered:?}"
    );
    assert!(reader.runner().agent_catalog(reader.spec()).expect("catalog").get("glossary.lookup").is_none());

    engine.shutdown().await;
    engine.shutdown().await;
    assert_eq!(glossary.shutdowns.load(Ordering::SeqCst), 1, "shut down once");
    let after = scholar.run("after shutdown").await.expect("ends");
    assert!(
        matches!(&after.outcome, RunOutcome::Failed { code, error } if *code == Some(FailureCode::Plugin) && error.contains("shut down")),
        "{:?}",
        after.outcome
    );
}

#[tokio::test]
async fn a_failed_initialization_fails_the_run_before_the_model_and_the_next_run_retries() {
    let h = Harness::new(Wire::Scripted).await;
    h.write("glossary.txt", "a = b\n");
    h.push([MockTurn::text("hello")]);
    let glossary = Arc::new(Glossary { failures: AtomicU32::new(1), ..Glossary::default() });
    let engine =
        Engine::builder().resolver(Arc::new(h.model())).plugin(Arc::clone(&glossary) as Arc<dyn Plugin>).build();
    let agent = engine.agent("a").workspace(h.dir.path()).build().expect("builds");
    let output = agent.run("hi").await.expect("ends");
    match &output.outcome {
        RunOutcome::Failed { error, code } => {
            assert_eq!(code, &Some(FailureCode::Plugin));
            assert!(error.contains("the glossary server is down"), "{error}");
        }
        other => panic!("expected a failure, got {other:?}"),
    }
    check_events(&output.events);
    assert!(h.bodies().is_empty(), "the model was not called");
    let retried = agent.run("hi").await.expect("ends");
    assert!(retried.is_completed(), "{:?}", retried.outcome);
    assert_eq!(glossary.inits.load(Ordering::SeqCst), 2);
    engine.shutdown().await;
    assert_eq!(glossary.shutdowns.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_runner_takes_plugins_and_reports_tool_clashes() {
    let h = Harness::new(Wire::Scripted).await;
    h.write("glossary.txt", "x = the unknown\n");
    h.push([h.call("c1", "glossary.lookup", json!({"term": "x"})), MockTurn::text("done")]);
    let workspace = Arc::new(Workspace::new(h.dir.path()).expect("workspace"));
    let glossary = Arc::new(Glossary::default());
    let runner = Runner::new(Arc::new(h.model()), Arc::new(ToolCatalog::new()), Arc::clone(&workspace))
        .with_plugin(Arc::clone(&glossary) as Arc<dyn Plugin>)
        .expect("no clash");
    assert_eq!(runner.plugin_names(), ["glossary"]);
    assert!(runner.catalog().get("glossary.lookup").is_some());
    runner.initialize_plugins().await.expect("initializes eagerly");
    let output = runner
        .start(Arc::new(troupe_runtime::AgentSpec::new("a", "mock-model")), "define x".into())
        .output()
        .await
        .expect("ends");
    assert!(output.is_completed(), "{:?}", output.outcome);
    assert_eq!(glossary.inits.load(Ordering::SeqCst), 1, "the run found it initialized");
    assert_eq!(first_result(&output).as_deref(), Some("the unknown [glossary]"));
    runner.shutdown_plugins().await;
    assert_eq!(glossary.shutdowns.load(Ordering::SeqCst), 1);

    let clash = runner.clone().with_plugin(Arc::new(Glossary::default()));
    match clash {
        Err(RuntimeError::Plugin(PluginError::Tools { plugin, .. })) => assert_eq!(plugin, "glossary"),
        other => panic!("expected a clash, got {:?}", other.map(|_| ())),
    }
    let engine = Engine::builder().resolver(Arc::new(h.model())).plugin(Arc::new(Glossary::default())).build();
    let own = Glossary::default().tools();
    let built = engine.agent("a").workspace(h.dir.path()).tools(own).build();
    assert!(matches!(built, Err(RuntimeError::Catalog { .. })), "{:?}", built.map(|_| ()));
}
