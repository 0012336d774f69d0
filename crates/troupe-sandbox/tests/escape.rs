//! The escape suite: a confined command tries every way out, in each mode, and the table
//! of what it could do is the one `docs/SECURITY.md` shows.

use std::net::{TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use troupe_sandbox::{Sandbox, SandboxError, SandboxMode};

const OUTSIDE_SECRET: &str = "s3cret-outside-the-workspace";
const ENV_SECRET: &str = "s3cret-in-another-process-environment";

/// A workspace beside a directory it must not reach, another process holding a secret in
/// its environment, and two network listeners.
struct Fixture {
    _root: tempfile::TempDir,
    workspace: PathBuf,
    outside: PathBuf,
    other: std::process::Child,
    tcp: TcpListener,
    udp: UdpSocket,
    /// A terminal's far end: the confined command's standard input, as the terminal troupe
    /// runs in would be.
    terminal: std::os::fd::OwnedFd,
    /// Its near end, kept open: a terminal whose near end is closed has hung up.
    _terminal_master: std::os::fd::OwnedFd,
}

impl Fixture {
    fn new() -> Self {
        let root = tempfile::tempdir().expect("a temporary directory");
        let workspace = root.path().join("workspace");
        let outside = root.path().join("outside");
        std::fs::create_dir_all(&workspace).expect("the workspace");
        std::fs::create_dir_all(&outside).expect("the outside directory");
        std::fs::write(outside.join("secret.txt"), OUTSIDE_SECRET).expect("the secret");
        std::fs::write(workspace.join("kept.txt"), "kept").expect("a workspace file");
        std::os::unix::fs::symlink(outside.join("secret.txt"), workspace.join("link-out")).expect("a symlink out");
        let other = std::process::Command::new("sleep")
            .arg("60")
            .env("TROUPE_ESCAPE_SECRET", ENV_SECRET)
            .stdin(Stdio::null())
            .spawn()
            .expect("another process starts");
        let tcp = TcpListener::bind("127.0.0.1:0").expect("a TCP listener");
        tcp.set_nonblocking(true).expect("non-blocking");
        let udp = UdpSocket::bind("127.0.0.1:0").expect("a UDP socket");
        udp.set_nonblocking(true).expect("non-blocking");
        let pty = nix::pty::openpty(None, None).expect("a terminal");
        Fixture { _root: root, workspace, outside, other, tcp, udp, terminal: pty.slave, _terminal_master: pty.master }
    }

    fn other_pid(&self) -> u32 {
        self.other.id()
    }

    fn tcp_port(&self) -> u16 {
        self.tcp.local_addr().expect("an address").port()
    }

    fn udp_port(&self) -> u16 {
        self.udp.local_addr().expect("an address").port()
    }

    /// The terminal, as a command's standard input.
    fn terminal_input(&self) -> Stdio {
        Stdio::from(self.terminal.try_clone().expect("the terminal's descriptor"))
    }

    fn other_alive(&mut self) -> bool {
        matches!(self.other.try_wait(), Ok(None))
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = self.other.kill();
        let _ = self.other.wait();
    }
}

/// What a command printed.
struct Output {
    stdout: String,
}

/// One way out: the command, and how to tell it got out.
struct Case {
    attempt: &'static str,
    command: fn(&Fixture) -> String,
    escaped: fn(&mut Fixture, &Output) -> bool,
    /// Whether it gets out in read-only, workspace-write and full.
    expected: [bool; 3],
}

const DENIED_UNLESS_FULL: [bool; 3] = [false, false, true];

fn cases() -> Vec<Case> {
    vec![
        Case {
            attempt: "read a file outside the workspace",
            command: |_| "cat ../outside/secret.txt".to_owned(),
            escaped: |_, out| out.stdout.contains(OUTSIDE_SECRET),
            expected: DENIED_UNLESS_FULL,
        },
        Case {
            attempt: "`cd ..` then read",
            command: |_| "cd .. && cat outside/secret.txt".to_owned(),
            escaped: |_, out| out.stdout.contains(OUTSIDE_SECRET),
            expected: DENIED_UNLESS_FULL,
        },
        Case {
            attempt: "read through a symlink in the workspace",
            command: |_| "cat link-out".to_owned(),
            escaped: |_, out| out.stdout.contains(OUTSIDE_SECRET),
            expected: DENIED_UNLESS_FULL,
        },
        Case {
            attempt: "hard-link an outside file in, then read",
            command: |_| "ln ../outside/secret.txt hard; cat hard".to_owned(),
            escaped: |_, out| out.stdout.contains(OUTSIDE_SECRET),
            expected: DENIED_UNLESS_FULL,
        },
        Case {
            attempt: "write a file outside the workspace",
            command: |_| "echo planted > ../outside/planted.txt".to_owned(),
            escaped: |f, _| f.outside.join("planted.txt").exists(),
            expected: DENIED_UNLESS_FULL,
        },
        Case {
            attempt: "delete a file outside the workspace",
            command: |_| "rm -f ../outside/secret.txt".to_owned(),
            escaped: |f, _| !f.outside.join("secret.txt").exists(),
            expected: DENIED_UNLESS_FULL,
        },
        Case {
            attempt: "write a file in the workspace",
            command: |_| "echo made > made.txt".to_owned(),
            escaped: |f, _| f.workspace.join("made.txt").exists(),
            expected: [false, true, true],
        },
        Case {
            attempt: "delete a file in the workspace",
            command: |_| "rm -f kept.txt".to_owned(),
            escaped: |f, _| !f.workspace.join("kept.txt").exists(),
            expected: [false, true, true],
        },
        Case {
            attempt: "connect over TCP",
            command: |f| format!("bash -c 'echo hello > /dev/tcp/127.0.0.1/{}'", f.tcp_port()),
            escaped: |f, _| f.tcp.accept().is_ok(),
            expected: DENIED_UNLESS_FULL,
        },
        Case {
            attempt: "send over UDP",
            command: |f| format!("bash -c 'echo hello > /dev/udp/127.0.0.1/{}'", f.udp_port()),
            escaped: |f, _| f.udp.recv(&mut [0u8; 64]).is_ok(),
            expected: DENIED_UNLESS_FULL,
        },
        Case {
            attempt: "read another process's environment (`/proc/PID/environ`)",
            command: |f| format!("cat /proc/{}/environ", f.other_pid()),
            escaped: |_, out| out.stdout.contains(ENV_SECRET),
            expected: DENIED_UNLESS_FULL,
        },
        Case {
            attempt: "read the parent's environment (`/proc/$PPID/environ`)",
            command: |_| "cat /proc/$PPID/environ".to_owned(),
            escaped: |_, out| out.stdout.contains("PATH="),
            expected: DENIED_UNLESS_FULL,
        },
        Case {
            attempt: "type into the terminal it was started from (`TIOCSTI`)",
            command: |_| {
                "python3 -c 'import fcntl, termios; fcntl.ioctl(0, termios.TIOCSTI, b\"#\"); print(\"typed\")'"
                    .to_owned()
            },
            escaped: |_, out| out.stdout.contains("typed"),
            expected: DENIED_UNLESS_FULL,
        },
        Case {
            attempt: "make a user namespace by `clone`",
            command: |_| {
                // clone(CLONE_NEWUSER | SIGCHLD): the parent prints, the child exits at once.
                "python3 -c 'import ctypes, os; pid = ctypes.CDLL(None).syscall(56, 0x10000000 | 17, 0, 0, 0, 0); \
                 os._exit(0) if pid == 0 else print(\"cloned\" if pid > 0 else \"refused\")'"
                    .to_owned()
            },
            escaped: |_, out| out.stdout.contains("cloned"),
            expected: DENIED_UNLESS_FULL,
        },
        Case {
            attempt: "open a terminal (`/dev/ptmx`)",
            command: |_| "exec 3<>/dev/ptmx && echo opened".to_owned(),
            escaped: |_, out| out.stdout.contains("opened"),
            expected: DENIED_UNLESS_FULL,
        },
        Case {
            attempt: "signal another process",
            command: |f| format!("kill -KILL {}", f.other_pid()),
            escaped: |f, _| {
                std::thread::sleep(Duration::from_millis(50));
                !f.other_alive()
            },
            expected: DENIED_UNLESS_FULL,
        },
    ]
}

/// Runs `command` with `sh -c` in `workspace`, confined by `sandbox`, reading `stdin`.
async fn run(sandbox: &Sandbox, workspace: &Path, command: &str, stdin: Stdio) -> Result<Output, SandboxError> {
    let mut cmd = tokio::process::Command::new("/bin/sh");
    cmd.args(["-c", command])
        .current_dir(workspace)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    let confined = sandbox.spawn(cmd, workspace).await?;
    let output = tokio::time::timeout(Duration::from_secs(20), confined.child.wait_with_output())
        .await
        .expect("the command ends")
        .expect("its output is read");
    Ok(Output { stdout: String::from_utf8_lossy(&output.stdout).into_owned() })
}

/// The table `docs/SECURITY.md` shows for `results` (one row per case).
fn table(rows: &[(&str, [bool; 3])]) -> String {
    let mut out = String::from("| attempt | read-only | workspace-write | full |\n| --- | --- | --- | --- |\n");
    for (attempt, got_out) in rows {
        let cell = |out: bool| if out { "allowed" } else { "**denied**" };
        out.push_str(&format!("| {attempt} | {} | {} | {} |\n", cell(got_out[0]), cell(got_out[1]), cell(got_out[2])));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_way_out_in_any_mode_but_full_and_the_table_says_so() {
    let mut rows = Vec::new();
    let mut wrong = Vec::new();
    for case in cases() {
        let mut got_out = [false; 3];
        for (i, mode) in SandboxMode::ALL.into_iter().enumerate() {
            let mut fixture = Fixture::new();
            let command = (case.command)(&fixture);
            let output = run(&Sandbox::new(mode), &fixture.workspace, &command, fixture.terminal_input())
                .await
                .unwrap_or_else(|e| panic!("`{command}` in {mode}: {e}"));
            got_out[i] = (case.escaped)(&mut fixture, &output);
            if got_out[i] != case.expected[i] {
                wrong.push(format!(
                    "{} in {mode}: {}",
                    case.attempt,
                    if got_out[i] { "got out" } else { "was stopped" }
                ));
            }
        }
        rows.push((case.attempt, got_out));
    }
    assert!(wrong.is_empty(), "unexpected outcomes:\n{}", wrong.join("\n"));

    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/SECURITY.md"))
        .expect("docs/SECURITY.md");
    let rendered = table(&rows);
    assert!(doc.contains(&rendered), "docs/SECURITY.md should show the escape suite's table:\n{rendered}");
}

/// The devices the sandbox grants are there to use: the random ones read, the null ones
/// read and written.
#[tokio::test]
async fn a_confined_command_reads_the_random_devices_and_uses_the_null_ones() {
    let fixture = Fixture::new();
    let command = "head -c 16 /dev/urandom | wc -c; head -c 8 /dev/random | wc -c; \
                   echo gone > /dev/null && head -c 4 /dev/zero | wc -c";
    let output = run(&Sandbox::new(SandboxMode::ReadOnly), &fixture.workspace, command, Stdio::null())
        .await
        .expect("the command runs");
    let counts: Vec<&str> = output.stdout.split_whitespace().collect();
    assert_eq!(counts, ["16", "8", "4"], "{}", output.stdout);
}

#[tokio::test]
async fn granted_network_reaches_the_network_and_nothing_else_opens() {
    let fixture = Fixture::new();
    let sandbox = Sandbox::new(SandboxMode::WorkspaceWrite).with_network(true);
    let command =
        format!("bash -c 'echo hello > /dev/tcp/127.0.0.1/{}'; cat ../outside/secret.txt", fixture.tcp_port());
    let output = run(&sandbox, &fixture.workspace, &command, Stdio::null()).await.expect("the command runs");
    assert!(fixture.tcp.accept().is_ok(), "with the network granted, the connection is made");
    assert!(!output.stdout.contains(OUTSIDE_SECRET), "the files stay confined");
}

#[tokio::test]
async fn a_confined_command_gets_a_private_temporary_directory_removed_after_it() {
    let fixture = Fixture::new();
    let mut cmd = tokio::process::Command::new("/bin/sh");
    cmd.args(["-c", "echo scratch > \"$TMPDIR/scratch\" && cat \"$TMPDIR/scratch\" && echo \"$TMPDIR\""])
        .current_dir(&fixture.workspace)
        .stdout(Stdio::piped());
    let mut confined =
        Sandbox::new(SandboxMode::ReadOnly).spawn(cmd, &fixture.workspace).await.expect("the command starts");
    let temp = confined.temp_dir().expect("a confined command has a temporary directory").to_path_buf();
    let mut stdout = String::new();
    let mut pipe = confined.child.stdout.take().expect("stdout");
    tokio::io::AsyncReadExt::read_to_string(&mut pipe, &mut stdout).await.expect("stdout is read");
    confined.child.wait().await.expect("the command ends");
    assert_eq!(stdout.lines().next(), Some("scratch"), "the command writes its temporary directory");
    assert_eq!(stdout.lines().nth(1), Some(temp.to_str().expect("utf-8")));
    let report = confined.report.clone();
    assert!(report.to_string().starts_with("sandbox: read-only (landlock ABI "), "{report}");
    assert!(report.seccomp && !report.network);
    drop(confined);
    assert!(!temp.exists(), "the temporary directory is removed with the command");
}

/// A fork bomb stops at the process limit. Linux applies no process limit to root, so
/// under root the bomb runs in a child of this test as an unprivileged user.
#[test]
fn a_fork_bomb_stops_at_the_process_limit() {
    if std::env::var_os("TROUPE_FORK_BOMB_CHILD").is_some() {
        return fork_bomb();
    }
    let mut child = std::process::Command::new(std::env::current_exe().expect("this test binary"));
    child.args(["--exact", "a_fork_bomb_stops_at_the_process_limit", "--nocapture", "--test-threads=1"]);
    child.env("TROUPE_FORK_BOMB_CHILD", "1");
    if nix::unistd::getuid().is_root() {
        use std::os::unix::process::CommandExt;
        child.uid(65534).gid(65534);
    }
    let output = child.output().expect("the child test runs");
    assert!(
        output.status.success(),
        "the fork bomb's test failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

fn fork_bomb() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    runtime.block_on(async {
        let root = tempfile::tempdir().expect("a temporary directory");
        let mut cmd = tokio::process::Command::new("/bin/sh");
        cmd.args(["-c", "bomb() { bomb | bomb & }; bomb; sleep 3"])
            .current_dir(root.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .process_group(0);
        let confined =
            Sandbox::new(SandboxMode::WorkspaceWrite).spawn(cmd, root.path()).await.expect("the bomb starts");
        let pgid = nix::unistd::Pid::from_raw(confined.child.id().expect("a pid") as i32);
        let mut child = confined.child;
        let mut stderr = child.stderr.take().expect("stderr");
        tokio::time::sleep(Duration::from_secs(3)).await;
        let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
        let _ = child.wait().await;
        let mut seen = Vec::new();
        let _ =
            tokio::time::timeout(Duration::from_secs(2), tokio::io::AsyncReadExt::read_to_end(&mut stderr, &mut seen))
                .await;
        let seen = String::from_utf8_lossy(&seen);
        assert!(seen.contains("fork"), "the bomb met the process limit (\"Cannot fork\"), stderr: {seen}");
    });
}
