//! Agents defined as files, and agents run as worker processes.
//!
//! - [`build`]: an agent file built into an [`Agent`](troupe_runtime::Agent), with the
//!   workspace's providers, tools and MCP servers.
//! - [`definition`]: the `agents/*.toml` schema, validated on load with
//!   `file:line:column` errors.
//! - [`registry`]: discovery of agent files in the config directories.
//! - [`ipc`]: the length-delimited frame protocol between a coordinator and a worker
//!   (tasks in, events and results out, heartbeats both ways, chunked payloads).
//! - [`process`]: workers as child processes, and the worker side of the protocol.
//! - [`team_file`]: teams of agent files (`team.toml`), validated like agent files.
//! - [`team`]: a team file assembled into members and the strategy that runs them.
//! - [`team_remote`]: a team file's remote A2A members, made ready (token, card, skill).
//! - [`team_run`]: a team file run on a task from code, its team budget watched.

// Library code answers with errors, never panics: `unwrap`/`expect` only in tests.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod build;
pub mod definition;
pub mod ipc;
pub mod process;
pub mod registry;
pub mod reload;
pub mod team;
pub mod team_file;
pub mod team_meter;
pub mod team_record;
pub mod team_remote;
pub mod team_replay;
pub mod team_run;
pub mod trust;

pub use definition::{AgentDefinition, DefinitionError, ResolvedExecution};
pub use ipc::{AgentResult, AgentTask, Frame, FrameCodec, IpcError, PayloadSource};
pub use process::{ProcessMember, WorkerConfig, WorkerOutcome, WorkerTask};
pub use registry::{AgentRegistry, RegistryError, default_config_dirs};
pub use team_file::{Isolation, TeamFile, TeamStrategy};
pub use troupe_tools::ToolPolicy;
