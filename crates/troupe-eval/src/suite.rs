//! A suite file: its settings, its cases and their graders, read with every mistake named
//! at `file:line:column`.

use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;
use toml::Spanned;

/// A suite file that cannot be read or is not a valid suite. Displays as
/// `path:line:column: message`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct SuiteError {
    /// The file.
    pub path: PathBuf,
    /// The line and column (from 1), when the problem is at one place.
    pub at: Option<(usize, usize)>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for SuiteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.at {
            Some((line, column)) => write!(f, "{}:{line}:{column}: {}", self.path.display(), self.message),
            None => write!(f, "{}: {}", self.path.display(), self.message),
        }
    }
}

/// A suite: what runs, how often, and the cases.
#[derive(Clone, Debug)]
pub struct Suite {
    /// Its name (the file's stem unless `[suite] name` says otherwise).
    pub name: String,
    /// The directory of the file: relative paths in it are relative to this.
    pub dir: PathBuf,
    /// The agent file to evaluate, when the suite names one.
    pub agent: Option<PathBuf>,
    /// The team file to evaluate, when the suite names one (instead of an agent).
    pub team: Option<PathBuf>,
    /// The model, when the suite names one (`demo`, `openai/gpt-4o`).
    pub model: Option<String>,
    /// How many times each case runs.
    pub runs: u32,
    /// How many runs go at once.
    pub concurrency: usize,
    /// The most the whole suite may cost, in USD: no run starts once it is spent.
    pub budget_usd: Option<f64>,
    /// The overall pass rate below which the suite fails.
    pub threshold: Option<f64>,
    /// The model of `judge` graders that name none.
    pub judge_model: Option<String>,
    /// The cases.
    pub cases: Vec<Case>,
}

/// One case: a task, the files of its workspace, and what its answer must satisfy.
#[derive(Clone, Debug)]
pub struct Case {
    /// Its name, unique in the suite.
    pub name: String,
    /// The task.
    pub task: String,
    /// Files written into the case's throwaway workspace before each run (path → text).
    pub files: BTreeMap<String, String>,
    /// A typed answer to ask for (a JSON schema).
    pub output_schema: Option<Value>,
    /// Images and PDFs sent with the task (`attachments = ["chart.png"]`, files next to
    /// the suite), read and checked when the suite is.
    pub attachments: Vec<troupe_core::ContentBlock>,
    /// Every grader must pass for the run to pass.
    pub expect: Vec<Grader>,
}

/// A check of one run.
#[derive(Clone, Debug)]
pub enum Grader {
    /// The answer is exactly this text (whitespace around it ignored).
    Exact(String),
    /// The answer contains this text.
    Contains {
        /// The text.
        value: String,
        /// Whether case matters.
        ignore_case: bool,
    },
    /// The answer matches this regular expression.
    Regex(regex::Regex),
    /// The answer is a JSON document valid against this schema.
    JsonSchema(Value),
    /// The answer, read as JSON, equals this value (a typed answer's fields, say).
    Equals(Value),
    /// The run called this tool (with arguments that include these, when given).
    ToolCall {
        /// The tool's name (`fs.read`).
        tool: String,
        /// Arguments the call must have (a subset of its arguments).
        arguments: Option<Value>,
    },
    /// A command run in the case's workspace (the answer on its stdin and in
    /// `TROUPE_ANSWER`) passes the run when it exits 0 within its time.
    Command {
        /// The command, run by `sh -c`.
        run: String,
        /// How long it may take.
        timeout: Duration,
    },
    /// A model judges the answer against a rubric, answering in a typed verdict.
    Judge {
        /// What a passing answer does.
        rubric: String,
        /// The judge's model; the suite's `judge_model`, else the subject's, when absent.
        model: Option<String>,
    },
}

