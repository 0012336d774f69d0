//! [`SharedMemory`]: namespaced key-value state with versions and compare-and-set.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// A value and its version.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemoryEntry {
    /// The value.
    pub value: Value,
    /// Its version: 1 for the first write of the key, one more for each write after.
    pub version: u64,
}

/// A compare-and-set that found another version than expected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{namespace}/{key}` is at version {actual}, not {expected} (0 means absent)")]
pub struct CasConflict {
    /// The namespace.
    pub namespace: String,
    /// The key.
    pub key: String,
    /// The version the caller expected (0: absent).
    pub expected: u64,
    /// The version found (0: absent).
    pub actual: u64,
}

/// A key's slot: a deleted key keeps its version, so versions only grow and a stale
/// compare-and-set never matches a key deleted and written again.
#[derive(Clone, Debug)]
struct Slot {
    value: Option<Value>,
    version: u64,
}

type Namespaces = HashMap<String, BTreeMap<String, Slot>>;

/// Key-value state shared by a team, in namespaces (one per member, one per topic);
/// cheap to clone, and clones share the state.
///
/// ```
/// use serde_json::json;
/// use troupe_team::coordination::SharedMemory;
///
/// let memory = SharedMemory::new();
/// assert_eq!(memory.put("plan", "step", json!(1)), 1);
/// assert_eq!(memory.compare_and_set("plan", "step", 1, json!(2)), Ok(2));
/// let stale = memory.compare_and_set("plan", "step", 1, json!(3)).expect_err("version 2 now");
/// assert_eq!(stale.actual, 2);
/// ```
#[derive(Clone, Debug, Default)]
pub struct SharedMemory {
    namespaces: Arc<RwLock<Namespaces>>,
}

impl SharedMemory {
    /// An empty memory.
    pub fn new() -> Self {
        Self::default()
    }

    fn read(&self) -> RwLockReadGuard<'_, Namespaces> {
        // Every write is one map operation: a panicking holder leaves no half-written state.
        self.namespaces.read().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Namespaces> {
        self.namespaces.write().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The entry at `namespace/key`.
    pub fn get(&self, namespace: &str, key: &str) -> Option<MemoryEntry> {
        let namespaces = self.read();
        let slot = namespaces.get(namespace)?.get(key)?;
        slot.value.clone().map(|value| MemoryEntry { value, version: slot.version })
    }

    /// Writes `value` at `namespace/key` whatever is there; returns its new version.
    pub fn put(&self, namespace: &str, key: &str, value: Value) -> u64 {
        let mut namespaces = self.write();
        let slot = namespaces
            .entry(namespace.to_owned())
            .or_default()
            .entry(key.to_owned())
            .or_insert(Slot { value: None, version: 0 });
        slot.version += 1;
        slot.value = Some(value);
        slot.version
    }

    /// Writes `value` at `namespace/key` only if the key is at `expected` (0: absent);
    /// returns its new version, or the version found.
    pub fn compare_and_set(&self, namespace: &str, key: &str, expected: u64, value: Value) -> Result<u64, CasConflict> {
        let mut namespaces = self.write();
        let slots = namespaces.entry(namespace.to_owned()).or_default();
        let actual = slots.get(key).filter(|s| s.value.is_some()).map_or(0, |s| s.version);
        if actual != expected {
            return Err(CasConflict { namespace: namespace.to_owned(), key: key.to_owned(), expected, actual });
        }
        let slot = slots.entry(key.to_owned()).or_insert(Slot { value: None, version: 0 });
        slot.version += 1;
        slot.value = Some(value);
        Ok(slot.version)
    }

    /// Removes `namespace/key`; returns what was there.
    pub fn delete(&self, namespace: &str, key: &str) -> Option<MemoryEntry> {
        let mut namespaces = self.write();
        let slot = namespaces.get_mut(namespace)?.get_mut(key)?;
        let value = slot.value.take()?;
        let entry = MemoryEntry { value, version: slot.version };
        slot.version += 1;
        Some(entry)
    }

    /// Every entry of `namespace`, by key.
    pub fn list(&self, namespace: &str) -> Vec<(String, MemoryEntry)> {
        let namespaces = self.read();
        namespaces
            .get(namespace)
            .into_iter()
            .flatten()
            .filter_map(|(key, slot)| {
                slot.value.clone().map(|value| (key.clone(), MemoryEntry { value, version: slot.version }))
            })
            .collect()
    }

    /// The namespaces holding at least one entry, sorted.
    pub fn namespaces(&self) -> Vec<String> {
        let namespaces = self.read();
        let mut names: Vec<String> = namespaces
            .iter()
            .filter(|(_, slots)| slots.values().any(|s| s.value.is_some()))
            .map(|(name, _)| name.clone())
            .collect();
        names.sort();
        names
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_deleted_key_does_not_revive_old_versions() {
        let memory = SharedMemory::new();
        memory.put("ns", "k", json!("a"));
        assert_eq!(memory.delete("ns", "k").map(|e| e.version), Some(1));
        assert_eq!(memory.get("ns", "k"), None);
        assert!(memory.compare_and_set("ns", "k", 1, json!("b")).is_err(), "version 1 is gone");
        assert_eq!(memory.compare_and_set("ns", "k", 0, json!("b")), Ok(3));
        assert!(memory.namespaces() == ["ns"]);
        memory.delete("ns", "k");
        assert!(memory.namespaces().is_empty());
    }
}
