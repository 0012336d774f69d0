//! Grading one run: each grader says pass or fail, and why.

use crate::suite::Grader;
use serde::Serialize;
use serde_json::Value;
use std::ffi::OsString;
use std::path::Path;
use std::process::Stdio;
use tokio::io::AsyncWriteExt;
use troupe_sandbox::Sandbox;

/// The variables a command grader gets from troupe's environment, when set there: what a
/// test runner needs to find its programs and toolchains. Nothing else (a provider's key
/// above all) reaches a command that runs what the agent wrote.
pub const GRADER_ENV: &[&str] = &["PATH", "HOME", "LANG", "CARGO_HOME", "RUSTUP_HOME"];

/// What a run produced, as the graders see it.
#[derive(Clone, Debug)]
pub struct Attempt {
    /// The task it was given.
    pub task: String,
    /// The final answer (empty when the run did not complete).
    pub answer: String,
    /// The tool calls it made: name and arguments, in order.
    pub tool_calls: Vec<(String, Value)>,
    /// Why it did not complete, when it did not.
    pub failure: Option<String>,
}

/// One grader's verdict.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Verdict {
    /// The grader's kind.
    pub grader: &'static str,
    /// Whether it passed.
    pub pass: bool,
    /// Why not, when it did not (or what it saw).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

impl Verdict {
    fn of(grader: &Grader, pass: bool, reason: impl Into<String>) -> Self {
        Verdict { grader: grader.kind(), pass, reason: if pass { String::new() } else { reason.into() } }
    }
}

/// A model that judges an answer against a rubric.
pub trait Judge: Send + Sync {
    /// Whether `answer` to `task` meets `rubric`, and why, by `model` (or the judge's own).
    fn judge<'a>(
        &'a self,
        model: Option<&'a str>,
        task: &'a str,
        answer: &'a str,
        rubric: &'a str,
    ) -> futures::future::BoxFuture<'a, Result<(bool, String), String>>;
}

/// Grades `attempt` by `grader`; a command grader runs in `workspace`, confined by
/// `sandbox`, a judge grader asks `judge`.
pub async fn grade(
    grader: &Grader,
    attempt: &Attempt,
    workspace: &Path,
    sandbox: &Sandbox,
    judge: Option<&dyn Judge>,
) -> Verdict {
    if let Some(failure) = &attempt.failure
        && !matches!(grader, Grader::ToolCall { .. } | Grader::Command { .. })
    {
        return Verdict::of(grader, false, format!("the run did not complete: {failure}"));
    }
    let answer = attempt.answer.trim();
    match grader {
        Grader::Exact(value) => {
            Verdict::of(grader, answer == value.trim(), format!("the answer is {:?}, not {:?}", short(answer), value))
        }
        Grader::Contains { value, ignore_case } => {
            let found = if *ignore_case {
                answer.to_lowercase().contains(&value.to_lowercase())
            } else {
                answer.contains(value.as_str())
            };
            Verdict::of(grader, found, format!("{value:?} is not in the answer {:?}", short(answer)))
        }
        Grader::Regex(pattern) => Verdict::of(
            grader,
            pattern.is_match(answer),
            format!("the answer {:?} does not match /{}/", short(answer), pattern.as_str()),
        ),
        Grader::JsonSchema(schema) => match serde_json::from_str::<Value>(answer) {
            Err(error) => Verdict::of(grader, false, format!("the answer is not JSON: {error}")),
            Ok(document) => match jsonschema::validator_for(schema) {
                Err(error) => Verdict::of(grader, false, format!("the schema is invalid: {error}")),
                Ok(validator) => {
                    let errors: Vec<String> = validator
                        .iter_errors(&document)
                        .take(3)
                        .map(|e| format!("{}: {e}", e.instance_path()))
                        .collect();
                    Verdict::of(grader, errors.is_empty(), errors.join("; "))
                }
            },
        },
        Grader::Equals(expected) => match serde_json::from_str::<Value>(answer) {
            Err(error) => Verdict::of(grader, false, format!("the answer is not JSON: {error}")),
            Ok(document) => Verdict::of(grader, &document == expected, format!("{document} is not {expected}")),
        },
        Grader::ToolCall { tool, arguments } => {
            let called = attempt
                .tool_calls
                .iter()
                .any(|(name, args)| name == tool && arguments.as_ref().is_none_or(|wanted| includes(args, wanted)));
            let made: Vec<&str> = attempt.tool_calls.iter().map(|(name, _)| name.as_str()).collect();
            let wanted = match arguments {
                Some(arguments) => format!("{tool} with {arguments}"),
                None => tool.clone(),
            };
            Verdict::of(grader, called, format!("no call of {wanted}; the calls were [{}]", made.join(", ")))
        }
        Grader::Command { run, timeout } => command(grader, run, *timeout, attempt, workspace, sandbox).await,
        Grader::Judge { rubric, model } => match judge {
            None => Verdict::of(grader, false, "no judge is configured"),
            Some(judge) => match judge.judge(model.as_deref(), &attempt.task, answer, rubric).await {
                Ok((pass, reason)) => Verdict { grader: grader.kind(), pass, reason },
                Err(error) => Verdict::of(grader, false, format!("the judge failed: {error}")),
            },
        },
    }
}

