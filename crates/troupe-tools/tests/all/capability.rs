//! Capability checks before tool calls, and the audit trail of every decision.

use crate::common;

use axum::Router;
use axum::routing::get;
use common::{Fixture, err, ok};
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use troupe_tools::{
    ALLOWED, Access, AuditEntry, AuditKind, AuditLog, AuthorizationDecision, Authorizer, CapabilityAuthorizer,
    CapabilitySet, DENIED, Effect, FileAuditLog, MemoryAuditLog, NoAudit, ToolCatalog, ToolError, ToolOutput,
    ToolResultOutcome, WebFetchTool, arguments_digest, coding_tools, typed_tool,
};

/// Runs `name(args)` as `agent` under `authorizer`, recording into `audit`.
async fn call_as(
    fx: &Fixture,
    agent: &str,
    authorizer: &CapabilityAuthorizer,
    audit: &dyn AuditLog,
    name: &str,
    args: serde_json::Value,
) -> ToolResultOutcome {
    fx.catalog.invoke_authorized(agent, authorizer, audit, name, args, &fx.ctx).await
}

fn assert_denied(outcome: &ToolResultOutcome) {
    assert!(matches!(err(outcome), ToolError::Denied { .. }), "expected a denial, got {:?}", outcome.error);
    assert!(outcome.content.starts_with("denied by capability policy: "), "{}", outcome.content);
}

#[tokio::test]
async fn reads_outside_the_granted_prefixes_are_denied_and_every_decision_is_audited() {
    let fx = Fixture::new();
    fx.write("src/lib.rs", "pub fn f() {}\n");
    fx.write("secrets/key.txt", "hunter2\n");
    fx.symlink("../secrets", "src/link");
    let authorizer =
        CapabilityAuthorizer::new(CapabilitySet::none()).grant("coder", CapabilitySet::none().allow_read("src"));
    let audit = MemoryAuditLog::new();

    let allowed = call_as(&fx, "coder", &authorizer, &audit, "fs.read", json!({"path": "src/lib.rs"})).await;
    assert!(ok(&allowed).contains("pub fn f()"));

    let outside = call_as(&fx, "coder", &authorizer, &audit, "fs.read", json!({"path": "secrets/key.txt"})).await;
    assert_denied(&outside);
    assert!(outside.content.contains("may not read `secrets/key.txt`"), "{}", outside.content);
    assert!(outside.content.contains("`src`"), "the denial names what is granted: {}", outside.content);
    assert!(!outside.content.contains("hunter2"));

    let climbing =
        call_as(&fx, "coder", &authorizer, &audit, "fs.read", json!({"path": "src/../secrets/key.txt"})).await;
    assert_denied(&climbing);
    // A symbolic link under the granted prefix does not carry the grant to where it leads.
    let linked = call_as(&fx, "coder", &authorizer, &audit, "fs.read", json!({"path": "src/link/key.txt"})).await;
    assert_denied(&linked);
    assert!(!linked.content.contains("hunter2"));
    // A prefix matches whole components: `src` does not grant `srcs`.
    let sibling = call_as(&fx, "coder", &authorizer, &audit, "fs.list", json!({"path": "srcs"})).await;
    assert_denied(&sibling);
    // An omitted path is the workspace root, which `src` does not cover.
    let whole = call_as(&fx, "coder", &authorizer, &audit, "grep", json!({"pattern": "hunter"})).await;
    assert_denied(&whole);
    let narrowed = call_as(&fx, "coder", &authorizer, &audit, "grep", json!({"pattern": "fn", "path": "src"})).await;
    assert!(ok(&narrowed).contains("src/lib.rs:1:"), "{}", narrowed.content);

    let entries = audit.entries();
    let decisions: Vec<&str> = entries.iter().map(|e| e.decision.as_str()).collect();
    assert_eq!(decisions, [ALLOWED, DENIED, DENIED, DENIED, DENIED, DENIED, ALLOWED]);
    for entry in &entries {
        assert_eq!(entry.kind, AuditKind::CapabilityCheck);
        assert_eq!(entry.agent, "coder");
        assert!(entry.timestamp_ms > 0);
        let digest = entry.arguments_digest.as_deref().expect("a digest of the arguments");
        assert!(digest.starts_with("sha256:") && !digest.contains("secrets"), "{digest}");
    }
    assert_eq!(entries[1].tool.as_deref(), Some("fs.read"));
    assert_eq!(entries[1].arguments_digest, Some(arguments_digest(&json!({"path": "secrets/key.txt"}))));
    assert!(entries[1].reason.contains("secrets/key.txt"), "{}", entries[1].reason);
    assert!(entries[0].reason.contains("within the granted `src`"), "{}", entries[0].reason);
}

