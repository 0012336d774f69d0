//! The import graph of a crate's modules, read from its sources: for tests that keep a
//! crate free of import cycles.
//!
//! A module is a top-level file or directory of `src/`; it imports another when its code
//! (comments and `#[cfg(test)]` parts left out) names `crate::other`. What a module names
//! through the crate root's re-exports (`crate::Item`) is not seen: name the module.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Each top-level module of `src` and the top-level modules its code names.
pub fn imports(src: &Path) -> std::io::Result<BTreeMap<String, BTreeSet<String>>> {
    let mut modules = BTreeMap::new();
    for entry in std::fs::read_dir(src)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let module = match name.strip_suffix(".rs") {
            Some(stem) if stem != "lib" && stem != "main" && !stem.ends_with("_tests") => stem.to_owned(),
            Some(_) => continue,
            None if entry.file_type()?.is_dir() => name,
            None => continue,
        };
        let mut texts = Vec::new();
        collect(&entry.path(), &mut texts)?;
        modules.insert(module, texts);
    }
    let names: BTreeSet<String> = modules.keys().cloned().collect();
    Ok(modules
        .into_iter()
        .map(|(module, texts)| {
            let mut uses = BTreeSet::new();
            for text in &texts {
                let code = text.split("#[cfg(test)]").next().unwrap_or_default();
                for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
                    for (at, _) in line.match_indices("crate::") {
                        let named: String = line[at + "crate::".len()..]
                            .chars()
                            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
                            .collect();
                        if named != module && names.contains(&named) {
                            uses.insert(named);
                        }
                    }
                }
            }
            (module, uses)
        })
        .collect())
}

/// The texts of a module's files (a file, or every `.rs` file under a directory but its
/// `*_tests.rs`).
fn collect(path: &Path, texts: &mut Vec<String>) -> std::io::Result<()> {
    if path.is_dir() {
        for entry in std::fs::read_dir(path)? {
            collect(&entry?.path(), texts)?;
        }
    } else if path.extension().is_some_and(|e| e == "rs")
        && !path.file_stem().is_some_and(|s| s.to_string_lossy().ends_with("_tests"))
    {
        texts.push(std::fs::read_to_string(path)?);
    }
    Ok(())
}

/// A cycle of imports through `from` (`from`, …, `from`), if there is one.
pub fn cycle_through(graph: &BTreeMap<String, BTreeSet<String>>, from: &str) -> Option<Vec<String>> {
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
    let mut path = vec![from.to_owned()];
    walk(graph, from, &mut path, &mut BTreeSet::new()).then_some(path)
}

/// The first import cycle among the modules of `src`, if any.
pub fn first_cycle(src: &Path) -> std::io::Result<Option<Vec<String>>> {
    let graph = imports(src)?;
    Ok(graph.keys().find_map(|module| cycle_through(&graph, module)))
}
