//! The API's description, served at `/openapi.json` (OpenAPI 3.1).

use serde_json::{Value, json};

/// The paths the document describes, with their methods; the server's tests check each
/// one is routed.
pub const PATHS: &[(&str, &str)] = &[
    ("/", "get"),
    ("/console/{file}", "get"),
    ("/healthz", "get"),
    ("/openapi.json", "get"),
    ("/v1/agents", "get"),
    ("/v1/costs", "get"),
    ("/v1/runs", "get"),
    ("/v1/runs", "post"),
    ("/v1/runs/changes", "get"),
    ("/v1/runs/{id}", "get"),
    ("/v1/runs/{id}/events", "get"),
    ("/v1/runs/{id}/signals", "post"),
    ("/v1/runs/{id}/evidence", "get"),
    ("/v1/ws", "get"),
    ("/metrics", "get"),
    ("/agui/{agent}", "post"),
    ("/a2a", "post"),
    ("/.well-known/agent-card.json", "get"),
    ("/a2a/rest/message:send", "post"),
    ("/a2a/rest/message:stream", "post"),
    ("/a2a/rest/tasks", "get"),
    ("/a2a/rest/tasks/{id}", "get"),
    ("/a2a/rest/tasks/{id}:cancel", "post"),
    ("/a2a/rest/tasks/{id}:subscribe", "post"),
    ("/a2a/rest/tasks/{id}:subscribe", "get"),
    ("/a2a/rest/tasks/{id}/pushNotificationConfigs", "post"),
    ("/a2a/rest/tasks/{id}/pushNotificationConfigs", "get"),
    ("/a2a/rest/tasks/{id}/pushNotificationConfigs/{configId}", "get"),
    ("/a2a/rest/tasks/{id}/pushNotificationConfigs/{configId}", "delete"),
    ("/a2a/rest/extendedAgentCard", "get"),
];

fn error_response(description: &str) -> Value {
    json!({"description": description, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}})
}

/// An id: a run's, an agent's, a team's (not dots alone: no path traversal).
fn id_schema() -> Value {
    json!({"type": "string", "maxLength": 128, "pattern": "^[A-Za-z0-9_.:-]*[A-Za-z0-9_:-][A-Za-z0-9_.:-]*$"})
}

fn run_id_parameter() -> Value {
    json!({"name": "id", "in": "path", "required": true, "schema": id_schema()})
}

