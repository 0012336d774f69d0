//! The plugins of an engine or runner, and their once-only lifecycle.

use crate::middleware::Middleware;
use crate::plugin::{Plugin, PluginContext, PluginError};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::OnceCell;
use troupe_tools::Tool;

/// One registered plugin, with what it contributed and whether it was set up.
struct Registered {
    plugin: Arc<dyn Plugin>,
    config: serde_json::Value,
    tools: Vec<Arc<dyn Tool>>,
    initialized: OnceCell<()>,
    shut_down: AtomicBool,
}

/// Registered plugins, in order. Clones share each plugin's lifecycle, so a plugin of an
/// engine is set up once however many agents and runs use it.
#[derive(Clone, Default)]
pub(crate) struct PluginSet {
    entries: Vec<Arc<Registered>>,
}

impl std::fmt::Debug for PluginSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

impl PluginSet {
    /// Registers `plugin`; returns its middlewares, for the caller's stack.
    pub(crate) fn register(&mut self, plugin: Arc<dyn Plugin>, config: serde_json::Value) -> Vec<Arc<dyn Middleware>> {
        let middlewares = plugin.middlewares();
        let tools = plugin.tools();
        self.entries.push(Arc::new(Registered {
            plugin,
            config,
            tools,
            initialized: OnceCell::new(),
            shut_down: AtomicBool::new(false),
        }));
        middlewares
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub(crate) fn names(&self) -> Vec<&str> {
        self.entries.iter().map(|e| e.plugin.name()).collect()
    }

    /// Every plugin's tools, in registration order.
    pub(crate) fn tools(&self) -> impl Iterator<Item = Arc<dyn Tool>> + '_ {
        self.entries.iter().flat_map(|e| e.tools.iter().cloned())
    }

    /// The tools of the last plugin registered.
    pub(crate) fn last_tools(&self) -> Vec<Arc<dyn Tool>> {
        self.entries.last().map(|e| e.tools.clone()).unwrap_or_default()
    }

    /// The name of the last plugin registered.
    pub(crate) fn last_name(&self) -> String {
        self.entries.last().map(|e| e.plugin.name().to_owned()).unwrap_or_default()
    }

    /// Initializes every plugin not yet initialized, in order; concurrent callers wait
    /// for the one doing it. A failure leaves the plugin to be tried again.
    pub(crate) async fn initialize(&self, ctx: &PluginContext) -> Result<(), PluginError> {
        for entry in &self.entries {
            if entry.shut_down.load(Ordering::SeqCst) {
                return Err(PluginError::ShutDown { plugin: entry.plugin.name().to_owned() });
            }
            entry
                .initialized
                .get_or_try_init(|| async {
                    let ctx = ctx.clone().with_config(entry.config.clone());
                    tracing::debug!(plugin = entry.plugin.name(), "initializing plugin");
                    entry.plugin.initialize(&ctx).await
                })
                .await?;
        }
        Ok(())
    }

    /// Shuts down every initialized plugin once, last registered first.
    pub(crate) async fn shutdown(&self) {
        for entry in self.entries.iter().rev() {
            let first = !entry.shut_down.swap(true, Ordering::SeqCst);
            if first && entry.initialized.initialized() {
                tracing::debug!(plugin = entry.plugin.name(), "shutting plugin down");
                entry.plugin.shutdown().await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Metrics;
    use futures::FutureExt;
    use futures::future::BoxFuture;
    use std::sync::Mutex;
    use std::sync::atomic::AtomicU32;
    use troupe_tools::Workspace;

    struct Counted {
        name: &'static str,
        inits: AtomicU32,
        failures_left: AtomicU32,
        journal: Arc<Mutex<Vec<String>>>,
    }

    impl Counted {
        fn new(name: &'static str, failures: u32, journal: &Arc<Mutex<Vec<String>>>) -> Arc<Self> {
            Arc::new(Counted {
                name,
                inits: AtomicU32::new(0),
                failures_left: AtomicU32::new(failures),
                journal: Arc::clone(journal),
            })
        }
    }

    impl Plugin for Counted {
        fn name(&self) -> &str {
            self.name
        }

        fn initialize<'a>(&'a self, ctx: &'a PluginContext) -> BoxFuture<'a, Result<(), PluginError>> {
            async move {
                self.inits.fetch_add(1, Ordering::SeqCst);
                // Concurrent callers must wait here rather than initialize again.
                tokio::task::yield_now().await;
                self.journal.lock().expect("journal").push(format!("init {} {}", self.name, ctx.config));
                if self.failures_left.load(Ordering::SeqCst) > 0 {
                    self.failures_left.fetch_sub(1, Ordering::SeqCst);
                    return Err(PluginError::failed(self.name, "not yet"));
                }
                Ok(())
            }
            .boxed()
        }

        fn shutdown(&self) -> BoxFuture<'_, ()> {
            self.journal.lock().expect("journal").push(format!("shutdown {}", self.name));
            async {}.boxed()
        }
    }

    fn ctx(dir: &tempfile::TempDir) -> PluginContext {
        PluginContext::new(Arc::new(Workspace::new(dir.path()).expect("workspace")), Arc::new(Metrics::new()))
    }

    #[tokio::test]
    async fn plugins_initialize_once_in_order_and_shut_down_in_reverse() {
        let dir = tempfile::tempdir().expect("tempdir");
        let journal = Arc::new(Mutex::new(Vec::new()));
        let (a, b) = (Counted::new("a", 0, &journal), Counted::new("b", 0, &journal));
        let mut set = PluginSet::default();
        set.register(a.clone(), serde_json::json!({"level": 1}));
        set.register(b.clone(), serde_json::Value::Null);
        let shared = set.clone();
        let ctx = ctx(&dir);
        let (first, second) = tokio::join!(set.initialize(&ctx), shared.initialize(&ctx));
        first.and(second).expect("both initialize");
        set.initialize(&ctx).await.expect("again: nothing to do");
        assert_eq!((a.inits.load(Ordering::SeqCst), b.inits.load(Ordering::SeqCst)), (1, 1));
        shared.shutdown().await;
        set.shutdown().await;
        assert_eq!(
            *journal.lock().expect("journal"),
            [r#"init a {"level":1}"#, "init b null", "shutdown b", "shutdown a"]
        );
        let after = set.initialize(&ctx).await.expect_err("shut down");
        assert_eq!(after, PluginError::ShutDown { plugin: "a".into() });
    }

    #[tokio::test]
    async fn a_failed_initialization_is_tried_again_and_an_uninitialized_plugin_is_not_shut_down() {
        let dir = tempfile::tempdir().expect("tempdir");
        let journal = Arc::new(Mutex::new(Vec::new()));
        let (flaky, never) = (Counted::new("flaky", 1, &journal), Counted::new("never", 0, &journal));
        let mut set = PluginSet::default();
        set.register(flaky.clone(), serde_json::Value::Null);
        set.register(never.clone(), serde_json::Value::Null);
        let error = set.initialize(&ctx(&dir)).await.expect_err("first try fails");
        assert_eq!(error, PluginError::failed("flaky", "not yet"));
        assert_eq!(never.inits.load(Ordering::SeqCst), 0, "later plugins wait for earlier ones");
        set.shutdown().await;
        assert_eq!(*journal.lock().expect("journal"), ["init flaky null"], "nothing was initialized");

        let mut retried = PluginSet::default();
        retried.register(Counted::new("flaky", 1, &journal), serde_json::Value::Null);
        assert!(retried.initialize(&ctx(&dir)).await.is_err());
        retried.initialize(&ctx(&dir)).await.expect("the second try succeeds");
    }
}
