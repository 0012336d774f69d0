//! The audit trail: every security decision about an agent's actions, one entry each.
//!
//! Entries never hold a call's raw arguments, which may carry secrets: only a SHA-256
//! digest of their canonical JSON ([`arguments_digest`]), enough to match an entry to a
//! call recorded elsewhere. (A digest of a short, guessable argument can be confirmed by
//! guessing; it hides the arguments from a reader, not from a search.)

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

/// The [`AuditEntry::decision`] of an allowed action.
pub const ALLOWED: &str = "allowed";
/// The [`AuditEntry::decision`] of a refused action.
pub const DENIED: &str = "denied";

/// What kind of decision an entry records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum AuditKind {
    /// A tool call checked against the agent's capabilities.
    CapabilityCheck,
    /// A person's answer to an approval request (the decision says which).
    Approval,
    /// An action refused by a rule other than a capability (a policy, a budget).
    Denial,
    /// A network connection dropped by the egress firewall.
    FirewallDrop,
}

/// One recorded decision, serialized as one JSON object (one line of a [`FileAuditLog`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// When it was decided, in milliseconds since the Unix epoch.
    pub timestamp_ms: u64,
    /// The agent whose action it was.
    pub agent: String,
    /// The run the action belongs to, where known.
    #[serde(default)]
    pub run_id: Option<String>,
    /// What kind of decision this is.
    pub kind: AuditKind,
    /// The tool called, for tool calls.
    #[serde(default)]
    pub tool: Option<String>,
    /// The model's id of the call, for tool calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// [`ALLOWED`] or [`DENIED`].
    pub decision: String,
    /// Why.
    pub reason: String,
    /// The [`arguments_digest`] of the call's arguments; never the arguments.
    #[serde(default)]
    pub arguments_digest: Option<String>,
    /// The sandbox mode a call that runs a command runs in (`workspace-write`); `None` for
    /// other tools and decisions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<String>,
}

impl AuditEntry {
    /// An entry stamped now, for `agent`, allowed or not, with no run, tool or arguments.
    pub fn new(kind: AuditKind, agent: impl Into<String>, allowed: bool, reason: impl Into<String>) -> Self {
        AuditEntry {
            timestamp_ms: now_ms(),
            agent: agent.into(),
            run_id: None,
            kind,
            tool: None,
            call_id: None,
            decision: if allowed { ALLOWED } else { DENIED }.to_owned(),
            reason: reason.into(),
            arguments_digest: None,
            sandbox: None,
        }
    }

    /// The entry for the run `run_id`.
    pub fn with_run_id(mut self, run_id: impl Into<String>) -> Self {
        self.run_id = Some(run_id.into());
        self
    }

    /// The entry for a call of `tool`.
    pub fn with_tool(mut self, tool: impl Into<String>) -> Self {
        self.tool = Some(tool.into());
        self
    }

    /// The entry for the call with the model's id `call_id`.
    pub fn with_call_id(mut self, call_id: impl Into<String>) -> Self {
        self.call_id = Some(call_id.into());
        self
    }

    /// Records the digest of `args` (not `args`).
    pub fn with_arguments(mut self, args: &Value) -> Self {
        self.arguments_digest = Some(arguments_digest(args));
        self
    }

    /// Records the sandbox mode the call's command runs in, when it runs one.
    pub fn with_sandbox(mut self, mode: Option<String>) -> Self {
        self.sandbox = mode;
        self
    }

    /// Whether the decision was [`ALLOWED`].
    pub fn is_allowed(&self) -> bool {
        self.decision == ALLOWED
    }
}

