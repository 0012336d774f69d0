//! Agent files: parsing, validation errors with their locations, templates, the shipped
//! examples, and discovery in config directories.

use std::path::{Path, PathBuf};
use troupe_workers::definition::{
    AgentDefinition, ApiKey, DefinitionError, ExecutionMode, Location, MemoryBackend, ReportFormat, TEMPLATES,
};
use troupe_workers::registry::{AgentRegistry, DiscoveryProblem};

const FULL: &str = r#"[agent]
id = "coder"
name = "Coder"
version = "1.2.0"
description = "Writes code."

[agent.execution]
mode = "subprocess"
command = "/opt/troupe/bin/troupe"
args = ["agent", "run", "--worker", "--agent-file", "{agent_file}", "--id={agent_id}"]
working_dir = "sub/{agent_id}"

[agent.execution.env]
TROUPE_CONFIG = "{config_dir}/troupe.toml"
JSON = '{"a": 1}'

[provider]
name = "anthropic"
model = "claude-sonnet-4-5"
api_key = "sk-ant-very-secret"
temperature = 0.5
max_tokens = 2048

[[tools]]
name = "fs.read"

[[tools]]
name = "shell"
enabled = false

[[tools]]
name = "github/create_issue"

[[tools.deny]]
name = "fs.write"
reason = "no edits"

[system]
prompt = "You write code."

[memory]
backend = "isolated"
category = "code"

[reporting]
mode = "ipc"
format = "both"
timeout_seconds = 30

[retry]
max_attempts = 3
backoff_ms = 250
"#;

/// The minimal valid file, with `extra` appended to `[provider]`'s table or after it.
fn minimal(extra: &str) -> String {
    format!("[agent]\nid = \"a\"\nname = \"A\"\n\n[provider]\nmodel = \"demo\"\n{extra}")
}

fn error_of(text: &str) -> DefinitionError {
    AgentDefinition::parse(text, "agents/coder.toml").expect_err("the file is invalid")
}

fn at(line: usize, column: usize) -> Option<Location> {
    Some(Location { line, column })
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../troupe-testkit/fixtures/agents")
}

#[test]
fn a_full_file_parses_and_round_trips() {
    let definition = AgentDefinition::parse(FULL, "agents/coder.toml").expect("valid");
    assert_eq!(definition.id(), "coder");
    assert_eq!(definition.agent.version.as_deref(), Some("1.2.0"));
    assert_eq!(definition.agent.execution.mode, ExecutionMode::Subprocess);
    assert_eq!(definition.provider.api_key.as_ref().map(ApiKey::expose), Some("sk-ant-very-secret"));
    assert_eq!(definition.model_id(), "anthropic/claude-sonnet-4-5");
    assert_eq!(definition.memory.backend, MemoryBackend::Isolated);
    assert_eq!(definition.reporting.format, ReportFormat::Both);
    assert_eq!((definition.retry.max_attempts, definition.retry.backoff_ms), (3, 250));

    let text = definition.to_toml().expect("serializes");
    let back = AgentDefinition::parse(&text, "agents/coder.toml").expect("its own output is valid");
    assert_eq!(back, definition, "{text}");

    let spec = definition.to_spec();
    assert_eq!(spec.name, "coder");
    assert_eq!(spec.instructions, "You write code.");
    assert_eq!(spec.model, "anthropic/claude-sonnet-4-5");
    assert_eq!(spec.tools, Some(vec!["fs.read".to_owned(), "github/create_issue".to_owned()]));
    assert_eq!(spec.limits.max_output_tokens, Some(2048));
    assert_eq!(spec.temperature, Some(0.5), "[provider] temperature reaches every request");
    assert_eq!(spec.approval.rules.len(), 1, "the denied tool is a deny rule too");

    let policy = definition.tool_policy();
    assert!(policy.check("fs.read").is_ok());
    assert!(policy.check("fs.write").expect_err("denied").contains("no edits"));
    assert!(policy.check("shell").is_err(), "listed but disabled");
}

