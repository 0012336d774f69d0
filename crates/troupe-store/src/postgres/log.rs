//! The evidence log and conversations: the two append-only records.

use super::{PostgresStore, db, get, hold_fence, is_unique_violation, json_column, lease_lost};
use crate::error::StoreError;
use crate::record::{ConversationTurn, EvidenceEntry, EvidenceKind, Lease, Millis};
use crate::repository::{ConversationRepository, EvidenceRepository, StoreFuture};
use serde_json::Value;
use sqlx::postgres::{PgExecutor, PgRow};

/// Two-key advisory locks of troupe's conversations (the first key; the second is the
/// conversation id's hash). Two-key locks never collide with the one-key migration lock.
const CONVERSATION_LOCK_CLASS: i32 = 0x7472_6f75;

/// Appends one sealed entry; its payload is stored as the very text that was hashed.
pub(super) async fn insert_evidence<'e>(
    executor: impl PgExecutor<'e>,
    entry: &EvidenceEntry,
) -> Result<(), StoreError> {
    let inserted = sqlx::query(
        "INSERT INTO evidence (run_id, seq, kind, call_id, payload, recorded_at, prev_hash, hash) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(&entry.run_id)
    .bind(entry.seq)
    .bind(entry.kind.as_str())
    .bind(entry.call_id.as_deref())
    .bind(entry.payload.to_string())
    .bind(entry.recorded_at)
    .bind(&entry.prev_hash)
    .bind(&entry.hash)
    .execute(executor)
    .await;
    match inserted {
        Ok(_) => Ok(()),
        Err(e) if is_unique_violation(&e) => {
            Err(StoreError::EvidenceConflict { run_id: entry.run_id.clone(), seq: entry.seq })
        }
        Err(e) => Err(db(e)),
    }
}

fn evidence_entry(row: &PgRow) -> Result<EvidenceEntry, StoreError> {
    let run_id: String = get(row, "run_id")?;
    let seq: i64 = get(row, "seq")?;
    let what = || format!("evidence entry {seq} of run `{run_id}`");
    let kind: String = get(row, "kind")?;
    Ok(EvidenceEntry {
        kind: EvidenceKind::parse(&kind)
            .ok_or_else(|| StoreError::decode(what(), format!("unknown evidence kind `{kind}`")))?,
        payload: json_column(row, "payload", what)?,
        call_id: get(row, "call_id")?,
        recorded_at: get(row, "recorded_at")?,
        prev_hash: get(row, "prev_hash")?,
        hash: get(row, "hash")?,
        run_id,
        seq,
    })
}

impl EvidenceRepository for PostgresStore {
    fn append_evidence<'a>(&'a self, entries: &'a [EvidenceEntry], fence: Option<&'a Lease>) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            match (entries, fence) {
                ([], _) => Ok(()),
                // The hot path: one statement, no transaction around it.
                ([entry], None) => insert_evidence(&self.pool, entry).await,
                _ => {
                    let mut tx = self.pool.begin().await.map_err(db)?;
                    if let Some(lease) = fence {
                        if let Some(other) = entries.iter().find(|e| e.run_id != lease.run_id) {
                            return Err(lease_lost(&other.run_id, lease));
                        }
                        hold_fence(&mut tx, lease).await?;
                    }
                    for entry in entries {
                        insert_evidence(&mut *tx, entry).await?;
                    }
                    tx.commit().await.map_err(db)
                }
            }
        })
    }

    fn evidence<'a>(&'a self, run_id: &'a str, after: i64) -> StoreFuture<'a, Vec<EvidenceEntry>> {
        Box::pin(async move {
            let rows = sqlx::query(
                "SELECT run_id, seq, kind, call_id, payload, recorded_at, prev_hash, hash FROM evidence \
                 WHERE run_id = $1 AND seq > $2 ORDER BY seq",
            )
            .bind(run_id)
            .bind(after)
            .fetch_all(&self.pool)
            .await
            .map_err(db)?;
            rows.iter().map(evidence_entry).collect()
        })
    }

    fn last_evidence<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Option<EvidenceEntry>> {
        Box::pin(async move {
            let row = sqlx::query(
                "SELECT run_id, seq, kind, call_id, payload, recorded_at, prev_hash, hash FROM evidence \
                 WHERE run_id = $1 ORDER BY seq DESC LIMIT 1",
            )
            .bind(run_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(db)?;
            row.as_ref().map(evidence_entry).transpose()
        })
    }
}

impl ConversationRepository for PostgresStore {
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
            let (roles, messages): (Vec<String>, Vec<String>) =
                turns.into_iter().map(|(role, message)| (role, message.to_string())).unzip();
            let mut tx = self.pool.begin().await.map_err(db)?;
            // Numbering reads the conversation's last turn: appenders of one
            // conversation take turns.
            sqlx::query("SELECT pg_advisory_xact_lock($1, hashtext($2))")
                .bind(CONVERSATION_LOCK_CLASS)
                .bind(conversation_id)
                .execute(&mut *tx)
                .await
                .map_err(db)?;
            sqlx::query(
                "INSERT INTO conversation_turns (conversation_id, seq, run_id, role, message, recorded_at) \
                 SELECT $1, last.seq + t.ord, $2, t.role, t.message, $3 \
                 FROM (SELECT COALESCE(MAX(seq), 0) AS seq FROM conversation_turns WHERE conversation_id = $1) AS last, \
                 UNNEST($4::text[], $5::text[]) WITH ORDINALITY AS t (role, message, ord)",
            )
            .bind(conversation_id)
            .bind(run_id)
            .bind(now)
            .bind(&roles)
            .bind(&messages)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
            tx.commit().await.map_err(db)
        })
    }

    fn conversation<'a>(&'a self, conversation_id: &'a str) -> StoreFuture<'a, Vec<ConversationTurn>> {
        Box::pin(async move {
            let rows = sqlx::query(
                "SELECT seq, run_id, role, message, recorded_at FROM conversation_turns \
                 WHERE conversation_id = $1 ORDER BY seq",
            )
            .bind(conversation_id)
            .fetch_all(&self.pool)
            .await
            .map_err(db)?;
            rows.iter()
                .map(|row| {
                    let seq: i64 = get(row, "seq")?;
                    Ok(ConversationTurn {
                        conversation_id: conversation_id.to_owned(),
                        seq,
                        run_id: get(row, "run_id")?,
                        role: get(row, "role")?,
                        message: json_column(row, "message", || {
                            format!("turn {seq} of conversation `{conversation_id}`")
                        })?,
                        recorded_at: get(row, "recorded_at")?,
                    })
                })
                .collect()
        })
    }
}
