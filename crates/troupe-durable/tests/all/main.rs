//! troupe-durable's integration tests, as one binary. `recording` is a store that notes
//! every call a run makes.

mod client_tools;
mod durable;
mod module_graph;
mod recording;
