//! [`RemoteAgent`]: an agent on another A2A 1.0 server, found by its card, as a team
//! [`Member`].

use crate::Token;
use crate::protocol::codes::INTERNAL_ERROR;
use crate::protocol::{
    AGENT_KEY, ANSWER_ARTIFACT, CARD_PATH, MESSAGE_SENT_AGAIN_EXTENSION, OUTPUT_KEY, TOOL_INPUTS_EXTENSION,
};
use crate::wire::{
    AgentCard, Artifact, Message, Part, Role, SendMessageConfiguration, SendMessageRequest, SendMessageResponse,
    StreamResponse, Task, TaskState, parts_text,
};
use futures::StreamExt;
use futures::future::BoxFuture;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::time::Duration;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use troupe_core::{AgentEvent, AgentEventKind, AgentId, Attribution, PauseReason, RunId, ToolCallId};
use troupe_runtime::{ApprovalDecision, OutputSpec};
use troupe_team::{EventSink, Member, MemberResult, MemberTask, TeamControl};

/// How long connecting to a remote agent may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How often a task the remote agent answered before it ended is read again.
const POLL_INTERVAL: Duration = Duration::from_millis(500);
/// How long a cancelled call waits to learn its remote task's id, to cancel it.
const ID_WAIT: Duration = Duration::from_secs(5);
/// How much of an error response's body is kept in the error.
const BODY_EXCERPT: usize = 512;
/// How much of an error response's body is read: enough for its excerpt, and no more, since
/// a server may send one without end.
const ERROR_BODY: usize = 2 * BODY_EXCERPT;
/// The most bytes read of an answer (an agent card, a JSON-RPC response) and of one streamed
/// event: far more than any real one, so that a server sending without end is refused
/// before it fills memory.
const MAX_BODY: usize = 16 * 1024 * 1024;

/// Why talking to a remote agent failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum A2aClientError {
    /// The request did not get an HTTP answer (unreachable, refused, timed out).
    #[error("cannot reach the A2A agent at {url}: {reason}")]
    Unreachable {
        /// Where.
        url: String,
        /// What failed.
        reason: String,
    },
    /// The server answered with an HTTP error.
    #[error("the A2A agent at {url} answered HTTP {status}: {body}")]
    Status {
        /// Where.
        url: String,
        /// The status code.
        status: u16,
        /// The start of the body.
        body: String,
    },
    /// The answer was not what A2A says it is.
    #[error("the A2A agent at {url} sent an unreadable {what}: {reason}")]
    Malformed {
        /// Where.
        url: String,
        /// What it was supposed to be.
        what: &'static str,
        /// What was wrong.
        reason: String,
    },
    /// The agent card names its endpoint at another origin than its own, and the agent has
    /// a token: the card is read without one, so whoever serves it could direct the token
    /// anywhere.
    #[error(
        "the agent card at {card} names its endpoint at another origin ({endpoint}); its token is sent only to \
         the card's own origin: give the member the URL of a card served where its endpoint is"
    )]
    ForeignEndpoint {
        /// The card's URL.
        card: String,
        /// The endpoint it names.
        endpoint: String,
    },
    /// An answer, or one event of a stream, was larger than the client reads.
    #[error("the A2A agent at {url} sent more than {limit} bytes for its {what}")]
    TooLarge {
        /// Where.
        url: String,
        /// What it was supposed to be.
        what: &'static str,
        /// The limit in bytes.
        limit: usize,
    },
    /// The card lists no JSON-RPC endpoint speaking A2A 1.x.
    #[error("the agent card at {url} lists no JSON-RPC endpoint for A2A 1.0")]
    NoEndpoint {
        /// The card's URL.
        url: String,
    },
    /// The agent refused the request with a JSON-RPC error.
    #[error("the A2A agent refused the request: {message} (code {code})")]
    Rpc {
        /// The JSON-RPC error code (-32001 no such task, …).
        code: i64,
        /// Its message.
        message: String,
    },
    /// The stream ended before the task did, and reading the task did not tell more.
    #[error("the stream of task `{task_id}` ended while it was {state:?}")]
    StreamEnded {
        /// The task.
        task_id: String,
        /// Where it stood.
        state: TaskState,
    },
    /// The caller cancelled.
    #[error("cancelled")]
    Cancelled,
    /// The task took longer than the agent's [`timeout`](RemoteAgent::timeout); it was
    /// cancelled.
    #[error("the remote task did not end within {} s; it was cancelled", after.as_secs_f64())]
    TimedOut {
        /// The timeout.
        after: Duration,
    },
}

/// How a task sent to a remote agent went.
#[derive(Clone, Debug, PartialEq)]
pub struct RemoteOutcome {
    /// The task as it stood last: ended, or waiting for input. A direct answer (a
    /// message without a task) is a completed task holding it.
    pub task: Task,
    /// The answer: the `answer` artifact's text, else every artifact's text, else the
    /// status message's.
    pub answer: String,
}

impl RemoteOutcome {
    fn new(task: Task) -> Self {
        let answer = answer_of(&task);
        RemoteOutcome { task, answer }
    }
}

/// A task's answer: the text of its `answer` artifact, else of all its artifacts, else
/// their data parts as JSON (an agent that answers with a structured document, a typed
/// report's), else its status message.
fn answer_of(task: &Task) -> String {
    let text_of = |artifacts: &mut dyn Iterator<Item = &Artifact>| {
        artifacts.map(|a| parts_text(&a.parts)).filter(|t| !t.is_empty()).collect::<Vec<_>>().join("\n\n")
    };
    let answer = text_of(&mut task.artifacts.iter().filter(|a| a.artifact_id == ANSWER_ARTIFACT));
    if !answer.is_empty() {
        return answer;
    }
    let all = text_of(&mut task.artifacts.iter());
    if !all.is_empty() {
        return all;
    }
    let data: Vec<String> =
        task.artifacts.iter().flat_map(|a| &a.parts).filter_map(|p| p.data.as_ref().map(Value::to_string)).collect();
    if !data.is_empty() {
        return data.join("\n\n");
    }
    task.status.message.as_ref().map(Message::text).unwrap_or_default()
}

