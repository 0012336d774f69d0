//! What the runtime writes into a run's evidence: the payloads of each entry kind.
//!
//! A call's arguments are kept as a digest (SHA-256 of their JSON) in `action started`,
//! so the log can show that a retried call is the same call without keeping secrets a
//! person typed. Its result is kept as the tool's [`EvidenceCapture`] says.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use troupe_core::{Message, StopReason, Usage};
use troupe_store::{EvidenceKind, NewEvidence};
use troupe_tools::{Effect, EvidenceCapture, Idempotency, ToolDeclaration};

/// How much of a result a `summary` capture keeps.
pub const SUMMARY_CHARS: usize = 500;

/// The payload of an `action started` entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionStarted {
    /// The tool.
    pub tool: String,
    /// SHA-256 (hex) of the arguments' JSON.
    pub arguments_digest: String,
    /// The tool's declared effect.
    pub effect: Effect,
    /// The tool's declared idempotency: decides what a resume does if the call never
    /// completed.
    pub idempotency: Idempotency,
}

impl ActionStarted {
    /// The entry for a call of `declaration` with `arguments`, of the declared
    /// idempotency.
    pub fn evidence(call_id: &str, declaration: &ToolDeclaration, arguments: &Value) -> NewEvidence {
        Self::of_call(call_id, declaration, declaration.idempotency, arguments)
    }

    /// The entry for a call of `declaration` with `arguments` whose idempotency the tool
    /// told for these arguments ([`Tool::idempotency`](troupe_tools::Tool::idempotency)).
    pub fn of_call(
        call_id: &str,
        declaration: &ToolDeclaration,
        idempotency: Idempotency,
        arguments: &Value,
    ) -> NewEvidence {
        let payload = ActionStarted {
            tool: declaration.name.clone(),
            arguments_digest: json_digest(arguments),
            effect: declaration.effect,
            idempotency,
        };
        encoded(EvidenceKind::ActionStarted, &payload).for_call(call_id)
    }
}

/// The payload of an `action completed` entry.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ActionCompleted {
    /// The tool.
    pub tool: String,
    /// Whether the call failed.
    pub is_error: bool,
    /// How the result was kept.
    pub capture: EvidenceCapture,
    /// The result, whole (`structured`) or cut (`summary`); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// The result's length in characters, always kept.
    pub content_chars: usize,
    /// The images and PDFs the result carried (kept unless the tool's evidence is
    /// `redacted` or `none`): a resumed run shows the model what it saw.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<troupe_core::ContentBlock>,
}

impl ActionCompleted {
    /// The entry for a call of `declaration` that produced `content`.
    pub fn evidence(call_id: &str, declaration: &ToolDeclaration, content: &str, is_error: bool) -> NewEvidence {
        Self::entry(call_id, declaration, content, is_error, &[])
    }

    /// The entry for a call of `declaration` that came to `outcome`, its attachments
    /// included.
    pub fn of_outcome(
        call_id: &str,
        declaration: &ToolDeclaration,
        outcome: &troupe_tools::ToolResultOutcome,
    ) -> NewEvidence {
        Self::entry(call_id, declaration, &outcome.content, outcome.is_error, &outcome.attachments)
    }

    fn entry(
        call_id: &str,
        declaration: &ToolDeclaration,
        content: &str,
        is_error: bool,
        attachments: &[troupe_core::ContentBlock],
    ) -> NewEvidence {
        let chars = content.chars().count();
        let kept = match declaration.evidence {
            EvidenceCapture::Structured => Some(content.to_owned()),
            EvidenceCapture::Summary if chars > SUMMARY_CHARS => {
                Some(content.chars().take(SUMMARY_CHARS).chain("…".chars()).collect())
            }
            EvidenceCapture::Summary => Some(content.to_owned()),
            EvidenceCapture::Redacted | EvidenceCapture::None => None,
        };
        let attachments = match declaration.evidence {
            EvidenceCapture::Structured | EvidenceCapture::Summary => attachments.to_vec(),
            EvidenceCapture::Redacted | EvidenceCapture::None => Vec::new(),
        };
        let payload = ActionCompleted {
            tool: declaration.name.clone(),
            is_error,
            capture: declaration.evidence,
            content: kept,
            content_chars: chars,
            attachments,
        };
        encoded(EvidenceKind::ActionCompleted, &payload).for_call(call_id)
    }

