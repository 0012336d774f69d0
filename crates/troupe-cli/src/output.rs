//! Writing to stdout and stderr without panicking when a write fails.
//!
//! `outln!` and `diagln!` panic when a write fails, and a write fails as soon as the
//! other end of a pipe is closed: `troupe runs show RUN | head -1`, or a server whose log
//! reader went away. The crate's own macros (`outln!`, `out!`, `diagln!`, `diag!`, defined
//! in `main.rs`) write through here instead, and a command's exit status stays its own:
//!
//! - **stdout** carries results. When its reader has gone, the rest of them is dropped: a
//!   reader that stopped early (`| head`) is not a failure, as everywhere else in the CLI
//!   (a run's output, which is streamed, cancels the run instead; see `render`). Any other
//!   failed write (a full disk behind `> file`) loses results the user asked for: it is
//!   kept, and [`stdout_failure`] turns the command's success into exit status 1.
//! - **stderr** carries diagnostics. A diagnostic nobody can read is dropped: a server, a
//!   worker or a run goes on without its log rather than dying of it.

use std::fmt;
use std::io::{self, Write};
use std::sync::OnceLock;

/// The first write to stdout that failed for a reason other than a closed pipe.
static STDOUT_FAILURE: OnceLock<String> = OnceLock::new();

/// Writes to stdout; see the module's documentation for what a failed write does.
pub(crate) fn stdout(args: fmt::Arguments<'_>) {
    let mut out = io::stdout().lock();
    if let Err(error) = out.write_fmt(args) {
        failed(&error);
    }
}

/// Flushes stdout (after `out!` without a line's end, e.g. a prompt).
pub(crate) fn flush_stdout() {
    if let Err(error) = io::stdout().lock().flush() {
        failed(&error);
    }
}

/// Writes to stderr; a write that fails is dropped (there is nowhere left to say so).
pub(crate) fn stderr(args: fmt::Arguments<'_>) {
    let _ = io::stderr().lock().write_fmt(args);
}

/// Why a write to stdout failed, unless only because its reader had gone.
pub(crate) fn stdout_failure() -> Option<&'static str> {
    STDOUT_FAILURE.get().map(String::as_str)
}

fn failed(error: &io::Error) {
    if error.kind() != io::ErrorKind::BrokenPipe {
        let _ = STDOUT_FAILURE.set(error.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_pipe_is_not_a_failure_and_any_other_error_is() {
        failed(&io::Error::from(io::ErrorKind::BrokenPipe));
        assert_eq!(stdout_failure(), None);
        failed(&io::Error::other("No space left on device"));
        assert_eq!(stdout_failure(), Some("No space left on device"));
    }
}
