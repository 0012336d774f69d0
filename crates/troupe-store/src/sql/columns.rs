//! [`Columns`]: reading a returned row's columns by name, whichever driver returned it.

use crate::error::StoreError;
use serde_json::Value;

/// How a row of a statement becomes a value.
pub(crate) type Decoder<T> = fn(&dyn Columns) -> Result<T, StoreError>;

/// A returned row. A value of the wrong type is a [`StoreError::Decode`] naming its column.
pub(crate) trait Columns {
    /// A text column.
    fn text(&self, name: &str) -> Result<String, StoreError>;
    /// A text column that may be `NULL`.
    fn opt_text(&self, name: &str) -> Result<Option<String>, StoreError>;
    /// An integer column.
    fn int(&self, name: &str) -> Result<i64, StoreError>;
    /// An integer column that may be `NULL`.
    fn opt_int(&self, name: &str) -> Result<Option<i64>, StoreError>;
    /// A boolean column.
    fn flag(&self, name: &str) -> Result<bool, StoreError>;
    /// A floating-point column.
    fn float(&self, name: &str) -> Result<f64, StoreError>;
    /// A list of strings (see [`Param::Texts`](super::Param::Texts)); `what` names the
    /// value when it cannot be read.
    fn texts(&self, name: &str, what: &dyn Fn() -> String) -> Result<Vec<String>, StoreError>;
}

impl dyn Columns + '_ {
    /// The JSON document stored as text in column `name`; `what` names it when it cannot
    /// be read.
    pub(crate) fn json(&self, name: &str, what: impl FnOnce() -> String) -> Result<Value, StoreError> {
        let text = self.text(name)?;
        serde_json::from_str(&text).map_err(|e| StoreError::decode(what(), e))
    }
}

/// A [`StoreError::Decode`] of column `name`.
pub(crate) fn column_error(name: &str, error: impl std::fmt::Display) -> StoreError {
    StoreError::decode(format!("column `{name}`"), error)
}
