//! `troupe run`: an agent with the built-in coding tools works on one task in a workspace.

use crate::Failure;
use crate::render::{Renderer, Style, outcome_message, shorten, summary_table};
use anyhow::anyhow;
use std::io::IsTerminal;
use std::path::PathBuf;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use troupe::runtime::{
    ApprovalDecision, ApprovalPolicy, Engine, RunHandle, RunInput, RuntimeError, Signal, SignalSender,
};
use troupe_core::{AgentEventKind, PauseReason};

/// What a careful coding agent is told, whatever its model.
const INSTRUCTIONS: &str = "You are a careful coding agent working in a workspace directory; every path you give a \
tool is relative to it. Look before you act: list and read the relevant files first, and take every fact about \
them from the tools, never from guesses. Make the smallest change that does the task, preferring fs.edit for \
existing files. Where the project has checks (tests, linters, a build), run them with the shell and report what \
they say, failures included. Some calls need the user's approval; if one is rejected, do not repeat it \
unchanged: adjust your approach or explain what you need. End with a short summary of what you did and what is \
left to do.";

/// Why a call is rejected when no person can be asked.
const NO_TERMINAL: &str = "no terminal to ask; rerun with --approve auto";
/// Why a call is rejected under `--approve never`.
const APPROVALS_OFF: &str = "approvals are off (--approve never)";

/// How tool calls that need approval are decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Approve {
    /// Ask on the terminal before each call with a side effect; without a terminal, reject them as `never` does.
    Ask,
    /// Run every call without asking.
    Auto,
    /// Reject every call that needs approval; the model is told why.
    Never,
}

/// Arguments of `troupe run`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Approvals: with --approve ask (the default), each call with a side effect (writing a \
file, running a command) is put to you on the terminal: [y]es, [n]o, [a]lways (this tool, for the rest of the \
run) or [e]dit (type replacement JSON arguments). With no terminal (a pipe, CI), ask behaves like never: such \
calls are rejected with \"no terminal to ask; rerun with --approve auto\".\n\n\
Output: the agent's text on stdout (with --json, every event as one JSON line instead), tool calls and a summary \
table (outcome, steps, tokens, cost, duration) on stderr. Ctrl-C cancels the run.\n\n\
Exit codes: 0 the run completed; 1 it did not (failed, cancelled, over budget, out of iterations, incomplete, \
paused); 2 a usage or configuration error.")]
pub struct RunArgs {
    /// The model, `provider/model` or `demo` [default: $TROUPE_MODEL, then default_model in
    /// ./troupe.toml, then the first vendor whose key is set, else demo].
    #[arg(long, short)]
    model: Option<String>,
    /// The directory the agent works in; its tools cannot reach outside it [default: the
    /// current directory].
    #[arg(long, short, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// How tool calls that need approval are decided (without a terminal, `ask` rejects them
    /// like `never`).
    #[arg(long, value_enum, default_value_t = Approve::Ask, value_name = "MODE")]
    approve: Approve,
    /// The most the run may cost, in USD, by the registry's prices.
    #[arg(long, value_name = "USD", value_parser = parse_budget)]
    budget_usd: Option<f64>,
    /// The most model calls the run may make [default: 50].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_iterations: Option<u32>,
    /// Print the run's events as JSON lines on stdout instead of text.
    #[arg(long)]
    json: bool,
    /// The task (several words are joined by spaces).
    #[arg(required = true, value_name = "TASK")]
    task: Vec<String>,
}

/// A budget is a positive, finite number of dollars.
fn parse_budget(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(usd) if usd.is_finite() && usd > 0.0 => Ok(usd),
        Ok(_) => Err("the budget must be a positive number of US dollars, such as 0.50".to_owned()),
        Err(_) => Err(format!("`{text}` is not a number of US dollars (such as 0.50)")),
    }
}

