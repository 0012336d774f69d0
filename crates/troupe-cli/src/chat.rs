//! `troupe chat`: one prompt, the reply streamed as it arrives: one turn of an agent
//! without tools, whose events `--json` prints as `troupe run --json` does.

use crate::Failure;
use anyhow::anyhow;
use std::io::Write;
use std::sync::Arc;
use std::time::Instant;
use troupe::runtime::{AgentSpec, Limits, RunHandle, RunInput, RunOutcome, Runner, Signal};
use troupe::tools::{ToolCatalog, Workspace};
use troupe_core::{AgentEvent, AgentEventKind, Usage};
use troupe_model::{ModelConfig, Providers};

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
    /// Print the run's events as JSON lines instead of text (as `troupe run --json`).
    #[arg(long)]
    json: bool,
    /// Where a session's agent works and its turns are recorded (without a prompt).
    #[command(flatten)]
    place: crate::store::StoreArgs,
    /// The prompt (several words are joined by spaces); without one, at a terminal, a
    /// session: the coding agent on the workspace, turn after turn.
    prompt: Vec<String>,
}

impl ChatArgs {
    /// A session on the current directory with the default model: `troupe` alone.
    pub(crate) fn session() -> Self {
        ChatArgs {
            model: None,
            system: None,
            max_tokens: None,
            json: false,
            place: crate::store::StoreArgs::default(),
            prompt: Vec::new(),
        }
    }
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

/// Runs `troupe chat`: one turn of an agent without tools, so that `--json` prints the
/// same events as `troupe run --json`.
pub(crate) async fn run(args: ChatArgs) -> Result<(), Failure> {
    let config = crate::load_config()?;
    let providers = crate::providers(&config)?;
    let environment = std::env::var("TROUPE_MODEL").ok();
    let (id, notice) = choose_model(args.model.as_deref(), environment.as_deref(), &config, &providers);
    if let Some(notice) = notice {
        diagln!("{notice}");
    }
    if args.prompt.is_empty() {
        crate::session::at_a_terminal()?;
        providers.resolve(&id).map_err(Failure::from_model)?;
        return crate::session::run(&args.place, id, args.system).await;
    }
    let resolved = providers.resolve(&id).map_err(Failure::from_model)?;
    tracing::debug!(model = %resolved.id, wire = %resolved.model, "resolved");
    let limit = resolved.info.as_ref().map_or(DEFAULT_MAX_TOKENS, |i| i.max_output_tokens.min(DEFAULT_MAX_TOKENS));
    let limits = Limits {
        max_iterations: 1,
        max_output_tokens: Some(args.max_tokens.unwrap_or(limit)),
        // A reply cut at the limit is reported as such, not continued.
        max_tokens_recoveries: 0,
        ..Limits::default()
    };
    let spec = AgentSpec {
        name: "chat".to_owned(),
        instructions: args.system.unwrap_or_default(),
        model: id,
        tools: Some(Vec::new()),
        limits,
        ..AgentSpec::default()
    };
    // No tools: the workspace is never touched.
    let workspace = Workspace::new(std::env::temp_dir()).map_err(|e| Failure::Run(e.into()))?;
    let runner = Runner::new(Arc::new(providers), Arc::new(ToolCatalog::new()), Arc::new(workspace));
    let handle = runner.start(Arc::new(spec), RunInput::new(args.prompt.join(" ")));
    crate::run::cancel_on_interrupt(handle.signals.clone());

    let started = Instant::now();
    let mut printer = Printer { json: args.json, wrote_text: false, ends_with_newline: true };
    let RunHandle { mut events, signals, result, .. } = handle;
    while let Some(event) = events.next_event().await {
        if !printer.print(&event) {
            // stdout is gone (a closed pipe): nobody reads the rest.
            let _ = signals.try_send(Signal::Cancel { reason: Some("stdout was closed".into()) });
        }
        match &event.kind {
            AgentEventKind::Retrying { attempt, delay_ms, reason } => {
                diagln!("note: retry {attempt} in {:.1}s: {reason}", *delay_ms as f64 / 1000.0);
            }
            AgentEventKind::ModelFallback { from, to, reason } => {
                diagln!("note: {from} failed ({reason}); falling back to {to}");
            }
            _ => {}
        }
    }
    drop(signals);
    let output = result.await.map_err(|e| Failure::Run(e.into()))?;
    printer.finish();
    match &output.outcome {
        RunOutcome::Completed { .. } => {}
        RunOutcome::Incomplete { .. } => diagln!("note: the reply was cut at the token limit; raise --max-tokens"),
        RunOutcome::Cancelled { .. } => return Err(Failure::Run(anyhow!("cancelled"))),
        other => return Err(Failure::Run(anyhow!(crate::render::outcome_message(other)))),
    }
    let priced = output.cost_by_model.values().all(|c| c.priced) && !output.cost_by_model.is_empty();
    diagln!("{}", usage_line(&output.usage, priced.then_some(output.cost_usd), started.elapsed().as_secs_f64()));
    Ok(())
}

/// `tokens: in 12 · out 34 · cost $0.0001 · 0.8s`.
fn usage_line(usage: &Usage, cost_usd: Option<f64>, seconds: f64) -> String {
    let mut input = usage.total_input().to_string();
    if usage.cache_read_tokens > 0 {
        input.push_str(&format!(" ({} cached)", usage.cache_read_tokens));
    }
    let cost = cost_usd.map_or_else(|| "n/a".to_owned(), |usd| format!("${usd:.4}"));
    format!("tokens: in {input} · out {} · cost {cost} · {seconds:.1}s", usage.output_tokens)
}

/// Writes the stream to stdout as it arrives.
struct Printer {
    json: bool,
    wrote_text: bool,
    ends_with_newline: bool,
}

impl Printer {
    /// Prints `event` (its text, or with `--json` the event as one JSON line, as `troupe
    /// run --json` prints it); false once stdout is closed.
    fn print(&mut self, event: &AgentEvent) -> bool {
        let mut out = std::io::stdout().lock();
        let written = if self.json {
            serde_json::to_string(event)
                .map_err(std::io::Error::other)
                .and_then(|line| writeln!(out, "{line}"))
                .and_then(|()| out.flush())
        } else if let AgentEventKind::MessageDelta { delta, .. } = &event.kind {
            self.wrote_text = true;
            self.ends_with_newline = delta.ends_with('\n');
            out.write_all(delta.as_bytes()).and_then(|()| out.flush())
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
        let usage = Usage { input_tokens: 12, output_tokens: 34, ..Default::default() };
        assert_eq!(usage_line(&usage, Some(0.000_546), 0.84), "tokens: in 12 · out 34 · cost $0.0005 · 0.8s");
        let cached = Usage { cache_read_tokens: 100, ..usage };
        assert_eq!(usage_line(&cached, None, 2.0), "tokens: in 112 (100 cached) · out 34 · cost n/a · 2.0s");
    }
}