/// An agent on another A2A server.
///
/// [`RemoteAgent::resolve`] reads its card; [`RemoteAgent::send`] runs a task there,
/// streaming when the card says the agent streams. As a [`Member`] it runs the member's
/// task and gives back the answer; a remote failure (unreachable, an error, a failed or
/// cancelled task, a task that needs input it cannot give) is a failed result. A task
/// that needs input is cancelled first, so nothing waits for an answer that will not come.
#[derive(Clone)]
pub struct RemoteAgent {
    name: String,
    description: String,
    card: AgentCard,
    card_url: String,
    endpoint: String,
    skill: Option<String>,
    token: Option<Token>,
    streaming: bool,
    http: reqwest::Client,
    control: Option<TeamControl>,
    answer: Option<ApprovalDecision>,
    timeout: Option<Duration>,
    /// Its skill's tools' arguments' schemas, by tool, once read from the extended card.
    inputs: std::collections::BTreeMap<String, Value>,
    /// Whether its server takes a decision with edited arguments (its extended card has
    /// [`TOOL_INPUTS_EXTENSION`]).
    takes_edits: bool,
}

impl std::fmt::Debug for RemoteAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteAgent")
            .field("name", &self.name)
            .field("endpoint", &self.endpoint)
            .field("skill", &self.skill)
            .field("token", &self.token)
            .field("streaming", &self.streaming)
            .field("answer", &self.answer)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

fn unreachable_error(url: &str, error: &reqwest::Error) -> A2aClientError {
    // reqwest's message names the URL, never a header: no token can leak here.
    let mut reason = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        reason.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    A2aClientError::Unreachable { url: url.to_owned(), reason }
}

async fn status_error(url: &str, mut response: reqwest::Response) -> A2aClientError {
    let status = response.status().as_u16();
    let mut read = Vec::new();
    // The body is only an explanation: what cannot be read is left out.
    while let Ok(Some(chunk)) = response.chunk().await {
        read.extend_from_slice(&chunk[..chunk.len().min(ERROR_BODY - read.len())]);
        if read.len() == ERROR_BODY {
            break;
        }
    }
    let mut body = String::from_utf8_lossy(&read).into_owned();
    if body.len() > BODY_EXCERPT {
        let mut cut = BODY_EXCERPT;
        while !body.is_char_boundary(cut) {
            cut -= 1;
        }
        body.truncate(cut);
        body.push('…');
    }
    A2aClientError::Status { url: url.to_owned(), status, body }
}

/// Whether `a` and `b` are URLs of one origin (scheme, host and port); an unreadable URL is
/// of none.
fn same_origin(a: &str, b: &str) -> bool {
    match (reqwest::Url::parse(a), reqwest::Url::parse(b)) {
        (Ok(a), Ok(b)) => a.origin().is_tuple() && a.origin() == b.origin(),
        _ => false,
    }
}

