//! [`ContentFilter`]: redacts (or blocks) sensitive data in what models are sent and in
//! what tools return.

use super::context::{ModelCallContext, ToolCallContext};
use super::error::MiddlewareError;
use super::hooks::Middleware;
use super::patterns::{Pattern, SensitiveData};
use futures::future::BoxFuture;
use serde_json::Value;
use std::borrow::Cow;
use troupe_core::{ContentBlock, ModelRequest};
use troupe_model::ModelResponse;
use troupe_tools::ToolResultOutcome;

/// The label placeholder of a [`ContentFilter::replacement`] template.
pub const LABEL_PLACEHOLDER: &str = "{label}";

/// What the filter does with a match.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FilterMode {
    /// Replaces each match with the replacement (`[redacted:email]`).
    #[default]
    Redact,
    /// Refuses the whole call: a model request is not sent (the run fails), a tool
    /// result is withheld (the model reads an error instead).
    Block,
}

/// A custom pattern that does not compile.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("content filter pattern `{label}` is not a valid regex: {message}")]
pub struct PatternError {
    /// The pattern's label.
    pub label: String,
    /// The regex compiler's message.
    pub message: String,
}

/// Finds sensitive data (e-mail addresses, phone numbers, card numbers that pass the
/// Luhn check, API keys and bearer tokens, and any pattern you add) and redacts it, or
/// blocks the call that carries it.
///
/// By default it filters what each model request carries (system instructions, text,
/// tool results; not the model's own tool arguments or signed reasoning, which must go
/// back verbatim) and every tool result, before the model sees it. Requests are filtered
/// on the way out only: the conversation the run keeps is unchanged, and filtered again
/// on every call. Tool results are filtered where the run keeps them, so the record holds
/// the redacted text. Responses can be filtered too ([`on_responses`](Self::on_responses)),
/// in what the run keeps; they have been streamed live already.
///
/// ```
/// use troupe_runtime::{ContentFilter, SensitiveData};
///
/// let filter = ContentFilter::new();
/// assert_eq!(filter.redact("mail ada@example.com"), "mail [redacted:email]");
/// assert_eq!(filter.redact("card 4111 1111 1111 1111"), "card [redacted:credit_card]");
/// assert_eq!(filter.redact("order 4111 1111 1111 1112"), "order 4111 1111 1111 1112", "not a card: Luhn fails");
///
/// let custom = ContentFilter::only([SensitiveData::Email])
///     .pattern("ticket", r"\bJIRA-\d+\b")?
///     .replacement("<{label}>");
/// assert_eq!(custom.redact("JIRA-42 from bob@example.org"), "<ticket> from <email>");
/// # Ok::<(), troupe_runtime::PatternError>(())
/// ```
#[derive(Clone, Debug)]
pub struct ContentFilter {
    patterns: Vec<Pattern>,
    mode: FilterMode,
    replacement: String,
    requests: bool,
    tool_results: bool,
    responses: bool,
}

impl Default for ContentFilter {
    fn default() -> Self {
        ContentFilter::new()
    }
}

impl ContentFilter {
    /// Every built-in kind of [`SensitiveData`], redacted as `[redacted:<label>]` in
    /// requests and tool results.
    pub fn new() -> Self {
        ContentFilter::only(SensitiveData::ALL)
    }

    /// Only these built-in kinds (add your own with [`pattern`](Self::pattern)).
    pub fn only(kinds: impl IntoIterator<Item = SensitiveData>) -> Self {
        ContentFilter {
            patterns: kinds.into_iter().flat_map(SensitiveData::patterns).collect(),
            mode: FilterMode::Redact,
            replacement: format!("[redacted:{LABEL_PLACEHOLDER}]"),
            requests: true,
            tool_results: true,
            responses: false,
        }
    }

    /// Also finds matches of `regex` (Rust `regex` syntax), redacted with `label`.
    pub fn pattern(mut self, label: impl Into<String>, regex: &str) -> Result<Self, PatternError> {
        let label = label.into();
        let compiled =
            regex::Regex::new(regex).map_err(|e| PatternError { label: label.clone(), message: e.to_string() })?;
        self.patterns.push(Pattern::new(label, compiled));
        Ok(self)
    }

    /// Also finds matches of an already compiled `regex`, redacted with `label`.
    pub fn regex(mut self, label: impl Into<String>, regex: regex::Regex) -> Self {
        self.patterns.push(Pattern::new(label, regex));
        self
    }

    /// What a match is replaced with; `{label}` stands for the pattern's label
    /// (default `[redacted:{label}]`).
    pub fn replacement(mut self, template: impl Into<String>) -> Self {
        self.replacement = template.into();
        self
    }

