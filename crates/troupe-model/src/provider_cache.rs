//! [`ProviderCache`]: the HTTP providers a [`Providers`](crate::Providers) has built, so
//! that every run, agent, team member and fallback route calling one provider shares one
//! `reqwest::Client` — its connection pool, its TLS configuration and its root store.
//!
//! Building a client reads the system's root certificates and a new client opens new
//! connections (a new TLS handshake per run against a real vendor); a resolution that
//! reused nothing cost a run far more than the run itself.

use crate::api_key::ApiKey;
use crate::error::Result;
use crate::provider::LlmProvider;
use crate::providers::ProviderKind;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// Everything an HTTP provider is built from: a provider whose settings changed (a
/// rotated key, a new base URL after a hot reload) gets a new one, while runs that hold
/// the old one keep it.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct HttpSettings {
    pub(crate) kind: ProviderKind,
    pub(crate) base_url: String,
    pub(crate) key: Option<ApiKey>,
    pub(crate) legacy_max_tokens: bool,
    pub(crate) answer_tool: bool,
}

/// A provider, and the settings it was built from.
type Built = (HttpSettings, Arc<dyn LlmProvider>);

/// The providers built so far, one per provider name.
#[derive(Default)]
pub(crate) struct ProviderCache {
    built: Mutex<HashMap<String, Built>>,
}

impl ProviderCache {
    /// The provider `name` built from `settings`: the one built before if its settings
    /// were the same, otherwise a new one from `build`, which replaces it.
    pub(crate) fn get_or_build(
        &self,
        name: &str,
        settings: HttpSettings,
        build: impl FnOnce(&HttpSettings) -> Result<Arc<dyn LlmProvider>>,
    ) -> Result<Arc<dyn LlmProvider>> {
        if let Some((built_from, provider)) = self.lock().get(name)
            && *built_from == settings
        {
            return Ok(Arc::clone(provider));
        }
        // Built outside the lock: building a client reads the root certificates from disk.
        let provider = build(&settings)?;
        let mut built = self.lock();
        match built.get(name) {
            // Another thread built the same one meanwhile: keep the first, so that every
            // caller shares one pool.
            Some((built_from, first)) if *built_from == settings => Ok(Arc::clone(first)),
            _ => {
                built.insert(name.to_owned(), (settings, Arc::clone(&provider)));
                Ok(provider)
            }
        }
    }

    /// How many providers are held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Built>> {
        // The map is never left half-written: a panic elsewhere must not wedge resolution.
        self.built.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl std::fmt::Debug for ProviderCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut names: Vec<String> = self.lock().keys().cloned().collect();
        names.sort();
        f.debug_struct("ProviderCache").field("providers", &names).finish()
    }
}
