//! The terminal renderer of `troupe run`: results on stdout, progress on stderr.
//!
//! Assistant text streams to stdout as it arrives (or, with `--json`, every event as one
//! JSON line). Each tool call is a line on stderr: a spinner while it runs (on a terminal
//! only), then `✓ fs.read README.md (12 lines)` or `✗ … error`. The run ends with a
//! summary table on stderr.

use comfy_table::{CellAlignment, ContentArrangement, Table, presets};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::Value;
use std::collections::HashMap;
use std::io::Write;
use std::time::Duration;
use troupe::runtime::{RunOutcome, RunOutput};
use troupe_core::{AgentEvent, AgentEventKind, Budget, ToolCallId, Usage};

/// How stderr may be decorated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Style {
    /// ANSI colours (a terminal, and `NO_COLOR` unset).
    pub(crate) colour: bool,
    /// Animated spinners (a terminal).
    pub(crate) spinners: bool,
}

impl Style {
    /// The style stderr allows.
    pub(crate) fn detect() -> Self {
        use std::io::IsTerminal;
        let terminal = std::io::stderr().is_terminal();
        Style { colour: terminal && std::env::var_os("NO_COLOR").is_none(), spinners: terminal }
    }

    fn paint(self, code: &str, text: &str) -> String {
        if self.colour { format!("\x1b[{code}m{text}\x1b[0m") } else { text.to_owned() }
    }

    /// Green.
    pub(crate) fn ok(self, text: &str) -> String {
        self.paint("32", text)
    }

    /// Red.
    pub(crate) fn bad(self, text: &str) -> String {
        self.paint("31", text)
    }

    /// Yellow.
    pub(crate) fn warn(self, text: &str) -> String {
        self.paint("33", text)
    }

    /// Dim.
    pub(crate) fn dim(self, text: &str) -> String {
        self.paint("2", text)
    }
}

/// A tool call as the stream announced it.
struct Call {
    tool: String,
    arguments: String,
    ended: bool,
    /// Whether a person replaced the arguments (the result then starts with a note saying so).
    modified: bool,
    spinner: Option<ProgressBar>,
}

/// Renders one run's events.
pub(crate) struct Renderer {
    json: bool,
    style: Style,
    multi: MultiProgress,
    calls: HashMap<ToolCallId, Call>,
    /// Whether stdout's text ends a line (so the next stderr line starts clean).
    at_line_start: bool,
    /// Whether every model call had a known price.
    priced: bool,
}

impl Renderer {
    /// A renderer printing text (or JSON lines) to stdout, decorating stderr as `style` allows.
    pub(crate) fn new(json: bool, style: Style) -> Self {
        let target = if style.spinners { ProgressDrawTarget::stderr() } else { ProgressDrawTarget::hidden() };
        Renderer {
            json,
            style,
            multi: MultiProgress::with_draw_target(target),
            calls: HashMap::new(),
            at_line_start: true,
            priced: true,
        }
    }

    /// The style of stderr.
    pub(crate) fn style(&self) -> Style {
        self.style
    }

