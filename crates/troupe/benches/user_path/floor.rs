//! The floor of a recorded run: the writes a power-loss-safe record of the bare loop's
//! run cannot do without, made by hand with `rusqlite` on the same SQLite settings as
//! troupe's store (WAL, `synchronous = FULL`). A run is one row, written in five flushed
//! commits: its creation (before the first model call), its conversation after each model
//! turn it acts on (before the tools run), and its end with the last turn. No evidence,
//! no leases, no transitions, one commit per write (no groups).

use rusqlite::{Connection, params};
use serde_json::Value;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// The connection every run of a pass writes through.
#[derive(Clone)]
pub struct Floor {
    conn: Arc<Mutex<Connection>>,
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
        Ok(Floor { conn: Arc::new(Mutex::new(conn)) })
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
        let conn = Arc::clone(&self.conn);
        tokio::task::spawn_blocking(move || {
            let conn = conn.lock().map_err(|_| "the floor's connection was poisoned".to_owned())?;
            // Autocommit: one transaction, one fsync of the WAL.
            write(&conn).map(drop).map_err(|e| e.to_string())
        })
        .await
        .map_err(|e| e.to_string())?
    }
}
