//! The store's [`Conn`](crate::sql::Conn) on PostgreSQL: the pool, or one of its
//! connections (a transaction's).

use crate::error::StoreError;
use crate::sql::{Postgres, column_error};

type Query<'q> = sqlx::query::Query<'q, sqlx::Postgres, <sqlx::Postgres as sqlx::Database>::Arguments>;

sqlx_link!(
    /// The pool of the store, or one of its connections.
    Pg,
    sqlx::Postgres,
    sqlx::postgres::PgRow,
    Postgres,
    bind_texts: bind_array,
    texts: array_column,
);

/// Binds a list of strings as a `text[]`.
fn bind_array<'q>(query: Query<'q>, values: &[String]) -> Query<'q> {
    query.bind(values)
}

/// The `text[]` in column `name`.
fn array_column(
    row: &sqlx::postgres::PgRow,
    name: &str,
    _what: &dyn Fn() -> String,
) -> Result<Vec<String>, StoreError> {
    sqlx::Row::try_get(row, name).map_err(|e| column_error(name, e))
}
