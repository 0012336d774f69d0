//! Context isolation: what every member of a team sees ([`SharedContext`]) and what one
//! role is told ([`SubagentBrief`]).
//!
//! A member never sees another member's transcript. It sees the shared context of the
//! project, its own brief, and the task it is given (which may carry earlier members'
//! results).

use serde::{Deserialize, Serialize};
use std::io;
use std::path::Path;
use troupe_runtime::AgentBuilder;

/// The files project rules are read from, in order of preference.
pub const RULES_FILES: [&str; 2] = ["AGENTS.md", "CLAUDE.md"];
/// The most bytes of a rules file kept; the rest is cut with a note.
pub const MAX_RULES_BYTES: usize = 16 * 1024;
/// The most entries of the workspace listing kept; the rest are counted.
pub const MAX_TREE_ENTRIES: usize = 200;
/// Directories left out of the workspace listing, besides hidden entries.
pub const SKIPPED_DIRS: [&str; 3] = [".git", "target", "node_modules"];

/// What every member of a team sees: the project's rules, the shape of the workspace and
/// the team's conventions.
///
/// ```
/// use troupe_team::SharedContext;
///
/// # fn main() -> std::io::Result<()> {
/// let dir = tempfile::tempdir()?;
/// std::fs::write(dir.path().join("AGENTS.md"), "Run `cargo test` before you finish.")?;
/// std::fs::create_dir(dir.path().join("src"))?;
/// let shared = SharedContext::from_workspace(dir.path())?.convention("Answer in English.");
/// let text = shared.render();
/// assert!(text.contains("Run `cargo test`") && text.contains("src/") && text.contains("- Answer in English."));
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SharedContext {
    /// The project's rules (`AGENTS.md`, else `CLAUDE.md`, at the workspace root), cut at
    /// [`MAX_RULES_BYTES`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rules: Option<String>,
    /// The workspace's top level, one entry a line, directories with a trailing `/`.
    pub tree: String,
    /// How the team works: one convention an entry.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub conventions: Vec<String>,
}

impl SharedContext {
    /// The shared context of the workspace at `root`: its rules file, if any, and its
    /// top-level listing (sorted, hidden entries and [`SKIPPED_DIRS`] left out, at most
    /// [`MAX_TREE_ENTRIES`]). Fails when `root` cannot be listed or a rules file that
    /// exists cannot be read.
    pub fn from_workspace(root: impl AsRef<Path>) -> io::Result<Self> {
        let root = root.as_ref();
        Ok(SharedContext { rules: read_rules(root)?, tree: list_top_level(root)?, conventions: Vec::new() })
    }

    /// The same context with one more convention.
    pub fn convention(mut self, convention: impl Into<String>) -> Self {
        self.conventions.push(convention.into());
        self
    }

    /// The same context with `rules` in place of those read.
    pub fn rules(mut self, rules: impl Into<String>) -> Self {
        self.rules = Some(rules.into());
        self
    }

    /// Whether there is nothing to tell.
    pub fn is_empty(&self) -> bool {
        self.rules.as_deref().is_none_or(|r| r.trim().is_empty())
            && self.tree.trim().is_empty()
            && self.conventions.is_empty()
    }

    /// The context as markdown sections (`## Project rules`, `## Workspace`,
    /// `## Conventions`); empty sections are left out.
    pub fn render(&self) -> String {
        let mut out = Sections::default();
        if let Some(rules) = self.rules.as_deref().filter(|r| !r.trim().is_empty()) {
            out.section("## Project rules", rules.trim());
        }
        if !self.tree.trim().is_empty() {
            out.section("## Workspace", &format!("Top level of the workspace:\n```\n{}\n```", self.tree.trim_end()));
        }
        out.list("## Conventions", &self.conventions);
        out.finish()
    }
}

fn read_rules(root: &Path) -> io::Result<Option<String>> {
    for name in RULES_FILES {
        let path = root.join(name);
        if !path.is_file() {
            continue;
        }
        let bytes = std::fs::read(&path)?;
        let cut = bytes.len() > MAX_RULES_BYTES;
        let kept = &bytes[..bytes.len().min(MAX_RULES_BYTES)];
        // Cutting may split a character: the lossy decoding turns its remains into one
        // replacement character rather than failing.
        let mut text = String::from_utf8_lossy(kept).into_owned();
        if cut {
            text.push_str(&format!("\n\n[{name} cut at {MAX_RULES_BYTES} bytes of {}]", bytes.len()));
        }
        return Ok(Some(text));
    }
    Ok(None)
}

