//! [`ApiKey`]: a secret that never prints.

use serde::{Deserialize, Serialize};
use std::fmt;

/// An API key. Its `Debug` output is redacted and it has no `Display`, so it cannot reach
/// a log line, an error message or a panic by accident.
///
/// It reads from and writes to configuration (an agent file's `api_key`) as a plain
/// string: only what the user wrote there is ever written back.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key.
    pub fn new(key: impl Into<String>) -> Self {
        ApiKey(key.into())
    }

    /// Reads the first of `variables` that is set to a non-empty value.
    pub fn from_env(variables: &[impl AsRef<str>]) -> Option<Self> {
        variables.iter().find_map(|v| std::env::var(v.as_ref()).ok().filter(|k| !k.trim().is_empty()).map(ApiKey))
    }

    /// The secret itself, for the one place that writes it into a request header.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_key() {
        let key = ApiKey::new("sk-live-123456");
        let shown = format!("{key:?} {:?}", Some(&key));
        assert!(!shown.contains("sk-live"), "{shown}");
    }
}
