//! Behaviour of the file, search and git tools inside the workspace.

use crate::common;

use common::{Fixture, err, ok};
use serde_json::json;
use troupe_tools::ToolError;

#[tokio::test]
async fn fs_read_numbers_lines_and_pages() {
    let fx = Fixture::new();
    let text: String = (1..=10).map(|i| format!("line {i}\n")).collect();
    fx.write("ten.txt", text);
    let all = fx.call("fs.read", json!({"path": "ten.txt"})).await;
    assert!(ok(&all).starts_with("     1\tline 1\n     2\tline 2\n"), "{}", all.content);
    assert!(all.content.ends_with("    10\tline 10\n"), "{}", all.content);

    let page = fx.call("fs.read", json!({"path": "ten.txt", "offset": 4, "limit": 2})).await;
    assert_eq!(
        ok(&page),
        "     4\tline 4\n     5\tline 5\n[showing lines 4-5; more lines follow: continue with offset=6]\n"
    );
    assert_eq!(page.structured.expect("structured")["end_line"], 5);

    let tail = fx.call("fs.read", json!({"path": "ten.txt", "offset": 10, "limit": 5})).await;
    assert_eq!(ok(&tail), "    10\tline 10\n");

    let past = fx.call("fs.read", json!({"path": "ten.txt", "offset": 11})).await;
    assert!(err(&past).to_string().contains("past the end of `ten.txt`, which has 10 lines"), "{}", past.content);
    let zero = fx.call("fs.read", json!({"path": "ten.txt", "offset": 0})).await;
    assert!(matches!(err(&zero), ToolError::InvalidArguments { .. }));
}

/// A FIFO's open waits for a writer and a device's read may never end: the file tools
/// refuse what is not a regular file, at once.
#[tokio::test]
async fn fs_read_and_edit_refuse_what_is_not_a_regular_file() {
    let fx = Fixture::new();
    let made = std::process::Command::new("mkfifo").arg(fx.root.join("pipe")).status().expect("mkfifo runs");
    assert!(made.success());
    let read = tokio::time::timeout(std::time::Duration::from_secs(10), fx.call("fs.read", json!({"path": "pipe"})));
    let read = read.await.expect("fs.read answers without waiting for a writer");
    assert!(err(&read).to_string().contains("`pipe` is not a regular file"), "{}", read.content);
    let edit = fx.call("fs.edit", json!({"path": "pipe", "old_string": "a", "new_string": "b"}));
    let edit = tokio::time::timeout(std::time::Duration::from_secs(10), edit).await.expect("fs.edit answers");
    assert!(err(&edit).to_string().contains("not a regular file"), "{}", edit.content);
}

