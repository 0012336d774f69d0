//! The runtime's modules form no import cycle (the run's protocol is `troupe-run`, below
//! it; the queue consumer is `troupe-durable`, above it): the agent above the runner, the
//! runner above its task and the recorder, errors above what they wrap. Read from the sources, so a `use crate::…` that
//! closes a loop fails here.

use std::path::Path;
use troupe_testkit::modules::{first_cycle, imports};

#[test]
fn no_module_uses_one_that_uses_it_back() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = imports(&src).expect("the sources read");
    assert!(graph["runner"].contains("durable") && graph["agent"].contains("runner"), "imports are read: {graph:?}");
    if let Some(cycle) = first_cycle(&src).expect("the sources read") {
        panic!("an import cycle: {}", cycle.join(" -> "));
    }
}