/// `response`'s body as JSON, read as it comes and refused once past [`MAX_BODY`] bytes.
async fn read_json<T: DeserializeOwned>(
    url: &str,
    mut response: reqwest::Response,
    what: &'static str,
) -> Result<T, A2aClientError> {
    let too_large = || A2aClientError::TooLarge { url: url.to_owned(), what, limit: MAX_BODY };
    let malformed = |reason: String| A2aClientError::Malformed { url: url.to_owned(), what, reason };
    // A declared length says it before anything is read.
    if response.content_length().is_some_and(|length| length > MAX_BODY as u64) {
        return Err(too_large());
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| malformed(e.to_string()))? {
        if chunk.len() > MAX_BODY - body.len() {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    serde_json::from_slice(&body).map_err(|e| malformed(e.to_string()))
}

impl RemoteAgent {
    /// Reads the card at `url` — the card's own URL, or the agent's base URL (then
    /// `/.well-known/agent-card.json` under it) — with a client of its own.
    pub async fn resolve(url: &str) -> Result<RemoteAgent, A2aClientError> {
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .map_err(|e| unreachable_error(url, &e))?;
        RemoteAgent::resolve_with(http, url).await
    }

    /// [`RemoteAgent::resolve`] with `http` as the client.
    pub async fn resolve_with(http: reqwest::Client, url: &str) -> Result<RemoteAgent, A2aClientError> {
        let trimmed = url.trim_end_matches('/');
        let card_url = if trimmed.ends_with(".json") { trimmed.to_owned() } else { format!("{trimmed}{CARD_PATH}") };
        let response = http.get(&card_url).send().await.map_err(|e| unreachable_error(&card_url, &e))?;
        if !response.status().is_success() {
            return Err(status_error(&card_url, response).await);
        }
        let card: AgentCard = read_json(&card_url, response, "agent card").await?;
        let endpoint = card
            .jsonrpc_url()
            .map(str::to_owned)
            .ok_or_else(|| A2aClientError::NoEndpoint { url: card_url.clone() })?;
        Ok(RemoteAgent {
            name: card.name.clone(),
            description: card.description.clone(),
            streaming: card.capabilities.streaming,
            card,
            card_url,
            endpoint,
            skill: None,
            token: None,
            http,
            control: None,
            answer: None,
            timeout: None,
            inputs: std::collections::BTreeMap::new(),
            takes_edits: false,
        })
    }

    /// The agent as a team knows it: named `name` instead of the card's name.
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Described by `description` instead of the card's description.
    pub fn described(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }

    /// Runs the card's skill `id` (sent as message metadata `agent`), instead of the
    /// agent's default.
    pub fn skill(mut self, id: impl Into<String>) -> Self {
        self.skill = Some(id.into());
        self
    }

    /// Sends `Authorization: Bearer <token>` with every call.
    pub fn bearer(mut self, token: impl Into<String>) -> Self {
        self.token = Some(Token::new(token));
        self
    }

    /// Puts a remote task's call that waits for a decision to whoever watches the team
    /// through `control`, as a local member's: the member's events carry a `RunPaused`
    /// for it (attributed to the remote task), and [`TeamControl::decide`] about it is
    /// sent to the remote task, which goes on. When the team defers approvals (nobody can
    /// answer) or a task needs input that is not a decision, the task is cancelled and
    /// the member fails, as without a control.
    pub fn with_control(mut self, control: TeamControl) -> Self {
        self.control = Some(control);
        self
    }

    /// Answers every call a remote task waits on with `decision`, asking nobody: the
    /// team's approval mode when it is not a person's (`Approve` for auto, `Reject` for
    /// never). Takes precedence over [`with_control`](Self::with_control).
    pub fn answering(mut self, decision: ApprovalDecision) -> Self {
        self.answer = Some(decision);
        self
    }

    /// Gives a task (as a member, with every decision it waits for) at most `timeout`:
    /// then its remote task is cancelled and the member fails with
    /// [`A2aClientError::TimedOut`]. By default a task may take as long as it takes.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Streams (`SendStreamingMessage`) or not (`SendMessage` answered at once, then
    /// `GetTask` every half second until the task ends); by default, as the card says.
    pub fn streaming(mut self, streaming: bool) -> Self {
        self.streaming = streaming;
        self
    }

    /// The card it was resolved from.
    pub fn card(&self) -> &AgentCard {
        &self.card
    }

    /// Reads the schemas of its skill's tools' arguments from the server's extended card
    /// (`GetExtendedAgentCard`, with its token), when its card offers one that gives
    /// them ([`TOOL_INPUTS_EXTENSION`]; a troupe server's does): what
    /// [`tool_inputs`](Self::tool_inputs) then gives. Such a server also takes a
    /// decision with edited arguments, which [`decide`](Self::decide) then sends (else it
    /// rejects the call, saying why). Against a server that offers no extended card it
    /// asks nothing and leaves them empty.
    pub async fn read_tool_inputs(mut self) -> Result<RemoteAgent, A2aClientError> {
        if !self.card.capabilities.extended_agent_card {
            return Ok(self);
        }
        let card: AgentCard = self.call("GetExtendedAgentCard", json!({}), "extended agent card").await?;
        let skill = self.skill.clone().or_else(|| self.card.skills.first().map(|s| s.id.clone()));
        let offered = card.capabilities.extensions.iter().find(|e| e.uri == TOOL_INPUTS_EXTENSION);
        let schemas = offered
            .and_then(|e| e.params.as_ref()?.get("skills")?.get(skill.as_deref()?)?.as_object().cloned())
            .unwrap_or_default();
        // Only an object can be an arguments' schema.
        self.inputs = schemas.into_iter().filter(|(_, schema)| schema.is_object()).collect();
        self.takes_edits = offered.is_some();
        Ok(self)
    }

    /// The JSON schema of each of its skill's tools' arguments, by tool, as
    /// [`read_tool_inputs`](Self::read_tool_inputs) read them (empty before, or when the
    /// server gives none).
    pub fn tool_inputs(&self) -> &std::collections::BTreeMap<String, Value> {
        &self.inputs
    }

    /// The card's URL.
    pub fn card_url(&self) -> &str {
        &self.card_url
    }

    /// The JSON-RPC endpoint it calls.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The call's request, its token sent only to the card's own origin.
    fn request(&self, method: &str, params: Value) -> Result<reqwest::RequestBuilder, A2aClientError> {
        if self.token.is_some() && !same_origin(&self.card_url, &self.endpoint) {
            return Err(A2aClientError::ForeignEndpoint {
                card: self.card_url.clone(),
                endpoint: self.endpoint.clone(),
            });
        }
        let body = json!({
            "jsonrpc": "2.0",
            "id": uuid::Uuid::new_v4().to_string(),
            "method": method,
            "params": params,
        });
        let request = self.http.post(&self.endpoint).header("A2A-Version", "1.0").json(&body);
        Ok(match &self.token {
            Some(token) => request.bearer_auth(token.expose()),
            None => request,
        })
    }

    fn malformed(&self, what: &'static str, reason: impl Into<String>) -> A2aClientError {
        A2aClientError::Malformed { url: self.endpoint.clone(), what, reason: reason.into() }
    }

    /// The `result` of a JSON-RPC response, as `T`.
    fn result<T: DeserializeOwned>(&self, mut response: Value, what: &'static str) -> Result<T, A2aClientError> {
        if let Some(error) = response.get("error").filter(|e| !e.is_null()) {
            let code = error.get("code").and_then(Value::as_i64).unwrap_or(INTERNAL_ERROR);
            let message = error.get("message").and_then(Value::as_str).unwrap_or("no message").to_owned();
            return Err(A2aClientError::Rpc { code, message });
        }
        let result = response.get_mut("result").map(Value::take).ok_or_else(|| self.malformed(what, "no `result`"))?;
        serde_json::from_value(result).map_err(|e| self.malformed(what, e.to_string()))
    }

    async fn call<T: DeserializeOwned>(
        &self,
        method: &str,
        params: Value,
        what: &'static str,
    ) -> Result<T, A2aClientError> {
        let response = self.request(method, params)?.send().await.map_err(|e| unreachable_error(&self.endpoint, &e))?;
        if !response.status().is_success() {
            return Err(status_error(&self.endpoint, response).await);
        }
        let body: Value = read_json(&self.endpoint, response, what).await?;
        self.result(body, what)
    }

    /// Reads task `id`.
    pub async fn get_task(&self, id: &str) -> Result<Task, A2aClientError> {
        self.call("GetTask", json!({"id": id}), "task").await
    }

    /// Cancels task `id`; the task as it stands after.
    pub async fn cancel_task(&self, id: &str) -> Result<Task, A2aClientError> {
        self.call("CancelTask", json!({"id": id}), "task").await
    }

    fn message(&self, text: &str, task_id: Option<&str>) -> SendMessageRequest {
        let mut message = Message::new(uuid::Uuid::new_v4().to_string(), Role::User, vec![Part::text(text)]);
        message.task_id = task_id.map(str::to_owned);
        if let Some(skill) = &self.skill {
            message.metadata = Some(json!({ AGENT_KEY: skill }));
        }
        SendMessageRequest { message, configuration: None, metadata: None }
    }

    /// A new task's message, asking for a typed answer of `output` when given.
    fn typed_message(&self, text: &str, output: Option<&OutputSpec>) -> SendMessageRequest {
        let mut request = self.message(text, None);
        if let Some(output) = output {
            let asked = json!({"schema": output.schema.schema, "name": output.schema.name});
            match &mut request.message.metadata {
                Some(Value::Object(metadata)) => {
                    metadata.insert(OUTPUT_KEY.to_owned(), asked);
                }
                _ => request.message.metadata = Some(json!({ OUTPUT_KEY: asked })),
            }
        }
        request
    }

    /// Runs a task of `text` until it ends or needs input; every update goes to
    /// `updates` as it comes, when given (a stream's items, or the task as read). When
    /// `cancel` fires, the remote task is cancelled and the call fails with
    /// [`A2aClientError::Cancelled`].
    pub async fn send(
        &self,
        text: &str,
        updates: Option<&(dyn Fn(&StreamResponse) + Send + Sync)>,
        cancel: &CancellationToken,
    ) -> Result<RemoteOutcome, A2aClientError> {
        self.exchange(self.message(text, None), updates, cancel).await
    }

    /// As [`send`](Self::send), asking for a typed answer of `output`'s schema (metadata
    /// [`OUTPUT_KEY`]): a troupe server's answer is then a JSON document of it.
    pub async fn send_typed(
        &self,
        text: &str,
        output: Option<&OutputSpec>,
        updates: Option<&(dyn Fn(&StreamResponse) + Send + Sync)>,
        cancel: &CancellationToken,
    ) -> Result<RemoteOutcome, A2aClientError> {
        self.exchange(self.typed_message(text, output), updates, cancel).await
    }

    /// Answers the remote task `task_id`, which waits for a decision about `call_id`, and
    /// follows it as [`send`](Self::send) does: until it ends or needs input again.
    pub async fn decide(
        &self,
        task_id: &str,
        call_id: &str,
        decision: &ApprovalDecision,
        updates: Option<&(dyn Fn(&StreamResponse) + Send + Sync)>,
        cancel: &CancellationToken,
    ) -> Result<RemoteOutcome, A2aClientError> {
        let data = match decision {
            ApprovalDecision::Approve | ApprovalDecision::AlwaysAllow => {
                json!({"approval": "approve", "callId": call_id})
            }
            ApprovalDecision::Reject { reason } => {
                json!({"approval": "reject", "callId": call_id, "reason": reason})
            }
            ApprovalDecision::Modify { arguments } if self.takes_edits => {
                json!({"approval": "modify", "callId": call_id, "arguments": arguments})
            }
            // Any other server takes a yes or a no: edited arguments cannot be sent.
            ApprovalDecision::Modify { .. } => json!({
                "approval": "reject", "callId": call_id,
                "reason": "the person would change the arguments, which cannot be sent to a remote agent",
            }),
            ApprovalDecision::Cancel => {
                let _ = self.cancel_task(task_id).await;
                return Err(A2aClientError::Cancelled);
            }
        };
        let mut request = self.message("", Some(task_id));
        request.message.parts = vec![Part::data(data)];
        self.exchange(request, updates, cancel).await
    }

    async fn exchange(
        &self,
        request: SendMessageRequest,
        updates: Option<&(dyn Fn(&StreamResponse) + Send + Sync)>,
        cancel: &CancellationToken,
    ) -> Result<RemoteOutcome, A2aClientError> {
        let (ids, mut known) = watch::channel::<Option<String>>(None);
        let work = async {
            let task = if self.streaming {
                self.stream(&request, updates, &ids).await?
            } else {
                self.blocking(&request, updates, &ids).await?
            };
            Ok(RemoteOutcome::new(task))
        };
        let mut work = std::pin::pin!(work);
        tokio::select! {
            outcome = &mut work => return outcome,
            () = cancel.cancelled() => {}
        }
        // The remote task is stopped too. When its id is not known yet (the answer to the
        // send has not come), the answer is awaited, briefly, for it.
        let id_known = async {
            tokio::select! {
                _ = known.wait_for(Option::is_some) => {}
                _ = &mut work => {}
            }
        };
        let _ = tokio::time::timeout(ID_WAIT, id_known).await;
        let id = known.borrow().clone();
        if let Some(id) = id {
            let _ = self.cancel_task(&id).await;
        }
        Err(A2aClientError::Cancelled)
    }

    async fn blocking(
        &self,
        request: &SendMessageRequest,
        updates: Option<&(dyn Fn(&StreamResponse) + Send + Sync)>,
        ids: &watch::Sender<Option<String>>,
    ) -> Result<Task, A2aClientError> {
        // Answered at once and then read until it ends, so a cancellation can name the
        // task straight away (a server that waits anyway is read the same way).
        let mut request = request.clone();
        request.configuration =
            Some(SendMessageConfiguration { return_immediately: Some(true), ..SendMessageConfiguration::default() });
        let params = serde_json::to_value(&request).unwrap_or(Value::Null);
        let answer: SendMessageResponse = self.call("SendMessage", params, "send result").await?;
        let mut task = match answer {
            SendMessageResponse::Task(task) => task,
            SendMessageResponse::Message(message) => return Ok(answered(message)),
        };
        ids.send_replace(Some(task.id.clone()));
        loop {
            if let Some(tell) = updates {
                tell(&StreamResponse::Task(task.clone()));
            }
            if task.status.state.is_terminal() || task.status.state.is_interrupted() {
                return Ok(task);
            }
            tokio::time::sleep(POLL_INTERVAL).await;
            task = self.get_task(&task.id).await?;
        }
    }

    async fn stream(
        &self,
        request: &SendMessageRequest,
        updates: Option<&(dyn Fn(&StreamResponse) + Send + Sync)>,
        ids: &watch::Sender<Option<String>>,
    ) -> Result<Task, A2aClientError> {
        let params = serde_json::to_value(request).unwrap_or(Value::Null);
        let response = self
            .request("SendStreamingMessage", params)?
            .header("accept", "text/event-stream")
            .send()
            .await
            .map_err(|e| unreachable_error(&self.endpoint, &e))?;
        if !response.status().is_success() {
            return Err(status_error(&self.endpoint, response).await);
        }
        let is_sse = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if !is_sse {
            // An error before the stream began comes as one JSON-RPC response.
            let body: Value = read_json(&self.endpoint, response, "stream").await?;
            let item: StreamResponse = self.result(body, "stream item")?;
            return match item {
                StreamResponse::Task(task) => Ok(task),
                StreamResponse::Message(message) => Ok(answered(message)),
                _ => Err(self.malformed("stream", "a stream that is one update")),
            };
        }
        let mut body = response.bytes_stream();
        let mut decoder = SseDecoder::default();
        let mut task: Option<Task> = None;
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| unreachable_error(&self.endpoint, &e))?;
            let events = decoder.push(&chunk).map_err(|EventTooLarge { limit }| A2aClientError::TooLarge {
                url: self.endpoint.clone(),
                what: "stream event",
                limit,
            })?;
            for data in events {
                let value: Value = serde_json::from_str(&data).map_err(|e| self.malformed("stream", e.to_string()))?;
                let item: StreamResponse = self.result(value, "stream item")?;
                if let Some(tell) = updates {
                    tell(&item);
                }
                match item {
                    StreamResponse::Message(message) => return Ok(answered(message)),
                    StreamResponse::Task(t) => {
                        ids.send_replace(Some(t.id.clone()));
                        task = Some(t);
                    }
                    StreamResponse::StatusUpdate(update) => {
                        let current = task.get_or_insert_with(|| Task {
                            id: update.task_id.clone(),
                            context_id: update.context_id.clone(),
                            ..Task::default()
                        });
                        ids.send_replace(Some(current.id.clone()));
                        current.status = update.status;
                    }
                    StreamResponse::ArtifactUpdate(update) => {
                        let current = task.get_or_insert_with(|| Task {
                            id: update.task_id.clone(),
                            context_id: update.context_id.clone(),
                            ..Task::default()
                        });
                        merge_artifact(current, update.artifact, update.append);
                    }
                }
                if let Some(t) = &task
                    && (t.status.state.is_terminal() || t.status.state.is_interrupted())
                {
                    return Ok(t.clone());
                }
            }
        }
        // The stream ended early: the task itself says where it stands.
        let Some(seen) = task else { return Err(self.malformed("stream", "it ended before naming a task")) };
        let task = self.get_task(&seen.id).await?;
        if task.status.state.is_terminal() || task.status.state.is_interrupted() {
            Ok(task)
        } else {
            Err(A2aClientError::StreamEnded { task_id: task.id, state: task.status.state })
        }
    }
}

