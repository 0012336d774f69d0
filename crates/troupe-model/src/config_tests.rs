//! Tests of [`ModelConfig`](super::ModelConfig): parsing, errors with positions, applying.

use super::*;
use crate::error::Error;
use std::collections::HashMap;
use tokio_util::sync::CancellationToken;
use troupe_core::Message;
use troupe_testkit::{MockLlmServer, MockTurn};

fn no_env() -> HashMap<String, String> {
    HashMap::new()
}

fn config_error(text: &str) -> String {
    match ModelConfig::from_toml_str(text) {
        Err(Error::Config(message)) => message,
        other => panic!("expected a configuration error, got {other:?}"),
    }
}

#[test]
fn an_empty_file_is_the_default() {
    let config = ModelConfig::from_toml_str("").expect("parses");
    assert_eq!(config, ModelConfig::default());
    assert_eq!(config.default_model(), None);
}

#[test]
fn parses_every_section() {
    let config = ModelConfig::from_toml_str(
        r#"
        [model]
        default_model = "acme/large"

        [providers.acme]
        kind = "openai-chat"
        base_url = "https://api.acme.example/v1"
        api_key_env = "ACME_API_KEY"
        models = ["large"]

        [models."acme/large"]
        context_window = 128000
        max_output_tokens = 8192
        input_price = 0.5
        output_price = 1.5
        fallback = ["openai/gpt-4o-mini"]

        [retry]
        max_retries = 2
        initial_delay_ms = 250
        max_delay_ms = 1000

        [agents.reviewer]
        instructions = "belongs to another component"
        "#,
    )
    .expect("parses");
    assert_eq!(config.default_model(), Some("acme/large"));
    let acme = &config.providers["acme"];
    assert_eq!(acme.kind, Some(ProviderKind::OpenAiChat));
    assert_eq!(acme.api_key_env.as_deref(), Some(&["ACME_API_KEY".to_owned()][..]));
    assert_eq!(config.models["acme/large"].fallback, ["openai/gpt-4o-mini"]);
    let policy = config.retry.as_ref().expect("retry section").policy();
    assert_eq!(
        (policy.max_retries, policy.initial_delay, policy.max_delay),
        (2, Duration::from_millis(250), Duration::from_secs(1))
    );
}

#[test]
fn default_model_may_sit_at_the_top_level_but_not_twice() {
    let config = ModelConfig::from_toml_str("default_model = \"openai/gpt-4o\"\n").expect("parses");
    assert_eq!(config.default_model(), Some("openai/gpt-4o"));
    let message = config_error("default_model = \"a/b\"\n[model]\ndefault_model = \"c/d\"\n");
    assert!(message.contains("both"), "{message}");
}

#[test]
fn unknown_keys_are_rejected_with_their_position() {
    let message = config_error("[models.\"openai/gpt-4o\"]\ncontext_window = 1000\ncontxt_window = 5\n");
    assert!(message.starts_with("troupe.toml:3:1: unknown field `contxt_window`"), "{message}");
    assert!(message.contains("context_window"), "the valid fields are listed: {message}");

    let message = config_error("[providers.acme]\nkind = \"openai-chat\"\n  base_uri = \"x\"\n");
    assert!(message.starts_with("troupe.toml:3:3: unknown field `base_uri`"), "{message}");

    let message = config_error("[model]\ndefault = \"x\"\n");
    assert!(message.starts_with("troupe.toml:2:1:"), "{message}");

    let message = config_error("[retry]\nmax_retries = -1\n");
    assert!(message.starts_with("troupe.toml:2:"), "{message}");

    let message = config_error("# comment\ndefualt_model = \"openai/gpt-4o\"\n");
    assert_eq!(message, "troupe.toml:2:1: unknown key `defualt_model`, expected `default_model` or a table");

    let message = config_error("[providers.acme]\nkind = \"openai\"\n");
    assert!(message.starts_with("troupe.toml:2:8:"), "{message}");
    assert!(message.contains("openai-chat"), "the valid kinds are listed: {message}");
}

