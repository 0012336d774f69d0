//! [`AgentDefinition`]: an agent written as a TOML file.
//!
//! ```toml
//! [agent]
//! id = "coder"                          # unique; letters, digits, - and _
//! name = "Coder"
//! version = "0.1.0"                     # optional
//! description = "Writes and fixes code." # optional
//!
//! [agent.execution]                     # optional; these are the defaults
//! mode = "subprocess"                   # wasm and docker: not available on this host
//! # command = "/usr/local/bin/troupe"   # default: the running troupe binary
//! args = ["agent", "run", "--worker", "--agent-file", "{agent_file}"]
//! working_dir = "{workspace}"           # relative paths are relative to the workspace
//!
//! [agent.execution.env]
//! RUST_LOG = "info"
//!
//! [provider]
//! name = "anthropic"                    # optional when model is `provider/model` or `demo`
//! model = "claude-sonnet-4-5"
//! # api_key = "..."                     # absent: inherited
//! temperature = 0.2                     # 0 to 2
//! max_tokens = 4096
//! prompt_cache = "short"                # short (default) | long | off
//!
//! [[tools]]
//! name = "fs.read"
//!
//! [[tools]]
//! name = "shell"
//! enabled = false
//!
//! [[tools.deny]]
//! name = "fs.write"
//! reason = "reviewers do not edit"
//!
//! [system]
//! prompt = "You review diffs."
//!
//! [[mcp.servers]]                       # MCP servers whose tools the agent gets
//! name = "github"                       # its tools are `github/<tool>`
//! command = "npx"                       # stdio; or `url = "https://…/mcp"` (streamable HTTP)
//! args = ["-y", "@modelcontextprotocol/server-github"]
//! env = { GITHUB_TOKEN = "${GITHUB_TOKEN}" }
//! tools = "eager"                       # eager | lazy (mcp_search_tools + mcp_call_tool)
//!
//! [memory]
//! backend = "shared"                    # shared | isolated
//! category = "reviews"
//!
//! [reporting]
//! mode = "ipc"
//! format = "json"                       # json | markdown | both
//! timeout_seconds = 600
//!
//! [retry]
//! max_attempts = 2                      # 1 = no retry
//! backoff_ms = 1000
//!
//! [output]                              # optional: runs end with a typed answer
//! name = "Verdict"
//! schema_file = "schemas/verdict.json"  # or `[output.schema]` written in place
//! ```
//!
//! Only `[agent]` (`id`, `name`) and `[provider]` (`model`) are required. Every table
//! refuses keys it does not know, and every error names the file, line and column, what
//! is wrong and what is accepted:
//!
//! ```text
//! agents/coder.toml:7:1: unknown key `modle` in [provider]; expected one of name, model, api_key, temperature, max_tokens, prompt_cache
//! ```
//!
//! See [`tools`](ToolsSection) for the two spellings of the tool lists, [`OutputSection`]
//! for `[output]`, and
//! [`McpServerConfig`](troupe_mcp::McpServerConfig) for every key of `[[mcp.servers]]`.

mod error;
mod names;
mod output;
mod placeholders;
mod sections;
mod templates;
mod tools;

pub use error::{DefinitionError, Location};
pub use names::{BUILTIN_TOOLS, COORDINATOR_TOOLS, MAX_ID_LEN, is_known_tool};
pub use output::OutputSection;
pub use placeholders::PLACEHOLDERS;
pub use sections::{
    AgentSection, ApiKey, DEFAULT_REPORT_TIMEOUT_SECONDS, Execution, ExecutionMode, MemoryBackend, MemorySection,
    PromptCache, ProviderSection, ReportFormat, ReportingMode, ReportingSection, RetrySection, SystemSection,
    default_args,
};
pub use templates::{TEMPLATES, Template};
pub use tools::{DenyEntry, ToolEntry, ToolsSection};
use troupe_tools::ToolPolicy;

pub(crate) use error::value_location;

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use troupe_mcp::McpSection;
use troupe_runtime::{AgentSpec, ApprovalPolicy, ApprovalRule, OutputSpec};
use troupe_sandbox::SandboxSettings;

