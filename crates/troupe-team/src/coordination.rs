//! Coordination between members: who delegated what to whom ([`DelegationChain`]), work
//! to claim ([`WorkQueue`] in memory, [`DurableWorkQueue`] in the store), state to share
//! ([`SharedMemory`]) and answers to agree on ([`Consensus`]). Messages go over the
//! [`MessageBus`](crate::bus::MessageBus).
//!
//! Every structure here is cheap to clone, and clones share their state: hand one to each
//! member.

mod chain;
mod consensus;
mod durable_queue;
mod memory;
mod work_item;
mod work_queue;

pub use chain::{DEFAULT_MAX_BOUNCES, DelegationChain, DelegationRecord, DelegationStatus};
pub use consensus::{Ballot, Consensus, ConsensusOutcome, Tally, Threshold, normalise_answer};
pub use durable_queue::DurableWorkQueue;
pub use memory::{CasConflict, MemoryEntry, SharedMemory};
pub use work_item::{Clock, ItemState, NewWorkItem, QueueError, QueueStats, WorkItem};
pub use work_queue::WorkQueue;
