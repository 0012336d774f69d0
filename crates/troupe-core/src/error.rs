//! The error type of the core vocabulary.

/// What can go wrong while building or checking core values.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A value did not satisfy an invariant of the vocabulary (an empty tool name, a
    /// tool result without its call, ...).
    #[error("invalid {what}: {reason}")]
    Invalid {
        /// Which kind of value was invalid.
        what: &'static str,
        /// Why it was rejected.
        reason: String,
    },
    /// JSON that should have described a core value did not.
    #[error("malformed JSON: {0}")]
    Json(#[from] serde_json::Error),
}

/// The result type of `troupe-core`.
pub type Result<T, E = Error> = std::result::Result<T, E>;
