//! The interface-only view of code: declarations and signatures, no bodies.
//!
//! A tester should test what a module promises, not how it keeps the promise: given the
//! implementation it writes tests that mirror it. [`InterfaceOnly`] keeps, line by line,
//! what a caller can see — public Rust items (functions as `fn ...;`, struct headers with
//! their public fields, enums, traits, impl headers with their public methods), Python
//! `def`/`class` lines with their docstrings, exported TypeScript/JavaScript declarations —
//! and drops every body. It is a heuristic over lines and braces, not a parser: code it
//! cannot place is dropped rather than shown.

use super::Sanitiser;
use crate::message::{AgentMessage, Artifact};

/// The language of a piece of code, as far as its interface goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CodeLanguage {
    /// Rust.
    Rust,
    /// Python.
    Python,
    /// TypeScript or JavaScript.
    TypeScript,
    /// Code of another language (or a diff): withheld whole, since its bodies cannot be told
    /// from its declarations here.
    Other,
}

/// File extensions of code in languages [`InterfaceOnly`] cannot read.
const OTHER_CODE: &[&str] = &[
    "go", "java", "kt", "kts", "scala", "c", "h", "cc", "cpp", "cxx", "hpp", "hh", "cs", "swift", "rb", "php", "m",
    "mm", "lua", "dart", "ex", "exs", "erl", "hs", "ml", "zig", "diff", "patch",
];

impl CodeLanguage {
    /// The language of an artifact named `name` of `media_type`; `None` when it is not
    /// code (prose, data, logs).
    pub fn detect(name: &str, media_type: &str) -> Option<CodeLanguage> {
        let extension = name.rsplit_once('.').map(|(_, ext)| ext.to_ascii_lowercase());
        let by_name = match extension.as_deref() {
            Some("rs") => Some(CodeLanguage::Rust),
            Some("py" | "pyi") => Some(CodeLanguage::Python),
            Some("ts" | "tsx" | "mts" | "cts" | "js" | "jsx" | "mjs" | "cjs") => Some(CodeLanguage::TypeScript),
            Some(ext) if OTHER_CODE.contains(&ext) => Some(CodeLanguage::Other),
            _ => None,
        };
        by_name.or_else(|| {
            let media = media_type.to_ascii_lowercase();
            if media.contains("rust") {
                Some(CodeLanguage::Rust)
            } else if media.contains("python") {
                Some(CodeLanguage::Python)
            } else if media.contains("typescript") || media.contains("javascript") {
                Some(CodeLanguage::TypeScript)
            } else if media.contains("diff") || media.contains("patch") {
                Some(CodeLanguage::Other)
            } else if let Some(sub) = media.strip_prefix("text/x-") {
                let prose = ["markdown", "log", "yaml", "toml", "ini", "shellscript", "sh"];
                (!prose.iter().any(|p| sub.starts_with(p))).then_some(CodeLanguage::Other)
            } else {
                None
            }
        })
    }

    /// The language of a fenced code block tagged `tag` (```` ```rust ````); `None` for
    /// prose, data, shell sessions and untagged blocks, which are kept.
    pub fn from_fence(tag: &str) -> Option<CodeLanguage> {
        let tag = tag.trim().split([' ', ',', '{']).next().unwrap_or_default().to_ascii_lowercase();
        match tag.as_str() {
            "rust" | "rs" => Some(CodeLanguage::Rust),
            "python" | "py" | "python3" => Some(CodeLanguage::Python),
            "ts" | "typescript" | "tsx" | "js" | "javascript" | "jsx" => Some(CodeLanguage::TypeScript),
            "" => None,
            other if OTHER_CODE.contains(&other) => Some(CodeLanguage::Other),
            "c++" | "golang" | "csharp" | "kotlin" | "ruby" => Some(CodeLanguage::Other),
            _ => None,
        }
    }
}

