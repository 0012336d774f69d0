//! [`skip`]: what a test does when this machine cannot run it.
//!
//! On a developer's machine a test whose peer is missing (a PostgreSQL server, an npm
//! client, a kernel feature) says so and passes, so the rest of the suite still runs.
//! Under CI (the `CI` variable set, as CI services set it and `.ci/run` does) nothing may
//! pass unrun: the same call fails the test, so a missing peer shows red, not green.

/// Says that `test` did not run here, and why; under CI, fails it instead.
///
/// # Panics
///
/// When `CI` is set to anything but empty, `0` or `false`.
pub fn skip(test: &str, why: &str) {
    if under_ci() {
        panic!("{test} cannot run: {why} (under CI a test that cannot run fails)");
    }
    eprintln!("skipped {test}: {why}");
}

/// Whether the suite runs under CI.
pub fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|value| !matches!(value.trim(), "" | "0" | "false"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn under_ci_a_skip_fails_and_elsewhere_it_passes() {
        let skipped = std::panic::catch_unwind(|| skip("a test", "no peer"));
        assert_eq!(skipped.is_err(), under_ci(), "a skip fails exactly when CI is set");
    }
}
