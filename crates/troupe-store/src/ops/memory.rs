//! Memories, searched by the words of a query.

use super::decode;
use crate::error::StoreError;
use crate::record::{MemoryRecord, Millis};
use crate::sql::{Conn, Param, Statement};

const SAVE: Statement =
    statement!("INSERT INTO memories (namespace, content, created_at) VALUES ($1, $2, $3) RETURNING id");

/// Saves `content` in `namespace`; its id.
pub(crate) async fn save(conn: &mut impl Conn, namespace: &str, content: &str, now: Millis) -> Result<i64, StoreError> {
    let params = [Param::Text(namespace), Param::Text(content), Param::Int(now)];
    let id = conn.fetch_optional(&SAVE, &params, decode::id).await?;
    id.ok_or_else(|| StoreError::database("the memory's insert returned no id"))
}

/// The memories of `namespace` holding every word of `query`, newest first, at most `limit`
/// (0 for no limit).
pub(crate) async fn search(
    conn: &mut impl Conn,
    namespace: &str,
    query: &str,
    limit: u32,
) -> Result<Vec<MemoryRecord>, StoreError> {
    let patterns = patterns(query);
    // Only numbered placeholders are added to the statement; every value is bound.
    let mut sql = String::from("SELECT id, namespace, content, created_at FROM memories WHERE namespace = $1");
    for i in 0..patterns.len() {
        sql.push_str(&format!(" AND lower(content) LIKE ${} ESCAPE '\\'", i + 2));
    }
    sql.push_str(" ORDER BY id DESC");
    if limit > 0 {
        sql.push_str(&format!(" LIMIT ${}", patterns.len() + 2));
    }
    let mut params = vec![Param::Text(namespace)];
    params.extend(patterns.iter().map(|pattern| Param::Text(pattern)));
    if limit > 0 {
        params.push(Param::Int(i64::from(limit)));
    }
    Ok(conn.fetch_all(&Statement::built(sql), &params, decode::memory).await?)
}

/// The words of a memory query, at most eight, each a `LIKE` pattern with `%`, `_` and
/// `\\` escaped.
fn patterns(query: &str) -> Vec<String> {
    query
        .split_whitespace()
        .take(8)
        .map(|word| {
            let escaped = word.to_lowercase().replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_");
            format!("%{escaped}%")
        })
        .collect()
}
