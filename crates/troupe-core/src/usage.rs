//! Token usage of a model call.

use serde::{Deserialize, Serialize};
use std::ops::{Add, AddAssign};

/// Tokens counted by a provider for one model call, or summed over many.
///
/// `input_tokens` counts prompt tokens that were neither read from nor written to a cache;
/// cached tokens are counted apart so that each class can be priced on its own.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Usage {
    /// Prompt tokens billed at the full input price.
    pub input_tokens: u64,
    /// Generated tokens (reasoning included).
    pub output_tokens: u64,
    /// Prompt tokens served from the provider's cache.
    pub cache_read_tokens: u64,
    /// Prompt tokens written to the provider's cache.
    pub cache_write_tokens: u64,
    /// Of `cache_write_tokens`, those written with the long time to live (Anthropic's
    /// 1-hour cache), which cost more to write, where the provider reports it.
    #[serde(skip_serializing_if = "is_zero")]
    pub cache_write_long_tokens: u64,
    /// Of `output_tokens`, those spent on reasoning, where the provider reports it.
    pub reasoning_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Usage {
    /// All prompt tokens, cached or not.
    pub fn total_input(&self) -> u64 {
        self.input_tokens.saturating_add(self.cache_read_tokens).saturating_add(self.cache_write_tokens)
    }

    /// Every token of the call.
    pub fn total(&self) -> u64 {
        self.total_input().saturating_add(self.output_tokens)
    }

    /// Whether nothing was counted.
    pub fn is_empty(&self) -> bool {
        *self == Usage::default()
    }
}

impl Add for Usage {
    type Output = Usage;

    fn add(mut self, rhs: Usage) -> Usage {
        self += rhs;
        self
    }
}

/// Saturating: the counts come from a provider, and a sum that wrapped around would put
/// a run that spent everything back under its token budget.
impl AddAssign for Usage {
    fn add_assign(&mut self, rhs: Usage) {
        self.input_tokens = self.input_tokens.saturating_add(rhs.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(rhs.output_tokens);
        self.cache_read_tokens = self.cache_read_tokens.saturating_add(rhs.cache_read_tokens);
        self.cache_write_tokens = self.cache_write_tokens.saturating_add(rhs.cache_write_tokens);
        self.cache_write_long_tokens = self.cache_write_long_tokens.saturating_add(rhs.cache_write_long_tokens);
        self.reasoning_tokens = self.reasoning_tokens.saturating_add(rhs.reasoning_tokens);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_a_provider_reports_past_u64_stay_at_the_top() {
        let huge = Usage { input_tokens: u64::MAX, output_tokens: u64::MAX - 1, ..Usage::default() };
        let sum = huge + Usage { input_tokens: 5, output_tokens: 5, cache_read_tokens: 1, ..Usage::default() };
        assert_eq!((sum.input_tokens, sum.output_tokens), (u64::MAX, u64::MAX));
        assert_eq!((sum.total_input(), sum.total()), (u64::MAX, u64::MAX));
    }

    #[test]
    fn sums_field_by_field() {
        let a = Usage { input_tokens: 10, output_tokens: 5, cache_read_tokens: 100, ..Default::default() };
        let b = Usage {
            input_tokens: 1,
            output_tokens: 2,
            cache_write_tokens: 7,
            reasoning_tokens: 1,
            ..Default::default()
        };
        let sum = a + b;
        assert_eq!(sum.input_tokens, 11);
        assert_eq!(sum.total_input(), 118);
        assert_eq!(sum.total(), 125);
    }

    #[test]
    fn missing_fields_deserialize_as_zero() {
        let u: Usage = serde_json::from_str(r#"{"input_tokens": 3}"#).expect("parses");
        assert_eq!(u, Usage { input_tokens: 3, ..Default::default() });
    }
}
