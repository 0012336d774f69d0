//! HTML reduced to the text a person would read: a small, forgiving single-pass scanner.
//!
//! Scripts, styles and other non-content elements are dropped with their contents; tags
//! become nothing (inline elements) or line breaks (block elements); link text and image
//! `alt` text are kept; character references are decoded; whitespace is collapsed except
//! inside `<pre>`. Malformed input never fails: an unterminated tag ends the text.

/// A page's title and readable text.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Reduced {
    /// The `<title>`, whitespace collapsed, where the page has a non-empty one.
    pub title: Option<String>,
    /// The body text: paragraphs separated by a blank line.
    pub text: String,
}

/// Elements dropped together with everything inside them.
const SKIPPED: &[&str] = &["script", "style", "noscript", "template", "svg", "math", "iframe", "object"];
/// Elements that end a paragraph: a blank line before and after.
const PARAGRAPHS: &[&str] =
    &["p", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "blockquote", "table", "ul", "ol", "dl", "hr", "figure", "form"];
/// Elements that start a new line.
const LINES: &[&str] = &[
    "br",
    "div",
    "li",
    "tr",
    "section",
    "article",
    "header",
    "footer",
    "nav",
    "main",
    "aside",
    "dt",
    "dd",
    "address",
    "details",
    "summary",
    "figcaption",
    "caption",
    "fieldset",
    "legend",
    "option",
    "body",
    "html",
];

/// Reduces an HTML document (or fragment) to its title and text.
pub(crate) fn reduce(html: &str) -> Reduced {
    let mut out = Output::default();
    let mut title = None;
    let mut pre_depth = 0usize;
    let bytes = html.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let Some(offset) = html[i..].find(['<', '&']) else {
            out.text(&html[i..], pre_depth > 0);
            break;
        };
        let at = i + offset;
        out.text(&html[i..at], pre_depth > 0);
        if bytes[at] == b'&' {
            let (decoded, used) = decode_reference(&html[at..]);
            out.text(&decoded, pre_depth > 0);
            i = at + used;
            continue;
        }
        let rest = &html[at..];
        if let Some(body) = rest.strip_prefix("<!--") {
            i = body.find("-->").map_or(bytes.len(), |end| at + 4 + end + 3);
            continue;
        }
        if let Some(body) = rest.strip_prefix("<![CDATA[") {
            let end = body.find("]]>").unwrap_or(body.len());
            out.text(&body[..end], pre_depth > 0);
            i = (at + 9 + end + 3).min(bytes.len());
            continue;
        }
        let Some(tag) = parse_tag(rest) else {
            if rest.len() > 1 && (rest.as_bytes()[1].is_ascii_alphabetic() || rest.as_bytes()[1] == b'/') {
                // An unterminated tag: what follows is not text.
                break;
            }
            out.text("<", pre_depth > 0);
            i = at + 1;
            continue;
        };
        i = at + tag.len;
        if tag.declaration {
            continue;
        }
        let name = tag.name.as_str();
        if !tag.closing && !tag.self_closing && (name == "title" || SKIPPED.contains(&name)) {
            let (inner, after) = raw_content(html, i, name);
            if name == "title" && title.is_none() {
                let mut collapsed = Output::default();
                collapsed.text(&decode_all(inner), false);
                title = Some(collapsed.finish()).filter(|t| !t.is_empty());
            }
            i = after;
            continue;
        }
        match name {
            "pre" if tag.closing => pre_depth = pre_depth.saturating_sub(1),
            "pre" => pre_depth += 1,
            "img" => {
                if let Some(alt) = tag.alt.as_deref().map(decode_all).filter(|a| !a.trim().is_empty()) {
                    out.text(&alt, false);
                }
            }
            "li" if !tag.closing => {
                out.line_break(1);
                out.text("- ", true);
                continue;
            }
            "td" | "th" if tag.closing => out.space(),
            _ => {}
        }
        if PARAGRAPHS.contains(&name) {
            out.line_break(2);
        } else if LINES.contains(&name) {
            out.line_break(1);
        }
    }
    Reduced { title, text: out.finish() }
}

