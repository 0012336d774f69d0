//! The workspace-escape suite: no built-in tool reads, writes or lists outside the workspace.

use crate::common;

use common::{Fixture, SECRET, assert_outside, err, ok};
use serde_json::json;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;
use troupe_tools::{Sandbox, SandboxMode, ToolContext, ToolError, Workspace};

#[tokio::test]
async fn parent_dir_climbing_is_refused() {
    let fx = Fixture::new();
    assert_outside(&fx.call("fs.read", json!({"path": "../outside/secret.txt"})).await);
    assert_outside(&fx.call("fs.read", json!({"path": "a/../../outside/secret.txt"})).await);
    assert_outside(&fx.call("fs.write", json!({"path": "a/../../x", "content": "x"})).await);
    assert!(!fx.root.parent().expect("parent").join("x").exists());
    assert_outside(&fx.call("fs.list", json!({"path": ".."})).await);
    assert_outside(&fx.call("fs.glob", json!({"pattern": "*", "path": "../outside"})).await);
    assert_outside(&fx.call("grep", json!({"pattern": "SECRET", "path": ".."})).await);
    assert_outside(&fx.call("git.diff", json!({"path": "../outside"})).await);
    let message = fx.call("fs.read", json!({"path": "../x"})).await.content;
    assert!(message.contains("`..` climbs above the workspace root"), "{message}");
}

#[tokio::test]
async fn climbing_back_down_inside_is_fine() {
    let fx = Fixture::new();
    fx.write("a/b.txt", "inside\n");
    let outcome = fx.call("fs.read", json!({"path": "a/../a/./b.txt"})).await;
    assert!(ok(&outcome).contains("inside"));
}

#[tokio::test]
async fn absolute_paths_are_refused_even_inside_the_workspace() {
    let fx = Fixture::new();
    fx.write("a.txt", "inside\n");
    let secret = fx.outside.join("secret.txt");
    assert_outside(&fx.call("fs.read", json!({"path": secret})).await);
    assert_outside(&fx.call("fs.read", json!({"path": fx.root.join("a.txt")})).await);
    assert_outside(&fx.call("fs.write", json!({"path": fx.outside.join("new.txt"), "content": "x"})).await);
    assert_outside(&fx.call("fs.list", json!({"path": "/"})).await);
    assert!(!fx.outside.join("new.txt").exists());
    let message = fx.call("fs.read", json!({"path": "/etc/passwd"})).await.content;
    assert!(message.contains("absolute paths are not accepted"), "{message}");
}

#[tokio::test]
async fn a_symlinked_file_leading_out_is_neither_read_nor_written() {
    let fx = Fixture::new();
    let secret = fx.outside.join("secret.txt");
    fx.symlink(&secret, "link.txt");
    assert_outside(&fx.call("fs.read", json!({"path": "link.txt"})).await);
    assert_outside(&fx.call("fs.write", json!({"path": "link.txt", "content": "overwritten"})).await);
    assert_outside(&fx.call("fs.edit", json!({"path": "link.txt", "old_string": "TOP", "new_string": "BOTTOM"})).await);
    assert_eq!(std::fs::read_to_string(&secret).expect("secret"), SECRET, "the outside file is untouched");
    let message = fx.call("fs.read", json!({"path": "link.txt"})).await.content;
    assert!(message.contains("symbolic link leading outside"), "{message}");
}

#[tokio::test]
async fn a_symlinked_directory_leading_out_is_not_followed() {
    let fx = Fixture::new();
    fx.symlink(&fx.outside, "out");
    assert_outside(&fx.call("fs.list", json!({"path": "out"})).await);
    assert_outside(&fx.call("fs.read", json!({"path": "out/secret.txt"})).await);
    assert_outside(&fx.call("fs.write", json!({"path": "out/new.txt", "content": "x"})).await);
    assert_outside(&fx.call("fs.write", json!({"path": "out/deeper/new.txt", "content": "x"})).await);
    assert!(!fx.outside.join("new.txt").exists() && !fx.outside.join("deeper").exists());
    assert_outside(&fx.call("grep", json!({"pattern": "SECRET", "path": "out"})).await);

    // Walks from the root skip the link instead of following it.
    let found = fx.call("grep", json!({"pattern": "TOP-SECRET"})).await;
    assert!(ok(&found).starts_with("No matches"), "{}", found.content);
    let globbed = fx.call("fs.glob", json!({"pattern": "**/*.txt"})).await;
    assert!(!ok(&globbed).contains("secret.txt"), "{}", globbed.content);
    // Listing the parent merely names the link.
    let listed = fx.call("fs.list", json!({})).await;
    assert_eq!(ok(&listed), "out@\n");
}

