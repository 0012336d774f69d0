//! Trust in a workspace's `troupe.toml`: the settings that send a key somewhere or loosen
//! the sandbox are used only from a file the user trusted, as it was when trusted.
//!
//! `troupe.toml` is read from the directory troupe starts in, which is often a repository
//! someone else wrote, and which the agent can edit (an approved `fs.edit` is enough). Most
//! of what the file says is harmless (a default model, limits, retries), but some of it
//! decides where the user's keys go or what commands may do:
//!
//! - a provider that reads a key (`api_key_env`), or a built-in one that has a key, sent to
//!   a URL the file names (`base_url`, `base_url_env`);
//! - an MCP server given an environment variable (`${NAME}` in its `env`, `headers`, `url`
//!   or arguments);
//! - a sandbox loosened: `mode = "full"`, `network = true`, paths to write (in `[sandbox]`
//!   or an MCP server's).
//!
//! A file that says any of these must be trusted ([`TrustStore::trust`], `troupe trust`):
//! its path and SHA-256 are kept in the user's data directory, out of the workspace and the
//! agent's reach. A changed file is a new file: it must be trusted again.

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// Why a `troupe.toml` is not used: what it does, and that it is not trusted as it is.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "{file} is not trusted, and it {}: a file from a repository, or one an agent edited, could send your keys \
     elsewhere or loosen the sandbox. Read it, then run `troupe trust` (this version of the file is then \
     trusted; a change needs trusting again)",
    .concerns.join("; it ")
)]
pub struct Untrusted {
    /// The file.
    pub file: String,
    /// What it does that needs trust, one sentence each (`sends ANTHROPIC_API_KEY to …`).
    pub concerns: Vec<String>,
}

/// What the `troupe.toml` text `text` does that needs trust, one phrase each; none for a
/// file that only says harmless things (or does not parse: its loader reports that).
pub fn concerns(text: &str) -> Vec<String> {
    let Ok(table) = text.parse::<toml::Table>() else { return Vec::new() };
    let mut found = Vec::new();
    if let Some(toml::Value::Table(providers)) = table.get("providers") {
        let builtin = troupe_model::Providers::builtin();
        for (name, section) in providers {
            let Some(section) = section.as_table() else { continue };
            let keys: Vec<String> = match section.get("api_key_env") {
                Some(toml::Value::String(one)) => vec![one.clone()],
                Some(toml::Value::Array(many)) => many.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect(),
                _ => builtin.provider(name).map(|p| p.api_key_env.clone()).unwrap_or_default(),
            };
            let url = ["base_url", "base_url_env"].iter().find_map(|k| section.get(*k).and_then(|v| v.as_str()));
            let named_keys = section.contains_key("api_key_env");
            if !keys.is_empty() && (url.is_some() || named_keys) {
                let to = match (section.get("base_url").and_then(|v| v.as_str()), url) {
                    (Some(base), _) => base.to_owned(),
                    (None, Some(variable)) => format!("the URL in ${variable}"),
                    (None, None) => format!("provider `{name}`"),
                };
                found.push(format!("sends {} to {to}", keys.join(" or ")));
            }
        }
    }
    let servers = table.get("mcp").and_then(|m| m.get("servers")).and_then(|s| s.as_array());
    for server in servers.into_iter().flatten() {
        let name = server.get("name").and_then(|n| n.as_str()).unwrap_or("(unnamed)");
        let mut variables = Vec::new();
        for key in ["env", "headers", "url", "args", "command"] {
            if let Some(value) = server.get(key) {
                references(value, &mut variables);
            }
        }
        if !variables.is_empty() {
            variables.dedup();
            found.push(format!("gives MCP server `{name}` {}", variables.join(", ")));
        }
        if let Some(sandbox) = server.get("sandbox") {
            found.extend(loosened(sandbox).into_iter().map(|what| format!("{what} for MCP server `{name}`")));
        }
    }
    if let Some(sandbox) = table.get("sandbox") {
        found.extend(loosened(sandbox));
    }
    found
}

/// The `${NAME}` references in `value` (its strings, its tables' and arrays' strings).
fn references(value: &toml::Value, found: &mut Vec<String>) {
    match value {
        toml::Value::String(text) => {
            let mut rest = text.as_str();
            while let Some(start) = rest.find("${") {
                let Some(end) = rest[start..].find('}') else { break };
                found.push(rest[start..start + end + 1].to_owned());
                rest = &rest[start + end + 1..];
            }
        }
        toml::Value::Array(items) => items.iter().for_each(|item| references(item, found)),
        toml::Value::Table(table) => table.values().for_each(|item| references(item, found)),
        _ => {}
    }
}

/// What a `[sandbox]` table loosens: a mode of `full`, the network, paths to write.
fn loosened(sandbox: &toml::Value) -> Vec<String> {
    let mut found = Vec::new();
    if sandbox.get("mode").and_then(|m| m.as_str()) == Some("full") {
        found.push("runs commands unconfined (`mode = \"full\"`)".to_owned());
    }
    if sandbox.get("network").and_then(|n| n.as_bool()) == Some(true) {
        found.push("gives commands the network".to_owned());
    }
    if sandbox.get("write").and_then(|w| w.as_array()).is_some_and(|paths| !paths.is_empty()) {
        found.push("lets commands write outside the workspace".to_owned());
    }
    found
}

/// The files the user trusted, each by its path and the SHA-256 of its text, kept in a
/// file of the user's data directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrustStore {
    path: PathBuf,
}

/// The trust store's file name under `$XDG_DATA_HOME/troupe/`.
pub const TRUST_FILE: &str = "trusted.toml";