#[test]
fn templates_are_rendered_into_the_command_line() {
    let definition = AgentDefinition::parse(FULL, "/cfg/agents/coder.toml").expect("valid");
    let run = definition.render_templates(Path::new("/w"), Path::new("/cfg"));
    assert_eq!(run.command.as_deref(), Some("/opt/troupe/bin/troupe"));
    assert_eq!(run.args, ["agent", "run", "--worker", "--agent-file", "/cfg/agents/coder.toml", "--id=coder"]);
    assert_eq!(run.working_dir, PathBuf::from("/w/sub/coder"));
    assert_eq!(run.env["TROUPE_CONFIG"], "/cfg/troupe.toml");
    assert_eq!(run.env["JSON"], r#"{"a": 1}"#, "braces that are no placeholder are kept");

    let defaults = AgentDefinition::parse(&minimal(""), "/cfg/agents/a.toml").expect("valid");
    let run = defaults.render_templates(Path::new("/w"), Path::new("/cfg"));
    assert_eq!(run.command, None, "the caller runs the current troupe binary");
    assert!(run.program().is_ok());
    assert_eq!(run.args, ["agent", "run", "--worker", "--agent-file", "/cfg/agents/a.toml"]);
    assert_eq!(run.working_dir, PathBuf::from("/w"));
    let spec = defaults.to_spec();
    assert_eq!((spec.model.as_str(), spec.tools), ("demo", None), "no tools listed: every tool");
}

#[test]
fn an_unknown_key_is_named_at_its_line_and_column_with_the_keys_expected() {
    let text = "[agent]\nid = \"coder\"\nname = \"Coder\"\n\n[provider]\nname = \"anthropic\"\n  modle = \"x\"\n";
    let error = error_of(text);
    assert_eq!(error.location, at(7, 3));
    assert_eq!(
        error.to_string(),
        "agents/coder.toml:7:3: unknown key `modle` in [provider]; \
         expected one of name, model, api_key, temperature, max_tokens, prompt_cache"
    );

    let nested = error_of(&minimal("[agent.execution]\ncomand = \"x\"\n"));
    assert!(nested.message.starts_with("unknown key `comand` in [agent.execution]; expected one of mode, command"));

    let in_tools = error_of(&minimal("[[tools]]\nname = \"fs.read\"\nenable = true\n"));
    assert_eq!(in_tools.location, at(9, 1));
    assert_eq!(in_tools.message, "unknown key `enable` in [[tools]]; expected one of name, enabled, deny");

    let top = error_of(&minimal("[sytem]\nprompt = \"x\"\n"));
    assert!(top.message.starts_with("unknown key `sytem` in the top level; expected one of agent, provider"), "{top}");
}

#[test]
fn the_prompt_cache_is_the_agent_files_choice() {
    let spec = |extra: &str| AgentDefinition::parse(&minimal(extra), "agents/a.toml").expect("valid").to_spec();
    assert_eq!(spec("").prompt_cache, Some(troupe_core::CacheTtl::Short), "the default");
    assert_eq!(spec("prompt_cache = \"long\"\n").prompt_cache, Some(troupe_core::CacheTtl::Long));
    assert_eq!(spec("prompt_cache = \"off\"\n").prompt_cache, None);
}

#[test]
fn bad_values_are_explained_where_they_are_written() {
    let cases = [
        (
            "temperature = 5\n",
            (7, 15),
            "`temperature` in [provider]: 5 is out of range; the temperature is a number from 0 to 2",
        ),
        ("[reporting]\ntimeout_seconds = 0\n", (8, 19), "`timeout_seconds` in [reporting]: 0 seconds would time out"),
        ("[retry]\nmax_attempts = 0\n", (8, 16), "`max_attempts` in [retry]: 0 attempts would never run the task"),
        (
            "[reporting]\nformat = \"xml\"\n",
            (8, 10),
            "`format` in [reporting] cannot be \"xml\"; expected one of json, markdown, both",
        ),
        (
            "[memory]\nbackend = \"global\"\n",
            (8, 11),
            "`backend` in [memory] cannot be \"global\"; expected one of shared, isolated",
        ),
        (
            "max_tokens = \"many\"\n",
            (7, 14),
            "`max_tokens` in [provider]: invalid type: string \"many\", expected a whole number",
        ),
        ("api_key = \"\"\n", (7, 11), "`api_key` in [provider]: is empty; remove `api_key` to inherit"),
        (
            "prompt_cache = \"forever\"\n",
            (7, 16),
            "`prompt_cache` in [provider] cannot be \"forever\"; expected one of short, long, off",
        ),
    ];
    for (extra, (line, column), expected) in cases {
        let error = error_of(&minimal(extra));
        assert!(error.message.starts_with(expected), "{extra:?}: {error}");
        assert_eq!(error.location, at(line, column), "{extra:?}: {error}");
    }
    assert_eq!(error_of("").to_string(), "agents/coder.toml:1:1: missing the [agent] table");
    assert!(error_of("[agent]\nid = \"a\"\nname = \"A\"\n").message.contains("missing the [provider] table"));
    let missing = error_of("[agent]\nid = \"a\"\n\n[provider]\nmodel = \"demo\"\n");
    assert!(missing.message.contains("missing key `name` in [agent]"), "{missing}");
    let bad_id = error_of(&minimal("").replace("id = \"a\"", "id = \"a b\""));
    assert!(bad_id.message.contains("is not an agent id"), "{bad_id}");
    assert_eq!(bad_id.location, at(2, 6));
}

#[test]
fn wasm_and_docker_are_refused_as_unavailable_here() {
    for (mode, why) in [("wasm", "WebAssembly runtime"), ("docker", "container workers")] {
        let error = error_of(&minimal(&format!("[agent.execution]\nmode = \"{mode}\"\n")));
        assert!(error.message.contains(&format!("{mode} execution is not available on this host")), "{error}");
        assert!(error.message.contains(why) && error.message.contains("use mode = \"subprocess\""), "{error}");
        assert_eq!(error.location, at(8, 8));
    }
}

#[test]
fn an_unknown_placeholder_is_refused() {
    let error = error_of(&minimal("[agent.execution]\nargs = [\"run\", \"--model={model}\"]\n"));
    assert_eq!(error.location, at(8, 25), "points at the placeholder");
    assert!(error.message.starts_with("`args` in [agent.execution]: unknown placeholder `{model}`"), "{error}");
    assert!(error.message.contains("{agent_id}, {workspace}, {config_dir}, {agent_file}"), "{error}");
    let env = error_of(&minimal("[agent.execution.env]\nHOME = \"{home}\"\n"));
    assert!(env.message.contains("unknown placeholder `{home}`"), "{env}");
}

#[test]
fn an_unknown_tool_is_refused_with_the_known_ones_listed() {
    let error = error_of(&minimal("[[tools]]\nname = \"fs.raed\"\n"));
    assert_eq!(error.location, at(8, 8));
    assert!(
        error.message.starts_with("`name` in [[tools]]: unknown tool `fs.raed`; known tools are fs.read"),
        "{error}"
    );
    assert!(error.message.contains("memory.save, memory.search, delegate"), "{error}");
    let denied = error_of(&minimal("[[tools.deny]]\nname = \"rm\"\n"));
    assert!(denied.message.contains("unknown tool `rm`"), "{denied}");
    let twice = error_of(&minimal("[[tools]]\nname = \"grep\"\n[[tools]]\nname = \"grep\"\n"));
    assert_eq!(twice.location, at(10, 8));
    assert!(twice.message.contains("tool `grep` is listed twice in [[tools]]"), "{twice}");
    let denied_twice = error_of(&minimal(
        "[[tools]]\nname = \"grep\"\n[[tools.deny]]\nname = \"shell\"\n[[tools.deny]]\nname = \"shell\"\n",
    ));
    assert_eq!(denied_twice.location, at(12, 8));
    assert!(denied_twice.message.contains("tool `shell` is listed twice in [[tools.deny]]"), "{denied_twice}");
    AgentDefinition::parse(&minimal("[[tools]]\nname = \"shell\"\n[[tools.deny]]\nname = \"shell\"\n"), "a.toml")
        .expect("allowed and denied: denied wins");
}

#[test]
fn the_lazy_mcp_tools_can_be_named() {
    let text = minimal("[[tools]]\nname = \"mcp_search_tools\"\n[[tools]]\nname = \"mcp_call_tool\"\n");
    let definition = AgentDefinition::parse(&text, "a.toml").expect("the lazy tools are known names");
    assert_eq!(definition.to_spec().tools, Some(vec!["mcp_search_tools".to_owned(), "mcp_call_tool".to_owned()]));
    let error = error_of(&minimal("[[tools]]\nname = \"mcp_search\"\n"));
    assert!(error.message.contains("mcp_search_tools, mcp_call_tool"), "the known ones are listed: {error}");
}

#[test]
fn the_table_spelling_of_tools_is_accepted() {
    let text = minimal("[tools]\n[[tools.allow]]\nname = \"fs.read\"\n[[tools.deny]]\nname = \"shell\"\n");
    let definition = AgentDefinition::parse(&text, "a.toml").expect("valid");
    assert_eq!(definition.to_spec().tools, Some(vec!["fs.read".to_owned()]));
    assert!(definition.tool_policy().check("shell").is_err());
}

#[test]
fn the_api_key_is_never_in_debug_output() {
    let definition = AgentDefinition::parse(FULL, "agents/coder.toml").expect("valid");
    for text in [format!("{definition:?}"), format!("{definition:#?}"), format!("{:?}", definition.provider)] {
        assert!(!text.contains("sk-ant-very-secret"), "{text}");
        assert!(text.contains("<redacted>"), "{text}");
    }
}

#[test]
fn every_template_validates_and_each_shipped_example_is_its_template() {
    let mut names = Vec::new();
    for template in TEMPLATES {
        let id = template.name;
        let text = AgentDefinition::template(id, &title(id), Some(id)).expect("the template is valid");
        let definition = AgentDefinition::parse(&text, format!("{id}.toml")).expect("valid");
        assert_eq!(definition.model_id(), "demo");
        assert!(!definition.system.prompt.is_empty());
        let tools = definition.to_spec().tools.expect("templates list their tools");
        for tool in &tools {
            assert!(definition.tool_policy().check(tool).is_ok());
        }
        let path = fixtures().join(format!("{id}.toml"));
        if std::env::var_os("TROUPE_UPDATE_FIXTURES").is_some() {
            std::fs::create_dir_all(fixtures()).expect("fixtures directory");
            std::fs::write(&path, &text).expect("writes the fixture");
        }
        let shipped = std::fs::read_to_string(&path).expect("the example ships (TROUPE_UPDATE_FIXTURES=1 writes it)");
        assert_eq!(shipped, text, "{} differs from its template", path.display());
        AgentDefinition::load(&path).expect("the shipped file validates");
        names.push((id, tools));
    }
    let tools_of = |id: &str| names.iter().find(|(n, _)| *n == id).map(|(_, t)| t.clone()).expect("template");
    assert!(tools_of("researcher").contains(&"web.search".to_owned()));
    assert!(!tools_of("researcher").iter().any(|t| t == "fs.write" || t == "shell"), "read-only");
    assert!(tools_of("coder").contains(&"fs.edit".to_owned()) && tools_of("coder").contains(&"git.diff".to_owned()));
    assert!(tools_of("tester").contains(&"shell".to_owned()) && !tools_of("tester").contains(&"fs.write".to_owned()));
    assert!(
        tools_of("reviewer").contains(&"git.diff".to_owned()) && !tools_of("reviewer").contains(&"shell".to_owned())
    );
    assert_eq!(tools_of("summarizer"), ["fs.read", "fs.list"]);

    let blank = AgentDefinition::template("helper", "Helper", None).expect("blank template");
    AgentDefinition::parse(&blank, "helper.toml").expect("valid");
    let unknown = AgentDefinition::template("x", "X", Some("poet")).expect_err("no such template");
    assert!(unknown.message.contains("researcher, coder, tester, reviewer, summarizer"), "{unknown}");
    let bad_id = AgentDefinition::template("no spaces", "X", Some("coder")).expect_err("bad id");
    assert!(bad_id.message.contains("is not an agent id"), "{bad_id}");
    let quoted = AgentDefinition::template("q", "The \"Q\" agent", Some("coder")).expect("names are quoted");
    let parsed = AgentDefinition::parse(&quoted, "q.toml").expect("valid");
    assert_eq!(parsed.agent.name, "The \"Q\" agent");
}

fn title(id: &str) -> String {
    let mut chars = id.chars();
    chars.next().map(|c| c.to_uppercase().chain(chars).collect()).unwrap_or_default()
}

fn write(root: &Path, relative: &str, text: &str) -> PathBuf {
    let path = root.join(relative);
    std::fs::create_dir_all(path.parent().expect("has a parent")).expect("creates directories");
    std::fs::write(&path, text).expect("writes");
    path
}

fn agent(id: &str) -> String {
    format!("[agent]\nid = \"{id}\"\nname = \"{id}\"\ndescription = \"the {id}\"\n\n[provider]\nmodel = \"demo\"\n")
}

#[test]
fn discovery_reads_agents_then_agents_d_in_path_order_across_directories() {
    let project = tempfile::tempdir().expect("tempdir");
    let user = tempfile::tempdir().expect("tempdir");
    write(project.path(), "agents/b.toml", &agent("b"));
    write(project.path(), "agents/a.toml", &agent("a"));
    write(project.path(), "agents/notes.md", "not an agent");
    write(project.path(), "agents/.#a.toml", "editor lock file");
    write(project.path(), "agents/deeper/ignored.toml", "agents/ is not searched recursively");
    write(project.path(), "agents.d/team/z/deep.toml", &agent("deep"));
    write(project.path(), "agents.d/team/c.toml", &agent("c"));
    write(project.path(), "agents.d/0.toml", &agent("zero"));
    write(user.path(), "agents/user.toml", &agent("user"));

    let dirs = [project.path().to_owned(), PathBuf::from("/nonexistent/troupe"), user.path().to_owned()];
    let registry = AgentRegistry::discover(&dirs).expect("all valid");
    let ids: Vec<String> = registry.list().into_iter().map(|s| s.id).collect();
    assert_eq!(ids, ["a", "b", "zero", "c", "deep", "user"]);
    assert_eq!(registry.len(), 6);
    assert_eq!(registry.path_of("deep"), Some(project.path().join("agents.d/team/z/deep.toml").as_path()));
    assert_eq!(registry.get("user").map(|d| d.agent.description.as_str()), Some("the user"));
    let user_agent = registry.entry("user").expect("found");
    assert_eq!(user_agent.config_dir, user.path());
    let run = user_agent.execution(Path::new("/w"));
    assert_eq!(run.args.last().map(PathBuf::from), Some(user.path().join("agents/user.toml")));
    assert!(registry.get("nobody").is_none());
    let summary = &registry.list()[0];
    assert_eq!((summary.name.as_str(), summary.version.as_deref()), ("a", None));

    let twice = AgentRegistry::discover(&[project.path().to_owned(), project.path().to_owned()]).expect("read once");
    assert_eq!(twice.len(), 5);
    assert!(AgentRegistry::discover(&[]).expect("nothing").is_empty());
}

#[test]
fn duplicate_ids_are_refused_naming_both_files() {
    let project = tempfile::tempdir().expect("tempdir");
    let user = tempfile::tempdir().expect("tempdir");
    let first = write(project.path(), "agents/coder.toml", &agent("coder"));
    let second = write(user.path(), "agents.d/mine/coder.toml", &agent("coder"));
    let error = AgentRegistry::discover(&[project.path().to_owned(), user.path().to_owned()]).expect_err("duplicate");
    assert_eq!(error.problems.len(), 1);
    let text = error.problems[0].to_string();
    assert!(text.contains(&format!("{}:2:6", second.display())), "{text}");
    assert!(text.contains(&format!("already defined at {}:2:6", first.display())), "{text}");
    assert!(text.contains("duplicate agent id `coder`"), "{text}");
    assert!(matches!(&error.problems[0], DiscoveryProblem::DuplicateId { id, .. } if id == "coder"));
}

#[test]
fn every_broken_file_is_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "agents/good.toml", &agent("good"));
    write(dir.path(), "agents/bad-key.toml", &format!("{}modle = \"x\"\n", agent("k")));
    write(dir.path(), "agents/bad-syntax.toml", "[agent\nid = ");
    write(dir.path(), "agents.d/bad-mode.toml", &format!("{}[agent.execution]\nmode = \"wasm\"\n", agent("m")));
    write(dir.path(), "agents.d/dup.toml", &agent("good"));
    let error = AgentRegistry::discover(&[dir.path().to_owned()]).expect_err("broken files");
    let lines: Vec<String> = error.problems.iter().map(ToString::to_string).collect();
    assert_eq!(lines.len(), 4, "{lines:#?}");
    assert!(lines[0].contains("bad-key.toml:8:1: unknown key `modle`"), "{lines:#?}");
    assert!(lines[1].contains("bad-syntax.toml:1:"), "{lines:#?}");
    assert!(
        lines[2].contains("bad-mode.toml:9:8: `mode` in [agent.execution]: wasm execution is not available"),
        "{lines:#?}"
    );
    assert!(lines[3].contains("duplicate agent id `good`"), "{lines:#?}");
    let all = error.to_string();
    assert!(all.starts_with("4 problems in the agent definitions:"), "{all}");
}