    /// Renders `event`; false once stdout is closed (nobody reads the rest).
    pub(crate) fn event(&mut self, event: &AgentEvent) -> bool {
        let mut written = if self.json { self.write_json(event) } else { Ok(()) };
        match &event.kind {
            AgentEventKind::MessageDelta { delta, .. } if !self.json => written = self.write_text(delta),
            AgentEventKind::MessageEnd { .. } if !self.json && !self.at_line_start => written = self.write_text("\n"),
            AgentEventKind::ToolCallStart { call_id, tool, .. } => {
                let call =
                    Call { tool: tool.clone(), arguments: String::new(), ended: false, modified: false, spinner: None };
                self.calls.insert(call_id.clone(), call);
            }
            AgentEventKind::ToolCallArgs { call_id, delta } => {
                if let Some(call) = self.calls.get_mut(call_id) {
                    call.arguments.push_str(delta);
                }
            }
            AgentEventKind::ToolCallEnd { call_id } => {
                if let Some(call) = self.calls.get_mut(call_id) {
                    call.ended = true;
                }
            }
            // The response is complete and priced: its calls run now (or wait for approval).
            AgentEventKind::Usage { cost_usd, .. } => {
                self.priced &= cost_usd.is_some();
                self.resume_spinners();
            }
            AgentEventKind::ToolCallResult { call_id, content, is_error } => {
                let (label, tool, modified) = match self.calls.remove(call_id) {
                    Some(call) => {
                        if let Some(spinner) = call.spinner {
                            spinner.finish_and_clear();
                            self.multi.remove(&spinner);
                        }
                        (call_label(&call.tool, &call.arguments), call.tool, call.modified)
                    }
                    None => (call_id.to_string(), String::new(), false),
                };
                let content = match content.split_once('\n') {
                    Some((_, rest)) if modified => rest,
                    _ => content.as_str(),
                };
                let line = if *is_error {
                    format!("{} {label}: {}", self.style.bad("✗"), first_line(content, 160))
                } else if let Some(ending) = command_failure(&tool, content) {
                    // The call worked; the command it ran did not.
                    format!("{} {label} {}", self.style.bad("✗"), self.style.dim(&format!("({ending})")))
                } else {
                    format!(
                        "{} {label} {}",
                        self.style.ok("✓"),
                        self.style.dim(&format!("({})", result_detail(&tool, content)))
                    )
                };
                self.note(&line);
            }
            AgentEventKind::Retrying { attempt, delay_ms, reason } => {
                self.note(&format!("note: retry {attempt} in {:.1}s: {reason}", *delay_ms as f64 / 1000.0));
            }
            AgentEventKind::ModelFallback { from, to, reason } => {
                self.note(&format!("note: {from} failed ({reason}); falling back to {to}"));
            }
            AgentEventKind::Custom { name, value } if name == "signal_refused" => {
                self.note(&format!("note: a signal was refused: {value}"));
            }
            AgentEventKind::RunFinished { .. } | AgentEventKind::RunError { .. } => self.clear_spinners(),
            _ => {}
        }
        written.is_ok()
    }

    /// Writes a line to stderr above any spinners, after ending stdout's line.
    pub(crate) fn note(&mut self, line: &str) {
        if !self.json && !self.at_line_start {
            // A terminal shows both streams in one place: start the note on its own line.
            let _ = self.write_text("\n");
        }
        self.multi.suspend(|| diagln!("{line}"));
    }

    /// Makes a call announced before this process saw the run (a resumed run's waiting
    /// calls) known, so its result is labelled like any other.
    pub(crate) fn known_call(&mut self, call_id: ToolCallId, tool: &str, arguments: &Value) {
        let call = Call {
            tool: tool.to_owned(),
            arguments: arguments.to_string(),
            ended: true,
            modified: false,
            spinner: None,
        };
        self.calls.entry(call_id).or_insert(call);
    }

    /// Records that a person replaced the arguments of `call_id`.
    pub(crate) fn modified(&mut self, call_id: &ToolCallId, arguments: &Value) {
        if let Some(call) = self.calls.get_mut(call_id) {
            call.arguments = arguments.to_string();
            call.modified = true;
        }
    }

    /// Stops every spinner, for a prompt: no call runs while one waits for approval.
    pub(crate) fn hold_spinners(&mut self) {
        self.clear_spinners();
        if !self.json && !self.at_line_start {
            let _ = self.write_text("\n");
        }
    }

    /// Restarts the spinners of the calls that are still to finish.
    pub(crate) fn resume_spinners(&mut self) {
        let ready: Vec<ToolCallId> =
            self.calls.iter().filter(|(_, c)| c.ended && c.spinner.is_none()).map(|(id, _)| id.clone()).collect();
        for id in ready {
            self.spin(&id);
        }
    }

