//! [`MockLlmServer`]: a real HTTP server on loopback that speaks each vendor's wire format.

use crate::encode::Vendor;
use crate::script::{Fault, MockTurn};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{OriginalUri, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::Response;
use axum::routing::post;
use axum::serve::ListenerExt;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio_util::sync::CancellationToken;

/// A request the server received.
#[derive(Clone, Debug)]
pub struct RecordedRequest {
    /// Which endpoint it reached.
    pub vendor: Vendor,
    /// Its path and query.
    pub path: String,
    /// Its headers, names lower-case.
    pub headers: Vec<(String, String)>,
    /// Its JSON body (`Null` if it was not JSON).
    pub body: serde_json::Value,
    /// Its body as sent, byte for byte (what prompt-cache prefixes are compared on).
    pub raw: Bytes,
}

impl RecordedRequest {
    /// The value of header `name`.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// Chooses the reply to a request when no scripted turn is queued.
pub type Responder = dyn Fn(&RecordedRequest) -> MockTurn + Send + Sync;

#[derive(Default)]
struct ServerState {
    turns: Mutex<VecDeque<MockTurn>>,
    requests: Mutex<Vec<RecordedRequest>>,
    responder: Mutex<Option<Arc<Responder>>>,
    connections: AtomicUsize,
    /// Set when requests are not kept (see [`MockLlmServer::keep_no_requests`]).
    forgets_requests: AtomicBool,
    /// When each streamed answer the client stopped reading before its end was dropped.
    abandoned: Mutex<Vec<std::time::SystemTime>>,
}

/// Notes, when dropped before it is finished, that the client abandoned a streamed answer.
struct Abandoned {
    state: Arc<ServerState>,
    finished: bool,
}

impl Abandoned {
    /// The whole answer was sent.
    fn finish(mut self) {
        self.finished = true;
    }
}

impl Drop for Abandoned {
    fn drop(&mut self) {
        if !self.finished {
            lock(&self.state.abandoned).push(std::time::SystemTime::now());
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking test thread must not wedge the server for the others.
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A mock LLM server bound to `127.0.0.1` on a free port.
///
/// Every vendor endpoint draws from one queue of scripted [`MockTurn`]s, in order; when
/// the queue is empty the [`Responder`], if set, answers, and otherwise the request gets
/// an HTTP 500 in the vendor's error format. Each request is recorded.
///
/// Endpoints: `POST /v1/messages` (Anthropic), `POST /v1/chat/completions` (OpenAI Chat),
/// `POST /v1/responses` (OpenAI Responses), `POST /v1beta/models/{model}:streamGenerateContent`
/// (Gemini).
pub struct MockLlmServer {
    addr: SocketAddr,
    state: Arc<ServerState>,
    shutdown: CancellationToken,
}

impl MockLlmServer {
    /// Starts a server on a free loopback port.
    pub async fn start() -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(ServerState::default());
        let router = Router::new()
            .route("/v1/messages", post(anthropic))
            .route("/v1/chat/completions", post(openai_chat))
            .route("/v1/responses", post(openai_responses))
            .route("/v1beta/models/{*rest}", post(gemini))
            .with_state(Arc::clone(&state));
        let shutdown = CancellationToken::new();
        let stop = shutdown.clone();
        let counted = Arc::clone(&state);
        let listener = listener.tap_io(move |tcp| {
            counted.connections.fetch_add(1, Ordering::Relaxed);
            // As a vendor's server does: each event goes out as it is written, not held
            // back until the client acknowledges the one before.
            let _ = tcp.set_nodelay(true);
        });
        tokio::spawn(async move {
            let _ = axum::serve(listener, router).with_graceful_shutdown(stop.cancelled_owned()).await;
        });
        Ok(MockLlmServer { addr, state, shutdown })
    }

    /// The server's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`: the base URL for Anthropic and Gemini clients.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `http://127.0.0.1:PORT/v1`: the base URL for OpenAI-style clients.
    pub fn openai_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Queues a turn.
    pub fn push(&self, turn: MockTurn) -> &Self {
        lock(&self.state.turns).push_back(turn);
        self
    }

    /// Queues several turns.
    pub fn push_all(&self, turns: impl IntoIterator<Item = MockTurn>) -> &Self {
        lock(&self.state.turns).extend(turns);
        self
    }

    /// Answers requests with `responder` once the queue is empty.
    pub fn respond_with(&self, responder: impl Fn(&RecordedRequest) -> MockTurn + Send + Sync + 'static) -> &Self {
        *lock(&self.state.responder) = Some(Arc::new(responder));
        self
    }

    /// The turns still queued.
    pub fn remaining(&self) -> usize {
        lock(&self.state.turns).len()
    }

    /// How many TCP connections the server has accepted: a client that reuses its pool
    /// opens one per request it has in flight at once, not one per request.
    pub fn connections(&self) -> usize {
        self.state.connections.load(Ordering::Relaxed)
    }

    /// When each streamed answer was abandoned by its client (the connection closed, or
    /// the request dropped) before its end, in order: how a test sees a model call
    /// stopped.
    pub fn abandoned_streams(&self) -> Vec<std::time::SystemTime> {
        lock(&self.state.abandoned).clone()
    }

    /// Stops keeping the requests it receives: [`requests`](Self::requests) says nothing
    /// of those received from now on. For a benchmark's server, which would otherwise grow
    /// by every request it serves, and spend the machine's time faulting in the memory for
    /// them, beside the process being measured.
    pub fn keep_no_requests(&self) -> &Self {
        self.state.forgets_requests.store(true, Ordering::Relaxed);
        self
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.state.requests).clone()
    }
}

impl Drop for MockLlmServer {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

async fn anthropic(state: State<Arc<ServerState>>, uri: OriginalUri, headers: HeaderMap, body: Bytes) -> Response {
    respond(Vendor::Anthropic, state, uri, headers, body)
}

async fn openai_chat(state: State<Arc<ServerState>>, uri: OriginalUri, headers: HeaderMap, body: Bytes) -> Response {
    respond(Vendor::OpenAiChat, state, uri, headers, body)
}

async fn openai_responses(
    state: State<Arc<ServerState>>,
    uri: OriginalUri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    respond(Vendor::OpenAiResponses, state, uri, headers, body)
}

async fn gemini(state: State<Arc<ServerState>>, uri: OriginalUri, headers: HeaderMap, body: Bytes) -> Response {
    respond(Vendor::Gemini, state, uri, headers, body)
}

fn respond(
    vendor: Vendor,
    State(state): State<Arc<ServerState>>,
    OriginalUri(uri): OriginalUri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let request = RecordedRequest {
        vendor,
        path: uri.path_and_query().map(|p| p.as_str().to_owned()).unwrap_or_default(),
        headers: headers
            .iter()
            .map(|(n, v)| (n.as_str().to_owned(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
            .collect(),
        body: serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null),
        raw: body,
    };
    let queued = lock(&state.turns).pop_front();
    let responder = lock(&state.responder).clone();
    let turn = queued.or_else(|| responder.map(|r| r(&request)));
    if !state.forgets_requests.load(Ordering::Relaxed) {
        lock(&state.requests).push(request);
    }
    let encoder = vendor.encoder();
    let Some(turn) = turn else {
        return error_response(500, &[], encoder.error_body(500, "mock server: no scripted turn left"));
    };
    let mut events = encoder.encode(&turn);
    match &turn.fault {
        Some(Fault::Status { status, headers, message }) => {
            return error_response(*status, headers, encoder.error_body(*status, message));
        }
        Some(Fault::OverloadedMidStream { after_events }) => {
            events.truncate(*after_events);
            events.push(encoder.overloaded_event("Overloaded"));
        }
        Some(Fault::Truncate { after_events }) => events.truncate(*after_events),
        Some(Fault::InvalidJson { after_events }) => {
            let at = (*after_events).min(events.len());
            events.insert(at, "data: {\"this is\": not json\n\n".to_owned());
        }
        Some(Fault::Stall { .. }) | None => {}
    }
    let stall = match &turn.fault {
        Some(Fault::Stall { after_events, duration }) => Some((*after_events, *duration)),
        _ => None,
    };
    let chunks = chunk_events(events, turn.chunk_bytes);
    let delay = turn.event_delay;
    let latency = turn.latency;
    let watch = Abandoned { state: Arc::clone(&state), finished: false };
    let body = futures::stream::unfold(
        (chunks.into_iter().enumerate(), stall, delay, watch),
        move |(mut it, stall, delay, watch)| async move {
            let Some((i, (event_index, chunk))) = it.next() else {
                watch.finish();
                return None;
            };
            if let (Some(latency), 0) = (latency, i) {
                tokio::time::sleep(latency).await;
            }
            if let Some((after, duration)) = stall
                && event_index == after
                && chunk.first_of_event
            {
                tokio::time::sleep(duration).await;
            }
            if let (Some(delay), true) = (delay, i > 0 && chunk.first_of_event) {
                tokio::time::sleep(delay).await;
            }
            Some((Ok::<_, std::io::Error>(Bytes::from(chunk.bytes)), (it, stall, delay, watch)))
        },
    );
    let content_type = "text/event-stream";
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", content_type)
        .header("cache-control", "no-cache")
        .body(Body::from_stream(body))
        .unwrap_or_else(|_| Response::new(Body::empty()))
}

struct Chunk {
    bytes: Vec<u8>,
    first_of_event: bool,
}

/// Each event split into chunks of at most `size` bytes (whole events when `None`),
/// tagged with the index of the event they belong to.
fn chunk_events(events: Vec<String>, size: Option<usize>) -> Vec<(usize, Chunk)> {
    let mut chunks = Vec::new();
    for (index, event) in events.into_iter().enumerate() {
        let bytes = event.into_bytes();
        match size {
            None => chunks.push((index, Chunk { bytes, first_of_event: true })),
            Some(size) => {
                for (n, piece) in bytes.chunks(size.max(1)).enumerate() {
                    chunks.push((index, Chunk { bytes: piece.to_vec(), first_of_event: n == 0 }));
                }
            }
        }
    }
    chunks
}

fn error_response(status: u16, headers: &[(String, String)], body: String) -> Response {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let map = response.headers_mut();
    map.insert("content-type", HeaderValue::from_static("application/json"));
    for (name, value) in headers {
        if let (Ok(name), Ok(value)) = (HeaderName::try_from(name.as_str()), HeaderValue::try_from(value.as_str())) {
            map.insert(name, value);
        }
    }
    response
}