/// Text of a short fragment (a search snippet) on one line.
pub(crate) fn inline_text(html: &str) -> String {
    let text = reduce(html).text;
    let mut out = Output::default();
    out.text(&text, false);
    out.finish()
}

/// A parsed tag.
struct Tag {
    name: String,
    closing: bool,
    /// Written `<name … />`.
    self_closing: bool,
    /// `<!DOCTYPE …>` or `<?xml …?>`: ignored.
    declaration: bool,
    alt: Option<String>,
    /// Bytes from `<` to the `>` inclusive.
    len: usize,
}

/// The tag at the start of `s` (which starts with `<`); `None` if it is not a tag or is
/// not terminated.
fn parse_tag(s: &str) -> Option<Tag> {
    let bytes = s.as_bytes();
    let second = *bytes.get(1)?;
    if second == b'!' || second == b'?' {
        let end = s.find('>')?;
        return Some(Tag {
            name: String::new(),
            closing: false,
            self_closing: false,
            declaration: true,
            alt: None,
            len: end + 1,
        });
    }
    let closing = second == b'/';
    let start = if closing { 2 } else { 1 };
    if !bytes.get(start)?.is_ascii_alphabetic() {
        return None;
    }
    let name_end = bytes[start..]
        .iter()
        .position(|b| !(b.is_ascii_alphanumeric() || *b == b'-' || *b == b':'))
        .map_or(bytes.len(), |p| start + p);
    let name = s[start..name_end].to_ascii_lowercase();
    // Find the closing `>`, skipping over quoted attribute values; a quote only opens a
    // value right after `=`, so a stray one cannot swallow the rest of the page.
    let mut quote = None;
    let mut after_equals = false;
    let mut end = None;
    for (offset, &b) in bytes[name_end..].iter().enumerate() {
        match (quote, b) {
            (Some(q), _) if b == q => quote = None,
            (Some(_), _) => {}
            (None, b'"' | b'\'') if after_equals => quote = Some(b),
            (None, b'>') => {
                end = Some(name_end + offset);
                break;
            }
            _ => {}
        }
        if quote.is_none() && !b.is_ascii_whitespace() {
            after_equals = b == b'=';
        }
    }
    let end = end?;
    let attrs = &s[name_end..end];
    let alt = if name == "img" { attribute(attrs, "alt") } else { None };
    let self_closing = attrs.trim_end().ends_with('/');
    Some(Tag { name, closing, self_closing, declaration: false, alt, len: end + 1 })
}

/// The value of attribute `wanted` in a tag's attribute text.
fn attribute(attrs: &str, wanted: &str) -> Option<String> {
    let bytes = attrs.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        while i < bytes.len() && (bytes[i].is_ascii_whitespace() || bytes[i] == b'/') {
            i += 1;
        }
        let name_start = i;
        while i < bytes.len() && !bytes[i].is_ascii_whitespace() && !matches!(bytes[i], b'=' | b'/') {
            i += 1;
        }
        let name = &attrs[name_start..i];
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        let mut value = "";
        if i < bytes.len() && bytes[i] == b'=' {
            i += 1;
            while i < bytes.len() && bytes[i].is_ascii_whitespace() {
                i += 1;
            }
            if i < bytes.len() && matches!(bytes[i], b'"' | b'\'') {
                let q = bytes[i];
                let start = i + 1;
                let end = attrs[start..].find(q as char).map_or(attrs.len(), |p| start + p);
                value = &attrs[start..end];
                i = (end + 1).min(bytes.len());
            } else {
                let start = i;
                while i < bytes.len() && !bytes[i].is_ascii_whitespace() {
                    i += 1;
                }
                value = &attrs[start..i];
            }
        }
        if name.eq_ignore_ascii_case(wanted) {
            return Some(value.to_owned());
        }
        if i == name_start {
            // Nothing taken (cannot happen: an empty name stops at `=`, which the value
            // takes), so step over the byte it stopped at, an ASCII one. Stepping after
            // a value could land inside the character that follows it.
            i += 1;
        }
    }
    None
}

