//! The seam between the HTTP plumbing and a vendor: how a request is written and how the
//! streamed answer is read.

use crate::error::{Error, Result, RetryHint};
use crate::sse::{SseDecoder, SseError, SseFrame};
use troupe_core::{ModelRequest, OutputSchema, StreamEvent};

/// Reads one vendor's SSE frames into [`StreamEvent`]s: a state machine that sees each
/// frame once and keeps what it needs (open blocks, running usage) between frames.
pub trait StreamParser: Send {
    /// Consumes one frame, pushing the events it completes onto `out`.
    fn on_frame(&mut self, frame: SseFrame<'_>, out: &mut Vec<StreamEvent>) -> Result<()>;

    /// The byte stream ended. Pushes what is still pending and fails with
    /// [`Error::Truncated`] if the response stopped before its end marker.
    fn finish(&mut self, out: &mut Vec<StreamEvent>) -> Result<()>;
}

/// A vendor's HTTP request, before the base URL and authentication are added.
#[derive(Clone, Debug, PartialEq)]
pub struct WireRequest {
    /// The path after the base URL, with its query (`/v1/messages`,
    /// `/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse`).
    pub path: String,
    /// The JSON body.
    pub body: serde_json::Value,
    /// Extra headers the vendor requires (besides authentication).
    pub headers: Vec<(&'static str, String)>,
}

/// A vendor's HTTP request serialized for sending: what [`WireFormat::encode_request`]
/// returns.
#[derive(Clone, Debug, PartialEq)]
pub struct EncodedRequest {
    /// The path after the base URL, with its query.
    pub path: String,
    /// The JSON body as bytes.
    pub body: Vec<u8>,
    /// Extra headers the vendor requires (besides authentication).
    pub headers: Vec<(&'static str, String)>,
}

/// How one vendor's API is spoken.
pub trait WireFormat: Send + Sync + 'static {
    /// The stream parser of this format.
    type Parser: StreamParser + Unpin + 'static;

    /// Translates a request (whose tool names are already wire-safe) into an inspectable
    /// JSON body: what snapshot tests and debugging look at.
    fn build_request(&self, request: &ModelRequest) -> Result<WireRequest>;

    /// The request as bytes, which is what is sent. The default serializes
    /// [`build_request`](WireFormat::build_request)'s JSON; a format whose body is a typed
    /// struct overrides it to serialize that struct directly and skip the intermediate
    /// JSON tree (a measurable share of a turn's CPU). Both must describe the same body.
    fn encode_request(&self, request: &ModelRequest) -> Result<EncodedRequest> {
        let WireRequest { path, body, headers } = self.build_request(request)?;
        let body =
            serde_json::to_vec(&body).map_err(|e| Error::Config(format!("cannot write the request body: {e}")))?;
        Ok(EncodedRequest { path, body, headers })
    }

    /// Whether the format carries [`ModelRequest::output`] by the vendor's own
    /// structured-output mechanism. When it does not, the provider asks for the typed
    /// answer with a forced `final_answer` tool instead (see [`crate::answer_tool`]).
    fn native_output(&self) -> bool {
        true
    }

    /// The typed answer's schema as this vendor takes it: `None` to send it as it is, a
    /// rewritten one when constraints the vendor does not enforce moved into descriptions,
    /// or [`Error::UnsupportedOutputSchema`] when the vendor cannot take it at all. Only
    /// called when the format carries the output natively.
    fn adapt_output(&self, provider: &str, output: &OutputSchema) -> Result<Option<OutputSchema>> {
        let _ = (provider, output);
        Ok(None)
    }

    /// Refuses, before anything is sent, a request carrying an input this vendor does not
    /// take.
    fn check_input(&self, provider: &str, request: &ModelRequest) -> Result<()> {
        let _ = (provider, request);
        Ok(())
    }

    /// A parser for one response.
    fn parser(&self, provider: &str) -> Self::Parser;

    /// The headers that carry the API key.
    fn auth_headers(&self, api_key: &str) -> Vec<(&'static str, String)>;

    /// Maps a non-success HTTP response to a typed error.
    fn map_error(&self, provider: &str, status: u16, hint: RetryHint, body: &[u8]) -> Error;
}

/// Bytes in, [`StreamEvent`]s out: an [`SseDecoder`] feeding a [`StreamParser`].
///
/// This is the whole parsing path of a provider, without any I/O: property tests, fuzz
/// targets and benchmarks drive it directly.
pub struct EventParser<P> {
    sse: SseDecoder,
    parser: P,
    provider: String,
}

impl<P: StreamParser> EventParser<P> {
    /// A parser for `provider`'s streams.
    pub fn new(provider: impl Into<String>, parser: P) -> Self {
        EventParser { sse: SseDecoder::new(), parser, provider: provider.into() }
    }

    /// Feeds a chunk of bytes, pushing completed events onto `out`.
    pub fn feed(&mut self, chunk: &[u8], out: &mut Vec<StreamEvent>) -> Result<()> {
        let EventParser { sse, parser, provider } = self;
        sse.feed(chunk, |frame| parser.on_frame(frame, out).map_err(FeedError::Parser))
            .map_err(|e: FeedError| e.into_error(provider))
    }

    /// Ends the stream, pushing what is pending; fails if it was truncated.
    pub fn finish(&mut self, out: &mut Vec<StreamEvent>) -> Result<()> {
        let EventParser { sse, parser, provider } = self;
        sse.finish(|frame| parser.on_frame(frame, out).map_err(FeedError::Parser))
            .map_err(|e: FeedError| e.into_error(provider))?;
        parser.finish(out)
    }

    /// Parses a whole byte stream at once.
    pub fn parse_all(self, bytes: &[u8]) -> Result<Vec<StreamEvent>> {
        self.parse_chunks(&[bytes])
    }

    /// Parses a byte stream that arrives in `chunks`, in order.
    pub fn parse_chunks(self, chunks: &[&[u8]]) -> Result<Vec<StreamEvent>> {
        let (events, result) = self.parse_partial(chunks);
        result.map(|()| events)
    }

    /// Parses `chunks` as far as they go: the events completed before any failure, and
    /// the failure itself (what a caller delivers before it reports the error).
    pub fn parse_partial(mut self, chunks: &[&[u8]]) -> (Vec<StreamEvent>, Result<()>) {
        let mut out = Vec::new();
        let result =
            chunks.iter().try_for_each(|chunk| self.feed(chunk, &mut out)).and_then(|()| self.finish(&mut out));
        (out, result)
    }
}

/// A failure inside [`EventParser::feed`]: the parser's own error, or the SSE layer's, which
/// only becomes a typed error once the provider's name is attached.
enum FeedError {
    Parser(Error),
    Sse(SseError),
}

impl From<SseError> for FeedError {
    fn from(value: SseError) -> Self {
        FeedError::Sse(value)
    }
}

impl FeedError {
    fn into_error(self, provider: &str) -> Error {
        match self {
            FeedError::Parser(e) => e,
            FeedError::Sse(e) => Error::decode(provider, e.to_string()),
        }
    }
}
