//! Running a suite: every case N times, each run in a throwaway workspace of its own, at
//! most `concurrency` at once, none started once the budget is spent; each run graded.

use crate::grade::{Attempt, Judge, Verdict, grade};
use crate::report::{CaseReport, RunRecord, SuiteReport};
use crate::suite::{Case, Suite};
use futures::StreamExt;
use futures::future::LocalBoxFuture;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use troupe_core::{ContentBlock, OutputSchema, Role};
use troupe_run::OutputSpec;
use troupe_runtime::{Agent, RunInput, RunOutcome};

/// What one run of a [`Subject`] came to.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// The final answer, when the run completed.
    pub answer: Option<String>,
    /// Why it did not complete, when it did not.
    pub failure: Option<String>,
    /// The tool calls it made (every member's, for a team): name and arguments, in order.
    pub tool_calls: Vec<(String, serde_json::Value)>,
    /// What it cost, in USD.
    pub cost_usd: f64,
    /// Its tokens.
    pub tokens: u64,
    /// How long it took.
    pub duration: std::time::Duration,
}

/// What one run of a case asks of its subject.
#[derive(Clone, Debug, Default)]
pub struct CaseInput {
    /// The task.
    pub task: String,
    /// The typed answer to ask for, when the case has an `output_schema`.
    pub output: Option<OutputSpec>,
    /// The images and PDFs sent with the task.
    pub attachments: Vec<ContentBlock>,
}

/// What a suite evaluates: an agent or a team, built afresh for each run in that run's
/// workspace.
pub trait Subject: Send + Sync {
    /// A name for reports (`agents/coder.toml on openai/gpt-4o`).
    fn name(&self) -> String;

    /// Runs `input`'s task in `workspace`, with its attachments, asking for a typed answer
    /// when it says so. The future need not be `Send`: a suite's runs are driven together
    /// on the caller's task.
    fn run<'a>(&'a self, workspace: &'a Path, input: &'a CaseInput) -> LocalBoxFuture<'a, Result<Outcome, String>>;

    /// The judge of the suite's `judge` graders, when there is one.
    fn judge(&self) -> Option<&dyn Judge> {
        None
    }

    /// How a `command` grader is confined in `workspace`: as the subject's own commands
    /// are (by default `workspace-write`, no network).
    fn grader_sandbox(&self, workspace: &Path) -> troupe_sandbox::Sandbox {
        let _ = workspace;
        troupe_sandbox::Sandbox::new(troupe_sandbox::SandboxMode::WorkspaceWrite)
    }
}

/// Runs `input` with `agent`: what a [`Subject`] made of one agent does.
pub async fn run_agent(agent: &Agent, input: &CaseInput) -> Result<Outcome, String> {
    let mut run = RunInput::new(input.task.clone());
    if let Some(output) = &input.output {
        run = run.output(output.clone());
    }
    for attachment in &input.attachments {
        run = run.attach(attachment.clone());
    }
    let output = agent.run(run).await.map_err(|e| e.to_string())?;
    let tool_calls = output
        .messages
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .flat_map(|m| m.content.iter())
        .filter_map(|block| match block {
            ContentBlock::ToolUse { name, input, .. } => Some((name.clone(), input.clone())),
            _ => None,
        })
        .collect();
    let (answer, failure) = match &output.outcome {
        RunOutcome::Completed { output } => (Some(output.clone()), None),
        other => (None, Some(format!("{:?}", other.kind()).to_lowercase())),
    };
    Ok(Outcome {
        answer,
        failure,
        tool_calls,
        cost_usd: output.cost_usd,
        tokens: output.usage.total(),
        duration: output.duration,
    })
}

/// Runs `suite` against `subject`.
pub async fn run_suite(suite: &Suite, subject: Arc<dyn Subject>) -> SuiteReport {
    let spent_micros = Arc::new(AtomicU64::new(0));
    let jobs = suite.cases.iter().enumerate().flat_map(|(index, case)| (0..suite.runs).map(move |n| (index, case, n)));
    let budget = suite.budget_usd;
    let results: Vec<(usize, RunRecord)> = futures::stream::iter(jobs)
        .map(|(index, case, n)| {
            let subject = Arc::clone(&subject);
            let spent = Arc::clone(&spent_micros);
            async move {
                let spent_usd = spent.load(Ordering::SeqCst) as f64 / 1e6;
                if budget.is_some_and(|budget| spent_usd >= budget) {
                    return (
                        index,
                        RunRecord::skipped(n, format!("the suite's budget of ${:.2} is spent", budget.unwrap_or(0.0))),
                    );
                }
                let record = attempt(case, n, subject.as_ref()).await;
                spent.fetch_add((record.cost_usd * 1e6) as u64, Ordering::SeqCst);
                (index, record)
            }
        })
        .buffer_unordered(suite.concurrency)
        .collect()
        .await;
    let mut per_case: Vec<Vec<RunRecord>> = suite.cases.iter().map(|_| Vec::new()).collect();
    for (index, record) in results {
        per_case[index].push(record);
    }
    let cases = suite
        .cases
        .iter()
        .zip(per_case)
        .map(|(case, mut runs)| {
            runs.sort_by_key(|r| r.n);
            CaseReport::new(&case.name, runs)
        })
        .collect();
    SuiteReport::new(&suite.name, &subject.name(), suite.threshold, cases)
}

/// One run of `case`, graded.
async fn attempt(case: &Case, n: u32, subject: &dyn Subject) -> RunRecord {
    let workspace = match tempfile::tempdir() {
        Ok(dir) => dir,
        Err(error) => return RunRecord::errored(n, format!("no workspace: {error}")),
    };
    for (path, text) in &case.files {
        let file = workspace.path().join(path);
        let written = file.parent().map_or(Ok(()), std::fs::create_dir_all).and_then(|()| std::fs::write(&file, text));
        if let Err(error) = written {
            return RunRecord::errored(n, format!("cannot write the fixture {path}: {error}"));
        }
    }
    let spec = match &case.output_schema {
        Some(schema) => match OutputSpec::new(OutputSchema::new(OutputSchema::name_from(&case.name), schema.clone())) {
            Ok(spec) => Some(spec),
            Err(error) => return RunRecord::errored(n, format!("the output schema: {error}")),
        },
        None => None,
    };
    let input = CaseInput { task: case.task.clone(), output: spec, attachments: case.attachments.clone() };
    let outcome = match subject.run(workspace.path(), &input).await {
        Ok(outcome) => outcome,
        Err(error) => return RunRecord::errored(n, error),
    };
    let graded = Attempt {
        task: case.task.clone(),
        answer: outcome.answer.clone().unwrap_or_default(),
        tool_calls: outcome.tool_calls,
        failure: outcome.failure,
    };
    let mut verdicts: Vec<Verdict> = Vec::with_capacity(case.expect.len());
    for grader in &case.expect {
        let sandbox = subject.grader_sandbox(workspace.path());
        verdicts.push(grade(grader, &graded, workspace.path(), &sandbox, subject.judge()).await);
    }
    RunRecord {
        n,
        pass: verdicts.iter().all(|v| v.pass),
        verdicts,
        answer: graded.answer,
        error: graded.failure,
        cost_usd: outcome.cost_usd,
        tokens: outcome.tokens,
        latency_ms: u64::try_from(outcome.duration.as_millis()).unwrap_or(u64::MAX),
        skipped: false,
    }
}
