//! Tests of [`Providers`](super::Providers): id parsing, presets, keys, retries, fallbacks.

use super::*;
use futures::StreamExt;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use troupe_core::{Message, StreamEvent};
use troupe_testkit::{MockLlmServer, MockTurn};

fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

fn providers(pairs: &[(&str, &str)]) -> Providers {
    Providers::with_env(env(pairs))
}

fn fast_retries() -> RetryPolicy {
    RetryPolicy::default().initial_delay(Duration::from_millis(1)).max_delay(Duration::from_millis(2))
}

#[test]
fn kinds_use_kebab_case_names() {
    for (kind, name) in [
        (ProviderKind::Anthropic, "anthropic"),
        (ProviderKind::OpenAiChat, "openai-chat"),
        (ProviderKind::OpenAiResponses, "openai-responses"),
        (ProviderKind::Gemini, "gemini"),
    ] {
        assert_eq!(serde_json::to_value(kind).expect("serializes"), serde_json::json!(name));
        assert_eq!(serde_json::from_value::<ProviderKind>(serde_json::json!(name)).expect("parses"), kind);
        assert_eq!(kind.as_str(), name);
    }
    assert!(serde_json::from_value::<ProviderKind>(serde_json::json!("openai")).is_err());
}

#[test]
fn builtin_presets_are_data_with_real_endpoints() {
    let providers = providers(&[]);
    let expect = [
        ("anthropic", ProviderKind::Anthropic, "https://api.anthropic.com", "ANTHROPIC_API_KEY", true),
        ("openai", ProviderKind::OpenAiChat, "https://api.openai.com/v1", "OPENAI_API_KEY", true),
        ("openai-responses", ProviderKind::OpenAiResponses, "https://api.openai.com/v1", "OPENAI_API_KEY", true),
        ("gemini", ProviderKind::Gemini, "https://generativelanguage.googleapis.com", "GEMINI_API_KEY", true),
        ("deepseek", ProviderKind::OpenAiChat, "https://api.deepseek.com/v1", "DEEPSEEK_API_KEY", true),
        ("groq", ProviderKind::OpenAiChat, "https://api.groq.com/openai/v1", "GROQ_API_KEY", true),
        ("openrouter", ProviderKind::OpenAiChat, "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY", true),
        ("together", ProviderKind::OpenAiChat, "https://api.together.xyz/v1", "TOGETHER_API_KEY", true),
        ("mistral", ProviderKind::OpenAiChat, "https://api.mistral.ai/v1", "MISTRAL_API_KEY", true),
        ("fireworks", ProviderKind::OpenAiChat, "https://api.fireworks.ai/inference/v1", "FIREWORKS_API_KEY", true),
        ("xai", ProviderKind::OpenAiChat, "https://api.x.ai/v1", "XAI_API_KEY", true),
        ("ollama", ProviderKind::OpenAiChat, "http://localhost:11434/v1", "OLLAMA_API_KEY", false),
        ("vllm", ProviderKind::OpenAiChat, "http://localhost:8000/v1", "VLLM_API_KEY", false),
        ("lmstudio", ProviderKind::OpenAiChat, "http://localhost:1234/v1", "LMSTUDIO_API_KEY", false),
        ("llamacpp", ProviderKind::OpenAiChat, "http://localhost:8080/v1", "LLAMACPP_API_KEY", false),
    ];
    for (name, kind, url, key, requires_key) in expect {
        let p = providers.provider(name).unwrap_or_else(|| panic!("{name} missing"));
        assert_eq!((p.kind, p.base_url.as_str(), p.requires_key), (kind, url, requires_key), "{name}");
        assert_eq!(p.api_key_env.first().map(String::as_str), Some(key), "{name}");
    }
    assert_eq!(
        providers.provider("gemini").map(|p| p.api_key_env.clone()),
        Some(vec!["GEMINI_API_KEY".into(), "GOOGLE_API_KEY".into()])
    );
    assert!(!providers.provider("openai").is_some_and(|p| p.legacy_max_tokens));
    assert!(providers.provider("groq").is_some_and(|p| p.legacy_max_tokens));
    // Every vendor default model is a registry model.
    for p in providers.providers().iter().filter(|p| p.default_model.is_some()) {
        let id = format!("{}/{}", p.name, p.default_model.as_deref().unwrap_or_default());
        let registry_id = id.replace("openai-responses/", "openai/");
        assert!(providers.registry().get(&registry_id).is_some(), "{id}");
    }
}

