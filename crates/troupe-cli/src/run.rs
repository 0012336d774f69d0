//! `troupe run`: an agent with the built-in coding tools works on one task in a workspace;
//! and [`follow`], the foreground of a run that `troupe runs resume` shares.

use crate::Failure;
use crate::render::{Renderer, Style, outcome_message, summary_table};
use crate::setup;
use crate::store::StoreArgs;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use troupe::runtime::durable::{Durability, UNCERTAIN_REASON};
use troupe::runtime::{
    ApprovalDecision, ApprovalPolicy, OutputSpec, RunHandle, RunInput, RunOutcome, RunOutput, Signal, SignalSender,
};
use troupe_core::{AgentEventKind, OutputSchema, PauseReason, ToolCallId};

/// Why a call is rejected when no person can be asked and nothing is recorded.
const NO_TERMINAL: &str = "no terminal to ask; rerun with --approve auto";
/// Why a call is rejected under `--approve never`.
const APPROVALS_OFF: &str = "approvals are off (--approve never)";
/// Why an interrupted call is skipped when nobody can be asked and nothing is recorded.
const UNCERTAIN_SKIPPED: &str = "it may have happened already and nobody can be asked; skipped";

/// How tool calls that need approval are decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Approve {
    /// Ask on the terminal before each call with a side effect; without a terminal, pause
    /// the recorded run for `troupe runs approve` (with --no-store, reject them as `never` does).
    Ask,
    /// Run every call without asking, except a call a crash interrupted (it may have
    /// happened already): that one is asked about, or the run pauses.
    Auto,
    /// Reject every call that needs approval; the model is told why.
    Never,
}

/// Arguments of `troupe run`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Approvals: with --approve ask (the default), each call with a side effect (writing a \
file, running a command) is put to you on the terminal: [y]es, [n]o, [a]lways (this tool, for the rest of the \
run) or [e]dit (type replacement JSON arguments). With no terminal (a pipe, CI), the run pauses and is recorded: \
decide each waiting call with `troupe runs approve RUN CALL` or `troupe runs reject RUN CALL`, which resume it. \
With --no-store, ask without a terminal rejects such calls with \"no terminal to ask; rerun with --approve auto\".\n\n\
Recording: every run is recorded in the store (--store, default the workspace's own store in the user's data directory, outside the workspace), its id \
printed on stderr as `run ID`; see `troupe runs --help`. --detach queues the run for `troupe worker` instead.\n\n\
Output: the agent's text on stdout (with --json, every event as one JSON line instead), tool calls and a summary \
table (outcome, steps, tokens, cost, duration) on stderr. Ctrl-C cancels the run.\n\n\
Exit codes: 0 the run completed (or was queued); 1 it did not (failed, cancelled, over budget, out of \
iterations, incomplete, paused); 2 a usage or configuration error (a store that cannot be opened included).")]
pub(crate) struct RunArgs {
    /// The model, `provider/model` or `demo` [default: $TROUPE_MODEL, then default_model in
    /// ./troupe.toml, then the first vendor whose key is set, else demo].
    #[arg(long, short)]
    model: Option<String>,
    #[command(flatten)]
    place: StoreArgs,
    #[command(flatten)]
    sandbox: setup::SandboxArgs,
    /// Record nothing: no store is opened, and `--approve ask` without a terminal rejects.
    #[arg(long)]
    no_store: bool,
    /// Queue the run for `troupe worker` instead of running it; print its id on stdout.
    #[arg(long, conflicts_with_all = ["no_store", "json"])]
    detach: bool,
    /// How tool calls that need approval are decided (without a terminal, `ask` pauses the
    /// recorded run).
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
    /// End with a typed answer: a JSON document matching the JSON schema in FILE (an
    /// object schema), printed on stdout. An answer that does not match is sent back to
    /// the model twice, then the run fails `output_invalid`.
    #[arg(long, value_name = "FILE")]
    output_schema: Option<PathBuf>,
    /// Send an image (PNG, JPEG, GIF, WebP, up to 5 MiB) or a PDF (up to 32 MiB) with the
    /// task; repeat for several. Its type is read from its bytes.
    #[arg(long, value_name = "FILE")]
    attach: Vec<PathBuf>,
    /// Continue the conversation of a recorded run, the task as its next message: the
    /// newest run in the store, or `--continue=RUN` (the first characters of its id do).
    #[arg(
        long = "continue",
        value_name = "RUN",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "",
        conflicts_with_all = ["no_store", "detach"]
    )]
    continues: Option<String>,
    /// The task (several words are joined by spaces).
    #[arg(required = true, value_name = "TASK")]
    task: Vec<String>,
}

