//! troupe-runtime's integration tests, as one binary: each module was a test binary of its
//! own, and each linked the whole stack. `common` is the shared harness (one per wire).

#[macro_use]
mod common;

mod capabilities;
mod compaction;
mod control;
mod failure_resume;
mod genai_spans;
mod middleware;
mod module_graph;
mod plugins;
mod prompt_cache;
mod reconfigure;
mod runtime;
mod stream_restart;
mod tool_attachments;
mod tool_loop;
mod typed_output;
