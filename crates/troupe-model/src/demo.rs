//! [`DemoProvider`]: an offline model that needs no key, so troupe can be tried at once.
//!
//! Offered the workspace tools (`fs.list`, and `fs.read`/`fs.write` where given), it runs a
//! genuine multi-step script ([`demo_reply`]); offered a `delegate` tool, it hands the task
//! to each teammate and answers with the first line of each report; otherwise it chats. A
//! teammate briefed by its role (researcher, reviewer, writer) opens its report with what
//! it found in the file it read, as that role would. Asked for a typed answer
//! ([`ModelRequest::output`]), it answers with a JSON document of the schema.

mod delegate;
mod findings;
mod orchestrate;
mod script;
mod typed;

pub use script::DEMO_FILE;

use crate::error::{Error, Result};
use crate::provider::{EventStream, LlmProvider};
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use std::collections::VecDeque;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use troupe_core::{ContentBlock, Message, ModelRequest, Role, StopReason, StreamEvent, Usage};

/// The provider name, and the model id that selects it.
pub const DEMO: &str = "demo";

/// One block of a scripted demo reply.
#[derive(Clone, Debug, PartialEq)]
pub enum DemoBlock {
    /// Text, streamed in small deltas.
    Text(String),
    /// A tool call with its arguments.
    ToolCall {
        /// The call id.
        id: String,
        /// The tool's name, as the request offered it.
        name: String,
        /// The arguments object.
        input: serde_json::Value,
    },
}

/// What the demo model answers to one request.
#[derive(Clone, Debug, PartialEq)]
pub struct DemoReply {
    /// The reply's blocks, in order.
    pub blocks: Vec<DemoBlock>,
    /// Why the reply stops.
    pub stop_reason: StopReason,
}

/// The demo model's whole behaviour: the reply to `request`, decided from the request
/// alone (the model keeps no state).
///
/// When the request offers `fs.list`, the demo drives a multi-step run over the
/// conversation since the task: it lists the workspace, reads a file it saw (a README,
/// else `Cargo.toml`, else the first file; nothing when the workspace is empty) if
/// `fs.read` is offered, writes a short summary naming what it found to [`DEMO_FILE`] if
/// `fs.write` is offered, and then answers with what it did, tool errors (a rejected
/// write, say) included. Otherwise it explains troupe and echoes the user's last message.
///
/// ```
/// use troupe_core::{Message, ModelRequest, StopReason, ToolSpec};
/// use troupe_model::{DemoBlock, demo_reply};
///
/// let mut request = ModelRequest::new("demo").message(Message::user("Summarise this repository"));
/// request.tools = vec![ToolSpec::new("fs.list", "Lists a directory.", serde_json::json!({"type": "object"}))];
/// let reply = demo_reply(&request);
/// assert_eq!(reply.stop_reason, StopReason::ToolUse);
/// assert!(reply.blocks.iter().any(|b| matches!(b, DemoBlock::ToolCall { name, .. } if name == "fs.list")));
/// ```
pub fn demo_reply(request: &ModelRequest) -> DemoReply {
    let reply = untyped_reply(request);
    // Asked for a typed answer, the final answer is a document of the schema saying what
    // the text would have said.
    match &request.output {
        Some(output) if reply.stop_reason == StopReason::EndTurn => {
            let said: String = reply
                .blocks
                .iter()
                .filter_map(|block| match block {
                    DemoBlock::Text(text) => Some(text.as_str()),
                    DemoBlock::ToolCall { .. } => None,
                })
                .collect();
            let said = truncate(said.trim(), 200);
            let document = typed::document(&output.schema, &said);
            DemoReply { blocks: vec![DemoBlock::Text(document.to_string())], stop_reason: StopReason::EndTurn }
        }
        _ => reply,
    }
}

fn untyped_reply(request: &ModelRequest) -> DemoReply {
    // A leader (offered `delegate`) delegates before it touches the workspace itself.
    if let Some(reply) = delegate::reply(request) {
        return reply;
    }
    // The leader of an orchestrated team: a delegation plan, then the combined answer.
    if let Some(reply) = orchestrate::reply(request) {
        return reply;
    }
    if let Some(reply) = script::reply(request) {
        return reply;
    }
    let said = last_user_text(request);
    let echo = if said.trim().is_empty() {
        "You did not say anything yet — try `troupe chat --model demo \"hello\"`.".to_owned()
    } else {
        format!("You said: \u{201c}{}\u{201d}", truncate(said.trim(), 280))
    };
    let text = format!(
        "Hello! I'm the troupe demo model: I run offline, need no API key, and send nothing anywhere.\n\n\
         troupe is a Rust SDK, runtime and command-line tool for teams of LLM agents. Every \
         provider (Anthropic, OpenAI, Gemini and OpenAI-compatible servers) streams through one \
         interface, so events reach you as they happen, just like this reply.\n\n\
         {echo}\n\n\
         To talk to a real model, export ANTHROPIC_API_KEY, OPENAI_API_KEY or GEMINI_API_KEY, or \
         pass --model provider/model (for example ollama/llama3.2 for a local model).\n"
    );
    DemoReply { blocks: vec![DemoBlock::Text(text)], stop_reason: StopReason::EndTurn }
}

