//! Checks on ids that arrive in paths and bodies, before they reach a map or a store.

use crate::error::ApiError;

/// The longest id accepted.
pub const MAX_ID_LEN: usize = 128;

/// `id` when it is 1–128 characters of `A–Z a–z 0–9 _ - . :` and not a dot-only
/// segment; otherwise a 400 naming what was wrong (the id itself is not echoed, as it
/// may be anything).
pub fn checked_id<'a>(what: &str, id: &'a str) -> Result<&'a str, ApiError> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':');
    if id.is_empty() || id.len() > MAX_ID_LEN || !id.chars().all(allowed) || id.chars().all(|c| c == '.') {
        return Err(ApiError::bad_request(
            "invalid_id",
            format!(
                "{what} ids are 1 to {MAX_ID_LEN} characters of letters, digits, `_`, `-`, `.` and `:`, not dots alone"
            ),
        ));
    }
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_ids_pass_and_traversal_does_not() {
        assert!(checked_id("run", "run_01HZ-abc.1:2").is_ok());
        for bad in ["", "..", ".", "../etc/passwd", "a/b", "a\\b", "a b", "a\0b", &"x".repeat(129)] {
            let error = checked_id("run", bad).expect_err(bad);
            assert_eq!(error.code, "invalid_id");
        }
    }
}