#[tokio::test]
async fn fs_read_attaches_images_and_pdfs_and_refuses_other_binaries() {
    let fx = Fixture::new();
    fx.write("dot.png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR");
    let image = fx.call("fs.read", json!({"path": "dot.png"})).await;
    assert_eq!(ok(&image), "`dot.png` is an image (image/png, 16 bytes), attached to this result.");
    assert!(
        matches!(&image.attachments[..], [troupe_core::ContentBlock::Image { source: troupe_core::ImageSource::Base64 { media_type, .. } }] if media_type == "image/png"),
        "{:?}",
        image.attachments
    );
    fx.write("spec.pdf", b"%PDF-1.7\n%\xe2\xe3\n");
    let pdf = fx.call("fs.read", json!({"path": "spec.pdf"})).await;
    assert!(ok(&pdf).contains("is a PDF (application/pdf"), "{}", pdf.content);
    assert!(
        matches!(&pdf.attachments[..], [troupe_core::ContentBlock::Document { name: Some(name), .. }] if name == "spec.pdf")
    );
    // A PNG under another name is refused, saying why; other binaries are refused as before.
    fx.write("dot.jpg", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR");
    let named = fx.call("fs.read", json!({"path": "dot.jpg"})).await;
    assert!(err(&named).to_string().contains("its name ends in .jpg but its bytes are image/png"), "{}", named.content);
    fx.write("blob.bin", b"\0\x01\x02");
    let blob = fx.call("fs.read", json!({"path": "blob.bin"})).await;
    assert!(err(&blob).to_string().contains("binary file"), "{}", blob.content);
    assert!(blob.attachments.is_empty());
    let mut big = b"\x89PNG\r\n\x1a\n".to_vec();
    big.resize(6 * 1024 * 1024, 0);
    fx.write("big.png", big);
    let too_big = fx.call("fs.read", json!({"path": "big.png"})).await;
    assert!(err(&too_big).to_string().contains("big.png"), "{}", too_big.content);
    assert!(too_big.attachments.is_empty());
}

#[tokio::test]
async fn fs_read_handles_crlf_empty_missing_and_directories() {
    let fx = Fixture::new();
    fx.write("crlf.txt", "a\r\nb\r\n");
    assert_eq!(ok(&fx.call("fs.read", json!({"path": "crlf.txt"})).await), "     1\ta\n     2\tb\n");
    fx.write("empty.txt", "");
    assert_eq!(ok(&fx.call("fs.read", json!({"path": "empty.txt"})).await), "(`empty.txt` is empty)");
    let missing = fx.call("fs.read", json!({"path": "nope.txt"})).await;
    assert_eq!(err(&missing), &ToolError::NotFound { path: "nope.txt".into() });
    fx.write("dir/x.txt", "x");
    let dir = fx.call("fs.read", json!({"path": "dir"})).await;
    assert!(dir.content.contains("is a directory"), "{}", dir.content);
}

#[tokio::test]
async fn fs_read_caps_its_output() {
    let fx = Fixture::new();
    let line = format!("{}\n", "x".repeat(1000));
    fx.write("big.txt", line.repeat(1000));
    let outcome = fx.call("fs.read", json!({"path": "big.txt", "limit": 1000})).await;
    let content = ok(&outcome);
    assert!(content.len() <= 256 * 1024 + 200, "{} bytes", content.len());
    assert!(content.contains("[output truncated at 256 KiB: showing lines 1-"), "{}", &content[content.len() - 200..]);
    assert_eq!(outcome.structured.expect("structured")["truncated"], true);

    fx.write("one-line.txt", "y".repeat(100_000));
    let long = fx.call("fs.read", json!({"path": "one-line.txt"})).await;
    assert!(ok(&long).contains("[line cut at 2000 characters]"), "{}", long.content.len());
}

#[tokio::test]
async fn fs_write_creates_parents_and_reports() {
    let fx = Fixture::new();
    let created = fx.call("fs.write", json!({"path": "a/b/c.txt", "content": "hello"})).await;
    assert_eq!(ok(&created), "Created `a/b/c.txt` (5 bytes).");
    let again = fx.call("fs.write", json!({"path": "a/b/c.txt", "content": "hi"})).await;
    assert_eq!(ok(&again), "Overwrote `a/b/c.txt` (2 bytes).");
    assert_eq!(std::fs::read_to_string(fx.root.join("a/b/c.txt")).expect("file"), "hi");
    let dir = fx.call("fs.write", json!({"path": "a", "content": "x"})).await;
    assert!(dir.content.contains("is a directory"), "{}", dir.content);
}

#[tokio::test]
async fn fs_edit_requires_a_unique_match_unless_replacing_all() {
    let fx = Fixture::new();
    fx.write("f.rs", "let a = 1;\nlet b = 1;\n");
    let none = fx.call("fs.edit", json!({"path": "f.rs", "old_string": "let c", "new_string": "x"})).await;
    assert!(matches!(err(&none), ToolError::InvalidArguments { .. }));
    assert!(none.content.contains("was not found in `f.rs`"), "{}", none.content);

    let many = fx.call("fs.edit", json!({"path": "f.rs", "old_string": "= 1", "new_string": "= 2"})).await;
    assert!(many.content.contains("occurs 2 times in `f.rs`"), "{}", many.content);
    assert_eq!(std::fs::read_to_string(fx.root.join("f.rs")).expect("file"), "let a = 1;\nlet b = 1;\n");

    let one = fx.call("fs.edit", json!({"path": "f.rs", "old_string": "let a = 1", "new_string": "let a = 7"})).await;
    assert_eq!(ok(&one), "Replaced 1 occurrence in `f.rs`.");
    let all = fx
        .call("fs.edit", json!({"path": "f.rs", "old_string": "let", "new_string": "const", "replace_all": true}))
        .await;
    assert_eq!(ok(&all), "Replaced 2 occurrences in `f.rs`.");
    assert_eq!(std::fs::read_to_string(fx.root.join("f.rs")).expect("file"), "const a = 7;\nconst b = 1;\n");

    let same = fx.call("fs.edit", json!({"path": "f.rs", "old_string": "a", "new_string": "a"})).await;
    assert!(matches!(err(&same), ToolError::InvalidArguments { .. }));
}

#[tokio::test]
async fn fs_list_sorts_and_marks_directories() {
    let fx = Fixture::new();
    fx.write("b.txt", "");
    fx.write("a/inner.txt", "");
    fx.write(".hidden", "");
    assert_eq!(ok(&fx.call("fs.list", json!({})).await), ".hidden\na/\nb.txt\n");
    assert_eq!(ok(&fx.call("fs.list", json!({"path": "a"})).await), "inner.txt\n");
    std::fs::create_dir(fx.root.join("empty")).expect("mkdir");
    assert_eq!(ok(&fx.call("fs.list", json!({"path": "empty"})).await), "(`empty` is empty)\n");
    let file = fx.call("fs.list", json!({"path": "b.txt"})).await;
    assert!(file.content.contains("is a file, not a directory"), "{}", file.content);
}

#[tokio::test]
async fn fs_glob_matches_paths_and_respects_gitignore() {
    let fx = Fixture::new();
    fx.write(".gitignore", "target/\n*.log\n");
    fx.write("src/lib.rs", "");
    fx.write("src/bin/main.rs", "");
    fx.write("target/debug/build.rs", "");
    fx.write("debug.log", "");
    fx.write("top.rs", "");
    assert_eq!(ok(&fx.call("fs.glob", json!({"pattern": "**/*.rs"})).await), "src/bin/main.rs\nsrc/lib.rs\ntop.rs\n");
    assert_eq!(ok(&fx.call("fs.glob", json!({"pattern": "*.rs"})).await), "top.rs\n");
    assert_eq!(ok(&fx.call("fs.glob", json!({"pattern": "*.rs", "path": "src"})).await), "src/lib.rs\n");
    assert!(ok(&fx.call("fs.glob", json!({"pattern": "*.log"})).await).starts_with("No files match"));
    let bad = fx.call("fs.glob", json!({"pattern": "src/[a"})).await;
    assert!(matches!(err(&bad), ToolError::InvalidArguments { .. }), "{}", bad.content);
}

#[tokio::test]
async fn grep_reports_path_line_text_and_filters() {
    let fx = Fixture::new();
    fx.write(".gitignore", "ignored.txt\n");
    fx.write("src/a.rs", "fn main() {}\nfn helper() {}\n");
    fx.write("notes.md", "FN in caps\n");
    fx.write("ignored.txt", "fn hidden\n");
    let found = fx.call("grep", json!({"pattern": "^fn \\w+"})).await;
    assert_eq!(ok(&found), "src/a.rs:1:fn main() {}\nsrc/a.rs:2:fn helper() {}\n");
    let insensitive = fx.call("grep", json!({"pattern": "fn", "case_insensitive": true, "glob": "*.md"})).await;
    assert_eq!(ok(&insensitive), "notes.md:1:FN in caps\n");
    let by_path = fx.call("grep", json!({"pattern": "helper", "glob": "src/**/*.rs"})).await;
    assert_eq!(ok(&by_path), "src/a.rs:2:fn helper() {}\n");
    let one_file = fx.call("grep", json!({"pattern": "main", "path": "src/a.rs"})).await;
    assert_eq!(ok(&one_file), "src/a.rs:1:fn main() {}\n");
    let capped = fx.call("grep", json!({"pattern": "fn", "max_results": 1})).await;
    assert!(ok(&capped).starts_with("src/a.rs:1:fn main() {}\n[stopped after 1 matching lines"), "{}", capped.content);
    let bad = fx.call("grep", json!({"pattern": "(unclosed"})).await;
    assert!(bad.content.contains("invalid regular expression"), "{}", bad.content);
}

fn git(fx: &Fixture, args: &[&str]) {
    let status = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(&fx.root)
        .output()
        .expect("git runs");
    assert!(status.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&status.stderr));
}

