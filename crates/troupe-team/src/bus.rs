//! [`MessageBus`]: direct and broadcast messages between members, bounded per subscriber.
//!
//! Publishing never waits. Each subscriber has its own queue of at most `capacity`
//! messages; when it is full, that subscriber's **oldest** message is dropped and counted
//! ([`Subscription::lost`], [`BusStats::evicted`]), so a member that never reads loses only
//! its own backlog and slows nobody down.
//!
//! Every copy passes the bus's [`ContextFirewall`], filtered for its own recipient; a bus
//! without a firewall still redacts secrets ([`redact_secrets`](crate::firewall::redact_secrets)).
//!
//! ```
//! use troupe_team::bus::MessageBus;
//! use troupe_team::message::AgentMessage;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), troupe_team::TeamError> {
//! let bus = MessageBus::new(16);
//! let mut coder = bus.subscribe("coder")?;
//! let _lead = bus.subscribe("lead")?;
//! bus.publish(AgentMessage::request("lead", "coder", "Fix the parser."));
//! let message = coder.recv().await.expect("a message");
//! assert_eq!(message.payload.summary, "Fix the parser.");
//! # Ok(())
//! # }
//! ```

use crate::TeamError;
use crate::firewall::{ContextFirewall, FirewallDrop, SecretRedactor};
use crate::message::{AgentMessage, Recipient};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::Notify;

/// Messages a subscriber's queue holds by default.
pub const DEFAULT_CAPACITY: usize = 256;

/// Locks `mutex`, taking the data of a holder that panicked (every update here is a
/// single push or pop, so the data is never half-written).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// One subscriber's queue.
#[derive(Debug)]
struct Inbox {
    messages: Mutex<VecDeque<AgentMessage>>,
    notify: Notify,
    lost: AtomicU64,
}

#[derive(Default)]
struct Counters {
    published: AtomicU64,
    delivered: AtomicU64,
    blocked: AtomicU64,
    evicted: AtomicU64,
    undeliverable: AtomicU64,
}

struct Shared {
    capacity: usize,
    firewall: Option<Arc<ContextFirewall>>,
    inboxes: Mutex<BTreeMap<String, Arc<Inbox>>>,
    closed: AtomicBool,
    counters: Counters,
}

/// A bus for one team; cheap to clone (clones share the bus).
#[derive(Clone)]
pub struct MessageBus {
    shared: Arc<Shared>,
}

impl fmt::Debug for MessageBus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MessageBus")
            .field("capacity", &self.shared.capacity)
            .field("subscribers", &self.subscribers())
            .field("firewall", &self.shared.firewall.is_some())
            .field("stats", &self.stats())
            .finish()
    }
}

impl Default for MessageBus {
    fn default() -> Self {
        Self::new(DEFAULT_CAPACITY)
    }
}

/// What the bus has done so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BusStats {
    /// Messages published.
    pub published: u64,
    /// Copies put in a subscriber's queue.
    pub delivered: u64,
    /// Copies the firewall dropped.
    pub blocked: u64,
    /// Queued copies pushed out by newer ones, because their subscriber did not read.
    pub evicted: u64,
    /// Direct messages to nobody subscribed.
    pub undeliverable: u64,
}

/// What became of one published message.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Delivery {
    /// The subscribers that got a copy.
    pub delivered: Vec<String>,
    /// The copies the firewall dropped, and why.
    pub blocked: Vec<FirewallDrop>,
    /// Whether a direct message found nobody subscribed under its recipient's name.
    pub undeliverable: bool,
}

impl MessageBus {
    /// A bus whose subscribers each hold at most `capacity` messages (at least 1).
    pub fn new(capacity: usize) -> Self {
        MessageBus {
            shared: Arc::new(Shared {
                capacity: capacity.max(1),
                firewall: None,
                inboxes: Mutex::new(BTreeMap::new()),
                closed: AtomicBool::new(false),
                counters: Counters::default(),
            }),
        }
    }

    /// A bus that filters every copy through `firewall`.
    pub fn with_firewall(capacity: usize, firewall: Arc<ContextFirewall>) -> Self {
        let mut bus = Self::new(capacity);
        if let Some(shared) = Arc::get_mut(&mut bus.shared) {
            shared.firewall = Some(firewall);
        }
        bus
    }

    /// The firewall, if the bus has one.
    pub fn firewall(&self) -> Option<&Arc<ContextFirewall>> {
        self.shared.firewall.as_ref()
    }

    /// Subscribes `name`: direct messages to it and broadcasts by others go to the returned
    /// subscription (until it is dropped). Fails when `name` is subscribed already.
    pub fn subscribe(&self, name: impl Into<String>) -> Result<Subscription, TeamError> {
        let name = name.into();
        let mut inboxes = lock(&self.shared.inboxes);
        if inboxes.contains_key(&name) {
            return Err(TeamError::Invalid(format!("`{name}` is subscribed to the bus already")));
        }
        let inbox = Arc::new(Inbox {
            messages: Mutex::new(VecDeque::with_capacity(self.shared.capacity.min(64))),
            notify: Notify::new(),
            lost: AtomicU64::new(0),
        });
        inboxes.insert(name.clone(), Arc::clone(&inbox));
        Ok(Subscription { name, inbox, shared: Arc::clone(&self.shared) })
    }