fn last_user_text(request: &ModelRequest) -> String {
    let Some(message) = request.messages.iter().rev().find(|m| m.role == Role::User) else {
        return String::new();
    };
    // A user turn of tool results only has no text: say so rather than echo nothing.
    let text = message.text();
    if text.is_empty() && message.content.iter().any(|b| matches!(b, ContentBlock::ToolResult { .. })) {
        return "(tool results)".to_owned();
    }
    text
}

fn truncate(text: &str, chars: usize) -> String {
    match text.char_indices().nth(chars) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

/// A rough token count (four characters a token), for plausible usage figures.
fn estimate_tokens(chars: usize) -> u64 {
    (chars as u64).div_ceil(4).max(1)
}

/// The characters of everything a message sends the model.
fn message_chars(message: &Message) -> usize {
    message
        .content
        .iter()
        .map(|block| match block {
            ContentBlock::Text { text } | ContentBlock::Thinking { text, .. } => text.len(),
            ContentBlock::ToolUse { name, input, .. } => name.len() + input.to_string().len(),
            ContentBlock::ToolResult { content, .. } => content.len(),
            ContentBlock::RedactedThinking { data } => data.len(),
            ContentBlock::Image { .. } | ContentBlock::Document { .. } => 1_000,
        })
        .sum()
}

/// Plausible usage of a call to the demo model. With tools offered, the instructions and
/// tool definitions are the prompt prefix a provider would cache: written on the first
/// call of a conversation, read back on the later ones.
fn usage(request: &ModelRequest, output_chars: usize) -> Usage {
    let prefix_chars = request.system.as_deref().map_or(0, str::len)
        + request
            .tools
            .iter()
            .map(|t| t.name.len() + t.description.len() + t.input_schema.to_string().len())
            .sum::<usize>();
    let message_chars: usize = request.messages.iter().map(message_chars).sum();
    let mut usage = Usage { output_tokens: estimate_tokens(output_chars), ..Default::default() };
    if request.tools.is_empty() {
        usage.input_tokens = estimate_tokens(prefix_chars + message_chars);
        return usage;
    }
    usage.input_tokens = estimate_tokens(message_chars);
    let prefix = estimate_tokens(prefix_chars);
    if request.messages.iter().any(|m| m.role == Role::Assistant) {
        usage.cache_read_tokens = prefix;
    } else {
        usage.cache_write_tokens = prefix;
    }
    usage
}

/// `text` cut into pieces of at most `chars` characters.
fn char_pieces(text: &str, chars: usize) -> impl Iterator<Item = &str> {
    let chars = chars.max(1);
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let end = rest.char_indices().nth(chars).map_or(rest.len(), |(i, _)| i);
        let (piece, tail) = rest.split_at(end);
        rest = tail;
        Some(piece)
    })
}

/// An offline [`LlmProvider`] named `demo` that streams [`demo_reply`] in small text and
/// tool-argument deltas a few milliseconds apart, then plausible [`Usage`] and the reply's
/// stop reason. Cancelling the token ends the stream with [`Error::Cancelled`].
///
/// ```
/// use tokio_util::sync::CancellationToken;
/// use troupe_core::{Message, ModelRequest};
/// use troupe_model::{DemoProvider, LlmProvider};
///
/// let demo = DemoProvider::new().with_delay(std::time::Duration::ZERO);
/// let request = ModelRequest::new("demo").message(Message::user("hello"));
/// let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| troupe_model::Error::Config(e.to_string()))?;
/// let response = runtime.block_on(demo.complete(&request, CancellationToken::new()))?;
/// assert!(response.message.text().contains("hello"));
/// # Ok::<(), troupe_model::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct DemoProvider {
    delay: Duration,
    delta_chars: usize,
}

impl Default for DemoProvider {
    fn default() -> Self {
        DemoProvider { delay: Duration::from_millis(12), delta_chars: 6 }
    }
}

