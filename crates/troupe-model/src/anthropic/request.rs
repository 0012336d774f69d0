//! A [`ModelRequest`] as the body of `POST /v1/messages`.

use serde::Serialize;
use troupe_core::{CacheTtl, ContentBlock, ImageSource, Message, ModelRequest, Role, ToolChoice};

#[derive(Serialize)]
pub(super) struct Body<'a> {
    model: &'a str,
    max_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<System<'a>>,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<WireToolChoice<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    stop_sequences: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<Thinking>,
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata: Option<Metadata<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_config: Option<OutputConfig<'a>>,
    stream: bool,
}

/// `output_config`: the structured-output format of a typed answer.
#[derive(Serialize)]
struct OutputConfig<'a> {
    format: OutputFormat<'a>,
}

/// `{type: "json_schema", schema}`: Anthropic takes the schema alone, no name.
#[derive(Serialize)]
struct OutputFormat<'a> {
    r#type: &'static str,
    schema: &'a serde_json::Value,
}

/// The system prompt: a string, or one text block when it carries a cache breakpoint.
#[derive(Serialize)]
#[serde(untagged)]
enum System<'a> {
    Text(&'a str),
    Blocks([SystemBlock<'a>; 1]),
}

#[derive(Serialize)]
struct SystemBlock<'a> {
    r#type: &'static str,
    text: &'a str,
    cache_control: CacheControl,
}

/// A prompt-cache breakpoint: the prefix up to and including the block that carries it is
/// cached (`{"type": "ephemeral"}`, with `"ttl": "1h"` for the long TTL).
#[derive(Clone, Copy, Serialize)]
struct CacheControl {
    r#type: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    ttl: Option<&'static str>,
}

impl CacheControl {
    fn of(ttl: CacheTtl) -> Self {
        let ttl = match ttl {
            CacheTtl::Short => None,
            CacheTtl::Long => Some("1h"),
        };
        CacheControl { r#type: "ephemeral", ttl }
    }
}

#[derive(Serialize)]
struct WireMessage<'a> {
    role: &'static str,
    content: Vec<Marked<'a>>,
}

/// A content block, with the cache breakpoint the last block of a request carries.
#[derive(Serialize)]
struct Marked<'a> {
    #[serde(flatten)]
    block: WireBlock<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<CacheControl>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireBlock<'a> {
    Text {
        text: &'a str,
    },
    Image {
        source: WireImageSource<'a>,
    },
    Document {
        source: WireImageSource<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        title: Option<&'a str>,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: &'a serde_json::Value,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: &'a str,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
    Thinking {
        thinking: &'a str,
        signature: &'a str,
    },
    RedactedThinking {
        data: &'a str,
    },
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireImageSource<'a> {
    Base64 { media_type: &'a str, data: &'a str },
    Url { url: &'a str },
}

#[derive(Serialize)]
struct WireTool<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    description: &'a str,
    input_schema: &'a serde_json::Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<CacheControl>,
}

#[derive(Serialize)]
struct WireToolChoice<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    disable_parallel_tool_use: bool,
}

#[derive(Serialize)]
struct Thinking {
    #[serde(rename = "type")]
    kind: &'static str,
    budget_tokens: u32,
}

#[derive(Serialize)]
struct Metadata<'a> {
    user_id: &'a str,
}

/// An empty object, sent for tool-call arguments that are not one.
static EMPTY_INPUT: std::sync::LazyLock<serde_json::Value> =
    std::sync::LazyLock::new(|| serde_json::Value::Object(serde_json::Map::new()));