/// Runs `troupe run`.
pub async fn run(args: RunArgs) -> Result<(), Failure> {
    let config = crate::load_config()?;
    let providers = crate::providers(&config)?;
    let environment = std::env::var("TROUPE_MODEL").ok();
    let (model, notice) = crate::chat::choose_model(args.model.as_deref(), environment.as_deref(), &config, &providers);
    if let Some(notice) = notice {
        eprintln!("{notice}");
    }
    let policy = match args.approve {
        Approve::Auto => ApprovalPolicy::auto(),
        // Which calls need approval is the declarations' call; what happens then is the approver's.
        Approve::Ask | Approve::Never => ApprovalPolicy::default(),
    };
    let workspace = args.workspace.clone().unwrap_or_else(|| PathBuf::from("."));
    if !workspace.is_dir() {
        let problem = if workspace.exists() { "is not a directory" } else { "does not exist" };
        return Err(Failure::Usage(anyhow!("the workspace `{}` {problem}", workspace.display())));
    }
    let engine = Engine::builder().providers(providers).build();
    let mut builder = engine
        .agent("troupe")
        .workspace(workspace)
        .coding_tools()
        .instructions(INSTRUCTIONS)
        .model(model)
        .approval(policy);
    if let Some(n) = args.max_iterations {
        builder = builder.max_iterations(n);
    }
    if let Some(usd) = args.budget_usd {
        builder = builder.budget_usd(usd);
    }
    let agent = builder.build().map_err(build_failure)?;

    let terminal = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    let mut approver = match (args.approve, terminal) {
        (Approve::Auto, _) => Approver::Approve,
        (Approve::Ask, true) => Approver::Prompt(None),
        (Approve::Ask, false) => Approver::Reject(NO_TERMINAL),
        (Approve::Never, _) => Approver::Reject(APPROVALS_OFF),
    };
    let mut renderer = Renderer::new(args.json, Style::detect());

    let RunHandle { mut events, signals, cancel, result, .. } = agent.start(RunInput::new(args.task.join(" ")));
    cancel_on_interrupt(signals.clone());
    let mut stdout_open = true;
    while let Some(event) = events.next_event().await {
        if stdout_open && !renderer.event(&event) {
            // stdout is gone (a closed pipe): nobody reads the rest.
            stdout_open = false;
            let _ = signals.try_send(Signal::Cancel { reason: Some("stdout was closed".into()) });
        }
        if let AgentEventKind::RunPaused { reason: PauseReason::Approval { call_id, tool, arguments, reason } } =
            event.kind
        {
            let label = renderer.label(&call_id, &tool, &arguments);
            renderer.hold_spinners();
            let decision = approver.decide(&mut renderer, &label, &arguments, &reason, &cancel).await;
            if let Some(decision) = decision {
                if let ApprovalDecision::Modify { arguments } = &decision {
                    renderer.modified(&call_id, arguments);
                }
                // A run that has gone (cancelled meanwhile) needs no answer.
                let _ = signals.decide(call_id, decision).await;
            }
            renderer.resume_spinners();
        }
    }
    drop(signals);
    let output = result.await.map_err(|e| Failure::Run(e.into()))?;
    renderer.finish();
    eprintln!("{}", summary_table(&output, renderer.priced()));
    if output.is_completed() { Ok(()) } else { Err(Failure::Run(anyhow!(outcome_message(&output.outcome)))) }
}

/// Sorts an agent that could not be built: a model error by its kind, anything else
/// (a bad workspace, a bad spec) is the user's to fix.
fn build_failure(error: RuntimeError) -> Failure {
    match error {
        RuntimeError::Model(error) => Failure::from_model(error),
        other => Failure::Usage(other.into()),
    }
}

/// Cancels the run on Ctrl-C; a second Ctrl-C quits at once. The handler is in place
/// when this returns.
fn cancel_on_interrupt(signals: SignalSender) {
    let cancel = move || {
        // `try_send` trips the run's cancellation token even when the buffer is full.
        let _ = signals.try_send(Signal::Cancel { reason: Some("interrupted (Ctrl-C)".into()) });
    };
    #[cfg(unix)]
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()) {
        Ok(mut interrupts) => {
            tokio::spawn(async move {
                if interrupts.recv().await.is_some() {
                    cancel();
                }
                if interrupts.recv().await.is_some() {
                    eprintln!("error: interrupted twice; quitting");
                    std::process::exit(1);
                }
            });
        }
        Err(e) => tracing::warn!("cannot listen for Ctrl-C: {e}"),
    }
    #[cfg(not(unix))]
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            cancel();
        }
    });
}

