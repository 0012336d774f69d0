//! [`HttpProvider`]: the HTTP and streaming plumbing shared by every vendor.

use crate::api_key::ApiKey;
use crate::error::{Error, Result, RetryHint};
use crate::provider::{EventStream, LlmProvider};
use crate::tool_names::ToolNameCodec;
use crate::wire::{EventParser, WireFormat};
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use troupe_core::{ModelRequest, StreamEvent};

/// Time limits of one HTTP call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// To establish the connection.
    pub connect: Duration,
    /// From sending the request to the response headers.
    pub response: Duration,
    /// Between two chunks of the body; a stream silent for longer has stalled.
    pub idle: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts { connect: Duration::from_secs(10), response: Duration::from_secs(120), idle: Duration::from_secs(90) }
    }
}

/// How to reach one provider over HTTP.
#[derive(Clone, Debug)]
pub struct HttpConfig {
    /// The provider's name (`anthropic`, `groq`, ...), used in ids and errors.
    pub name: String,
    /// The base URL, without a trailing slash (`https://api.anthropic.com`).
    pub base_url: String,
    /// The key, if the provider needs one.
    pub api_key: Option<ApiKey>,
    /// Time limits.
    pub timeouts: Timeouts,
    /// Extra headers sent with every request.
    pub headers: Vec<(String, String)>,
}

impl HttpConfig {
    /// A configuration with default timeouts.
    pub fn new(name: impl Into<String>, base_url: impl Into<String>, api_key: Option<ApiKey>) -> Self {
        let base_url: String = base_url.into();
        HttpConfig {
            name: name.into(),
            base_url: base_url.trim_end_matches('/').to_owned(),
            api_key,
            timeouts: Timeouts::default(),
            headers: Vec::new(),
        }
    }

    /// Sets the time limits.
    pub fn timeouts(mut self, timeouts: Timeouts) -> Self {
        self.timeouts = timeouts;
        self
    }
}

/// A provider speaking wire format `W` over HTTP with SSE streaming.
///
/// The vendor-specific parts live in `W` ([`WireFormat`]); this type adds the base URL and
/// key, tool-name encoding, timeouts, error mapping of non-success responses and
/// cancellation between chunks.
pub struct HttpProvider<W> {
    config: HttpConfig,
    wire: W,
    client: reqwest::Client,
}

impl<W> std::fmt::Debug for HttpProvider<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpProvider").field("config", &self.config).finish_non_exhaustive()
    }
}

impl<W: WireFormat> HttpProvider<W> {
    /// A provider with its own connection pool.
    pub fn new(config: HttpConfig, wire: W) -> Result<Self> {
        let client = reqwest::Client::builder()
            .connect_timeout(config.timeouts.connect)
            .build()
            .map_err(|e| Error::Config(format!("cannot build the HTTP client: {e}")))?;
        Ok(Self::with_client(config, wire, client))
    }

    /// A provider sharing `client`'s connection pool.
    pub fn with_client(config: HttpConfig, wire: W, client: reqwest::Client) -> Self {
        HttpProvider { config, wire, client }
    }

    /// The configuration.
    pub fn config(&self) -> &HttpConfig {
        &self.config
    }

    /// The wire format.
    pub fn wire(&self) -> &W {
        &self.wire
    }

    async fn open(&self, request: &ModelRequest, cancel: CancellationToken) -> Result<EventStream> {
        let name = self.config.name.as_str();
        let codec = Arc::new(ToolNameCodec::for_request(request)?);
        let encoded = codec.encode_request(request);
        let wire_request = self.wire.build_request(&encoded)?;
        let url = format!("{}{}", self.config.base_url, wire_request.path);
        let mut builder = self.client.post(&url).json(&wire_request.body).header("accept", "text/event-stream");
        if let Some(key) = &self.config.api_key {
            for (header, value) in self.wire.auth_headers(key.expose()) {
                builder = builder.header(header, value);
            }
        }
        for (header, value) in &wire_request.headers {
            builder = builder.header(*header, value);
        }
        for (header, value) in &self.config.headers {
            builder = builder.header(header, value);
        }
        let timeouts = self.config.timeouts;
        let response = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(Error::Cancelled),
            sent = tokio::time::timeout(timeouts.response, builder.send()) => match sent {
                Err(_) => return Err(Error::Timeout { provider: name.to_owned(), phase: "waiting for the response", after: timeouts.response }),
                Ok(Err(e)) => return Err(transport_error(name, &e, timeouts)),
                Ok(Ok(response)) => response,
            },
        };
        let status = response.status();
        if !status.is_success() {
            let hint = retry_hint(response.headers());
            let body = read_error_body(response).await;
            return Err(self.wire.map_error(name, status.as_u16(), hint, &body));
        }
        let state = StreamState {
            provider: name.to_owned(),
            body: response.bytes_stream().boxed(),
            parser: EventParser::new(name, self.wire.parser(name)),
            pending: VecDeque::new(),
            scratch: Vec::new(),
            codec,
            cancel,
            idle: timeouts.idle,
            done: false,
            pending_error: None,
        };
        Ok(futures::stream::unfold(state, StreamState::next).boxed())
    }
}