#[tokio::test]
async fn a_readonly_agent_cannot_write_or_edit() {
    let fx = Fixture::new();
    fx.write("notes.txt", "old\n");
    let authorizer = CapabilityAuthorizer::new(CapabilitySet::none()).grant("reviewer", CapabilitySet::readonly());
    let audit = MemoryAuditLog::new();

    let write =
        call_as(&fx, "reviewer", &authorizer, &audit, "fs.write", json!({"path": "new.txt", "content": "x"})).await;
    assert_denied(&write);
    assert!(write.content.contains("no write access is granted"), "{}", write.content);
    assert!(!fx.root.join("new.txt").exists(), "a denied call must not run");

    let edit = json!({"path": "notes.txt", "old_string": "old", "new_string": "new"});
    assert_denied(&call_as(&fx, "reviewer", &authorizer, &audit, "fs.edit", edit).await);
    assert_eq!(std::fs::read_to_string(fx.root.join("notes.txt")).expect("read"), "old\n");

    let read = call_as(&fx, "reviewer", &authorizer, &audit, "fs.read", json!({"path": "notes.txt"})).await;
    assert!(ok(&read).contains("old"));

    // A writer limited to `out/` writes there and nowhere else.
    let writer = CapabilityAuthorizer::new(CapabilitySet::readonly().allow_write("out"));
    let inside =
        call_as(&fx, "any", &writer, &audit, "fs.write", json!({"path": "out/report.md", "content": "done"})).await;
    ok(&inside);
    assert_denied(
        &call_as(&fx, "any", &writer, &audit, "fs.write", json!({"path": "report.md", "content": "x"})).await,
    );

    let decisions: Vec<String> = audit.entries().into_iter().map(|e| e.decision).collect();
    assert_eq!(decisions, [DENIED, DENIED, ALLOWED, ALLOWED, DENIED]);
}

#[tokio::test]
async fn the_shell_needs_the_shell_capability() {
    let fx = Fixture::new();
    let authorizer =
        CapabilityAuthorizer::new(CapabilitySet::readonly()).grant("builder", CapabilitySet::workspace_all());
    let audit = MemoryAuditLog::new();

    let denied = call_as(&fx, "reader", &authorizer, &audit, "shell", json!({"command": "touch ran"})).await;
    assert_denied(&denied);
    assert!(denied.content.contains("may not run shell commands"), "{}", denied.content);
    assert!(!fx.root.join("ran").exists(), "a denied command must not run");

    let allowed = call_as(&fx, "builder", &authorizer, &audit, "shell", json!({"command": "touch ran"})).await;
    assert!(ok(&allowed).starts_with("exit code: 0"), "{}", allowed.content);
    assert!(fx.root.join("ran").exists());

    let entries = audit.entries();
    assert_eq!(entries.len(), 2);
    assert_eq!((entries[0].agent.as_str(), entries[0].is_allowed()), ("reader", false));
    assert_eq!((entries[1].agent.as_str(), entries[1].is_allowed()), ("builder", true));
}