#[test]
fn mcp_servers_are_read_and_their_mistakes_located() {
    let text = minimal(
        "\n[[mcp.servers]]\nname = \"github\"\ncommand = \"npx\"\nargs = [\"-y\", \"server-github\"]\n\
         env = { GITHUB_TOKEN = \"${GITHUB_TOKEN}\" }\n\n[[mcp.servers]]\nname = \"search\"\n\
         url = \"https://mcp.example.com/mcp\"\ntools = \"lazy\"\n",
    );
    let definition = AgentDefinition::parse(&text, "agents/coder.toml").expect("valid");
    let names: Vec<&str> = definition.mcp.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["github", "search"]);
    assert_eq!(definition.mcp.servers[1].tools, troupe_mcp::ToolLoading::Lazy);
    let back = AgentDefinition::parse(&definition.to_toml().expect("serializes"), "agents/coder.toml").expect("valid");
    assert_eq!(back.mcp, definition.mcp, "round-trips");

    let typo = error_of(&minimal("[[mcp.servers]]\nname = \"x\"\ncomand = \"y\"\n"));
    assert_eq!(typo.location, at(9, 1));
    assert!(
        typo.message.starts_with("unknown key `comand` in [[mcp.servers]]; expected one of name, transport, command"),
        "{typo}"
    );
    let bad_name = error_of(&minimal("[[mcp.servers]]\nname = \"a/b\"\ncommand = \"y\"\n"));
    assert_eq!(bad_name.location, at(8, 8));
    assert!(bad_name.message.contains("is not a server name"), "{bad_name}");
    let both = error_of(&minimal("[[mcp.servers]]\nname = \"a\"\ncommand = \"y\"\nurl = \"http://h/mcp\"\n"));
    assert!(both.message.contains("has both `command` (stdio) and `url` (http)"), "{both}");
    assert_eq!(both.location, at(7, 1), "the entry's table: {both}");
    let twice = error_of(&minimal(
        "[[mcp.servers]]\nname = \"a\"\ncommand = \"y\"\n[[mcp.servers]]\nname = \"a\"\ncommand = \"z\"\n",
    ));
    assert_eq!(twice.location, at(11, 8));
    assert!(twice.message.contains("configured twice"), "{twice}");
    let section = error_of(&minimal("[mcp]\nserver = []\n"));
    assert!(section.message.starts_with("unknown key `server` in [mcp]; expected servers"), "{section}");
}

