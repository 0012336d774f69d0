//! Delegation as a tool, through the mock LLM server over real loopback HTTP: a leader
//! agent calls `delegate(to, brief)`, the teammate runs on the brief alone, and the
//! leader reads the teammate's answer (or its failure) as the tool's result.

use futures::future::BoxFuture;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use troupe_model::anthropic::AnthropicWire;
use troupe_model::openai_chat::OpenAiChatWire;
use troupe_model::{ApiKey, HttpConfig, HttpProvider, LlmProvider};
use troupe_runtime::{Agent, Engine, FixedModel, RunOutcome};
use troupe_team::{AgentMember, DelegateTool, EventSink, Member, MemberResult, MemberTask};
use troupe_testkit::{Fault, MockLlmServer, MockTurn};

/// One test per wire for each scenario `async fn scenario(wire: Wire)`.
macro_rules! per_wire {
    ($($scenario:ident),* $(,)?) => {
        mod anthropic {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    super::$scenario(Wire::Anthropic).await
                }
            )*
        }
        mod openai_chat {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    super::$scenario(Wire::OpenAiChat).await
                }
            )*
        }
    };
}

per_wire!(
    the_leader_delegates_and_reads_the_teammates_answer,
    a_failing_teammate_is_an_error_the_leader_reads,
    an_unknown_teammate_is_refused_for_the_leader_to_correct,
    cancelling_the_leader_stops_the_teammate,
    a_delegation_past_its_timeout_stops_the_teammate,
);

#[derive(Clone, Copy, Debug)]
enum Wire {
    Anthropic,
    OpenAiChat,
}

/// A mock server and the HTTP provider that talks to it.
struct Mock {
    server: MockLlmServer,
    provider: Arc<dyn LlmProvider>,
}

impl Mock {
    async fn with(wire: Wire, turns: impl IntoIterator<Item = MockTurn>) -> Self {
        let server = MockLlmServer::start().await.expect("mock server starts");
        server.push_all(turns);
        let key = Some(ApiKey::new("test-key"));
        let provider: Arc<dyn LlmProvider> = match wire {
            Wire::Anthropic => Arc::new(
                HttpProvider::new(HttpConfig::new("anthropic", server.url(), key), AnthropicWire::default())
                    .expect("client"),
            ),
            Wire::OpenAiChat => Arc::new(
                HttpProvider::new(HttpConfig::new("openai", server.openai_url(), key), OpenAiChatWire::default())
                    .expect("client"),
            ),
        };
        Mock { server, provider }
    }

    fn engine(&self) -> Engine {
        Engine::builder().resolver(Arc::new(FixedModel::new(Arc::clone(&self.provider), "mock-model"))).build()
    }

    fn agent(&self, name: &str) -> Agent {
        self.engine().agent(name).max_iterations(5).build().expect("agent builds")
    }

    fn member(&self, name: &str, description: &str) -> Arc<dyn Member> {
        AgentMember::new(self.agent(name), description).shared()
    }

    fn leader(&self, delegate: &Arc<DelegateTool>) -> Agent {
        self.engine().agent("lead").tool(delegate.clone()).max_iterations(5).build().expect("leader builds")
    }

    fn bodies(&self) -> Vec<String> {
        self.server.requests().iter().map(|r| r.body.to_string()).collect()
    }

    fn body(&self, n: usize) -> String {
        self.bodies().get(n).cloned().unwrap_or_else(|| panic!("request {n} was made: {:?}", self.bodies()))
    }

    /// Waits (at most 10 s) until the server has been asked once.
    async fn asked(&self) {
        let wait = async {
            while self.server.requests().is_empty() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), wait).await.expect("the server was asked");
    }
}

/// A member that reports every result of the member it wraps, even when nobody awaits it.
struct Watched {
    inner: Arc<dyn Member>,
    done: mpsc::UnboundedSender<MemberResult>,
}

impl Member for Watched {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn description(&self) -> &str {
        self.inner.description()
    }

    fn run(
        &self,
        task: MemberTask,
        events: Option<EventSink>,
        cancel: CancellationToken,
    ) -> BoxFuture<'_, MemberResult> {
        Box::pin(async move {
            let result = self.inner.run(task, events, cancel).await;
            let _ = self.done.send(result.clone());
            result
        })
    }
}

fn watched(member: Arc<dyn Member>) -> (Arc<dyn Member>, mpsc::UnboundedReceiver<MemberResult>) {
    let (done, rx) = mpsc::unbounded_channel();
    (Arc::new(Watched { inner: member, done }), rx)
}