#[test]
fn local_servers_need_no_key() {
    let resolved = providers(&[]).resolve("ollama/llama3.2").expect("no key needed");
    assert_eq!((resolved.id.as_str(), resolved.model.as_str()), ("ollama/llama3.2", "llama3.2"));
    assert_eq!(resolved.provider.name(), "ollama");
    assert!(resolved.info.is_none());
    assert!(resolved.cost(&troupe_core::Usage::default()).is_none());
}

#[test]
fn ids_split_at_the_first_slash() {
    let resolved = providers(&[("OPENROUTER_API_KEY", "sk-or")])
        .resolve("openrouter/anthropic/claude-sonnet-4.5")
        .expect("resolves");
    assert_eq!(resolved.model, "anthropic/claude-sonnet-4.5");
    assert_eq!(resolved.provider.name(), "openrouter");
}

#[test]
fn registry_models_carry_their_info_and_aliases_keep_their_wire_name() {
    let providers = providers(&[("ANTHROPIC_API_KEY", "sk-ant")]);
    let resolved = providers.resolve("anthropic/claude-sonnet-4-5-20250929").expect("resolves");
    assert_eq!(resolved.model, "claude-sonnet-4-5-20250929");
    assert_eq!(resolved.info.as_ref().map(|i| i.id.as_str()), Some("anthropic/claude-sonnet-4-5"));
    let bare = providers.resolve("claude-haiku-4-5").expect("a bare registry name");
    assert_eq!(bare.id, "anthropic/claude-haiku-4-5");
    assert_eq!(resolved.request().model, "claude-sonnet-4-5-20250929");
    // The Responses wire serves OpenAI's models, so it shares their registry entries.
    let responses =
        Providers::with_env(env(&[("OPENAI_API_KEY", "k")])).resolve("openai-responses/gpt-5").expect("resolves");
    assert_eq!(responses.info.map(|i| i.id), Some("openai/gpt-5".to_owned()));
}

#[test]
fn unknown_provider_lists_the_valid_ones() {
    let err = providers(&[]).resolve("acme/rocket-1").expect_err("unknown provider");
    let Error::UnknownModel { id, reason } = &err else { panic!("{err:?}") };
    assert_eq!(id, "acme/rocket-1");
    for name in ["anthropic", "openai", "gemini", "groq", "ollama", "demo"] {
        assert!(reason.contains(name), "{reason}");
    }
    let err = providers(&[]).resolve("no-such-model").expect_err("no provider part");
    assert!(matches!(err, Error::UnknownModel { .. }), "{err:?}");
    assert!(err.to_string().contains("provider/model"), "{err}");
}

#[test]
fn missing_keys_name_the_variable() {
    let err = providers(&[]).resolve("anthropic/claude-sonnet-4-5").expect_err("no key");
    assert!(matches!(&err, Error::MissingApiKey { variable, .. } if variable == "ANTHROPIC_API_KEY"));
    assert_eq!(err.to_string(), "ANTHROPIC_API_KEY is not set; export it or pass --model demo");
    // A blank value is no key.
    let err = providers(&[("OPENAI_API_KEY", "  ")]).resolve("openai/gpt-5").expect_err("blank key");
    assert_eq!(err.to_string(), "OPENAI_API_KEY is not set; export it or pass --model demo");
    // Gemini takes GOOGLE_API_KEY when GEMINI_API_KEY is unset, and names the first when both are.
    assert!(providers(&[("GOOGLE_API_KEY", "g")]).resolve("gemini/gemini-2.5-flash").is_ok());
    let err = providers(&[]).resolve("gemini/gemini-2.5-flash").expect_err("no key");
    assert!(matches!(err, Error::MissingApiKey { variable, .. } if variable == "GEMINI_API_KEY"));
}

#[test]
fn bad_base_urls_are_configuration_errors() {
    let err =
        providers(&[("GROQ_API_KEY", "k"), ("GROQ_BASE_URL", "api.groq.com")]).resolve("groq/x").expect_err("bad URL");
    assert!(matches!(err, Error::Config(_)), "{err:?}");
}

#[test]
fn demo_needs_nothing() {
    let demo = providers(&[]).resolve("demo").expect("demo resolves");
    assert_eq!((demo.id.as_str(), demo.provider.name()), ("demo", "demo"));
    assert_eq!(demo.cost(&troupe_core::Usage { input_tokens: 1000, ..Default::default() }), Some(0.0));
    assert_eq!(providers(&[]).resolve("demo/anything").expect("demo resolves").provider.name(), "demo");
}