/// The interface of `code` in `language`: its declarations without their bodies.
///
/// ```
/// use troupe_team::firewall::{CodeLanguage, interface_of};
///
/// let code = "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n\nfn helper() {}\n";
/// assert_eq!(interface_of(CodeLanguage::Rust, code), "pub fn add(a: i32, b: i32) -> i32;");
/// ```
pub fn interface_of(language: CodeLanguage, code: &str) -> String {
    match language {
        CodeLanguage::Rust | CodeLanguage::TypeScript => Braces::new(language).run(code),
        CodeLanguage::Python => super::python::interface(code),
        CodeLanguage::Other => {
            format!("[implementation withheld: {} lines of code]", code.lines().count())
        }
    }
}

/// Code in fenced blocks of `text` reduced to its interface; prose is left alone.
pub fn interface_of_fences(text: &str) -> String {
    if !text.contains("```") && !text.contains("~~~") {
        return text.to_owned();
    }
    let mut out: Vec<String> = Vec::new();
    // The open block: its fence, its language and its lines so far.
    let mut block: Option<(&str, Option<CodeLanguage>, Vec<&str>)> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        let fence = ["```", "~~~"].into_iter().find(|f| trimmed.starts_with(f));
        let closes = match (&block, fence) {
            (Some((open, _, _)), Some(f)) => f == *open && trimmed[f.len()..].trim().is_empty(),
            _ => false,
        };
        if closes {
            if let Some((_, language, lines)) = block.take() {
                out.extend(fenced(language, &lines));
            }
            out.push(line.to_owned());
        } else if let Some((_, _, lines)) = &mut block {
            lines.push(line);
        } else if let Some(f) = fence {
            block = Some((f, CodeLanguage::from_fence(&trimmed[f.len()..]), Vec::new()));
            out.push(line.to_owned());
        } else {
            out.push(line.to_owned());
        }
    }
    if let Some((_, language, lines)) = block {
        // An unclosed block is still code.
        out.extend(fenced(language, &lines));
    }
    let mut joined = out.join("\n");
    if text.ends_with('\n') {
        joined.push('\n');
    }
    joined
}

/// The lines of a fenced block: code reduced to its interface, anything else as it is.
fn fenced(language: Option<CodeLanguage>, lines: &[&str]) -> Vec<String> {
    match language {
        Some(language) => interface_of(language, &lines.join("\n")).lines().map(str::to_owned).collect(),
        None => lines.iter().map(|l| (*l).to_owned()).collect(),
    }
}

/// A sanitiser for testers and reviewers of contracts: code artifacts (by name or media
/// type) and fenced code blocks in the texts become their interface ([`interface_of`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct InterfaceOnly;

impl InterfaceOnly {
    fn artifact(artifact: &mut Artifact) {
        match CodeLanguage::detect(&artifact.name, &artifact.media_type) {
            Some(language) => artifact.content = interface_of(language, &artifact.content),
            None => artifact.content = interface_of_fences(&artifact.content),
        }
    }
}

impl Sanitiser for InterfaceOnly {
    fn name(&self) -> &str {
        "interface_only"
    }

    fn sanitise(&self, mut message: AgentMessage) -> AgentMessage {
        let payload = &mut message.payload;
        payload.summary = interface_of_fences(&payload.summary);
        payload.artifacts.iter_mut().for_each(InterfaceOnly::artifact);
        for text in payload.decisions.iter_mut().chain(payload.blockers.iter_mut()) {
            *text = interface_of_fences(text);
        }
        message
    }
}

/// What the lines inside a kept `{ ... }` block are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scope {
    /// A module: public items only.
    Module,
    /// An impl block: public methods, or every method of a trait impl.
    Impl { of_trait: bool },
    /// A trait: every member is interface.
    Trait,
    /// A struct's fields: public ones only.
    Fields,
    /// Every line (enum variants, TypeScript interfaces).
    All,
    /// A TypeScript class: members that are not private.
    Class,
}

/// How an item ends and what of it is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// A signature and a body: the signature is kept as a declaration.
    Function,
    /// A header and a block of members, read in `Scope`.
    Block(Scope),
    /// Everything up to its `;` (a type alias, a constant, a re-export).
    Statement,
    /// `const f = (...) => ...`: kept up to its arrow.
    Arrow,
}

/// An item being read, possibly over several lines.
struct Pending {
    kind: Kind,
    keep: bool,
    /// Its lines as written, trailing whitespace and all.
    text: String,
    /// `text` masked (see [`mask`]): the same bytes long, line for line, so an offset
    /// found here cuts `text` in the same place.
    code: String,
}