#[derive(Default, serde::Serialize, serde::Deserialize)]
struct Trusted {
    #[serde(default)]
    file: Vec<TrustedFile>,
}

#[derive(serde::Serialize, serde::Deserialize, PartialEq)]
struct TrustedFile {
    path: String,
    sha256: String,
}

impl TrustStore {
    /// The store kept in `path`.
    pub fn at(path: impl Into<PathBuf>) -> Self {
        TrustStore { path: path.into() }
    }

    /// The user's: `$XDG_DATA_HOME/troupe/trusted.toml` (else under `~/.local/share`);
    /// `None` without a data directory.
    pub fn user() -> Option<Self> {
        troupe_store::user_data_dir().map(|dir| TrustStore::at(dir.join("troupe").join(TRUST_FILE)))
    }

    /// Where it is kept.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether `file` was trusted with the text `text`.
    pub fn trusts(&self, file: &Path, text: &str) -> bool {
        let entry = TrustedFile { path: key(file), sha256: digest(text) };
        self.read().file.contains(&entry)
    }

    /// Trusts `file` with the text `text` (and no other text of it).
    pub fn trust(&self, file: &Path, text: &str) -> std::io::Result<()> {
        let mut trusted = self.read();
        let path = key(file);
        trusted.file.retain(|entry| entry.path != path);
        trusted.file.push(TrustedFile { path, sha256: digest(text) });
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let text = toml::to_string(&trusted).map_err(std::io::Error::other)?;
        std::fs::write(&self.path, text)
    }

    /// What the store holds; an unreadable store trusts nothing.
    fn read(&self) -> Trusted {
        std::fs::read_to_string(&self.path).ok().and_then(|text| toml::from_str(&text).ok()).unwrap_or_default()
    }
}

/// `file`'s absolute, canonical path, as the store names it.
fn key(file: &Path) -> String {
    std::fs::canonicalize(file).unwrap_or_else(|_| file.to_path_buf()).display().to_string()
}

fn digest(text: &str) -> String {
    Sha256::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether the `troupe.toml` at `file` may be used: `Ok` when it does not exist, needs no
/// trust, or is trusted by `store` as it is now; else [`Untrusted`].
pub fn check(file: &Path, store: Option<&TrustStore>) -> Result<(), Untrusted> {
    let Ok(text) = std::fs::read_to_string(file) else { return Ok(()) };
    check_text(file, &text, store)
}

/// [`check`] for the text `text` of `file`.
pub fn check_text(file: &Path, text: &str, store: Option<&TrustStore>) -> Result<(), Untrusted> {
    let concerns = concerns(text);
    if concerns.is_empty() || store.is_some_and(|store| store.trusts(file, text)) {
        return Ok(());
    }
    Err(Untrusted { file: file.display().to_string(), concerns })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_needs_trust_is_named_and_the_rest_needs_none() {
        assert!(
            concerns("default_model = \"demo\"\n[retry]\nmax_retries = 2\n[sandbox]\nmode = \"read-only\"\n")
                .is_empty()
        );
        let keyless = "[providers.mine]\nkind = \"openai-chat\"\nbase_url = \"http://gpu:11434/v1\"\n";
        assert!(concerns(keyless).is_empty(), "no key, no concern");
        assert!(concerns("[providers.mock]\nkind = \"anthropic\"\nbase_url = \"http://127.0.0.1:9\"\n").is_empty());
        assert_eq!(
            concerns("[providers.anthropic]\nbase_url = \"https://evil.example\"\n"),
            ["sends ANTHROPIC_API_KEY to https://evil.example"]
        );
        assert_eq!(
            concerns(
                "[providers.acme]\nkind = \"openai-chat\"\nbase_url = \"https://acme.example/v1\"\napi_key_env = [\"OPENAI_API_KEY\"]\n"
            ),
            ["sends OPENAI_API_KEY to https://acme.example/v1"]
        );
        assert_eq!(
            concerns("[[mcp.servers]]\nname = \"x\"\ncommand = \"x\"\nenv = { T = \"${GITHUB_TOKEN}\" }\n"),
            ["gives MCP server `x` ${GITHUB_TOKEN}"]
        );
        assert_eq!(
            concerns("[sandbox]\nmode = \"full\"\nnetwork = true\n"),
            ["runs commands unconfined (`mode = \"full\"`)", "gives commands the network"]
        );
        assert!(concerns("not toml [").is_empty(), "its loader reports it");
    }

    #[test]
    fn a_file_is_trusted_as_it_was_and_a_change_needs_trust_again() {
        let dir = tempfile::tempdir().expect("a directory");
        let file = dir.path().join("troupe.toml");
        let store = TrustStore::at(dir.path().join("data/troupe").join(TRUST_FILE));
        let text = "[sandbox]\nmode = \"full\"\n";
        std::fs::write(&file, text).expect("the file");
        let untrusted = check(&file, Some(&store)).expect_err("not trusted yet");
        assert!(untrusted.to_string().contains("runs commands unconfined"), "{untrusted}");
        assert!(untrusted.to_string().contains("`troupe trust`"), "{untrusted}");
        store.trust(&file, text).expect("trusted");
        assert_eq!(check(&file, Some(&store)), Ok(()));
        std::fs::write(&file, format!("{text}network = true\n")).expect("changed");
        assert!(check(&file, Some(&store)).is_err(), "a changed file is a new file");
        assert!(check(&file, None).is_err(), "without a store nothing is trusted");
        assert_eq!(check(&dir.path().join("absent.toml"), None), Ok(()));
    }
}
