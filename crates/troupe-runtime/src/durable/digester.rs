//! [`RequestDigester`]: a run's request digests, one request after another, without
//! encoding and hashing its whole conversation again at every model call.
//!
//! A request's digests ([`RequestDigest`]) cover its messages, alone and within the whole
//! request's JSON. A run's conversation grows at its end, so each request's messages are
//! mostly the last request's: written again at every call, they made a run's digests cost
//! the square of its conversation's length. SHA-256 is a stream: the digester keeps both
//! hashes as they stood after the last request's messages, and feeds them only the
//! messages that came since. Middleware may rewrite earlier messages and a compaction
//! shortens the conversation; a request whose earlier messages (or model, or system
//! instructions) are not the last request's is digested from the start. Either way the
//! digests are [`RequestDigest::of`]'s, byte for byte.
//!
//! A run offers the same tools and system instructions at every call, so their JSON and
//! digests are kept too, and made again only when they change.

use super::evidence::{RequestDigest, RequestText, digest};
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};
use std::sync::Arc;
use troupe_core::{Message, ModelRequest, ToolSpec};

/// What comes before the messages in a request's JSON, with the messages a placeholder:
/// `"messages":[]` appears once outside any string (inside one, its quotes are escaped).
const MESSAGES_PLACEHOLDER: &str = "\"messages\":[]";

/// A run's request digests, each request after the last. See the module's documentation.
#[derive(Default)]
pub struct RequestDigester {
    last: Option<Digested>,
    /// The last request's tools, with their JSON and its digest.
    tools: Option<Offered>,
}

/// A request's tools as the digests take them.
struct Offered {
    specs: Vec<ToolSpec>,
    text: Box<RawValue>,
    digest: String,
}

impl std::fmt::Debug for RequestDigester {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let messages = self.last.as_ref().map_or(0, |last| last.messages.len());
        f.debug_struct("RequestDigester").field("messages", &messages).finish()
    }
}

/// The last request, as far as its messages.
struct Digested {
    /// The whole request's JSON before its messages' first one (ends with `"messages":[`).
    head: String,
    /// Its messages.
    messages: Vec<Message>,
    /// The whole request's hash after `head` and the messages.
    whole: Sha256,
    /// The messages' hash (`[` and the messages) after them.
    alone: Sha256,
    /// The digest of its system instructions, which `head` holds.
    system: String,
}

impl RequestDigester {
    /// A digester that has seen no request.
    pub fn new() -> Self {
        RequestDigester::default()
    }

    /// The digests of `request` ([`RequestDigest::of`]'s), feeding the hashes only the
    /// messages the last request did not have.
    pub fn digest(&mut self, request: &ModelRequest) -> RequestDigest {
        match self.digest_on(request) {
            Some(digests) => digests,
            None => {
                // Something would not encode: digested as `of` digests it, from nothing.
                self.last = None;
                self.tools = None;
                RequestDigest::of(request)
            }
        }
    }

    fn digest_on(&mut self, request: &ModelRequest) -> Option<RequestDigest> {
        let tools = match self.tools.take().filter(|tools| same_tools(&tools.specs, &request.tools)) {
            Some(tools) => tools,
            None => {
                let text = serde_json::value::to_raw_value(&request.tools).ok()?;
                Offered { specs: request.tools.clone(), digest: digest(text.get()), text }
            }
        };
        let tools = &*self.tools.insert(tools);
        let placeholder = RawValue::from_string("[]".to_owned()).ok()?;
        let text = serde_json::to_string(&RequestText::of(request, &placeholder, &tools.text)).ok()?;
        let at = text.find(MESSAGES_PLACEHOLDER)? + MESSAGES_PLACEHOLDER.len() - 1;
        let (head, tail) = text.split_at(at);
        let kept = self.last.take().filter(|last| {
            last.head == head
                && request.messages.len() >= last.messages.len()
                && request.messages[..last.messages.len()] == last.messages[..]
        });
        let mut last = kept.unwrap_or_else(|| {
            let mut whole = Sha256::new();
            whole.update(head.as_bytes());
            let mut alone = Sha256::new();
            alone.update(b"[");
            let system = digest(request.system.as_deref().unwrap_or(""));
            Digested { head: head.to_owned(), messages: Vec::new(), whole, alone, system }
        });
        for message in &request.messages[last.messages.len()..] {
            let encoded = serde_json::to_string(message).ok()?;
            if !last.messages.is_empty() {
                last.whole.update(b",");
                last.alone.update(b",");
            }
            last.whole.update(encoded.as_bytes());
            last.alone.update(encoded.as_bytes());
            last.messages.push(message.clone());
        }
        // `tail` starts with the messages' closing `]`.
        let mut whole = last.whole.clone();
        whole.update(tail.as_bytes());
        let mut alone = last.alone.clone();
        alone.update(b"]");
        let digests = RequestDigest {
            message_count: u32::try_from(request.messages.len()).unwrap_or(u32::MAX),
            messages: troupe_store::lower_hex(&alone.finalize()),
            system: last.system.clone(),
            tools: tools.digest.clone(),
            whole: troupe_store::lower_hex(&whole.finalize()),
        };
        self.last = Some(last);
        Some(digests)
    }
}

