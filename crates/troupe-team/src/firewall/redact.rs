//! Secret redaction: what no member may ever receive, whatever its role.

use super::Sanitiser;
use crate::message::AgentMessage;
use regex::{Captures, Regex};
use std::borrow::Cow;
use std::sync::LazyLock;

/// What a redacted secret is replaced with.
pub const REDACTED: &str = "[REDACTED]";

/// A pattern and how much of each match it hides.
struct Rule {
    regex: Regex,
    /// The capture group holding the secret itself; `0` hides the whole match.
    group: usize,
    /// Whether a match's secret group really is a secret (weeds out `password: String`).
    accept: fn(&Captures<'_>) -> bool,
}

fn always(_: &Captures<'_>) -> bool {
    true
}

fn rule(pattern: &str, group: usize, accept: fn(&Captures<'_>) -> bool) -> Rule {
    // The patterns are constants of this file; a bad one is a bug caught by the unit tests.
    #[allow(clippy::expect_used)]
    let regex = Regex::new(pattern).expect("redaction patterns are valid");
    Rule { regex, group, accept }
}

/// A bearer token is long or not made of letters alone (`bearer instrument` is prose).
fn token_like(captures: &Captures<'_>) -> bool {
    let token = captures.get(1).map_or("", |m| m.as_str());
    token.len() >= 20 || token.chars().any(|c| !c.is_ascii_alphabetic())
}

/// Names that hold nothing but secrets: even a short value is one.
const STRONG_NAMES: &[&str] = &["password", "passwd", "passphrase", "pwd", "secret"];

/// Types, not values: `password: String`, `token: &str`, `api_key: Option<String>`.
fn type_like(value: &str) -> bool {
    const PRIMITIVES: &[&str] = &[
        "str", "string", "number", "bool", "boolean", "bytes", "int", "float", "any", "unknown", "none", "null",
        "true", "false", "self", "u8", "u16", "u32", "u64", "usize", "i32", "i64",
    ];
    let bare = value.trim_start_matches('&').trim_start_matches("mut ");
    PRIMITIVES.contains(&bare.to_ascii_lowercase().as_str())
        || value.starts_with('&')
        || value.ends_with('(')
        || value.contains("::")
        || value.contains('<')
        || (bare.chars().next().is_some_and(|c| c.is_ascii_uppercase())
            && bare.chars().all(|c| c.is_ascii_alphabetic())
            && bare.chars().skip(1).any(|c| c.is_ascii_lowercase()))
}

/// Whether the value assigned to a key-like name is a secret.
fn assigned_secret(captures: &Captures<'_>) -> bool {
    let name = captures.name("name").map_or("", |m| m.as_str()).to_ascii_lowercase();
    let raw = captures.name("value").map_or("", |m| m.as_str());
    if raw.contains(REDACTED) {
        return false;
    }
    let quoted = raw.len() >= 2 && (raw.starts_with('"') || raw.starts_with('\''));
    if quoted {
        return !raw[1..raw.len() - 1].trim().is_empty();
    }
    let has_digit = raw.chars().any(|c| c.is_ascii_digit());
    let has_letter = raw.chars().any(|c| c.is_ascii_alphabetic());
    if (raw.len() >= 16 && has_letter) || (raw.len() >= 6 && has_digit && has_letter) {
        return true;
    }
    let strong = STRONG_NAMES.iter().any(|s| name.ends_with(s) || name.starts_with(s));
    strong && raw.len() >= 4 && !type_like(raw)
}

static RULES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    vec![
        // PEM private keys, whole blocks (an unterminated one to the end of the text).
        rule(
            r"(?s)-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\z)",
            0,
            always,
        ),
        // Anthropic, OpenAI and other `sk-` keys.
        rule(r"\bsk-ant-[A-Za-z0-9_\-]{8,}", 0, always),
        rule(r"\bsk-(?:proj-|live-|test-|svcacct-)?[A-Za-z0-9_\-]{16,}", 0, always),
        // Stripe.
        rule(r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}", 0, always),
        // AWS access key ids.
        rule(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[A-Z0-9]{16}\b", 0, always),
        // GitHub and GitLab tokens.
        rule(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}", 0, always),
        rule(r"\bgithub_pat_[A-Za-z0-9_]{20,}", 0, always),
        rule(r"\bglpat-[A-Za-z0-9_\-]{20,}", 0, always),
        // Slack tokens.
        rule(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}", 0, always),
        // Google API keys.
        rule(r"\bAIza[0-9A-Za-z_\-]{35}", 0, always),
        // JSON web tokens.
        rule(r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}", 0, always),
        // Authorization headers, whatever their scheme.
        rule(r#"(?i)\b(?:proxy-)?authorization["']?\s*[:=]\s*["']?([^\r\n"']{4,})"#, 1, always),
        // Bearer tokens anywhere.
        rule(r"(?i)\bbearer\s+([A-Za-z0-9\-._~+/]{8,}=*)", 1, token_like),
        // Passwords in URLs: `scheme://user:password@host`.
        rule(r"(?i)\b[a-z][a-z0-9+.\-]*://[^/\s:@]+:([^@\s/]+)@", 1, always),
        // `password=...`, `api_key: ...`, `"client_secret": "..."`, `AWS_SECRET_ACCESS_KEY=...`.
        rule(
            r#"(?i)(?P<name>\b[A-Za-z0-9_.\-]*(?:password|passwd|passphrase|pwd|secret|token|api[_\-]?key|apikey|access[_\-]?key|private[_\-]?key|credentials?|session[_\-]?id|signature)[A-Za-z0-9_.\-]*)["']?\s*[:=]\s*(?P<value>"[^"\r\n]*"|'[^'\r\n]*'|[^\s,;'"\)\]\}]+)"#,
            2,
            assigned_secret,
        ),
    ]
});

/// `text` with every secret replaced by [`REDACTED`], and how many were.
///
/// Recognised: PEM private key blocks; `sk-…`/`sk-ant-…` keys, Stripe keys, AWS access key
/// ids (`AKIA…`), GitHub (`ghp_…`, `github_pat_…`), GitLab, Slack (`xoxb-…`), Google API
/// keys and JSON web tokens; `Authorization` headers and bearer tokens; passwords in URLs;
/// and values assigned to key-like names (`password=…`, `api_key: …`,
/// `"client_secret": "…"`, `AWS_SECRET_ACCESS_KEY=…`) unless they read as a type
/// (`password: String`).
///
/// ```
/// use troupe_team::firewall::redact_secrets;
///
/// let (clean, n) = redact_secrets("key sk-ant-api03-abcdefghijklmnop, password=hunter2");
/// assert_eq!(clean, "key [REDACTED], password=[REDACTED]");
/// assert_eq!(n, 2);
/// ```
pub fn redact_secrets(text: &str) -> (Cow<'_, str>, usize) {
    let mut current = Cow::Borrowed(text);
    let mut count = 0;
    for rule in RULES.iter() {
        if !rule.regex.is_match(&current) {
            continue;
        }
        let mut hits = 0;
        let replaced = rule.regex.replace_all(&current, |captures: &Captures<'_>| {
            let whole = captures.get(0).map_or("", |m| m.as_str());
            let Some(secret) = captures.get(rule.group).filter(|_| (rule.accept)(captures)) else {
                return whole.to_owned();
            };
            hits += 1;
            let start = secret.start() - captures.get(0).map_or(0, |m| m.start());
            let (before, rest) = whole.split_at(start);
            let after = &rest[secret.len()..];
            // A quoted value keeps its quotes, so JSON stays JSON.
            let secret_text = secret.as_str();
            let quote = secret_text.chars().next().filter(|c| (*c == '"' || *c == '\'') && secret_text.len() >= 2);
            match quote {
                Some(q) => format!("{before}{q}{REDACTED}{q}{after}"),
                None => format!("{before}{REDACTED}{after}"),
            }
        });
        if hits > 0 {
            current = Cow::Owned(replaced.into_owned());
            count += hits;
        }
    }
    (current, count)
}

/// Redacts secrets from every text of a message (see [`redact_secrets`]). The
/// [`ContextFirewall`](super::ContextFirewall) applies it to every message that passes,
/// after the recipient's own sanitisers; it cannot be turned off.
#[derive(Clone, Copy, Debug, Default)]
pub struct SecretRedactor;

impl SecretRedactor {
    /// Redacts `message` in place; returns how many secrets were hidden.
    pub fn redact(message: &mut AgentMessage) -> usize {
        let mut count = 0;
        message.payload.map_texts(|text| {
            let (clean, n) = redact_secrets(text);
            count += n;
            clean.into_owned()
        });
        count
    }
}

impl Sanitiser for SecretRedactor {
    fn name(&self) -> &str {
        "secret_redactor"
    }

