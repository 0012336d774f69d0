//! The agent card, `GET /.well-known/agent-card.json`: who this server is, where its
//! JSON-RPC endpoint and HTTP+JSON binding are, and one skill per agent or team it
//! exposes.

use super::wire::{AgentCapabilities, AgentCard, AgentExtension, AgentInterface, AgentSkill};
use crate::config::ServerConfig;
use crate::launcher::{Target, TargetKind};
use crate::state::AppState;
use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use serde_json::json;
use std::collections::BTreeMap;
use troupe_a2a::{MESSAGE_SENT_AGAIN_EXTENSION, TOOL_INPUTS_EXTENSION};

/// The path of the JSON-RPC endpoint, under the server's base URL.
pub const RPC_PATH: &str = "/a2a";
/// The name of the bearer security scheme on the card.
pub const BEARER_SCHEME: &str = "bearer";

/// The URL clients reach the server at: [`ServerConfig::public_url`], else the request's
/// `Host` (with `X-Forwarded-Proto`, `http` by default).
pub fn base_url(config: &ServerConfig, headers: &HeaderMap) -> String {
    if let Some(url) = config.public_url.as_deref().map(str::trim).filter(|u| !u.is_empty()) {
        return url.trim_end_matches('/').to_owned();
    }
    // The Host header is the client's word: only a plain host[:port] is echoed back.
    let plain = |value: &str| {
        !value.is_empty()
            && value.len() <= 255
            && value.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']'))
    };
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    let host = header("host").filter(|h| plain(h)).unwrap_or("localhost");
    let scheme = match header("x-forwarded-proto") {
        Some("https") => "https",
        _ => "http",
    };
    format!("{scheme}://{host}")
}

fn skill(target: &Target) -> AgentSkill {
    let kind = match target.kind {
        TargetKind::Agent => "agent",
        TargetKind::Team => "team",
    };
    let description = if target.description.trim().is_empty() {
        format!("The {kind} `{}`.", target.name)
    } else {
        target.description.clone()
    };
    AgentSkill {
        id: target.name.clone(),
        name: target.name.clone(),
        description,
        tags: std::iter::once(kind.to_owned()).chain(target.tools.iter().cloned()).collect(),
        examples: Vec::new(),
    }
}

/// The card of a server exposing `targets` at `base`, with `tokens_required` saying
/// whether clients must send a bearer token.
///
/// Its name and description are the target's when there is one, the server's otherwise.
/// It lists the JSON-RPC endpoint twice — as A2A 1.0 and as 0.3, the same URL speaking
/// both — then the HTTP+JSON binding (1.0), and carries the 0.3 card fields too, so
/// either version's clients find it. It offers streaming and push notifications.
pub fn agent_card(targets: &[Target], base: &str, tokens_required: bool) -> AgentCard {
    let url = format!("{base}{RPC_PATH}");
    let (name, description) = match targets {
        [only] => (only.name.clone(), skill(only).description),
        _ => (
            "troupe".to_owned(),
            format!("A troupe server offering {} agents and teams; name one as the skill to run.", targets.len()),
        ),
    };
    let interface = |url: &str, binding: &str, version: &str| AgentInterface {
        url: url.to_owned(),
        protocol_binding: binding.to_owned(),
        protocol_version: version.to_owned(),
    };
    let rest = format!("{base}{}", super::rest::REST_PATH);
    let mut card = AgentCard {
        name,
        description,
        supported_interfaces: vec![
            interface(&url, "JSONRPC", "1.0"),
            interface(&url, "JSONRPC", "0.3"),
            interface(&rest, "HTTP+JSON", "1.0"),
        ],
        version: env!("CARGO_PKG_VERSION").to_owned(),
        capabilities: AgentCapabilities {
            streaming: true,
            push_notifications: true,
            extended_agent_card: true,
            ..AgentCapabilities::default()
        },
        default_input_modes: vec!["text/plain".to_owned(), "application/json".to_owned()],
        default_output_modes: vec!["text/plain".to_owned()],
        skills: targets.iter().map(skill).collect(),
        url: Some(url.clone()),
        protocol_version: Some("0.3.0".to_owned()),
        preferred_transport: Some("JSONRPC".to_owned()),
        ..AgentCard::default()
    };
    if tokens_required {
        // Both versions' forms of one scheme, as the reference SDK serves them: 1.0
        // reads `httpAuthSecurityScheme`, 0.3 reads `type` and `scheme`.
        let scheme = json!({
            "httpAuthSecurityScheme": {"scheme": "Bearer"},
            "type": "http",
            "scheme": "bearer",
        });
        card.security_schemes = BTreeMap::from([(BEARER_SCHEME.to_owned(), scheme)]);
        card.security_requirements = vec![json!({"schemes": {BEARER_SCHEME: {"list": []}}})];
        card.security = Some(json!([{BEARER_SCHEME: []}]));
    }
    card
}

