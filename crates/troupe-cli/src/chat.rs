//! `troupe chat`: one prompt, the reply streamed as it arrives.

use crate::Failure;
use anyhow::anyhow;
use futures::StreamExt;
use std::io::Write;
use std::time::Instant;
use tokio_util::sync::CancellationToken;
use troupe_core::{Message, StopReason, StreamEvent, Usage};
use troupe_model::{ModelConfig, ModelInfo, Providers};

/// The token limit when neither `--max-tokens` nor the registry says more.
const DEFAULT_MAX_TOKENS: u32 = 4096;

/// Arguments of `troupe chat`.
#[derive(Debug, clap::Args)]
pub(crate) struct ChatArgs {
    /// The model, `provider/model` or `demo` [default: $TROUPE_MODEL, then default_model in
    /// ./troupe.toml, then the first vendor whose key is set, else demo].
    #[arg(long, short)]
    model: Option<String>,
    /// System instructions.
    #[arg(long)]
    system: Option<String>,
    /// The most tokens to generate [default: the model's limit, at most 4096].
    #[arg(long)]
    max_tokens: Option<u32>,
    /// Print the stream's events as JSON lines instead of text.
    #[arg(long)]
    json: bool,
    /// The prompt (several words are joined by spaces).
    #[arg(required = true)]
    prompt: Vec<String>,
}

/// Which model to use, and a notice for stderr when none was asked for.
pub(crate) fn choose_model(
    flag: Option<&str>,
    environment: Option<&str>,
    config: &ModelConfig,
    providers: &Providers,
) -> (String, Option<&'static str>) {
    let given =
        [flag, environment, config.default_model()].into_iter().flatten().map(str::trim).find(|m| !m.is_empty());
    if let Some(model) = given {
        return (model.to_owned(), None);
    }
    match providers.first_available() {
        Some(model) => (model, None),
        None => (
            "demo".to_owned(),
            Some("note: no ANTHROPIC_API_KEY, OPENAI_API_KEY or GEMINI_API_KEY is set; using the offline demo model"),
        ),
    }
}

/// Runs `troupe chat`.
pub(crate) async fn run(args: ChatArgs) -> Result<(), Failure> {
    let config = crate::load_config()?;
    let providers = crate::providers(&config)?;
    let environment = std::env::var("TROUPE_MODEL").ok();
    let (id, notice) = choose_model(args.model.as_deref(), environment.as_deref(), &config, &providers);
    if let Some(notice) = notice {
        eprintln!("{notice}");
    }
    let resolved = providers.resolve(&id).map_err(Failure::from_model)?;
    tracing::debug!(model = %resolved.id, wire = %resolved.model, "resolved");

    let mut request = resolved.request().message(Message::user(args.prompt.join(" ")));
    request.system = args.system;
    let limit = resolved.info.as_ref().map_or(DEFAULT_MAX_TOKENS, |i| i.max_output_tokens.min(DEFAULT_MAX_TOKENS));
    request.max_tokens = Some(args.max_tokens.unwrap_or(limit));

    let cancel = CancellationToken::new();
    cancel_on_interrupt(cancel.clone());

    let started = Instant::now();
    let mut printer = Printer { json: args.json, wrote_text: false, ends_with_newline: true };
    let mut usage = Usage::default();
    let mut info = resolved.info.clone();
    let mut stop = None;
    let outcome = async {
        let mut stream = resolved.provider.stream(&request, cancel.clone()).await?;
        while let Some(event) = stream.next().await {
            let event = event?;
            if !printer.print(&event) {
                // stdout is gone (a closed pipe): nobody reads the rest.
                cancel.cancel();
                return Ok(());
            }
            match event {
                StreamEvent::Usage { usage: totals } => usage = totals,
                StreamEvent::Retrying { attempt, delay_ms, reason } => {
                    eprintln!("note: retry {attempt} in {:.1}s: {reason}", delay_ms as f64 / 1000.0);
                }
                StreamEvent::ModelFallback { from, to, reason } => {
                    eprintln!("note: {from} failed ({reason}); falling back to {to}");
                    info = providers.registry().get(&to).cloned();
                }
                StreamEvent::MessageStop { stop_reason } => stop = Some(stop_reason),
                _ => {}
            }
        }
        Ok::<(), troupe_model::Error>(())
    }
    .await;
    printer.finish();
    outcome.map_err(|e| match e {
        troupe_model::Error::Cancelled => Failure::Run(anyhow!("cancelled")),
        other => Failure::from_model(other),
    })?;
    match stop {
        Some(StopReason::MaxTokens) => eprintln!("note: the reply was cut at the token limit; raise --max-tokens"),
        Some(StopReason::Refusal) => eprintln!("note: the model declined to answer"),
        _ => {}
    }
    eprintln!("{}", usage_line(&usage, info.as_ref(), started.elapsed().as_secs_f64()));
    Ok(())
}

