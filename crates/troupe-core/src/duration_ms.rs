//! A serde helper: an optional [`Duration`] as whole milliseconds, for configuration and
//! declarations that people read and write (`timeout_ms = 1500`).
//!
//! ```
//! use std::time::Duration;
//!
//! #[derive(serde::Serialize, serde::Deserialize)]
//! struct Limits {
//!     #[serde(default, with = "troupe_core::duration_ms")]
//!     timeout_ms: Option<Duration>,
//! }
//!
//! let limits: Limits = serde_json::from_str(r#"{"timeout_ms": 1500}"#).expect("parses");
//! assert_eq!(limits.timeout_ms, Some(Duration::from_millis(1500)));
//! ```

use serde::{Deserialize, Deserializer, Serializer};
use std::time::Duration;

/// Writes `value` as milliseconds (saturating at `u64::MAX`), or nothing.
pub fn serialize<S: Serializer>(value: &Option<Duration>, serializer: S) -> Result<S::Ok, S::Error> {
    match value {
        Some(d) => serializer.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        None => serializer.serialize_none(),
    }
}

/// Reads milliseconds, or nothing.
pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Duration>, D::Error> {
    Ok(Option::<u64>::deserialize(deserializer)?.map(Duration::from_millis))
}
