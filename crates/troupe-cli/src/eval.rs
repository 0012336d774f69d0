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
pub(crate) struct EvalArgs {
    /// The suite file.
    suite: PathBuf,
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

/// Runs `troupe eval`.
pub(crate) async fn eval(args: EvalArgs) -> Result<(), Failure> {
    let mut suite = Suite::load(&args.suite).map_err(|e| Failure::Usage(e.into()))?;
    if let Some(runs) = args.runs {
        suite.runs = runs;
    }
    let config = crate::load_config()?;
    let sandbox = args.sandbox.choice()?;
    let providers = crate::providers(&config)?;
    let subject: Arc<dyn Subject> = match &suite.agent {
        Some(file) => {
            let mut definition = build::load(file).map_err(|e| Failure::Usage(e.into()))?;
            if let Some(model) = args.model.clone().or_else(|| suite.model.clone()) {
                // A whole id: the file's provider name no longer applies.
                definition.provider.name = None;
                definition.provider.model = model;
            }
            let judge = ModelJudge { providers, model: definition.model_id() };
            Arc::new(FileAgent { definition, config, sandbox, judge })
        }
        None => {
            let model = args.model.clone().or_else(|| suite.model.clone()).unwrap_or_else(|| "demo".to_owned());
            let judge = ModelJudge { providers: providers.clone(), model: model.clone() };
            Arc::new(CodingAgent { model, providers, sandbox, judge })
        }
    };
    let report = troupe_eval::run_suite(&suite, subject).await;
    if let Some(path) = &args.html {
        std::fs::write(path, report.to_html())
            .map_err(|e| Failure::Run(anyhow!("cannot write the report to {}: {e}", path.display())))?;
        eprintln!("report: {}", path.display());
    }
    if args.json {
        println!("{}", serde_json::to_string(&report).map_err(|e| Failure::Run(e.into()))?);
    } else {
        print!("{}", table(&report));
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

    fn agent<'a>(&'a self, workspace: &'a Path) -> BoxFuture<'a, Result<Agent, String>> {
        async move {
            let runner = setup::runner(workspace, self.providers.clone(), &self.sandbox).map_err(|e| e.to_string())?;
            let spec = setup::coding_spec(self.model.clone(), ApprovalPolicy::auto(), None, None);
            runner.validate(&spec).map_err(|e| e.to_string())?;
            Ok(Agent::new(runner, spec))
        }
        .boxed()
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

    fn agent<'a>(&'a self, workspace: &'a Path) -> BoxFuture<'a, Result<Agent, String>> {
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
            Ok(built.agent)
        }
        .boxed()
    }
}