/// The line-and-brace reader for Rust and TypeScript.
struct Braces {
    language: CodeLanguage,
    scopes: Vec<Scope>,
    out: Vec<String>,
    /// Doc comments and attributes waiting for the item they belong to.
    docs: Vec<String>,
    /// The brace depth inside a dropped body.
    skip: usize,
    pending: Option<Pending>,
    in_comment: bool,
}

impl Braces {
    fn new(language: CodeLanguage) -> Self {
        Braces {
            language,
            scopes: Vec::new(),
            out: Vec::new(),
            docs: Vec::new(),
            skip: 0,
            pending: None,
            in_comment: false,
        }
    }

    fn run(mut self, code: &str) -> String {
        for line in code.lines() {
            self.line(line);
        }
        while self.out.last().is_some_and(|l| l.trim().is_empty()) {
            self.out.pop();
        }
        self.out.join("\n")
    }

    fn scope(&self) -> Scope {
        self.scopes.last().copied().unwrap_or(Scope::Module)
    }

    fn line(&mut self, raw: &str) {
        let code = mask(raw, &mut self.in_comment, self.language);
        if self.skip > 0 {
            self.skip = depth_after(self.skip, &code);
            return;
        }
        if let Some(mut pending) = self.pending.take() {
            pending.text.push('\n');
            // Untrimmed, as `code` is: an offset found in `code` is the same in `text`.
            pending.text.push_str(raw);
            pending.code.push('\n');
            pending.code.push_str(&code);
            self.advance(pending);
            return;
        }
        let trimmed = raw.trim();
        if trimmed.is_empty() {
            if self.out.last().is_some_and(|l| !l.trim().is_empty()) {
                self.out.push(String::new());
            }
            self.docs.clear();
            return;
        }
        if code.trim().is_empty() {
            // A comment alone: doc comments wait for their item, others go.
            let doc = ["///", "//!", "/**", "*", "*/"].iter().any(|p| trimmed.starts_with(p));
            if doc {
                self.docs.push(raw.trim_end().to_owned());
            }
            return;
        }
        if trimmed.starts_with("#[") || trimmed.starts_with("#![") || trimmed.starts_with('@') {
            self.docs.push(raw.trim_end().to_owned());
            return;
        }
        if code.trim_start().starts_with('}') {
            self.docs.clear();
            if self.scopes.pop().is_some() {
                // The blank line before a dropped last member would end the block loosely.
                if self.out.last().is_some_and(|l| l.trim().is_empty()) {
                    self.out.pop();
                }
                self.out.push(raw.trim_end().to_owned());
            }
            return;
        }
        let scope = self.scope();
        let item = match self.language {
            CodeLanguage::Rust => rust_item(scope, trimmed),
            _ => ts_item(scope, trimmed),
        };
        match item {
            Some((kind, keep)) => {
                let pending = Pending { kind, keep, text: raw.to_owned(), code };
                self.advance(pending);
            }
            None => self.other(scope, raw, &code),
        }
    }

    /// A line that starts no item: a field, a variant, or code to drop.
    fn other(&mut self, scope: Scope, raw: &str, code: &str) {
        let docs = std::mem::take(&mut self.docs);
        let keep = match scope {
            Scope::All => true,
            Scope::Fields => raw.trim_start().starts_with("pub"),
            _ => false,
        };
        let depth = depth_after(0, code);
        if keep {
            self.out.extend(docs);
            self.out.push(raw.trim_end().to_owned());
            if depth > 0 {
                self.scopes.push(Scope::All);
            }
        } else {
            self.skip = depth;
        }
    }

