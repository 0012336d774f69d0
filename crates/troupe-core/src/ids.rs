//! Identifiers of runs, agents, conversations and tool calls.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;

macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        ///
        /// Cheap to clone: every event of a run carries its ids, so they share one
        /// allocation.
        #[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(Arc<str>);

        impl $name {
            /// Wraps an existing identifier.
            pub fn new(id: impl Into<String>) -> Self {
                Self(Arc::from(id.into()))
            }

            /// A fresh, time-ordered identifier (UUID v7 with a readable prefix).
            pub fn generate() -> Self {
                Self(Arc::from(format!(concat!($prefix, "_{}"), uuid::Uuid::now_v7().simple())))
            }

            /// The identifier as a string slice.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<&str> for $name {
            fn from(value: &str) -> Self {
                Self(Arc::from(value))
            }
        }

        impl From<String> for $name {
            fn from(value: String) -> Self {
                Self(Arc::from(value))
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }
    };
}

string_id!(
    /// Identifies one run of an agent or team.
    RunId,
    "run"
);
string_id!(
    /// Identifies an agent (its declared name or a generated id).
    AgentId,
    "agent"
);
string_id!(
    /// Identifies a conversation: the turns that several runs share.
    ConversationId,
    "conv"
);
string_id!(
    /// Identifies one tool call requested by a model, as the model named it.
    ToolCallId,
    "call"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_ids_are_unique_prefixed_and_time_ordered() {
        let a = RunId::generate();
        let b = RunId::generate();
        assert_ne!(a, b);
        assert!(a.as_str().starts_with("run_"));
        assert!(a < b, "v7 ids sort by creation time: {a} < {b}");
    }

    #[test]
    fn ids_serialize_as_plain_strings() {
        let id = ToolCallId::new("toolu_01");
        assert_eq!(serde_json::to_string(&id).expect("serializes"), "\"toolu_01\"");
    }
}