/// A workspace that is a repository on `main` with `a.txt` committed as `one`.
fn repository() -> Fixture {
    let fx = Fixture::new();
    git(&fx, &["init", "-q", "-b", "main"]);
    fx.write("a.txt", "one\n");
    git(&fx, &["add", "a.txt"]);
    git(&fx, &["commit", "-q", "-m", "init"]);
    fx
}

/// A context for `fx`'s workspace whose commands run unconfined (`full`): where a program
/// a repository names would run with every right.
fn unconfined(fx: &Fixture) -> troupe_tools::ToolContext {
    let workspace = troupe_tools::Workspace::new(&fx.root)
        .expect("workspace")
        .with_sandbox(troupe_tools::Sandbox::new(troupe_tools::SandboxMode::Full));
    troupe_tools::ToolContext::new(std::sync::Arc::new(workspace))
}

#[tokio::test]
async fn git_status_and_diff_show_changes() {
    let fx = repository();
    fx.write("a.txt", "two\n");
    fx.write("new.txt", "new\n");

    let status = fx.call("git.status", json!({})).await;
    assert_eq!(ok(&status), "## main\n M a.txt\n?? new.txt\n");
    let diff = fx.call("git.diff", json!({})).await;
    assert!(ok(&diff).contains("-one\n+two\n"), "{}", diff.content);
    let staged = fx.call("git.diff", json!({"staged": true})).await;
    assert_eq!(ok(&staged), "(no changes)\n");
    let scoped = fx.call("git.diff", json!({"path": "new.txt"})).await;
    assert_eq!(ok(&scoped), "(no changes)\n");
    let unknown = fx.call("git.status", json!({"verbose": true})).await;
    assert!(unknown.content.contains("unknown argument `verbose`; accepted arguments: none"), "{}", unknown.content);
}

