//! [`SignalHook`]s: code an agent runs when a signal arrives, before the run applies it.

use crate::signal::{Signal, SignalKind};
use crate::state::RunState;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use troupe_core::Message;

/// Code an agent runs when a signal of some kind arrives, before the run applies it.
///
/// A hook sees the signal and the run's state and may return messages to add to the
/// conversation (they reach the model with the next call). Hooks run on the run's task,
/// between steps: keep them quick, and hand slow work to a task of your own.
pub trait SignalHook: Send + Sync {
    /// Called for each accepted signal of the kinds the hook is registered for; returns the
    /// messages to inject, if any.
    fn on_signal(&self, signal: &Signal, state: &RunState) -> Option<Vec<Message>>;
}

impl<F> SignalHook for F
where
    F: Fn(&Signal, &RunState) -> Option<Vec<Message>> + Send + Sync,
{
    fn on_signal(&self, signal: &Signal, state: &RunState) -> Option<Vec<Message>> {
        self(signal, state)
    }
}

/// An agent's signal hooks, by kind, in registration order.
#[derive(Clone, Default)]
pub struct SignalHooks {
    hooks: BTreeMap<SignalKind, Vec<Arc<dyn SignalHook>>>,
}

impl SignalHooks {
    /// No hooks.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `hook` for signals of `kind`.
    pub fn on(&mut self, kind: SignalKind, hook: Arc<dyn SignalHook>) {
        self.hooks.entry(kind).or_default().push(hook);
    }

    /// Whether no hook is registered.
    pub fn is_empty(&self) -> bool {
        self.hooks.is_empty()
    }

    /// Runs the hooks of `signal`'s kind and collects the messages they return.
    pub fn run(&self, signal: &Signal, state: &RunState) -> Vec<Message> {
        self.hooks
            .get(&signal.kind())
            .into_iter()
            .flatten()
            .filter_map(|hook| hook.on_signal(signal, state))
            .flatten()
            .collect()
    }
}

impl fmt::Debug for SignalHooks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.hooks.iter().map(|(kind, hooks)| (kind, hooks.len()))).finish()
    }
}