    /// The human label of a call: `fs.read README.md`.
    pub(crate) fn label(&self, call_id: &ToolCallId, tool: &str, arguments: &Value) -> String {
        match self.calls.get(call_id) {
            Some(call) => call_label(&call.tool, &call.arguments),
            None => call_label(tool, &arguments.to_string()),
        }
    }

    /// Starts the spinner of a call that will run now.
    pub(crate) fn spin(&mut self, call_id: &ToolCallId) {
        if !self.style.spinners {
            return;
        }
        let Some(call) = self.calls.get_mut(call_id) else { return };
        if call.spinner.is_some() {
            return;
        }
        let style = ProgressStyle::with_template("{spinner} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner())
            .tick_chars("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏ ");
        let spinner = self.multi.add(ProgressBar::new_spinner().with_style(style));
        spinner.set_message(call_label(&call.tool, &call.arguments));
        spinner.enable_steady_tick(Duration::from_millis(80));
        call.spinner = Some(spinner);
    }

    fn clear_spinners(&mut self) {
        for call in self.calls.values_mut() {
            if let Some(spinner) = call.spinner.take() {
                spinner.finish_and_clear();
                self.multi.remove(&spinner);
            }
        }
    }

    /// Ends stdout's text on a line of its own.
    pub(crate) fn finish(&mut self) {
        self.clear_spinners();
        if !self.json && !self.at_line_start {
            let _ = self.write_text("\n");
        }
    }

    /// Whether every model call of the run had a known price.
    pub(crate) fn priced(&self) -> bool {
        self.priced
    }

    fn write_text(&mut self, text: &str) -> std::io::Result<()> {
        if text.is_empty() {
            return Ok(());
        }
        self.at_line_start = text.ends_with('\n');
        self.multi.suspend(|| {
            let mut out = std::io::stdout().lock();
            out.write_all(text.as_bytes()).and_then(|()| out.flush())
        })
    }

    fn write_json(&self, event: &AgentEvent) -> std::io::Result<()> {
        let line = serde_json::to_string(event).map_err(std::io::Error::other)?;
        let mut out = std::io::stdout().lock();
        writeln!(out, "{line}").and_then(|()| out.flush())
    }
}

/// `fs.read README.md`: the tool and its main argument, else its arguments, shortened.
pub(crate) fn call_label(tool: &str, arguments: &str) -> String {
    let value: Value = serde_json::from_str(arguments).unwrap_or(Value::Null);
    let main = ["path", "command", "pattern", "url", "query"]
        .iter()
        .find_map(|key| value.get(key).and_then(Value::as_str))
        .map(str::to_owned)
        .or_else(|| match &value {
            Value::Object(map) if map.is_empty() => None,
            Value::Null => (!arguments.trim().is_empty()).then(|| arguments.trim().to_owned()),
            other => Some(other.to_string()),
        });
    match main {
        Some(main) => format!("{tool} {}", shorten(&main.replace('\n', " "), 60)),
        None => tool.to_owned(),
    }
}

/// What a successful result amounts to: `12 lines`, `3 entries`, its one line.
/// How a `shell` command that did not succeed ended (`exit code 127`, `terminated by
/// signal 9`), from the first line of the tool's result; `None` for success and for
/// other tools.
pub(crate) fn command_failure(tool: &str, content: &str) -> Option<String> {
    if tool != "shell" {
        return None;
    }
    let headline = content.lines().next()?.trim();
    match headline.strip_prefix("exit code: ") {
        Some("0") => None,
        Some(code) => Some(format!("exit code {code}")),
        None => headline.starts_with("terminated by signal").then(|| headline.to_owned()),
    }
}

pub(crate) fn result_detail(tool: &str, content: &str) -> String {
    let numbered = |line: &&str| line.split_once('\t').is_some_and(|(n, _)| n.trim().parse::<u64>().is_ok());
    let notes = |line: &&str| line.starts_with('(') || line.starts_with('[');
    match tool {
        "fs.read" if content.lines().any(|l| numbered(&l)) => plural(content.lines().filter(numbered).count(), "line"),
        "fs.list" => plural(content.lines().filter(|l| !l.trim().is_empty() && !notes(l)).count(), "entry"),
        _ => match content.lines().filter(|l| !l.trim().is_empty()).count() {
            0 => "done".to_owned(),
            1 => {
                let line = first_line(content, 80);
                // `Created `x` (12 bytes).`: the label already names the file.
                match line.trim_end_matches('.').strip_suffix(')').and_then(|l| l.rsplit_once(" (")) {
                    Some((_, detail)) if !detail.is_empty() => detail.to_owned(),
                    _ => line,
                }
            }
            n => plural(n, "line"),
        },
    }
}

fn plural(n: usize, noun: &str) -> String {
    match (n, noun) {
        (1, _) => format!("1 {noun}"),
        (_, "entry") => format!("{n} entries"),
        _ => format!("{n} {noun}s"),
    }
}

/// The first non-blank line of `text`, at most `chars` characters.
pub(crate) fn first_line(text: &str, chars: usize) -> String {
    shorten(text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or_default(), chars)
}

/// `text`, cut to `chars` characters with an ellipsis.
pub(crate) fn shorten(text: &str, chars: usize) -> String {
    match text.char_indices().nth(chars) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

/// The one-line reason a run that did not complete gives for exit code 1.
pub(crate) fn outcome_message(outcome: &RunOutcome) -> String {
    match outcome {
        RunOutcome::Completed { .. } => "the run completed".to_owned(),
        RunOutcome::Failed { error, .. } => format!("the run failed: {error}"),
        RunOutcome::Cancelled { reason: Some(reason) } => format!("the run was cancelled: {reason}"),
        RunOutcome::Cancelled { reason: None } => "the run was cancelled".to_owned(),
        RunOutcome::BudgetExceeded { budget } => {
            let flag = match budget {
                Budget::Usd => " (--budget-usd)",
                Budget::Tokens | Budget::Time => "",
            };
            format!("the run stopped: its {budget} budget ran out{flag}")
        }
        RunOutcome::MaxIterations { iterations } => {
            format!("the run stopped after {iterations} model calls; raise --max-iterations to let it go on")
        }
        RunOutcome::Incomplete { .. } => {
            "the answer is incomplete: the model kept stopping at its output limit".to_owned()
        }
        RunOutcome::Paused { pending } => {
            let tools: Vec<&str> = pending.iter().map(|p| p.tool.as_str()).collect();
            format!("the run paused waiting for approval of {}", tools.join(", "))
        }
    }
}

/// The summary table: outcome, model, steps, tool calls, tokens, cost, duration.
pub(crate) fn summary_table(output: &RunOutput, priced: bool) -> String {
    let steps = output.events.iter().filter(|e| matches!(e.kind, AgentEventKind::StepStarted { .. })).count();
    let outcome = serde_json::to_value(output.outcome.kind())
        .ok()
        .and_then(|v| v.as_str().map(|s| s.replace('_', " ")))
        .unwrap_or_default();
    let Usage { input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, .. } = output.usage;
    let cost = if priced { format!("${:.4}", output.cost_usd) } else { "n/a (unpriced model)".to_owned() };
    let saved = if priced { format!("${:.4}", output.cache_saved_usd()) } else { "n/a".to_owned() };
    let rows: [(&str, String); 11] = [
        ("outcome", outcome),
        ("model", output.state.model().to_owned()),
        ("steps", steps.to_string()),
        ("tool calls", output.tool_calls.to_string()),
        ("input tokens", grouped(input_tokens)),
        ("output tokens", grouped(output_tokens)),
        ("cache read tokens", grouped(cache_read_tokens)),
        ("cache write tokens", grouped(cache_write_tokens)),
        ("cost (USD)", cost),
        ("cache saved (USD)", saved),
        ("duration", format!("{:.1}s", output.duration.as_secs_f64())),
    ];
    let mut table = Table::new();
    // The table is small; a terminal that reports no width must not squeeze it to nothing.
    table.load_preset(presets::UTF8_FULL_CONDENSED).set_content_arrangement(ContentArrangement::Disabled);
    for (name, value) in rows {
        table.add_row([name.to_owned(), value]);
    }
    if let Some(column) = table.column_mut(1) {
        column.set_cell_alignment(CellAlignment::Right);
    }
    table.to_string()
}

/// `1234567` as `1,234,567`.
fn grouped(n: u64) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_that_failed_is_told_apart_from_one_that_succeeded() {
        assert_eq!(
            command_failure("shell", "exit code: 127\nsandbox: …\nstderr: not found").as_deref(),
            Some("exit code 127")
        );
        assert_eq!(command_failure("shell", "exit code: 0\nsandbox: …"), None);
        assert_eq!(command_failure("shell", "terminated by signal 9\n").as_deref(), Some("terminated by signal 9"));
        assert_eq!(command_failure("fs.read", "exit code: 1"), None, "only the shell's result says so");
    }

    #[test]
    fn labels_show_the_main_argument() {
        assert_eq!(call_label("fs.read", r#"{"path": "README.md"}"#), "fs.read README.md");
        assert_eq!(call_label("shell", r#"{"command": "cargo test\n--all"}"#), "shell cargo test --all");
        assert_eq!(call_label("git.status", "{}"), "git.status");
        assert_eq!(call_label("x", r#"{"n": 1}"#), r#"x {"n":1}"#);
        assert_eq!(call_label("x", "not json"), "x not json");
        let long = format!(r#"{{"path": "{}"}}"#, "a".repeat(100));
        assert!(call_label("fs.read", &long).ends_with('…'));
    }

    #[test]
    fn details_count_lines_and_entries() {
        assert_eq!(result_detail("fs.read", "     1\t# Hi\n     2\t\n[showing lines 1-2; more]\n"), "2 lines");
        assert_eq!(result_detail("fs.read", "(`a` is empty)"), "(`a` is empty)");
        assert_eq!(result_detail("fs.list", "a\nb/\n[showing 2 of 9 entries]\n"), "2 entries");
        assert_eq!(result_detail("fs.list", "(`.` is empty)\n"), "0 entries");
        assert_eq!(result_detail("fs.write", "Created `x` (3 bytes)."), "3 bytes");
        assert_eq!(result_detail("fs.edit", "Replaced 1 occurrence in `x`."), "Replaced 1 occurrence in `x`.");
        assert_eq!(result_detail("grep", "a:1\nb:2\n"), "2 lines");
        assert_eq!(result_detail("shell", ""), "done");
    }

    #[test]
    fn every_other_outcome_explains_itself() {
        let budget = outcome_message(&RunOutcome::BudgetExceeded { budget: Budget::Usd });
        assert!(budget.contains("usd budget") && budget.contains("--budget-usd"), "{budget}");
        let limit = outcome_message(&RunOutcome::MaxIterations { iterations: 3 });
        assert!(limit.contains("3 model calls") && limit.contains("--max-iterations"), "{limit}");
        let cancelled = outcome_message(&RunOutcome::Cancelled { reason: Some("interrupted (Ctrl-C)".into()) });
        assert_eq!(cancelled, "the run was cancelled: interrupted (Ctrl-C)");
        assert_eq!(outcome_message(&RunOutcome::failed("boom", "x")), "the run failed: boom");
    }

    #[test]
    fn styles_colour_only_when_allowed() {
        let plain = Style::default();
        assert_eq!(plain.ok("✓"), "✓");
        let coloured = Style { colour: true, spinners: true };
        assert_eq!(coloured.bad("✗"), "\x1b[31m✗\x1b[0m");
        assert_eq!(grouped(1_234_567), "1,234,567");
    }
}
