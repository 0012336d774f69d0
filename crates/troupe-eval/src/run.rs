//! Running a suite: every case N times, each run in a throwaway workspace of its own, at
//! most `concurrency` at once, none started once the budget is spent; each run graded.

use crate::grade::{Attempt, Judge, Verdict, grade};
use crate::report::{CaseReport, RunRecord, SuiteReport};
use crate::suite::{Case, Suite};
use futures::StreamExt;
use futures::future::BoxFuture;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use troupe_core::{ContentBlock, OutputSchema, Role};
use troupe_run::OutputSpec;
use troupe_runtime::{Agent, RunInput, RunOutcome};

/// What a suite evaluates: an agent built afresh for each run, in that run's workspace.
pub trait Subject: Send + Sync {
    /// A name for reports (`agents/coder.toml on openai/gpt-4o`).
    fn name(&self) -> String;

    /// The agent, working in `workspace`.
    fn agent<'a>(&'a self, workspace: &'a Path) -> BoxFuture<'a, Result<Agent, String>>;

    /// The judge of the suite's `judge` graders, when there is one.
    fn judge(&self) -> Option<&dyn Judge> {
        None
    }
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
    let agent = match subject.agent(workspace.path()).await {
        Ok(agent) => agent,
        Err(error) => return RunRecord::errored(n, format!("the agent could not be built: {error}")),
    };
    let mut input = RunInput::new(case.task.clone());
    if let Some(schema) = &case.output_schema {
        match OutputSpec::new(OutputSchema::new(OutputSchema::name_from(&case.name), schema.clone())) {
            Ok(spec) => input = input.output(spec),
            Err(error) => return RunRecord::errored(n, format!("the output schema: {error}")),
        }
    }
    let output = match agent.run(input).await {
        Ok(output) => output,
        Err(error) => return RunRecord::errored(n, error.to_string()),
    };
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
        RunOutcome::Completed { output } => (output.clone(), None),
        other => (String::new(), Some(format!("{:?}", other.kind()).to_lowercase())),
    };
    let graded = Attempt { task: case.task.clone(), answer, tool_calls, failure };
    let mut verdicts: Vec<Verdict> = Vec::with_capacity(case.expect.len());
    for grader in &case.expect {
        verdicts.push(grade(grader, &graded, workspace.path(), subject.judge()).await);
    }
    RunRecord {
        n,
        pass: verdicts.iter().all(|v| v.pass),
        verdicts,
        answer: graded.answer,
        error: graded.failure,
        cost_usd: output.cost_usd,
        tokens: output.usage.total(),
        latency_ms: u64::try_from(output.duration.as_millis()).unwrap_or(u64::MAX),
        skipped: false,
    }
}