/// An agent file: who the agent is, how its worker runs, its model, tools, prompt,
/// memory, reporting and retries.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentDefinition {
    /// `[agent]`.
    pub agent: AgentSection,
    /// `[provider]`.
    pub provider: ProviderSection,
    /// `[[tools]]` and `[[tools.deny]]`.
    #[serde(default, skip_serializing_if = "ToolsSection::is_empty")]
    pub tools: ToolsSection,
    /// `[[mcp.servers]]`: the MCP servers whose tools the agent is given.
    #[serde(default, skip_serializing_if = "McpSection::is_empty")]
    pub mcp: McpSection,
    /// `[system]`.
    #[serde(default)]
    pub system: SystemSection,
    /// `[memory]`.
    #[serde(default)]
    pub memory: MemorySection,
    /// `[reporting]`.
    #[serde(default)]
    pub reporting: ReportingSection,
    /// `[retry]`.
    #[serde(default)]
    pub retry: RetrySection,
    /// `[sandbox]`: how the commands its tools run are confined, over `troupe.toml`'s.
    #[serde(default, skip_serializing_if = "SandboxSettings::is_empty")]
    pub sandbox: SandboxSettings,
    /// `[output]`: the typed answer its runs end with.
    #[serde(default, skip_serializing_if = "OutputSection::is_empty")]
    pub output: OutputSection,
    /// The file it was read from (`{agent_file}`).
    #[serde(skip)]
    source: PathBuf,
    /// `[output]` read and checked.
    #[serde(skip)]
    output_spec: Option<OutputSpec>,
}

/// How to start an agent's worker, placeholders filled in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedExecution {
    /// The program; `None` for the running `troupe` binary ([`program`](Self::program)).
    pub command: Option<String>,
    /// The arguments.
    pub args: Vec<String>,
    /// The directory to start in.
    pub working_dir: PathBuf,
    /// Variables to set on top of the inherited environment.
    pub env: BTreeMap<String, String>,
}

impl ResolvedExecution {
    /// The program to run: `command`, or the running executable.
    pub fn program(&self) -> std::io::Result<PathBuf> {
        match &self.command {
            Some(command) => Ok(PathBuf::from(command)),
            None => std::env::current_exe(),
        }
    }
}

impl AgentDefinition {
    /// Parses and validates the text of the agent file `path` (used in errors and as
    /// `{agent_file}`; not read).
    ///
    /// ```
    /// use troupe_workers::definition::AgentDefinition;
    ///
    /// let text = "[agent]\nid = \"coder\"\nname = \"Coder\"\n\n[provider]\nmodel = \"demo\"\n\n[[tools]]\nname = \"fs.read\"\n";
    /// let coder = AgentDefinition::parse(text, "agents/coder.toml")?;
    /// assert_eq!(coder.to_spec().tools, Some(vec!["fs.read".to_owned()]));
    ///
    /// let typo = AgentDefinition::parse(&text.replace("model", "modle"), "agents/coder.toml").unwrap_err();
    /// assert_eq!(
    ///     typo.to_string(),
    ///     "agents/coder.toml:6:1: unknown key `modle` in [provider]; \
    ///      expected one of name, model, api_key, temperature, max_tokens, prompt_cache"
    /// );
    /// # Ok::<(), troupe_workers::definition::DefinitionError>(())
    /// ```
    pub fn parse(text: &str, path: impl AsRef<Path>) -> Result<Self, DefinitionError> {
        let path = path.as_ref();
        let mut definition: AgentDefinition =
            toml::from_str(text).map_err(|e| DefinitionError::from_toml(path, text, &e))?;
        definition.source = path.to_owned();
        definition.check_tool_duplicates(text)?;
        definition.check_mcp_duplicates(text)?;
        definition.output_spec = definition.output.spec(path, text)?;
        Ok(definition)
    }

