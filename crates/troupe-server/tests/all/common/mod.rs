//! Shared by the server tests: a server over an agent whose model is the mock LLM server
//! (Anthropic wire, real loopback HTTP), an HTTP client, and an SSE reader.

#![allow(dead_code, unreachable_pub)]

use futures::StreamExt;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use troupe_model::anthropic::AnthropicWire;
use troupe_model::{ApiKey, HttpConfig, HttpProvider, LlmProvider};
use troupe_runtime::{Engine, FixedModel};
use troupe_server::{AgentLauncher, Server, ServerConfig};
use troupe_testkit::{MockLlmServer, MockTurn};

/// A running server and what it runs on.
pub struct Served {
    pub url: String,
    pub mock: MockLlmServer,
    pub workspace: tempfile::TempDir,
    pub client: reqwest::Client,
    pub token: Option<String>,
    pub shutdown: CancellationToken,
    pub serving: tokio::task::JoinHandle<Result<(), troupe_server::ServerError>>,
    pub server_hub: Arc<troupe_server::RunHub>,
}

/// Serves agent `coder` (the coding tools in a temporary workspace, model: the mock)
/// with `config`; the mock answers with `turns`, in order.
pub async fn serve(config: ServerConfig, turns: impl IntoIterator<Item = MockTurn>) -> Served {
    serve_with_store(config, turns, None).await
}

/// A SQLite store in a directory of its own, which lives as long as the directory.
pub async fn a_store() -> (tempfile::TempDir, Arc<dyn troupe_store::Store>) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let location = format!("sqlite://{}", dir.path().join("runs.db").display());
    let store = troupe_store::open(&location).await.expect("the store opens");
    (dir, store)
}

/// [`serve`], its runs recorded in `store` and looked up there too when given (as `troupe
/// serve` does).
pub async fn serve_with_store(
    config: ServerConfig,
    turns: impl IntoIterator<Item = MockTurn>,
    store: Option<Arc<dyn troupe_store::Store>>,
) -> Served {
    let mock = MockLlmServer::start().await.expect("mock server starts");
    mock.push_all(turns);
    let provider: Arc<dyn LlmProvider> = Arc::new(
        HttpProvider::new(
            HttpConfig::new("anthropic", mock.url(), Some(ApiKey::new("test-key"))),
            AnthropicWire::default(),
        )
        .expect("client"),
    );
    let workspace = tempfile::tempdir().expect("workspace");
    let mut engine = Engine::builder().resolver(Arc::new(FixedModel::new(provider, "mock-model")));
    if let Some(store) = &store {
        engine = engine.store(troupe_runtime::Durability::new(Arc::clone(store)));
    }
    let engine = engine.build();
    let agent = engine
        .agent("coder")
        .model("mock-model")
        .workspace(workspace.path())
        .coding_tools()
        .max_iterations(6)
        .build()
        .expect("agent builds");
    let token = config.tokens.first().map(|t| t.expose().to_owned());
    let mut server = Server::new(config, Arc::new(AgentLauncher::new().agent(agent, "Writes code")));
    if let Some(store) = store {
        server = server.with_store(store);
    }
    let server_hub = Arc::clone(server.hub());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let shutdown = CancellationToken::new();
    let serving = tokio::spawn(server.serve(listener, shutdown.clone()));
    Served { url, mock, workspace, client: reqwest::Client::new(), token, shutdown, serving, server_hub }
}

impl Served {
    pub fn get(&self, path: &str) -> reqwest::RequestBuilder {
        self.authed(self.client.get(format!("{}{path}", self.url)))
    }

    pub fn post(&self, path: &str) -> reqwest::RequestBuilder {
        self.authed(self.client.post(format!("{}{path}", self.url)))
    }

    fn authed(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    /// The request starting a run of `coder` on `instruction`, streamed or not, to add
    /// headers to before sending.
    pub fn start_request(&self, instruction: &str, stream: bool) -> reqwest::RequestBuilder {
        self.post("/v1/runs").json(&serde_json::json!({"agent": "coder", "instruction": instruction, "stream": stream}))
    }

    /// Starts a run of `coder` on `instruction` without streaming; its id.
    pub async fn start(&self, instruction: &str) -> String {
        let response = self.start_request(instruction, false).send().await.expect("request");
        assert_eq!(response.status(), 201, "{:?}", response.text().await);
        let body: serde_json::Value = response.json().await.expect("json");
        body["run_id"].as_str().expect("a run id").to_owned()
    }

    /// Reads the run's events from `after` until `until` says stop (inclusive) or the
    /// stream ends.
    pub async fn events_until(&self, run_id: &str, after: Option<usize>, until: impl Fn(&Frame) -> bool) -> Vec<Frame> {
        let mut request = self.get(&format!("/v1/runs/{run_id}/events"));
        if let Some(after) = after {
            request = request.header("last-event-id", after.to_string());
        }
        let response = request.send().await.expect("request");
        assert_eq!(response.status(), 200);
        let mut reader = SseReader::new(response);
        let mut frames = Vec::new();
        while let Some(frame) = reader.next().await {
            let stop = until(&frame);
            frames.push(frame);
            if stop {
                break;
            }
        }
        frames
    }

    /// Waits (at most 10 s) until the run's phase is `phase`.
    pub async fn wait_phase(&self, run_id: &str, phase: &str) -> serde_json::Value {
        let wait = async {
            loop {
                let view: serde_json::Value =
                    self.get(&format!("/v1/runs/{run_id}")).send().await.expect("request").json().await.expect("json");
                if view["phase"] == phase {
                    return view;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), wait).await.expect("the run reaches the phase")
    }

    pub async fn approve(&self, run_id: &str, call_id: &str) -> reqwest::Response {
        self.post(&format!("/v1/runs/{run_id}/signals"))
            .json(&serde_json::json!({"type": "approval", "call_id": call_id, "decision": {"type": "approve"}}))
            .send()
            .await
            .expect("request")
    }
}

/// One SSE frame.
#[derive(Clone, Debug, PartialEq)]
pub struct Frame {
    pub id: Option<usize>,
    pub event: Option<String>,
    pub data: serde_json::Value,
}

/// Frames from an SSE response, as they arrive.
pub struct SseReader {
    body: futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buffer: String,
}

impl SseReader {
    pub fn new(response: reqwest::Response) -> Self {
        SseReader { body: response.bytes_stream().boxed(), buffer: String::new() }
    }

    pub async fn next(&mut self) -> Option<Frame> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let mut frame = Frame { id: None, event: None, data: serde_json::Value::Null };
                let mut data = String::new();
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        frame.id = v.trim().parse().ok();
                    } else if let Some(v) = line.strip_prefix("event:") {
                        frame.event = Some(v.trim().to_owned());
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.strip_prefix(' ').unwrap_or(v));
                    }
                }
                if data.is_empty() {
                    continue; // a keep-alive comment
                }
                frame.data = serde_json::from_str(&data).expect("data is JSON");
                return Some(frame);
            }
            match self.body.next().await {
                Some(Ok(chunk)) => self.buffer.push_str(&String::from_utf8_lossy(&chunk)),
                _ => return None,
            }
        }
    }
}

/// A turn calling `fs.write` to create `path`.
pub fn write_call(id: &str, path: &str, content: &str) -> MockTurn {
    MockTurn::tool_call(id, "fs.write", serde_json::json!({"path": path, "content": content}))
}
