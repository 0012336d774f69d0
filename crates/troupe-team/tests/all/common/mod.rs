//! Shared by the team tests: one test per wire, a mock server with its HTTP provider, a
//! member that reports its results, and the tools a request offered.

#![allow(dead_code, unreachable_pub)]

use futures::future::BoxFuture;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use troupe_model::anthropic::AnthropicWire;
use troupe_model::openai_chat::OpenAiChatWire;
use troupe_model::{ApiKey, HttpConfig, HttpProvider, LlmProvider};
use troupe_runtime::{Agent, AgentBuilder, Engine, FixedModel};
use troupe_team::{AgentMember, EventSink, Member, MemberResult, MemberTask};
use troupe_testkit::{MockLlmServer, MockTurn};

/// One test per wire for each scenario `async fn scenario(wire: Wire)`.
#[macro_export]
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

/// The wire a mock speaks.
#[derive(Clone, Copy, Debug)]
pub enum Wire {
    Anthropic,
    OpenAiChat,
}

/// A mock server and the HTTP provider that talks to it.
pub struct Mock {
    pub server: MockLlmServer,
    pub provider: Arc<dyn LlmProvider>,
}

impl Mock {
    pub async fn start(wire: Wire) -> Self {
        let server = MockLlmServer::start().await.expect("mock server starts");
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

    /// A mock answering each request with `turns`, in order.
    pub async fn with(wire: Wire, turns: impl IntoIterator<Item = MockTurn>) -> Self {
        let mock = Mock::start(wire).await;
        mock.server.push_all(turns);
        mock
    }

    pub fn engine_over(provider: Arc<dyn LlmProvider>) -> Engine {
        Engine::builder().resolver(Arc::new(FixedModel::new(provider, "mock-model"))).build()
    }

    pub fn builder(&self, name: &str) -> AgentBuilder {
        Mock::engine_over(Arc::clone(&self.provider)).agent(name).max_iterations(5)
    }

    pub fn agent(&self, name: &str) -> Agent {
        self.builder(name).build().expect("agent builds")
    }

    pub fn member(&self, name: &str, description: &str) -> Arc<dyn Member> {
        AgentMember::new(self.agent(name), description).shared()
    }

    /// Every request body the server received, as JSON text.
    pub fn bodies(&self) -> Vec<String> {
        self.server.requests().iter().map(|r| r.body.to_string()).collect()
    }

    pub fn body(&self, n: usize) -> String {
        self.bodies().get(n).cloned().unwrap_or_else(|| panic!("request {n} was made: {:?}", self.bodies()))
    }

    /// Waits (at most 10 s) until the server has been asked once.
    pub async fn asked(&self) {
        let wait = async {
            while self.server.requests().is_empty() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), wait).await.expect("the server was asked");
    }
}

/// A member that reports every result of the member it wraps, even when nobody awaits it.
pub struct Watched {
    pub inner: Arc<dyn Member>,
    pub done: mpsc::UnboundedSender<MemberResult>,
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

/// `member`, reporting its results on the receiver.
pub fn watched(member: Arc<dyn Member>) -> (Arc<dyn Member>, mpsc::UnboundedReceiver<MemberResult>) {
    let (done, rx) = mpsc::unbounded_channel();
    (Arc::new(Watched { inner: member, done }), rx)
}

/// The names of the tools offered in a request body, on either wire.
pub fn offered_tools(body: &str) -> Vec<String> {
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