#[tokio::test]
async fn network_access_is_checked_against_the_host_patterns() {
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&hits);
    let router = Router::new().route(
        "/",
        get(move || {
            counter.fetch_add(1, Ordering::SeqCst);
            async { "hello from loopback" }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move { axum::serve(listener, router).await });

    let mut fx = Fixture::new();
    fx.catalog =
        // Allowed private addresses: the tool's own refusal of loopback would hide the grants'.
        ToolCatalog::with_tools([Arc::new(WebFetchTool::new().allow_private_addresses(true)) as Arc<dyn troupe_tools::Tool>])
            .expect("catalog");
    let url = format!("http://127.0.0.1:{}/", address.port());
    let authorizer = CapabilityAuthorizer::new(CapabilitySet::none())
        .grant("elsewhere", CapabilitySet::none().allow_network("*.github.com").allow_network("api.example.com"))
        .grant("local", CapabilitySet::none().allow_network("127.0.0.1"))
        .grant("anywhere", CapabilitySet::none().allow_network("*"));
    let audit = MemoryAuditLog::new();

    let nothing = call_as(&fx, "nobody", &authorizer, &audit, "web.fetch", json!({"url": url})).await;
    assert_denied(&nothing);
    assert!(nothing.content.contains("no network access is granted"), "{}", nothing.content);
    let other = call_as(&fx, "elsewhere", &authorizer, &audit, "web.fetch", json!({"url": url})).await;
    assert_denied(&other);
    assert!(other.content.contains("may not contact `127.0.0.1`"), "{}", other.content);
    assert!(other.content.contains("`*.github.com`"), "{}", other.content);
    assert_eq!(hits.load(Ordering::SeqCst), 0, "a denied fetch must not reach the server");

    let local = call_as(&fx, "local", &authorizer, &audit, "web.fetch", json!({"url": url})).await;
    assert!(ok(&local).contains("hello from loopback"), "{}", local.content);
    let star = call_as(&fx, "anywhere", &authorizer, &audit, "web.fetch", json!({"url": url})).await;
    ok(&star);
    assert_eq!(hits.load(Ordering::SeqCst), 2);

    // A URL without a host cannot be checked, so it is denied before the tool sees it.
    let file = call_as(&fx, "anywhere", &authorizer, &audit, "web.fetch", json!({"url": "file:///etc/passwd"})).await;
    assert_denied(&file);

    let decisions: Vec<bool> = audit.entries().iter().map(AuditEntry::is_allowed).collect();
    assert_eq!(decisions, [false, false, true, true, false]);
}

/// Arguments of the test tool `echo`.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Echo {
    /// What to echo.
    x: i64,
}

#[tokio::test]
async fn undeclared_access_needs_nothing_and_unknown_tools_are_not_decisions() {
    let mut fx = Fixture::new();
    let echo = typed_tool("echo", "Echoes.", Effect::ReadOnly, |_ctx, args: Echo| async move {
        Ok(ToolOutput::text(args.x.to_string()))
    });
    fx.catalog.register(echo.into_arc()).expect("register");
    let authorizer = CapabilityAuthorizer::default();
    let audit = MemoryAuditLog::new();

    let echoed = call_as(&fx, "a", &authorizer, &audit, "echo", json!({"x": 1})).await;
    assert_eq!(ok(&echoed), "1");
    let unknown = call_as(&fx, "a", &authorizer, &audit, "no.such.tool", json!({})).await;
    assert!(matches!(err(&unknown), ToolError::UnknownTool { .. }));

    let entries = audit.entries();
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert!(entries[0].is_allowed());
    assert!(entries[0].reason.contains("declares no access"), "{}", entries[0].reason);

    // Without a workspace the check is lexical and still refuses climbing out.
    let fs_read = fx.catalog.get("fs.read").expect("fs.read").declaration().clone();
    let set = CapabilitySet::readonly();
    assert!(set.permits(&fs_read, &json!({"path": "a/b"})).is_allowed());
    assert!(!set.permits(&fs_read, &json!({"path": "../x"})).is_allowed());
    assert!(!set.permits(&fs_read, &json!({"path": "/etc/passwd"})).is_allowed());
    assert!(!set.permits(&fs_read, &json!({"path": 7})).is_allowed(), "a non-string path cannot be checked");
    // Without an audit log the decision is still enforced.
    let unaudited =
        fx.catalog.invoke_authorized("a", &authorizer, &NoAudit, "fs.read", json!({"path": "x"}), &fx.ctx).await;
    assert!(matches!(err(&unaudited), ToolError::Denied { .. }));
}

#[tokio::test]
async fn custom_authorizers_decide_from_the_declaration() {
    /// Allows only tools whose declaration says they only read.
    struct ReadOnlyTools;
    impl Authorizer for ReadOnlyTools {
        fn authorize(
            &self,
            _agent: &str,
            tool: &troupe_tools::ToolDeclaration,
            _args: &serde_json::Value,
        ) -> AuthorizationDecision {
            if tool.is_read_only() {
                AuthorizationDecision::Allowed { reason: "read-only".into() }
            } else {
                AuthorizationDecision::Denied { reason: format!("`{}` changes things", tool.name) }
            }
        }
    }
    let fx = Fixture::new();
    let audit = MemoryAuditLog::new();
    let denied = fx
        .catalog
        .invoke_authorized("a", &ReadOnlyTools, &audit, "fs.write", json!({"path": "x", "content": "y"}), &fx.ctx)
        .await;
    assert!(denied.content.contains("`fs.write` changes things"), "{}", denied.content);
    let listed = fx.catalog.invoke_authorized("a", &ReadOnlyTools, &audit, "fs.list", json!({}), &fx.ctx).await;
    ok(&listed);
    assert_eq!(audit.entries().len(), 2);
}