    /// What a resumed run tells the model about this completed call.
    pub fn replayed_content(&self) -> String {
        match (&self.content, self.capture) {
            (Some(content), EvidenceCapture::Structured) => content.clone(),
            (Some(content), _) => {
                format!("(The call completed before an interruption; its result was kept in part.)\n{content}")
            }
            (None, _) => "(The call completed before an interruption; its result was not kept.)".to_owned(),
        }
    }
}

/// The payload of a `model turn` entry.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelTurn {
    /// The model call's number in the run.
    pub iteration: u32,
    /// The model that answered.
    pub model: String,
    /// The complete response message.
    pub message: Message,
    /// Why it stopped.
    pub stop_reason: StopReason,
    /// Its tokens.
    pub usage: Usage,
    /// Its cost in USD, where priced.
    pub cost_usd: f64,
    /// What was asked: digests of the request that got this response. A replay compares
    /// the request the current code and configuration make at this step against them.
    /// Absent from turns recorded before requests were digested.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<RequestDigest>,
}

/// Digests (SHA-256, hex) of one request to a model, whole and by part, and its number of
/// messages: enough to tell whether a later request is the same, and if not, which part
/// differs, without keeping the request a second time (its messages are the run's
/// conversation).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestDigest {
    // In their names' order, as an evidence entry's text has them.
    /// How many messages it held.
    pub message_count: u32,
    /// The messages, as JSON.
    pub messages: String,
    /// The system instructions (the digest of the empty string when there are none).
    pub system: String,
    /// The tools offered, as JSON.
    pub tools: String,
    /// The whole request, as JSON.
    pub whole: String,
}

impl RequestDigest {
    /// The digests of `request`.
    pub fn of(request: &troupe_core::ModelRequest) -> Self {
        let system = digest(request.system.as_deref().unwrap_or(""));
        let message_count = u32::try_from(request.messages.len()).unwrap_or(u32::MAX);
        // The messages and the tools are most of a request: each is encoded once, digested
        // on its own and written into the whole request's text as it is, not encoded again.
        let parts = serde_json::value::to_raw_value(&request.messages)
            .and_then(|messages| Ok((messages, serde_json::value::to_raw_value(&request.tools)?)));
        let Ok((messages, tools)) = parts else {
            return RequestDigest {
                whole: json_digest(request),
                system,
                tools: json_digest(&request.tools),
                messages: json_digest(&request.messages),
                message_count,
            };
        };
        RequestDigest {
            whole: json_digest(&RequestText::of(request, &messages, &tools)),
            system,
            tools: digest(tools.get()),
            messages: digest(messages.get()),
            message_count,
        }
    }
}

/// A [`ModelRequest`](troupe_core::ModelRequest) as its JSON, its messages and tools
/// already encoded: the same fields, in the same order, skipped alike.
#[derive(Serialize)]
pub(super) struct RequestText<'a> {
    model: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<&'a str>,
    messages: &'a serde_json::value::RawValue,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<&'a serde_json::value::RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<&'a troupe_core::ToolChoice>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parallel_tool_calls: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    stop_sequences: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning: Option<&'a troupe_core::ReasoningConfig>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    metadata: &'a BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output: Option<&'a troupe_core::OutputSchema>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache: Option<&'a troupe_core::CacheTtl>,
}

impl<'a> RequestText<'a> {
    pub(super) fn of(
        request: &'a troupe_core::ModelRequest,
        messages: &'a serde_json::value::RawValue,
        tools: &'a serde_json::value::RawValue,
    ) -> Self {
        // Every field named: a field added to the request does not compile here until it
        // is added to its text.
        let troupe_core::ModelRequest {
            model,
            system,
            messages: _,
            tools: tool_specs,
            tool_choice,
            parallel_tool_calls,
            max_tokens,
            temperature,
            stop_sequences,
            reasoning,
            metadata,
            output,
            cache,
        } = request;
        RequestText {
            model,
            system: system.as_deref(),
            messages,
            tools: (!tool_specs.is_empty()).then_some(tools),
            tool_choice: tool_choice.as_ref(),
            parallel_tool_calls: *parallel_tool_calls,
            max_tokens: *max_tokens,
            temperature: *temperature,
            stop_sequences,
            reasoning: reasoning.as_ref(),
            metadata,
            output: output.as_ref(),
            cache: cache.as_ref(),
        }
    }
}

