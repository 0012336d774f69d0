//! The tools' tests: the catalog, the built-in tools in real workspaces, their confinement.
//!
//! One test binary for the crate: each module was a test file of its own.

mod capability;
mod catalog;
mod common;
mod escape;
mod fs_tools;
mod schema;
mod shell;
mod web;
