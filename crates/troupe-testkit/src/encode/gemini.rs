//! (being written)

use super::WireEncoder;
use crate::script::MockTurn;

/// Writes turns in this vendor's wire format.
pub struct GeminiEncoder;

impl WireEncoder for GeminiEncoder {
    fn encode(&self, _turn: &MockTurn) -> Vec<String> {
        Vec::new()
    }

    fn error_body(&self, _status: u16, message: &str) -> String {
        serde_json::json!({"error": {"message": message}}).to_string()
    }

    fn overloaded_event(&self, message: &str) -> String {
        super::data_event(&serde_json::json!({"error": {"message": message}}))
    }
}
