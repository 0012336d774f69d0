//! The step logic of [`RunState`]: what the run does next, by its agent's spec and tools.

use crate::approval::Verdict;
use crate::client_tools::CLIENT_TOOL_REASON;
use crate::outcome::RunOutcome;
use crate::shared_state::{STATE_UPDATE_TOOL, apply_update, state_update_spec};
use crate::spec::AgentSpec;
use crate::state::{Action, CallResult, LoopStatus, PendingCall, Phase, RESUME_INSTRUCTION, RunState};
use serde_json::Value;
use troupe_core::{Budget, FailureCode, Message, ModelRequest};
use troupe_tools::ToolCatalog;

impl RunState {
    /// What to do next. Calling it again without feeding anything back returns the same
    /// kind of action (the model call is counted once it is returned).
    pub fn next_action(&mut self, spec: &AgentSpec, tools: &ToolCatalog) -> Action {
        self.next_action_by(spec, tools, false)
    }

    /// [`next_action`](Self::next_action) once [`apply_policy`](Self::apply_policy) has
    /// decided the pending calls (the machine applies it first, for its denials' audit).
    pub(crate) fn next_action_decided(&mut self, spec: &AgentSpec, tools: &ToolCatalog) -> Action {
        self.next_action_by(spec, tools, true)
    }

    fn next_action_by(&mut self, spec: &AgentSpec, tools: &ToolCatalog, policy_applied: bool) -> Action {
        if let Some(outcome) = &self.outcome {
            return Action::Finish(outcome.clone());
        }
        if self.status == LoopStatus::Cancelling {
            let reason = self.cancel_reason.clone();
            return Action::Finish(self.finish(RunOutcome::Cancelled { reason }));
        }
        if self.phase == Phase::Tools
            && let Some(action) = self.tools_step(spec, tools, policy_applied)
        {
            return action;
        }
        if self.phase == Phase::Answered {
            if self.pending_input.is_empty() {
                let answer = std::mem::take(&mut self.answer);
                match self.check_output(answer) {
                    Ok(output) => return Action::Finish(self.finish(RunOutcome::Completed { output })),
                    Err(Some(outcome)) => return Action::Finish(outcome),
                    // Sent back for correction: the model is called again.
                    Err(None) => {}
                }
            }
            self.answer.clear();
            self.phase = Phase::CallModel;
        }
        if self.phase == Phase::Truncated {
            if self.recoveries >= spec.limits.max_tokens_recoveries {
                let partial = std::mem::take(&mut self.continuation);
                return Action::Finish(self.finish(RunOutcome::Incomplete { partial }));
            }
            self.recoveries += 1;
            self.append(Message::user(RESUME_INSTRUCTION));
            self.phase = Phase::CallModel;
        }
        for message in std::mem::take(&mut self.pending_input) {
            self.append(message);
        }
        if let Some(outcome) = self.check_limits(spec) {
            return Action::Finish(outcome);
        }
        self.iteration += 1;
        self.status = LoopStatus::Running;
        Action::CallModel(Box::new(self.request(spec, tools)))
    }

    /// Ends the run when it has made its iterations or spent its token or dollar budget by
    /// `spec`'s limits (as they are now: they may have changed while the run was going), and
    /// returns the outcome; `None` while it may call the model again.
    fn check_limits(&mut self, spec: &AgentSpec) -> Option<RunOutcome> {
        let limits = &spec.limits;
        let outcome = if self.iteration >= limits.max_iterations {
            RunOutcome::MaxIterations { iterations: self.iteration }
        } else if limits.max_total_tokens.is_some_and(|max| self.usage.total() >= max) {
            RunOutcome::BudgetExceeded { budget: Budget::Tokens }
        } else if limits.max_usd.is_some_and(|max| self.cost_usd >= max) {
            RunOutcome::BudgetExceeded { budget: Budget::Usd }
        } else {
            return None;
        };
        Some(self.finish(outcome))
    }

    /// `answer` as the run's output: itself for a text answer; for a typed one, the JSON
    /// document when it matches. One that does not is sent back to the model (`Err(None)`)
    /// while corrections remain, and then fails the run (`Err(Some(outcome))`).
    fn check_output(&mut self, answer: String) -> Result<String, Option<RunOutcome>> {
        let Some(output) = &self.output else {
            return Ok(answer);
        };
        match output.check(&answer) {
            Ok(document) => Ok(document.to_string()),
            Err(problem) if self.output_corrections < output.max_corrections => {
                let correction = output.correction(&problem);
                self.output_corrections += 1;
                self.pending_input.push(Message::user(correction));
                Err(None)
            }
            Err(problem) => {
                let error = format!(
                    "the final answer did not match the output schema after {} correction(s): {problem}",
                    self.output_corrections
                );
                Err(Some(self.finish(RunOutcome::failed(error, FailureCode::OutputInvalid))))
            }
        }
    }