    /// The names subscribed now.
    pub fn subscribers(&self) -> Vec<String> {
        lock(&self.shared.inboxes).keys().cloned().collect()
    }

    /// Publishes `message`: to its recipient, or (a broadcast) to every subscriber but the
    /// sender, each copy filtered for its recipient. Never waits.
    pub fn publish(&self, message: AgentMessage) -> Delivery {
        let shared = &self.shared;
        shared.counters.published.fetch_add(1, Ordering::Relaxed);
        let mut delivery = Delivery::default();
        if shared.closed.load(Ordering::Acquire) {
            delivery.undeliverable = true;
            return delivery;
        }
        let targets: Vec<(String, Arc<Inbox>)> = {
            let inboxes = lock(&shared.inboxes);
            match &message.to {
                Recipient::Agent(name) => {
                    inboxes.get(name).map(|inbox| (name.clone(), Arc::clone(inbox))).into_iter().collect()
                }
                Recipient::Broadcast => inboxes
                    .iter()
                    .filter(|(name, _)| **name != message.from)
                    .map(|(name, inbox)| (name.clone(), Arc::clone(inbox)))
                    .collect(),
            }
        };
        if targets.is_empty() && matches!(message.to, Recipient::Agent(_)) {
            shared.counters.undeliverable.fetch_add(1, Ordering::Relaxed);
            delivery.undeliverable = true;
            return delivery;
        }
        for (name, inbox) in targets {
            let copy = match &shared.firewall {
                Some(firewall) => firewall.filter_for(&message, &name),
                None => {
                    let mut copy = message.clone();
                    SecretRedactor::redact(&mut copy);
                    Ok(copy)
                }
            };
            match copy {
                Ok(copy) => {
                    self.enqueue(&inbox, copy);
                    delivery.delivered.push(name);
                }
                Err(blocked) => {
                    shared.counters.blocked.fetch_add(1, Ordering::Relaxed);
                    delivery.blocked.push(blocked);
                }
            }
        }
        delivery
    }

    fn enqueue(&self, inbox: &Inbox, message: AgentMessage) {
        {
            let mut messages = lock(&inbox.messages);
            if messages.len() >= self.shared.capacity {
                messages.pop_front();
                inbox.lost.fetch_add(1, Ordering::Relaxed);
                self.shared.counters.evicted.fetch_add(1, Ordering::Relaxed);
            }
            messages.push_back(message);
        }
        self.shared.counters.delivered.fetch_add(1, Ordering::Relaxed);
        inbox.notify.notify_one();
    }

    /// What the bus has done so far.
    pub fn stats(&self) -> BusStats {
        let c = &self.shared.counters;
        BusStats {
            published: c.published.load(Ordering::Relaxed),
            delivered: c.delivered.load(Ordering::Relaxed),
            blocked: c.blocked.load(Ordering::Relaxed),
            evicted: c.evicted.load(Ordering::Relaxed),
            undeliverable: c.undeliverable.load(Ordering::Relaxed),
        }
    }

    /// Closes the bus: nothing more is delivered, and each subscription's
    /// [`recv`](Subscription::recv) returns `None` once its queue is empty.
    pub fn close(&self) {
        self.shared.closed.store(true, Ordering::Release);
        for inbox in lock(&self.shared.inboxes).values() {
            inbox.notify.notify_one();
        }
    }
}

/// One subscriber's end of the bus; unsubscribes when dropped.
pub struct Subscription {
    name: String,
    inbox: Arc<Inbox>,
    shared: Arc<Shared>,
}

impl fmt::Debug for Subscription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Subscription").field("name", &self.name).field("queued", &self.len()).finish()
    }
}

impl Subscription {
    /// The subscriber's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The next message, waiting for one; `None` once the bus is closed and the queue
    /// is empty.
    pub async fn recv(&mut self) -> Option<AgentMessage> {
        loop {
            if let Some(message) = self.try_recv() {
                return Some(message);
            }
            if self.shared.closed.load(Ordering::Acquire) {
                return None;
            }
            // `notify_one` keeps a permit when nobody waits, so a message published
            // between the check above and this wait is not missed.
            self.inbox.notify.notified().await;
        }
    }

    /// The next message, if one is queued.
    pub fn try_recv(&mut self) -> Option<AgentMessage> {
        lock(&self.inbox.messages).pop_front()
    }

    /// Messages queued now.
    pub fn len(&self) -> usize {
        lock(&self.inbox.messages).len()
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// This subscriber's messages pushed out unread because its queue was full.
    pub fn lost(&self) -> u64 {
        self.inbox.lost.load(Ordering::Relaxed)
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut inboxes = lock(&self.shared.inboxes);
        if inboxes.get(&self.name).is_some_and(|inbox| Arc::ptr_eq(inbox, &self.inbox)) {
            inboxes.remove(&self.name);
        }
    }
}
