//! [`Param`]: a value bound to a statement.

/// A value bound to a statement's placeholder. A [`Conn`](super::Conn) binds each as its
/// driver's type.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Param<'a> {
    /// Text.
    Text(&'a str),
    /// Text or `NULL`.
    OptText(Option<&'a str>),
    /// An integer.
    Int(i64),
    /// An integer or `NULL`.
    OptInt(Option<i64>),
    /// A boolean.
    Bool(bool),
    /// A floating-point number or `NULL`.
    OptFloat(Option<f64>),
    /// A boolean or `NULL`.
    OptBool(Option<bool>),
    /// A list of strings: a `text[]` in PostgreSQL, a JSON array as text in SQLite.
    Texts(&'a [String]),
    /// A list of borrowed strings, some of them perhaps `NULL`, bound as
    /// [`Texts`](Self::Texts) is.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code, reason = "bound by PostgreSQL's statements only"))]
    OptTexts(&'a [Option<&'a str>]),
    /// A list of integers: a `bigint[]` in PostgreSQL, a JSON array as text in SQLite.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code, reason = "bound by PostgreSQL's statements only"))]
    Ints(&'a [i64]),
}