/// A filter the repository's config defines is a program the agent may have named (it
/// can write `.git/config` and `.gitattributes`); `git.status` and `git.diff`, which need
/// no approval, run none, even where commands run unconfined.
#[tokio::test]
async fn git_runs_no_filter_the_repositorys_config_defines() {
    let fx = repository();
    let marker = fx.outside.join("filtered");
    let run = format!("touch {}; cat", marker.display());
    fx.write(".gitattributes", "* filter=sneaky\n");
    fx.write(".git/included", format!("[filter \"hidden\"]\n\tclean = {run}\n\tprocess = {run}\n"));
    git(&fx, &["config", "filter.sneaky.clean", &run]);
    git(&fx, &["config", "filter.sneaky.required", "true"]);
    git(&fx, &["config", "include.path", "included"]);
    fx.write("a.txt", "two\n");
    let ctx = unconfined(&fx);

    let status = fx.catalog.invoke("git.status", json!({}), &ctx).await;
    assert!(ok(&status).contains(" M a.txt"), "{}", status.content);
    let diff = fx.catalog.invoke("git.diff", json!({}), &ctx).await;
    assert!(ok(&diff).contains("+two"), "{}", diff.content);
    assert!(!marker.exists(), "no filter ran");
    fx.write(".gitattributes", "* filter=hidden\n");
    let included = fx.catalog.invoke("git.status", json!({}), &ctx).await;
    assert!(ok(&included).contains(" M a.txt"), "{}", included.content);
    assert!(!marker.exists(), "nor one defined in a file the config includes");

    git(&fx, &["config", "filter.a=b.clean", &run]);
    let unnameable = fx.catalog.invoke("git.status", json!({}), &ctx).await;
    assert!(err(&unnameable).to_string().contains("filter `a=b`"), "{}", unnameable.content);
    assert!(!marker.exists());
}

/// A filter of the user's own git config (`git-lfs`, say) is the user's, not the agent's:
/// it still applies. `HOME` is set for a child process of this test, which runs the tool.
#[test]
fn a_filter_of_the_users_own_git_config_still_applies() {
    if let Some(home) = std::env::var_os("TROUPE_GIT_TEST_HOME") {
        return user_filter_applies(std::path::Path::new(&home));
    }
    let home = tempfile::tempdir().expect("a home");
    let output = std::process::Command::new(std::env::current_exe().expect("this test binary"))
        .args(["--exact", "fs_tools::a_filter_of_the_users_own_git_config_still_applies", "--nocapture"])
        .env("TROUPE_GIT_TEST_HOME", home.path())
        .env("HOME", home.path())
        .env_remove("XDG_CONFIG_HOME")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("the child test runs");
    let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{said}");
}

/// The child's side: a repository whose files the user's own filter cleans.
fn user_filter_applies(home: &std::path::Path) {
    let marker = home.join("cleaned");
    std::fs::write(home.join(".gitconfig"), format!("[filter \"users\"]\n\tclean = touch {}; cat\n", marker.display()))
        .expect("the user's git config");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    runtime.block_on(async {
        let fx = repository();
        fx.write(".gitattributes", "* filter=users\n");
        fx.write("a.txt", "two\n");
        let ctx = unconfined(&fx);
        let status = fx.catalog.invoke("git.status", json!({}), &ctx).await;
        assert!(ok(&status).contains(" M a.txt"), "{}", status.content);
        assert!(marker.exists(), "the user's own filter ran");
    });
}

#[tokio::test]
async fn git_outside_a_repository_is_a_clear_error() {
    let fx = Fixture::new();
    let status = fx.call("git.status", json!({})).await;
    assert!(matches!(err(&status), ToolError::Failed { .. }));
    assert!(status.content.contains("not a git repository"), "{}", status.content);
}