/// `sha256:` and the hex SHA-256 of `args` as canonical JSON (object keys sorted, no
/// whitespace), so equal arguments give equal digests whatever their key order.
pub fn arguments_digest(args: &Value) -> String {
    let mut canonical = String::new();
    write_canonical(args, &mut canonical);
    let hash = Sha256::digest(canonical.as_bytes());
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    for byte in hash {
        out.push_str(&format!("{byte:02x}"));
    }
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_unstable();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Where audit entries go. Recording never fails its caller: a log that cannot write
/// reports the failure its own way.
pub trait AuditLog: Send + Sync {
    /// Records one decision.
    fn record(&self, entry: AuditEntry);
}

impl<T: AuditLog + ?Sized> AuditLog for Arc<T> {
    fn record(&self, entry: AuditEntry) {
        (**self).record(entry);
    }
}

/// An audit log that keeps nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoAudit;

impl AuditLog for NoAudit {
    fn record(&self, _entry: AuditEntry) {}
}

/// An audit log kept in memory, for tests and inspection.
#[derive(Debug, Default)]
pub struct MemoryAuditLog {
    entries: Mutex<Vec<AuditEntry>>,
}

impl MemoryAuditLog {
    /// An empty log.
    pub fn new() -> Self {
        MemoryAuditLog::default()
    }

    /// The entries recorded so far, oldest first.
    pub fn entries(&self) -> Vec<AuditEntry> {
        lock(&self.entries).clone()
    }
}

impl AuditLog for MemoryAuditLog {
    fn record(&self, entry: AuditEntry) {
        lock(&self.entries).push(entry);
    }
}

/// An audit log appended to a file as JSON lines, one entry per line, each written with a
/// single write and flushed before [`AuditLog::record`] returns.
///
/// The file is opened for appending (created with mode 0600 if missing), so several
/// processes may share it. A failed write is counted, kept as [`FileAuditLog::last_error`]
/// and logged with `tracing`; it never panics. [`FileAuditLog::try_record`] returns it.
#[derive(Debug)]
pub struct FileAuditLog {
    path: PathBuf,
    file: Mutex<File>,
    sync: bool,
    failures: AtomicU64,
    last_error: Mutex<Option<String>>,
}

impl FileAuditLog {
    /// Opens (or creates) the log at `path` for appending.
    pub fn open(path: impl AsRef<Path>) -> io::Result<Self> {
        let path = path.as_ref().to_path_buf();
        let mut options = OpenOptions::new();
        options.append(true).create(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let file = options.open(&path)?;
        Ok(FileAuditLog {
            path,
            file: Mutex::new(file),
            sync: false,
            failures: AtomicU64::new(0),
            last_error: Mutex::new(None),
        })
    }

    /// Also asks the operating system to put each entry on disk (`fsync`) before
    /// [`AuditLog::record`] returns; slower, but an entry survives a crash of the machine.
    pub fn with_sync_each_entry(mut self, sync: bool) -> Self {
        self.sync = sync;
        self
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `entry`, returning the error if it could not be written.
    pub fn try_record(&self, entry: &AuditEntry) -> io::Result<()> {
        let mut line = serde_json::to_vec(entry).map_err(io::Error::other)?;
        line.push(b'\n');
        let mut file = lock(&self.file);
        file.write_all(&line)?;
        file.flush()?;
        if self.sync {
            file.sync_data()?;
        }
        Ok(())
    }

    /// How many entries could not be written.
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    /// The last write error, if any entry could not be written.
    pub fn last_error(&self) -> Option<String> {
        lock(&self.last_error).clone()
    }
}

impl AuditLog for FileAuditLog {
    fn record(&self, entry: AuditEntry) {
        if let Err(error) = self.try_record(&entry) {
            self.failures.fetch_add(1, Ordering::Relaxed);
            let message = format!("could not append to the audit log {}: {error}", self.path.display());
            tracing::error!(target: "troupe::audit", "{message}");
            *lock(&self.last_error) = Some(message);
        }
    }
}

/// The guarded value, also after a panic elsewhere poisoned the lock: an audit log
/// must go on recording.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn digests_ignore_key_order_and_hide_the_arguments() {
        let a = arguments_digest(&json!({"path": "secret.txt", "n": [1, {"b": 2, "a": "x"}]}));
        let b = arguments_digest(&json!({"n": [1, {"a": "x", "b": 2}], "path": "secret.txt"}));
        assert_eq!(a, b);
        assert!(a.starts_with("sha256:") && a.len() == 7 + 64, "{a}");
        assert!(!a.contains("secret"));
        assert_ne!(a, arguments_digest(&json!({"path": "other.txt"})));
        // The SHA-256 of `{}`, to pin the canonical form.
        assert_eq!(
            arguments_digest(&json!({})),
            "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
    }

    #[test]
    fn entries_serialize_with_snake_case_kinds() {
        let entry = AuditEntry::new(AuditKind::FirewallDrop, "scout", false, "host not allowed").with_run_id("run_1");
        let value = serde_json::to_value(&entry).expect("serializes");
        assert_eq!(value["kind"], "firewall_drop");
        assert_eq!(value["decision"], "denied");
        assert_eq!(value["run_id"], "run_1");
        assert!(value.get("call_id").is_none());
        let back: AuditEntry = serde_json::from_value(value).expect("parses");
        assert_eq!(back, entry);
        assert!(!back.is_allowed());
    }
}
