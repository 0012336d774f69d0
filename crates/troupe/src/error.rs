//! The unified error of the SDK.

/// Any error troupe returns. Each variant keeps its layer's typed error, so callers can
/// match on, say, a rate limit and its retry delay.
///
/// Its `Debug` reads as its sentence and its causes, because that is what a `?` out of
/// `main` prints; `{:#?}` shows the variants underneath.
///
/// ```
/// let error = troupe::Error::from(troupe::model::Error::MissingApiKey {
///     provider: "openai".into(),
///     variable: "OPENAI_API_KEY".into(),
/// });
/// assert!(format!("{error:?}").starts_with("OPENAI_API_KEY is not set"));
/// assert!(format!("{error:#?}").starts_with("Model("));
/// ```
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A value of the core vocabulary was invalid.
    #[error(transparent)]
    Core(#[from] troupe_core::Error),
    /// A model call failed.
    #[error(transparent)]
    Model(#[from] troupe_model::Error),
    /// A tool could not be registered (a duplicate or invalid name).
    #[error(transparent)]
    Catalog(#[from] troupe_tools::CatalogError),
    /// An agent could not be built or run (a bad spec, workspace or model).
    #[error(transparent)]
    Runtime(#[from] troupe_runtime::RuntimeError),
    /// A store could not be opened or used.
    #[error(transparent)]
    Store(#[from] troupe_store::StoreError),
    /// A team could not be built or run as a whole.
    #[cfg(feature = "team")]
    #[error(transparent)]
    Team(#[from] troupe_team::TeamError),
    /// Metrics could not be exported, or tracing could not be installed.
    #[cfg(feature = "telemetry")]
    #[error(transparent)]
    Telemetry(#[from] troupe_telemetry::TelemetryError),
}

/// The SDK's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl std::fmt::Debug for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if f.alternate() {
            return match self {
                Error::Core(e) => f.debug_tuple("Core").field(e).finish(),
                Error::Model(e) => f.debug_tuple("Model").field(e).finish(),
                Error::Catalog(e) => f.debug_tuple("Catalog").field(e).finish(),
                Error::Runtime(e) => f.debug_tuple("Runtime").field(e).finish(),
                Error::Store(e) => f.debug_tuple("Store").field(e).finish(),
                #[cfg(feature = "team")]
                Error::Team(e) => f.debug_tuple("Team").field(e).finish(),
                #[cfg(feature = "telemetry")]
                Error::Telemetry(e) => f.debug_tuple("Telemetry").field(e).finish(),
            };
        }
        let message = self.to_string();
        f.write_str(&message)?;
        // Each cause the message does not already say, as anyhow prints a chain.
        let mut said = message;
        let mut source = std::error::Error::source(self);
        while let Some(cause) = source {
            let text = cause.to_string();
            if !said.contains(&text) {
                write!(f, "\n\nCaused by: {text}")?;
                said.push_str(&text);
            }
            source = cause.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_reads_as_the_sentence_not_the_variants() {
        let model = troupe_model::Error::MissingApiKey { provider: "openai".into(), variable: "OPENAI_API_KEY".into() };
        let error = Error::from(troupe_runtime::RuntimeError::Model(model));
        let debug = format!("{error:?}");
        assert_eq!(debug, error.to_string(), "no cause repeated: {debug}");
        assert!(debug.starts_with("model resolution failed: OPENAI_API_KEY is not set"), "{debug}");
        assert!(!debug.contains("Runtime("), "{debug}");
        assert!(format!("{error:#?}").starts_with("Runtime("));
    }
}