/// The raw content of element `name` opened just before `from`, and the index after its
/// closing tag (the end of input when it is never closed).
fn raw_content<'a>(html: &'a str, from: usize, name: &str) -> (&'a str, usize) {
    let bytes = html.as_bytes();
    let mut search = from;
    while let Some(offset) = html[search..].find("</") {
        let at = search + offset;
        let candidate = &bytes[at + 2..];
        let matches_name = candidate.len() >= name.len()
            && candidate[..name.len()].eq_ignore_ascii_case(name.as_bytes())
            && candidate.get(name.len()).is_none_or(|b| !b.is_ascii_alphanumeric());
        if matches_name {
            let after = html[at..].find('>').map_or(bytes.len(), |end| at + end + 1);
            return (&html[from..at], after);
        }
        search = at + 2;
    }
    (&html[from..], bytes.len())
}

/// Decodes every character reference in `s`.
fn decode_all(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        let (decoded, used) = decode_reference(&rest[at..]);
        out.push_str(&decoded);
        rest = &rest[at + used..];
    }
    out.push_str(rest);
    out
}

/// The character reference at the start of `s` (which starts with `&`) and the bytes it
/// used; an unknown or malformed reference is the `&` itself.
fn decode_reference(s: &str) -> (String, usize) {
    let literal = ("&".to_owned(), 1);
    // The longest reference decoded here (`&#x10FFFF;`) is short: look no further.
    let window = &s[1..];
    let window = &window[..window.char_indices().nth(12).map_or(window.len(), |(at, _)| at)];
    let Some(end) = window.find(';').map(|p| p + 1) else {
        return literal;
    };
    let body = &s[1..end];
    let decoded = if let Some(number) = body.strip_prefix('#') {
        let code = match number.strip_prefix(['x', 'X']) {
            Some(hex) => u32::from_str_radix(hex, 16).ok(),
            None => number.parse::<u32>().ok(),
        };
        code.map(|c| char::from_u32(c).filter(|&c| c != '\0').unwrap_or('\u{FFFD}'))
    } else {
        named_reference(body)
    };
    match decoded {
        Some(c) => (c.to_string(), end + 1),
        None => literal,
    }
}

fn named_reference(name: &str) -> Option<char> {
    Some(match name {
        "amp" => '&',
        "lt" => '<',
        "gt" => '>',
        "quot" => '"',
        "apos" => '\'',
        "nbsp" | "ensp" | "emsp" | "thinsp" => ' ',
        "copy" => '©',
        "reg" => '®',
        "trade" => '™',
        "hellip" => '…',
        "mdash" => '—',
        "ndash" => '–',
        "lsquo" => '‘',
        "rsquo" => '’',
        "ldquo" => '“',
        "rdquo" => '”',
        "laquo" => '«',
        "raquo" => '»',
        "bull" => '•',
        "middot" => '·',
        "euro" => '€',
        "pound" => '£',
        "yen" => '¥',
        "cent" => '¢',
        "deg" => '°',
        "times" => '×',
        "divide" => '÷',
        "sect" => '§',
        "para" => '¶',
        _ => return None,
    })
}

/// Text being assembled with whitespace collapsed: a run of spaces becomes one, line
/// breaks are kept as asked, nothing leads or trails.
#[derive(Default)]
struct Output {
    text: String,
    /// Newlines owed before the next text (0 = maybe a space).
    breaks: usize,
    space: bool,
}

