//! [`line_column`]: where a byte offset of a text is, as people count: for the
//! `file:line:column` of every configuration error.

/// The 1-based line and column (in characters, not bytes) of byte `offset` of `text`; an
/// offset past the end, or inside a character, counts from the character it falls in.
///
/// ```
/// assert_eq!(troupe_core::line_column("a = 1\nbé = x\n", 10), (2, 4));
/// ```
pub fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut end = offset.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let before = &text[..end];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}
