//! `troupe eval SUITE.toml`: an agent over a suite of cases, N runs each, graded, with pass
//! rates, confidence intervals, cost, tokens and latency.

use crate::Failure;
use crate::setup;
use anyhow::anyhow;
use comfy_table::{ContentArrangement, Table, presets};
use futures::FutureExt;
use futures::future::BoxFuture;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use troupe::model::{ModelConfig, Providers};
use troupe::runtime::{Agent, ApprovalPolicy};
use troupe_eval::{Subject, Suite, SuiteReport};
use troupe_workers::AgentDefinition;
use troupe_workers::build::{self, AgentBuild, Approvals, Ceilings, SandboxChoice};

/// Arguments of `troupe eval`.
#[derive(Debug, clap::Args)]
#[command(after_help = "A suite file names the agent (`[suite] agent = \"agents/x.toml\"`, or the built-in coding \
agent on `model`), how many times each case runs (`runs`), how many at once (`concurrency`), a budget \
(`budget_usd`) and the pass rate to reach (`threshold`); then `[[cases]]`, each with a `task`, `files` for its \
throwaway workspace, an optional `output_schema`, and `[[cases.expect]]` graders: exact, contains, regex, \
json_schema, equals, tool_call, command. Calls that need approval are allowed: each run has a workspace of its \
own. See examples/evals/.\n\n\
Exit codes: 0 the suite met its threshold (or has none); 1 it did not; 2 a usage error (a suite file with \
mistakes, named at file:line:column).")]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub(crate) struct EvalArgs {
    #[command(subcommand)]
    command: Option<EvalCommand>,
    /// The suite file.
    #[arg(required = true)]
    suite: Option<PathBuf>,
    /// Also run the suite on this (a model id, or an agent file ending in `.toml`) and show
    /// both side by side; the exit code is 1 when either misses the threshold.
    #[arg(long, value_name = "MODEL|FILE")]
    compare: Option<String>,
    /// The model of the built-in coding agent, or instead of an agent file's.
    #[arg(long, short, value_name = "MODEL")]
    model: Option<String>,
    /// Each case this many times, instead of the suite's `runs`.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    runs: Option<u32>,
    /// The report as JSON on stdout instead of a table.
    #[arg(long)]
    json: bool,
    /// Also write the report as an HTML page to FILE.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    #[command(flatten)]
    sandbox: setup::SandboxArgs,
}

/// The subcommands of `troupe eval`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum EvalCommand {
    /// Adds a case made from a recorded run to a suite file: its task, and a `tool_call`
    /// grader for each tool it called (and `equals` for a typed answer); review it.
    AddFromRun(AddFromRunArgs),
}

/// Arguments of `troupe eval add-from-run`.
#[derive(Debug, clap::Args)]
pub(crate) struct AddFromRunArgs {
    #[command(flatten)]
    place: crate::store::StoreArgs,
    /// The run's id, or the first characters of it.
    run: String,
    /// The suite file to add the case to (created when missing).
    #[arg(long, value_name = "FILE")]
    suite: PathBuf,
    /// The case's name [default: the run's task, cut to 60 characters].
    #[arg(long, value_name = "NAME")]
    name: Option<String>,
}

/// What a suite is run on: the suite's own agent or model, or another for `--compare`.
fn subject(
    suite: &Suite,
    model: Option<String>,
    agent: Option<&Path>,
    config: &ModelConfig,
    providers: &Providers,
    sandbox: &SandboxChoice,
) -> Result<Arc<dyn Subject>, Failure> {
    if agent.is_none()
        && let Some(team) = &suite.team
    {
        // The team's agents next to its file (agents/, agents.d/), as `troupe team run` finds them.
        let dirs: Vec<PathBuf> = team.parent().map(Path::to_owned).into_iter().collect();
        let files = troupe_workers::team_run::TeamFiles::load(team, &dirs).map_err(|e| Failure::Usage(e.into()))?;
        let model = suite.judge_model.clone().or(model).unwrap_or_else(|| "demo".to_owned());
        let judge = ModelJudge { providers: providers.clone(), model };
        return Ok(Arc::new(TeamSubject { files, config: config.clone(), sandbox: sandbox.clone(), judge }));
    }
    Ok(match agent.or(suite.agent.as_deref()) {
        Some(file) => {
            let mut definition = build::load(file).map_err(|e| Failure::Usage(e.into()))?;
            if let Some(model) = model.or_else(|| if agent.is_some() { None } else { suite.model.clone() }) {
                // A whole id: the file's provider name no longer applies.
                definition.provider.name = None;
                definition.provider.model = model;
            }
            let judge = ModelJudge {
                providers: providers.clone(),
                model: suite.judge_model.clone().unwrap_or_else(|| definition.model_id()),
            };
            Arc::new(FileAgent { definition, config: config.clone(), sandbox: sandbox.clone(), judge })
        }
        None => {
            let model = model.or_else(|| suite.model.clone()).unwrap_or_else(|| "demo".to_owned());
            let judge = ModelJudge {
                providers: providers.clone(),
                model: suite.judge_model.clone().unwrap_or_else(|| model.clone()),
            };
            Arc::new(CodingAgent { model, providers: providers.clone(), sandbox: sandbox.clone(), judge })
        }
    })
}

