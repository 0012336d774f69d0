//! [`Token`]: a bearer token, as a server accepts it or a client presents it.

use std::fmt;

/// A bearer token. Its `Debug` never shows it; only [`expose`](Token::expose) does, for
/// the one place that sends or compares it.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    /// `token`, as configured.
    pub fn new(token: impl Into<String>) -> Self {
        Token(token.into())
    }

    /// The token's text.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The tokens in `value`, comma-separated, blanks dropped.
    ///
    /// ```
    /// use troupe_a2a::Token;
    ///
    /// let tokens = Token::list(" a, ,b ");
    /// assert_eq!(tokens.iter().map(Token::expose).collect::<Vec<_>>(), ["a", "b"]);
    /// assert_eq!(format!("{:?}", tokens[0]), "Token(***)");
    /// ```
    pub fn list(value: &str) -> Vec<Token> {
        value.split(',').map(str::trim).filter(|t| !t.is_empty()).map(Token::new).collect()
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(***)")
    }
}