    /// Redacts or blocks.
    pub fn mode(mut self, mode: FilterMode) -> Self {
        self.mode = mode;
        self
    }

    /// Blocks calls that carry a match instead of redacting ([`FilterMode::Block`]).
    pub fn blocking(self) -> Self {
        self.mode(FilterMode::Block)
    }

    /// Whether model requests are filtered (default yes).
    pub fn on_requests(mut self, yes: bool) -> Self {
        self.requests = yes;
        self
    }

    /// Whether tool results are filtered (default yes).
    pub fn on_tool_results(mut self, yes: bool) -> Self {
        self.tool_results = yes;
        self
    }

    /// Whether the responses the run keeps are filtered (default no).
    pub fn on_responses(mut self, yes: bool) -> Self {
        self.responses = yes;
        self
    }

    /// `text` with every match replaced.
    pub fn redact<'t>(&self, text: &'t str) -> Cow<'t, str> {
        let mut out = Cow::Borrowed(text);
        for pattern in &self.patterns {
            let replacement = self.replacement.replace(LABEL_PLACEHOLDER, &pattern.label);
            if let Cow::Owned(redacted) = pattern.redact(&out, &replacement) {
                out = Cow::Owned(redacted);
            }
        }
        out
    }

    /// The label of the first pattern that matches somewhere in `text`.
    pub fn detect(&self, text: &str) -> Option<&str> {
        self.patterns.iter().find(|p| p.is_in(text)).map(|p| p.label.as_str())
    }

    /// Redacts `text` in place; in block mode, refuses naming what was found in `what`.
    fn filter(&self, text: &mut String, what: &str) -> Result<(), MiddlewareError> {
        match self.mode {
            FilterMode::Redact => {
                if let Cow::Owned(redacted) = self.redact(text) {
                    *text = redacted;
                }
                Ok(())
            }
            FilterMode::Block => match self.detect(text) {
                // The reason names the kind, never the match.
                Some(label) => Err(MiddlewareError::refused(self.name(), format!("{what} contains {label} data"))),
                None => Ok(()),
            },
        }
    }

    fn filter_json(&self, value: &mut Value, what: &str) -> Result<(), MiddlewareError> {
        match value {
            Value::String(text) => self.filter(text, what),
            Value::Array(items) => items.iter_mut().try_for_each(|item| self.filter_json(item, what)),
            Value::Object(map) => map.values_mut().try_for_each(|item| self.filter_json(item, what)),
            _ => Ok(()),
        }
    }

    fn filter_request(&self, request: &mut ModelRequest) -> Result<(), MiddlewareError> {
        const WHAT: &str = "the model request";
        if let Some(system) = &mut request.system {
            self.filter(system, WHAT)?;
        }
        for message in &mut request.messages {
            for block in &mut message.content {
                match block {
                    ContentBlock::Text { text } => self.filter(text, WHAT)?,
                    ContentBlock::ToolResult { content, .. } => self.filter(content, WHAT)?,
                    // The model's own arguments and signed reasoning go back verbatim.
                    _ => {}
                }
            }
        }
        Ok(())
    }
}

fn ready<'a>(result: Result<(), MiddlewareError>) -> BoxFuture<'a, Result<(), MiddlewareError>> {
    Box::pin(std::future::ready(result))
}

impl Middleware for ContentFilter {
    fn name(&self) -> &str {
        "content_filter"
    }