    /// Reads, parses and validates the agent file at `path`.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, DefinitionError> {
        let path = path.as_ref();
        let text =
            std::fs::read_to_string(path).map_err(|e| DefinitionError::new(path, format!("cannot read it: {e}")))?;
        Self::parse(&text, path)
    }

    /// The file the definition was read from.
    pub fn path(&self) -> &Path {
        &self.source
    }

    /// The agent's id.
    pub fn id(&self) -> &str {
        &self.agent.id
    }

    /// The typed answer its runs end with (`[output]`, read and checked), if any.
    pub fn output_spec(&self) -> Option<&OutputSpec> {
        self.output_spec.as_ref()
    }

    /// The model id the runtime resolves: `provider/model`, or `model` as written.
    pub fn model_id(&self) -> String {
        self.provider.model_id()
    }

    /// The TOML text of the definition, `api_key` included (comments are not kept; tools
    /// are written in the `[tools]` table spelling).
    pub fn to_toml(&self) -> Result<String, toml::ser::Error> {
        toml::to_string(self)
    }

    /// The text of a new agent file for `troupe agent create --id ID --name NAME [--from
    /// TEMPLATE]`: one of the [`TEMPLATES`], or a blank agent with read-only tools. The
    /// text is validated before it is returned, so a bad `id` is refused here.
    pub fn template(id: &str, name: &str, from: Option<&str>) -> Result<String, DefinitionError> {
        let path = PathBuf::from(format!("agents/{id}.toml"));
        // Checked before rendering: the id is also written into a comment, where a line
        // break would garble the file rather than be reported.
        names::check_agent_id(id).map_err(|e| DefinitionError::new(&path, e))?;
        let template = match from {
            Some(wanted) => Some(templates::find(wanted).ok_or_else(|| {
                let known: Vec<&str> = TEMPLATES.iter().map(|t| t.name).collect();
                DefinitionError::new(&path, format!("no template `{wanted}`; the templates are {}", known.join(", ")))
            })?),
            None => None,
        };
        let text = templates::render(id, name, template);
        Self::parse(&text, &path)?;
        Ok(text)
    }

    /// The tools the agent may and may not call.
    pub fn tool_policy(&self) -> ToolPolicy {
        self.tools.policy()
    }

    /// The runtime spec: `name` is the id, `instructions` the system prompt, `model` the
    /// [`model_id`](Self::model_id), `tools` the enabled tools minus the denied ones (`None`
    /// when the file lists none), `limits.max_output_tokens` the provider's `max_tokens`.
    /// Denied tools also become deny rules of the approval policy, so they stay refused
    /// when every tool is allowed.
    pub fn to_spec(&self) -> AgentSpec {
        let mut spec = AgentSpec::new(&self.agent.id, self.model_id()).instructions(self.system.prompt.clone());
        spec.tools = self.tools.enabled();
        spec.limits.max_output_tokens = self.provider.max_tokens;
        spec.temperature = self.provider.temperature;
        if let Some(cache) = self.provider.prompt_cache {
            spec.prompt_cache = cache.ttl();
        }
        spec.output.clone_from(&self.output_spec);
        spec.approval = self
            .tools
            .deny
            .iter()
            .fold(ApprovalPolicy::default(), |policy, deny| policy.rule(ApprovalRule::deny(deny.name.clone())));
        spec
    }

    /// `[agent.execution]` with `{agent_id}`, `{workspace}`, `{config_dir}` and
    /// `{agent_file}` filled in. A relative `working_dir` is taken from `workspace`;
    /// without one the worker starts in `workspace`. Paths that are not UTF-8 are filled in
    /// lossily.
    pub fn render_templates(&self, workspace: &Path, config_dir: &Path) -> ResolvedExecution {
        let value = |name: &str| -> Option<String> {
            match name {
                "agent_id" => Some(self.agent.id.clone()),
                "workspace" => Some(workspace.to_string_lossy().into_owned()),
                "config_dir" => Some(config_dir.to_string_lossy().into_owned()),
                "agent_file" => Some(self.source.to_string_lossy().into_owned()),
                _ => None,
            }
        };
        let execution = &self.agent.execution;
        let render = |text: &str| placeholders::render(text, &value);
        ResolvedExecution {
            command: execution.command.as_deref().map(render),
            args: execution.args.iter().map(|a| render(a)).collect(),
            working_dir: match &execution.working_dir {
                Some(dir) => workspace.join(render(dir)),
                None => workspace.to_owned(),
            },
            env: execution.env.iter().map(|(k, v)| (k.clone(), render(v))).collect(),
        }
    }

    /// Refuses an MCP server configured twice, pointing at the second entry's name.
    fn check_mcp_duplicates(&self, text: &str) -> Result<(), DefinitionError> {
        let Some((twice, _)) = self.mcp.duplicate() else {
            return Ok(());
        };
        let location = error::string_values_of(text, "servers", "name")
            .iter()
            .filter(|(name, _)| name == twice)
            .nth(1)
            .map(|(_, span)| Location::of_offset(text, span.start));
        Err(DefinitionError::at(
            &self.source,
            location,
            format!("the MCP server `{twice}` is configured twice in [[mcp.servers]]; keep one entry"),
        ))
    }

    /// Refuses a tool listed twice in `[[tools]]` or in `[[tools.deny]]`, pointing at the
    /// second mention.
    fn check_tool_duplicates(&self, text: &str) -> Result<(), DefinitionError> {
        // Where the names are written: deny entries are the `name`s under a `deny` key
        // (nested in `[[tools]]` or in `[tools]`), the others are the allowed ones.
        let denied = error::string_values_of(text, "deny", "name");
        let allowed: Vec<_> =
            error::string_values_of(text, "tools", "name").into_iter().filter(|v| !denied.contains(v)).collect();
        let lists = [
            ("[[tools]]", self.tools.allow.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), allowed),
            ("[[tools.deny]]", self.tools.deny.iter().map(|t| t.name.as_str()).collect(), denied),
        ];
        for (list, names, written) in lists {
            let mut seen = BTreeSet::new();
            if let Some(twice) = names.into_iter().find(|name| !seen.insert(*name)) {
                let location = written
                    .iter()
                    .filter(|(name, _)| name == twice)
                    .nth(1)
                    .map(|(_, span)| Location::of_offset(text, span.start));
                return Err(DefinitionError::at(
                    &self.source,
                    location,
                    format!("tool `{twice}` is listed twice in {list}; keep one entry"),
                ));
            }
        }
        Ok(())
    }
}
