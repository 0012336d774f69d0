//! [`Conn`]: where the store's operations run their statements.

use super::{Decoder, Dialect, Param, Statement};
use crate::error::StoreError;
use std::future::Future;

/// Which refusal of the database an error is, when the store gives it a meaning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// A duplicate key.
    Unique,
    /// A reference to a missing row.
    ForeignKey,
    /// Anything else.
    Other,
}

/// A statement that failed: which [`Failure`] it is, and the error to report otherwise.
#[derive(Debug)]
pub(crate) struct DbError {
    /// What the database refused.
    pub(crate) failure: Failure,
    /// The error, as reported when the failure has no meaning of its own.
    pub(crate) error: StoreError,
}

impl DbError {
    /// An error with no meaning of its own to the store.
    pub(crate) fn other(error: StoreError) -> DbError {
        DbError { failure: Failure::Other, error }
    }

    /// `meaning` when the database refused the statement with `failure`, the error as it
    /// is otherwise.
    pub(crate) fn when(self, failure: Failure, meaning: impl FnOnce() -> StoreError) -> StoreError {
        if self.failure == failure { meaning() } else { self.error }
    }
}

impl From<DbError> for StoreError {
    fn from(error: DbError) -> StoreError {
        error.error
    }
}

/// A connection, or a transaction, of one backend's driver.
///
/// The SQLite writer thread's connection answers at once (its futures are ready when
/// polled); the others wait for their driver.
pub(crate) trait Conn {
    /// The SQL this connection speaks.
    type Dialect: Dialect;

    /// Runs `statement`; how many rows it changed.
    fn execute(&mut self, statement: &Statement, params: &[Param<'_>]) -> impl Future<Output = Result<u64, DbError>>;

    /// Runs `statement` and decodes the row it returned, if any.
    fn fetch_optional<T>(
        &mut self,
        statement: &Statement,
        params: &[Param<'_>],
        decode: Decoder<T>,
    ) -> impl Future<Output = Result<Option<T>, DbError>>;

    /// Runs `statement` and decodes every row it returned.
    fn fetch_all<T>(
        &mut self,
        statement: &Statement,
        params: &[Param<'_>],
        decode: Decoder<T>,
    ) -> impl Future<Output = Result<Vec<T>, DbError>>;
}
