//! The store's [`Conn`]s on SQLite: [`Writing`], the writer thread's connection (`rusqlite`),
//! and [`Pooled`], the `sqlx` pool or one of its connections.

use crate::error::StoreError;
use crate::sql::{Columns, Conn, DbError, Decoder, Dialect, Failure, Param, Sqlite, Statement, column_error};
use rusqlite::types::{ToSqlOutput, Value as SqlValue, ValueRef};
use rusqlite::{Connection, ToSql, params_from_iter};
use serde_json::Value;
use std::future::Future;

sqlx_link!(
    /// The `sqlx` pool of the store, or one of its connections.
    Pooled,
    sqlx::Sqlite,
    sqlx::sqlite::SqliteRow,
    Sqlite,
    bind_texts: bind_json_list,
    bind_opt_texts: bind_json_list,
    bind_ints: bind_json_list,
    texts: json_list_column,
);

type Query<'q> = sqlx::query::Query<'q, sqlx::Sqlite, <sqlx::Sqlite as sqlx::Database>::Arguments>;

/// Binds a list as SQLite stores it.
fn bind_json_list<'q, T: Clone + Into<Value>>(query: Query<'q>, values: &[T]) -> Query<'q> {
    query.bind(json_list(values))
}

/// A list of strings stored in column `name`.
fn json_list_column(
    row: &sqlx::sqlite::SqliteRow,
    name: &str,
    what: &dyn Fn() -> String,
) -> Result<Vec<String>, StoreError> {
    let text: String = sqlx::Row::try_get(row, name).map_err(|e| column_error(name, e))?;
    serde_json::from_str(&text).map_err(|e| StoreError::decode(what(), e))
}

/// A list as SQLite stores it: a JSON array.
fn json_list<T: Clone + Into<Value>>(values: &[T]) -> String {
    Value::from(values).to_string()
}

/// The writer thread's connection, inside the transaction of its group.
pub(super) struct Writing<'c>(pub(super) &'c Connection);

/// The value of an operation run on the writer thread: its futures are ready at once, as
/// `rusqlite` answers synchronously.
pub(super) fn at_once<T>(operation: impl Future<Output = Result<T, StoreError>>) -> Result<T, StoreError> {
    use futures::FutureExt;
    operation.now_or_never().unwrap_or_else(|| Err(StoreError::database("a write on the writer thread waited")))
}

impl Conn for Writing<'_> {
    type Dialect = Sqlite;

    async fn execute(&mut self, statement: &Statement, params: &[Param<'_>]) -> Result<u64, DbError> {
        let mut prepared = self.0.prepare_cached(Sqlite::text(statement)).map_err(classify)?;
        let changed = prepared.execute(params_from_iter(params)).map_err(classify)?;
        Ok(u64::try_from(changed).unwrap_or(u64::MAX))
    }

    async fn fetch_optional<T>(
        &mut self,
        statement: &Statement,
        params: &[Param<'_>],
        decode: Decoder<T>,
    ) -> Result<Option<T>, DbError> {
        let mut prepared = self.0.prepare_cached(Sqlite::text(statement)).map_err(classify)?;
        let mut rows = prepared.query(params_from_iter(params)).map_err(classify)?;
        match rows.next().map_err(classify)? {
            Some(row) => decode(row).map(Some).map_err(DbError::other),
            None => Ok(None),
        }
    }

    async fn fetch_all<T>(
        &mut self,
        statement: &Statement,
        params: &[Param<'_>],
        decode: Decoder<T>,
    ) -> Result<Vec<T>, DbError> {
        let mut prepared = self.0.prepare_cached(Sqlite::text(statement)).map_err(classify)?;
        let mut rows = prepared.query(params_from_iter(params)).map_err(classify)?;
        let mut decoded = Vec::new();
        while let Some(row) = rows.next().map_err(classify)? {
            decoded.push(decode(row).map_err(DbError::other)?);
        }
        Ok(decoded)
    }
}

/// What SQLite refused, from a `rusqlite` error.
fn classify(error: rusqlite::Error) -> DbError {
    let failure = match error.sqlite_error().map(|e| e.extended_code) {
        Some(rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE | rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY) => Failure::Unique,
        Some(rusqlite::ffi::SQLITE_CONSTRAINT_FOREIGNKEY) => Failure::ForeignKey,
        _ => Failure::Other,
    };
    DbError { failure, error: StoreError::database(error) }
}

impl ToSql for Param<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match *self {
            Param::Text(text) | Param::OptText(Some(text)) => ToSqlOutput::Borrowed(ValueRef::Text(text.as_bytes())),
            Param::OptText(None) | Param::OptInt(None) | Param::OptFloat(None) | Param::OptBool(None) => {
                ToSqlOutput::Owned(SqlValue::Null)
            }
            Param::OptFloat(Some(value)) => ToSqlOutput::Owned(SqlValue::Real(value)),
            Param::Int(value) | Param::OptInt(Some(value)) => ToSqlOutput::Owned(SqlValue::Integer(value)),
            Param::Bool(value) | Param::OptBool(Some(value)) => ToSqlOutput::Owned(SqlValue::Integer(i64::from(value))),
            Param::Texts(values) => ToSqlOutput::Owned(SqlValue::Text(json_list(values))),
            Param::OptTexts(values) => ToSqlOutput::Owned(SqlValue::Text(json_list(values))),
            Param::Ints(values) => ToSqlOutput::Owned(SqlValue::Text(json_list(values))),
        })
    }
}

impl Columns for rusqlite::Row<'_> {
    fn text(&self, name: &str) -> Result<String, StoreError> {
        self.get(name).map_err(|e| column_error(name, e))
    }

    fn opt_text(&self, name: &str) -> Result<Option<String>, StoreError> {
        self.get(name).map_err(|e| column_error(name, e))
    }

    fn int(&self, name: &str) -> Result<i64, StoreError> {
        self.get(name).map_err(|e| column_error(name, e))
    }

    fn opt_int(&self, name: &str) -> Result<Option<i64>, StoreError> {
        self.get(name).map_err(|e| column_error(name, e))
    }

    fn flag(&self, name: &str) -> Result<bool, StoreError> {
        self.get(name).map_err(|e| column_error(name, e))
    }

    fn float(&self, name: &str) -> Result<f64, StoreError> {
        self.get(name).map_err(|e| column_error(name, e))
    }

    fn texts(&self, name: &str, what: &dyn Fn() -> String) -> Result<Vec<String>, StoreError> {
        let text = self.text(name)?;
        serde_json::from_str(&text).map_err(|e| StoreError::decode(what(), e))
    }
}
