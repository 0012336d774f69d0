//! Memories on SQLite.

use super::{SqliteStore, column};
use crate::error::StoreError;
use crate::record::{MemoryRecord, Millis};
use crate::repository::{MemoryRepository, StoreFuture, memory_patterns};

impl MemoryRepository for SqliteStore {
    fn save_memory<'a>(&'a self, namespace: &'a str, content: &'a str, now: Millis) -> StoreFuture<'a, i64> {
        Box::pin(async move {
            sqlx::query_scalar("INSERT INTO memories (namespace, content, created_at) VALUES (?, ?, ?) RETURNING id")
                .bind(namespace)
                .bind(content)
                .bind(now)
                .fetch_one(self.pool())
                .await
                .map_err(StoreError::database)
        })
    }

    fn search_memory<'a>(
        &'a self,
        namespace: &'a str,
        query: &'a str,
        limit: u32,
    ) -> StoreFuture<'a, Vec<MemoryRecord>> {
        Box::pin(async move {
            let patterns = memory_patterns(query);
            // Only placeholders are added to the statement; every value is bound.
            let mut sql = String::from("SELECT id, namespace, content, created_at FROM memories WHERE namespace = ?");
            for _ in &patterns {
                sql.push_str(" AND lower(content) LIKE ? ESCAPE '\\'");
            }
            sql.push_str(" ORDER BY id DESC");
            if limit > 0 {
                sql.push_str(" LIMIT ?");
            }
            let mut statement = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(namespace);
            for pattern in &patterns {
                statement = statement.bind(pattern);
            }
            if limit > 0 {
                statement = statement.bind(i64::from(limit));
            }
            let rows = statement.fetch_all(self.pool()).await.map_err(StoreError::database)?;
            rows.iter()
                .map(|row| {
                    Ok(MemoryRecord {
                        id: column(row, "id")?,
                        namespace: column(row, "namespace")?,
                        content: column(row, "content")?,
                        saved_at: column(row, "created_at")?,
                    })
                })
                .collect()
        })
    }
}