/// `GET /.well-known/agent-card.json`.
pub(super) async fn serve(State(state): State<AppState>, headers: HeaderMap) -> Json<AgentCard> {
    Json(public_card(&state, &headers, &state.launcher.targets()))
}

/// The card anyone may read: [`agent_card`] of `targets`, with what this server promises
/// besides.
fn public_card(state: &AppState, headers: &HeaderMap, targets: &[Target]) -> AgentCard {
    let base = base_url(&state.config, headers);
    let mut card = agent_card(targets, &base, !state.config.tokens.is_empty());
    // A task started by a message is found by it again here, held or ended; only a store
    // keeps it across a restart, so only a server with one promises it.
    if state.stored.is_some() {
        card.capabilities.extensions.push(AgentExtension {
            uri: MESSAGE_SENT_AGAIN_EXTENSION.to_owned(),
            description: "a new task's message sent again (the same messageId, for the same skill) is answered \
                          with the task its first sending started"
                .to_owned(),
            required: false,
            params: None,
        });
    }
    card
}

/// The extended card (`GetExtendedAgentCard`), read with the server's token where it wants
/// one: the public card, and each skill's tools' arguments' schemas
/// ([`TOOL_INPUTS_EXTENSION`]), kept off the public card.
pub(super) fn extended_card(state: &AppState, headers: &HeaderMap) -> AgentCard {
    let targets = state.launcher.targets();
    let mut card = public_card(state, headers, &targets);
    let skills: serde_json::Map<String, serde_json::Value> =
        targets.into_iter().map(|target| (target.name, json!(target.inputs))).collect();
    card.capabilities.extensions.push(AgentExtension {
        uri: TOOL_INPUTS_EXTENSION.to_owned(),
        description: "each skill's tools' arguments' JSON schemas, by skill and tool; a decision may run a call \
                      with edited arguments: a data part {\"approval\": \"modify\", \"callId\", \"arguments\"}"
            .to_owned(),
        required: false,
        params: Some(json!({ "skills": skills })),
    });
    card
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(name: &str) -> Target {
        Target {
            name: name.into(),
            description: String::new(),
            kind: TargetKind::Agent,
            model: None,
            tools: vec!["fs.read".into()],
            inputs: std::collections::BTreeMap::new(),
        }
    }

    #[test]
    fn the_base_url_is_the_configured_one_or_the_host() {
        let mut headers = HeaderMap::new();
        headers.insert("host", "127.0.0.1:9000".parse().expect("header"));
        let config = ServerConfig::default();
        assert_eq!(base_url(&config, &headers), "http://127.0.0.1:9000");
        headers.insert("x-forwarded-proto", "https".parse().expect("header"));
        assert_eq!(base_url(&config, &headers), "https://127.0.0.1:9000");
        headers.insert("host", "evil/path".parse().expect("header"));
        assert_eq!(base_url(&config, &headers), "https://localhost");
        let configured = ServerConfig { public_url: Some("https://agents.example.com/".into()), ..config };
        assert_eq!(base_url(&configured, &headers), "https://agents.example.com");
    }

    #[test]
    fn one_skill_per_target_and_bearer_only_with_tokens() {
        let card = agent_card(&[target("coder"), target("writer")], "http://h", false);
        assert_eq!(card.name, "troupe");
        assert_eq!(card.skills.len(), 2);
        assert_eq!(card.skills[0].tags, ["agent", "fs.read"]);
        assert_eq!(card.jsonrpc_url(), Some("http://h/a2a"));
        let rest = &card.supported_interfaces[2];
        assert_eq!((rest.url.as_str(), rest.protocol_binding.as_str()), ("http://h/a2a/rest", "HTTP+JSON"));
        assert!(card.capabilities.push_notifications);
        assert!(card.security_schemes.is_empty());
        let single = agent_card(&[target("coder")], "http://h", true);
        assert_eq!(single.name, "coder");
        assert!(single.security_schemes.contains_key(BEARER_SCHEME));
    }
}
