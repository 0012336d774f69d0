//! The store's [`Conn`](crate::sql::Conn) on PostgreSQL: one of its connections (in a
//! transaction or not), or a pool (its tests').

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
    bind_opt_texts: bind_opt_texts,
    bind_ints: bind_ints,
    texts: array_column,
);

/// Binds a list of strings as a `text[]`.
fn bind_array<'q>(query: Query<'q>, values: &'q [String]) -> Query<'q> {
    query.bind(values)
}

/// Binds a list of strings and `NULL`s as a `text[]`.
fn bind_opt_texts<'q>(query: Query<'q>, values: &'q [Option<&'q str>]) -> Query<'q> {
    query.bind(values)
}

/// Binds a list of integers as a `bigint[]`.
fn bind_ints<'q>(query: Query<'q>, values: &'q [i64]) -> Query<'q> {
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
