//! An agent file's `[memory]` is real: what one run saves with `memory.save`, a later run
//! (a new process) finds with `memory.search`, through the workspace's store.

use serde_json::json;
use std::process::Command;
use troupe_testkit::{MockLlmServer, MockTurn};

const KEEPER: &str = r#"[agent]
id = "keeper"
name = "Keeper"

[provider]
name = "anthropic"
model = "claude-sonnet-4-5"

[[tools]]
name = "memory.save"

[[tools]]
name = "memory.search"

[system]
prompt = "You remember what you are told."

[memory]
backend = "isolated"
"#;

#[test]
fn a_memory_saved_by_one_run_is_found_by_the_next() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    let server = runtime.block_on(MockLlmServer::start()).expect("the mock server starts");
    server.push(MockTurn::tool_call("toolu_1", "memory_save", json!({"content": "The API listens on port 8787"})));
    server.push(MockTurn::text("Noted."));
    server.push(MockTurn::tool_call("toolu_2", "memory_search", json!({"query": "port"})));
    server.push(MockTurn::text("Port 8787."));
    let dir = tempfile::tempdir().expect("a temp dir");
    let workspace = dir.path().join("ws");
    std::fs::create_dir(&workspace).expect("a workspace");
    let file = dir.path().join("keeper.toml");
    std::fs::write(&file, KEEPER).expect("the agent file");
    let run = |prompt: &str| {
        Command::new(env!("CARGO_BIN_EXE_troupe"))
            .args(["agent", "run", "--agent-file", file.to_str().expect("UTF-8"), "--prompt", prompt])
            .args(["-w", workspace.to_str().expect("UTF-8"), "--approve", "auto"])
            .current_dir(dir.path())
            .env_clear()
            .env("ANTHROPIC_API_KEY", "sk-ant-fake")
            .env("ANTHROPIC_BASE_URL", server.url())
            .env("XDG_DATA_HOME", dir.path().join("data"))
            .output()
            .expect("the binary runs")
    };
    let first = run("Remember the API port.");
    assert_eq!(first.status.code(), Some(0), "{}", String::from_utf8_lossy(&first.stderr));
    let second = run("Which port does the API use?");
    assert_eq!(second.status.code(), Some(0), "{}", String::from_utf8_lossy(&second.stderr));
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    let tools = requests[0].body["tools"].to_string();
    assert!(tools.contains("memory_save") && tools.contains("memory_search"), "{tools}");
    let found = requests[3].body["messages"].to_string();
    assert!(found.contains("tool_result") && found.contains("The API listens on port 8787"), "{found}");
    let stores = std::fs::read_dir(dir.path().join("data/troupe/workspaces")).expect("the workspaces' stores");
    let stores: Vec<_> = stores.flatten().map(|e| e.path().join("troupe.db")).filter(|p| p.is_file()).collect();
    assert_eq!(stores.len(), 1, "memories live in the workspace's store, outside it");
    assert!(!workspace.join(".troupe").exists());
}
