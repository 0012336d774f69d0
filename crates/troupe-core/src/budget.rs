//! [`Budget`]: which of a run's or a team's budgets ran out.

use serde::{Deserialize, Serialize};

/// A budget that can run out: a run's limits, or a team's.
///
/// On the wire (outcomes, stored states, events) it is its snake_case name.
///
/// ```
/// use troupe_core::Budget;
///
/// assert_eq!(serde_json::to_value(Budget::Usd).unwrap(), serde_json::json!("usd"));
/// assert_eq!(Budget::Time.to_string(), "time");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Budget {
    /// Tokens, input and output together.
    Tokens,
    /// Money spent on model calls, in US dollars.
    Usd,
    /// Wall-clock time.
    Time,
}

impl Budget {
    /// Its name: `tokens`, `usd` or `time`.
    pub fn as_str(self) -> &'static str {
        match self {
            Budget::Tokens => "tokens",
            Budget::Usd => "usd",
            Budget::Time => "time",
        }
    }
}

impl std::fmt::Display for Budget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_is_its_name_on_the_wire_and_an_unknown_name_is_refused() {
        for budget in [Budget::Tokens, Budget::Usd, Budget::Time] {
            let wire = serde_json::to_value(budget).expect("serializes");
            assert_eq!(wire, serde_json::Value::String(budget.as_str().to_owned()));
            assert_eq!(serde_json::from_value::<Budget>(wire).expect("reads back"), budget);
        }
        assert!(serde_json::from_str::<Budget>("\"minutes\"").is_err());
    }
}
