//! What the store's operations need from a database, whichever it is: statements written
//! once ([`Statement`]) in a [`Dialect`] of SQL, the values bound to them ([`Param`]), a
//! connection or transaction to run them on ([`Conn`]) and the columns of the rows they
//! return ([`Columns`]).
//!
//! The operations themselves (`crate::ops`) are written once over these; a backend only
//! supplies a [`Conn`] for its driver, and decides which transaction (or which thread) each
//! operation runs in.

// The macros first: the modules after them, and the rest of the crate, use them.
#[macro_use]
pub(crate) mod statement;
#[macro_use]
pub(crate) mod sqlx_link;
mod columns;
mod conn;
mod dialect;
mod param;

pub(crate) use columns::{Columns, Decoder, column_error};
pub(crate) use conn::{Conn, DbError, Failure};
pub(crate) use dialect::Dialect;
#[cfg(feature = "postgres")]
pub(crate) use dialect::Postgres;
#[cfg(feature = "sqlite")]
pub(crate) use dialect::Sqlite;
pub(crate) use param::Param;
pub(crate) use statement::Statement;
