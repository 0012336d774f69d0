//! The crate's modules form no import cycle: a module may use the ones below it, never one
//! that uses it back. Read from the sources (comments and test modules left out), so a
//! `use crate::…` that closes a loop fails here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Each module of `src/` and the modules of the crate it names.
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let modules: BTreeSet<String> = std::fs::read_dir(&src)
        .expect("src/ lists")
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter_map(|name| name.strip_suffix(".rs").map(str::to_owned))
        .filter(|name| name != "lib" && !name.ends_with("_tests"))
        .collect();
    let mut graph = BTreeMap::new();
    for module in &modules {
        let text = std::fs::read_to_string(src.join(format!("{module}.rs"))).expect("the module reads");
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        let mut uses = BTreeSet::new();
        for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
            for (at, _) in line.match_indices("crate::") {
                let name: String =
                    line[at + "crate::".len()..].chars().take_while(|c| c.is_ascii_lowercase() || *c == '_').collect();
                if &name != module && modules.contains(&name) {
                    uses.insert(name);
                }
            }
        }
        graph.insert(module.clone(), uses);
    }
    graph
}

/// A cycle through `from`, if there is one.
fn cycle_from(graph: &BTreeMap<String, BTreeSet<String>>, from: &str) -> Option<Vec<String>> {
    let mut path = vec![from.to_owned()];
    let mut seen = BTreeSet::new();
    fn walk(
        graph: &BTreeMap<String, BTreeSet<String>>,
        from: &str,
        path: &mut Vec<String>,
        seen: &mut BTreeSet<String>,
    ) -> bool {
        let Some(last) = path.last().cloned() else { return false };
        for next in graph.get(&last).into_iter().flatten() {
            if next == from {
                path.push(next.clone());
                return true;
            }
            if seen.insert(next.clone()) {
                path.push(next.clone());
                if walk(graph, from, path, seen) {
                    return true;
                }
                path.pop();
            }
        }
        false
    }
    walk(graph, from, &mut path, &mut seen).then_some(path)
}

#[test]
fn no_module_uses_one_that_uses_it_back() {
    let graph = imports();
    assert!(graph.len() >= 10, "the crate's modules were found: {graph:?}");
    assert!(graph["machine"].contains("state"), "imports are read: {graph:?}");
    for module in graph.keys() {
        if let Some(cycle) = cycle_from(&graph, module) {
            panic!("an import cycle: {}", cycle.join(" -> "));
        }
    }
}