impl DemoProvider {
    /// A demo model with visible streaming (about 12 ms between deltas).
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the pause between two deltas (zero for tests).
    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// The events of the reply to `request`, without pauses.
    pub fn events(&self, request: &ModelRequest) -> Vec<StreamEvent> {
        let reply = demo_reply(request);
        let mut events = vec![StreamEvent::MessageStart { id: Some("msg_demo".into()), model: Some(DEMO.into()) }];
        let mut output_chars = 0;
        for (index, block) in reply.blocks.iter().enumerate() {
            let index = index as u32;
            match block {
                DemoBlock::Text(text) => {
                    output_chars += text.chars().count();
                    events.extend(
                        word_pieces(text, self.delta_chars).map(|t| StreamEvent::TextDelta { index, text: t.into() }),
                    );
                }
                DemoBlock::ToolCall { id, name, input } => {
                    let arguments = input.to_string();
                    output_chars += arguments.len() + name.len();
                    events.push(StreamEvent::ToolUseStart { index, id: id.clone(), name: name.clone() });
                    events.extend(
                        char_pieces(&arguments, self.delta_chars * 4)
                            .map(|p| StreamEvent::ToolUseInputDelta { index, partial_json: p.into() }),
                    );
                    events.push(StreamEvent::ToolUseEnd { index });
                }
            }
        }
        events.push(StreamEvent::Usage { usage: usage(request, output_chars) });
        events.push(StreamEvent::MessageStop { stop_reason: reply.stop_reason });
        events
    }
}

/// `text` cut into pieces of about `chars` characters, each ending after a space where one
/// is near, so that deltas read like words appearing.
fn word_pieces(text: &str, chars: usize) -> impl Iterator<Item = &str> {
    let chars = chars.max(1);
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut end = rest.len();
        for (n, (i, c)) in rest.char_indices().enumerate() {
            if n >= chars * 2 {
                end = i;
                break;
            }
            if n + 1 >= chars && c.is_whitespace() {
                end = i + c.len_utf8();
                break;
            }
        }
        let (piece, tail) = rest.split_at(end);
        rest = tail;
        Some(piece)
    })
}

struct DemoStream {
    events: VecDeque<StreamEvent>,
    delay: Duration,
    cancel: CancellationToken,
    started: bool,
    done: bool,
}

impl DemoStream {
    async fn next(mut self) -> Option<(Result<StreamEvent>, Self)> {
        if self.done {
            return None;
        }
        if self.cancel.is_cancelled() {
            self.done = true;
            return Some((Err(Error::Cancelled), self));
        }
        let event = self.events.pop_front()?;
        let pause = self.started
            && matches!(event, StreamEvent::TextDelta { .. } | StreamEvent::ToolUseInputDelta { .. })
            && !self.delay.is_zero();
        self.started = true;
        if pause {
            tokio::select! {
                biased;
                _ = self.cancel.cancelled() => {
                    self.done = true;
                    return Some((Err(Error::Cancelled), self));
                }
                _ = tokio::time::sleep(self.delay) => {}
            }
        }
        Some((Ok(event), self))
    }
}

impl LlmProvider for DemoProvider {
    fn name(&self) -> &str {
        DEMO
    }