impl<W: WireFormat> LlmProvider for HttpProvider<W> {
    fn name(&self) -> &str {
        &self.config.name
    }

    fn stream<'a>(
        &'a self,
        request: &'a ModelRequest,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<EventStream>> {
        self.open(request, cancel).boxed()
    }
}

struct StreamState<P> {
    provider: String,
    body: futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    parser: EventParser<P>,
    pending: VecDeque<StreamEvent>,
    scratch: Vec<StreamEvent>,
    codec: Arc<ToolNameCodec>,
    cancel: CancellationToken,
    idle: Duration,
    done: bool,
    pending_error: Option<Error>,
}

impl<P: crate::wire::StreamParser> StreamState<P> {
    async fn next(mut self) -> Option<(Result<StreamEvent>, Self)> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Some((Ok(event), self));
            }
            if let Some(error) = self.pending_error.take() {
                return Some((Err(error), self));
            }
            if self.done {
                return None;
            }
            let chunk = tokio::select! {
                biased;
                _ = self.cancel.cancelled() => Err(Error::Cancelled),
                chunk = tokio::time::timeout(self.idle, self.body.next()) => match chunk {
                    Err(_) => Err(Error::Timeout { provider: self.provider.clone(), phase: "waiting for the next event", after: self.idle }),
                    Ok(Some(Err(e))) => Err(Error::Transport { provider: self.provider.clone(), message: e.to_string() }),
                    Ok(Some(Ok(bytes))) => Ok(Some(bytes)),
                    Ok(None) => Ok(None),
                },
            };
            let parsed = match chunk {
                Ok(Some(bytes)) => self.parser.feed(&bytes, &mut self.scratch),
                Ok(None) => {
                    self.done = true;
                    self.parser.finish(&mut self.scratch)
                }
                Err(e) => Err(e),
            };
            let codec = Arc::clone(&self.codec);
            self.pending.extend(self.scratch.drain(..).map(|event| decode_names(&codec, event)));
            if let Err(e) = parsed {
                // Events parsed before the failure are still delivered, then the error.
                self.done = true;
                self.pending_error = Some(e);
            }
        }
    }
}

fn decode_names(codec: &ToolNameCodec, event: StreamEvent) -> StreamEvent {
    match event {
        StreamEvent::ToolUseStart { index, id, name } if !codec.is_identity() => {
            let name = codec.decode(&name).to_owned();
            StreamEvent::ToolUseStart { index, id, name }
        }
        other => other,
    }
}

/// Reads `retry-after-ms`, `retry-after` (seconds or an HTTP date) and `x-should-retry`.
/// Delays outside 0–60 s are ignored, as the vendors' own SDKs do.
pub fn retry_hint(headers: &reqwest::header::HeaderMap) -> RetryHint {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    let within = |d: Duration| (d <= Duration::from_secs(60)).then_some(d);
    let after = text("retry-after-ms")
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|ms| ms.is_finite() && *ms >= 0.0)
        .map(|ms| Duration::from_secs_f64(ms / 1000.0))
        .and_then(within)
        .or_else(|| {
            let value = text("retry-after")?;
            if let Ok(seconds) = value.parse::<f64>() {
                return (seconds.is_finite() && seconds >= 0.0)
                    .then(|| Duration::from_secs_f64(seconds))
                    .and_then(within);
            }
            let date = httpdate::parse_http_date(value).ok()?;
            within(date.duration_since(std::time::SystemTime::now()).unwrap_or(Duration::ZERO))
        });
    let should_retry = match text("x-should-retry") {
        Some("true") => Some(true),
        Some("false") => Some(false),
        _ => None,
    };
    RetryHint { after, should_retry }
}

async fn read_error_body(response: reqwest::Response) -> Vec<u8> {
    // Error bodies are small; cap what is kept so a hostile server cannot fill memory.
    const LIMIT: usize = 64 * 1024;
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(Ok(chunk)) = stream.next().await {
        body.extend_from_slice(&chunk[..chunk.len().min(LIMIT - body.len())]);
        if body.len() >= LIMIT {
            break;
        }
    }
    body
}

fn transport_error(provider: &str, error: &reqwest::Error, timeouts: Timeouts) -> Error {
    if error.is_timeout() {
        return Error::Timeout { provider: provider.to_owned(), phase: "connecting", after: timeouts.connect };
    }
    // reqwest's message names the URL, never the headers, so the key cannot leak here.
    Error::Transport { provider: provider.to_owned(), message: error.to_string() }
}