#[test]
fn syntax_errors_carry_a_position_too() {
    let message = config_error("[retry]\nmax_retries = \n");
    assert!(message.starts_with("troupe.toml:2:"), "{message}");
}

#[test]
fn load_names_the_file() {
    let dir = std::env::temp_dir().join(format!("troupe-config-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("troupe.toml");
    std::fs::write(&path, "[model]\ndefault_model = \"demo\"\nextra = 1\n").expect("writes");
    let Err(Error::Config(message)) = ModelConfig::load(&path) else { panic!("expected an error") };
    assert!(message.starts_with(&format!("{}:3:1:", path.display())), "{message}");
    std::fs::write(&path, "[model]\ndefault_model = \"demo\"\n").expect("writes");
    assert_eq!(ModelConfig::load(&path).expect("loads").default_model(), Some("demo"));
    let missing = ModelConfig::load(dir.join("absent.toml")).expect_err("no file");
    assert!(missing.to_string().contains("absent.toml"), "{missing}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn models_extend_and_override_the_registry() {
    let config = ModelConfig::from_toml_str(
        r#"
        [models."anthropic/claude-haiku-4-5"]
        input_price = 0.8

        [models."ollama/llama3.2"]
        context_window = 128000
        max_output_tokens = 4096

        [models."anthropic/claude-sonnet-4-5-20250929"]
        fallback = ["anthropic/claude-haiku-4-5"]
        "#,
    )
    .expect("parses");
    let providers = config.providers(no_env()).expect("applies");
    let haiku = providers.registry().get("anthropic/claude-haiku-4-5").expect("still there");
    assert_eq!((haiku.pricing.input, haiku.pricing.output, haiku.context_window), (0.8, 5.0, 200_000));
    let llama = providers.registry().get("ollama/llama3.2").expect("added");
    assert_eq!((llama.context_window, llama.max_output_tokens, llama.pricing), (128_000, 4_096, Pricing::default()));
    // A chain set on an alias belongs to the canonical id.
    assert_eq!(providers.fallback("anthropic/claude-sonnet-4-5"), Some(&["anthropic/claude-haiku-4-5".to_owned()][..]));
}

#[test]
fn bad_models_and_providers_are_explained() {
    let cases = [
        ("[models.\"gpt-4o\"]\ninput_price = 1.0\n", "provider/model"),
        ("[models.\"acme/x\"]\ninput_price = 1.0\n", "no provider `acme`"),
        ("[models.\"ollama/new\"]\ninput_price = 1.0\n", "`context_window` and `max_output_tokens` are required"),
        ("[models.\"openai/gpt-4o\"]\ninput_price = -1.0\n", "finite and not negative"),
        ("[models.\"openai/gpt-4o\"]\nmax_output_tokens = 999999999\n", "max_output_tokens"),
        ("[models.\"openai/gpt-4o\"]\nfallback = [\"nowhere/x\"]\n", "fallback `nowhere/x`"),
        ("[providers.acme]\nbase_url = \"https://acme.example\"\n", "`kind` is required"),
        ("[providers.acme]\nkind = \"gemini\"\n", "`base_url` is required"),
        ("[providers.acme]\nkind = \"gemini\"\nbase_url = \"acme.example\"\n", "not an http(s) URL"),
        ("[providers.demo]\nkind = \"gemini\"\nbase_url = \"http://x\"\n", "cannot name a provider"),
        ("[providers.acme]\nkind = \"gemini\"\nbase_url = \"http://x\"\nrequires_key = true\n", "api_key_env"),
    ];
    for (text, expected) in cases {
        let config = ModelConfig::from_toml_str(text).expect("parses");
        let err = config.providers(no_env()).expect_err(text);
        assert!(matches!(err, Error::Config(_)), "{text}: {err:?}");
        assert!(err.to_string().contains(expected), "{text}: {err}");
    }
}

#[test]
fn built_in_providers_can_be_changed() {
    let config = ModelConfig::from_toml_str(
        "[providers.ollama]\nbase_url = \"http://gpu-box:11434/v1\"\n[providers.anthropic]\napi_key_env = [\"CLAUDE_KEY\", \"ANTHROPIC_API_KEY\"]\n",
    )
    .expect("parses");
    let providers = config.providers(no_env()).expect("applies");
    let ollama = providers.provider("ollama").expect("present");
    assert_eq!((ollama.base_url.as_str(), ollama.requires_key), ("http://gpu-box:11434/v1", false));
    let err = providers.resolve("anthropic/claude-haiku-4-5").expect_err("no key");
    assert_eq!(err.to_string(), "CLAUDE_KEY is not set; export it or pass --model demo");
}

#[tokio::test]
async fn a_provider_added_by_configuration_works_end_to_end() {
    let server = MockLlmServer::start().await.expect("server starts");
    server.push(MockTurn::text("Hello from acme"));
    let text = format!(
        "[providers.acme]\nkind = \"openai-chat\"\nbase_url = \"{}\"\napi_key_env = [\"ACME_API_KEY\"]\nmodels = [\"acme-large\"]\n\n\
         [models.\"acme/acme-large\"]\ncontext_window = 32000\nmax_output_tokens = 4000\ninput_price = 1.0\noutput_price = 2.0\n",
        server.openai_url()
    );
    let config = ModelConfig::from_toml_str(&text).expect("parses");
    let env = HashMap::from([("ACME_API_KEY".to_owned(), "acme-secret".to_owned())]);
    let providers = config.providers(env).expect("applies");
    let resolved = providers.resolve("acme/acme-large").expect("resolves");
    assert_eq!(resolved.info.as_ref().map(|i| i.context_window), Some(32_000));
    let request = resolved.request().message(Message::user("hi")).max_tokens(100);
    let response = resolved.provider.complete(&request, CancellationToken::new()).await.expect("completes");
    assert_eq!(response.message.text(), "Hello from acme");
    let cost = resolved.cost(&response.usage).expect("priced");
    assert!(cost > 0.0, "{cost}");
    let recorded = server.requests();
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0].header("authorization"), Some("Bearer acme-secret"));
    assert_eq!(recorded[0].body["model"], "acme-large");
    // A new provider gets the current OpenAI name for the token limit unless told otherwise.
    assert_eq!(recorded[0].body["max_completion_tokens"], 100);

    // Without the key the new provider names its own variable.
    let err = config.providers(no_env()).expect("applies").resolve("acme/acme-large").expect_err("no key");
    assert_eq!(err.to_string(), "ACME_API_KEY is not set; export it or pass --model demo");
}

#[tokio::test]
async fn a_provider_without_response_formats_gets_typed_answers_through_the_answer_tool() {
    let server = MockLlmServer::start().await.expect("server starts");
    server.push(MockTurn::tool_call("c1", crate::answer_tool::ANSWER_TOOL, serde_json::json!({"ok": true})));
    server.push(MockTurn::text("{\"ok\": true}"));
    let text = format!(
        "[providers.plain]\nkind = \"openai-chat\"\nbase_url = \"{url}\"\nmodels = [\"m\"]\nanswer_tool = true\n\
         [providers.modern]\nkind = \"openai-chat\"\nbase_url = \"{url}\"\nmodels = [\"m\"]\n",
        url = server.openai_url()
    );
    let providers = ModelConfig::from_toml_str(&text).expect("parses").providers(no_env()).expect("applies");
    let schema = serde_json::json!({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]});
    for id in ["plain/m", "modern/m"] {
        let resolved = providers.resolve(id).expect("resolves");
        let request = resolved
            .request()
            .message(Message::user("ok?"))
            .output(troupe_core::OutputSchema::new("Ok", schema.clone()));
        let response = resolved.provider.complete(&request, CancellationToken::new()).await.expect("completes");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&response.message.text()).ok(),
            Some(serde_json::json!({"ok": true}))
        );
    }
    let recorded = server.requests();
    assert_eq!(recorded[0].body["tools"][0]["function"]["name"], crate::answer_tool::ANSWER_TOOL);
    assert!(recorded[0].body.get("response_format").is_none());
    assert_eq!(recorded[1].body["response_format"]["type"], "json_schema");
    assert!(recorded[1].body.get("tools").is_none());
}