    /// Reads an item on, emitting it once its end is in sight.
    fn advance(&mut self, pending: Pending) {
        let end = match pending.kind {
            Kind::Function | Kind::Block(_) => header_end(&pending.code),
            Kind::Statement | Kind::Arrow => statement_end(&pending.code, self.language).map(|_| End::Semicolon),
        };
        let Some(end) = end else {
            self.pending = Some(pending);
            return;
        };
        let docs = std::mem::take(&mut self.docs);
        let Pending { kind, keep, text, code } = pending;
        match end {
            End::Semicolon => {
                if keep {
                    self.out.extend(docs);
                    self.out.push(match kind {
                        Kind::Arrow => arrow_declaration(&text, &code),
                        _ => trim_line_ends(&text),
                    });
                }
            }
            End::Brace(at) => {
                let rest_depth = depth_after(1, &code[at + 1..]);
                match (kind, keep) {
                    (Kind::Block(scope), true) => {
                        self.out.extend(docs);
                        self.out.push(trim_line_ends(&text));
                        if rest_depth > 0 {
                            self.scopes.push(scope);
                        }
                    }
                    (_, true) => {
                        self.out.extend(docs);
                        self.out.push(format!("{};", trim_line_ends(&text[..at]).trim_end()));
                        self.skip = rest_depth;
                    }
                    (_, false) => self.skip = rest_depth,
                }
            }
        }
    }
}

/// Where an item's header ends.
enum End {
    /// At a `;` (a declaration without a body).
    Semicolon,
    /// At the `{` opening its body.
    Brace(usize),
}

/// The first `{` or `;` outside parentheses and brackets.
fn header_end(code: &str) -> Option<End> {
    let mut depth = 0i32;
    for (i, c) in code.char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            '{' if depth <= 0 => return Some(End::Brace(i)),
            ';' if depth <= 0 => return Some(End::Semicolon),
            _ => {}
        }
    }
    None
}

/// Where a statement ends: its `;` outside every bracket, or (TypeScript, which may omit
/// semicolons) the end of a line that leaves nothing open and no operator dangling.
fn statement_end(code: &str, language: CodeLanguage) -> Option<usize> {
    let mut depth = 0i32;
    for (i, c) in code.char_indices() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            ';' if depth <= 0 => return Some(i),
            _ => {}
        }
    }
    let last = code.trim_end().chars().last()?;
    let dangling = matches!(last, '=' | '|' | '&' | ',' | '(' | '[' | '{' | '+' | '-' | ':' | '?' | '>' | '.');
    let arrow = code.trim_end().ends_with("=>");
    (language == CodeLanguage::TypeScript && depth <= 0 && (!dangling || (last == '>' && !arrow))).then_some(code.len())
}

/// `text` with each line's trailing whitespace taken off.
pub(super) fn trim_line_ends(text: &str) -> String {
    text.lines().map(str::trim_end).collect::<Vec<_>>().join("\n")
}

/// `export const f = (a: A): B => { ... }` as `export const f = (a: A): B => …;`.
fn arrow_declaration(text: &str, code: &str) -> String {
    match code.find("=>") {
        Some(at) => format!("{} …;", trim_line_ends(&text[..at + 2]).trim_end()),
        None => trim_line_ends(text),
    }
}

/// The brace depth after `code`, starting at `depth`; stops at 0 (what follows the
/// closing brace on that line is not read).
fn depth_after(mut depth: usize, code: &str) -> usize {
    for c in code.chars() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return 0;
                }
            }
            _ => {}
        }
    }
    depth
}

/// `line` with comments and the contents of string and character literals blanked (byte
/// for byte, so positions match the original), for counting brackets.
fn mask(line: &str, in_comment: &mut bool, language: CodeLanguage) -> String {
    let chars: Vec<(usize, char)> = line.char_indices().collect();
    let mut out = String::with_capacity(line.len());
    let blank = |out: &mut String, c: char| out.extend(std::iter::repeat_n(' ', c.len_utf8()));
    let mut i = 0;
    let mut string: Option<char> = None;
    while i < chars.len() {
        let c = chars[i].1;
        let next = chars.get(i + 1).map(|(_, c)| *c);
        if *in_comment {
            if c == '*' && next == Some('/') {
                *in_comment = false;
                out.push_str("  ");
                i += 2;
            } else {
                blank(&mut out, c);
                i += 1;
            }
            continue;
        }
        if let Some(quote) = string {
            if c == '\\' {
                blank(&mut out, c);
                if let Some(n) = next {
                    blank(&mut out, n);
                }
                i += 2;
                continue;
            }
            if c == quote {
                string = None;
                out.push(c);
            } else {
                blank(&mut out, c);
            }
            i += 1;
            continue;
        }
        match c {
            '/' if next == Some('/') => {
                chars[i..].iter().for_each(|(_, c)| blank(&mut out, *c));
                break;
            }
            '/' if next == Some('*') => {
                *in_comment = true;
                out.push_str("  ");
                i += 2;
                continue;
            }
            '"' | '`' => string = Some(c),
            '\'' if language == CodeLanguage::TypeScript => string = Some(c),
            '\'' => {
                // A char literal (`'{'`, `'\n'`), not a lifetime (`'a`).
                let third = chars.get(i + 2).map(|(_, c)| *c);
                if next == Some('\\') || third == Some('\'') {
                    string = Some(c);
                }
            }
            _ => {}
        }
        out.push(c);
        i += 1;
    }
    out
}

