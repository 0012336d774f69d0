//! [`MiddlewareError`]: why a hook stopped the call it runs around.

/// Why a hook stopped a call.
///
/// Where it lands depends on the hook: a model call that is refused ends the run
/// [`Failed`](crate::RunOutcome::Failed) with the code [`code`](Self::code); a tool call
/// that is refused, or whose result is withheld, becomes an error result the model reads
/// and the run goes on.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MiddlewareError {
    /// The middleware will not let the call go on.
    #[error("refused by `{middleware}`: {reason}")]
    Refused {
        /// The middleware's [`name`](crate::Middleware::name).
        middleware: String,
        /// Why, in words the model (for tool calls) or a person (for model calls) can act on.
        reason: String,
    },
    /// The run was cancelled while the middleware held the call (a rate limit's wait).
    #[error("the run was cancelled while `{middleware}` held the call")]
    Cancelled {
        /// The middleware's name.
        middleware: String,
    },
}

impl MiddlewareError {
    /// A refusal by `middleware` for `reason`.
    pub fn refused(middleware: impl Into<String>, reason: impl Into<String>) -> Self {
        MiddlewareError::Refused { middleware: middleware.into(), reason: reason.into() }
    }

    /// A wait of `middleware` that the run's cancellation ended.
    pub fn cancelled(middleware: impl Into<String>) -> Self {
        MiddlewareError::Cancelled { middleware: middleware.into() }
    }

    /// A short machine-readable name: `middleware_refused` or `cancelled`.
    pub fn code(&self) -> &'static str {
        match self {
            MiddlewareError::Refused { .. } => "middleware_refused",
            MiddlewareError::Cancelled { .. } => "cancelled",
        }
    }
}