/// A direct answer, as a completed task holding it.
fn answered(message: Message) -> Task {
    Task {
        id: message.task_id.clone().unwrap_or_default(),
        context_id: message.context_id.clone().unwrap_or_default(),
        status: crate::wire::TaskStatus { state: TaskState::Completed, message: Some(message), timestamp: None },
        ..Task::default()
    }
}

fn merge_artifact(task: &mut Task, artifact: Artifact, append: bool) {
    match task.artifacts.iter_mut().find(|a| a.artifact_id == artifact.artifact_id) {
        Some(existing) if append => existing.parts.extend(artifact.parts),
        Some(existing) => *existing = artifact,
        None => task.artifacts.push(artifact),
    }
}

/// Server-Sent Events, incrementally: bytes in, each event's `data` out.
#[derive(Debug)]
struct SseDecoder {
    /// The unfinished event.
    buffer: Vec<u8>,
    /// How many bytes of `buffer` are known to hold no event's end: only what comes after
    /// is searched, so an event arriving in many chunks is scanned once.
    scanned: usize,
    /// The most bytes one event may hold.
    limit: usize,
}

/// A streamed event grew past [`SseDecoder`]'s limit before it ended.
#[derive(Debug, PartialEq, Eq)]
struct EventTooLarge {
    limit: usize,
}