/// The names of the tools offered in a request body, on either wire.
fn offered_tools(body: &str) -> Vec<String> {
    let value: serde_json::Value = serde_json::from_str(body).expect("a JSON body");
    value["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["name"].as_str().or_else(|| t["function"]["name"].as_str()).map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

const QUESTION: &str = "What is the capital of France?";

fn delegate_call(to: &str, brief: &str) -> MockTurn {
    MockTurn::tool_call("call_1", "delegate", serde_json::json!({"to": to, "brief": brief}))
}

async fn the_leader_delegates_and_reads_the_teammates_answer(wire: Wire) {
    let brief = "BRIEF: name the capital of France, one word.";
    let lead =
        Mock::with(wire, [delegate_call("researcher", brief), MockTurn::text("Paris, says my researcher.")]).await;
    let researcher = Mock::with(wire, [MockTurn::text("PARIS-ANSWER")]).await;
    let writer = Mock::with(wire, []).await;
    let delegate = Arc::new(
        DelegateTool::new(
            "lead",
            [researcher.member("researcher", "Finds facts."), writer.member("writer", "Writes.")],
        )
        .expect("tool"),
    );

    let output = lead.leader(&delegate).run(QUESTION).await.expect("the leader runs");

    assert!(output.is_completed(), "{:?}", output.outcome);
    assert_eq!(output.text, "Paris, says my researcher.");
    let first = lead.body(0);
    assert_eq!(offered_tools(&first), ["delegate"]);
    assert!(first.contains("Finds facts.") && first.contains("\"writer\""), "the teammates are listed: {first}");
    let asked = researcher.body(0);
    assert!(asked.contains(brief), "{asked}");
    assert!(!asked.contains(QUESTION), "the teammate sees the brief, not the leader's conversation: {asked}");
    assert!(lead.body(1).contains("PARIS-ANSWER"), "{}", lead.body(1));
    assert!(writer.bodies().is_empty());
    let results = delegate.results();
    assert_eq!(results.len(), 1);
    assert!(results[0].success && results[0].name == "researcher" && results[0].task_id == "lead/delegate/1");
    assert_eq!(results[0].usage.input_tokens, 10, "the teammate's usage is kept for the caller");
}

async fn a_failing_teammate_is_an_error_the_leader_reads(wire: Wire) {
    let lead =
        Mock::with(wire, [delegate_call("researcher", "find it"), MockTurn::text("I could not find out.")]).await;
    let researcher = Mock::with(wire, [MockTurn::status(400, "the request is malformed")]).await;
    let delegate = Arc::new(DelegateTool::new("lead", [researcher.member("researcher", "Finds.")]).expect("tool"));

    let output = lead.leader(&delegate).run(QUESTION).await.expect("the leader runs");

    assert!(output.is_completed(), "a teammate's failure does not fail the leader: {:?}", output.outcome);
    let retold = lead.body(1);
    assert!(retold.contains("teammate `researcher` did not complete the task"), "{retold}");
    assert!(!delegate.results()[0].success);
}

async fn an_unknown_teammate_is_refused_for_the_leader_to_correct(wire: Wire) {
    let lead = Mock::with(
        wire,
        [delegate_call("poet", "a poem"), delegate_call("researcher", "find it"), MockTurn::text("found")],
    )
    .await;
    let researcher = Mock::with(wire, [MockTurn::text("FOUND-IT")]).await;
    let delegate = Arc::new(DelegateTool::new("lead", [researcher.member("researcher", "Finds.")]).expect("tool"));

    let output = lead.leader(&delegate).run(QUESTION).await.expect("the leader runs");

    assert_eq!(output.text, "found");
    let refused = lead.body(1);
    assert!(refused.contains("no teammate is named `poet`") && refused.contains("one of: researcher"), "{refused}");
    assert!(lead.body(2).contains("FOUND-IT"));
    assert_eq!(researcher.bodies().len(), 1, "only the corrected call ran the teammate");
}

fn stalling(wire: Wire) -> impl std::future::Future<Output = Mock> {
    let stall =
        MockTurn::text("too late").with_fault(Fault::Stall { after_events: 1, duration: Duration::from_secs(60) });
    Mock::with(wire, [stall])
}

async fn cancelling_the_leader_stops_the_teammate(wire: Wire) {
    let lead = Mock::with(wire, [delegate_call("slow", "take your time")]).await;
    let slow = stalling(wire).await;
    let (member, mut finished) = watched(slow.member("slow", "Slow."));
    let delegate = Arc::new(DelegateTool::new("lead", [member]).expect("tool"));
    let handle = lead.leader(&delegate).start(QUESTION);

    slow.asked().await;
    handle.cancel.cancel();
    let output = handle.output().await.expect("the leader ends");

    assert!(matches!(output.outcome, RunOutcome::Cancelled { .. }), "{:?}", output.outcome);
    let teammate = tokio::time::timeout(Duration::from_secs(10), finished.recv())
        .await
        .expect("the teammate stops long before its stall ends")
        .expect("a result");
    assert!(!teammate.success, "{teammate:?}");
    assert!(teammate.error.as_deref().is_some_and(|e| e.contains("cancelled")), "{teammate:?}");
}

async fn a_delegation_past_its_timeout_stops_the_teammate(wire: Wire) {
    let lead = Mock::with(wire, [delegate_call("slow", "take your time"), MockTurn::text("gave up")]).await;
    let slow = stalling(wire).await;
    let (member, mut finished) = watched(slow.member("slow", "Slow."));
    let delegate = Arc::new(DelegateTool::new("lead", [member]).expect("tool").timeout(Duration::from_millis(300)));

    let output = lead.leader(&delegate).run(QUESTION).await.expect("the leader runs");

    assert_eq!(output.text, "gave up");
    let told = lead.body(1);
    assert!(told.contains("did not finish within"), "{told}");
    let teammate = tokio::time::timeout(Duration::from_secs(10), finished.recv())
        .await
        .expect("the teammate stops long before its stall ends")
        .expect("a result");
    assert!(!teammate.success, "{teammate:?}");
}