#[test]
fn first_available_prefers_anthropic_then_openai_then_gemini() {
    assert_eq!(providers(&[]).first_available(), None);
    assert_eq!(providers(&[("GROQ_API_KEY", "k")]).first_available(), None);
    assert_eq!(providers(&[("GOOGLE_API_KEY", "k")]).first_available().as_deref(), Some("gemini/gemini-3.8-flash"));
    assert_eq!(
        providers(&[("GEMINI_API_KEY", "k"), ("OPENAI_API_KEY", "k")]).first_available().as_deref(),
        Some("openai/gpt-5.4")
    );
    let all = providers(&[("GEMINI_API_KEY", "k"), ("OPENAI_API_KEY", "k"), ("ANTHROPIC_API_KEY", "k")]);
    let first = all.first_available().expect("some vendor");
    assert_eq!(first, "anthropic/claude-sonnet-5-5");
    assert!(all.resolve(&first).is_ok());
}

#[tokio::test]
async fn base_url_variable_points_a_vendor_at_another_server() {
    let server = MockLlmServer::start().await.expect("server starts");
    server.push(MockTurn::text("Hello from the mock"));
    let providers = providers(&[("ANTHROPIC_API_KEY", "sk-ant-test"), ("ANTHROPIC_BASE_URL", &server.url())]);
    let resolved = providers.resolve("anthropic/claude-sonnet-4-5").expect("resolves");
    let request = resolved.request().message(Message::user("hi")).max_tokens(64);
    let response = resolved.provider.complete(&request, CancellationToken::new()).await.expect("completes");
    assert_eq!(response.message.text(), "Hello from the mock");
    let recorded = server.requests();
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0].header("x-api-key"), Some("sk-ant-test"));
    assert_eq!(recorded[0].body["model"], "claude-sonnet-4-5");
}

#[tokio::test]
async fn resolved_providers_retry_transient_failures() {
    let server = MockLlmServer::start().await.expect("server starts");
    server.push_all([MockTurn::status(500, "boom"), MockTurn::text("second time lucky")]);
    let mut providers = providers(&[("OPENAI_BASE_URL", &server.openai_url()), ("OPENAI_API_KEY", "sk-test")]);
    providers.set_retry_policy(fast_retries());
    let resolved = providers.resolve("openai/gpt-4o-mini").expect("resolves");
    let request = resolved.request().message(Message::user("hi"));
    let response =
        resolved.provider.complete(&request, CancellationToken::new()).await.expect("completes after a retry");
    assert_eq!(response.message.text(), "second time lucky");
    assert_eq!(server.requests().len(), 2);
    assert_eq!(server.requests()[0].header("authorization"), Some("Bearer sk-test"));
}

#[tokio::test]
async fn overloaded_models_fall_back_along_their_chain() {
    let server = MockLlmServer::start().await.expect("server starts");
    server.push_all([MockTurn::status(529, "Overloaded"), MockTurn::text("haiku here")]);
    let mut providers = providers(&[("ANTHROPIC_API_KEY", "k"), ("ANTHROPIC_BASE_URL", &server.url())]);
    providers.set_retry_policy(RetryPolicy::none());
    providers.set_fallback("anthropic/claude-sonnet-4-5", vec!["anthropic/claude-haiku-4-5".into()]);
    // The chain of the canonical id also serves its aliases.
    let resolved = providers.resolve("anthropic/claude-sonnet-4-5-20250929").expect("resolves");
    let request = resolved.request().message(Message::user("hi")).max_tokens(32);
    let mut stream = resolved.provider.stream(&request, CancellationToken::new()).await.expect("a route answers");
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        events.push(event.expect("no error"));
    }
    assert!(
        matches!(events.first(), Some(StreamEvent::ModelFallback { from, to, .. })
            if from == "anthropic/claude-sonnet-4-5-20250929" && to == "anthropic/claude-haiku-4-5"),
        "{events:?}"
    );
    let bodies: Vec<_> = server.requests().into_iter().map(|r| r.body["model"].clone()).collect();
    assert_eq!(bodies, [serde_json::json!("claude-sonnet-4-5-20250929"), serde_json::json!("claude-haiku-4-5")]);
}