impl Default for SseDecoder {
    fn default() -> Self {
        SseDecoder::with_limit(MAX_BODY)
    }
}

impl SseDecoder {
    fn with_limit(limit: usize) -> Self {
        SseDecoder { buffer: Vec::new(), scanned: 0, limit }
    }

    /// The data of every event `chunk` ends; [`EventTooLarge`] once the unfinished one is
    /// past the limit.
    fn push(&mut self, chunk: &[u8]) -> Result<Vec<String>, EventTooLarge> {
        self.buffer.extend(chunk.iter().copied().filter(|b| *b != b'\r'));
        let mut events = Vec::new();
        let mut start = 0;
        // The last byte scanned may be the first `\n` of the blank line that ends the event.
        let mut from = self.scanned.saturating_sub(1);
        while let Some(at) = self.buffer[from..].windows(2).position(|w| w == b"\n\n") {
            let end = from + at + 2;
            let block = String::from_utf8_lossy(&self.buffer[start..end]);
            let data: Vec<&str> = block
                .lines()
                .filter_map(|line| line.strip_prefix("data:"))
                .map(|d| d.strip_prefix(' ').unwrap_or(d))
                .collect();
            if !data.is_empty() {
                events.push(data.join("\n"));
            }
            (start, from) = (end, end);
        }
        // Taken out once, not per event: the rest moves once per chunk.
        self.buffer.drain(..start);
        self.scanned = self.buffer.len();
        if self.buffer.len() > self.limit {
            return Err(EventTooLarge { limit: self.limit });
        }
        Ok(events)
    }
}

impl Member for RemoteAgent {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    /// Whether its server finds a task sent again ([`MESSAGE_SENT_AGAIN_EXTENSION`]): a
    /// task with a parent run is sent as the same message each time (its `messageId` made
    /// from the parent run, this member's name and the task's id), so a team resumed after
    /// a crash finds the remote task instead of running it twice.
    fn resumable(&self) -> bool {
        self.card.capabilities.has_extension(MESSAGE_SENT_AGAIN_EXTENSION)
    }

