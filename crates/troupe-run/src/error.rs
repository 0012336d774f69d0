//! [`SignalError`]: why a run's state refused a signal.

use crate::signal::SignalKind;
use troupe_core::ToolCallId;

/// Why a run's state refused a signal.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SignalError {
    /// The agent does not accept signals of this kind.
    #[error("the agent does not accept `{kind}` signals")]
    NotAccepted {
        /// The refused kind.
        kind: SignalKind,
    },
    /// An approval decision names a call that is not waiting for one.
    #[error("no tool call `{call_id}` is waiting for approval")]
    UnknownCall {
        /// The call named by the decision.
        call_id: ToolCallId,
    },
    /// A client tool's result names a call that is not waiting for one.
    #[error("no call of a client tool `{call_id}` is waiting for its result")]
    NoClientCall {
        /// The call named by the result.
        call_id: ToolCallId,
    },
    /// A call of a client tool was approved: it cannot run here, it takes the client's
    /// result (or a rejection).
    #[error("tool call `{call_id}` is run by the client: send its result, or reject it")]
    ClientRunsCall {
        /// The call.
        call_id: ToolCallId,
    },
    /// The run has finished; it takes no more signals.
    #[error("the run has finished")]
    RunFinished,
}