/// Runs `troupe eval`.
pub(crate) async fn eval(args: EvalArgs) -> Result<(), Failure> {
    if let Some(EvalCommand::AddFromRun(add)) = args.command {
        return add_from_run(add).await;
    }
    let Some(path) = &args.suite else { return Err(Failure::Usage(anyhow!("name the suite file"))) };
    let mut suite = Suite::load(path).map_err(|e| Failure::Usage(e.into()))?;
    if let Some(runs) = args.runs {
        suite.runs = runs;
    }
    let config = crate::load_config()?;
    let sandbox = args.sandbox.choice()?;
    let providers = crate::providers(&config)?;
    let subject = subject(&suite, args.model.clone(), None, &config, &providers, &sandbox)?;
    if let Some(other) = &args.compare {
        let other_subject = if other.ends_with(".toml") {
            subject_of_file(&suite, Path::new(other), &config, &providers, &sandbox)?
        } else {
            self::subject(&suite, Some(other.clone()), None, &config, &providers, &sandbox)?
        };
        let a = troupe_eval::run_suite(&suite, subject).await;
        let b = troupe_eval::run_suite(&suite, other_subject).await;
        let comparison = troupe_eval::Comparison { a, b };
        if let Some(path) = &args.html {
            std::fs::write(path, comparison.to_html())
                .map_err(|e| Failure::Run(anyhow!("cannot write the report to {}: {e}", path.display())))?;
            diagln!("report: {}", path.display());
        }
        if args.json {
            outln!("{}", serde_json::to_string(&comparison).map_err(|e| Failure::Run(e.into()))?);
        } else {
            out!("{}", compare_table(&comparison));
        }
        let missed: Vec<&str> = [&comparison.a, &comparison.b]
            .into_iter()
            .filter(|r| !r.meets_threshold())
            .map(|r| r.subject.as_str())
            .collect();
        return if missed.is_empty() {
            Ok(())
        } else {
            Err(Failure::Run(anyhow!("under the suite's threshold: {}", missed.join(", "))))
        };
    }
    let report = troupe_eval::run_suite(&suite, subject).await;
    if let Some(path) = &args.html {
        std::fs::write(path, report.to_html())
            .map_err(|e| Failure::Run(anyhow!("cannot write the report to {}: {e}", path.display())))?;
        diagln!("report: {}", path.display());
    }
    if args.json {
        outln!("{}", serde_json::to_string(&report).map_err(|e| Failure::Run(e.into()))?);
    } else {
        out!("{}", table(&report));
    }
    if report.meets_threshold() {
        Ok(())
    } else {
        Err(Failure::Run(anyhow!(
            "the pass rate {:.0}% is under the suite's threshold of {:.0}%",
            report.overall.rate * 100.0,
            report.threshold.unwrap_or(0.0) * 100.0
        )))
    }
}

/// The subject of an agent file given to `--compare`, on its own model.
fn subject_of_file(
    suite: &Suite,
    file: &Path,
    config: &ModelConfig,
    providers: &Providers,
    sandbox: &SandboxChoice,
) -> Result<Arc<dyn Subject>, Failure> {
    subject(suite, None, Some(file), config, providers, sandbox)
}

