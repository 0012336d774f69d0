//! The facade's integration tests, one binary: what a user writes against `troupe`.

mod layers;
mod run_result;
mod tool_attribute;

use std::collections::HashMap;
use troupe::model::Providers;
use troupe::prelude::*;
use troupe_testkit::MockLlmServer;

/// An engine as a user builds it: the built-in `openai` provider, its base URL at the
/// mock server.
fn engine(server: &MockLlmServer) -> Engine {
    let env = HashMap::from([
        ("OPENAI_API_KEY".to_owned(), "sk-test".to_owned()),
        ("OPENAI_BASE_URL".to_owned(), server.openai_url()),
    ]);
    Engine::builder().providers(Providers::with_env(env)).build()
}