    fn run(
        &self,
        task: MemberTask,
        events: Option<EventSink>,
        cancel: CancellationToken,
    ) -> BoxFuture<'_, MemberResult> {
        Box::pin(async move {
            // Each update is passed on as a `custom` event named `a2a.<kind>`, holding
            // the update as the remote agent sent it.
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<StreamResponse>();
            let tell = move |item: &StreamResponse| {
                let _ = tx.send(item.clone());
            };
            let agent = AgentId::new(self.name.clone());
            let forward = async {
                let mut seq = 0;
                while let Some(item) = rx.recv().await {
                    let Some(sink) = &events else { continue };
                    let (kind, run) = match &item {
                        StreamResponse::Task(t) => ("task", t.id.clone()),
                        StreamResponse::Message(m) => ("message", m.task_id.clone().unwrap_or_default()),
                        StreamResponse::StatusUpdate(u) => ("status_update", u.task_id.clone()),
                        StreamResponse::ArtifactUpdate(u) => ("artifact_update", u.task_id.clone()),
                    };
                    let mut attribution = Attribution::now(agent.clone(), RunId::new(run), seq);
                    attribution.parent_run_id.clone_from(&task.parent_run_id);
                    let value = serde_json::to_value(&item).unwrap_or(Value::Null);
                    let kind = AgentEventKind::Custom { name: format!("a2a.{kind}"), value };
                    // A closed sink means nobody watches: the task goes on.
                    let _ = sink.send(AgentEvent::new(attribution, kind)).await;
                    seq += 1;
                }
            };
            let prompt = task.full_prompt();
            // A timeout cancels the work as the caller would, and says why.
            let work_cancel = cancel.child_token();
            let work = async {
                let cancel = &work_cancel;
                // A typed report is asked of the remote agent as its task's typed answer.
                let mut request = self.typed_message(&prompt, task.report.as_ref());
                if let Some(parent) = &task.parent_run_id {
                    request.message.message_id = member_message_id(parent, &self.name, &task.task_id);
                }
                let mut outcome = self.exchange(request, Some(&tell), cancel).await;
                // A call that waits for a decision is answered as the member was told to, or
                // put to whoever watches the team; each decision goes to the remote task,
                // which goes on until it ends or waits again.
                while let Ok(waiting) = &outcome
                    && let Some(call) = waiting_call(&waiting.task)
                {
                    let decided = match (&self.answer, self.asks()) {
                        (Some(decision), _) => Some((ToolCallId::new(call.call_id.clone()), decision.clone())),
                        (None, Some(control)) => {
                            self.wait_for_decision(&control, &waiting.task, call, &task, events.as_ref(), cancel).await
                        }
                        (None, None) => None,
                    };
                    let Some((call_id, decision)) = decided else { break };
                    let task_id = waiting.task.id.clone();
                    outcome = self.decide(&task_id, call_id.as_str(), &decision, Some(&tell), cancel).await;
                }
                drop(tell);
                outcome
            };
            let outcome = {
                let mut both = std::pin::pin!(async { tokio::join!(work, forward).0 });
                match self.timeout {
                    None => both.await,
                    Some(after) => tokio::select! {
                        outcome = &mut both => outcome,
                        () = tokio::time::sleep(after) => {
                            work_cancel.cancel();
                            // The work ends at once, cancelling its remote task as it goes.
                            let _ = both.await;
                            Err(A2aClientError::TimedOut { after })
                        }
                    },
                }
            };
            self.member_result(task.task_id, outcome).await
        })
    }
}

/// The `messageId` of the task `task_id` given to member `member` under run `parent`:
/// the same each time that task is given, so that a server declaring
/// [`MESSAGE_SENT_AGAIN_EXTENSION`] finds the task it started for it.
fn member_message_id(parent: &RunId, member: &str, task_id: &str) -> String {
    let id = troupe_runtime::durable::child_run_id(parent, &format!("a2a\0{member}\0{task_id}"));
    format!("msg-{}", id.as_str().trim_start_matches("run_"))
}

/// A remote task's call waiting for a decision, as its status message's data part
/// `{"pending": [{type, callId, tool, arguments, reason}]}` names it.
struct WaitingCall {
    call_id: String,
    tool: String,
    arguments: Value,
    reason: String,
}

/// The call `task` waits on, when it waits for a decision about one.
fn waiting_call(task: &Task) -> Option<WaitingCall> {
    if !task.status.state.is_interrupted() {
        return None;
    }
    let message = task.status.message.as_ref()?;
    let pending = message.parts.iter().filter_map(|p| p.data.as_ref()).find_map(|d| d.get("pending"))?;
    let call =
        pending.as_array()?.iter().find(|p| matches!(p["type"].as_str(), Some("approval" | "uncertain_action")))?;
    let text = |key: &str| call.get(key).and_then(Value::as_str).map(str::to_owned);
    Some(WaitingCall {
        call_id: text("callId")?,
        tool: text("tool").unwrap_or_default(),
        arguments: call.get("arguments").cloned().unwrap_or(Value::Null),
        reason: text("reason").unwrap_or_else(|| "the remote agent waits for a decision".to_owned()),
    })
}

impl RemoteAgent {
    /// The control to ask through, when someone watching the team can decide.
    fn asks(&self) -> Option<TeamControl> {
        self.control.clone().filter(|c| !c.defers_approvals())
    }

    /// Announces `call` of the remote task `remote` (a `RunPaused` of the member's run,
    /// which is the remote task) and waits for the decision `control` relays; `None` when
    /// the member is cancelled first.
    async fn wait_for_decision(
        &self,
        control: &TeamControl,
        remote: &Task,
        call: WaitingCall,
        task: &MemberTask,
        events: Option<&EventSink>,
        cancel: &CancellationToken,
    ) -> Option<(ToolCallId, ApprovalDecision)> {
        let run_id = RunId::new(remote.id.clone());
        let (relay, mut decisions) = tokio::sync::mpsc::channel(1);
        control.enter_relayed(&self.name, &run_id, relay);
        control.note_waiting(&run_id, &ToolCallId::new(call.call_id.clone()));
        if let Some(sink) = events {
            let mut attribution = Attribution::now(AgentId::new(self.name.clone()), run_id.clone(), 0);
            attribution.parent_run_id.clone_from(&task.parent_run_id);
            let reason = PauseReason::Approval {
                call_id: ToolCallId::new(call.call_id.clone()),
                tool: call.tool,
                arguments: call.arguments,
                reason: call.reason,
            };
            // A closed sink means nobody watches: nobody will decide either.
            let _ = sink.send(AgentEvent::new(attribution, AgentEventKind::RunPaused { reason })).await;
        }
        let decided = tokio::select! {
            decided = decisions.recv() => decided,
            () = cancel.cancelled() => None,
        };
        control.leave(&run_id);
        decided
    }