/// Whether `a` and `b` are the same tools: the same names and descriptions, and the same
/// schemas (one shared allocation each: equal by value is not enough, as `-0.0` equals `0.0`
/// and is written otherwise).
fn same_tools(a: &[ToolSpec], b: &[ToolSpec]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(a, b)| {
            a.name == b.name && a.description == b.description && Arc::ptr_eq(&a.input_schema, &b.input_schema)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use troupe_core::{ContentBlock, Role, ToolSpec};

    fn tool_use(n: usize) -> Message {
        Message::new(
            Role::Assistant,
            vec![
                ContentBlock::text(format!("step {n}, \"quoted\" \\ and \u{e9}")),
                ContentBlock::ToolUse {
                    id: format!("call_{n}").into(),
                    name: "lookup".into(),
                    input: json!({"key": n, "options": {"z": [1.5, null], "a": "\"messages\":[]"}}),
                    signature: None,
                },
            ],
        )
    }

    /// Each request of a run, digested one after another, against `RequestDigest::of`:
    /// the conversation growing, an earlier message rewritten, the conversation cut short
    /// (a compaction), the system instructions, the model and the tools changed, a request
    /// with no message, a system text holding the placeholder itself.
    #[test]
    fn a_runs_requests_digested_one_after_another_are_digested_as_each_alone() {
        let mut request = ModelRequest::new("gpt-4o").system("Be brief.");
        request.max_tokens = Some(100);
        let mut requests = vec![request.clone()];
        for n in 0..6 {
            request.messages.push(Message::user(format!("task {n}")));
            requests.push(request.clone());
            request.messages.push(tool_use(n));
            requests.push(request.clone());
        }
        let mut rewritten = request.clone();
        rewritten.messages[1] = Message::user("rewritten by a middleware");
        requests.push(rewritten.clone());
        rewritten.messages.push(Message::user("and on"));
        requests.push(rewritten);
        let mut compacted = request.clone();
        compacted.messages.drain(..8);
        requests.push(compacted.clone());
        compacted.messages.push(Message::user("after the compaction"));
        requests.push(compacted.clone());
        let mut system = compacted.clone();
        system.system = Some("A \"messages\":[] trap.".into());
        requests.push(system.clone());
        let mut model = system.clone();
        model.model = "gpt-4o-mini".into();
        requests.push(model.clone());
        let mut tools = model.clone();
        tools.tools = vec![ToolSpec::new("lookup", "Looks a key up.", json!({"type": "object"}))];
        tools.messages.push(Message::user("with a tool"));
        requests.push(tools.clone());
        let mut unchanged = tools.clone();
        unchanged.temperature = Some(0.5);
        requests.push(unchanged);
        requests.push(ModelRequest::new("gpt-4o"));

        let mut digester = RequestDigester::new();
        for (n, request) in requests.iter().enumerate() {
            assert_eq!(digester.digest(request), RequestDigest::of(request), "request {n}");
        }
    }

    /// A run's tools and system instructions are digested once while they stay the same
    /// (a digest the digester kept is the one given), and again when they change.
    #[test]
    fn the_same_tools_and_system_are_digested_once_and_changed_ones_again() {
        let lookup = ToolSpec::new("lookup", "Looks a key up.", json!({"type": "object"}));
        let mut request = ModelRequest::new("gpt-4o").system("Be brief.");
        request.tools = vec![lookup];
        request.messages.push(Message::user("task"));
        let mut digester = RequestDigester::new();
        assert_eq!(digester.digest(&request), RequestDigest::of(&request));
        digester.tools.as_mut().expect("kept").digest = "kept tools".to_owned();
        digester.last.as_mut().expect("kept").system = "kept system".to_owned();
        request.messages.push(tool_use(1));
        let digests = digester.digest(&request);
        assert_eq!((digests.tools.as_str(), digests.system.as_str()), ("kept tools", "kept system"));
        assert_eq!(digests.whole, RequestDigest::of(&request).whole);

        // The same schema by value, in an allocation of its own: encoded again.
        request.tools[0].input_schema = Arc::new(json!({"type": "object"}));
        assert_eq!(digester.digest(&request).tools, RequestDigest::of(&request).tools);

        request.tools.push(ToolSpec::new("store", "Stores a key.", json!({"type": "object"})));
        request.system = Some("Be briefer.".into());
        assert_eq!(digester.digest(&request), RequestDigest::of(&request), "changed, digested again");
    }

    /// What the digester keeps is the last request's messages; a request that repeats them
    /// and adds one feeds the hashes that one alone.
    #[test]
    fn a_request_that_adds_a_message_is_hashed_from_where_the_last_stopped() {
        let mut request = ModelRequest::new("gpt-4o");
        request.messages = (0..3).map(tool_use).collect();
        let mut digester = RequestDigester::new();
        digester.digest(&request);
        let before = digester.last.as_ref().map(|last| last.whole.clone()).expect("kept");
        request.messages.push(Message::user("one more"));
        let digests = digester.digest(&request);
        let last = digester.last.as_ref().expect("kept");
        assert_eq!(last.messages, request.messages);
        let mut expected = before;
        expected.update(b",");
        expected.update(serde_json::to_string(&request.messages[3]).expect("encodes").as_bytes());
        assert_eq!(last.whole.clone().finalize(), expected.finalize(), "continued, not started again");
        assert_eq!(digests, RequestDigest::of(&request));
    }
}