/// Cancels `cancel` on Ctrl-C. The handler is in place when this returns, so an interrupt
/// that comes at once still cancels rather than killing the process mid-write.
fn cancel_on_interrupt(cancel: CancellationToken) {
    #[cfg(unix)]
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()) {
        Ok(mut interrupts) => {
            tokio::spawn(async move {
                if interrupts.recv().await.is_some() {
                    cancel.cancel();
                }
            });
        }
        Err(e) => tracing::warn!("cannot listen for Ctrl-C: {e}"),
    }
    #[cfg(not(unix))]
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            cancel.cancel();
        }
    });
}

/// `tokens: in 12 · out 34 · cost $0.0001 · 0.8s`.
fn usage_line(usage: &Usage, info: Option<&ModelInfo>, seconds: f64) -> String {
    let mut input = usage.total_input().to_string();
    if usage.cache_read_tokens > 0 {
        input.push_str(&format!(" ({} cached)", usage.cache_read_tokens));
    }
    let cost = info.map_or_else(|| "n/a".to_owned(), |info| format!("${:.4}", info.cost(usage)));
    format!("tokens: in {input} · out {} · cost {cost} · {seconds:.1}s", usage.output_tokens)
}

/// Writes the stream to stdout as it arrives.
struct Printer {
    json: bool,
    wrote_text: bool,
    ends_with_newline: bool,
}

impl Printer {
    /// Prints `event`; false once stdout is closed.
    fn print(&mut self, event: &StreamEvent) -> bool {
        let mut out = std::io::stdout().lock();
        let written = if self.json {
            serde_json::to_string(event)
                .map_err(std::io::Error::other)
                .and_then(|line| writeln!(out, "{line}"))
                .and_then(|()| out.flush())
        } else if let StreamEvent::TextDelta { text, .. } = event {
            self.wrote_text = true;
            self.ends_with_newline = text.ends_with('\n');
            out.write_all(text.as_bytes()).and_then(|()| out.flush())
        } else {
            Ok(())
        };
        written.is_ok()
    }

    /// Ends the text on a line of its own.
    fn finish(&self) {
        if !self.json && self.wrote_text && !self.ends_with_newline {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out).and_then(|()| out.flush());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use troupe_model::Pricing;

    fn providers(keys: &[&str]) -> Providers {
        Providers::with_env(keys.iter().map(|k| ((*k).to_owned(), "key".to_owned())).collect::<HashMap<_, _>>())
    }

    #[test]
    fn the_flag_wins_then_the_environment_then_the_file_then_a_key() {
        let config =
            ModelConfig::from_toml_str("[model]\ndefault_model = \"gemini/gemini-2.5-pro\"\n").expect("parses");
        let none = ModelConfig::default();
        let keyed = providers(&["OPENAI_API_KEY"]);
        assert_eq!(choose_model(Some("a/b"), Some("c/d"), &config, &keyed).0, "a/b");
        assert_eq!(choose_model(None, Some("c/d"), &config, &keyed).0, "c/d");
        assert_eq!(choose_model(None, Some(" "), &config, &keyed).0, "gemini/gemini-2.5-pro");
        assert_eq!(choose_model(None, None, &none, &keyed), ("openai/gpt-5.4".to_owned(), None));
        let (model, notice) = choose_model(None, None, &none, &providers(&[]));
        assert_eq!(model, "demo");
        assert!(notice.is_some_and(|n| n.contains("demo")));
    }

    #[test]
    fn the_usage_line_shows_tokens_cost_and_time() {
        let info =
            ModelInfo::new("x/y", 1000, 100, Pricing { input: 3.0, output: 15.0, cache_read: 0.3, cache_write: 3.75 })
                .expect("valid id");
        let usage = Usage { input_tokens: 12, output_tokens: 34, ..Default::default() };
        assert_eq!(usage_line(&usage, Some(&info), 0.84), "tokens: in 12 · out 34 · cost $0.0005 · 0.8s");
        let cached = Usage { cache_read_tokens: 100, ..usage };
        assert_eq!(usage_line(&cached, None, 2.0), "tokens: in 112 (100 cached) · out 34 · cost n/a · 2.0s");
    }
}