    fn before_model<'a>(
        &'a self,
        _ctx: &'a ModelCallContext,
        request: &'a mut ModelRequest,
    ) -> BoxFuture<'a, Result<(), MiddlewareError>> {
        ready(if self.requests { self.filter_request(request) } else { Ok(()) })
    }

    fn after_model<'a>(
        &'a self,
        _ctx: &'a ModelCallContext,
        response: &'a mut ModelResponse,
    ) -> BoxFuture<'a, Result<(), MiddlewareError>> {
        let result = if self.responses {
            response.message.content.iter_mut().try_for_each(|block| match block {
                ContentBlock::Text { text } => self.filter(text, "the model's response"),
                _ => Ok(()),
            })
        } else {
            Ok(())
        };
        ready(result)
    }

    fn after_tool<'a>(
        &'a self,
        _ctx: &'a ToolCallContext,
        result: &'a mut ToolResultOutcome,
    ) -> BoxFuture<'a, Result<(), MiddlewareError>> {
        let filtered = if self.tool_results {
            self.filter(&mut result.content, "the tool result").and_then(|()| match &mut result.structured {
                Some(structured) => self.filter_json(structured, "the tool result"),
                None => Ok(()),
            })
        } else {
            Ok(())
        };
        ready(filtered)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use troupe_core::{Message, Role, RunId, StopReason};

    fn model_ctx() -> ModelCallContext {
        ModelCallContext::new("a", RunId::new("r"), 1, "demo", "demo")
    }

    fn tool_ctx() -> ToolCallContext {
        ToolCallContext::new("a", RunId::new("r"), 1, "fs.read", "c1")
    }

    fn request() -> ModelRequest {
        let mut request = ModelRequest::new("m")
            .message(Message::user("I am ada@example.com"))
            .message(Message::new(
                Role::Assistant,
                vec![
                    ContentBlock::Thinking { text: "ada@example.com wrote".into(), signature: Some("sig".into()) },
                    ContentBlock::tool_use("c1", "mail.send", serde_json::json!({"to": "ada@example.com"})),
                ],
            ))
            .message(Message::new(
                Role::User,
                vec![ContentBlock::ToolResult {
                    tool_use_id: "c1".into(),
                    content: "sent with key sk-abcdefghijklmnopqrstu".into(),
                    is_error: false,
                }],
            ));
        request.system = Some("Operator phone: +1 415 555 2671".into());
        request
    }

    #[tokio::test]
    async fn requests_are_redacted_but_arguments_and_signed_reasoning_are_not() {
        let filter = ContentFilter::new();
        let mut request = request();
        filter.before_model(&model_ctx(), &mut request).await.expect("redacts, never refuses");
        assert_eq!(request.system.as_deref(), Some("Operator phone: [redacted:phone]"));
        assert_eq!(request.messages[0].text(), "I am [redacted:email]");
        let ContentBlock::ToolResult { content, .. } = &request.messages[2].content[0] else { panic!("a result") };
        assert_eq!(content, "sent with key [redacted:api_key]");
        let kept = serde_json::to_string(&request.messages[1]).expect("serializes");
        assert_eq!(kept.matches("ada@example.com").count(), 2, "thinking and arguments untouched: {kept}");
    }

    #[tokio::test]
    async fn blocking_refuses_without_repeating_the_match() {
        let filter = ContentFilter::new().blocking();
        let error = filter.before_model(&model_ctx(), &mut request()).await.expect_err("blocked");
        let MiddlewareError::Refused { middleware, reason } = &error else { panic!("a refusal: {error:?}") };
        assert_eq!(middleware, "content_filter");
        assert!(reason.contains("phone") && !reason.contains("555"), "{reason}");
        let mut clean = ModelRequest::new("m").message(Message::user("nothing to see"));
        filter.before_model(&model_ctx(), &mut clean).await.expect("clean requests pass");

        let mut result = ToolResultOutcome::success("token ghp_0123456789abcdefghij0123".into(), Duration::ZERO);
        let error = filter.after_tool(&tool_ctx(), &mut result).await.expect_err("withheld");
        assert!(error.to_string().contains("api_key"), "{error}");
    }

    #[tokio::test]
    async fn tool_results_and_their_structured_form_are_redacted() {
        let filter = ContentFilter::new();
        let mut result = ToolResultOutcome::success(
            troupe_tools::ToolOutput::text("owner: bob@example.org")
                .with_structured(serde_json::json!({"owners": ["bob@example.org"], "n": 1})),
            Duration::ZERO,
        );
        filter.after_tool(&tool_ctx(), &mut result).await.expect("redacts");
        assert_eq!(result.content, "owner: [redacted:email]");
        assert_eq!(result.structured, Some(serde_json::json!({"owners": ["[redacted:email]"], "n": 1})));
        let off = ContentFilter::new().on_tool_results(false);
        let mut untouched = ToolResultOutcome::success("bob@example.org".into(), Duration::ZERO);
        off.after_tool(&tool_ctx(), &mut untouched).await.expect("off");
        assert_eq!(untouched.content, "bob@example.org");
    }

    #[tokio::test]
    async fn responses_are_filtered_only_when_asked() {
        let response = || ModelResponse {
            message: Message::assistant("reach me at ada@example.com"),
            stop_reason: StopReason::EndTurn,
            usage: troupe_core::Usage::default(),
            model: None,
            id: None,
        };
        let mut kept = response();
        ContentFilter::new().after_model(&model_ctx(), &mut kept).await.expect("off by default");
        assert_eq!(kept.message.text(), "reach me at ada@example.com");
        let mut redacted = response();
        ContentFilter::new().on_responses(true).after_model(&model_ctx(), &mut redacted).await.expect("on");
        assert_eq!(redacted.message.text(), "reach me at [redacted:email]");
    }

    #[test]
    fn a_bad_custom_pattern_is_an_error_naming_it() {
        let error = ContentFilter::new().pattern("broken", "(unclosed").expect_err("does not compile");
        assert_eq!(error.label, "broken");
        assert!(error.to_string().contains("broken"), "{error}");
    }
}