/// Strips a Rust visibility: whether it was public, and the rest.
fn strip_visibility(line: &str) -> (bool, &str) {
    let Some(rest) = line.strip_prefix("pub") else { return (false, line) };
    if let Some(inner) = rest.strip_prefix('(') {
        return match inner.find(')') {
            Some(close) => (true, inner[close + 1..].trim_start()),
            None => (false, line),
        };
    }
    match rest.strip_prefix(char::is_whitespace) {
        Some(rest) => (true, rest.trim_start()),
        None => (false, line),
    }
}

/// Strips leading words from `prefixes` (in any order, each as often as it comes).
pub(super) fn strip_words<'a>(mut line: &'a str, prefixes: &[&str]) -> &'a str {
    loop {
        let Some(rest) = prefixes.iter().find_map(|p| line.strip_prefix(p)) else { return line };
        line = rest.trim_start();
    }
}

/// What a Rust line starts, in `scope`: the item's kind and whether it is interface.
fn rust_item(scope: Scope, line: &str) -> Option<(Kind, bool)> {
    if matches!(scope, Scope::Fields | Scope::All) {
        return None;
    }
    let (public, rest) = strip_visibility(line);
    let member = matches!(scope, Scope::Trait | Scope::Impl { of_trait: true });
    let qualified = strip_words(rest, &["default ", "async ", "unsafe ", "extern \"C\" ", "extern \"Rust\" "]);
    let qualified = match qualified.strip_prefix("const ") {
        Some(after) if ["fn ", "unsafe ", "async ", "extern "].iter().any(|p| after.trim_start().starts_with(p)) => {
            strip_words(after.trim_start(), &["async ", "unsafe ", "extern \"C\" "])
        }
        _ => qualified,
    };
    let starts = |word: &str| qualified.starts_with(word);
    if starts("fn ") {
        return Some((Kind::Function, public || member));
    }
    if scope == Scope::Trait || matches!(scope, Scope::Impl { .. }) {
        // Associated types and constants.
        if starts("type ") || starts("const ") {
            return Some((Kind::Statement, public || member));
        }
        return None;
    }
    if starts("struct ") || starts("union ") {
        return Some((Kind::Block(Scope::Fields), public));
    }
    if starts("enum ") {
        return Some((Kind::Block(Scope::All), public));
    }
    if starts("trait ") || starts("auto trait ") {
        return Some((Kind::Block(Scope::Trait), public));
    }
    if starts("impl ") || starts("impl<") {
        let of_trait = qualified.contains(" for ");
        return Some((Kind::Block(Scope::Impl { of_trait }), true));
    }
    if starts("mod ") {
        let kind = if qualified.trim_end().ends_with(';') { Kind::Statement } else { Kind::Block(Scope::Module) };
        return Some((kind, public));
    }
    if starts("type ") || starts("const ") || starts("static ") || starts("use ") {
        return Some((Kind::Statement, public));
    }
    if starts("macro_rules!") {
        return Some((Kind::Block(Scope::Module), false));
    }
    if starts("extern crate ") {
        return Some((Kind::Statement, false));
    }
    None
}

