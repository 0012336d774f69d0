//! [`HttpProvider`]: the HTTP and streaming plumbing shared by every vendor.

use crate::answer_tool::{self, AnswerCall};
use crate::api_key::ApiKey;
use crate::error::{Error, Result, RetryHint};
use crate::provider::{EventStream, LlmProvider};
use crate::tool_names::ToolNameCodec;
use crate::wire::{EncodedRequest, EventParser, WireFormat};
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};
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
///
/// Its `Debug` output shows the configured headers' names, not their values: like the
/// key, a header may carry a credential.
#[derive(Clone)]
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

impl std::fmt::Debug for HttpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let headers: Vec<(&str, &str)> = self.headers.iter().map(|(name, _)| (name.as_str(), "<redacted>")).collect();
        f.debug_struct("HttpConfig")
            .field("name", &self.name)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key)
            .field("timeouts", &self.timeouts)
            .field("headers", &headers)
            .finish()
    }
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
    /// The headers every request carries, built once: or why they cannot be, said at
    /// each request (as a configuration error, without the offending value).
    headers: std::result::Result<HeaderMap, String>,
    /// The last endpoint requested, by its path, and its URL parsed: a provider's requests
    /// nearly all go to one endpoint, and parsing its URL was a few per cent of a request's
    /// own work.
    endpoint: Mutex<Option<(String, reqwest::Url)>>,
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
        let headers = fixed_headers(&config, &wire);
        HttpProvider { config, wire, client, headers, endpoint: Mutex::new(None) }
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
        // A typed answer on a wire without structured outputs travels as a tool call.
        let with_answer_tool;
        self.wire.check_input(name, request)?;
        let adapted;
        let (request, answer) = match &request.output {
            Some(_) if !self.wire.native_output() => {
                with_answer_tool = answer_tool::offer(name, request)?;
                (&with_answer_tool, Some(AnswerCall::default()))
            }
            // Checked, and shaped to the vendor's subset, before anything is sent.
            Some(output) => match self.wire.adapt_output(name, output)? {
                Some(output) => {
                    adapted = ModelRequest { output: Some(output), ..request.clone() };
                    (&adapted, None)
                }
                None => (request, None),
            },
            None => (request, None),
        };
        let codec = Arc::new(ToolNameCodec::for_request(request)?);
        let encoded = codec.encode_request(request);
        let wire_request = self.wire.encode_request(&encoded)?;
        let request = self.http_request(wire_request)?;
        let timeouts = self.config.timeouts;
        let response = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(Error::Cancelled),
            sent = tokio::time::timeout(timeouts.response, self.client.execute(request)) => match sent {
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
        Ok(HttpEventStream {
            provider: name.to_owned(),
            body: response.bytes_stream().boxed(),
            parser: EventParser::new(name, self.wire.parser(name)),
            pending: VecDeque::new(),
            scratch: Vec::new(),
            codec,
            answer,
            cancelled: Box::pin(cancel.cancelled_owned()),
            idle: timeouts.idle,
            idle_timer: Box::pin(tokio::time::sleep(timeouts.idle)),
            done: false,
            pending_error: None,
        }
        .boxed())
    }
}

impl<W> HttpProvider<W> {
    /// The HTTP request for `encoded`: the fixed headers, then the wire's own for this
    /// request.
    fn http_request(&self, encoded: EncodedRequest) -> Result<reqwest::Request> {
        let name = self.config.name.as_str();
        let config_error = |why: &str| Error::Config(format!("provider `{name}`: {why}"));
        let mut headers = self.headers.as_ref().map_err(|why| config_error(why))?.clone();
        for (header, value) in encoded.headers {
            let value = HeaderValue::try_from(value)
                .map_err(|_| config_error(&format!("the value of header `{header}` is not a valid header value")))?;
            headers.append(header_name(header).map_err(|why| config_error(&why))?, value);
        }
        let url = self.endpoint(&encoded.path).map_err(|why| config_error(&why))?;
        let mut request = reqwest::Request::new(reqwest::Method::POST, url);
        *request.headers_mut() = headers;
        *request.body_mut() = Some(encoded.body.into());
        Ok(request)
    }

    /// The URL of the base URL followed by `path`: the last one's, when `path` is the same.
    fn endpoint(&self, path: &str) -> std::result::Result<reqwest::Url, String> {
        let mut last = self.endpoint.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((last_path, url)) = last.as_ref()
            && last_path == path
        {
            return Ok(url.clone());
        }
        let text = format!("{}{path}", self.config.base_url);
        let url = reqwest::Url::parse(&text).map_err(|e| format!("`{text}` is not a URL: {e}"))?;
        *last = Some((path.to_owned(), url.clone()));
        Ok(url)
    }
}