#[test]
fn output_schemas_are_read_in_place_or_from_a_file_and_their_mistakes_located() {
    // In place, as TOML.
    let inline = minimal(
        "\n[output]\nname = \"Verdict\"\nmax_corrections = 1\n[output.schema]\ntype = \"object\"\nrequired = [\"approved\"]\nproperties.approved.type = \"boolean\"\n",
    );
    let spec = AgentDefinition::parse(&inline, "agents/a.toml").expect("parses").to_spec();
    let output = spec.output.expect("an output spec");
    assert_eq!((output.schema.name.as_str(), output.max_corrections), ("Verdict", 1));
    assert_eq!(output.schema.schema["properties"]["approved"]["type"], "boolean");
    assert!(output.check(r#"{"approved": true}"#).is_ok() && output.check(r#"{"approved": "yes"}"#).is_err());

    // From a file next to the agent file.
    let dir = tempfile::tempdir().expect("a directory");
    let schema = r#"{"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}"#;
    write(dir.path(), "agents/schemas/n.json", schema);
    let file = write(dir.path(), "agents/a.toml", &minimal("\n[output]\nschema_file = \"schemas/n.json\"\n"));
    let spec = AgentDefinition::load(&file).expect("loads").to_spec();
    let output = spec.output.expect("an output spec");
    assert_eq!(output.schema.name, "Output");
    assert_eq!(output.schema.schema["required"], serde_json::json!(["n"]));

    // Mistakes, where they are written.
    let cases = [
        ("\n[output]\nname = \"X\"\n", (9, 8), "[output] needs `schema` (in place) or `schema_file` (a JSON file)"),
        (
            "\n[output]\nschema_file = \"s.json\"\nschema = { type = \"object\" }\n",
            (9, 15),
            "[output] takes `schema` or `schema_file`, not both",
        ),
        ("\n[output]\nschema_file = \"missing.json\"\n", (9, 15), "cannot read the schema file"),
        ("\n[output]\nschema = { type = \"string\" }\n", (9, 10), "must describe a JSON object"),
        ("\n[output]\nname = \"a verdict\"\nschema = { type = \"object\" }\n", (10, 10), "has a name vendors refuse"),
        (
            "\n[output]\nschema = { type = \"object\" }\nmax_corection = 1\n",
            (10, 1),
            "unknown key `max_corection` in [output]",
        ),
    ];
    for (extra, (line, column), message) in cases {
        let error = error_of(&minimal(extra));
        assert_eq!(error.location, at(line, column), "{extra}: {error}");
        assert!(error.message.contains(message), "{extra}: {error}");
    }
    write(dir.path(), "agents/bad.json", "{ not json");
    let broken = write(dir.path(), "agents/b.toml", &minimal("\n[output]\nschema_file = \"bad.json\"\n"));
    let error = AgentDefinition::load(&broken).expect_err("bad JSON");
    assert!(error.message.contains("is not JSON"), "{error}");
    assert_eq!(error.location, at(9, 15));
}