/// What a TypeScript or JavaScript line starts, in `scope`.
fn ts_item(scope: Scope, line: &str) -> Option<(Kind, bool)> {
    match scope {
        Scope::All | Scope::Fields => None,
        Scope::Class => ts_member(line),
        _ => {
            let exported = line.starts_with("export ");
            let rest = strip_words(line, &["export ", "default ", "declare ", "abstract ", "async "]);
            let starts = |word: &str| rest.starts_with(word);
            if starts("function ") || starts("function*") || starts("function(") {
                return Some((Kind::Function, exported));
            }
            if starts("class ") {
                return Some((Kind::Block(Scope::Class), exported));
            }
            if starts("interface ") || starts("enum ") || starts("const enum ") {
                return Some((Kind::Block(Scope::All), exported));
            }
            if starts("namespace ") || starts("module ") {
                return Some((Kind::Block(Scope::Module), exported));
            }
            if starts("const ") || starts("let ") || starts("var ") {
                let arrow = rest.contains("=>") || rest.contains("function");
                return Some((if arrow { Kind::Arrow } else { Kind::Statement }, exported));
            }
            if starts("type ") || starts("import ") || exported {
                return Some((Kind::Statement, exported && !starts("import ")));
            }
            None
        }
    }
}

/// A TypeScript class member: a method (kept as its signature) or a field.
fn ts_member(line: &str) -> Option<(Kind, bool)> {
    let private = line.starts_with('#') || line.split_whitespace().any(|w| w == "private");
    let rest = strip_words(
        line,
        &[
            "public ",
            "protected ",
            "private ",
            "static ",
            "readonly ",
            "async ",
            "abstract ",
            "override ",
            "declare ",
            "get ",
            "set ",
            "*",
        ],
    );
    let name_len =
        rest.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$' || c == '#')).unwrap_or(rest.len());
    if name_len == 0 {
        return None;
    }
    let after = rest[name_len..].trim_start().trim_start_matches(['?', '!']).trim_start();
    let after = match after.strip_prefix('<') {
        Some(generic) => generic.find('>').map_or(after, |close| generic[close + 1..].trim_start()),
        None => after,
    };
    if after.starts_with('(') {
        return Some((Kind::Function, !private));
    }
    if after.starts_with(':') || after.starts_with('=') || after.starts_with(';') {
        let kind = if after.contains("=>") { Kind::Arrow } else { Kind::Statement };
        return Some((kind, !private));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_keeps_public_signatures_and_drops_bodies() {
        let code = r#"
use std::fmt;

/// A stack.
#[derive(Debug, Default)]
pub struct Stack<T> {
    /// Its items.
    pub items: Vec<T>,
    secret_counter: usize,
}

pub enum Op {
    Push(i32),
    Pop { checked: bool },
}

impl<T: Clone> Stack<T> {
    /// Pushes.
    pub fn push(&mut self, item: T) {
        if self.items.len() > 10 { println!("{}", "}"); }
        self.items.push(item);
    }

    fn grow(&mut self) {
        self.secret_counter += 1;
    }

    pub fn peek(
        &self,
    ) -> Option<&T> where T: Clone {
        self.items.last()
    }
}

impl<T> fmt::Display for Stack<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "stack")
    }
}

pub trait Store {
    fn get(&self, key: &str) -> Option<String>;
    fn len(&self) -> usize { 0 }
}

pub const LIMIT: usize = 10;
const HIDDEN: usize = 3;

fn helper() -> u32 { 42 }

#[cfg(test)]
mod tests {
    #[test]
    fn t() { assert!(true); }
}
"#;
        let expected = r#"/// A stack.
#[derive(Debug, Default)]
pub struct Stack<T> {
    /// Its items.
    pub items: Vec<T>,
}

pub enum Op {
    Push(i32),
    Pop { checked: bool },
}

impl<T: Clone> Stack<T> {
    /// Pushes.
    pub fn push(&mut self, item: T);

    pub fn peek(
        &self,
    ) -> Option<&T> where T: Clone;
}

impl<T> fmt::Display for Stack<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result;
}

pub trait Store {
    fn get(&self, key: &str) -> Option<String>;
    fn len(&self) -> usize;
}

