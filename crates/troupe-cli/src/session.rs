//! `troupe chat -w DIR` without a prompt, at a terminal: a session. A person talks, the
//! coding agent works on the workspace (tool lines and approvals inline, as `troupe run`
//! shows them), and the conversation goes on turn after turn; each turn is a recorded
//! run continuing the one before, so `troupe run --continue` picks the conversation up
//! later. Slash commands: `/undo`, `/model ID`, `/cost`, `/clear`, `/help`, `/exit`.

use crate::Failure;
use crate::run::{Approve, Follow, Lines, follow_with};
use crate::setup;
use crate::store::StoreArgs;
use crate::undo::UndoJournal;
use anyhow::anyhow;
use std::io::Write;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use troupe::runtime::durable::Durability;
use troupe::runtime::{ApprovalPolicy, RunInput};
use troupe::tools::Workspace;
use troupe_core::{ConversationId, Message, RunId, Usage};

/// What `/help` says.
const HELP: &str = "Type a task or a question; the agent works on the workspace and answers.\n\
  /undo       put back the files the last turn wrote or edited
  /model ID   use another model for the next turns\n\
  /cost       tokens and cost of this session so far\n\
  /clear      start a new conversation\n\
  /exit       leave (Ctrl-D too); Ctrl-C stops the turn under way";

/// Runs the session on `place`'s workspace and store, starting on `model`.
pub(crate) async fn run(place: &StoreArgs, model: String, system: Option<String>) -> Result<(), Failure> {
    let config = crate::load_config()?;
    let providers = crate::providers(&config)?;
    let workspace = place.workspace()?;
    let store = place.open().await?;
    let mut model = model;
    let mut history: Vec<Message> = Vec::new();
    let mut conversation = ConversationId::new(RunId::generate().to_string());
    let (mut usage, mut cost, mut turns) = (Usage::default(), 0.0_f64, 0_u32);
    let journal = UndoJournal::new(Workspace::new(&workspace).map_err(|e| Failure::Usage(e.into()))?);
    let mut lines = Some(Lines::spawn());
    let never = CancellationToken::new();
    diagln!("troupe session on {} with {model}; /help for commands", workspace.display());
    loop {
        diag!("› ");
        let _ = std::io::stderr().flush();
        let Some(reader) = lines.as_mut() else { break };
        let Some(Some(line)) = reader.next(&never).await else {
            diagln!();
            break;
        };
        let line = line.trim();
        match line.split_once(' ').map_or((line, ""), |(command, rest)| (command, rest.trim())) {
            ("", _) => continue,
            ("/exit" | "/quit", _) => break,
            ("/help", _) => diagln!("{HELP}"),
            ("/cost", _) => {
                diagln!("{turns} turns; tokens: in {} · out {}; ${cost:.4}", usage.total_input(), usage.output_tokens)
            }
            ("/undo", _) => match journal.undo() {
                Ok(restored) => restored.iter().for_each(|line| diagln!("{line}")),
                Err(nothing) => diagln!("{nothing}"),
            },
            ("/clear", _) => {
                history.clear();
                conversation = ConversationId::new(RunId::generate().to_string());
                diagln!("a new conversation");
            }
            ("/model", "") => diagln!("the model is {model}; /model ID to change it"),
            ("/model", next) => match providers.check(next) {
                Ok(()) => {
                    model = next.to_owned();
                    diagln!("the next turns use {model}");
                }
                Err(error) => diagln!("cannot use {next}: {error}"),
            },
            (command, _) if command.starts_with('/') => diagln!("unknown command {command}; /help lists them"),
            _ => {
                let mut spec = setup::coding_spec(model.clone(), ApprovalPolicy::default(), None, None);
                if let Some(system) = &system {
                    spec.instructions = format!("{}\n\n{system}", spec.instructions);
                }
                journal.begin_turn();
                let runner = setup::runner(&workspace, providers.clone(), &Default::default())?
                    .with_middleware(Arc::new(journal.clone()));
                setup::validate(&runner, &spec)?;
                let agent = setup::agent(runner, spec, Some(Durability::new(store.clone())));
                let mut input = RunInput::new(line).history(history.clone());
                input.conversation_id = Some(conversation.clone());
                let handle = agent.start(input);
                let options = Follow {
                    json: false,
                    approve: Approve::Ask,
                    recorded: true,
                    known: Vec::new(),
                    workspace: Some(workspace.clone()),
                };
                let (output, returned) = follow_with(handle, &options, lines.take()).await;
                lines = returned;
                let output = output?;
                turns += 1;
                usage += output.usage;
                cost += output.cost_usd;
                if !output.is_completed() {
                    diagln!("{}", crate::render::outcome_message(&output.outcome));
                }
                // The next turn sees this one whole; a turn stopped mid-call is left out.
                history = crate::run::answered(output.messages);
            }
        }
    }
    if turns == 0 && history.is_empty() {
        return Ok(());
    }
    diagln!("{turns} turns; ${cost:.4}. `troupe run --continue TASK` picks the conversation up again");
    Ok(())
}

/// Refuses a session where no person can type (stdin or stderr is not a terminal).
pub(crate) fn at_a_terminal() -> Result<(), Failure> {
    use std::io::IsTerminal;
    if std::io::stdin().is_terminal() && std::io::stderr().is_terminal() {
        Ok(())
    } else {
        Err(Failure::Usage(anyhow!("a session needs a terminal; give a PROMPT to chat once")))
    }
}
