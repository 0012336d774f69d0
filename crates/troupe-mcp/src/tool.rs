//! MCP tools as troupe [`Tool`]s: their declarations (effect, idempotency, approval) and
//! their results.
//!
//! The effect is what approval is derived from, so it follows the server's annotations only
//! as far as they can be trusted:
//!
//! | annotations | untrusted server (default) | `trust_annotations = true` |
//! |---|---|---|
//! | `readOnlyHint: true` | external side effect | read-only (no approval, idempotent) |
//! | `destructiveHint: true` | destructive | destructive |
//! | none of these | external side effect | external side effect |
//! | `idempotentHint: true` | non-idempotent | idempotent |
//!
//! A hint can always make a tool *more* guarded (`destructiveHint`), never less unless the
//! server is trusted: the MCP specification tells clients not to decide on annotations of
//! untrusted servers.

use crate::client::McpClient;
use crate::config::McpServerConfig;
use crate::error::McpError;
use crate::names::catalog_name;
use crate::schema::normalize_input_schema;
use futures::FutureExt;
use futures::future::BoxFuture;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, ResourceContents};
use serde::Serialize;
use std::sync::Arc;
use troupe_tools::{Effect, Idempotency, Tool, ToolContext, ToolDeclaration, ToolError, ToolOutput};

/// The hints a server gave about one tool, as sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ToolHints {
    /// `readOnlyHint`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    /// `destructiveHint`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destructive: Option<bool>,
    /// `idempotentHint`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idempotent: Option<bool>,
    /// `openWorldHint`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_world: Option<bool>,
}

/// One tool of an MCP server, as troupe offers it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct McpToolInfo {
    /// The server's name.
    pub server: String,
    /// The tool's name at the server.
    pub name: String,
    /// The catalog name, `server/tool`.
    pub catalog_name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// The input schema, normalized ([`normalize_input_schema`]).
    pub input_schema: serde_json::Value,
    /// The server's hints.
    pub hints: ToolHints,
    /// The effect troupe takes the tool to have (see the module docs).
    pub effect: Effect,
    /// Whether troupe takes calls to be repeatable.
    pub idempotency: Idempotency,
}

impl McpToolInfo {
    /// The catalog declaration of the tool.
    pub fn declaration(&self) -> ToolDeclaration {
        let mut declaration =
            ToolDeclaration::new(&self.catalog_name, &self.description, self.input_schema.clone(), self.effect);
        declaration.idempotency = self.idempotency;
        declaration
    }

    /// Whether a call may be sent again after its session was lost mid-call.
    pub fn is_repeatable(&self) -> bool {
        self.effect == Effect::ReadOnly || self.idempotency == Idempotency::Idempotent
    }
}

/// The effect and idempotency troupe derives from `hints`.
pub fn derive_effect(hints: &ToolHints, trusted: bool) -> (Effect, Idempotency) {
    let read_only = trusted && hints.read_only == Some(true);
    if read_only {
        return (Effect::ReadOnly, Idempotency::Idempotent);
    }
    let effect = if hints.destructive == Some(true) { Effect::Destructive } else { Effect::ExternalSideEffect };
    let idempotency =
        if trusted && hints.idempotent == Some(true) { Idempotency::Idempotent } else { Idempotency::NonIdempotent };
    (effect, idempotency)
}

/// What troupe makes of the tool `tool` of the server of `config`.
pub(crate) fn tool_info(config: &McpServerConfig, tool: &rmcp::model::Tool) -> McpToolInfo {
    let hints = tool
        .annotations
        .as_ref()
        .map(|a| ToolHints {
            read_only: a.read_only_hint,
            destructive: a.destructive_hint,
            idempotent: a.idempotent_hint,
            open_world: a.open_world_hint,
        })
        .unwrap_or_default();
    let (effect, idempotency) = derive_effect(&hints, config.trust_annotations);
    let description = tool
        .description
        .as_deref()
        .filter(|d| !d.trim().is_empty())
        .map(str::to_owned)
        .or_else(|| tool.title.clone().filter(|t| !t.trim().is_empty()))
        .unwrap_or_else(|| format!("The tool `{}` of the MCP server `{}`.", tool.name, config.name));
    McpToolInfo {
        server: config.name.clone(),
        name: tool.name.to_string(),
        catalog_name: catalog_name(&config.name, &tool.name),
        description,
        input_schema: normalize_input_schema(serde_json::Value::Object(tool.input_schema.as_ref().clone())),
        hints,
        effect,
        idempotency,
    }
}

/// One MCP tool as a catalog tool (`server/tool`), calling through a shared [`McpClient`].
pub struct McpTool {
    client: Arc<McpClient>,
    info: McpToolInfo,
    declaration: ToolDeclaration,
}

impl McpTool {
    /// The catalog tool for `info`, one of `client`'s tools.
    pub fn new(client: Arc<McpClient>, info: McpToolInfo) -> Self {
        let declaration = info.declaration();
        McpTool { client, info, declaration }
    }

    /// What the server said about the tool.
    pub fn info(&self) -> &McpToolInfo {
        &self.info
    }

    /// This tool behind an [`Arc`], as the catalog stores tools.
    pub fn into_arc(self) -> Arc<dyn Tool> {
        Arc::new(self)
    }
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTool").field("declaration", &self.declaration).finish_non_exhaustive()
    }
}

impl Tool for McpTool {
    fn declaration(&self) -> &ToolDeclaration {
        &self.declaration
    }

    fn call<'a>(
        &'a self,
        _ctx: &'a ToolContext,
        args: serde_json::Value,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        async move {
            let arguments = arguments_object(args)?;
            let result = self.client.call(&self.info.name, arguments, self.info.is_repeatable()).await?;
            to_tool_output(result).map_err(ToolError::from)
        }
        .boxed()
    }
}

