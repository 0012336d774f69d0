//! [`FailureCode`]: why a run failed, for programs.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Why a run failed, as a program tells failures apart: retry on `rate_limited`, fix the
/// key on `authentication`, resume on `store`.
///
/// On the wire (outcomes, stored states, `run_error` events) it is its snake_case name. A
/// name this version does not know (from a newer peer, say) reads as
/// [`FailureCode::Other`] and is written back unchanged.
///
/// ```
/// use troupe_core::FailureCode;
///
/// assert_eq!(FailureCode::from("rate_limited"), FailureCode::RateLimited);
/// assert_eq!(FailureCode::LeaseLost.as_str(), "lease_lost");
/// assert_eq!(FailureCode::from("quota_gone"), FailureCode::Other("quota_gone".into()));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FailureCode {
    /// The provider limited the rate of calls.
    RateLimited,
    /// The provider was overloaded.
    Overloaded,
    /// The provider failed.
    ServerError,
    /// The provider refused the key.
    Authentication,
    /// The provider refused the request.
    InvalidRequest,
    /// The conversation no longer fits the model's context window.
    ContextWindowExceeded,
    /// A call to the provider timed out.
    Timeout,
    /// The connection to the provider failed.
    Transport,
    /// The provider's answer broke off before its end.
    Truncated,
    /// The provider's answer could not be read.
    Decode,
    /// No key for the provider.
    MissingApiKey,
    /// The model is not known.
    UnknownModel,
    /// The configuration is wrong.
    Config,
    /// Something was cancelled under the run.
    Cancelled,
    /// The model declined to answer.
    Refusal,
    /// The agent names a tool that does not exist.
    UnknownTool,
    /// The final answer did not match the output schema asked for, after every correction
    /// the run allowed.
    OutputInvalid,
    /// The output schema asked for is one the model's vendor cannot take (a list at the
    /// root where an object is needed, a recursive type, a map); the reason names which.
    UnsupportedOutputSchema,
    /// The request carries what the model's vendor cannot take (a PDF by URL where only
    /// bytes are read, say); the reason names which. Nothing was sent.
    UnsupportedInput,
    /// A middleware refused the call.
    MiddlewareRefused,
    /// A plugin could not be initialized.
    Plugin,
    /// The conversation could not be compacted.
    Compaction,
    /// The run's store failed; the run can be resumed from its last checkpoint.
    Store,
    /// Another worker took the run over.
    LeaseLost,
    /// The run stopped without an outcome.
    Internal,
    /// A code this version does not know.
    Other(String),
}

/// Every code this version knows, with its name, for reading names back (a new code goes
/// here and in [`FailureCode::as_str`]; the tests check that both agree).
const KNOWN: [(FailureCode, &str); 25] = [
    (FailureCode::RateLimited, "rate_limited"),
    (FailureCode::Overloaded, "overloaded"),
    (FailureCode::ServerError, "server_error"),
    (FailureCode::Authentication, "authentication"),
    (FailureCode::InvalidRequest, "invalid_request"),
    (FailureCode::ContextWindowExceeded, "context_window_exceeded"),
    (FailureCode::Timeout, "timeout"),
    (FailureCode::Transport, "transport"),
    (FailureCode::Truncated, "truncated"),
    (FailureCode::Decode, "decode"),
    (FailureCode::MissingApiKey, "missing_api_key"),
    (FailureCode::UnknownModel, "unknown_model"),
    (FailureCode::Config, "config"),
    (FailureCode::Cancelled, "cancelled"),
    (FailureCode::Refusal, "refusal"),
    (FailureCode::UnknownTool, "unknown_tool"),
    (FailureCode::OutputInvalid, "output_invalid"),
    (FailureCode::UnsupportedOutputSchema, "unsupported_output_schema"),
    (FailureCode::UnsupportedInput, "unsupported_input"),
    (FailureCode::MiddlewareRefused, "middleware_refused"),
    (FailureCode::Plugin, "plugin"),
    (FailureCode::Compaction, "compaction"),
    (FailureCode::Store, "store"),
    (FailureCode::LeaseLost, "lease_lost"),
    (FailureCode::Internal, "internal"),
];

impl FailureCode {
    /// Whether the failure may not happen again: the provider was rate-limited,
    /// overloaded, failing, slow or unreachable, its answer broke off, or the store
    /// failed. A run that failed so can be resumed from its last checkpoint.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            FailureCode::RateLimited
                | FailureCode::Overloaded
                | FailureCode::ServerError
                | FailureCode::Timeout
                | FailureCode::Transport
                | FailureCode::Truncated
                | FailureCode::Store
        )
    }

    /// Its name on the wire.
    pub fn as_str(&self) -> &str {
        match self {
            FailureCode::RateLimited => "rate_limited",
            FailureCode::Overloaded => "overloaded",
            FailureCode::ServerError => "server_error",
            FailureCode::Authentication => "authentication",
            FailureCode::InvalidRequest => "invalid_request",
            FailureCode::ContextWindowExceeded => "context_window_exceeded",
            FailureCode::Timeout => "timeout",
            FailureCode::Transport => "transport",
            FailureCode::Truncated => "truncated",
            FailureCode::Decode => "decode",
            FailureCode::MissingApiKey => "missing_api_key",
            FailureCode::UnknownModel => "unknown_model",
            FailureCode::Config => "config",
            FailureCode::Cancelled => "cancelled",
            FailureCode::Refusal => "refusal",
            FailureCode::UnknownTool => "unknown_tool",
            FailureCode::OutputInvalid => "output_invalid",
            FailureCode::UnsupportedOutputSchema => "unsupported_output_schema",
            FailureCode::UnsupportedInput => "unsupported_input",
            FailureCode::MiddlewareRefused => "middleware_refused",
            FailureCode::Plugin => "plugin",
            FailureCode::Compaction => "compaction",
            FailureCode::Store => "store",
            FailureCode::LeaseLost => "lease_lost",
            FailureCode::Internal => "internal",
            FailureCode::Other(code) => code,
        }
    }
}

impl From<&str> for FailureCode {
    fn from(name: &str) -> Self {
        KNOWN
            .iter()
            .find(|(_, known)| *known == name)
            .map_or_else(|| FailureCode::Other(name.to_owned()), |(code, _)| code.clone())
    }
}

impl From<String> for FailureCode {
    fn from(name: String) -> Self {
        FailureCode::from(name.as_str())
    }
}

impl std::fmt::Display for FailureCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for FailureCode {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for FailureCode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(FailureCode::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_known_code_reads_back_as_itself_and_an_unknown_one_round_trips() {
        for (code, name) in &KNOWN {
            assert_eq!(code.as_str(), *name);
            assert_eq!(&FailureCode::from(*name), code, "{name}");
            let wire = serde_json::to_value(code).expect("serializes");
            assert_eq!(wire, serde_json::Value::String((*name).to_owned()));
            assert_eq!(&serde_json::from_value::<FailureCode>(wire).expect("reads"), code);
        }
        let names: std::collections::HashSet<_> = KNOWN.iter().map(|(_, name)| *name).collect();
        assert_eq!(names.len(), KNOWN.len(), "no two codes share a name");
        let other: FailureCode = serde_json::from_str("\"quota_gone\"").expect("an unknown code reads");
        assert_eq!(other, FailureCode::Other("quota_gone".into()));
        assert_eq!(serde_json::to_string(&other).expect("writes"), "\"quota_gone\"");
    }
}
