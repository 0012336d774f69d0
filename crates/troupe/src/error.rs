//! The unified error of the SDK.

/// Any error troupe returns. Each variant keeps its layer's typed error, so callers can
/// match on, say, a rate limit and its retry delay.
#[derive(Debug, thiserror::Error)]
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
