//! Model calls over the worker protocol: a worker's agent calls its model through the
//! coordinator, one [`ModelCall`] answered by [`ModelReply`] frames of the same number,
//! so the provider's key, its HTTP client and the team's budget stay with the
//! coordinator.
//!
//! The coordinator serves only the models the task names ([`HostedModel`]); it answers a
//! call with [`ModelAnswer::Accepted`] once its provider took the request (or
//! [`ModelAnswer::Failed`]), then the response's events, then [`ModelAnswer::End`] or a
//! failure. A worker that no longer wants the response sends a model-cancel frame with
//! the call's number.

use serde::{Deserialize, Serialize};
use troupe_core::{ModelRequest, StreamEvent};
use troupe_model::{Error as ModelError, ModelInfo, RetryHint};

/// A model the coordinator serves a task's worker.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostedModel {
    /// The model as the agent names it (`openai/gpt-4.1`, an alias, `demo`).
    pub name: String,
    /// Its `provider/model` id.
    pub id: String,
    /// The model name sent on the wire.
    pub model: String,
    /// What is known of it (context window, prices).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub info: Option<ModelInfo>,
}

/// A model call of a worker.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelCall {
    /// The call's number, which its replies carry.
    pub id: u64,
    /// The model, as one of the task's [`HostedModel::name`]s.
    pub model: String,
    /// The request.
    pub request: ModelRequest,
}

/// One answer of the coordinator to a [`ModelCall`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelReply {
    /// The call's number.
    pub id: u64,
    /// What it says.
    pub answer: ModelAnswer,
}

/// What a [`ModelReply`] says.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelAnswer {
    /// The provider took the request: the response's events follow.
    Accepted,
    /// An event of the response.
    Event(StreamEvent),
    /// The response is complete.
    End,
    /// The call failed (before or after it was accepted), or was refused.
    Failed(WireModelError),
}

/// A model call's number, as a model-cancel frame carries it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelCancel {
    /// The call's number.
    pub id: u64,
}

/// A model [`Error`](ModelError) on the wire: its kind, the provider and its message. The
/// kinds a run acts on (a context window exceeded, a stream that broke off and may be
/// restarted, a cancellation) come back as themselves.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WireModelError {
    /// The error's code ([`ModelError::code`]), or `refused` for a call the coordinator
    /// would not make.
    pub code: String,
    /// The provider, where the error names one.
    #[serde(default)]
    pub provider: String,
    /// The message.
    pub message: String,
}

impl WireModelError {
    /// A call the coordinator refused: a model the task was not given, or a team budget
    /// that is spent.
    pub fn refused(message: impl Into<String>) -> Self {
        WireModelError { code: "refused".to_owned(), provider: String::new(), message: message.into() }
    }
}

impl From<&ModelError> for WireModelError {
    fn from(error: &ModelError) -> Self {
        let (provider, message) = match error {
            ModelError::RateLimited { provider, message, .. }
            | ModelError::Overloaded { provider, message, .. }
            | ModelError::Server { provider, message, .. }
            | ModelError::Authentication { provider, message, .. }
            | ModelError::InvalidRequest { provider, message, .. }
            | ModelError::ContextWindowExceeded { provider, message }
            | ModelError::Transport { provider, message }
            | ModelError::Truncated { provider, message }
            | ModelError::Decode { provider, message } => (provider.clone(), message.clone()),
            ModelError::Timeout { provider, .. } => (provider.clone(), error.to_string()),
            ModelError::MissingApiKey { provider, .. }
            | ModelError::UnsupportedInput { provider, .. }
            | ModelError::UnsupportedOutputSchema { provider, .. } => (provider.clone(), error.to_string()),
            // Unknown models, configuration, cancellation, and kinds added later.
            _ => (String::new(), error.to_string()),
        };
        WireModelError { code: error.code().to_owned(), provider, message }
    }
}

impl From<WireModelError> for ModelError {
    fn from(error: WireModelError) -> Self {
        let WireModelError { code, provider, message } = error;
        let hint = RetryHint::default();
        match code.as_str() {
            "rate_limited" => ModelError::RateLimited { provider, message, hint },
            "overloaded" => ModelError::Overloaded { provider, message, hint },
            "server_error" => ModelError::Server { provider, status: 0, message, hint },
            "authentication" => ModelError::Authentication { provider, status: 0, message },
            "context_window_exceeded" => ModelError::ContextWindowExceeded { provider, message },
            // A timeout's phase and duration are in its message.
            "timeout" | "transport" => ModelError::Transport { provider, message },
            "truncated" => ModelError::Truncated { provider, message },
            "decode" => ModelError::Decode { provider, message },
            "cancelled" => ModelError::Cancelled,
            "unknown_model" => ModelError::Config(message),
            "invalid_request" => ModelError::InvalidRequest { provider, status: 0, message },
            // Refusals, a missing key, an unsupported input or schema, configuration:
            // nothing the worker can retry.
            _ => ModelError::Config(format!("the coordinator's model call failed: {message}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(error: &ModelError) -> ModelError {
        let reply = ModelReply { id: 3, answer: ModelAnswer::Failed(error.into()) };
        let text = serde_json::to_string(&reply).expect("encodes");
        let back: ModelReply = serde_json::from_str(&text).expect("decodes");
        let ModelAnswer::Failed(wire) = back.answer else { panic!("a failure: {text}") };
        wire.into()
    }

    #[test]
    fn the_errors_a_run_acts_on_keep_their_kind_and_message() {
        let overflow = ModelError::ContextWindowExceeded { provider: "openai".into(), message: "too long".into() };
        assert_eq!(round_trip(&overflow).to_string(), overflow.to_string());
        let broken = ModelError::truncated("openai", "the stream ended early");
        let back = round_trip(&broken);
        assert!(back.is_retryable(), "a broken stream may be restarted: {back}");
        assert_eq!(back.to_string(), broken.to_string());
        assert!(matches!(round_trip(&ModelError::Cancelled), ModelError::Cancelled));
        let auth = round_trip(&ModelError::Authentication { provider: "p".into(), status: 401, message: "no".into() });
        assert!(!auth.is_retryable() && auth.code() == "authentication", "{auth}");
    }

    #[test]
    fn a_refusal_is_not_retried() {
        let refused: ModelError = WireModelError::refused("the team's budget is spent").into();
        assert!(!refused.is_retryable());
        assert!(refused.to_string().contains("the team's budget is spent"), "{refused}");
    }

    #[test]
    fn a_call_and_its_events_cross_the_wire_unchanged() {
        let call = ModelCall { id: 9, model: "openai/gpt-4.1".into(), request: ModelRequest::new("gpt-4.1") };
        let text = serde_json::to_string(&call).expect("encodes");
        assert_eq!(serde_json::from_str::<ModelCall>(&text).expect("decodes"), call);
        let event =
            ModelReply { id: 9, answer: ModelAnswer::Event(StreamEvent::TextDelta { index: 0, text: "hi".into() }) };
        let text = serde_json::to_string(&event).expect("encodes");
        assert_eq!(serde_json::from_str::<ModelReply>(&text).expect("decodes"), event);
    }
}