/// SHA-256 of `value`'s JSON: the same value always gives the same bytes (serde writes
/// struct fields in declaration order, and JSON objects here are ordered maps).
fn json_digest<T: Serialize + ?Sized>(value: &T) -> String {
    // Written into the hash through a small buffer: no copy of the whole JSON is made.
    let mut hasher = Sha256::new();
    let mut buffered = std::io::BufWriter::with_capacity(4096, Hashing(&mut hasher));
    let written = serde_json::to_writer(&mut buffered, value).is_ok() && std::io::Write::flush(&mut buffered).is_ok();
    drop(buffered);
    if !written {
        // As before: what cannot be written is digested as no bytes at all.
        return digest_bytes(b"");
    }
    troupe_store::lower_hex(&hasher.finalize())
}

/// A writer that feeds a SHA-256.
struct Hashing<'a>(&'a mut Sha256);

impl std::io::Write for Hashing<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.update(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl ModelTurn {
    /// The entry.
    pub fn evidence(self) -> NewEvidence {
        encoded(EvidenceKind::ModelTurn, &self)
    }

    /// The entry of model call `iteration` to `model`, answered with `message`: the
    /// [`evidence`](Self::evidence) of that turn, made without a copy of the message.
    pub(crate) fn evidence_of(
        iteration: u32,
        model: &str,
        message: &Message,
        stop_reason: &StopReason,
        usage: Usage,
        cost_usd: f64,
        request: RequestDigest,
    ) -> NewEvidence {
        let turn = BorrowedTurn { iteration, model, message, stop_reason, usage, cost_usd, request: Some(request) };
        encoded(EvidenceKind::ModelTurn, &turn)
    }
}

/// [`ModelTurn`] over borrowed parts: the same fields, encoded alike (in their names'
/// order, as its entry's text has them: written in it as they come).
#[derive(Serialize)]
struct BorrowedTurn<'a> {
    cost_usd: f64,
    iteration: u32,
    message: &'a Message,
    model: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    request: Option<RequestDigest>,
    stop_reason: &'a StopReason,
    usage: Usage,
}

/// SHA-256 of `text` in lowercase hex.
pub fn digest(text: &str) -> String {
    digest_bytes(text.as_bytes())
}

/// SHA-256 of `bytes` in lowercase hex.
fn digest_bytes(bytes: &[u8]) -> String {
    troupe_store::lower_hex(&Sha256::digest(bytes))
}

/// A payload as JSON; the types here always serialize.
pub(crate) fn to_value(payload: &impl Serialize) -> Value {
    serde_json::to_value(payload).unwrap_or(Value::Null)
}

