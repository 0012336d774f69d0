//! The crate's modules form no import cycle: a module may use the ones below it, never one
//! that uses it back. Read from the sources, so a `use crate::…` that closes a loop fails
//! here.

use std::path::Path;
use troupe_testkit::modules::{first_cycle, imports};

#[test]
fn no_module_uses_one_that_uses_it_back() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = imports(&src).expect("the sources read");
    assert!(graph.len() >= 10, "the crate's modules were found: {graph:?}");
    assert!(graph["machine"].contains("state"), "imports are read: {graph:?}");
    if let Some(cycle) = first_cycle(&src).expect("the sources read") {
        panic!("an import cycle: {}", cycle.join(" -> "));
    }
}