fn list_top_level(root: &Path) -> io::Result<String> {
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(root)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || SKIPPED_DIRS.contains(&name.as_str()) {
            continue;
        }
        // A broken symlink or a racing deletion is listed as a file rather than failing.
        let is_dir = entry.file_type().map(|t| t.is_dir()).unwrap_or(false) || entry.path().is_dir();
        entries.push(if is_dir { format!("{name}/") } else { name });
    }
    entries.sort();
    let total = entries.len();
    entries.truncate(MAX_TREE_ENTRIES);
    if total > MAX_TREE_ENTRIES {
        entries.push(format!("... and {} more", total - MAX_TREE_ENTRIES));
    }
    Ok(entries.join("\n"))
}

/// What one role is told: its task, the context it needs, the tools it may use and the
/// output expected of it.
///
/// A brief is data (it reads from TOML or JSON; missing fields are empty) and renders into
/// the subagent's instructions ([`render_instructions`](SubagentBrief::render_instructions));
/// [`apply`](SubagentBrief::apply) also restricts the agent to its allowed tools.
///
/// ```
/// use troupe_team::SubagentBrief;
///
/// let brief: SubagentBrief = serde_json::from_value(serde_json::json!({
///     "role": "reviewer",
///     "task": {"description": "Review the diff.", "acceptance_criteria": ["every finding cites a line"]},
///     "allowed_tools": ["fs.read", "git.diff"],
///     "expected_output": {"format": "a markdown list"}
/// }))?;
/// let text = brief.render_instructions();
/// assert!(text.starts_with("# Role\n\nYou are the reviewer."));
/// assert!(text.contains("- every finding cites a line") && !text.contains("## Context"));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SubagentBrief {
    /// The role the subagent plays (`reviewer`, `test writer`).
    pub role: String,
    /// What it must do.
    pub task: BriefTask,
    /// What it needs to know.
    pub context: BriefContext,
    /// The catalog names of the only tools it may call; empty for none at all.
    pub allowed_tools: Vec<String>,
    /// What it must give back.
    pub expected_output: ExpectedOutput,
}

/// The task part of a [`SubagentBrief`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BriefTask {
    /// What to do.
    pub description: String,
    /// How to tell the task is done.
    pub acceptance_criteria: Vec<String>,
    /// What not to do, or limits to respect.
    pub constraints: Vec<String>,
}

/// The context part of a [`SubagentBrief`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BriefContext {
    /// Rules specific to the role.
    pub rules: Vec<String>,
    /// The files that matter for the task, workspace-relative.
    pub relevant_files: Vec<String>,
    /// Examples of good work or of the expected output.
    pub examples: Vec<String>,
}

/// The expected-output part of a [`SubagentBrief`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ExpectedOutput {
    /// The shape of the answer (`a unified diff`, `a JSON object with ...`).
    pub format: String,
    /// What the answer must include or produce.
    pub deliverables: Vec<String>,
}

impl SubagentBrief {
    /// A brief for `role` doing `description`.
    pub fn new(role: impl Into<String>, description: impl Into<String>) -> Self {
        SubagentBrief {
            role: role.into(),
            task: BriefTask { description: description.into(), ..BriefTask::default() },
            ..SubagentBrief::default()
        }
    }

    /// Adds an acceptance criterion.
    pub fn acceptance(mut self, criterion: impl Into<String>) -> Self {
        self.task.acceptance_criteria.push(criterion.into());
        self
    }

    /// Adds a constraint.
    pub fn constraint(mut self, constraint: impl Into<String>) -> Self {
        self.task.constraints.push(constraint.into());
        self
    }

    /// Adds a rule.
    pub fn rule(mut self, rule: impl Into<String>) -> Self {
        self.context.rules.push(rule.into());
        self
    }

    /// Adds a relevant file.
    pub fn relevant_file(mut self, path: impl Into<String>) -> Self {
        self.context.relevant_files.push(path.into());
        self
    }

    /// Adds an example.
    pub fn example(mut self, example: impl Into<String>) -> Self {
        self.context.examples.push(example.into());
        self
    }

    /// Allows one more tool.
    pub fn allow_tool(mut self, name: impl Into<String>) -> Self {
        self.allowed_tools.push(name.into());
        self
    }

    /// Sets the expected output format.
    pub fn output_format(mut self, format: impl Into<String>) -> Self {
        self.expected_output.format = format.into();
        self
    }