#[test]
fn built_in_tools_declare_their_access() {
    let catalog = ToolCatalog::with_tools(coding_tools()).expect("catalog");
    let access = |name: &str| catalog.get(name).expect(name).declaration().access.clone();
    for name in ["fs.read", "fs.list", "fs.glob", "grep", "git.status", "git.diff"] {
        assert_eq!(access(name), [Access::read_path("path")], "{name}");
    }
    assert_eq!(access("fs.write"), [Access::write_path("path")]);
    assert_eq!(access("fs.edit"), [Access::read_path("path"), Access::write_path("path")]);
    assert_eq!(access("shell"), [Access::Shell]);
    let fetch = WebFetchTool::new();
    assert_eq!(troupe_tools::Tool::declaration(&fetch).access, [Access::network("url")]);
    // Declarations keep their access through serialization.
    let value = serde_json::to_value(catalog.get("fs.edit").expect("fs.edit").declaration()).expect("serializes");
    assert_eq!(value["access"], json!([{"read_path": "path"}, {"write_path": "path"}]));
}

#[test]
fn capability_sets_read_from_configuration() {
    let set: CapabilitySet =
        serde_json::from_value(json!({"read": ["src", "docs"], "network": ["*.example.com"]})).expect("parses");
    assert_eq!(set, CapabilitySet::none().allow_read("src").allow_read("docs").allow_network("*.example.com"));
    assert!(!set.shell && set.write.is_empty());
    assert!(serde_json::from_value::<CapabilitySet>(json!({"raed": ["src"]})).is_err(), "typos are refused");
    assert_eq!(CapabilitySet::default(), CapabilitySet::none());
    let all = CapabilitySet::workspace_all();
    assert!(all.shell && all.network.is_empty());
}

#[test]
fn the_file_audit_log_appends_parseable_json_lines() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("audit.jsonl");
    let first = [
        AuditEntry::new(AuditKind::CapabilityCheck, "coder", true, "read of `src` granted")
            .with_tool("fs.read")
            .with_run_id("run_1")
            .with_arguments(&json!({"path": "src"})),
        AuditEntry::new(AuditKind::FirewallDrop, "scout", false, "10.0.0.1:22 is not allowed"),
    ];
    {
        let log = FileAuditLog::open(&path).expect("open");
        for entry in &first {
            log.record(entry.clone());
        }
        assert_eq!(log.failures(), 0);
    }
    // Reopening appends rather than truncating.
    let later = AuditEntry::new(AuditKind::Approval, "coder", true, "approved by ada").with_call_id("call_9");
    FileAuditLog::open(&path).expect("reopen").with_sync_each_entry(true).record(later.clone());

    let text = std::fs::read_to_string(&path).expect("read log");
    assert!(text.ends_with('\n'));
    let parsed: Vec<AuditEntry> =
        text.lines().map(|line| serde_json::from_str(line).expect("each line is one JSON entry")).collect();
    assert_eq!(parsed, [first[0].clone(), first[1].clone(), later]);
    let raw: serde_json::Value = serde_json::from_str(text.lines().next().expect("a line")).expect("json");
    assert_eq!(raw["kind"], "capability_check");
    assert_eq!(raw["decision"], "allowed");
}

#[test]
fn a_failing_file_audit_log_reports_instead_of_panicking() {
    // Every write to /dev/full fails with "no space left on device".
    let log = FileAuditLog::open("/dev/full").expect("/dev/full opens on Linux");
    log.record(AuditEntry::new(AuditKind::Denial, "a", false, "budget exhausted"));
    assert_eq!(log.failures(), 1);
    assert!(log.last_error().expect("the error is kept").contains("/dev/full"));
    assert!(log.try_record(&AuditEntry::new(AuditKind::Denial, "a", false, "again")).is_err());
}