impl Output {
    fn text(&mut self, s: &str, preserve: bool) {
        for c in s.chars() {
            if preserve {
                if c == '\n' {
                    self.text.push('\n');
                    self.breaks = 0;
                    self.space = false;
                } else if c != '\r' {
                    self.flush();
                    self.text.push(c);
                }
            } else if c.is_whitespace() {
                self.space = true;
            } else {
                self.flush();
                self.text.push(c);
            }
        }
    }

    fn space(&mut self) {
        self.space = true;
    }

    fn line_break(&mut self, count: usize) {
        self.breaks = self.breaks.max(count);
    }

    /// Writes the whitespace owed before a visible character.
    fn flush(&mut self) {
        if !self.text.is_empty() {
            if self.breaks > 0 {
                let have = self.text.len() - self.text.trim_end_matches('\n').len();
                let trimmed = self.text.trim_end_matches([' ', '\t']).len();
                self.text.truncate(trimmed);
                for _ in have..self.breaks {
                    self.text.push('\n');
                }
            } else if self.space && !self.text.ends_with([' ', '\n']) {
                self.text.push(' ');
            }
        }
        self.breaks = 0;
        self.space = false;
    }

    fn finish(self) -> String {
        self.text.trim().to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_scripts_styles_and_comments_and_keeps_link_text() {
        let page = "<!DOCTYPE html><html><head><title> My   Page </title><style>p{color:red}</style>\
                    <script>var x = '<p>not text</p>';</script></head><body><!-- hidden -->\
                    <h1>Heading</h1><p>See <a href=\"/x\">the <b>docs</b></a> &amp; more.</p>\
                    <script type=\"module\">alert(1)</script><ul><li>one</li><li>two</li></ul>\
                    <p>Done&nbsp;now&#33; &#x263A;</p></body></html>";
        let reduced = reduce(page);
        assert_eq!(reduced.title.as_deref(), Some("My Page"));
        assert_eq!(reduced.text, "Heading\n\nSee the docs & more.\n\n- one\n- two\n\nDone now! ☺");
    }

    #[test]
    fn preformatted_text_keeps_its_whitespace() {
        let reduced = reduce("<p>a   b</p><pre>  x\n    y</pre><p>c</p>");
        assert_eq!(reduced.text, "a b\n\n  x\n    y\n\nc");
    }

    #[test]
    fn malformed_input_does_not_fail() {
        assert_eq!(reduce("a < b and c > d").text, "a < b and c > d");
        assert_eq!(reduce("text <a href=\"x").text, "text");
        assert_eq!(reduce("<script>never closed").text, "");
        assert_eq!(reduce("&bogus; &amp &#xZZ; &#0;").text, "&bogus; &amp &#xZZ; \u{FFFD}");
        assert_eq!(reduce("<p title='a > b'>quoted</p>").text, "quoted");
        assert_eq!(reduce("<SCRIPT>x</SCRIPT >Upper").text, "Upper");
        assert_eq!(reduce("<a href=x'>stray quote</a> kept").text, "stray quote kept");
        assert_eq!(reduce("<svg/><p>after a self-closed svg</p>").text, "after a self-closed svg");
        // An attribute without a name, its value followed by a character of two bytes.
        assert_eq!(reduce("<img =\"x\"é alt=\"pic\"><p>after</p>").text, "pic\n\nafter");
        assert_eq!(reduce("<html><head><title>T</title><body>no closing head").text, "no closing head");
    }

    #[test]
    fn images_contribute_alt_text_and_cells_are_separated() {
        let reduced =
            reduce("<a href=x><img src=a.png alt=\"Logo &amp; name\"></a><table><tr><td>1</td><td>2</td></tr></table>");
        assert_eq!(reduced.text, "Logo & name\n\n1 2");
    }

    #[test]
    fn inline_text_is_one_line() {
        assert_eq!(inline_text("The <strong>Rust</strong>\n language &lt;3"), "The Rust language <3");
    }
}