    /// The request for the next model call: the agent's tools, then the client's, then
    /// [`STATE_UPDATE_TOOL`] when the run shares a state (a name the catalog has stays
    /// the catalog's).
    pub fn request(&self, spec: &AgentSpec, tools: &ToolCatalog) -> ModelRequest {
        let mut offered = tools.specs();
        offered.extend(self.client_tools.iter().filter(|t| tools.get(&t.name).is_none()).cloned());
        if self.shared_state.is_some() && tools.get(STATE_UPDATE_TOOL).is_none() {
            offered.push(state_update_spec());
        }
        ModelRequest {
            model: self.model_name.clone(),
            system: (!spec.instructions.is_empty()).then(|| spec.instructions.clone()),
            messages: self.messages.clone(),
            tools: offered,
            max_tokens: spec.limits.max_output_tokens,
            temperature: spec.temperature,
            output: self.output.as_ref().map(|output| output.schema.clone()),
            cache: spec.prompt_cache,
            ..ModelRequest::default()
        }
    }

    /// Decides the pending calls by the approval policy (what [`next_action`](Self::next_action)
    /// does first on a tool turn) and returns the calls the policy denied just now, each
    /// answered with an error the model sees. Calls decided before are not decided again,
    /// except those waiting for a person: one may have always-allowed the tool since.
    pub fn apply_policy(&mut self, spec: &AgentSpec, tools: &ToolCatalog) -> Vec<PendingCall> {
        let mut denied = Vec::new();
        if self.phase != Phase::Tools || self.outcome.is_some() {
            return denied;
        }
        for call in &mut self.pending_calls {
            // An interrupted call is never reconsidered: only a person knows whether it happened.
            if call.result.is_some() || call.uncertain || !(call.verdict.is_none() || call.is_awaiting()) {
                continue;
            }
            let verdict = match tools.get(&call.tool) {
                Some(tool) => spec.approval.decide(tool.declaration(), &call.arguments, &self.always_allowed),
                // The client runs it: the call waits for its result, whatever the policy.
                None if self.client_tools.iter().any(|t| t.name == call.tool) => {
                    Verdict::Ask { reason: CLIENT_TOOL_REASON.to_owned() }
                }
                // The run's own tool: answered here, at once.
                None if call.tool == STATE_UPDATE_TOOL && self.shared_state.is_some() => {
                    call.result = Some(update_shared_state(&mut self.shared_state, &call.arguments));
                    Verdict::Allow
                }
                // The catalog answers an unknown name with an error listing the known ones.
                None => Verdict::Allow,
            };
            if let Verdict::Deny { reason } = &verdict {
                call.result = Some(CallResult::error(format!(
                    "The tool call was denied by policy: {reason}. Do not repeat it; choose another approach."
                )));
            }
            let is_denied = matches!(verdict, Verdict::Deny { .. });
            call.verdict = Some(verdict);
            if is_denied {
                denied.push(call.clone());
            }
        }
        denied
    }

    /// Decides the pending calls; `None` once all are answered and committed.
    fn tools_step(&mut self, spec: &AgentSpec, tools: &ToolCatalog, policy_applied: bool) -> Option<Action> {
        if !policy_applied {
            self.apply_policy(spec, tools);
        }
        let waiting = self.awaiting_approval();
        if !waiting.is_empty() {
            self.status = LoopStatus::AwaitingApproval;
            return Some(Action::AwaitApproval(waiting));
        }
        self.status = LoopStatus::Running;
        let runnable = self.runnable_calls();
        if !runnable.is_empty() {
            return Some(Action::RunTools(runnable));
        }
        self.commit_results("");
        None
    }
}

/// A call of [`STATE_UPDATE_TOOL`] with `arguments` applied to `shared` (left as it was
/// when the patch does not apply), as the result the model sees.
fn update_shared_state(shared: &mut Option<Value>, arguments: &Value) -> CallResult {
    let Some(state) = shared.as_mut() else {
        return CallResult::error("No state is shared with the client in this run.");
    };
    match apply_update(state, arguments) {
        Ok(next) => {
            *state = next;
            CallResult::text(format!("The shared state was updated. It is now: {state}"), false)
        }
        Err(why) => CallResult::error(format!(
            "The patch was not applied ({why}); the shared state is unchanged. It is: {state}"
        )),
    }
}
