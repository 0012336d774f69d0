//! `troupe models list`: the registry and the providers' keys.

use crate::Failure;
use comfy_table::{CellAlignment, ContentArrangement, Table, presets};
use std::io::Write;
use troupe_model::{ModelInfo, ProviderConfig, Providers};

/// Runs `troupe models list`.
pub(crate) fn list(json: bool) -> Result<(), Failure> {
    let config = crate::load_config()?;
    let providers = crate::providers(&config)?;
    let text = if json { json_lines(&providers) } else { table(&providers) };
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        // A reader that stopped early (`| head`) is not a failure.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Failure::Run(anyhow::Error::new(e).context("cannot write to stdout"))),
    }
}

/// Models a provider lists in `troupe.toml` that the registry knows nothing about.
fn unregistered(providers: &Providers) -> Vec<(String, &ProviderConfig)> {
    providers
        .providers()
        .iter()
        .flat_map(|p| p.models.iter().map(move |m| (format!("{}/{m}", p.name), p)))
        .filter(|(id, _)| providers.registry().get(id).is_none())
        .collect()
}

fn key_status(providers: &Providers, provider: &ProviderConfig) -> String {
    match (providers.key_variable(provider), provider.requires_key && !provider.api_key_env.is_empty()) {
        (Some(variable), _) => format!("{variable} (set)"),
        (None, true) => format!("{} (not set)", provider.api_key_env.join(" or ")),
        (None, false) => "no key needed".to_owned(),
    }
}

fn table(providers: &Providers) -> String {
    let mut table = Table::new();
    table.load_preset(presets::UTF8_FULL_CONDENSED).set_content_arrangement(ContentArrangement::Dynamic);
    table.set_header(["model", "context", "max output", "input", "output", "cache read", "cache write"]);
    for info in providers.registry() {
        table.add_row(model_row(info));
    }
    for (id, _) in unregistered(providers) {
        table.add_row([id, "?".into(), "?".into(), "?".into(), "?".into(), "?".into(), "?".into()]);
    }
    for column in 1..7 {
        if let Some(column) = table.column_mut(column) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    let mut text = format!("{table}\nPrices in USD per million tokens.\n\nProviders:\n");
    let width = providers.providers().iter().map(|p| p.name.len()).max().unwrap_or(0).max(4);
    for provider in providers.providers() {
        text.push_str(&format!(
            "  {:width$}  {:16}  {:36}  {}\n",
            provider.name,
            provider.kind.as_str(),
            key_status(providers, provider),
            providers.base_url(provider)
        ));
    }
    text.push_str(&format!(
        "  {:width$}  {:16}  {:36}  offline; try `troupe chat --model demo hello`\n",
        "demo", "demo", "no key needed"
    ));
    text
}

fn model_row(info: &ModelInfo) -> [String; 7] {
    let p = info.pricing;
    [
        info.id.clone(),
        grouped(info.context_window),
        grouped(info.max_output_tokens),
        price(p.input),
        price(p.output),
        price(p.cache_read),
        price(p.cache_write),
    ]
}

fn json_lines(providers: &Providers) -> String {
    let mut lines = Vec::new();
    for info in providers.registry() {
        let mut value = serde_json::to_value(info).unwrap_or_default();
        if let Some(object) = value.as_object_mut() {
            object.insert("type".into(), "model".into());
        }
        lines.push(value.to_string());
    }
    for (id, provider) in unregistered(providers) {
        lines.push(serde_json::json!({"type": "model", "id": id, "provider": provider.name}).to_string());
    }
    for provider in providers.providers() {
        let key_variable = providers.key_variable(provider);
        lines.push(
            serde_json::json!({
                "type": "provider",
                "name": provider.name,
                "kind": provider.kind,
                "base_url": providers.base_url(provider),
                "api_key_env": provider.api_key_env,
                "requires_key": provider.requires_key,
                "key_set": key_variable.is_some(),
            })
            .to_string(),
        );
    }
    lines.iter().map(|l| format!("{l}\n")).collect()
}

/// `1048576` as `1,048,576`.
fn grouped(n: u32) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A price with at least two decimals and as many as it needs, up to four.
fn price(usd: f64) -> String {
    let mut text = format!("{usd:.4}");
    while text.ends_with('0') && text.len() - text.find('.').unwrap_or(text.len()) > 3 {
        text.pop();
    }
    format!("${text}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_well() {
        assert_eq!(grouped(1_048_576), "1,048,576");
        assert_eq!(grouped(200_000), "200,000");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(0), "0");
        assert_eq!(price(3.0), "$3.00");
        assert_eq!(price(0.075), "$0.075");
        assert_eq!(price(0.125), "$0.125");
        assert_eq!(price(0.005), "$0.005");
        assert_eq!(price(0.1), "$0.10");
    }

    #[test]
    fn the_base_url_shown_is_the_one_calls_go_to() {
        let env = std::collections::HashMap::from([("OPENAI_BASE_URL".to_owned(), "http://127.0.0.1:9/v1".to_owned())]);
        let providers = Providers::with_env(env);
        let openai = table(&providers).lines().find(|l| l.trim_start().starts_with("openai ")).map(str::to_owned);
        assert!(openai.as_deref().is_some_and(|l| l.ends_with("http://127.0.0.1:9/v1")), "{openai:?}");
        let json = json_lines(&providers);
        assert!(json.contains(r#""base_url":"http://127.0.0.1:9/v1""#), "{json}");
        let default = table(&Providers::with_env(std::collections::HashMap::new()));
        assert!(!default.contains("127.0.0.1:9"), "without the variable, the configured URL: {default}");
    }

    #[test]
    fn the_table_lists_models_and_keys() {
        let env = std::collections::HashMap::from([("GROQ_API_KEY".to_owned(), "k".to_owned())]);
        let text = table(&Providers::with_env(env));
        assert!(text.contains("anthropic/claude-sonnet-4-5"), "{text}");
        assert!(text.contains("$15.00"), "{text}");
        assert!(text.contains("GROQ_API_KEY (set)"), "{text}");
        assert!(text.contains("ANTHROPIC_API_KEY (not set)"), "{text}");
        assert!(text.lines().any(|l| l.contains("ollama") && l.contains("no key needed")), "{text}");
    }
}
