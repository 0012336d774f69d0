//! [`at_a_terminal`]: a command run as a person runs it, its stdin and stderr a
//! pseudo-terminal, answered as its questions appear.

use std::io::{Read, Write};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The answer that is Ctrl-C.
pub const INTERRUPT: &str = "\u{3}";

/// How long a question may take to appear before the test fails.
const QUESTION_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs `command` with a pseudo-terminal as its stdin and stderr (stdout captured): each
/// time the screen shows one more of `questions` (any of them: a prompt, a question), the
/// next of `answers` is typed, followed by Enter (an answer may hold several lines);
/// the answer [`INTERRUPT`] is Ctrl-C instead, sent to the command as `SIGINT` (the
/// terminal is not the command's controlling terminal, so typing it would not be).
/// Returns the output and everything the terminal showed.
///
/// # Panics
///
/// When no pseudo-terminal can be opened, the command cannot start, or a question does
/// not appear within a minute: a test's failure.
pub fn at_a_terminal(command: &mut Command, questions: &[&str], answers: &[&str]) -> (Output, String) {
    let pty = nix::pty::openpty(None, None).expect("a pseudo-terminal");
    let terminal = || Stdio::from(pty.slave.try_clone().expect("the terminal's other end"));
    let child =
        command.stdin(terminal()).stderr(terminal()).stdout(Stdio::piped()).spawn().expect("the command starts");
    drop(pty.slave);
    let screen = Arc::new(Mutex::new(String::new()));
    let mut master = std::fs::File::from(pty.master);
    let mut reader = master.try_clone().expect("the terminal's reading end");
    let seen = Arc::clone(&screen);
    std::thread::spawn(move || {
        let mut buffer = [0u8; 4096];
        // Reading fails (EIO) once the child has closed the terminal.
        while let Ok(n @ 1..) = reader.read(&mut buffer) {
            seen.lock().expect("the screen").push_str(&String::from_utf8_lossy(&buffer[..n]));
        }
    });
    for (n, answer) in answers.iter().enumerate() {
        let deadline = Instant::now() + QUESTION_TIMEOUT;
        let asked = |screen: &str| questions.iter().map(|q| screen.matches(q).count()).sum::<usize>();
        while asked(&screen.lock().expect("the screen")) <= n {
            assert!(Instant::now() < deadline, "no question came: {}", screen.lock().expect("the screen"));
            std::thread::sleep(Duration::from_millis(20));
        }
        if *answer == INTERRUPT {
            let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("a pid"));
            nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).expect("interrupts");
        } else {
            master.write_all(format!("{answer}\n").as_bytes()).expect("answers");
        }
    }
    let output = child.wait_with_output().expect("the command ends");
    let shown = screen.lock().expect("the screen").clone();
    (output, shown)
}
