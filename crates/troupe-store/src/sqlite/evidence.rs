//! The append-only evidence log and the conversations.

use super::writer::execute;
use super::{SqliteStore, column, is_unique, json_column, json_text};
use crate::error::StoreError;
use crate::record::{ConversationTurn, EvidenceEntry, EvidenceKind, Lease, Millis};
use crate::repository::{ConversationRepository, EvidenceRepository, StoreFuture};
use rusqlite::{Connection, params};
use serde_json::Value;
use sqlx::sqlite::SqliteRow;

const INSERT_EVIDENCE: &str = "INSERT INTO evidence (run_id, seq, kind, call_id, payload, recorded_at, prev_hash, hash) \
                               VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)";

impl EvidenceRepository for SqliteStore {
    fn append_evidence<'a>(&'a self, entries: &'a [EvidenceEntry], fence: Option<&'a Lease>) -> StoreFuture<'a, ()> {
        if entries.is_empty() && fence.is_none() {
            return Box::pin(async { Ok(()) });
        }
        let (entries, fence) = (entries.to_vec(), fence.cloned());
        Box::pin(self.writer.write(move |conn| {
            if let Some(lease) = &fence {
                let foreign = entries.iter().find(|e| e.run_id != lease.run_id);
                let run_id = foreign.map_or(lease.run_id.as_str(), |e| e.run_id.as_str());
                super::queue::check_fence(conn, lease, run_id)?;
            }
            entries.iter().try_for_each(|entry| insert_evidence(conn, entry))
        }))
    }

    fn evidence<'a>(&'a self, run_id: &'a str, after: i64) -> StoreFuture<'a, Vec<EvidenceEntry>> {
        Box::pin(async move {
            let rows = sqlx::query(
                "SELECT run_id, seq, kind, call_id, payload, recorded_at, prev_hash, hash FROM evidence \
                 WHERE run_id = ? AND seq > ? ORDER BY seq",
            )
            .bind(run_id)
            .bind(after)
            .fetch_all(&self.pool)
            .await
            .map_err(StoreError::database)?;
            rows.iter().map(evidence_entry).collect()
        })
    }

    fn last_evidence<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Option<EvidenceEntry>> {
        Box::pin(async move {
            let row = sqlx::query(
                "SELECT run_id, seq, kind, call_id, payload, recorded_at, prev_hash, hash FROM evidence \
                 WHERE run_id = ? ORDER BY seq DESC LIMIT 1",
            )
            .bind(run_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(StoreError::database)?;
            row.as_ref().map(evidence_entry).transpose()
        })
    }
}

impl ConversationRepository for SqliteStore {
    fn append_turns<'a>(
        &'a self,
        conversation_id: &'a str,
        run_id: &'a str,
        turns: Vec<(String, Value)>,
        now: Millis,
    ) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            if turns.is_empty() {
                return Ok(());
            }
            let mut tx = self.begin_write().await?;
            let mut seq: i64 = sqlx::query_scalar(
                "SELECT COALESCE(MAX(seq), 0) + 1 FROM conversation_turns WHERE conversation_id = ?",
            )
            .bind(conversation_id)
            .fetch_one(&mut *tx)
            .await
            .map_err(StoreError::database)?;
            for (role, message) in &turns {
                sqlx::query(
                    "INSERT INTO conversation_turns (conversation_id, seq, run_id, role, message, recorded_at) \
                     VALUES (?, ?, ?, ?, ?, ?)",
                )
                .bind(conversation_id)
                .bind(seq)
                .bind(run_id)
                .bind(role)
                .bind(json_text(message, "conversation message")?)
                .bind(now)
                .execute(&mut *tx)
                .await
                .map_err(StoreError::database)?;
                seq += 1;
            }
            tx.commit().await.map_err(StoreError::database)
        })
    }

    fn conversation<'a>(&'a self, conversation_id: &'a str) -> StoreFuture<'a, Vec<ConversationTurn>> {
        Box::pin(async move {
            let rows = sqlx::query(
                "SELECT conversation_id, seq, run_id, role, message, recorded_at FROM conversation_turns \
                 WHERE conversation_id = ? ORDER BY seq",
            )
            .bind(conversation_id)
            .fetch_all(&self.pool)
            .await
            .map_err(StoreError::database)?;
            rows.iter()
                .map(|row| {
                    let seq: i64 = column(row, "seq")?;
                    Ok(ConversationTurn {
                        message: json_column(row, "message", || {
                            format!("turn {seq} of conversation `{conversation_id}`")
                        })?,
                        conversation_id: column(row, "conversation_id")?,
                        run_id: column(row, "run_id")?,
                        role: column(row, "role")?,
                        recorded_at: column(row, "recorded_at")?,
                        seq,
                    })
                })
                .collect()
        })
    }
}

/// Appends `entry` inside the caller's transaction; its payload is stored as the exact
/// text that was hashed.
pub(super) fn insert_evidence(conn: &Connection, entry: &EvidenceEntry) -> Result<(), StoreError> {
    execute(
        conn,
        INSERT_EVIDENCE,
        params![
            entry.run_id,
            entry.seq,
            entry.kind.as_str(),
            entry.call_id,
            entry.payload.to_string(),
            entry.recorded_at,
            entry.prev_hash,
            entry.hash,
        ],
    )
    .map_err(|e| {
        if is_unique(&e) {
            StoreError::EvidenceConflict { run_id: entry.run_id.clone(), seq: entry.seq }
        } else {
            StoreError::database(e)
        }
    })?;
    Ok(())
}

fn evidence_entry(row: &SqliteRow) -> Result<EvidenceEntry, StoreError> {
    let run_id: String = column(row, "run_id")?;
    let seq: i64 = column(row, "seq")?;
    let kind: String = column(row, "kind")?;
    let what = || format!("evidence entry {seq} of run `{run_id}`");
    Ok(EvidenceEntry {
        kind: EvidenceKind::parse(&kind)
            .ok_or_else(|| StoreError::decode(what(), format!("unknown evidence kind `{kind}`")))?,
        call_id: column(row, "call_id")?,
        payload: json_column(row, "payload", what)?,
        recorded_at: column(row, "recorded_at")?,
        prev_hash: column(row, "prev_hash")?,
        hash: column(row, "hash")?,
        run_id,
        seq,
    })
}