    fn sanitise(&self, mut message: AgentMessage) -> AgentMessage {
        SecretRedactor::redact(&mut message);
        message
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clean(text: &str) -> String {
        redact_secrets(text).0.into_owned()
    }

    #[test]
    fn every_pattern_compiles() {
        assert!(RULES.len() > 10);
    }

    #[test]
    fn vendor_keys_are_redacted() {
        let aws = concat!("AKIA", "IOSFODNN7EXAMPLE");
        let cases = [
            ("export OPENAI=sk-proj-abcdefghijklmnopqrstuvwx now", "export OPENAI=[REDACTED] now"),
            ("key: sk-ant-api03-Zx9_abcdefghijklmnop", "key: [REDACTED]"),
            (&*format!("id {aws} end"), "id [REDACTED] end"),
            ("token ghp_abcdefghijklmnopqrstuvwxyz0123456789 ok", "token [REDACTED] ok"),
            ("slack xoxb-1234567890-abcdefghij", "slack [REDACTED]"),
            ("Authorization: Bearer abc.def.ghi123", "Authorization: [REDACTED]"),
            ("use bearer 0123456789abcdef please", "use bearer [REDACTED] please"),
            ("db postgres://app:s3cr3t@db.internal/x", "db postgres://app:[REDACTED]@db.internal/x"),
        ];
        for (text, expected) in cases {
            assert_eq!(clean(text), expected, "{text}");
        }
    }

    #[test]
    fn pem_blocks_go_whole() {
        let text = "before\n-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nabc\n-----END RSA PRIVATE KEY-----\nafter";
        assert_eq!(clean(text), "before\n[REDACTED]\nafter");
        assert_eq!(clean("x -----BEGIN PRIVATE KEY-----\nMIIE unterminated"), "x [REDACTED]");
    }

    #[test]
    fn assignments_to_key_like_names_are_redacted_but_types_are_not() {
        assert_eq!(clean("password=hunter2"), "password=[REDACTED]");
        assert_eq!(clean(r#"{"api_key": "abc", "n": 1}"#), r#"{"api_key": "[REDACTED]", "n": 1}"#);
        assert_eq!(
            clean("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
            "AWS_SECRET_ACCESS_KEY=[REDACTED]"
        );
        assert_eq!(clean("db_password: letmein"), "db_password: [REDACTED]");
        for kept in [
            "fn login(password: &str, token: String) -> bool",
            "max_tokens: 100",
            "let api_key: Option<String> = None;",
            "the basic idea is simple",
            "a bearer instrument",
        ] {
            assert_eq!(clean(kept), kept);
        }
    }

    #[test]
    fn counts_and_idempotence() {
        let (once, n) = redact_secrets("a sk-ant-abcdefghijkl and password='x1'");
        assert_eq!(n, 2);
        let (twice, m) = redact_secrets(&once);
        assert_eq!((twice.as_ref(), m), (once.as_ref(), 0));
        assert!(matches!(redact_secrets("nothing here").0, Cow::Borrowed(_)));
    }
}