    /// Adds a deliverable.
    pub fn deliverable(mut self, deliverable: impl Into<String>) -> Self {
        self.expected_output.deliverables.push(deliverable.into());
        self
    }

    /// The brief as the subagent's instructions: markdown sections (`# Role`, `## Task`,
    /// `## Context`, `## Tools`, `## Expected output`), empty ones left out.
    pub fn render_instructions(&self) -> String {
        let mut out = Sections::default();
        if !self.role.trim().is_empty() {
            out.section("# Role", &format!("You are the {}.", self.role.trim()));
        }
        if !self.task.description.trim().is_empty() {
            out.section("## Task", self.task.description.trim());
        }
        out.list("### Acceptance criteria", &self.task.acceptance_criteria);
        out.list("### Constraints", &self.task.constraints);
        let context = &self.context;
        if !(is_blank(&context.rules) && is_blank(&context.relevant_files) && is_blank(&context.examples)) {
            out.heading("## Context");
            out.list("### Rules", &context.rules);
            let files: Vec<String> = context.relevant_files.iter().map(|f| format!("`{}`", f.trim())).collect();
            out.list("### Relevant files", &files);
            let examples: Vec<&String> = context.examples.iter().filter(|e| !e.trim().is_empty()).collect();
            if !examples.is_empty() {
                out.heading("### Examples");
                for example in examples {
                    out.paragraph(example.trim());
                }
            }
        }
        if !is_blank(&self.allowed_tools) {
            let tools: Vec<String> = self.allowed_tools.iter().map(|t| format!("`{}`", t.trim())).collect();
            out.section("## Tools", &format!("You may use only these tools: {}.", tools.join(", ")));
        }
        let expected = &self.expected_output;
        if !expected.format.trim().is_empty() || !is_blank(&expected.deliverables) {
            out.heading("## Expected output");
            if !expected.format.trim().is_empty() {
                out.paragraph(&format!("Format: {}", expected.format.trim()));
            }
            out.list("### Deliverables", &expected.deliverables);
        }
        out.finish()
    }

    /// `builder` with the brief as its instructions and its tools restricted to
    /// [`allowed_tools`](SubagentBrief::allowed_tools) (none when the list is empty).
    ///
    /// The builder's earlier instructions are replaced. An allowed tool the builder was
    /// not given is an error of [`AgentBuilder::build`], not a silent omission.
    pub fn apply(&self, builder: AgentBuilder) -> AgentBuilder {
        let tools: Vec<&str> = self.allowed_tools.iter().map(|t| t.trim()).filter(|t| !t.is_empty()).collect();
        builder.instructions(self.render_instructions()).only_tools(tools)
    }
}

fn is_blank(items: &[String]) -> bool {
    items.iter().all(|item| item.trim().is_empty())
}

/// Markdown sections separated by blank lines.
#[derive(Default)]
struct Sections {
    parts: Vec<String>,
}

impl Sections {
    fn heading(&mut self, heading: &str) {
        self.parts.push(heading.to_owned());
    }

    fn paragraph(&mut self, text: &str) {
        self.parts.push(text.to_owned());
    }

    fn section(&mut self, heading: &str, body: &str) {
        self.heading(heading);
        self.paragraph(body);
    }

    /// A bulleted list under `heading`; nothing when every item is blank.
    fn list(&mut self, heading: &str, items: &[impl AsRef<str>]) {
        let bullets: Vec<String> = items
            .iter()
            .map(|item| item.as_ref().trim())
            .filter(|item| !item.is_empty() && *item != "``")
            .map(|item| format!("- {item}"))
            .collect();
        if !bullets.is_empty() {
            self.section(heading, &bullets.join("\n"));
        }
    }