#[test]
fn fallbacks_without_a_key_are_skipped_but_unknown_ones_fail() {
    let mut providers = providers(&[("ANTHROPIC_API_KEY", "k")]);
    providers.set_fallback("anthropic/claude-sonnet-4-5", vec!["openai/gpt-5".into()]);
    assert!(providers.resolve("anthropic/claude-sonnet-4-5").is_ok());
    providers.set_fallback("anthropic/claude-sonnet-4-5", vec!["acme/x".into()]);
    assert!(matches!(providers.resolve("anthropic/claude-sonnet-4-5"), Err(Error::UnknownModel { .. })));
    providers.set_fallback("anthropic/claude-sonnet-4-5", Vec::new());
    assert!(providers.fallback("anthropic/claude-sonnet-4-5").is_none());
}

#[test]
fn providers_can_be_added_and_replaced() {
    let mut providers = providers(&[]);
    let count = providers.providers().len();
    providers.insert_provider(ProviderConfig::new("acme", ProviderKind::OpenAiChat, "http://127.0.0.1:9/v1"));
    providers.insert_provider(ProviderConfig::new("ollama", ProviderKind::OpenAiChat, "http://gpu-box:11434/v1"));
    assert_eq!(providers.providers().len(), count + 1);
    assert_eq!(providers.provider("ollama").map(|p| p.base_url.as_str()), Some("http://gpu-box:11434/v1"));
    assert_eq!(providers.resolve("acme/m").expect("resolves").provider.name(), "acme");
    let keyed = ProviderConfig::new("vault", ProviderKind::Anthropic, "https://vault.example").api_key_env("VAULT_KEY");
    providers.insert_provider(keyed);
    assert!(
        matches!(providers.resolve("vault/m"), Err(Error::MissingApiKey { variable, .. }) if variable == "VAULT_KEY")
    );
}

#[tokio::test]
async fn every_resolution_of_a_provider_shares_one_client_and_its_connections() {
    let server = MockLlmServer::start().await.expect("server starts");
    server.respond_with(|_| MockTurn::text("pooled"));
    let providers = providers(&[("OPENAI_BASE_URL", &server.openai_url()), ("OPENAI_API_KEY", "sk-test")]);
    for _ in 0..50 {
        // Clones share what was built, as the engine's and a team's copies do.
        let resolved = providers.clone().resolve("openai/gpt-4o-mini").expect("resolves");
        let request = resolved.request().message(Message::user("hi"));
        let response = resolved.provider.complete(&request, CancellationToken::new()).await.expect("answers");
        assert_eq!(response.message.text(), "pooled");
    }
    assert_eq!(server.requests().len(), 50);
    assert_eq!(server.connections(), 1, "50 calls one after another need one pooled connection");
    assert_eq!(providers.built.len(), 1);
}

#[tokio::test]
async fn a_provider_whose_settings_change_gets_a_new_client_while_earlier_holders_keep_theirs() {
    let (first, second) =
        (MockLlmServer::start().await.expect("starts"), MockLlmServer::start().await.expect("starts"));
    first.respond_with(|_| MockTurn::text("first"));
    second.respond_with(|_| MockTurn::text("second"));
    let mut providers = providers(&[]);
    providers.insert_provider(ProviderConfig::new("local", ProviderKind::OpenAiChat, first.openai_url()));
    let before = providers.resolve("local/m").expect("resolves");
    providers.insert_provider(ProviderConfig::new("local", ProviderKind::OpenAiChat, second.openai_url()));
    let after = providers.resolve("local/m").expect("resolves");
    for (resolved, expected) in [(&before, "first"), (&after, "second"), (&before, "first")] {
        let request = resolved.request().message(Message::user("hi"));
        let response = resolved.provider.complete(&request, CancellationToken::new()).await.expect("answers");
        assert_eq!(response.message.text(), expected);
    }
    assert_eq!((first.connections(), second.connections()), (1, 1));
    assert_eq!(providers.built.len(), 1, "the replaced client is no longer held by the providers");
}

#[test]
fn a_check_knows_providers_without_keys_or_clients() {
    let providers = Providers::with_env(HashMap::new());
    // No key is set: resolving fails, checking does not.
    assert!(matches!(providers.resolve("anthropic/claude-sonnet-4-5"), Err(Error::MissingApiKey { .. })));
    providers.check("anthropic/claude-sonnet-4-5").expect("a known provider");
    providers.check("demo").expect("the demo model");
    providers.check("openai/any-model-name").expect("a known provider, any model");
    let err = providers.check("nosuch/model").expect_err("an unknown provider");
    let Error::UnknownModel { reason, .. } = &err else { panic!("{err:?}") };
    assert!(reason.contains("no provider `nosuch`"), "{reason}");
    assert!(providers.check("gpt").is_err(), "neither provider/model nor a known bare name");
}
