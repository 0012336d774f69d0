//! Teams of troupe agents.
//!
//! - **Groups** ([`AgentGroup`]): pipeline, parallel and orchestrated strategies over
//!   [`Member`]s (a local agent, a worker process, a remote agent), one [`MemberResult`]
//!   per member; and delegation as a tool ([`DelegateTool`]), for a leader that decides
//!   itself when to hand work to a teammate.
//! - **Context isolation**: a [`SharedContext`] every member sees and a [`SubagentBrief`]
//!   per role, which also restricts the member's tools; members exchange
//!   [`AgentMessage`]s — summaries, artifacts, decisions and blockers, not transcripts.
//! - **Typed reports** ([`report`]): a member ends with a structured [`Report`] (or a
//!   document of another schema), which the leader's `delegate` tool returns as data and
//!   the firewall filters field by field.
//! - **The context firewall** ([`ContextFirewall`]): declared channels only, intermediate
//!   results only to the orchestrator, per-recipient sanitising (secrets always redacted).
//! - **Coordination**: [`MessageBus`], [`DelegationChain`], [`WorkQueue`] (in memory) and
//!   [`DurableWorkQueue`] (in the store, shared across processes), [`SharedMemory`],
//!   [`Consensus`].
//! - **Memory** ([`memory_tools`]): `memory.save` / `memory.search`, isolated per agent or
//!   shared by category, persisted in the store.
//! - **Supervision** ([`Supervisor`]): agent lifecycles, recursion limits, budgets that roll
//!   up to the parent and stop the team, delegation loop detection.
//!
//! ```
//! use std::sync::Arc;
//! use troupe_model::DemoProvider;
//! use troupe_runtime::{Engine, FixedModel};
//! use troupe_team::{AgentGroup, AgentMember, Member};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let demo = FixedModel::new(Arc::new(DemoProvider::new().with_delay(std::time::Duration::ZERO)), "demo");
//! let engine = Engine::builder().resolver(Arc::new(demo)).build();
//! let dir = tempfile::tempdir()?;
//! let reviewer = |name: &str| -> Result<Arc<dyn Member>, troupe_runtime::RuntimeError> {
//!     let agent = engine.agent(name).workspace(dir.path()).build()?;
//!     Ok(AgentMember::new(agent, format!("reviews as {name}")).shared())
//! };
//! let group = AgentGroup::builder("reviewers").member(reviewer("alice")?).member(reviewer("bob")?).parallel(2).build()?;
//! let output = group.run("Review the plan.").await?;
//! assert_eq!(output.members.len(), 2);
//! assert!(output.all_succeeded());
//! # Ok(())
//! # }
//! ```

// Library code answers with errors, never panics: `unwrap`/`expect` only in tests.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod brief;
pub mod bus;
pub mod control;
pub mod coordination;
pub mod delegation;
mod error;
pub mod firewall;
pub mod group;
mod member;
pub mod memory;
pub mod message;
pub mod report;
pub mod supervisor;

pub use brief::{BriefContext, BriefTask, ExpectedOutput, SharedContext, SubagentBrief};
pub use bus::{MessageBus, Subscription};
pub use control::{PausedRun, TeamControl, team_call_id};
pub use coordination::{Consensus, DelegationChain, DurableWorkQueue, SharedMemory, WorkQueue};
pub use delegation::{
    DELEGATE_TOOL, DelegateArgs, DelegateTool, Delegation, DelegationError, DelegationParser, Delegations,
    JsonDelegationParser,
};
pub use error::TeamError;
pub use firewall::{ContextFirewall, InterfaceOnly, Sanitiser};
pub use group::{AgentGroup, AgentGroupBuilder, FailurePolicy, GroupOutput, Strategy};
pub use member::{AgentMember, EventSink, Member, MemberResult, MemberTask};
pub use memory::{MemoryScope, memory_tools};
pub use message::{AgentMessage, Artifact, MessageKind, MessagePayload, Recipient};
pub use report::{Report, ReportFormat, report_spec};
pub use supervisor::{AgentHandle, AgentStatus, RecursiveSpawnGuard, Supervisor, TeamBudget};