impl Grader {
    /// Its kind's name, as the suite file spells it.
    pub fn kind(&self) -> &'static str {
        match self {
            Grader::Exact(_) => "exact",
            Grader::Contains { .. } => "contains",
            Grader::Regex(_) => "regex",
            Grader::JsonSchema(_) => "json_schema",
            Grader::Equals(_) => "equals",
            Grader::ToolCall { .. } => "tool_call",
            Grader::Command { .. } => "command",
            Grader::Judge { .. } => "judge",
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    suite: RawSettings,
    #[serde(default, rename = "cases")]
    cases: Vec<RawCase>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawSettings {
    name: Option<String>,
    agent: Option<String>,
    team: Option<String>,
    model: Option<String>,
    runs: Option<Spanned<u32>>,
    concurrency: Option<Spanned<usize>>,
    budget_usd: Option<Spanned<f64>>,
    threshold: Option<Spanned<f64>>,
    judge_model: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCase {
    name: Spanned<String>,
    task: Spanned<String>,
    #[serde(default)]
    files: BTreeMap<String, String>,
    output_schema: Option<Spanned<Value>>,
    #[serde(default)]
    attachments: Vec<Spanned<String>>,
    #[serde(default)]
    expect: Vec<Spanned<RawGrader>>,
}

#[derive(Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
enum RawGrader {
    Exact {
        value: String,
    },
    Contains {
        value: String,
        #[serde(default)]
        ignore_case: bool,
    },
    Regex {
        pattern: String,
    },
    JsonSchema {
        schema: Value,
    },
    Equals {
        value: Value,
    },
    ToolCall {
        tool: String,
        arguments: Option<Value>,
    },
    Command {
        run: String,
        timeout_seconds: Option<f64>,
    },
    Judge {
        rubric: String,
        model: Option<String>,
    },
}

/// How long a command grader may take unless its case says otherwise.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

impl Suite {
    /// Reads the suite file at `path`.
    pub fn load(path: &Path) -> Result<Suite, SuiteError> {
        let text = std::fs::read_to_string(path).map_err(|e| SuiteError {
            path: path.to_owned(),
            at: None,
            message: format!("cannot read it: {e}"),
        })?;
        Suite::parse(path, &text)
    }

    /// Reads `text` as the suite file `path`.
    pub fn parse(path: &Path, text: &str) -> Result<Suite, SuiteError> {
        let error = |span: Option<Range<usize>>, message: String| SuiteError {
            path: path.to_owned(),
            at: span.map(|s| troupe_core::line_column(text, s.start)),
            message,
        };
        let raw: RawFile = toml::from_str(text).map_err(|e| error(e.span(), e.message().trim().replace('\n', "; ")))?;
        let settings = raw.suite;
        let settings_judge = settings.judge_model.clone();
        let runs = match settings.runs {
            Some(runs) if *runs.get_ref() == 0 => {
                return Err(error(Some(runs.span()), "`runs` must be at least 1".into()));
            }
            Some(runs) => runs.into_inner(),
            None => 1,
        };
        let concurrency = match settings.concurrency {
            Some(n) if *n.get_ref() == 0 => {
                return Err(error(Some(n.span()), "`concurrency` must be at least 1".into()));
            }
            Some(n) => n.into_inner(),
            None => 4,
        };
        let budget_usd = match settings.budget_usd {
            Some(usd) if !(usd.get_ref().is_finite() && *usd.get_ref() > 0.0) => {
                return Err(error(Some(usd.span()), "`budget_usd` must be a positive number of dollars".into()));
            }
            other => other.map(Spanned::into_inner),
        };
        let threshold = match settings.threshold {
            Some(t) if !(0.0..=1.0).contains(t.get_ref()) => {
                return Err(error(Some(t.span()), "`threshold` is a pass rate, from 0 to 1 (0.8 for 80%)".into()));
            }
            other => other.map(Spanned::into_inner),
        };
        if settings.agent.is_some() && settings.team.is_some() {
            return Err(error(None, "[suite] names an `agent` and a `team`; a suite evaluates one of them".into()));
        }
        if raw.cases.is_empty() {
            return Err(error(
                None,
                "the suite has no case: add `[[cases]]` with a `name`, a `task` and `[[cases.expect]]`".into(),
            ));
        }
        let dir = path.parent().map(Path::to_owned).unwrap_or_default();
        let mut cases: Vec<Case> = Vec::with_capacity(raw.cases.len());
        for case in raw.cases {
            let name_span = case.name.span();
            let name = case.name.into_inner();
            if name.trim().is_empty() {
                return Err(error(Some(name_span), "a case's `name` must not be empty".into()));
            }
            if cases.iter().any(|c| c.name == name) {
                return Err(error(Some(name_span), format!("two cases are named `{name}`; names must be unique")));
            }
            if case.task.get_ref().trim().is_empty() {
                return Err(error(Some(case.task.span()), format!("case `{name}`: the `task` is empty")));
            }
            if case.expect.is_empty() {
                return Err(error(Some(name_span), format!("case `{name}` expects nothing: add `[[cases.expect]]`")));
            }
            for file in case.files.keys() {
                let relative = Path::new(file);
                if relative.is_absolute() || relative.components().any(|c| matches!(c, std::path::Component::ParentDir))
                {
                    return Err(error(
                        Some(name_span.clone()),
                        format!("case `{name}`: file `{file}` must be a path inside the workspace"),
                    ));
                }
            }
            let mut attachments = Vec::with_capacity(case.attachments.len());
            for file in case.attachments {
                let span = file.span();
                let block = troupe_core::attachment::from_path(&dir.join(file.get_ref()))
                    .map_err(|e| error(Some(span), format!("case `{name}`: `attachments`: {e}")))?;
                attachments.push(block);
            }
            let output_schema = match case.output_schema {
                Some(schema) => {
                    let span = schema.span();
                    let schema = schema.into_inner();
                    jsonschema::validator_for(&schema).map_err(|e| {
                        error(Some(span), format!("case `{name}`: `output_schema` is not a valid JSON schema: {e}"))
                    })?;
                    Some(schema)
                }
                None => None,
            };
            let mut expect = Vec::new();
            for grader in case.expect {
                let span = grader.span();
                expect.push(match grader.into_inner() {
                    RawGrader::Exact { value } => Grader::Exact(value),
                    RawGrader::Contains { value, ignore_case } => Grader::Contains { value, ignore_case },
                    RawGrader::Regex { pattern } => Grader::Regex(regex::Regex::new(&pattern).map_err(|e| {
                        let at = value_of(text, &span, "pattern");
                        let why =
                            e.to_string().lines().last().unwrap_or_default().trim_start_matches("error: ").to_owned();
                        error(Some(at), format!("case `{name}`: the pattern is not a regular expression: {why}"))
                    })?),
                    RawGrader::JsonSchema { schema } => {
                        let at = value_of(text, &span, "schema");
                        jsonschema::validator_for(&schema)
                            .map_err(|e| error(Some(at), format!("case `{name}`: not a valid JSON schema: {e}")))?;
                        Grader::JsonSchema(schema)
                    }
                    RawGrader::Equals { value } => Grader::Equals(value),
                    RawGrader::ToolCall { tool, arguments } => {
                        if arguments.as_ref().is_some_and(|a| !a.is_object()) {
                            return Err(error(Some(span), format!("case `{name}`: `arguments` must be a table")));
                        }
                        Grader::ToolCall { tool, arguments }
                    }
                    RawGrader::Command { run, timeout_seconds } => {
                        let timeout = match timeout_seconds {
                            Some(s) if !(s.is_finite() && s > 0.0) => {
                                return Err(error(
                                    Some(value_of(text, &span, "timeout_seconds")),
                                    format!("case `{name}`: `timeout_seconds` must be a positive number"),
                                ));
                            }
                            Some(s) => Duration::try_from_secs_f64(s).map_err(|_| {
                                error(
                                    Some(value_of(text, &span, "timeout_seconds")),
                                    format!("case `{name}`: `timeout_seconds` is more time than a clock holds"),
                                )
                            })?,
                            None => DEFAULT_COMMAND_TIMEOUT,
                        };
                        Grader::Command { run, timeout }
                    }
                    RawGrader::Judge { rubric, model } => {
                        if rubric.trim().is_empty() {
                            return Err(error(Some(span), format!("case `{name}`: the judge's `rubric` is empty")));
                        }
                        Grader::Judge { rubric, model: model.or_else(|| settings_judge.clone()) }
                    }
                });
            }
            cases.push(Case {
                name,
                task: case.task.into_inner(),
                files: case.files,
                output_schema,
                attachments,
                expect,
            });
        }
        let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "suite".into());
        Ok(Suite {
            name: settings.name.unwrap_or(stem),
            agent: settings.agent.map(|a| dir.join(a)),
            team: settings.team.map(|t| dir.join(t)),
            dir,
            model: settings.model,
            runs,
            concurrency,
            budget_usd,
            threshold,
            judge_model: settings_judge,
            cases,
        })
    }
}

/// Where the value of `key` begins inside `span` of `text` (the span itself when the key is
/// not found): serde cannot keep spans inside a tagged table, so the key is looked for.
fn value_of(text: &str, span: &Range<usize>, key: &str) -> Range<usize> {
    // A table's span may cover its header only: look on to the next header.
    let rest = text.get(span.start..).unwrap_or_default();
    let header_end = rest.find('\n').map_or(rest.len(), |n| n + 1);
    let end = rest[header_end..].find("\n[").map_or(rest.len(), |n| header_end + n + 1).max(span.len().min(rest.len()));
    let Some(within) = text.get(span.start..span.start + end) else { return span.clone() };
    let mut from = 0;
    while let Some(found) = within[from..].find(key) {
        let at = from + found;
        let after = within[at + key.len()..].trim_start_matches([' ', '\t']);
        let line_start = within[..at].rfind('\n').map_or(0, |n| n + 1);
        if within[line_start..at].trim().is_empty()
            && let Some(value) = after.strip_prefix('=')
        {
            let value_at = within.len() - value.trim_start_matches([' ', '\t']).len();
            return span.start + value_at..span.start + end;
        }
        from = at + key.len();
    }
    span.clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Suite, SuiteError> {
        Suite::parse(Path::new("evals/s.toml"), text)
    }

    #[test]
    fn attachments_are_read_next_to_the_suite_and_checked_where_written() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("dot.png"), b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR").expect("writes");
        std::fs::write(dir.path().join("notes.txt"), "text").expect("writes");
        let path = dir.path().join("s.toml");
        let text = "[suite]\nmodel = \"demo\"\n\n[[cases]]\nname = \"a\"\ntask = \"What is it?\"\nattachments = [\"dot.png\"]\n\
                    [[cases.expect]]\nkind = \"contains\"\nvalue = \"dot\"\n";
        let suite = Suite::parse(&path, text).expect("valid");
        assert!(matches!(&suite.cases[0].attachments[..], [troupe_core::ContentBlock::Image { .. }]));
        let at = |file: &str| Suite::parse(&path, &text.replace("dot.png", file)).expect_err("invalid").to_string();
        let shown = path.display();
        let missing = at("none.png");
        assert!(missing.starts_with(&format!("{shown}:7:16: case `a`: `attachments`:")), "{missing}");
        assert!(at("notes.txt").contains("it is text"), "{}", at("notes.txt"));
    }

    #[test]
    fn a_suite_reads_with_its_defaults() {
        let suite = parse(
            "[suite]\nmodel = \"demo\"\nruns = 3\n\n[[cases]]\nname = \"a\"\ntask = \"go\"\nfiles = { \"x.txt\" = \"hi\" }\n\
             [[cases.expect]]\nkind = \"contains\"\nvalue = \"hi\"\nignore_case = true\n\
             [[cases.expect]]\nkind = \"command\"\nrun = \"true\"\n",
        )
        .expect("valid");
        assert_eq!((suite.name.as_str(), suite.runs, suite.concurrency), ("s", 3, 4));
        assert_eq!(suite.cases[0].files["x.txt"], "hi");
        assert_eq!(suite.cases[0].expect[0].kind(), "contains");
        assert!(
            matches!(suite.cases[0].expect[1], Grader::Command { timeout, .. } if timeout == DEFAULT_COMMAND_TIMEOUT)
        );
    }

    #[test]
    fn mistakes_are_named_at_their_place() {
        let case = |expect: &str| format!("[[cases]]\nname = \"a\"\ntask = \"go\"\n[[cases.expect]]\n{expect}\n");
        let cases = [
            (
                case("kind = \"regex\"\npattern = \"(\""),
                "evals/s.toml:6:11: case `a`: the pattern is not a regular expression",
            ),
            (
                case("kind = \"sounds_right\""),
                "evals/s.toml:5:8: unknown variant `sounds_right`, expected one of `exact`",
            ),
            (
                case("kind = \"command\"\nrun = \"x\"\ntimeout_seconds = -1"),
                "evals/s.toml:7:19: case `a`: `timeout_seconds` must be a positive number",
            ),
            (
                case("kind = \"command\"\nrun = \"x\"\ntimeout_seconds = 1e300"),
                "evals/s.toml:7:19: case `a`: `timeout_seconds` is more time than a clock holds",
            ),
            (
                "[suite]\nthreshold = 80\n".to_owned() + &case("kind = \"exact\"\nvalue = \"x\""),
                "evals/s.toml:2:13: `threshold` is a pass rate",
            ),
            ("[suite]\nrunz = 3\n".to_owned(), "evals/s.toml:2:1: unknown field `runz`"),
            (
                case("kind = \"exact\"\nvalue = \"x\"") + &case("kind = \"exact\"\nvalue = \"y\""),
                "evals/s.toml:8:8: two cases are named `a`",
            ),
            ("[[cases]]\nname = \"a\"\ntask = \"go\"\n".to_owned(), "evals/s.toml:2:8: case `a` expects nothing"),
        ];
        for (text, expected) in cases {
            let error = parse(&text).expect_err("invalid").to_string();
            assert!(error.starts_with(expected), "{error}\n  wanted: {expected}\n{text}");
        }
    }
}
