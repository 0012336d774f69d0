//! Wire-safe tool names.
//!
//! OpenAI and Anthropic accept tool names matching `^[a-zA-Z0-9_-]{1,64}$`, while catalog
//! names use dots and slashes (`fs.read`, `github/create_issue`). [`ToolNameCodec`] encodes
//! every name of a request for the wire and decodes the names a model calls back.

use crate::error::{Error, Result};
use std::borrow::Cow;
use std::collections::HashMap;
use troupe_core::{ContentBlock, ModelRequest, ToolChoice};

const MAX_WIRE_NAME: usize = 64;

/// The encoding of one request's tool names.
#[derive(Debug, Default, Clone)]
pub struct ToolNameCodec {
    to_wire: HashMap<String, String>,
    from_wire: HashMap<String, String>,
}

/// The wire form of a catalog name: characters outside `[a-zA-Z0-9_-]` become `_`, and
/// the result is cut to 64 characters.
pub fn wire_name(name: &str) -> Cow<'_, str> {
    let valid = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if name.len() <= MAX_WIRE_NAME && !name.is_empty() && name.chars().all(valid) {
        return Cow::Borrowed(name);
    }
    let mut encoded: String = name.chars().map(|c| if valid(c) { c } else { '_' }).take(MAX_WIRE_NAME).collect();
    if encoded.is_empty() {
        encoded.push('_');
    }
    Cow::Owned(encoded)
}

impl ToolNameCodec {
    /// The codec for `request`'s tools. Two tools whose names encode to the same wire
    /// name are a configuration error, found here rather than at the first call.
    pub fn for_request(request: &ModelRequest) -> Result<Self> {
        // The common case, every name already wire-safe, needs no maps: distinct catalog
        // names cannot collide when none of them changes.
        if request.tools.iter().all(|tool| matches!(wire_name(&tool.name), Cow::Borrowed(_))) {
            return Ok(ToolNameCodec::default());
        }
        let mut codec = ToolNameCodec::default();
        for tool in &request.tools {
            let wire = wire_name(&tool.name);
            if let Some(existing) = codec.from_wire.get(wire.as_ref())
                && existing != &tool.name
            {
                return Err(Error::Config(format!(
                    "tools `{existing}` and `{}` both encode to the wire name `{wire}`; rename one",
                    tool.name
                )));
            }
            if let Cow::Owned(wire) = wire {
                codec.to_wire.insert(tool.name.clone(), wire.clone());
                codec.from_wire.insert(wire, tool.name.clone());
            } else {
                codec.from_wire.insert(tool.name.clone(), tool.name.clone());
            }
        }
        codec.from_wire.retain(|wire, name| wire != name);
        Ok(codec)
    }

    /// Whether any name changes on the wire.
    pub fn is_identity(&self) -> bool {
        self.to_wire.is_empty()
    }

    /// The wire name of a catalog name.
    pub fn encode<'a>(&'a self, name: &'a str) -> Cow<'a, str> {
        match self.to_wire.get(name) {
            Some(wire) => Cow::Borrowed(wire.as_str()),
            None => wire_name(name),
        }
    }

    /// The catalog name of a wire name the model called.
    pub fn decode<'a>(&'a self, wire: &'a str) -> &'a str {
        self.from_wire.get(wire).map(String::as_str).unwrap_or(wire)
    }

    /// `request` with every tool name (specs, tool choice, earlier calls) in wire form.
    pub fn encode_request<'r>(&self, request: &'r ModelRequest) -> Cow<'r, ModelRequest> {
        let history_needs_encoding = request.messages.iter().any(|m| {
            m.content
                .iter()
                .any(|b| matches!(b, ContentBlock::ToolUse { name, .. } if matches!(wire_name(name), Cow::Owned(_))))
        });
        if self.is_identity() && !history_needs_encoding {
            return Cow::Borrowed(request);
        }
        let mut encoded = request.clone();
        for tool in &mut encoded.tools {
            tool.name = self.encode(&tool.name).into_owned();
        }
        if let Some(ToolChoice::Tool { name }) = &mut encoded.tool_choice {
            *name = self.encode(name).into_owned();
        }
        for message in &mut encoded.messages {
            for block in &mut message.content {
                if let ContentBlock::ToolUse { name, .. } = block {
                    *name = self.encode(name).into_owned();
                }
            }
        }
        Cow::Owned(encoded)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use troupe_core::{Message, Role, ToolSpec};

    fn request(names: &[&str]) -> ModelRequest {
        let mut r = ModelRequest::new("m");
        for n in names {
            r = r.tool(ToolSpec::new(*n, "d", json!({"type": "object"})));
        }
        r
    }

    #[test]
    fn dotted_names_round_trip() {
        let r = request(&["fs.read", "github/create_issue", "plain"]);
        let codec = ToolNameCodec::for_request(&r).expect("no collision");
        assert_eq!(codec.encode("fs.read"), "fs_read");
        assert_eq!(codec.decode("fs_read"), "fs.read");
        assert_eq!(codec.decode("github_create_issue"), "github/create_issue");
        assert_eq!(codec.decode("plain"), "plain");
        let encoded = codec.encode_request(&r);
        let names: Vec<_> = encoded.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["fs_read", "github_create_issue", "plain"]);
    }

    #[test]
    fn collisions_are_a_configuration_error() {
        let err = ToolNameCodec::for_request(&request(&["fs.read", "fs_read"])).expect_err("collide");
        assert!(err.to_string().contains("`fs.read` and `fs_read`"), "{err}");
    }

    #[test]
    fn history_and_choice_are_encoded_and_valid_requests_are_borrowed() {
        let plain = request(&["a", "b"]);
        assert!(matches!(ToolNameCodec::for_request(&plain).expect("ok").encode_request(&plain), Cow::Borrowed(_)));
        let mut r = request(&["fs.read"]).tool_choice(ToolChoice::Tool { name: "fs.read".into() });
        r.messages.push(Message::new(Role::Assistant, vec![ContentBlock::tool_use("c", "fs.read", json!({}))]));
        let codec = ToolNameCodec::for_request(&r).expect("ok");
        let encoded = codec.encode_request(&r);
        assert_eq!(encoded.tool_choice, Some(ToolChoice::Tool { name: "fs_read".into() }));
        assert_eq!(encoded.messages[0].tool_uses().next().map(|(_, n, _)| n), Some("fs_read"));
    }

    #[test]
    fn long_and_empty_names_are_cut_and_filled() {
        let long = "x".repeat(100);
        assert_eq!(wire_name(&long).len(), 64);
        assert_eq!(wire_name(""), "_");
        assert_eq!(wire_name("ünï"), "_n_");
    }
}