#[tokio::test]
async fn a_dangling_symlink_cannot_be_written_through() {
    let fx = Fixture::new();
    let target = fx.outside.join("created-through-link.txt");
    fx.symlink(&target, "dangling");
    assert_outside(&fx.call("fs.write", json!({"path": "dangling", "content": "x"})).await);
    assert!(!target.exists(), "nothing was created outside");
}

#[tokio::test]
async fn symlinks_within_the_workspace_work() {
    let fx = Fixture::new();
    fx.write("real/file.txt", "real content\n");
    fx.symlink(fx.root.join("real"), "alias");
    let outcome = fx.call("fs.read", json!({"path": "alias/file.txt"})).await;
    assert!(ok(&outcome).contains("real content"));
    ok(&fx.call("fs.write", json!({"path": "alias/new.txt", "content": "via alias"})).await);
    assert_eq!(std::fs::read_to_string(fx.root.join("real/new.txt")).expect("written"), "via alias");
}

#[tokio::test]
async fn over_long_paths_are_refused_clearly() {
    let fx = Fixture::new();
    let long = "a/".repeat(2100);
    let outcome = fx.call("fs.write", json!({"path": long, "content": "x"})).await;
    assert!(matches!(err(&outcome), ToolError::InvalidArguments { .. }));
    assert!(outcome.content.contains("at most 4096 bytes"), "{}", outcome.content);
    assert!(outcome.content.len() < 600, "the error does not echo the whole path");

    let component = "n".repeat(300);
    let outcome = fx.call("fs.write", json!({"path": format!("dir/{component}"), "content": "x"})).await;
    assert!(matches!(err(&outcome), ToolError::InvalidArguments { .. }));
    assert!(outcome.content.contains("at most 255 bytes"), "{}", outcome.content);
    assert!(!fx.root.join("dir").exists(), "nothing was created");
}

#[tokio::test]
async fn nul_bytes_are_refused() {
    let fx = Fixture::new();
    for (tool, args) in [
        ("fs.read", json!({"path": "a\u{0}b"})),
        ("fs.write", json!({"path": "a\u{0}b", "content": "x"})),
        ("fs.list", json!({"path": "\u{0}"})),
    ] {
        let outcome = fx.call(tool, args).await;
        assert!(matches!(err(&outcome), ToolError::InvalidArguments { .. }), "{tool}");
        assert!(outcome.content.contains("NUL byte"), "{tool}: {}", outcome.content);
    }
}

#[tokio::test]
async fn binary_files_are_refused_by_fs_read() {
    let fx = Fixture::new();
    fx.write("blob.bin", [0x7f, b'E', b'L', b'F', 0, 0, 1, 2]);
    let outcome = fx.call("fs.read", json!({"path": "blob.bin"})).await;
    assert!(matches!(err(&outcome), ToolError::Failed { .. }));
    assert!(outcome.content.contains("binary file"), "{}", outcome.content);
    // grep skips it instead of printing garbage.
    let found = fx.call("grep", json!({"pattern": "ELF"})).await;
    assert!(ok(&found).starts_with("No matches"), "{}", found.content);
}

#[tokio::test]
async fn non_utf8_file_names_are_shown_lossily() {
    let fx = Fixture::new();
    let name = OsStr::from_bytes(b"bad\xffname.txt");
    std::fs::write(fx.root.join(name), "needle here\n").expect("write non-UTF-8 name");
    fx.write("good.txt", "needle too\n");

    let listed = fx.call("fs.list", json!({})).await;
    assert_eq!(ok(&listed), "bad\u{FFFD}name.txt\ngood.txt\n");
    let globbed = fx.call("fs.glob", json!({"pattern": "*.txt"})).await;
    assert!(ok(&globbed).contains("bad\u{FFFD}name.txt"), "{}", globbed.content);
    let found = fx.call("grep", json!({"pattern": "needle"})).await;
    assert_eq!(ok(&found), "bad\u{FFFD}name.txt:1:needle here\ngood.txt:1:needle too\n");
    // The lossy name does not resolve to the real file; that is an ordinary "not found".
    let read = fx.call("fs.read", json!({"path": "bad\u{FFFD}name.txt"})).await;
    assert!(matches!(err(&read), ToolError::NotFound { .. }));
}