/// Whether `value` has every field of `wanted` (recursively for objects; equal otherwise).
fn includes(value: &Value, wanted: &Value) -> bool {
    match (value, wanted) {
        (Value::Object(have), Value::Object(want)) => {
            want.iter().all(|(key, w)| have.get(key).is_some_and(|h| includes(h, w)))
        }
        (have, want) => have == want,
    }
}

/// Runs the command grader: exit 0 within its time passes; the answer on stdin and in
/// `TROUPE_ANSWER`. It runs what the agent left in the workspace (its tests, its build
/// scripts), so it is confined as the agent's own commands are, with only [`GRADER_ENV`]
/// of troupe's environment.
async fn command(
    grader: &Grader,
    run: &str,
    timeout: std::time::Duration,
    attempt: &Attempt,
    workspace: &Path,
    sandbox: &Sandbox,
) -> Verdict {
    let mut command = tokio::process::Command::new("sh");
    command
        .arg("-c")
        .arg(run)
        .current_dir(workspace)
        .env_clear()
        .envs(GRADER_ENV.iter().filter_map(|name| std::env::var_os(name).map(|value| (OsString::from(name), value))))
        .env("TERM", "dumb")
        .env("TROUPE_ANSWER", &attempt.answer)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // Held to the end: a confined command's temporary directory goes with it.
    let mut confined = match sandbox.spawn(command, workspace).await {
        Ok(confined) => confined,
        Err(error) => return Verdict::of(grader, false, format!("`{run}` could not start: {error}")),
    };
    let child = &mut confined.child;
    let (stdin, stderr) = (child.stdin.take(), child.stderr.take());
    let output = async {
        let answer = async {
            if let Some(mut stdin) = stdin {
                // A command that does not read its input closes the pipe early; that is its right.
                let _ = stdin.write_all(attempt.answer.as_bytes()).await;
            }
        };
        let (_, stderr) = tokio::join!(answer, first_bytes(stderr, MAX_GRADER_STDERR));
        child.wait().await.map(|status| (status, stderr))
    };
    match tokio::time::timeout(timeout, output).await {
        Err(_) => Verdict::of(
            grader,
            false,
            format!("`{run}` did not finish within {}s and was stopped", timeout.as_secs_f64()),
        ),
        Ok(Err(error)) => Verdict::of(grader, false, format!("`{run}` failed: {error}")),
        Ok(Ok((status, stderr))) => {
            let stderr = String::from_utf8_lossy(&stderr);
            let code = status.code().map_or_else(|| "a signal".to_owned(), |c| c.to_string());
            Verdict::of(grader, status.success(), format!("`{run}` exited with {code}: {}", short(stderr.trim())))
        }
    }
}

/// The most of a command grader's stderr kept (its reason shows the first 120 characters).
const MAX_GRADER_STDERR: usize = 64 * 1024;

/// The first `limit` bytes `pipe` gives, read to its end so that its writer never waits.
async fn first_bytes(pipe: Option<tokio::process::ChildStderr>, limit: usize) -> Vec<u8> {
    let mut kept = Vec::new();
    let Some(mut pipe) = pipe else { return kept };
    let mut chunk = [0u8; 8192];
    while let Ok(read @ 1..) = tokio::io::AsyncReadExt::read(&mut pipe, &mut chunk).await {
        let room = limit.saturating_sub(kept.len());
        kept.extend_from_slice(&chunk[..read.min(room)]);
    }
    kept
}

