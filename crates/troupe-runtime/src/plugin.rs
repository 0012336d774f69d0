//! [`Plugin`]: a bundle of tools and middlewares with a lifecycle.

use crate::metrics::Metrics;
use crate::middleware::Middleware;
use futures::future::BoxFuture;
use std::sync::Arc;
use troupe_tools::{Tool, Workspace};

/// Tools and middlewares that come together, with setup and teardown.
///
/// Register a plugin in code, on an engine ([`EngineBuilder::plugin`](crate::EngineBuilder::plugin))
/// or on a runner ([`Runner::with_plugin`](crate::Runner::with_plugin)):
///
/// - [`tools`](Self::tools) and [`middlewares`](Self::middlewares) are read once, at
///   registration. The tools join every agent's catalog (an agent restricted to named
///   tools gets a plugin tool only if it names it); the middlewares join the stack after
///   those registered before the plugin.
/// - [`initialize`](Self::initialize) runs **once**, when the first run of the engine (or
///   runner) starts, before its first model call, with that run's workspace; runs that
///   start meanwhile wait for it. Call
///   [`Runner::initialize_plugins`](crate::Runner::initialize_plugins) to do it earlier
///   and see its error at once. A failed initialization ends that run
///   [`Failed`](crate::RunOutcome::Failed) with code `plugin`, and the next run tries
///   again.
/// - [`shutdown`](Self::shutdown) runs once, for initialized plugins in reverse order,
///   from [`Engine::shutdown`](crate::Engine::shutdown) (or
///   [`Runner::shutdown_plugins`](crate::Runner::shutdown_plugins)). Runs started after
///   it fail with code `plugin`.
///
/// Middlewares that need what `initialize` set up share it with the plugin (an `Arc`).
///
/// ```
/// use futures::{FutureExt, future::BoxFuture};
/// use std::sync::Arc;
/// use troupe_runtime::{Engine, Logging, Middleware, Plugin, PluginContext, PluginError};
/// use troupe_tools::{Effect, Tool, ToolOutput, typed_tool};
///
/// /// Adds a clock tool and logs every call.
/// struct Clock;
///
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct NoArgs {}
///
/// impl Plugin for Clock {
///     fn name(&self) -> &str {
///         "clock"
///     }
///
///     fn tools(&self) -> Vec<Arc<dyn Tool>> {
///         vec![typed_tool("clock.now", "The time, in seconds since 1970.", Effect::ReadOnly, |_ctx, _: NoArgs| async {
///             let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
///             Ok(ToolOutput::text(now.as_secs().to_string()))
///         })
///         .into_arc()]
///     }
///
///     fn middlewares(&self) -> Vec<Arc<dyn Middleware>> {
///         vec![Arc::new(Logging::new())]
///     }
///
///     fn initialize<'a>(&'a self, ctx: &'a PluginContext) -> BoxFuture<'a, Result<(), PluginError>> {
///         let ok = ctx.workspace.root().is_dir();
///         async move { if ok { Ok(()) } else { Err(PluginError::failed("clock", "no workspace")) } }.boxed()
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let engine = Engine::builder().plugin(Arc::new(Clock)).build();
/// let agent = engine.agent("timekeeper").model("demo").build()?;
/// assert!(agent.runner().agent_catalog(agent.spec())?.get("clock.now").is_some());
/// let output = agent.run("hello").await?;
/// assert!(output.is_completed());
/// engine.shutdown().await;
/// # Ok(())
/// # }
/// ```
pub trait Plugin: Send + Sync {
    /// The plugin's name, for errors and logs.
    fn name(&self) -> &str;

    /// The middlewares the plugin adds, in order.
    fn middlewares(&self) -> Vec<Arc<dyn Middleware>> {
        Vec::new()
    }

    /// The tools the plugin adds.
    fn tools(&self) -> Vec<Arc<dyn Tool>> {
        Vec::new()
    }

    /// Sets the plugin up; called once, before the first run goes on.
    fn initialize<'a>(&'a self, ctx: &'a PluginContext) -> BoxFuture<'a, Result<(), PluginError>> {
        let _ = ctx;
        Box::pin(std::future::ready(Ok(())))
    }

    /// Tears the plugin down; called once, if it was initialized.
    fn shutdown(&self) -> BoxFuture<'_, ()> {
        Box::pin(std::future::ready(()))
    }
}

/// What a plugin is given to set itself up.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct PluginContext {
    /// The workspace of the run that initializes the plugin (or of the runner asked to).
    pub workspace: Arc<Workspace>,
    /// The metrics of the runner's agents.
    pub metrics: Arc<Metrics>,
    /// The configuration the plugin was registered with
    /// ([`EngineBuilder::plugin_with_config`](crate::EngineBuilder::plugin_with_config));
    /// `null` without one.
    pub config: serde_json::Value,
}

impl PluginContext {
    /// A context in `workspace` with `metrics` and no configuration.
    pub fn new(workspace: Arc<Workspace>, metrics: Arc<Metrics>) -> Self {
        PluginContext { workspace, metrics, config: serde_json::Value::Null }
    }

    /// The same context with `config`.
    pub fn with_config(mut self, config: serde_json::Value) -> Self {
        self.config = config;
        self
    }
}

/// A plugin that cannot be set up or used.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum PluginError {
    /// The plugin's initialization failed.
    #[error("plugin `{plugin}` failed to initialize: {message}")]
    Failed {
        /// The plugin.
        plugin: String,
        /// What went wrong, and what to do about it.
        message: String,
    },
    /// A tool of the plugin clashes with a tool already in the catalog.
    #[error("plugin `{plugin}`: {source}")]
    Tools {
        /// The plugin.
        plugin: String,
        /// The clash.
        source: troupe_tools::CatalogError,
    },
    /// The plugins were shut down; nothing runs with them any more.
    #[error("plugin `{plugin}` was shut down")]
    ShutDown {
        /// The plugin.
        plugin: String,
    },
}

impl PluginError {
    /// An initialization failure of `plugin`.
    pub fn failed(plugin: impl Into<String>, message: impl Into<String>) -> Self {
        PluginError::Failed { plugin: plugin.into(), message: message.into() }
    }
}