/// Decides the calls that need approval.
enum Approver {
    /// Approve everything (`--approve auto`; the policy asks nothing then anyway).
    Approve,
    /// Reject everything, for this reason.
    Reject(&'static str),
    /// Ask the person at the terminal, reading answers from stdin (started at the first question).
    Prompt(Option<Lines>),
}

impl Approver {
    /// The decision about the call labelled `label`; `None` when the run was cancelled while
    /// asking.
    async fn decide(
        &mut self,
        renderer: &mut Renderer,
        label: &str,
        arguments: &serde_json::Value,
        reason: &str,
        cancel: &CancellationToken,
    ) -> Option<ApprovalDecision> {
        let style = renderer.style();
        match self {
            Approver::Approve => Some(ApprovalDecision::Approve),
            Approver::Reject(why) => {
                renderer.note(&format!("{} {label} needs approval: rejected ({why})", style.warn("?")));
                Some(ApprovalDecision::Reject { reason: Some((*why).to_owned()) })
            }
            Approver::Prompt(lines) => {
                renderer.note(&format!("{} {label} needs approval: {reason}", style.warn("?")));
                let lines = lines.get_or_insert_with(Lines::spawn);
                let tool = label.split(' ').next().unwrap_or(label);
                prompt(lines, tool, arguments, cancel).await
            }
        }
    }
}

/// Asks `Allow shell {"command": …}? [y]es / [n]o / [a]lways / [e]dit` until answered.
async fn prompt(
    lines: &mut Lines,
    tool: &str,
    arguments: &serde_json::Value,
    cancel: &CancellationToken,
) -> Option<ApprovalDecision> {
    let shown = shorten(&arguments.to_string(), 400);
    loop {
        eprint!("Allow {tool} {shown}? [y]es / [n]o / [a]lways / [e]dit ");
        let Some(answer) = lines.next(cancel).await else {
            eprintln!();
            return None;
        };
        let Some(answer) = answer else {
            eprintln!();
            return Some(ApprovalDecision::Reject { reason: Some("no answer (end of input)".into()) });
        };
        match answer.trim().to_ascii_lowercase().as_str() {
            "y" | "yes" => return Some(ApprovalDecision::Approve),
            "n" | "no" => return Some(ApprovalDecision::Reject { reason: Some("the user said no".into()) }),
            "a" | "always" => return Some(ApprovalDecision::AlwaysAllow),
            "e" | "edit" => {
                if let Some(arguments) = edit(lines, cancel).await? {
                    return Some(ApprovalDecision::Modify { arguments });
                }
            }
            _ => eprintln!("Answer y, n, a or e."),
        }
    }
}

/// Reads replacement arguments: `Some(None)` to go back to the question.
async fn edit(lines: &mut Lines, cancel: &CancellationToken) -> Option<Option<serde_json::Value>> {
    loop {
        eprint!("New arguments, as one line of JSON (empty to go back): ");
        let Some(line) = lines.next(cancel).await else {
            eprintln!();
            return None;
        };
        let Some(line) = line else {
            eprintln!();
            return Some(None);
        };
        if line.trim().is_empty() {
            return Some(None);
        }
        match serde_json::from_str::<serde_json::Value>(&line) {
            Ok(value @ serde_json::Value::Object(_)) => return Some(Some(value)),
            Ok(_) => eprintln!("The arguments must be a JSON object, such as {{\"path\": \"notes.md\"}}."),
            Err(e) => eprintln!("That is not valid JSON: {e}."),
        }
    }
}

/// Lines of stdin, read on a thread of their own so that waiting for an answer never
/// blocks the runtime (nor its shutdown: the thread is left behind at exit).
struct Lines {
    rx: mpsc::UnboundedReceiver<String>,
}

impl Lines {
    fn spawn() -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for line in std::io::stdin().lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Lines { rx }
    }

    /// The next line: `None` when cancelled, `Some(None)` at the end of input.
    async fn next(&mut self, cancel: &CancellationToken) -> Option<Option<String>> {
        tokio::select! {
            biased;
            () = cancel.cancelled() => None,
            line = self.rx.recv() => Some(line),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_are_positive_dollars() {
        assert_eq!(parse_budget("0.5"), Ok(0.5));
        assert!(parse_budget("0").is_err());
        assert!(parse_budget("-1").is_err());
        assert!(parse_budget("NaN").is_err());
        assert!(parse_budget("inf").is_err());
        assert!(parse_budget("five").is_err_and(|e| e.contains("not a number")));
    }
}