/// Two reports side by side.
fn compare_table(comparison: &troupe_eval::Comparison) -> String {
    let mut table = Table::new();
    table.load_preset(presets::UTF8_FULL_CONDENSED).set_content_arrangement(ContentArrangement::Dynamic);
    let (a, b) = (&comparison.a, &comparison.b);
    table.set_header(["case".to_owned(), a.subject.clone(), b.subject.clone(), "change".to_owned()]);
    let rate = |r: &troupe_eval::Rate| format!("{:.0}% ({}/{})", r.rate * 100.0, r.passed, r.runs);
    for (x, y) in comparison.cases() {
        table.add_row([
            x.name.clone(),
            rate(&x.rate),
            rate(&y.rate),
            format!("{:+.0}", (y.rate.rate - x.rate.rate) * 100.0),
        ]);
    }
    table.add_row([
        "overall".to_owned(),
        format!("{} · ${:.4}", rate(&a.overall), a.cost_usd),
        format!("{} · ${:.4}", rate(&b.overall), b.cost_usd),
        format!("{:+.0}", (b.overall.rate - a.overall.rate) * 100.0),
    ]);
    format!("{table}\n")
}

/// `troupe eval add-from-run`: a case from a recorded run, appended to the suite file.
async fn add_from_run(args: AddFromRunArgs) -> Result<(), Failure> {
    let store = args.place.open_existing().await?;
    let record = crate::runs::load(store.as_ref(), &args.run).await?;
    let recording =
        troupe::replay::Recording::load(store.as_ref(), &record.id).await.map_err(|e| Failure::Usage(e.into()))?;
    let task = recording.input.instruction.clone();
    if task.trim().is_empty() {
        return Err(Failure::Usage(anyhow!("run {} has no task of its own to make a case of", record.id)));
    }
    let name = args.name.clone().unwrap_or_else(|| crate::render::shorten(&task, 60));
    let mut case = toml::Table::new();
    case.insert("name".into(), name.clone().into());
    case.insert("task".into(), task.into());
    let mut expect = Vec::new();
    let mut tools: Vec<String> = Vec::new();
    for turn in &recording.turns {
        for (_, tool, _) in turn.message.tool_uses() {
            if !tools.iter().any(|t| t == tool) {
                tools.push(tool.to_owned());
            }
        }
    }
    for tool in tools {
        let mut grader = toml::Table::new();
        grader.insert("kind".into(), "tool_call".into());
        grader.insert("tool".into(), tool.into());
        expect.push(toml::Value::Table(grader));
    }
    let typed = recording.input.output.is_some() || recording.input.spec.output.is_some();
    if let (true, Some(troupe::runtime::RunOutcome::Completed { output })) = (typed, &recording.outcome)
        && let Ok(value) = serde_json::from_str::<serde_json::Value>(output)
        && let Ok(value) = toml::Value::try_from(value)
    {
        let mut grader = toml::Table::new();
        grader.insert("kind".into(), "equals".into());
        grader.insert("value".into(), value);
        expect.push(toml::Value::Table(grader));
    }
    if expect.is_empty() {
        return Err(Failure::Usage(anyhow!(
            "run {} called no tool and has no typed answer: write its case's graders by hand",
            record.id
        )));
    }
    case.insert("expect".into(), toml::Value::Array(expect));
    let mut document = toml::Table::new();
    document.insert("cases".into(), toml::Value::Array(vec![toml::Value::Table(case)]));
    let text = toml::to_string(&document).map_err(|e| Failure::Run(e.into()))?;
    let existing = std::fs::read_to_string(&args.suite).unwrap_or_default();
    let joined = format!(
        "{existing}{}# From run {}\n{text}",
        if existing.is_empty() || existing.ends_with("\n\n") { "" } else { "\n" },
        record.id
    );
    // The result must still be a suite: nothing is written otherwise.
    Suite::parse(&args.suite, &joined).map_err(|e| Failure::Usage(e.into()))?;
    std::fs::write(&args.suite, joined)
        .map_err(|e| Failure::Run(anyhow!("cannot write {}: {e}", args.suite.display())))?;
    diagln!("added case `{name}` to {}", args.suite.display());
    Ok(())
}