    fn finish(self) -> String {
        self.parts.join("\n\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_brief_renders_every_section_in_order() {
        let brief = SubagentBrief::new("test writer", "Write tests for the parser.")
            .acceptance("the tests fail on the old parser")
            .constraint("do not change src/")
            .rule("one behaviour per test")
            .relevant_file("src/parser.rs")
            .example("#[test]\nfn parses_empty_input() {}")
            .allow_tool("fs.read")
            .allow_tool("fs.write")
            .output_format("a unified diff")
            .deliverable("tests/parser.rs");
        let text = brief.render_instructions();
        let order = [
            "# Role\n\nYou are the test writer.",
            "## Task\n\nWrite tests for the parser.",
            "### Acceptance criteria\n\n- the tests fail on the old parser",
            "### Constraints\n\n- do not change src/",
            "## Context",
            "### Rules\n\n- one behaviour per test",
            "### Relevant files\n\n- `src/parser.rs`",
            "### Examples\n\n#[test]\nfn parses_empty_input() {}",
            "## Tools\n\nYou may use only these tools: `fs.read`, `fs.write`.",
            "## Expected output\n\nFormat: a unified diff",
            "### Deliverables\n\n- tests/parser.rs",
        ];
        let mut at = 0;
        for part in order {
            let found = text[at..].find(part).unwrap_or_else(|| panic!("`{part}` after byte {at} in:\n{text}"));
            at += found + part.len();
        }
    }

    #[test]
    fn empty_sections_are_left_out() {
        assert_eq!(SubagentBrief::default().render_instructions(), "");
        let brief = SubagentBrief { allowed_tools: vec![" ".into()], ..SubagentBrief::new("critic", "") };
        assert_eq!(brief.render_instructions(), "# Role\n\nYou are the critic.");
    }

    #[test]
    fn a_brief_reads_from_json_and_refuses_unknown_fields() {
        let brief: SubagentBrief =
            from_json(r#"{"role": "r", "task": {"constraints": ["c"]}, "context": {"relevant_files": ["a.rs"]}}"#)
                .expect("parses");
        assert_eq!(brief.task.constraints, ["c"]);
        assert_eq!(brief.context.relevant_files, ["a.rs"]);
        assert!(from_json(r#"{"role": "r", "tools": ["x"]}"#).is_err(), "a misspelt field is an error");
    }

    #[test]
    fn a_brief_reads_from_toml() {
        let brief: SubagentBrief = toml::from_str(
            r#"
            role = "reviewer"
            allowed_tools = ["fs.read"]

            [task]
            description = "Review the diff."
            acceptance_criteria = ["cites lines"]

            [expected_output]
            format = "a list"
            "#,
        )
        .expect("parses");
        assert_eq!(
            brief,
            SubagentBrief::new("reviewer", "Review the diff.")
                .acceptance("cites lines")
                .allow_tool("fs.read")
                .output_format("a list")
        );
    }

    fn from_json(json: &str) -> Result<SubagentBrief, serde_json::Error> {
        serde_json::from_str(json)
    }

    #[test]
    fn shared_context_reads_agents_md_before_claude_md_and_lists_the_top_level() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        std::fs::write(root.join("AGENTS.md"), "agents rules").expect("write");
        std::fs::write(root.join("CLAUDE.md"), "claude rules").expect("write");
        for d in ["src", "target", "node_modules", ".git", "docs"] {
            std::fs::create_dir(root.join(d)).expect("mkdir");
        }
        std::fs::write(root.join(".env"), "SECRET=1").expect("write");
        std::fs::write(root.join("Cargo.toml"), "").expect("write");
        let shared = SharedContext::from_workspace(root).expect("reads");
        assert_eq!(shared.rules.as_deref(), Some("agents rules"));
        assert_eq!(shared.tree, "AGENTS.md\nCLAUDE.md\nCargo.toml\ndocs/\nsrc/");
        std::fs::remove_file(root.join("AGENTS.md")).expect("rm");
        let fallback = SharedContext::from_workspace(root).expect("reads");
        assert_eq!(fallback.rules.as_deref(), Some("claude rules"));
    }

    #[test]
    fn shared_context_caps_rules_and_entries() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        std::fs::write(root.join("AGENTS.md"), "é".repeat(MAX_RULES_BYTES)).expect("write");
        for i in 0..MAX_TREE_ENTRIES + 5 {
            std::fs::write(root.join(format!("f{i:03}")), "").expect("write");
        }
        let shared = SharedContext::from_workspace(root).expect("reads");
        let rules = shared.rules.expect("rules");
        assert!(rules.ends_with(&format!("[AGENTS.md cut at {MAX_RULES_BYTES} bytes of {}]", 2 * MAX_RULES_BYTES)));
        let lines: Vec<&str> = shared.tree.lines().collect();
        assert_eq!(lines.len(), MAX_TREE_ENTRIES + 1);
        assert_eq!(lines.last().copied(), Some("... and 6 more"), "AGENTS.md and 205 files, 200 kept");
    }

    #[test]
    fn an_empty_workspace_renders_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let shared = SharedContext::from_workspace(dir.path()).expect("reads");
        assert!(shared.is_empty());
        assert_eq!(shared.render(), "");
        assert!(SharedContext::from_workspace(dir.path().join("missing")).is_err());
    }
}
