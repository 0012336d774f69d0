//! Memories on PostgreSQL.

use super::{PostgresStore, db, get};
use crate::record::{MemoryRecord, Millis};
use crate::repository::{MemoryRepository, StoreFuture, memory_patterns};

impl MemoryRepository for PostgresStore {
    fn save_memory<'a>(&'a self, namespace: &'a str, content: &'a str, now: Millis) -> StoreFuture<'a, i64> {
        Box::pin(async move {
            sqlx::query_scalar("INSERT INTO memories (namespace, content, created_at) VALUES ($1, $2, $3) RETURNING id")
                .bind(namespace)
                .bind(content)
                .bind(now)
                .fetch_one(self.pool())
                .await
                .map_err(db)
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
            // Only numbered placeholders are added to the statement; every value is bound.
            let mut sql = String::from("SELECT id, namespace, content, created_at FROM memories WHERE namespace = $1");
            for i in 0..patterns.len() {
                sql.push_str(&format!(" AND lower(content) LIKE ${} ESCAPE '\\'", i + 2));
            }
            sql.push_str(" ORDER BY id DESC");
            if limit > 0 {
                sql.push_str(&format!(" LIMIT ${}", patterns.len() + 2));
            }
            let mut statement = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(namespace);
            for pattern in &patterns {
                statement = statement.bind(pattern);
            }
            if limit > 0 {
                statement = statement.bind(i64::from(limit));
            }
            let rows = statement.fetch_all(self.pool()).await.map_err(db)?;
            rows.iter()
                .map(|row| {
                    Ok(MemoryRecord {
                        id: get(row, "id")?,
                        namespace: get(row, "namespace")?,
                        content: get(row, "content")?,
                        saved_at: get(row, "created_at")?,
                    })
                })
                .collect()
        })
    }
}