/// The report as a table and a summary line.
fn table(report: &SuiteReport) -> String {
    let mut table = Table::new();
    table.load_preset(presets::UTF8_FULL_CONDENSED).set_content_arrangement(ContentArrangement::Dynamic);
    table.set_header(["case", "pass", "95% interval", "runs", "cost", "tokens", "latency", "first failure"]);
    for case in &report.cases {
        table.add_row([
            case.name.clone(),
            format!("{:.0}%", case.rate.rate * 100.0),
            format!("{:.0}–{:.0}%", case.rate.low * 100.0, case.rate.high * 100.0),
            format!("{}/{}", case.rate.passed, case.rate.runs),
            format!("${:.4}", case.mean_cost_usd),
            format!("{:.0}", case.mean_tokens),
            format!("{:.0} ms", case.mean_latency_ms),
            case.first_failure().map(|f| crate::render::shorten(&f, 60)).unwrap_or_default(),
        ]);
    }
    let overall = &report.overall;
    format!(
        "{table}\n{}: {}/{} passed, {:.0}% (95% {:.0}–{:.0}%), ${:.4}, {} tokens, {:.0} ms a run\n",
        report.suite,
        overall.passed,
        overall.runs,
        overall.rate * 100.0,
        overall.low * 100.0,
        overall.high * 100.0,
        report.cost_usd,
        report.tokens,
        report.mean_latency_ms
    )
}

/// A model's verdict on an answer.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct JudgeVerdict {
    /// Whether the answer meets the rubric.
    pass: bool,
    /// Why, in a sentence.
    reason: String,
}

/// The judge of `judge` graders: a model without tools, answering in a [`JudgeVerdict`].
struct ModelJudge {
    providers: Providers,
    /// The model when a grader names none.
    model: String,
}

const JUDGE_INSTRUCTIONS: &str = "You grade an AI agent's answer to a task against a rubric. Judge only by the \
rubric; pass the answer when it meets every point of it. Give a one-sentence reason.";

impl troupe_eval::Judge for ModelJudge {
    fn judge<'a>(
        &'a self,
        model: Option<&'a str>,
        task: &'a str,
        answer: &'a str,
        rubric: &'a str,
    ) -> BoxFuture<'a, Result<(bool, String), String>> {
        async move {
            let catalog = troupe::tools::ToolCatalog::new();
            let workspace = troupe::tools::Workspace::new(std::env::temp_dir()).map_err(|e| e.to_string())?;
            let runner =
                troupe::runtime::Runner::new(Arc::new(self.providers.clone()), Arc::new(catalog), Arc::new(workspace));
            let mut spec = troupe::runtime::AgentSpec::new("judge", model.unwrap_or(&self.model));
            spec.instructions = JUDGE_INSTRUCTIONS.to_owned();
            spec.tools = Some(Vec::new());
            let agent = Agent::new(runner, spec);
            let prompt = format!("# Task\n{task}\n\n# Answer\n{answer}\n\n# Rubric\n{rubric}");
            let verdict = agent.run_typed::<JudgeVerdict>(prompt).await.map_err(|e| e.to_string())?;
            Ok((verdict.value.pass, verdict.value.reason))
        }
        .boxed()
    }
}

/// The built-in coding agent on a model, its calls allowed.
struct CodingAgent {
    model: String,
    providers: Providers,
    sandbox: SandboxChoice,
    judge: ModelJudge,
}

impl Subject for CodingAgent {
    fn name(&self) -> String {
        format!("the coding agent on {}", self.model)
    }

    fn judge(&self) -> Option<&dyn troupe_eval::Judge> {
        Some(&self.judge)
    }

    fn grader_sandbox(&self, workspace: &Path) -> troupe::tools::Sandbox {
        self.sandbox.for_agent(&Default::default(), workspace)
    }

    fn run<'a>(
        &'a self,
        workspace: &'a Path,
        input: &'a troupe_eval::CaseInput,
    ) -> futures::future::LocalBoxFuture<'a, Result<troupe_eval::Outcome, String>> {
        async move {
            let runner = setup::runner(workspace, self.providers.clone(), &self.sandbox).map_err(|e| e.to_string())?;
            let spec = setup::coding_spec(self.model.clone(), ApprovalPolicy::auto(), None, None);
            runner.validate(&spec).map_err(|e| e.to_string())?;
            troupe_eval::run_agent(&Agent::new(runner, spec), input).await
        }
        .boxed_local()
    }
}

/// An agent file, built afresh in each workspace, its calls allowed.
struct FileAgent {
    definition: AgentDefinition,
    config: ModelConfig,
    sandbox: SandboxChoice,
    judge: ModelJudge,
}