    fn stream<'a>(
        &'a self,
        request: &'a ModelRequest,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<EventStream>> {
        async move {
            if cancel.is_cancelled() {
                return Err(Error::Cancelled);
            }
            let state = DemoStream {
                events: self.events(request).into(),
                delay: self.delay,
                cancel,
                started: false,
                done: false,
            };
            Ok(futures::stream::unfold(state, DemoStream::next).boxed())
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use troupe_core::ToolSpec;

    fn request(text: &str) -> ModelRequest {
        ModelRequest::new(DEMO).message(Message::assistant("earlier")).message(Message::user(text))
    }

    #[tokio::test]
    async fn streams_many_small_deltas_echoing_the_last_user_message() {
        let demo = DemoProvider::new().with_delay(Duration::ZERO);
        let mut stream = demo.stream(&request("what is a troupe?"), CancellationToken::new()).await.expect("opens");
        let mut text = String::new();
        let mut deltas = 0;
        let mut events = Vec::new();
        while let Some(event) = stream.next().await {
            let event = event.expect("no error");
            if let StreamEvent::TextDelta { text: t, .. } = &event {
                assert!(t.chars().count() <= 12, "delta too large: {t:?}");
                text.push_str(t);
                deltas += 1;
            }
            events.push(event);
        }
        assert!(deltas > 20, "{deltas} deltas");
        assert!(text.contains("what is a troupe?"), "{text}");
        assert!(text.contains("troupe is a Rust SDK"), "{text}");
        assert!(matches!(events.first(), Some(StreamEvent::MessageStart { .. })));
        let Some(StreamEvent::Usage { usage }) = events.iter().rev().nth(1) else {
            panic!("usage before stop: {events:?}")
        };
        assert!(usage.input_tokens > 0 && usage.output_tokens > usage.input_tokens, "{usage:?}");
        assert_eq!(events.last(), Some(&StreamEvent::MessageStop { stop_reason: StopReason::EndTurn }));
    }

    #[tokio::test]
    async fn complete_assembles_the_reply() {
        let demo = DemoProvider::new().with_delay(Duration::ZERO);
        let response = demo.complete(&request("ping"), CancellationToken::new()).await.expect("completes");
        assert_eq!(response.stop_reason, StopReason::EndTurn);
        assert!(response.message.text().contains("\u{201c}ping\u{201d}"));
    }

    #[tokio::test(start_paused = true)]
    async fn cancellation_ends_the_stream_with_cancelled() {
        let demo = DemoProvider::new().with_delay(Duration::from_secs(1));
        let cancel = CancellationToken::new();
        let mut stream = demo.stream(&request("hi"), cancel.clone()).await.expect("opens");
        assert!(matches!(stream.next().await, Some(Ok(StreamEvent::MessageStart { .. }))));
        assert!(matches!(stream.next().await, Some(Ok(StreamEvent::TextDelta { .. }))));
        cancel.cancel();
        assert!(matches!(stream.next().await, Some(Err(Error::Cancelled))));
        assert!(stream.next().await.is_none());
        assert!(matches!(demo.stream(&request("hi"), cancel).await, Err(Error::Cancelled)));
    }

    #[test]
    fn reply_without_a_user_message_still_answers() {
        let reply = demo_reply(&ModelRequest::new(DEMO));
        let DemoBlock::Text(text) = &reply.blocks[0] else { panic!("text first") };
        assert!(text.contains("did not say anything"));
        let long = "x".repeat(1000);
        let DemoBlock::Text(text) = &demo_reply(&request(&long)).blocks[0] else { panic!("text first") };
        assert!(text.contains('…') && !text.contains(&long));
    }

    #[tokio::test]
    async fn tool_calls_stream_their_arguments_in_pieces_with_cached_prefix_usage() {
        let demo = DemoProvider::new().with_delay(Duration::ZERO);
        let mut request = request("Summarise this repository");
        request.system = Some("You are careful.".into());
        request.tools = ["fs.list", "fs.read", "fs.write"]
            .map(|name| ToolSpec::new(name, "A workspace tool.", serde_json::json!({"type": "object"})))
            .into();
        let events = demo.events(&request);
        let arguments: String = events
            .iter()
            .filter_map(|e| match e {
                StreamEvent::ToolUseInputDelta { partial_json, .. } => Some(partial_json.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(serde_json::from_str::<serde_json::Value>(&arguments).ok(), Some(serde_json::json!({"path": "."})));
        assert!(events.iter().any(|e| matches!(e, StreamEvent::ToolUseStart { name, .. } if name == "fs.list")));
        assert_eq!(events.last(), Some(&StreamEvent::MessageStop { stop_reason: StopReason::ToolUse }));
        let Some(StreamEvent::Usage { usage }) = events.iter().rev().nth(1) else { panic!("usage before stop") };
        // `request` has an earlier assistant turn, so the prefix is read from the cache.
        assert!(usage.cache_read_tokens > 0 && usage.cache_write_tokens == 0, "{usage:?}");
        let first = ModelRequest { messages: vec![Message::user("hi")], ..request.clone() };
        let Some(StreamEvent::Usage { usage }) = demo.events(&first).into_iter().rev().nth(1) else { panic!("usage") };
        assert!(usage.cache_write_tokens > 0 && usage.cache_read_tokens == 0, "{usage:?}");

        let response = demo.complete(&request, CancellationToken::new()).await.expect("completes");
        assert_eq!(response.stop_reason, StopReason::ToolUse);
        assert!(response.message.has_tool_use());
    }

    #[test]
    fn char_pieces_split_on_character_boundaries() {
        let text = "{\"content\":\"héllo wörld ✓\"}";
        let pieces: Vec<&str> = char_pieces(text, 4).collect();
        assert_eq!(pieces.concat(), text);
        assert!(pieces.iter().all(|p| p.chars().count() <= 4));
        assert!(char_pieces("", 4).next().is_none());
    }

    #[test]
    fn pieces_cover_the_text_exactly() {
        let text = "héllo wörld, this is a fairly long sentence without surprises";
        let joined: String = word_pieces(text, 6).collect();
        assert_eq!(joined, text);
        assert!(word_pieces("", 6).next().is_none());
        assert!(word_pieces(&"a".repeat(40), 6).all(|p| p.len() <= 12));
    }
}
