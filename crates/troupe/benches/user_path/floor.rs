//! The floor of a recorded run: the writes a power-loss-safe record of the bare loop's
//! run cannot do without, made by hand with `rusqlite` on the same SQLite settings as
//! troupe's store (WAL, `synchronous = FULL`). A run is one row, written in five flushed
//! writes: its creation (before the first model call), its conversation after each model
//! turn it acts on (before the tools run), and its end with the last turn. No evidence,
//! no leases, no transitions.
//!
//! The writes go through one thread that commits whatever has queued as one transaction
//! (group commit, as any store with many writers must): one at a time each write is its
//! own commit and `fsync`; with runs in flight, writes that queue while a commit is
//! being flushed share the next one.

use rusqlite::{Connection, params};
use serde_json::Value;
use std::path::Path;
use std::sync::mpsc;
use tokio::sync::oneshot;

/// One write, and who waits for it to be on disk.
type Write = (Box<dyn FnOnce(&Connection) -> rusqlite::Result<usize> + Send>, oneshot::Sender<Result<(), String>>);

/// The writer thread every run of a pass writes through.
#[derive(Clone)]
pub struct Floor {
    writes: mpsc::Sender<Write>,
}

impl Floor {
    pub fn open(path: &Path) -> Result<Self, String> {
        let conn = Connection::open(path).map_err(|e| e.to_string())?;
        conn.pragma_update(None, "journal_mode", "WAL").map_err(|e| e.to_string())?;
        conn.pragma_update(None, "synchronous", "FULL").map_err(|e| e.to_string())?;
        conn.execute_batch(
            "CREATE TABLE runs (id INTEGER PRIMARY KEY, status TEXT NOT NULL, state TEXT NOT NULL, \
             updated_at INTEGER NOT NULL)",
        )
        .map_err(|e| e.to_string())?;
        let (writes, queued) = mpsc::channel::<Write>();
        std::thread::Builder::new()
            .name("floor-writer".to_owned())
            .spawn(move || commit_groups(&conn, &queued))
            .map_err(|e| e.to_string())?;
        Ok(Floor { writes })
    }

    /// Creates run `id` with the conversation so far, on disk when this returns.
    pub async fn create(&self, id: i64, messages: &[Value]) -> Result<(), String> {
        let state = serde_json::to_string(messages).map_err(|e| e.to_string())?;
        self.write(move |conn| {
            conn.prepare_cached("INSERT INTO runs (id, status, state, updated_at) VALUES (?1, 'running', ?2, 0)")?
                .execute(params![id, state])
        })
        .await
    }

    /// Saves run `id`'s conversation (and, at the end, its status), on disk when this returns.
    pub async fn save(&self, id: i64, messages: &[Value], status: &'static str) -> Result<(), String> {
        let state = serde_json::to_string(messages).map_err(|e| e.to_string())?;
        self.write(move |conn| {
            conn.prepare_cached("UPDATE runs SET status = ?1, state = ?2, updated_at = updated_at + 1 WHERE id = ?3")?
                .execute(params![status, state, id])
        })
        .await
    }

    async fn write<F>(&self, write: F) -> Result<(), String>
    where
        F: FnOnce(&Connection) -> rusqlite::Result<usize> + Send + 'static,
    {
        let (done, flushed) = oneshot::channel();
        self.writes.send((Box::new(write), done)).map_err(|_| "the floor's writer stopped".to_owned())?;
        flushed.await.map_err(|_| "the floor's writer stopped".to_owned())?
    }
}

/// Until every sender is gone: takes the writes that have queued, commits them as one
/// transaction (one `fsync` of the WAL), then answers each.
fn commit_groups(conn: &Connection, queued: &mpsc::Receiver<Write>) {
    while let Ok(first) = queued.recv() {
        let mut group = vec![first];
        group.extend(queued.try_iter());
        let outcome = conn.execute_batch("BEGIN").map_err(|e| e.to_string());
        let mut answers = Vec::with_capacity(group.len());
        for (write, done) in group {
            let written = match &outcome {
                Ok(()) => write(conn).map(drop).map_err(|e| e.to_string()),
                Err(e) => Err(e.clone()),
            };
            answers.push((written, done));
        }
        let committed = conn.execute_batch("COMMIT").map_err(|e| e.to_string());
        if committed.is_err() {
            let _ = conn.execute_batch("ROLLBACK");
        }
        for (written, done) in answers {
            let _ = done.send(written.and(committed.clone()));
        }
    }
}