impl Subject for FileAgent {
    fn name(&self) -> String {
        format!("{} on {}", self.definition.path().display(), self.definition.model_id())
    }

    fn judge(&self) -> Option<&dyn troupe_eval::Judge> {
        Some(&self.judge)
    }

    fn grader_sandbox(&self, workspace: &Path) -> troupe::tools::Sandbox {
        self.sandbox.for_agent(&self.definition.sandbox, workspace)
    }

    fn run<'a>(
        &'a self,
        workspace: &'a Path,
        input: &'a troupe_eval::CaseInput,
    ) -> futures::future::LocalBoxFuture<'a, Result<troupe_eval::Outcome, String>> {
        async move {
            let built = build::build(AgentBuild {
                definition: &self.definition,
                workspace,
                config: &self.config,
                approvals: Approvals::Auto,
                extra_tools: Vec::new(),
                ceilings: Ceilings::default(),
                memory: None,
                mcp: None,
                sandbox: &self.sandbox,
            })
            .map_err(|e| e.to_string())?;
            troupe_eval::run_agent(&built.agent, input).await
        }
        .boxed_local()
    }
}

/// A team file, assembled afresh in each workspace, its calls allowed; every member's tool
/// calls count for `tool_call` graders.
struct TeamSubject {
    files: troupe_workers::team_run::TeamFiles,
    config: ModelConfig,
    sandbox: SandboxChoice,
    judge: ModelJudge,
}

impl Subject for TeamSubject {
    fn name(&self) -> String {
        format!("team `{}`", self.files.team().name())
    }

    fn judge(&self) -> Option<&dyn troupe_eval::Judge> {
        Some(&self.judge)
    }

    fn grader_sandbox(&self, workspace: &Path) -> troupe::tools::Sandbox {
        self.sandbox.for_agent(&Default::default(), workspace)
    }

    fn run<'a>(
        &'a self,
        workspace: &'a Path,
        input: &'a troupe_eval::CaseInput,
    ) -> futures::future::LocalBoxFuture<'a, Result<troupe_eval::Outcome, String>> {
        async move {
            if input.output.is_some() {
                return Err("a team's answer cannot be asked for in a shape: drop the case's output_schema".to_owned());
            }
            if !input.attachments.is_empty() {
                return Err("a team's task takes no attachments: put the files in the case's `files`, where its \
                            members can read them"
                    .to_owned());
            }
            let task = input.task.as_str();
            let started = std::time::Instant::now();
            let team = troupe_workers::team_run::TeamRun::new(&self.files, workspace)
                .config(self.config.clone())
                .approvals(Approvals::Auto)
                .sandbox(self.sandbox.clone())
                .memory(None)
                .prepare()
                .await
                .map_err(|e| e.to_string())?;
            let (events, mut received) = tokio::sync::mpsc::channel::<troupe::core::AgentEvent>(1024);
            let calls = tokio::spawn(async move {
                // Each call's arguments arrive in pieces after its start.
                let mut calls: Vec<(String, String, String)> = Vec::new();
                while let Some(event) = received.recv().await {
                    match event.kind {
                        troupe::core::AgentEventKind::ToolCallStart { call_id, tool, .. } => {
                            calls.push((call_id.to_string(), tool, String::new()));
                        }
                        troupe::core::AgentEventKind::ToolCallArgs { call_id, delta } => {
                            if let Some(call) = calls.iter_mut().rev().find(|c| c.0 == call_id.as_str()) {
                                call.2.push_str(&delta);
                            }
                        }
                        _ => {}
                    }
                }
                calls
            });
            let report = team.run(task, Some(events), troupe::prelude::CancellationToken::new()).await;
            let calls = calls.await.unwrap_or_default();
            let tool_calls = calls
                .into_iter()
                .map(|(_, tool, args)| (tool, serde_json::from_str(&args).unwrap_or(serde_json::Value::Null)))
                .collect();
            let failure = report.failure().map(|f| f.to_string());
            Ok(troupe_eval::Outcome {
                answer: failure.is_none().then(|| report.output.clone()),
                failure,
                tool_calls,
                cost_usd: report.cost_usd,
                tokens: report.tokens,
                duration: started.elapsed(),
            })
        }
        .boxed_local()
    }
}