pub const LIMIT: usize = 10;"#;
        assert_eq!(interface_of(CodeLanguage::Rust, code), expected);
    }

    #[test]
    fn python_keeps_defs_classes_and_docstrings() {
        let code = r#"
import os

MAX_RETRIES = 3

@dataclass
class User:
    """A user."""
    name: str
    _token: str

    def greet(self, other: "User") -> str:
        """Greets."""
        secret = os.environ["KEY"]
        return f"hi {other.name}"

    def _internal(self):
        pass

async def fetch(
    url: str,
    timeout: float = 1.0,
) -> bytes:
    return b""

def _helper():
    return 1

if __name__ == "__main__":
    fetch("x")
"#;
        let expected = r#"MAX_RETRIES = 3

@dataclass
class User:
    """A user."""
    name: str

    def greet(self, other: "User") -> str:
        """Greets."""
        ...

async def fetch(
    url: str,
    timeout: float = 1.0,
) -> bytes:
    ..."#;
        assert_eq!(interface_of(CodeLanguage::Python, code), expected);
    }

    #[test]
    fn typescript_keeps_exports() {
        let code = r#"
import { x } from "./x";

export interface Shape {
  area(): number;
}

export type Id = string | number;

export function area(s: Shape): number {
  const inner = { a: 1 };
  return s.area();
}

function hidden(): void {
  console.log("}");
}

export const double = (n: number): number => n * 2;

export class Circle implements Shape {
  radius: number;
  private cache = 0;
  constructor(radius: number) {
    this.radius = radius;
  }
  area(): number {
    return Math.PI * this.radius ** 2;
  }
}
"#;
        let expected = r#"export interface Shape {
  area(): number;
}

export type Id = string | number;

export function area(s: Shape): number;

export const double = (n: number): number => …;

export class Circle implements Shape {
  radius: number;
  constructor(radius: number);
  area(): number;
}"#;
        assert_eq!(interface_of(CodeLanguage::TypeScript, code), expected);
    }

    /// Trailing spaces on a header's earlier lines, and characters of several bytes after
    /// them: the header is cut where its code ends, never inside a character or past the
    /// text (model output reaches this, and must not panic the firewall).
    #[test]
    fn multi_line_headers_with_trailing_spaces_are_cut_in_place() {
        let rust = "pub fn f(a: u8,   \n) {\n    body()\n}\n";
        assert_eq!(interface_of(CodeLanguage::Rust, rust), "pub fn f(a: u8,\n);");
        let rust = "pub fn f(a: u8,   \n     b: u8) -> é {\n}\n";
        assert_eq!(interface_of(CodeLanguage::Rust, rust), "pub fn f(a: u8,\n     b: u8) -> é;");
        let python = "def f(a,  \n      b):#é\n    return a\n";
        assert_eq!(interface_of(CodeLanguage::Python, python), "def f(a,\n      b):\n    ...");
    }

    #[test]
    fn languages_are_told_by_name_media_type_and_fence() {
        assert_eq!(CodeLanguage::detect("lib.rs", "text/plain"), Some(CodeLanguage::Rust));
        assert_eq!(CodeLanguage::detect("snippet", "text/x-python"), Some(CodeLanguage::Python));
        assert_eq!(CodeLanguage::detect("main.go", ""), Some(CodeLanguage::Other));
        assert_eq!(CodeLanguage::detect("fix.patch", "text/x-diff"), Some(CodeLanguage::Other));
        assert_eq!(CodeLanguage::detect("README.md", "text/markdown"), None);
        assert_eq!(CodeLanguage::detect("log", "text/plain"), None);
        assert_eq!(CodeLanguage::from_fence("rust,ignore"), Some(CodeLanguage::Rust));
        assert_eq!(CodeLanguage::from_fence("sh"), None);
        assert_eq!(CodeLanguage::from_fence("diff"), Some(CodeLanguage::Other));
        assert!(interface_of(CodeLanguage::Other, "a\nb\n").contains("2 lines"));
    }

    #[test]
    fn fenced_blocks_in_prose_are_reduced() {
        let text = "Done:\n```rust\npub fn f() -> u8 {\n    7\n}\n```\nRun:\n```sh\ncargo test\n```\n";
        assert_eq!(interface_of_fences(text), "Done:\n```rust\npub fn f() -> u8;\n```\nRun:\n```sh\ncargo test\n```\n");
    }
}