/// The entry of `kind` recording `payload`, written straight to the text its hash is taken
/// over, with no `Value` of it built; the types here always serialize.
pub(crate) fn encoded(kind: EvidenceKind, payload: &impl Serialize) -> NewEvidence {
    NewEvidence::encoded(kind, payload).unwrap_or_else(|_| NewEvidence::new(kind, Value::Null))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn declaration(capture: EvidenceCapture) -> ToolDeclaration {
        let mut declaration =
            ToolDeclaration::new("notes.append", "Appends a line.", json!({"type": "object"}), Effect::WriteState);
        declaration.evidence = capture;
        declaration
    }

    #[test]
    fn results_are_kept_as_the_capture_says() {
        let long = "x".repeat(SUMMARY_CHARS + 10);
        let read = |capture| {
            let entry = ActionCompleted::evidence("c1", &declaration(capture), &long, false);
            serde_json::from_value::<ActionCompleted>(entry.payload.into_value()).expect("reads back")
        };
        assert_eq!(read(EvidenceCapture::Structured).content.as_deref(), Some(long.as_str()));
        let summary = read(EvidenceCapture::Summary);
        assert_eq!(summary.content.as_ref().map(|c| c.chars().count()), Some(SUMMARY_CHARS + 1));
        assert_eq!(summary.content_chars, SUMMARY_CHARS + 10);
        assert_eq!(read(EvidenceCapture::Redacted).content, None);
        assert!(read(EvidenceCapture::Redacted).replayed_content().contains("not kept"));
    }

    #[test]
    fn a_turn_from_borrowed_parts_is_the_same_entry() {
        let message = Message::assistant("It is 42.");
        let request = RequestDigest {
            whole: digest("w"),
            system: digest(""),
            tools: digest("[]"),
            messages: digest("[]"),
            message_count: 2,
        };
        let usage = Usage { input_tokens: 7, output_tokens: 3, ..Usage::default() };
        let owned = ModelTurn {
            iteration: 2,
            model: "openai/gpt-4o".into(),
            message: message.clone(),
            stop_reason: StopReason::EndTurn,
            usage,
            cost_usd: 0.25,
            request: Some(request.clone()),
        };
        let borrowed = ModelTurn::evidence_of(2, "openai/gpt-4o", &message, &StopReason::EndTurn, usage, 0.25, request);
        assert_eq!(borrowed.payload, owned.evidence().payload);
    }

    /// The entries a run seals are written straight to their text: the text a `Value` of
    /// their payload writes, which a reader's check of the chain recomputes.
    #[test]
    fn an_entry_is_encoded_as_a_value_of_its_payload_writes_it() {
        use troupe_core::ContentBlock;
        let message = Message {
            role: troupe_core::Role::Assistant,
            content: vec![
                ContentBlock::Text { text: "Looking \"k0\" up…\n".into() },
                ContentBlock::ToolUse {
                    id: "call_0".into(),
                    name: "lookup".into(),
                    input: json!({"key": "k0", "options": {"z": [1.5, null], "a": "é"}}),
                    signature: None,
                },
            ],
        };
        let request = RequestDigest::of(&troupe_core::ModelRequest::new("gpt-4o").message(message.clone()));
        let usage = Usage { input_tokens: 7, output_tokens: 3, cache_read_tokens: 2, ..Usage::default() };
        let stops = [StopReason::ToolUse, StopReason::EndTurn, StopReason::MaxTokens];
        for stop in stops {
            let entry = ModelTurn::evidence_of(3, "openai/gpt-4o", &message, &stop, usage, 0.000_075, request.clone());
            let turn = BorrowedTurn {
                iteration: 3,
                model: "openai/gpt-4o",
                message: &message,
                stop_reason: &stop,
                usage,
                cost_usd: 0.000_075,
                request: Some(request.clone()),
            };
            assert_eq!(entry.payload.text(), troupe_store::json_text(&to_value(&turn)));
        }
        let started =
            ActionStarted::evidence("c1", &declaration(EvidenceCapture::Structured), &json!({"b": 1, "a": 2}));
        let completed = ActionCompleted::evidence("c1", &declaration(EvidenceCapture::Structured), "done\t", true);
        for entry in [started, completed] {
            let value: Value = serde_json::from_str(entry.payload.text()).expect("JSON");
            assert_eq!(entry.payload.text(), troupe_store::json_text(&value));
        }
    }

    #[test]
    fn a_request_is_digested_as_its_json_whole_and_by_part() {
        use troupe_core::{CacheTtl, ModelRequest, OutputSchema, ReasoningConfig, ToolChoice, ToolSpec};
        let bare = ModelRequest::new("gpt-4o").message(Message::user("Hi"));
        let mut full = bare.clone().system("Be brief.");
        full.tools = vec![ToolSpec::new("lookup", "Looks a key up.", json!({"type": "object"}))];
        full.tool_choice = Some(ToolChoice::Auto);
        full.parallel_tool_calls = Some(false);
        full.max_tokens = Some(100);
        full.temperature = Some(0.5);
        full.stop_sequences = vec!["END".into()];
        full.reasoning = Some(ReasoningConfig { budget_tokens: 1024 });
        full.metadata.insert("user".into(), "u1".into());
        full.output = Some(OutputSchema::new("answer", json!({"type": "object"})));
        full.cache = Some(CacheTtl::Short);
        for request in [bare, full] {
            let digests = RequestDigest::of(&request);
            let text = serde_json::to_string(&request).expect("a request encodes");
            assert_eq!(digests.whole, digest(&text), "{text}");
            assert_eq!(digests.messages, json_digest(&request.messages));
            assert_eq!(digests.tools, json_digest(&request.tools));
            assert_eq!(digests.system, digest(request.system.as_deref().unwrap_or("")));
            assert_eq!(digests.message_count, 1);
        }
    }

    #[test]
    fn a_json_digest_is_the_digest_of_the_json_text() {
        // Longer than the hashing buffer, so it is written through in several pieces.
        let value = json!({"messages": ["é".repeat(3000), "x".repeat(5000)], "n": 1});
        assert_eq!(json_digest(&value), digest(&value.to_string()));
        assert_eq!(json_digest(&json!([])), digest("[]"));
    }

    #[test]
    fn arguments_are_kept_as_a_digest() {
        let entry =
            ActionStarted::evidence("c1", &declaration(EvidenceCapture::Redacted), &json!({"secret": "hunter2"}));
        assert!(!entry.payload.to_string().contains("hunter2"));
        assert_eq!(entry.payload["idempotency"], "non_idempotent");
        assert_eq!(entry.call_id.as_deref(), Some("c1"));
        assert_eq!(digest("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }
}