/// The output spec of `--output-schema FILE`: the file's JSON schema, named by the file.
fn output_schema(path: &Path) -> Result<OutputSpec, Failure> {
    let usage = |message: String| Failure::Usage(anyhow::anyhow!("--output-schema {}: {message}", path.display()));
    let text = std::fs::read_to_string(path).map_err(|e| usage(format!("cannot read it: {e}")))?;
    let schema: serde_json::Value = serde_json::from_str(&text).map_err(|e| usage(format!("not JSON: {e}")))?;
    let name = OutputSchema::name_from(&path.file_stem().map(|stem| stem.to_string_lossy()).unwrap_or_default());
    OutputSpec::new(OutputSchema::new(name, schema)).map_err(|e| usage(e.to_string()))
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
pub(crate) async fn run(args: RunArgs) -> Result<(), Failure> {
    let config = crate::load_config()?;
    let providers = crate::providers(&config)?;
    let environment = std::env::var("TROUPE_MODEL").ok();
    let (model, notice) = crate::chat::choose_model(args.model.as_deref(), environment.as_deref(), &config, &providers);
    if let Some(notice) = notice {
        diagln!("{notice}");
    }
    let policy = match (args.detach, args.approve) {
        // Nobody watches a queued run: `never` must be the policy's, not an approver's.
        (true, approve) => setup::unattended_policy(approve == Approve::Never, approve == Approve::Auto),
        (false, Approve::Auto) => ApprovalPolicy::auto(),
        // Which calls need approval is the declarations' call; what happens then is the approver's.
        (false, Approve::Ask | Approve::Never) => ApprovalPolicy::default(),
    };
    let workspace = args.place.workspace()?;
    setup::check_budget(&providers, &model, args.budget_usd)?;
    let spec = setup::coding_spec(model, policy, args.max_iterations, args.budget_usd);
    let mut runner = setup::runner(&workspace, providers, &args.sandbox.choice()?)?;
    // A run that cannot start (a missing key) leaves no store behind.
    setup::validate(&runner, &spec)?;
    let store = match args.no_store {
        true => None,
        false => Some(args.place.open().await?),
    };
    let mut input = RunInput::new(args.task.join(" "));
    for path in &args.attach {
        let block = troupe_core::attachment::from_path(path).map_err(|e| Failure::Usage(e.into()))?;
        input = input.attach(block);
    }
    if let Some(path) = &args.output_schema {
        input = input.output(output_schema(path)?);
    }
    if let (Some(given), Some(store)) = (&args.continues, &store) {
        input = continued(store.as_ref(), given, input).await?;
    }
    let durability = store.map(Durability::new);
    if let Some(path) = args.place.default_audit_log(&workspace).filter(|_| !args.no_store) {
        // Its directory is the store's, made by opening the store.
        let audit = troupe::tools::FileAuditLog::open(&path)
            .map_err(|e| Failure::Run(anyhow::anyhow!("cannot open the audit log {}: {e}", path.display())))?;
        runner = runner.with_audit_log(Arc::new(audit));
    }
    let recorded = durability.is_some();
    let agent = setup::agent(runner, spec, durability);
    if args.detach {
        let run_id = agent.enqueue(input).await.map_err(|e| Failure::Run(e.into()))?;
        outln!("{run_id}");
        diagln!("queued run {run_id}: `troupe worker` runs it; watch it with `troupe runs events {run_id} --follow`");
        return Ok(());
    }
    let handle = agent.start(input);
    if recorded {
        diagln!("run {}", handle.run_id);
    }
    let output = follow(
        handle,
        &Follow {
            json: args.json,
            approve: args.approve,
            recorded,
            known: Vec::new(),
            workspace: Some(workspace.clone()),
        },
    )
    .await?;
    completed(&output)
}

/// How a run is followed in the foreground.
pub(crate) struct Follow {
    /// Every event as a JSON line on stdout instead of text.
    pub(crate) json: bool,
    /// How calls that need approval are decided.
    pub(crate) approve: Approve,
    /// Whether the run is recorded in a store (so it can pause and be decided later).
    pub(crate) recorded: bool,
    /// Calls announced before this process saw the run (tool and arguments), for their labels.
    pub(crate) known: Vec<(ToolCallId, String, serde_json::Value)>,
    /// The run's workspace, whose files a person deciding on a write sees the diff of.
    pub(crate) workspace: Option<PathBuf>,
}

/// Renders a started run's events, decides its approvals as `options` say, and prints
/// the summary table; the run's output once it ends.
pub(crate) async fn follow(handle: RunHandle, options: &Follow) -> Result<RunOutput, Failure> {
    follow_with(handle, options, None).await.0
}

/// [`follow`], asking a person through `lines` (a session's, so that one reader has
/// stdin), which it gives back; a session gets a one-line summary instead of the table.
pub(crate) async fn follow_with(
    handle: RunHandle,
    options: &Follow,
    lines: Option<Lines>,
) -> (Result<RunOutput, Failure>, Option<Lines>) {
    let session = lines.is_some();
    let terminal = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    let mut approver = Approver {
        mode: options.approve,
        terminal,
        recorded: options.recorded,
        lines,
        workspace: options.workspace.clone(),
    };
    let mut renderer = Renderer::new(options.json, Style::detect());
    for (call_id, tool, arguments) in &options.known {
        renderer.known_call(call_id.clone(), tool, arguments);
    }

    let RunHandle { run_id, mut events, signals, cancel, result } = handle;
    cancel_on_interrupt(signals.clone());
    if session {
        // Said once Ctrl-C is taken: from here it stops this turn, not the session.
        diagln!("(working; Ctrl-C stops this turn)");
    }
    let mut stdout_open = true;
    while let Some(event) = events.next_event().await {
        if stdout_open && !renderer.event(&event) {
            // stdout is gone (a closed pipe): nobody reads the rest.
            stdout_open = false;
            let _ = signals.try_send(Signal::Cancel { reason: Some("stdout was closed".into()) });
        }
        let (call_id, tool, arguments, reason, uncertain) = match event.kind {
            AgentEventKind::RunPaused { reason: PauseReason::Approval { call_id, tool, arguments, reason } } => {
                (call_id, tool, arguments, reason, false)
            }
            AgentEventKind::RunPaused { reason: PauseReason::UncertainAction { call_id, tool, arguments } } => {
                (call_id, tool, arguments, UNCERTAIN_REASON.to_owned(), true)
            }
            _ => continue,
        };
        let label = renderer.label(&call_id, &tool, &arguments);
        renderer.hold_spinners();
        match approver.decide(&mut renderer, &label, &arguments, &reason, uncertain, &cancel).await {
            Answer::Decide(decision) => {
                if let ApprovalDecision::Modify { arguments } = &decision {
                    renderer.modified(&call_id, arguments);
                }
                // A run that has gone (cancelled meanwhile) needs no answer.
                let _ = signals.decide(call_id, decision).await;
            }
            Answer::Defer => {
                // The run pauses once every call of this turn is announced; it is recorded.
                signals.defer_approvals();
                renderer.note(&format!(
                    "paused: approve with `troupe runs approve {run_id} {call_id}` or reject with `troupe runs reject {run_id} {call_id}`"
                ));
            }
            Answer::Gone => {}
        }
        renderer.resume_spinners();
    }
    drop(signals);
    let output = match result.await {
        Ok(output) => output,
        Err(error) => return (Err(Failure::Run(error.into())), approver.lines),
    };
    renderer.finish();
    if session {
        let cost = if renderer.priced() { format!("${:.4}", output.cost_usd) } else { "n/a".to_owned() };
        diagln!(
            "({} tool calls · {} tokens · {cost})",
            output.tool_calls,
            output.usage.total_input() + output.usage.output_tokens
        );
    } else {
        diagln!("{}", summary_table(&output, renderer.priced()));
    }
    (Ok(output), approver.lines)
}

/// A conversation to go on from: a last turn whose calls never got their results (the
/// run stopped in between) is dropped, so a model is never shown a call without its answer.
pub(crate) fn answered(mut messages: Vec<troupe_core::Message>) -> Vec<troupe_core::Message> {
    while messages.last().is_some_and(|m| m.tool_uses().next().is_some()) {
        messages.pop();
    }
    messages
}

/// `input` continuing the conversation of the recorded run `given` (the newest run when
/// empty): the earlier run's messages come first, and both runs share a conversation.
pub(crate) async fn continued(
    store: &dyn troupe::store::Store,
    given: &str,
    input: RunInput,
) -> Result<RunInput, Failure> {
    let record = match given.trim() {
        "" => {
            let filter = troupe::store::RunFilter { limit: 1, ..Default::default() };
            let newest = store.list_runs(&filter).await.map_err(|e| Failure::Run(e.into()))?;
            let Some(newest) = newest.first() else {
                return Err(Failure::Usage(anyhow::anyhow!("--continue: the store has no run to continue")));
            };
            crate::runs::load(store, &newest.id).await?
        }
        run => crate::runs::load(store, run).await?,
    };
    let state = troupe::runtime::durable::state_from_value(&record.id, record.state.clone())
        .map_err(|e| Failure::Usage(anyhow::anyhow!("--continue: run {} cannot be continued: {e}", record.id)))?;
    let history = answered(state.into_messages());
    let conversation = record.conversation_id.clone().unwrap_or_else(|| record.id.clone());
    diagln!("continuing run {} ({} messages)", record.id, history.len());
    let mut input = input.history(history);
    input.conversation_id = Some(troupe_core::ConversationId::new(conversation));
    Ok(input)
}

/// Exit code 0 for a completed run, else 1 with the outcome's reason.
pub(crate) fn completed(output: &RunOutput) -> Result<(), Failure> {
    match &output.outcome {
        RunOutcome::Completed { .. } => Ok(()),
        outcome => Err(Failure::Run(anyhow::anyhow!(outcome_message(outcome)))),
    }
}

/// Cancels the run on Ctrl-C; a second Ctrl-C quits at once. The handler is in place
/// when this returns.
pub(crate) fn cancel_on_interrupt(signals: SignalSender) {
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
                    diagln!("error: interrupted twice; quitting");
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
struct Approver {
    mode: Approve,
    /// Whether a person is at the terminal (stdin and stderr).
    terminal: bool,
    /// Whether the run is recorded, so it can pause and be decided later.
    recorded: bool,
    /// stdin's lines, started at the first question.
    lines: Option<Lines>,
    /// Where the run's files are.
    workspace: Option<PathBuf>,
}

/// What to do about one waiting call.
enum Answer {
    /// Send this decision.
    Decide(ApprovalDecision),
    /// Leave it to a person later: the recorded run pauses.
    Defer,
    /// Nothing: the run was cancelled while asking.
    Gone,
}

impl Approver {
    /// What to do about the call labelled `label`, waiting for `reason`.
    async fn decide(
        &mut self,
        renderer: &mut Renderer,
        label: &str,
        arguments: &serde_json::Value,
        reason: &str,
        uncertain: bool,
        cancel: &CancellationToken,
    ) -> Answer {
        let style = renderer.style();
        // Approving an interrupted (`uncertain`) call retries it, which could repeat its
        // effect: only a person may, whatever --approve says.
        let reject = |renderer: &mut Renderer, why: &str| {
            renderer.note(&format!("{} {label} needs approval: rejected ({why})", style.warn("?")));
            Answer::Decide(ApprovalDecision::Reject { reason: Some(why.to_owned()) })
        };
        match (self.mode, self.terminal) {
            (Approve::Auto, _) if !uncertain => Answer::Decide(ApprovalDecision::Approve),
            // Rejecting an interrupted call skips it, which repeats nothing.
            (Approve::Never, _) => reject(renderer, APPROVALS_OFF),
            (_, true) => {
                renderer.note(&format!("{} {label} needs approval: {reason}", style.warn("?")));
                let lines = self.lines.get_or_insert_with(Lines::spawn);
                let tool = label.split(' ').next().unwrap_or(label);
                prompt(lines, tool, arguments, self.workspace.as_deref(), cancel)
                    .await
                    .map_or(Answer::Gone, Answer::Decide)
            }
            (_, false) if self.recorded => {
                renderer.note(&format!("{} {label} needs approval: {reason}", style.warn("?")));
                Answer::Defer
            }
            (Approve::Ask, false) => reject(renderer, NO_TERMINAL),
            (Approve::Auto, false) => reject(renderer, UNCERTAIN_SKIPPED),
        }
    }
}

/// Shows what the call would do (a file's diff, a command and its directory, the
/// arguments one per line), then asks `Allow fs.write? [y]es / [n]o / [a]lways / [e]dit`
/// until answered. A `no` asks why, for the model; `edit` opens the arguments in
/// `$VISUAL`/`$EDITOR` (else reads them as one line of JSON).
pub(crate) async fn prompt(
    lines: &mut Lines,
    tool: &str,
    arguments: &serde_json::Value,
    workspace: Option<&Path>,
    cancel: &CancellationToken,
) -> Option<ApprovalDecision> {
    diag!("{}", crate::approval_view::describe(tool, arguments, workspace));
    loop {
        diag!("Allow {tool}? [y]es / [n]o / [a]lways / [e]dit ");
        let Some(answer) = lines.next(cancel).await else {
            diagln!();
            return None;
        };
        let Some(answer) = answer else {
            diagln!();
            return Some(ApprovalDecision::Reject { reason: Some("no answer (end of input)".into()) });
        };
        let answer = answer.trim();
        match answer.to_ascii_lowercase().as_str() {
            "y" | "yes" => return Some(ApprovalDecision::Approve),
            "n" | "no" => {
                diag!("Why not? (the model is told; Enter to skip) ");
                let why = lines.next(cancel).await?.unwrap_or_default();
                let reason = match why.trim() {
                    "" => "the user said no".to_owned(),
                    why => format!("the user said no: {why}"),
                };
                return Some(ApprovalDecision::Reject { reason: Some(reason) });
            }
            "a" | "always" => return Some(ApprovalDecision::AlwaysAllow),
            "e" | "edit" => {
                let edited = match editor() {
                    Some(editor) => in_editor(&editor, arguments),
                    None => edit(lines, cancel).await?,
                };
                if let Some(arguments) = edited {
                    return Some(ApprovalDecision::Modify { arguments });
                }
            }
            _ => diagln!("Answer y, n, a or e."),
        }
    }
}

/// The person's editor: `$VISUAL`, else `$EDITOR`.
fn editor() -> Option<String> {
    ["VISUAL", "EDITOR"].iter().find_map(|v| std::env::var(v).ok().filter(|e| !e.trim().is_empty()))
}

/// The arguments edited in `editor` (run by the shell, as git runs it), started with the
/// call's own, pretty-printed; `None` when the editor failed or left no JSON object (the
/// question is asked again).
fn in_editor(editor: &str, arguments: &serde_json::Value) -> Option<serde_json::Value> {
    let file = match tempfile::Builder::new().prefix("troupe-arguments-").suffix(".json").tempfile() {
        Ok(file) => file,
        Err(e) => {
            diagln!("Cannot make a file to edit: {e}.");
            return None;
        }
    };
    let pretty = serde_json::to_string_pretty(arguments).unwrap_or_else(|_| arguments.to_string());
    if let Err(e) = std::fs::write(file.path(), format!("{pretty}\n")) {
        diagln!("Cannot write {}: {e}.", file.path().display());
        return None;
    }
    let status =
        std::process::Command::new("sh").arg("-c").arg(format!("{editor} \"$1\"")).arg("sh").arg(file.path()).status();
    match status {
        Ok(status) if status.success() => {}
        Ok(status) => {
            diagln!("The editor ended with {status}; the arguments are unchanged.");
            return None;
        }
        Err(e) => {
            diagln!("Cannot start the editor `{editor}`: {e}.");
            return None;
        }
    }
    let text = std::fs::read_to_string(file.path()).unwrap_or_default();
    match serde_json::from_str::<serde_json::Value>(&text) {
        Ok(value @ serde_json::Value::Object(_)) => Some(value),
        Ok(_) => {
            diagln!("The arguments must be a JSON object; they are unchanged.");
            None
        }
        Err(e) => {
            diagln!("That is not valid JSON ({e}); the arguments are unchanged.");
            None
        }
    }
}

/// Reads replacement arguments: `Some(None)` to go back to the question.
async fn edit(lines: &mut Lines, cancel: &CancellationToken) -> Option<Option<serde_json::Value>> {
    loop {
        diag!("New arguments, as one line of JSON (empty to go back): ");
        let Some(line) = lines.next(cancel).await else {
            diagln!();
            return None;
        };
        let Some(line) = line else {
            diagln!();
            return Some(None);
        };
        if line.trim().is_empty() {
            return Some(None);
        }
        match serde_json::from_str::<serde_json::Value>(&line) {
            Ok(value @ serde_json::Value::Object(_)) => return Some(Some(value)),
            Ok(_) => diagln!("The arguments must be a JSON object, such as {{\"path\": \"notes.md\"}}."),
            Err(e) => diagln!("That is not valid JSON: {e}."),
        }
    }
}

/// Lines of stdin, read on a thread of their own so that waiting for an answer never
/// blocks the runtime (nor its shutdown: the thread is left behind at exit).
pub(crate) struct Lines {
    rx: mpsc::UnboundedReceiver<String>,
}

impl Lines {
    pub(crate) fn spawn() -> Self {
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
    pub(crate) async fn next(&mut self, cancel: &CancellationToken) -> Option<Option<String>> {
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
