//! [`Limits`]: where a run stops.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The limits a run stops at.
///
/// Budgets are checked before each model call: a run that has spent its tokens or dollars
/// ends [`BudgetExceeded`](crate::RunOutcome::BudgetExceeded) without making the call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Limits {
    /// The most model calls a run makes (default 50).
    pub max_iterations: u32,
    /// The longest a run may take, wall clock, waits for approval included; `None` for no
    /// limit. Serialized as whole milliseconds (`timeout_ms`).
    #[serde(with = "troupe_core::duration_ms", skip_serializing_if = "Option::is_none", rename = "timeout_ms")]
    pub timeout: Option<Duration>,
    /// The most tokens (input, cached and output) the whole run may use.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_total_tokens: Option<u64>,
    /// The most the whole run may cost, in USD, by the registry's prices.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_usd: Option<f64>,
    /// The most tokens one model response may generate (`max_tokens` of each request).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
    /// How many times in a row a response cut at the output limit is resumed before the
    /// run ends [`Incomplete`](crate::RunOutcome::Incomplete) (default 3).
    pub max_tokens_recoveries: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_iterations: 50,
            timeout: None,
            max_total_tokens: None,
            max_usd: None,
            max_output_tokens: None,
            max_tokens_recoveries: 3,
        }
    }
}