/// The first 120 characters of `text`.
fn short(text: &str) -> String {
    let mut cut: String = text.chars().take(120).collect();
    if cut.len() < text.len() {
        cut.push('…');
    }
    cut
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::{Duration, Instant};
    use troupe_sandbox::SandboxMode;

    fn attempt(answer: &str) -> Attempt {
        Attempt {
            task: "t".to_owned(),
            answer: answer.to_owned(),
            tool_calls: vec![("fs.read".into(), json!({"path": "README.md", "limit": 5}))],
            failure: None,
        }
    }

    async fn check(grader: Grader, answer: &str) -> Verdict {
        grade(&grader, &attempt(answer), Path::new("."), &Sandbox::new(SandboxMode::Full), None).await
    }

    #[tokio::test]
    async fn each_grader_passes_and_fails_with_a_reason() {
        assert!(check(Grader::Exact("Paris".into()), " Paris\n").await.pass);
        assert!(!check(Grader::Exact("Paris".into()), "Lyon").await.pass);
        assert!(check(Grader::Contains { value: "paris".into(), ignore_case: true }, "It is Paris.").await.pass);
        assert!(!check(Grader::Contains { value: "paris".into(), ignore_case: false }, "It is Paris.").await.pass);
        assert!(check(Grader::Regex(regex::Regex::new(r"^\d+$").expect("re")), "42").await.pass);
        let schema = json!({"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}});
        assert!(check(Grader::JsonSchema(schema.clone()), r#"{"n": 3}"#).await.pass);
        let bad = check(Grader::JsonSchema(schema), r#"{"n": "x"}"#).await;
        assert!(!bad.pass && bad.reason.contains("/n"), "{bad:?}");
        assert!(check(Grader::Equals(json!({"n": 3})), r#"{"n":3}"#).await.pass);
        let read = Grader::ToolCall { tool: "fs.read".into(), arguments: Some(json!({"path": "README.md"})) };
        assert!(check(read, "").await.pass);
        let write = check(Grader::ToolCall { tool: "fs.write".into(), arguments: None }, "").await;
        assert_eq!(write.reason, "no call of fs.write; the calls were [fs.read]");
        let failed = Attempt { failure: Some("over budget".into()), ..attempt("") };
        let verdict = grade(&Grader::Exact(String::new()), &failed, Path::new("."), &Sandbox::default(), None).await;
        assert_eq!(verdict.reason, "the run did not complete: over budget");
    }

    #[tokio::test]
    async fn a_command_reads_the_answer_and_a_hanging_one_is_stopped() {
        let reads = Grader::Command {
            run: "grep -q Paris && test \"$TROUPE_ANSWER\" = Paris".into(),
            timeout: Duration::from_secs(5),
        };
        assert!(check(reads.clone(), "Paris").await.pass);
        let no = check(reads, "Lyon").await;
        assert!(!no.pass && no.reason.contains("exited with 1"), "{no:?}");
        let started = Instant::now();
        let hangs = check(Grader::Command { run: "sleep 30".into(), timeout: Duration::from_millis(300) }, "").await;
        assert!(!hangs.pass && hangs.reason.contains("did not finish within 0.3s"), "{hangs:?}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    /// A command grader runs what the agent left in the workspace: it is confined as the
    /// agent's commands are and gets none of troupe's environment but [`GRADER_ENV`].
    #[tokio::test]
    async fn a_command_grader_is_confined_and_gets_no_key() {
        let root = tempfile::tempdir().expect("a temporary directory");
        let (workspace, outside) = (root.path().join("workspace"), root.path().join("outside.txt"));
        std::fs::create_dir_all(&workspace).expect("the workspace");
        // Cargo sets these for every test it runs: troupe's environment holds them here.
        assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
        let run = format!(
            "test -z \"$CARGO_MANIFEST_DIR\" && test -n \"$PATH\" && echo kept > made.txt; echo out > {}; true",
            outside.display()
        );
        let grader = Grader::Command { run, timeout: Duration::from_secs(20) };
        let confined = Sandbox::new(SandboxMode::WorkspaceWrite);
        let verdict = grade(&grader, &attempt("42"), &workspace, &confined, None).await;
        assert!(verdict.pass, "{verdict:?}");
        assert!(workspace.join("made.txt").exists(), "the environment was scrubbed and the workspace written");
        assert!(!outside.exists(), "nothing is written outside the workspace");

        let flood =
            Grader::Command { run: "head -c 1000000 /dev/zero >&2; exit 3".into(), timeout: Duration::from_secs(20) };
        let verdict = grade(&flood, &attempt("42"), &workspace, &confined, None).await;
        assert!(
            !verdict.pass && verdict.reason.starts_with("`head -c 1000000 /dev/zero >&2; exit 3` exited with 3"),
            "{verdict:?}"
        );
    }
}