/// The headers every request of a provider carries: the content types, the key's headers
/// and the configured ones. The key's are marked sensitive, and so are the configured ones,
/// which may carry a credential too (a gateway's token, Azure's `api-key`): `Debug` does
/// not print them and HTTP/2 never indexes them.
fn fixed_headers<W: WireFormat>(config: &HttpConfig, wire: &W) -> std::result::Result<HeaderMap, String> {
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
    if let Some(key) = &config.api_key {
        for (header, value) in wire.auth_headers(key.expose()) {
            let mut value = HeaderValue::try_from(value).map_err(|_| {
                format!("the API key cannot be sent in the `{header}` header: it holds a character no header may")
            })?;
            value.set_sensitive(true);
            headers.append(header_name(header)?, value);
        }
    }
    for (header, value) in &config.headers {
        let mut value = HeaderValue::try_from(value.as_str())
            .map_err(|_| format!("the value of header `{header}` is not a valid header value"))?;
        value.set_sensitive(true);
        headers.append(header_name(header)?, value);
    }
    Ok(headers)
}

fn header_name(header: &str) -> std::result::Result<HeaderName, String> {
    HeaderName::try_from(header).map_err(|_| format!("`{header}` is not a valid header name"))
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

/// The events of one HTTP response: body chunks fed to the parser as they arrive.
///
/// Written by hand rather than with `stream::unfold` so that the per-chunk work is only
/// the parse: the cancellation future and the idle timer are created once and the timer is
/// reset, not rebuilt, on each chunk.
struct HttpEventStream<P> {
    provider: String,
    body: futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    parser: EventParser<P>,
    pending: VecDeque<StreamEvent>,
    scratch: Vec<StreamEvent>,
    codec: Arc<ToolNameCodec>,
    /// Set when a typed answer was asked for as a tool call, to turn it back into text.
    answer: Option<AnswerCall>,
    cancelled: Pin<Box<WaitForCancellationFutureOwned>>,
    idle: Duration,
    idle_timer: Pin<Box<tokio::time::Sleep>>,
    done: bool,
    pending_error: Option<Error>,
}

impl<P: crate::wire::StreamParser> HttpEventStream<P> {
    /// Parses what arrived (or the end of the body) and queues the events; a failure is
    /// queued after the events parsed before it.
    fn absorb(&mut self, parsed: Result<()>) {
        let codec = &self.codec;
        let events = self.scratch.drain(..).map(|event| decode_names(codec, event));
        match &mut self.answer {
            None => self.pending.extend(events),
            Some(answer) => self.pending.extend(events.filter_map(|event| answer.map(event))),
        }
        if let Err(e) = parsed {
            self.done = true;
            self.pending_error = Some(e);
        }
    }
}

impl<P: crate::wire::StreamParser + Unpin> futures::Stream for HttpEventStream<P> {
    type Item = Result<StreamEvent>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(event) = this.pending.pop_front() {
                return Poll::Ready(Some(Ok(event)));
            }
            if let Some(error) = this.pending_error.take() {
                return Poll::Ready(Some(Err(error)));
            }
            if this.done {
                return Poll::Ready(None);
            }
            if this.cancelled.as_mut().poll(cx).is_ready() {
                this.done = true;
                return Poll::Ready(Some(Err(Error::Cancelled)));
            }
            match this.body.as_mut().poll_next(cx) {
                Poll::Ready(Some(Ok(bytes))) => {
                    this.idle_timer.as_mut().reset(after(this.idle));
                    let parsed = this.parser.feed(&bytes, &mut this.scratch);
                    this.absorb(parsed);
                }
                Poll::Ready(Some(Err(e))) => {
                    this.done = true;
                    return Poll::Ready(Some(Err(Error::Transport {
                        provider: this.provider.clone(),
                        message: e.to_string(),
                    })));
                }
                Poll::Ready(None) => {
                    this.done = true;
                    let parsed = this.parser.finish(&mut this.scratch);
                    this.absorb(parsed);
                }
                Poll::Pending => {
                    if this.idle_timer.as_mut().poll(cx).is_ready() {
                        this.done = true;
                        return Poll::Ready(Some(Err(Error::Timeout {
                            provider: this.provider.clone(),
                            phase: "waiting for the next event",
                            after: this.idle,
                        })));
                    }
                    return Poll::Pending;
                }
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

/// `idle` from now; an `idle` past what an `Instant` holds (`Duration::MAX`: no limit) is
/// thirty years on, as `tokio::time::sleep` takes it.
fn after(idle: Duration) -> tokio::time::Instant {
    let now = tokio::time::Instant::now();
    now.checked_add(idle).unwrap_or_else(|| now + Duration::from_secs(30 * 365 * 86_400))
}

/// Reads `retry-after-ms`, `retry-after` (seconds or an HTTP date) and `x-should-retry`.
/// Delays outside 0–60 s are ignored, as the vendors' own SDKs do.
pub fn retry_hint(headers: &reqwest::header::HeaderMap) -> RetryHint {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    let within = |d: Duration| (d <= Duration::from_secs(60)).then_some(d);
    let after = text("retry-after-ms")
        .and_then(|v| v.parse::<f64>().ok())
        // Not `from_secs_f64`, which panics on a value no `Duration` holds (`1e23`).
        .and_then(|ms| Duration::try_from_secs_f64(ms / 1000.0).ok())
        .and_then(within)
        .or_else(|| {
            let value = text("retry-after")?;
            if let Ok(seconds) = value.parse::<f64>() {
                return Duration::try_from_secs_f64(seconds).ok().and_then(within);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openai_chat::OpenAiChatWire;

    /// The key's header and the configured ones are marked sensitive: `Debug` does not
    /// print them, and HTTP/2 never indexes them.
    #[test]
    fn the_keys_header_and_configured_ones_are_sensitive() {
        let mut config = HttpConfig::new("openai", "http://127.0.0.1:1", Some(ApiKey::new("sk-secret")));
        config.headers = vec![("x-gateway-token".into(), "tok-secret".into())];
        let headers = fixed_headers(&config, &OpenAiChatWire::default()).expect("valid headers");
        let key = headers.get("authorization").expect("the key's header");
        assert_eq!(key.to_str().ok(), Some("Bearer sk-secret"));
        assert!(key.is_sensitive());
        assert!(headers.get("x-gateway-token").is_some_and(HeaderValue::is_sensitive));
        assert!(!headers.get("content-type").is_some_and(HeaderValue::is_sensitive));
        assert!(!format!("{headers:?}").contains("secret"), "{headers:?}");
    }

    /// A provider's `Debug` output (what a log line of it shows) names its configured
    /// headers but shows neither their values nor the key.
    #[test]
    fn debug_output_shows_neither_the_key_nor_a_configured_headers_value() {
        let mut config = HttpConfig::new("openai", "http://127.0.0.1:1", Some(ApiKey::new("sk-secret")));
        config.headers = vec![("x-gateway-token".into(), "tok-secret".into())];
        let provider = HttpProvider::new(config, OpenAiChatWire::default()).expect("client builds");
        let shown = format!("{provider:?}");
        assert!(shown.contains("x-gateway-token") && shown.contains("127.0.0.1"), "{shown}");
        assert!(!shown.contains("secret"), "{shown}");
    }

    /// A request's URL is its endpoint's, whichever path came before: the URL kept from
    /// the last request is reused only for the same path.
    #[test]
    fn each_request_goes_to_its_own_paths_url() {
        let config = HttpConfig::new("gemini", "http://127.0.0.1:1/v1beta", None);
        let provider = HttpProvider::new(config, OpenAiChatWire::default()).expect("client builds");
        let url = |path: &str| provider.endpoint(path).map(String::from);
        let a = "/models/a:streamGenerateContent?alt=sse";
        let b = "/models/b:streamGenerateContent?alt=sse";
        assert_eq!(url(a).as_deref(), Ok("http://127.0.0.1:1/v1beta/models/a:streamGenerateContent?alt=sse"));
        assert_eq!(url(a).as_deref(), Ok("http://127.0.0.1:1/v1beta/models/a:streamGenerateContent?alt=sse"));
        assert_eq!(url(b).as_deref(), Ok("http://127.0.0.1:1/v1beta/models/b:streamGenerateContent?alt=sse"));
        // What the next request to the same path takes as it is, without parsing it again.
        let kept = provider.endpoint.lock().expect("not poisoned").clone().map(|(path, url)| (path, String::from(url)));
        assert_eq!(
            kept,
            Some((b.to_owned(), "http://127.0.0.1:1/v1beta/models/b:streamGenerateContent?alt=sse".to_owned()))
        );
        assert_eq!(url(a).as_deref(), Ok("http://127.0.0.1:1/v1beta/models/a:streamGenerateContent?alt=sse"));
        let bad = HttpProvider::new(HttpConfig::new("bad", "not a url", None), OpenAiChatWire::default())
            .expect("client builds");
        let refused = bad.endpoint("/chat/completions").expect_err("not a URL");
        assert!(refused.contains("`not a url/chat/completions` is not a URL"), "{refused}");
        assert!(bad.endpoint("/chat/completions").is_err(), "a bad URL is not kept");
    }
}
