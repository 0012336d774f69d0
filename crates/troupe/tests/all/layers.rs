//! The workspace's crates are layered, and none depends upward: a crate may use the crates
//! of the layers below its own, never one of its own layer or above. Read from each
//! crate's `Cargo.toml` (its `[dependencies]`; tests may use anything), so a dependency
//! that breaks the layering fails here.

use std::collections::BTreeMap;
use std::path::Path;

/// The layers, lowest first.
const LAYERS: &[&[&str]] = &[
    // The VFS the SQLite store's writer opens its connection with: SQLite's alone.
    &["troupe-sqlite-wal"],
    // What everything shares: the types, the store, the tool macro.
    &["troupe-core", "troupe-store", "troupe-macros"],
    // Models, the sandbox, telemetry.
    &["troupe-model", "troupe-sandbox", "troupe-telemetry"],
    // Tools (run in the sandbox), the test kit (mock models).
    &["troupe-tools", "troupe-testkit"],
    // A run's protocol, without I/O.
    &["troupe-run"],
    // The runner: the shell that performs a run's effects and records it.
    &["troupe-runtime"],
    // Above the runner: stored runs (queue, schedules, leases, replays), evals, MCP.
    &["troupe-durable", "troupe-replay", "troupe-eval", "troupe-mcp"],
    // Teams.
    &["troupe-team"],
    // Protocols between teams: A2A's shapes and its client (a remote agent as a member).
    &["troupe-a2a"],
    // Agent and team files, worker processes, serving.
    &["troupe-workers", "troupe-server"],
    // The facade, then the binary.
    &["troupe"],
    &["troupe-cli"],
];

/// Each workspace crate's troupe crates among its `[dependencies]`.
fn dependencies(crates: &Path) -> BTreeMap<String, Vec<String>> {
    let mut graph = BTreeMap::new();
    for entry in std::fs::read_dir(crates).expect("the crates directory") {
        let manifest = entry.expect("an entry").path().join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&manifest) else { continue };
        let name = text
            .lines()
            .find_map(|l| l.strip_prefix("name = \""))
            .and_then(|rest| rest.strip_suffix('"'))
            .expect("a package name")
            .to_owned();
        let mut section = "";
        let mut uses = Vec::new();
        for line in text.lines().map(str::trim) {
            if line.starts_with('[') {
                section = line;
            } else if section == "[dependencies]" && line.starts_with("troupe") {
                let dep: String = line.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-').collect();
                uses.push(dep);
            }
        }
        graph.insert(name, uses);
    }
    graph
}

fn layer_of(name: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&name))
}

#[test]
fn no_crate_depends_upward() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let graph = dependencies(&crates);
    assert!(graph.len() >= 15 && graph["troupe-durable"].contains(&"troupe-runtime".to_owned()), "{graph:?}");
    let mut wrong = Vec::new();
    for (name, uses) in &graph {
        let Some(own) = layer_of(name) else {
            wrong.push(format!("{name} is in no layer"));
            continue;
        };
        for dep in uses {
            match layer_of(dep) {
                Some(layer) if layer < own => {}
                _ => wrong.push(format!("{name} depends on {dep}, not below it")),
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("; "));
}
