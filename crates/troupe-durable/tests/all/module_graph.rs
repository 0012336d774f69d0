//! The crate's modules form no import cycle: the queue consumer uses the schedules, the
//! resume by id takes leases, never the other way round.

use std::path::Path;
use troupe_testkit::modules::{first_cycle, imports};

#[test]
fn no_module_uses_one_that_uses_it_back() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = imports(&src).expect("the sources read");
    assert!(graph["queue"].contains("schedule") && graph["resume"].contains("lease"), "imports are read: {graph:?}");
    if let Some(cycle) = first_cycle(&src).expect("the sources read") {
        panic!("an import cycle: {}", cycle.join(" -> "));
    }
}
