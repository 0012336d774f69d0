//! troupe-mcp's integration tests, as one binary: each module was a test binary of its
//! own, and each linked the whole stack. `common` holds the shared MCP test servers.

mod agent;
mod common;
mod http;
mod sandbox;
mod serve;
mod stdio;
