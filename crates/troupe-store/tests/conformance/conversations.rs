//! Conversations: the turns of one conversation, across the runs that continued it.

use super::harness::{Backend, T0, new_run};
use serde_json::json;
use std::sync::Arc;
use troupe_store::{ConversationTurn, RunStatus};

/// Turns appended by two runs read back in the order they were appended, numbered from 1.
pub async fn turns_from_two_runs_read_in_order(backend: Arc<dyn Backend>) {
    let store = backend.store();
    for id in ["run-first", "run-second"] {
        let mut run = new_run(id, "coder", RunStatus::Running);
        run.conversation_id = Some("conv-1".into());
        store.create_run(run, T0).await.expect("the run is created");
    }
    let turns = |pairs: &[(&str, &str)]| {
        pairs.iter().map(|(role, text)| ((*role).to_owned(), json!({"text": text}))).collect::<Vec<_>>()
    };
    store
        .append_turns("conv-1", "run-first", turns(&[("user", "fix the build"), ("assistant", "fixed")]), T0 + 1)
        .await
        .expect("the first run's turns are appended");
    store.append_turns("conv-2", "run-first", turns(&[("user", "elsewhere")]), T0 + 2).await.expect("append");
    store
        .append_turns("conv-1", "run-second", turns(&[("user", "and the tests?"), ("assistant", "green")]), T0 + 3)
        .await
        .expect("the second run's turns are appended");

    let turn = |seq, run_id: &str, role: &str, text: &str, at| ConversationTurn {
        conversation_id: "conv-1".into(),
        seq,
        run_id: run_id.into(),
        role: role.into(),
        message: json!({"text": text}),
        recorded_at: at,
    };
    assert_eq!(
        store.conversation("conv-1").await.expect("conversation"),
        [
            turn(1, "run-first", "user", "fix the build", T0 + 1),
            turn(2, "run-first", "assistant", "fixed", T0 + 1),
            turn(3, "run-second", "user", "and the tests?", T0 + 3),
            turn(4, "run-second", "assistant", "green", T0 + 3),
        ]
    );
    let other = store.conversation("conv-2").await.expect("conversation");
    assert_eq!(other.len(), 1);
    assert_eq!(other[0].seq, 1, "each conversation is numbered on its own");
    assert!(store.conversation("conv-none").await.expect("an unknown conversation").is_empty());
}

/// Concurrent appenders to one conversation never share a number, and each batch stays in order.
pub async fn concurrent_appends_keep_batches_whole(backend: Arc<dyn Backend>) {
    const WRITERS: usize = 8;
    let store = backend.store();
    let second = backend.open_another().await;
    for writer in 0..WRITERS {
        let mut run = new_run(&format!("run-w{writer}"), "coder", RunStatus::Running);
        run.conversation_id = Some("conv-busy".into());
        store.create_run(run, T0).await.expect("the run is created");
    }
    let mut tasks = tokio::task::JoinSet::new();
    for writer in 0..WRITERS {
        let store = if writer % 2 == 0 { store.clone() } else { second.clone() };
        tasks.spawn(async move {
            let run_id = format!("run-w{writer}");
            let batch = vec![("user".to_owned(), json!({"n": 0})), ("assistant".to_owned(), json!({"n": 1}))];
            store.append_turns("conv-busy", &run_id, batch, T0).await
        });
    }
    while let Some(joined) = tasks.join_next().await {
        joined.expect("the appender task ran").expect("every concurrent append succeeds");
    }
    let turns = store.conversation("conv-busy").await.expect("conversation");
    let seqs: Vec<i64> = turns.iter().map(|t| t.seq).collect();
    let expected: Vec<i64> = (1..=i64::try_from(2 * WRITERS).expect("small")).collect();
    assert_eq!(seqs, expected);
    for pair in turns.chunks(2) {
        assert_eq!(pair[0].run_id, pair[1].run_id, "a batch is never interleaved: {turns:?}");
        assert_eq!((pair[0].role.as_str(), pair[1].role.as_str()), ("user", "assistant"));
    }
    second.close().await.expect("the second store closes");
}

/// A message reads back as it was appended, whatever its text holds (quotes, escapes,
/// newlines, characters beyond ASCII, nesting), and a role is stored as given.
pub async fn messages_read_back_as_appended(backend: Arc<dyn Backend>) {
    let store = backend.store();
    let mut run = new_run("run-text", "coder", RunStatus::Running);
    run.conversation_id = Some("conv-text".into());
    store.create_run(run, T0).await.expect("the run is created");
    let messages = [
        json!({"text": "a \"quoted\" word,\na new line, a tab\t, a backslash \\ and \u{0007}"}),
        json!({"text": "héllo wörld, 日本語, 🦀", "n": 1.5, "list": [null, true, {"k": "v"}]}),
        json!("a bare string"),
        json!([1, 2, 3]),
    ];
    let roles = ["user", "assistant", "tool \"x\"", "système"];
    let turns: Vec<(String, serde_json::Value)> =
        roles.iter().zip(&messages).map(|(role, message)| ((*role).to_owned(), message.clone())).collect();
    store.append_turns("conv-text", "run-text", turns, T0 + 1).await.expect("the turns are appended");
    let read = store.conversation("conv-text").await.expect("conversation");
    let got: Vec<(i64, &str, &serde_json::Value)> = read.iter().map(|t| (t.seq, t.role.as_str(), &t.message)).collect();
    let want: Vec<(i64, &str, &serde_json::Value)> =
        (1..).zip(roles).zip(&messages).map(|((seq, role), message)| (seq, role, message)).collect();
    assert_eq!(got, want);
}
