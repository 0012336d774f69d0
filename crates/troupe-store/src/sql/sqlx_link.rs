//! The [`Conn`](super::Conn) of a `sqlx` driver, for each backend that reads (or writes)
//! through one: its pool, or one of its connections.

use super::{DbError, Failure};
use crate::error::StoreError;

/// What the database refused, from a `sqlx` error.
pub(crate) fn classify(error: sqlx::Error) -> DbError {
    let failure = match &error {
        sqlx::Error::Database(e) if e.is_unique_violation() => Failure::Unique,
        sqlx::Error::Database(e) if e.is_foreign_key_violation() => Failure::ForeignKey,
        _ => Failure::Other,
    };
    DbError { failure, error: StoreError::database(error) }
}

/// Defines `$name`, the [`Conn`](crate::sql::Conn) of the `sqlx` database `$db` speaking
/// `$dialect`, and [`Columns`](crate::sql::Columns) for its rows; `$bind_texts` binds a
/// [`Param::Texts`](crate::sql::Param::Texts) (and the other lists) and `$texts` reads one
/// back.
macro_rules! sqlx_link {
    ($(#[$doc:meta])* $name:ident, $db:ty, $row:ty, $dialect:ty, bind_texts: $bind_texts:expr, bind_opt_texts: $bind_opt_texts:expr, bind_ints: $bind_ints:expr, texts: $texts:expr $(,)?) => {
        $(#[$doc])*
        pub(crate) enum $name<'c> {
            /// The pool: each statement in a transaction of its own.
            #[allow(dead_code, reason = "PostgreSQL's statements run on the store's own connections")]
            Pool(&'c sqlx::Pool<$db>),
            /// One connection, in a transaction or not.
            #[allow(dead_code, reason = "SQLite reads through its pool alone; its writes run on its writer thread")]
            Conn(&'c mut <$db as sqlx::Database>::Connection),
        }

        impl $name<'_> {
            /// `statement` with `params` bound.
            fn query<'q>(
                statement: &$crate::sql::Statement,
                params: &[$crate::sql::Param<'q>],
            ) -> sqlx::query::Query<'q, $db, <$db as sqlx::Database>::Arguments> {
                use $crate::sql::{Dialect as _, Param};
                let text = <$dialect>::text(statement).clone();
                // Only the statement's own text: every value is bound.
                params.iter().fold(sqlx::query(sqlx::AssertSqlSafe(text)), |query, param| match *param {
                    Param::Text(value) => query.bind(value),
                    Param::OptText(value) => query.bind(value),
                    Param::Int(value) => query.bind(value),
                    Param::OptInt(value) => query.bind(value),
                    Param::Bool(value) => query.bind(value),
                    Param::OptFloat(value) => query.bind(value),
                    Param::OptBool(value) => query.bind(value),
                    Param::Texts(values) => $bind_texts(query, values),
                    Param::OptTexts(values) => $bind_opt_texts(query, values),
                    Param::Ints(values) => $bind_ints(query, values),
                })
            }
        }

        impl $crate::sql::Conn for $name<'_> {
            type Dialect = $dialect;

            async fn execute(
                &mut self,
                statement: &$crate::sql::Statement,
                params: &[$crate::sql::Param<'_>],
            ) -> Result<u64, $crate::sql::DbError> {
                let query = Self::query(statement, params);
                let done = match self {
                    Self::Pool(pool) => query.execute(*pool).await,
                    Self::Conn(conn) => query.execute(&mut **conn).await,
                };
                done.map(|done| done.rows_affected()).map_err($crate::sql::sqlx_link::classify)
            }

            async fn fetch_optional<T>(
                &mut self,
                statement: &$crate::sql::Statement,
                params: &[$crate::sql::Param<'_>],
                decode: $crate::sql::Decoder<T>,
            ) -> Result<Option<T>, $crate::sql::DbError> {
                let query = Self::query(statement, params);
                let row = match self {
                    Self::Pool(pool) => query.fetch_optional(*pool).await,
                    Self::Conn(conn) => query.fetch_optional(&mut **conn).await,
                }
                .map_err($crate::sql::sqlx_link::classify)?;
                row.as_ref().map(|row| decode(row)).transpose().map_err($crate::sql::DbError::other)
            }

            async fn fetch_all<T>(
                &mut self,
                statement: &$crate::sql::Statement,
                params: &[$crate::sql::Param<'_>],
                decode: $crate::sql::Decoder<T>,
            ) -> Result<Vec<T>, $crate::sql::DbError> {
                let query = Self::query(statement, params);
                let rows = match self {
                    Self::Pool(pool) => query.fetch_all(*pool).await,
                    Self::Conn(conn) => query.fetch_all(&mut **conn).await,
                }
                .map_err($crate::sql::sqlx_link::classify)?;
                rows.iter().map(|row| decode(row)).collect::<Result<_, _>>().map_err($crate::sql::DbError::other)
            }
        }

        impl $crate::sql::Columns for $row {
            fn text(&self, name: &str) -> Result<String, $crate::error::StoreError> {
                sqlx::Row::try_get(self, name).map_err(|e| $crate::sql::column_error(name, e))
            }

            fn opt_text(&self, name: &str) -> Result<Option<String>, $crate::error::StoreError> {
                sqlx::Row::try_get(self, name).map_err(|e| $crate::sql::column_error(name, e))
            }

            fn int(&self, name: &str) -> Result<i64, $crate::error::StoreError> {
                sqlx::Row::try_get(self, name).map_err(|e| $crate::sql::column_error(name, e))
            }

            fn opt_int(&self, name: &str) -> Result<Option<i64>, $crate::error::StoreError> {
                sqlx::Row::try_get(self, name).map_err(|e| $crate::sql::column_error(name, e))
            }

            fn flag(&self, name: &str) -> Result<bool, $crate::error::StoreError> {
                sqlx::Row::try_get(self, name).map_err(|e| $crate::sql::column_error(name, e))
            }

            fn float(&self, name: &str) -> Result<f64, $crate::error::StoreError> {
                sqlx::Row::try_get(self, name).map_err(|e| $crate::sql::column_error(name, e))
            }

            fn texts(&self, name: &str, what: &dyn Fn() -> String) -> Result<Vec<String>, $crate::error::StoreError> {
                $texts(self, name, what)
            }
        }
    };
}
