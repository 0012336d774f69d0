//! The coordinator's side of the tool policy: a worker whose events show it calling a tool
//! outside its policy is stopped, whatever it says it did.

use crate::ipc::ToolPolicy;
use std::collections::HashMap;
use troupe_core::{AgentEvent, AgentEventKind, ToolCallId};

/// Checks a worker's event stream against its [`ToolPolicy`].
#[derive(Debug)]
pub(crate) struct ToolGuard {
    policy: ToolPolicy,
    /// The tool of each call started, so a later event of the call can be judged too.
    calls: HashMap<ToolCallId, String>,
}

impl ToolGuard {
    pub(crate) fn new(policy: ToolPolicy) -> Self {
        ToolGuard { policy, calls: HashMap::new() }
    }

    /// `Err(tool)` when `event` starts, continues or completes a call of a denied tool.
    pub(crate) fn check(&mut self, event: &AgentEvent) -> Result<(), String> {
        let tool = match &event.kind {
            AgentEventKind::ToolCallStart { call_id, tool, .. } => {
                self.calls.insert(call_id.clone(), tool.clone());
                Some(tool.as_str())
            }
            AgentEventKind::ToolCallArgs { call_id, .. }
            | AgentEventKind::ToolCallEnd { call_id }
            | AgentEventKind::ToolCallResult { call_id, .. } => self.calls.get(call_id).map(String::as_str),
            _ => None,
        };
        match tool {
            Some(tool) if !self.policy.permits(tool) => Err(tool.to_owned()),
            _ => Ok(()),
        }
    }
}