#[tokio::test]
async fn shell_runs_in_the_workspace_root() {
    let fx = Fixture::new();
    let outcome = fx.call("shell", json!({"command": "pwd"})).await;
    let text = ok(&outcome);
    let (headline, rest) = text.split_once('\n').expect("a headline");
    assert_eq!(headline, "exit code: 0");
    let (sandbox, streams) = rest.split_once('\n').expect("the sandbox line");
    assert!(sandbox.starts_with("sandbox: workspace-write (landlock ABI "), "{sandbox}");
    assert_eq!(streams, format!("--- stdout ---\n{}\n", fx.root.display()));
}

/// The README's promise: the built-in tools, `shell` included, stay in the workspace.
#[tokio::test]
async fn shell_cannot_read_write_or_delete_beside_the_workspace() {
    let fx = Fixture::new();
    let dir = fx.outside.display();
    for command in [
        format!("cat {dir}/secret.txt"),
        "cd .. && cat outside/secret.txt".to_owned(),
        format!("echo planted > {dir}/planted.txt"),
        format!("rm -f {dir}/secret.txt"),
        "cat /proc/1/environ".to_owned(),
    ] {
        let outcome = fx.call("shell", json!({"command": command})).await;
        let text = ok(&outcome);
        assert!(!text.contains(SECRET), "`{command}` read outside: {text}");
        assert!(!text.starts_with("exit code: 0"), "`{command}` succeeded: {text}");
    }
    assert!(fx.outside.join("secret.txt").exists(), "nothing beside the workspace was deleted");
    assert!(!fx.outside.join("planted.txt").exists(), "nothing beside the workspace was written");

    // The same command unconfined reaches the file: the sandbox, not chance, stopped it.
    let full = Workspace::new(&fx.root).expect("workspace").with_sandbox(Sandbox::new(SandboxMode::Full));
    let ctx = ToolContext::new(Arc::new(full));
    let outcome = fx.catalog.invoke("shell", json!({"command": format!("cat {dir}/secret.txt")}), &ctx).await;
    assert!(ok(&outcome).contains(SECRET), "in `full` the command reads anywhere");
    assert!(ok(&outcome).contains("sandbox: full (unconfined)"));
}

/// The workspace's `.troupe` (troupe's own files) is out of every tool's reach: not read,
/// written, edited or listed, also through a symlink or `..`.
#[tokio::test]
async fn the_reserved_directory_is_out_of_every_tools_reach() {
    let fx = Fixture::new();
    fx.write(".troupe/troupe.db", "the record");
    fx.write(".troupe/agents/me.toml", "[agent]\nid = \"me\"\n");
    fx.write("src/lib.rs", "fn main() {}\n");
    std::os::unix::fs::symlink(fx.root.join(".troupe"), fx.root.join("alias")).expect("a symlink to it");
    for (tool, args) in [
        ("fs.read", json!({"path": ".troupe/troupe.db"})),
        ("fs.read", json!({"path": "src/../.troupe/agents/me.toml"})),
        ("fs.read", json!({"path": "alias/troupe.db"})),
        ("fs.write", json!({"path": ".troupe/troupe.db", "content": ""})),
        ("fs.write", json!({"path": ".troupe/agents/me.toml", "content": "[sandbox]\nmode = \"full\"\n"})),
        ("fs.edit", json!({"path": ".troupe/agents/me.toml", "old_string": "me", "new_string": "you"})),
        ("fs.list", json!({"path": ".troupe"})),
        ("grep", json!({"pattern": "record", "path": ".troupe"})),
    ] {
        let outcome = fx.call(tool, args.clone()).await;
        assert!(matches!(err(&outcome), ToolError::PathOutsideWorkspace { .. }), "{tool} {args}: {}", outcome.content);
    }
    let listed = fx.call("fs.list", json!({})).await;
    assert!(!ok(&listed).contains(".troupe"), "{}", listed.content);
    let globbed = fx.call("fs.glob", json!({"pattern": "**/*"})).await;
    assert!(!ok(&globbed).contains(".troupe") && ok(&globbed).contains("src/lib.rs"), "{}", globbed.content);
    let found = fx.call("grep", json!({"pattern": "record|agent"})).await;
    assert!(!found.content.contains(".troupe"), "{}", found.content);
    assert_eq!(std::fs::read_to_string(fx.root.join(".troupe/troupe.db")).ok().as_deref(), Some("the record"));
}