pub(super) fn body(request: &ModelRequest, default_max_tokens: u32) -> Body<'_> {
    let forces_tool =
        !request.tools.is_empty() && matches!(request.tool_choice, Some(ToolChoice::Any | ToolChoice::Tool { .. }));
    // Anthropic refuses thinking while the tool choice forces a call; the forced call is
    // the caller's hard requirement, so the reasoning gives way.
    let reasoning = request.reasoning.filter(|_| !forces_tool);
    let max_tokens = request.max_tokens.unwrap_or(match reasoning {
        // The budget must stay below `max_tokens`; the default leaves room for the answer.
        Some(r) if r.budget_tokens >= default_max_tokens => r.budget_tokens.saturating_add(default_max_tokens),
        _ => default_max_tokens,
    });
    let cache = request.cache.map(CacheControl::of);
    let system = request.system.as_deref().filter(|s| !s.is_empty()).map(|text| match cache {
        Some(cache_control) => System::Blocks([SystemBlock { r#type: "text", text, cache_control }]),
        None => System::Text(text),
    });
    let mut messages: Vec<WireMessage<'_>> = request.messages.iter().filter_map(message).collect();
    let mut tools: Vec<WireTool<'_>> = request
        .tools
        .iter()
        .map(|t| WireTool {
            name: &t.name,
            description: &t.description,
            input_schema: &t.input_schema,
            cache_control: None,
        })
        .collect();
    if let Some(cache) = cache {
        // Breakpoints, in the order Anthropic reads the prompt: the tools, the system prompt,
        // and the conversation up to its last block — each turn's request then reads the
        // previous turn's prefix from the cache and writes its own (3 of the 4 allowed).
        if let Some(last) = tools.last_mut() {
            last.cache_control = Some(cache);
        }
        let last_block = messages.last_mut().and_then(|m| {
            m.content
                .iter_mut()
                .rev()
                .find(|b| !matches!(b.block, WireBlock::Thinking { .. } | WireBlock::RedactedThinking { .. }))
        });
        if let Some(block) = last_block {
            block.cache_control = Some(cache);
        }
    }
    Body {
        model: &request.model,
        max_tokens,
        system,
        messages,
        tools,
        tool_choice: tool_choice(request),
        // Anthropic refuses any temperature but 1 while thinking is enabled; the reasoning
        // budget is the stronger wish, so another temperature gives way.
        temperature: request.temperature.filter(|t| reasoning.is_none() || *t == 1.0).map(exact_f64),
        stop_sequences: &request.stop_sequences,
        thinking: reasoning.map(|r| Thinking { kind: "enabled", budget_tokens: r.budget_tokens }),
        // Anthropic's metadata accepts `user_id` and nothing else; other labels would make
        // the request fail, so they stay local.
        metadata: request.metadata.get("user_id").map(|user_id| Metadata { user_id }),
        output_config: request
            .output
            .as_ref()
            .map(|output| OutputConfig { format: OutputFormat { r#type: "json_schema", schema: &output.schema } }),
        stream: true,
    }
}

/// `value` widened by its shortest decimal form, so `0.7f32` is sent as `0.7` rather than
/// `0.699999988079071`.
fn exact_f64(value: f32) -> f64 {
    value.to_string().parse().unwrap_or(f64::from(value))
}

fn tool_choice(request: &ModelRequest) -> Option<WireToolChoice<'_>> {
    if request.tools.is_empty() {
        // Anthropic rejects `tool_choice` without tools, and with no tools there is no
        // choice to make.
        return None;
    }
    let disable_parallel_tool_use = request.parallel_tool_calls == Some(false);
    let (kind, name) = match &request.tool_choice {
        None if disable_parallel_tool_use => ("auto", None),
        None => return None,
        Some(ToolChoice::Auto) => ("auto", None),
        Some(ToolChoice::Any) => ("any", None),
        Some(ToolChoice::Tool { name }) => ("tool", Some(name.as_str())),
        // `none` takes no parallelism flag: no tool is called at all.
        Some(ToolChoice::None) => {
            return Some(WireToolChoice { kind: "none", name: None, disable_parallel_tool_use: false });
        }
    };
    Some(WireToolChoice { kind, name, disable_parallel_tool_use })
}

fn message(message: &Message) -> Option<WireMessage<'_>> {
    let mut content: Vec<Marked<'_>> =
        message.content.iter().filter_map(block).map(|block| Marked { block, cache_control: None }).collect();
    if message.role == Role::User {
        // Anthropic requires a user turn's tool results before any other content.
        content.sort_by_key(|b| !matches!(b.block, WireBlock::ToolResult { .. }));
    }
    // An empty message is refused; one whose every block was dropped has nothing to say.
    if content.is_empty() {
        return None;
    }
    let role = match message.role {
        Role::User => "user",
        Role::Assistant => "assistant",
    };
    Some(WireMessage { role, content })
}

fn block(block: &ContentBlock) -> Option<WireBlock<'_>> {
    Some(match block {
        // Anthropic refuses empty text blocks.
        ContentBlock::Text { text } if text.is_empty() => return None,
        ContentBlock::Text { text } => WireBlock::Text { text },
        ContentBlock::Image { source: ImageSource::Base64 { media_type, data } } => {
            WireBlock::Image { source: WireImageSource::Base64 { media_type, data } }
        }
        ContentBlock::Image { source: ImageSource::Url { url } } => {
            WireBlock::Image { source: WireImageSource::Url { url } }
        }
        ContentBlock::Document { source, name } => WireBlock::Document {
            source: match source {
                ImageSource::Base64 { media_type, data } => WireImageSource::Base64 { media_type, data },
                ImageSource::Url { url } => WireImageSource::Url { url },
            },
            title: name.as_deref(),
        },
        // A call signature is Gemini's; Anthropic has no field for it.
        ContentBlock::ToolUse { id, name, input, signature: _ } => WireBlock::ToolUse {
            id: id.as_str(),
            name,
            // Arguments the model got wrong are kept as a JSON string, which Anthropic
            // refuses; the tool result already tells the model what was wrong.
            input: if input.is_object() { input } else { &EMPTY_INPUT },
        },
        ContentBlock::ToolResult { tool_use_id, content, is_error } => {
            WireBlock::ToolResult { tool_use_id: tool_use_id.as_str(), content, is_error: *is_error }
        }
        ContentBlock::Thinking { text, signature: Some(signature) } => {
            WireBlock::Thinking { thinking: text, signature }
        }
        // Anthropic verifies every thinking block's signature: an unsigned one (another
        // provider's reasoning) would fail the request, and the model does not need it.
        ContentBlock::Thinking { signature: None, .. } => return None,
        ContentBlock::RedactedThinking { data } => WireBlock::RedactedThinking { data },
    })
}