    async fn member_result(&self, task_id: String, outcome: Result<RemoteOutcome, A2aClientError>) -> MemberResult {
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(error) => return MemberResult::failed(&self.name, task_id, error.to_string()),
        };
        let remote = &outcome.task;
        let run_id = (!remote.id.is_empty()).then(|| RunId::new(remote.id.clone()));
        let said = remote.status.message.as_ref().map(Message::text).unwrap_or_default();
        let error = match remote.status.state {
            TaskState::Completed => None,
            state if state.is_interrupted() => {
                let _ = self.cancel_task(&remote.id).await;
                Some(format!("the remote task needs input, which a team member cannot give; it was cancelled: {said}"))
            }
            state => Some(if said.is_empty() {
                format!("the remote task ended {}", state.name())
            } else {
                format!("the remote task ended {}: {said}", state.name())
            }),
        };
        MemberResult {
            name: self.name.clone(),
            task_id,
            content: outcome.answer.clone(),
            success: error.is_none(),
            error,
            run_id,
            ..MemberResult::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_events_are_split_across_any_chunking() {
        let stream = b"data: {\"a\":1}\r\n\r\n: keep-alive\n\ndata: {\"b\":\ndata: 2}\n\n";
        for size in 1..stream.len() {
            let mut decoder = SseDecoder::default();
            let events: Vec<String> =
                stream.chunks(size).flat_map(|c| decoder.push(c).expect("within the limit")).collect();
            assert_eq!(events, ["{\"a\":1}", "{\"b\":\n2}"], "chunks of {size}");
        }
    }

    #[test]
    fn the_answer_is_the_answer_artifact_first() {
        let mut task = Task::default();
        task.status.message = Some(Message::new("m", Role::Agent, vec![Part::text("status")]));
        assert_eq!(answer_of(&task), "status");
        task.artifacts.push(Artifact {
            artifact_id: "other".into(),
            parts: vec![Part::text("x")],
            ..Artifact::default()
        });
        assert_eq!(answer_of(&task), "x");
        merge_artifact(
            &mut task,
            Artifact { artifact_id: ANSWER_ARTIFACT.into(), parts: vec![Part::text("Hel")], ..Artifact::default() },
            false,
        );
        merge_artifact(
            &mut task,
            Artifact { artifact_id: ANSWER_ARTIFACT.into(), parts: vec![Part::text("lo")], ..Artifact::default() },
            true,
        );
        assert_eq!(answer_of(&task), "Hel\nlo");
    }

    #[test]
    fn an_answer_given_as_data_is_its_json() {
        let mut task = Task::default();
        task.status.message = Some(Message::new("m", Role::Agent, vec![Part::text("done")]));
        let report = json!({"summary": "sound", "artifacts": [], "decisions": [], "blockers": []});
        task.artifacts.push(Artifact {
            artifact_id: "report".into(),
            parts: vec![Part::data(report.clone())],
            ..Artifact::default()
        });
        let answer = answer_of(&task);
        assert_eq!(serde_json::from_str::<Value>(&answer).expect("the answer is JSON"), report);
        // Text, where there is any, is the answer.
        task.artifacts.push(Artifact {
            artifact_id: "notes".into(),
            parts: vec![Part::text("n")],
            ..Artifact::default()
        });
        assert_eq!(answer_of(&task), "n");
    }

    #[test]
    fn an_event_split_across_many_chunks_decodes() {
        let data = "y".repeat(64 * 1024);
        let stream = format!("data: {data}\n\ndata: 2\n\n");
        let mut decoder = SseDecoder::default();
        let mut events = Vec::new();
        for byte in stream.as_bytes().chunks(1) {
            events.extend(decoder.push(byte).expect("within the limit"));
        }
        assert_eq!(events, [data, "2".to_owned()]);
        assert!(decoder.buffer.is_empty());
    }

    #[test]
    fn an_event_past_the_limit_is_refused() {
        let mut decoder = SseDecoder::with_limit(16);
        assert_eq!(decoder.push(b"data: 123456789\n\n"), Ok(vec!["123456789".to_owned()]), "16 bytes: within");
        assert_eq!(decoder.push(b"data: 1234"), Ok(vec![]));
        assert_eq!(decoder.push(b"56789\n"), Ok(vec![]));
        assert_eq!(decoder.push(b"0"), Err(EventTooLarge { limit: 16 }), "17 bytes without an end");
    }

    /// What the test server answers.
    #[derive(Clone)]
    struct Reply {
        status: u16,
        content_type: &'static str,
        body: Body,
    }

    #[derive(Clone)]
    enum Body {
        /// These bytes, with their length.
        Whole(Vec<u8>),
        /// `x`s, chunked, without a length: this many bytes, or (`None`) until the client
        /// goes away.
        Chunked(Option<usize>),
    }

    impl Reply {
        fn json(value: &Value) -> Reply {
            Reply { status: 200, content_type: "application/json", body: Body::Whole(value.to_string().into_bytes()) }
        }

        /// Twice the limit, chunked: a client without a limit reads it all, and then
        /// cannot parse it.
        fn oversized(content_type: &'static str) -> Reply {
            Reply { status: 200, content_type, body: Body::Chunked(Some(2 * MAX_BODY)) }
        }
    }

    fn card(url: &str) -> Reply {
        Reply::json(&json!({
            "name": "reviewer",
            "description": "Reviews changes",
            "version": "1.0.0",
            "supportedInterfaces": [{"url": format!("{url}/a2a"), "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
            "capabilities": {"streaming": false},
            "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"],
            "skills": []
        }))
    }

    /// An HTTP/1.1 server on loopback answering every GET with `card(its URL)` and every
    /// POST with `answer`; its URL.
    async fn serve(card: impl Fn(&str) -> Reply, answer: Reply) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
        let url = format!("http://{}", listener.local_addr().expect("its address"));
        let card = card(&url);
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let (card, answer) = (card.clone(), answer.clone());
                tokio::spawn(async move {
                    // The client going away ends the answer.
                    let _ = answer_one(socket, card, answer).await;
                });
            }
        });
        url
    }

    async fn answer_one(mut socket: tokio::net::TcpStream, card: Reply, answer: Reply) -> std::io::Result<()> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut request = Vec::new();
        let mut buf = [0u8; 4096];
        let head_end = loop {
            let read = socket.read(&mut buf).await?;
            if read == 0 {
                return Ok(());
            }
            request.extend_from_slice(&buf[..read]);
            if let Some(at) = request.windows(4).position(|w| w == b"\r\n\r\n") {
                break at + 4;
            }
        };
        let head = String::from_utf8_lossy(&request[..head_end]).to_ascii_lowercase();
        let length: usize = head
            .lines()
            .find_map(|line| line.strip_prefix("content-length:"))
            .and_then(|value| value.trim().parse().ok())
            .unwrap_or(0);
        while request.len() < head_end + length {
            let read = socket.read(&mut buf).await?;
            if read == 0 {
                return Ok(());
            }
            request.extend_from_slice(&buf[..read]);
        }
        let reply = if head.starts_with("get ") { card } else { answer };
        let status =
            format!("HTTP/1.1 {} X\r\ncontent-type: {}\r\nconnection: close\r\n", reply.status, reply.content_type);
        match reply.body {
            Body::Whole(body) => {
                socket.write_all(format!("{status}content-length: {}\r\n\r\n", body.len()).as_bytes()).await?;
                socket.write_all(&body).await?;
            }
            Body::Chunked(total) => {
                socket.write_all(format!("{status}transfer-encoding: chunked\r\n\r\n").as_bytes()).await?;
                let size = 64 * 1024;
                let chunk = [format!("{size:x}\r\n").into_bytes(), vec![b'x'; size], b"\r\n".to_vec()].concat();
                let mut sent = 0;
                while total.is_none_or(|total| sent < total) {
                    socket.write_all(&chunk).await?;
                    sent += size;
                }
                socket.write_all(b"0\r\n\r\n").await?;
            }
        }
        socket.shutdown().await
    }

    /// `work`, which must end well before it could have read what it was sent.
    async fn promptly<T>(work: impl std::future::Future<Output = T>) -> T {
        tokio::time::timeout(Duration::from_secs(20), work).await.expect("it ends without reading everything")
    }

    #[tokio::test]
    async fn an_agent_card_past_the_limit_is_refused() {
        let url = serve(|_| Reply::oversized("application/json"), Reply::json(&json!({}))).await;
        let error = promptly(RemoteAgent::resolve(&url)).await.expect_err("refused");
        assert!(matches!(&error, A2aClientError::TooLarge { what: "agent card", limit: MAX_BODY, .. }), "{error}");
    }

    #[tokio::test]
    async fn answers_past_the_limit_are_refused() {
        // Declared by its length: refused before it is read.
        let huge = Reply { body: Body::Whole(vec![b' '; MAX_BODY + 1]), ..Reply::json(&json!({})) };
        let url = serve(card, huge).await;
        let agent = RemoteAgent::resolve(&url).await.expect("the card reads");
        let error = promptly(agent.get_task("t1")).await.expect_err("refused");
        assert!(matches!(&error, A2aClientError::TooLarge { what: "task", .. }), "{error}");

        // Without a length, refused once past it.
        let url = serve(card, Reply::oversized("application/json")).await;
        let agent = RemoteAgent::resolve(&url).await.expect("the card reads").streaming(true);
        let error = promptly(agent.send("hi", None, &CancellationToken::new())).await.expect_err("refused");
        assert!(matches!(&error, A2aClientError::TooLarge { what: "stream", .. }), "{error}");
    }

    #[tokio::test]
    async fn a_streamed_event_past_the_limit_is_refused() {
        let url = serve(card, Reply::oversized("text/event-stream")).await;
        let agent = RemoteAgent::resolve(&url).await.expect("the card reads").streaming(true);
        let error = promptly(agent.send("hi", None, &CancellationToken::new())).await.expect_err("refused");
        assert!(matches!(&error, A2aClientError::TooLarge { what: "stream event", .. }), "{error}");
    }

    #[tokio::test]
    async fn an_error_body_is_read_only_as_far_as_its_excerpt() {
        // Without end: only a client that stops reading can answer.
        let url = serve(card, Reply { status: 500, content_type: "text/plain", body: Body::Chunked(None) }).await;
        let agent = RemoteAgent::resolve(&url).await.expect("the card reads");
        let error = promptly(agent.get_task("t1")).await.expect_err("an HTTP error");
        let A2aClientError::Status { status: 500, body, .. } = &error else { panic!("{error}") };
        assert_eq!(body, &format!("{}…", "x".repeat(BODY_EXCERPT)));
    }

    /// The card is read without the token, so the card cannot send the token elsewhere:
    /// an endpoint at another origin gets nothing, and the call fails saying why.
    #[tokio::test]
    async fn the_token_goes_only_to_the_cards_own_origin() {
        let elsewhere = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
        let elsewhere_url = format!("http://{}", elsewhere.local_addr().expect("its address"));
        let reached = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = std::sync::Arc::clone(&reached);
        tokio::spawn(async move {
            while elsewhere.accept().await.is_ok() {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        });
        let task = json!({"jsonrpc": "2.0", "id": "1", "result": {"id": "t1", "contextId": "c1", "status": {"state": "TASK_STATE_COMPLETED"}}});
        let foreign = serve(move |_| card(&elsewhere_url), Reply::json(&task)).await;
        let agent = RemoteAgent::resolve(&foreign).await.expect("the card is read").bearer("tok-secret");
        let error = agent.get_task("t1").await.expect_err("no call with the token");
        assert!(matches!(error, A2aClientError::ForeignEndpoint { .. }), "{error}");
        assert!(!error.to_string().contains("tok-secret"), "{error}");
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(reached.load(std::sync::atomic::Ordering::SeqCst), 0, "the other origin heard nothing");

        let own = serve(card, Reply::json(&task)).await;
        let agent = RemoteAgent::resolve(&own).await.expect("the card is read").bearer("tok-secret");
        agent.get_task("t1").await.expect("the card's own origin gets the call, token and all");
        let tokenless = RemoteAgent::resolve(&foreign).await.expect("the card is read");
        assert!(
            !matches!(tokenless.get_task("t1").await, Err(A2aClientError::ForeignEndpoint { .. })),
            "no token, no check"
        );
    }
}