/// An A2A REST error (`google.rpc.Status` with the A2A reason in its details).
fn a2a_error(description: &str) -> Value {
    json!({"description": description, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/A2aError"}}}})
}

/// The A2A HTTP+JSON binding's paths (see `a2a::rest`).
fn a2a_rest_paths(native: &Value) -> Value {
    let json_object = |description: &str| json!({"description": description, "content": {"application/json": {"schema": {"type": "object"}}}});
    let sse = json!({"description": "The task, then its updates: one StreamResponse per event",
        "content": {"text/event-stream": {"schema": {"type": "object", "properties": {"data": {"type": "string"}}}}}});
    let task_id = json!({"name": "id", "in": "path", "required": true, "schema": id_schema()});
    let config_id = json!({"name": "configId", "in": "path", "required": true, "schema": id_schema()});
    let text = json!({"type": ["string", "null"]});
    let part = json!({"type": "object", "properties": {"text": text, "data": {}, "url": text, "raw": text,
        "filename": text, "mediaType": text, "metadata": {}}});
    let send_body = json!({"required": true, "content": {"application/json": {"schema": {"type": "object", "required": ["message"],
        "properties": {
            "message": {"type": "object", "required": ["parts"], "properties": {
                "messageId": {"type": "string"}, "role": {"type": "string", "description": "ROLE_USER"},
                "parts": {"type": "array", "items": part}, "taskId": text, "contextId": text,
                "metadata": {"description": "`agent`: the skill a new task runs"}}},
            "configuration": {"type": ["object", "null"]}, "metadata": {}}}}}});
    let push_body = json!({"required": true, "content": {"application/json": {"schema": {"type": "object", "required": ["url"],
        "properties": {"id": {"type": "string"}, "taskId": {"type": "string"}, "url": {"type": "string"},
            "token": {"type": ["string", "null"]},
            "authentication": {"type": ["object", "null"],
                "properties": {"scheme": {"type": "string"}, "credentials": {"type": ["string", "null"]}}}}}}}});
    let refused = |ok: Value| {
        json!({"200": ok, "400": a2a_error("Bad params, or not in this state (A2A reason in details)"),
            "401": native["401"], "404": a2a_error("No such task"), "408": a2a_error("The body stopped arriving"),
            "413": a2a_error("The body is larger than the server's limit"), "415": native["415"]})
    };
    let subscribe = json!({"summary": "A2A SubscribeToTask: the task's updates as SSE (not for an ended task)",
        "parameters": [task_id], "responses": refused(sse.clone())});
    json!({
        "/a2a/rest/message:send": {"post": {"summary": "A2A SendMessage: start or continue a task; the task when it ends or needs input",
            "requestBody": send_body, "responses": refused(json_object("{\"task\": …}"))}},
        "/a2a/rest/message:stream": {"post": {"summary": "A2A SendStreamingMessage: the task, then its updates, as SSE",
            "requestBody": send_body, "responses": refused(sse)}},
        "/a2a/rest/tasks": {"get": {"summary": "A2A ListTasks, newest first",
            "parameters": [
                {"name": "contextId", "in": "query", "schema": {"type": "string"}},
                {"name": "status", "in": "query", "schema": {"type": "string"}},
                {"name": "pageSize", "in": "query", "schema": {"type": "integer", "minimum": 0, "maximum": 2_147_483_647_i64}},
                {"name": "pageToken", "in": "query", "schema": {"type": "string"}},
                {"name": "historyLength", "in": "query", "schema": {"type": "integer", "minimum": 0, "maximum": 2_147_483_647_i64}},
                {"name": "statusTimestampAfter", "in": "query", "schema": {"type": "string", "format": "date-time"}},
                {"name": "includeArtifacts", "in": "query", "schema": {"type": "boolean"}}],
            "responses": refused(json_object("{\"tasks\": […], \"nextPageToken\", \"pageSize\", \"totalSize\"}"))}},
        "/a2a/rest/tasks/{id}": {"get": {"summary": "A2A GetTask",
            "parameters": [task_id, {"name": "historyLength", "in": "query",
                "schema": {"type": "integer", "minimum": 0, "maximum": 2_147_483_647_i64}}],
            "responses": refused(json_object("The task"))}},
        "/a2a/rest/tasks/{id}:cancel": {"post": {"summary": "A2A CancelTask", "parameters": [task_id],
            "responses": refused(json_object("The task, cancelled"))}},
        "/a2a/rest/tasks/{id}:subscribe": {"post": subscribe, "get": subscribe},
        "/a2a/rest/tasks/{id}/pushNotificationConfigs": {
            "post": {"summary": "A2A CreateTaskPushNotificationConfig: a webhook for the task's updates (its URL must answer)",
                "parameters": [task_id], "requestBody": push_body,
                "responses": refused(json_object("The config, without its token and credentials"))},
            "get": {"summary": "A2A ListTaskPushNotificationConfigs", "parameters": [task_id],
                "responses": refused(json_object("{\"configs\": […]}"))}},
        "/a2a/rest/tasks/{id}/pushNotificationConfigs/{configId}": {
            "get": {"summary": "A2A GetTaskPushNotificationConfig", "parameters": [task_id, config_id],
                "responses": refused(json_object("The config, without its token and credentials"))},
            "delete": {"summary": "A2A DeleteTaskPushNotificationConfig", "parameters": [task_id, config_id],
                "responses": refused(json_object("{}"))}},
        "/a2a/rest/extendedAgentCard": {"get": {"summary": "A2A GetExtendedAgentCard: the card, and each skill's tools' arguments' schemas (the extension `…/SERVING.md#tool-inputs`)",
            "responses": {"200": json_object("The extended card"), "400": a2a_error("An unsupported A2A-Version"), "401": native["401"]}}}
    })
}

/// The document.
pub fn document() -> Value {
    let errors = json!({
        "400": error_response("Malformed request (bad JSON, bad id)"),
        "401": error_response("Missing or invalid bearer token"),
        "404": error_response("Unknown agent or run"),
        "409": error_response("The request does not fit the run's state"),
        "408": error_response("The body stopped arriving before it was complete"),
        "413": error_response("The body is larger than the server's limit"),
        "415": error_response("The body is not declared JSON"),
        "422": error_response("The body is JSON but not the expected shape"),
        "503": error_response("The run store cannot answer now"),
    });
    // AG-UI's RunAgentInput, as far as this server reads it.
    let source = json!({"oneOf": [
        {"type": "object", "required": ["type", "value", "mimeType"],
            "properties": {"type": {"const": "data"}, "value": {"type": "string"}, "mimeType": {"type": "string"}}},
        {"type": "object", "required": ["type", "value"],
            "properties": {"type": {"const": "url"}, "value": {"type": "string"}, "mimeType": {"type": "string"}}}]});
    let content = json!({"oneOf": [{"type": "string"}, {"type": "array", "items": {"oneOf": [
        {"type": "object", "required": ["type", "text"], "properties": {"type": {"const": "text"}, "text": {"type": "string"}}},
        {"type": "object", "required": ["type", "source"],
            "properties": {"type": {"enum": ["image", "audio", "video", "document"]}, "source": source}}]}}]});
    let text_message = |role: &str| {
        json!({"type": "object", "required": ["id", "role", "content"],
        "properties": {"id": {"type": "string"}, "role": {"const": role}, "content": {"type": "string"}, "name": {"type": "string"}}})
    };
    let tool_call = json!({"type": "object", "required": ["id", "function"], "properties": {"id": {"type": "string"},
        "function": {"type": "object", "required": ["name", "arguments"],
            "properties": {"name": {"type": "string"}, "arguments": {"type": "string"}}}}});
    let message = json!({"oneOf": [
        text_message("developer"),
        text_message("system"),
        {"type": "object", "required": ["id", "role"], "properties": {"id": {"type": "string"}, "role": {"const": "assistant"},
            "content": {"type": "string"}, "toolCalls": {"type": "array", "items": tool_call}, "name": {"type": "string"}}},
        {"type": "object", "required": ["id", "role", "content"], "properties": {"id": {"type": "string"}, "role": {"const": "user"},
            "content": content, "name": {"type": "string"}}},
        {"type": "object", "required": ["id", "role", "content", "toolCallId"], "properties": {"id": {"type": "string"},
            "role": {"const": "tool"}, "content": content, "toolCallId": {"type": "string"}, "error": {"type": "string"}}}]});
    let agui_input = json!({"type": "object",
        "required": ["threadId", "runId", "messages"],
        "properties": {"threadId": id_schema(), "runId": id_schema(),
            "messages": {"type": "array", "minItems": 1, "items": message,
                "description": "The conversation; the last message is the person's (role `user`), else 422"},
            "tools": {"type": "array", "items": {"type": "object", "required": ["name", "description", "parameters"],
                "properties": {"name": {"type": "string"}, "description": {"type": "string"}, "parameters": {"type": "object"}}}},
            "context": {"type": "array", "items": {"type": "object"}}}});
    // What makes a request a WebSocket upgrade.
    let ws_headers = json!([
        {"name": "Connection", "in": "header", "required": true, "schema": {"enum": ["Upgrade"]}},
        {"name": "Upgrade", "in": "header", "required": true, "schema": {"enum": ["websocket"]}},
        {"name": "Sec-WebSocket-Version", "in": "header", "required": true, "schema": {"enum": ["13"]}},
        {"name": "Sec-WebSocket-Key", "in": "header", "required": true,
            "schema": {"type": "string", "pattern": "^[A-Za-z0-9+/]{22}==$"}}]);
    let sse = json!({"text/event-stream": {"schema": {"type": "string",
        "description": "Server-Sent Events: `id` is the event's position in its run, `event` its type, `data` the AgentEvent as JSON"}}});
    let evidence = json!({"get": {"summary": "A recorded run's evidence log verified, and each run's under it",
                "parameters": [run_id_parameter()],
                "responses": {"200": {"description": "Each run's log: its entries, and where it is broken when it is",
                    "content": {"application/json": {"schema": {"type": "object", "required": ["run_id", "verified", "runs"],
                        "properties": {"run_id": {"type": "string"}, "verified": {"type": "boolean"},
                            "runs": {"type": "array", "items": {"type": "object", "required": ["run_id", "agent", "entries"],
                                "properties": {"run_id": {"type": "string"}, "agent": {"type": "string"},
                                    "parent_run_id": {"type": "string"}, "entries": {"type": "integer"},
                                    "problem": {"type": "string"}}}}}}}}},
                    "400": errors["400"], "401": errors["401"], "404": errors["404"], "503": errors["503"]}}});
    let mut document = json!({
        "openapi": "3.1.0",
        "info": {
            "title": "troupe",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Runs of troupe agents and teams, their events (SSE, replayable with Last-Event-ID) and signals."
        },
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "A2aError": {"type": "object", "required": ["error"], "properties": {"error": {"type": "object",
                    "required": ["code", "status", "message"],
                    "properties": {"code": {"type": "integer"}, "status": {"type": "string"}, "message": {"type": "string"},
                        "details": {"type": "array", "items": {"type": "object"}}}}}},
                "Error": {"type": "object", "required": ["error"], "properties": {"error": {"type": "object",
                    "required": ["code", "message"],
                    "properties": {"code": {"type": "string"}, "message": {"type": "string"}}}}},
                "StartRun": {"type": "object", "required": ["instruction"], "additionalProperties": false,
                    "oneOf": [{"required": ["agent"], "not": {"required": ["team"]}},
                        {"required": ["team"], "not": {"anyOf": [{"required": ["agent"]}, {"required": ["output"]}]}}],
                    "properties": {
                    "agent": id_schema(), "team": id_schema(), "instruction": {"type": "string"},
                    "conversation_id": id_schema(), "model": {"type": "string", "minLength": 1}, "stream": {"type": "boolean", "default": true},
                    "output": {"type": "object", "required": ["schema"], "additionalProperties": false, "properties": {
                        "name": {"type": "string", "pattern": "^[a-zA-Z0-9_-]{1,64}$"}, "schema": output_schema()}}}},
                "Signal": {"type": "object", "required": ["type"], "properties": {
                    "type": {"enum": ["user_message", "steering", "approval", "tool_result", "cancel", "resume", "external_event"]},
                    "text": {"type": "string"}, "call_id": {"type": "string"},
                    "content": {"type": "string"}, "is_error": {"type": "boolean"},
                    "decision": {"type": "object", "properties": {"type": {"enum": ["approve", "reject", "modify", "always_allow", "cancel"]}}},
                    "reason": {"type": "string"}}},
                "AgentEvent": {"type": "object", "required": ["type", "agent_id", "run_id", "seq", "timestamp_ms"]},
                "Run": {"type": "object", "properties": {"run_id": {"type": "string"}, "target": {"type": "string"},
                    "phase": {"enum": ["running", "waiting", "ended"]}, "started_ms": {"type": "integer"}, "ended_ms": {"type": "integer"},
                    "model": {"type": "string"}, "events": {"type": "integer"}, "pending": {"type": "array"}, "end": {"type": "object"}}}
            }
        },
        "security": [{"bearer": []}],
        "paths": {
            "/": {"get": {"summary": "The web console's page (its data needs the token, given by the address's fragment)",
                "security": [], "responses": {"200": {"description": "The page", "content": {"text/html": {}}}}}},
            "/console/{file}": {"get": {"summary": "The web console's script and style sheet",
                "security": [],
                "parameters": [{"name": "file", "in": "path", "required": true, "schema": {"type": "string"}}],
                "responses": {"200": {"description": "The file", "content": {"text/javascript": {}, "text/css": {}, "text/html": {}}},
                    "404": errors["404"]}}},
            "/healthz": {"get": {"summary": "Liveness", "security": [], "responses": {"200": {"description": "Serving"}}}},
            "/openapi.json": {"get": {"summary": "This document", "security": [], "responses": {"200": {"description": "The document"}}}},
            "/v1/agents": {"get": {"summary": "The agents and teams this server runs", "responses": {"200": {"description": "Targets"}, "401": errors["401"]}}},
            "/v1/costs": {"get": {"summary": "What the runs of the last days cost: in all, by agent, by team, by model and by day",
                "parameters": [{"name": "days", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 366}}],
                "responses": {"200": {"description": "The costs"}, "400": errors["400"], "401": errors["401"]}}},
            "/v1/runs": {
                "get": {"summary": "The runs, newest first: those held, then a page of the store's",
                    "parameters": [
                        {"name": "offset", "in": "query", "schema": {"type": "integer", "minimum": 0, "maximum": 4294967295_u64}},
                        {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 0, "maximum": 4294967295_u64}},
                        {"name": "status", "in": "query", "description": "Only runs in this status",
                            "schema": {"type": "string", "enum": ["queued", "running", "paused", "completed", "cancelled", "failed",
                                "budget_exceeded", "max_iterations", "incomplete"]}},
                        {"name": "agent", "in": "query", "description": "Only runs of this agent or team", "schema": {"type": "string"}},
                        {"name": "id", "in": "query", "description": "Only runs whose id begins with this", "schema": {"type": "string"}}],
                    "responses": {"200": {"description": "Runs, and `next_offset` (null on the last page)"},
                        "400": errors["400"], "401": errors["401"]}},
                "post": {
                    "summary": "Start a run; the response is its event stream (or, with stream=false, its id)",
                    "parameters": [{"name": "Idempotency-Key", "in": "header", "required": false,
                        "description": "Names this start: the same key sent again for the same agent or team gets the run the first request started (with `Idempotent-Replayed: true`), not a new one; sent with another instruction, conversation or model it is `422 idempotency_key_reused`",
                        "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[!-~]+$"}}],
                    "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/StartRun"}}}},
                    "responses": {"200": {"description": "The run's events", "content": sse}, "201": {"description": "Started"},
                        "400": errors["400"], "401": errors["401"], "404": errors["404"], "408": errors["408"], "413": errors["413"],
                        "415": errors["415"], "422": errors["422"]}
                }
            },
            "/v1/runs/changes": {"get": {"summary": "A `runs` event now and at each change to what the list of held runs shows (a run taken in, one waiting or no longer waiting for a decision, one ended), and, with a store, when a top-level run of another process appears among its newest 100 or one of them is checkpointed (looked at once a second): ask for the list again at each",
                "responses": {"200": {"description": "Events", "content": sse}, "401": errors["401"]}}},
            "/v1/runs/{id}": {"get": {"summary": "A run's state", "parameters": [run_id_parameter()],
                "responses": {"200": {"description": "The run", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Run"}}}},
                    "400": errors["400"], "401": errors["401"], "404": errors["404"]}}},
            "/v1/runs/{id}/events": {"get": {"summary": "A run's events from a position (Last-Event-ID or ?after=), then live",
                "parameters": [run_id_parameter(),
                    {"name": "Last-Event-ID", "in": "header", "schema": {"type": "integer"}},
                    {"name": "after", "in": "query", "schema": {"type": "integer"}}],
                "responses": {"200": {"description": "Events", "content": sse}, "400": errors["400"], "401": errors["401"], "404": errors["404"]}}},
            "/v1/runs/{id}/evidence": evidence,
            "/v1/runs/{id}/signals": {"post": {"summary": "Send a signal: an approval decision, a user message, steering, cancel",
                "parameters": [run_id_parameter()],
                "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Signal"}}}},
                "responses": {"202": {"description": "Taken"}, "400": errors["400"], "401": errors["401"], "404": errors["404"],
                    "408": errors["408"], "409": errors["409"], "413": errors["413"], "415": errors["415"], "422": errors["422"]}}},
            "/metrics": {"get": {"summary": "Prometheus text: runs, outcomes, tokens by type, cost, tool calls, durations, active runs",
                "responses": {"200": {"description": "Metrics", "content": {"text/plain": {"schema": {"type": "string"}}}}, "401": errors["401"]}}},
            "/agui/{agent}": {"post": {"summary": "AG-UI: a RunAgentInput in, AG-UI events out (an approval ends the run with an interrupt; resume it with `resume`)",
                "parameters": [{"name": "agent", "in": "path", "required": true, "schema": id_schema()}],
                "requestBody": {"required": true, "content": {"application/json": {"schema": agui_input}}},
                "responses": {"200": {"description": "AG-UI events", "content": sse}, "400": errors["400"], "401": errors["401"], "404": errors["404"],
                    "408": errors["408"], "413": errors["413"], "415": errors["415"], "422": errors["422"]}}},
            "/a2a": {"post": {"summary": "A2A JSON-RPC 2.0 (1.0 methods and 0.3 names): SendMessage, SendStreamingMessage, GetTask, ListTasks, CancelTask, SubscribeToTask, GetExtendedAgentCard, and the push-notification config methods",
                "requestBody": {"required": false, "description": "A JSON-RPC request; a missing or unreadable one is answered with a JSON-RPC error (200)",
                    "content": {"application/json": {"schema": {"description": "Any JSON: a request object is run, anything else is answered with a JSON-RPC error"}}}},
                "responses": {"200": {"description": "A JSON-RPC response, or SSE for streaming methods"}, "401": errors["401"], "415": errors["415"]}}},
            "/.well-known/agent-card.json": {"get": {"summary": "The A2A agent card: one skill per agent or team", "security": [],
                "responses": {"200": {"description": "The card"}}}},
            "/v1/ws": {"get": {"summary": "WebSocket: start, subscribe and signal messages in; started, event, ended, error messages out",
                "parameters": ws_headers,
                "responses": {"101": {"description": "Switching protocols"}, "400": errors["400"], "401": errors["401"]}}}
        }
    });
    if let (Some(paths), Value::Object(rest)) = (document["paths"].as_object_mut(), a2a_rest_paths(&errors)) {
        paths.extend(rest);
    }
    document
}

/// The `schema` of a run request's `output`: any JSON schema of an object; described here
/// by the subset most answers use (typed properties, required names).
fn output_schema() -> serde_json::Value {
    let property = serde_json::json!({"type": "object", "additionalProperties": false, "properties": {
        "type": {"enum": ["string", "number", "integer", "boolean", "array", "object", "null"]},
        "description": {"type": "string"}}});
    serde_json::json!({"type": "object", "required": ["type"], "additionalProperties": false, "properties": {
        "type": {"const": "object"},
        "properties": {"type": "object", "additionalProperties": property},
        "required": {"type": "array", "items": {"type": "string"}, "uniqueItems": true},
        "additionalProperties": {"type": "boolean"}}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_path_is_described_with_its_method() {
        let doc = document();
        for (path, method) in PATHS {
            assert!(doc["paths"][path][method].is_object(), "{method} {path} is not described");
        }
        assert_eq!(doc["paths"].as_object().map(|p| p.len()), Some(26));
    }
}
