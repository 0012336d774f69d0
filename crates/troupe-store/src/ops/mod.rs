//! The store, written once: every repository operation and every rule of it (which writes
//! a checkpoint makes and when it is refused, which runs take signals, how leases fence
//! writers, how a schedule's tick fires, how work items are claimed, retried and refused),
//! over a [`Conn`](crate::sql::Conn) of any backend.
//!
//! An operation is an `async fn` taking the connection or transaction it runs in: a backend
//! chooses that (a transaction of its pool, its writer thread) and nothing else. Operations
//! that must be one transaction say so; the caller opens it.
//!
//! Where the dialect locks rows (PostgreSQL), an operation that locks both of a run's rows
//! locks its queue row before its run row — a fenced checkpoint, a schedule's wake — so
//! that no two transactions wait for each other.

pub(crate) mod conversations;
pub(crate) mod decode;
pub(crate) mod evidence;
pub(crate) mod memory;
pub(crate) mod queue;
pub(crate) mod runs;
pub(crate) mod schedules;
pub(crate) mod signals;
pub(crate) mod work;

use crate::record::Millis;
use std::time::Duration;

/// `now + ttl` in milliseconds, saturating.
pub(crate) fn expiry(now: Millis, ttl: Duration) -> Millis {
    now.saturating_add(i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX))
}