/// The model's arguments as the JSON object MCP sends: `null` is no arguments, a string is
/// parsed (some models send the object as text), anything else is refused.
pub(crate) fn arguments_object(args: serde_json::Value) -> Result<JsonObject, ToolError> {
    match args {
        serde_json::Value::Object(map) => Ok(map),
        serde_json::Value::Null => Ok(JsonObject::new()),
        serde_json::Value::String(text) => match serde_json::from_str::<serde_json::Value>(&text) {
            Ok(serde_json::Value::Object(map)) => Ok(map),
            Ok(_) => Err(ToolError::invalid_arguments("arguments must be a JSON object")),
            Err(e) => Err(ToolError::invalid_arguments(format!("arguments are not valid JSON: {e}"))),
        },
        other => Err(ToolError::invalid_arguments(format!(
            "arguments must be a JSON object, got {}",
            match other {
                serde_json::Value::Array(_) => "an array",
                serde_json::Value::Bool(_) => "a boolean",
                serde_json::Value::Number(_) => "a number",
                _ => "a value",
            }
        ))),
    }
}

/// A call's result as the model sees it: its content blocks as text (media described, not
/// inlined), its structured content kept aside; a result flagged `isError` is a failure.
pub fn to_tool_output(result: CallToolResult) -> Result<ToolOutput, McpError> {
    let mut text: Vec<String> = result.content.iter().map(describe_block).collect();
    if text.is_empty()
        && let Some(structured) = &result.structured_content
    {
        text.push(structured.to_string());
    }
    let content = text.join("\n");
    if result.is_error == Some(true) {
        let message =
            if content.is_empty() { "the tool reported an error without saying why".to_owned() } else { content };
        return Err(McpError::ToolFailed { message });
    }
    let mut output = ToolOutput::text(content);
    if let Some(structured) = result.structured_content {
        output = output.with_structured(structured);
    }
    Ok(output)
}

fn describe_block(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text(text) => text.text.clone(),
        ContentBlock::Image(image) => {
            format!("[image: {}, {} bytes of base64 data not shown]", image.mime_type, image.data.len())
        }
        ContentBlock::Audio(audio) => {
            format!("[audio: {}, {} bytes of base64 data not shown]", audio.mime_type, audio.data.len())
        }
        ContentBlock::Resource(embedded) => match &embedded.resource {
            ResourceContents::TextResourceContents { uri, text, .. } => format!("[resource {uri}]\n{text}"),
            ResourceContents::BlobResourceContents { uri, mime_type, blob, .. } => format!(
                "[resource {uri}: {}, {} bytes of base64 data not shown]",
                mime_type.as_deref().unwrap_or("binary"),
                blob.len()
            ),
            _ => "[resource of a kind troupe does not show]".to_owned(),
        },
        ContentBlock::ResourceLink(link) => format!("[resource link: {} ({})]", link.uri, link.name),
        _ => "[content of a kind troupe does not show]".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn hints_only_relax_effects_of_trusted_servers() {
        let read_only = ToolHints { read_only: Some(true), idempotent: Some(true), ..Default::default() };
        assert_eq!(derive_effect(&read_only, false), (Effect::ExternalSideEffect, Idempotency::NonIdempotent));
        assert_eq!(derive_effect(&read_only, true), (Effect::ReadOnly, Idempotency::Idempotent));
        let destructive = ToolHints { destructive: Some(true), ..Default::default() };
        assert_eq!(derive_effect(&destructive, false).0, Effect::Destructive, "stricter hints always count");
        let idempotent_writer = ToolHints { read_only: Some(false), idempotent: Some(true), ..Default::default() };
        assert_eq!(derive_effect(&idempotent_writer, true), (Effect::ExternalSideEffect, Idempotency::Idempotent));
        assert_eq!(derive_effect(&ToolHints::default(), true).0, Effect::ExternalSideEffect);
    }

    #[test]
    fn arguments_are_objects() {
        assert_eq!(arguments_object(json!({"a": 1})).expect("object")["a"], 1);
        assert!(arguments_object(json!(null)).expect("none").is_empty());
        assert_eq!(arguments_object(json!("{\"a\": 2}")).expect("text")["a"], 2);
        assert!(matches!(arguments_object(json!([1])), Err(ToolError::InvalidArguments { .. })));
        assert!(matches!(arguments_object(json!("{oops")), Err(ToolError::InvalidArguments { .. })));
    }

    #[test]
    fn results_become_text_and_errors_failures() {
        let result: CallToolResult = serde_json::from_value(json!({
            "content": [
                {"type": "text", "text": "one"},
                {"type": "image", "data": "AAAA", "mimeType": "image/png"},
                {"type": "resource", "resource": {"uri": "file:///a.txt", "text": "inside"}},
            ],
            "structuredContent": {"n": 1},
        }))
        .expect("a result");
        let out = to_tool_output(result).expect("success");
        assert_eq!(
            out.content,
            "one\n[image: image/png, 4 bytes of base64 data not shown]\n[resource file:///a.txt]\ninside"
        );
        assert_eq!(out.structured, Some(json!({"n": 1})));
        let failed: CallToolResult =
            serde_json::from_value(json!({"content": [{"type": "text", "text": "no such file"}], "isError": true}))
                .expect("a result");
        assert_eq!(to_tool_output(failed), Err(McpError::ToolFailed { message: "no such file".into() }));
        let structured_only: CallToolResult =
            serde_json::from_value(json!({"content": [], "structuredContent": {"sum": 3}})).expect("a result");
        assert_eq!(to_tool_output(structured_only).expect("success").content, "{\"sum\":3}");
    }
}
