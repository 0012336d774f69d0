//! The agent files `troupe agent create --id ID --name NAME [--from TEMPLATE]` writes.

/// A built-in starting point for an agent file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Template {
    /// The name `--from` takes.
    pub name: &'static str,
    /// What agents made from it do.
    pub description: &'static str,
    /// The tools it lists.
    pub tools: &'static [&'static str],
    /// Tools it denies, with why.
    pub deny: &'static [(&'static str, &'static str)],
    /// Its system prompt.
    pub prompt: &'static str,
    /// `[reporting] format`.
    pub format: &'static str,
    /// `[retry] max_attempts`.
    pub max_attempts: u32,
    /// `[provider] temperature`.
    pub temperature: &'static str,
}

const READ: [&str; 4] = ["fs.read", "fs.list", "fs.glob", "grep"];

/// The built-in templates.
pub const TEMPLATES: [Template; 5] = [
    Template {
        name: "researcher",
        description: "Finds and summarizes information from the workspace and the web; changes nothing.",
        tools: &[READ[0], READ[1], READ[2], READ[3], "web.fetch", "web.search"],
        deny: &[],
        prompt: "You are a researcher. Answer the question you are given by reading the workspace and the web.
Cite every source you rely on (a file path or a URL). Say plainly what you could not find or verify.
You cannot change files; report your findings instead.",
        format: "markdown",
        max_attempts: 2,
        temperature: "0.3",
    },
    Template {
        name: "coder",
        description: "Writes and fixes code in the workspace.",
        tools: &["fs.read", "fs.write", "fs.edit", "fs.list", "fs.glob", "grep", "shell", "git.status", "git.diff"],
        deny: &[],
        prompt: "You are a careful software engineer. Make the change you are asked for with the smallest diff
that does it well. Read the surrounding code first and follow its conventions. Build and run the
tests before you report; report what you changed, how you checked it, and anything left undone.",
        format: "json",
        max_attempts: 1,
        temperature: "0.2",
    },
    Template {
        name: "tester",
        description: "Runs the tests and reports what fails and why; does not edit files.",
        tools: &[READ[0], READ[1], READ[2], READ[3], "shell"],
        deny: &[("fs.write", "testers report failures, they do not fix them"), ("fs.edit", "testers do not edit")],
        prompt: "You are a tester. Run the project's tests and checks with the shell. For each failure, report
the command, the failing test, the relevant output, and your best reading of the cause with the
file and line. Do not edit files. Report passing runs briefly.",
        format: "json",
        max_attempts: 2,
        temperature: "0.1",
    },
    Template {
        name: "reviewer",
        description: "Reviews changes for bugs, risks and style; comments, never edits.",
        tools: &[READ[0], READ[1], READ[2], READ[3], "git.status", "git.diff"],
        deny: &[
            ("shell", "reviews read code, they do not run it"),
            ("fs.write", "reviewers comment, they do not edit"),
        ],
        prompt: "You are a code reviewer. Read the diff and the code around it. Report bugs, risks, missing
tests and unclear code, most serious first, each with the file and line and a concrete suggestion.
Say so when the change looks right. Do not rewrite the change yourself.",
        format: "both",
        max_attempts: 1,
        temperature: "0.2",
    },
    Template {
        name: "summarizer",
        description: "Summarizes files for a reader in a hurry.",
        tools: &["fs.read", "fs.list"],
        deny: &[],
        prompt: "You are a summarizer. Read the files you are pointed at and write a short, accurate summary:
what they are for, the main parts, and anything surprising. Quote names exactly. Never invent
details that are not in the files.",
        format: "markdown",
        max_attempts: 1,
        temperature: "0.3",
    },
];

/// The template `--from` is absent: read-only tools and a prompt to replace.
const BLANK: Template = Template {
    name: "blank",
    description: "",
    tools: &READ,
    deny: &[],
    prompt: "Describe here what this agent does, how it works, and what it reports.",
    format: "json",
    max_attempts: 1,
    temperature: "0.2",
};

/// The template called `name`.
pub fn find(name: &str) -> Option<&'static Template> {
    TEMPLATES.iter().find(|t| t.name == name)
}

/// `text` as a TOML basic string.
fn quoted(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}

/// The agent file for `id` and `name` from `template` (or the blank one).
pub(crate) fn render(id: &str, name: &str, template: Option<&Template>) -> String {
    let t = template.unwrap_or(&BLANK);
    let description = if t.description.is_empty() { format!("What {name} does.") } else { t.description.to_owned() };
    let mut out = format!(
        "# The agent `{raw_id}`. troupe finds it in agents/*.toml or agents.d/**/*.toml under ./.troupe/ or
# ~/.config/troupe/; no registration needed.

[agent]
id = {id}
name = {name}
version = \"0.1.0\"
description = {description}

[agent.execution]
mode = \"subprocess\"
# command = \"/path/to/troupe\"  # default: the running troupe binary
# args = [\"agent\", \"run\", \"--worker\", \"--agent-file\", \"{{agent_file}}\"]
# working_dir = \"{{workspace}}\"  # placeholders: {{agent_id}} {{workspace}} {{config_dir}} {{agent_file}}

[agent.execution.env]
# RUST_LOG = \"info\"

[provider]
# name = \"anthropic\"  # with model = \"claude-sonnet-4-5\"; `demo` needs no provider
model = \"demo\"
# api_key = \"...\"  # absent: inherited from the coordinator
temperature = {temperature}
max_tokens = 4096
",
        raw_id = id,
        id = quoted(id),
        name = quoted(name),
        description = quoted(&description),
        temperature = t.temperature,
    );
    for tool in t.tools {
        out.push_str(&format!("\n[[tools]]\nname = {}\n", quoted(tool)));
    }
    for (tool, reason) in t.deny {
        out.push_str(&format!("\n[[tools.deny]]\nname = {}\nreason = {}\n", quoted(tool), quoted(reason)));
    }
    out.push_str(&format!(
        "
[system]
prompt = \"\"\"
{prompt}
\"\"\"

[memory]
backend = \"shared\"  # or \"isolated\"
category = {id}

[reporting]
mode = \"ipc\"
format = \"{format}\"  # json | markdown | both
timeout_seconds = 600

[retry]
max_attempts = {attempts}
backoff_ms = 1000
",
        prompt = t.prompt,
        id = quoted(id),
        format = t.format,
        attempts = t.max_attempts,
    ));
    out
}
