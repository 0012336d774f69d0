//! The patterns [`ContentFilter`](crate::ContentFilter) looks for: built-in kinds of
//! sensitive data, and custom regexes.

use regex::{Captures, Regex};
use std::borrow::Cow;
use std::sync::LazyLock;

/// A kind of sensitive data the filter knows how to find.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SensitiveData {
    /// E-mail addresses.
    Email,
    /// Phone numbers: international (`+` and a country code) or North American
    /// (`(555) 123-4567`, `555-123-4567`).
    Phone,
    /// Payment card numbers of 13 to 19 digits, grouped or not, that pass the Luhn check.
    CreditCard,
    /// Credentials that look like API keys: `sk-…` (OpenAI, Anthropic), `AKIA…` (AWS),
    /// `ghp_…`/`gho_…`/`github_pat_…` (GitHub), `xox…-` (Slack) and the token of a
    /// `Bearer` header.
    ApiKey,
}

impl SensitiveData {
    /// Every built-in kind.
    pub const ALL: [SensitiveData; 4] =
        [SensitiveData::ApiKey, SensitiveData::Email, SensitiveData::CreditCard, SensitiveData::Phone];

    /// The label a redaction shows: `email`, `phone`, `credit_card`, `api_key`.
    pub fn label(self) -> &'static str {
        match self {
            SensitiveData::Email => "email",
            SensitiveData::Phone => "phone",
            SensitiveData::CreditCard => "credit_card",
            SensitiveData::ApiKey => "api_key",
        }
    }

    pub(crate) fn patterns(self) -> Vec<Pattern> {
        let label = self.label();
        let pattern = |regex: &Regex| Pattern::new(label, regex.clone());
        match self {
            SensitiveData::Email => vec![pattern(&EMAIL)],
            SensitiveData::Phone => vec![pattern(&PHONE_INTERNATIONAL).checked(phone_digits), pattern(&PHONE_NANP)],
            SensitiveData::CreditCard => vec![pattern(&CARD).checked(luhn)],
            SensitiveData::ApiKey => {
                vec![pattern(&API_KEY), pattern(&BEARER).keeping_prefix()]
            }
        }
    }
}

/// Built-in regexes: constant, so compiling them cannot fail at run time.
#[expect(clippy::expect_used, reason = "the patterns are constants, each compiled by a unit test")]
fn compiled(source: &str) -> Regex {
    Regex::new(source).expect("a built-in pattern compiles")
}

static EMAIL: LazyLock<Regex> = LazyLock::new(|| {
    compiled(r"(?i)\b[a-z0-9][a-z0-9._%+-]*@[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9-]+)*\.[a-z]{2,}\b")
});
static PHONE_INTERNATIONAL: LazyLock<Regex> =
    LazyLock::new(|| compiled(r"\+\d{1,3}(?:[ .-]?\(\d{1,4}\)|[ .-]?\d{1,4})(?:[ .-]?\d{2,4}){2,4}\b"));
static PHONE_NANP: LazyLock<Regex> = LazyLock::new(|| compiled(r"(?:\(\d{3}\) ?|\b\d{3}[-. ])\d{3}[-. ]\d{4}\b"));
static CARD: LazyLock<Regex> =
    LazyLock::new(|| compiled(r"\b(?:\d{4}[ -]?\d{6}[ -]?\d{5}|(?:\d{4}[ -]?){3}\d{1,7}|\d{13,19})\b"));
static API_KEY: LazyLock<Regex> = LazyLock::new(|| {
    compiled(concat!(
        r"\bsk-[A-Za-z0-9_-]{16,}",
        r"|\bAKIA[0-9A-Z]{16}\b",
        r"|\bgh[pousr]_[A-Za-z0-9]{20,}\b",
        r"|\bgithub_pat_[A-Za-z0-9_]{20,}",
        r"|\bxox[abposr]-[A-Za-z0-9-]{10,}",
    ))
});
static BEARER: LazyLock<Regex> = LazyLock::new(|| compiled(r"(?i)(\bbearer\s+)[A-Za-z0-9._~+/-]{12,}=*"));

/// One regex, the label its matches are redacted with, and what a match must pass.
#[derive(Clone, Debug)]
pub(crate) struct Pattern {
    pub(crate) label: String,
    regex: Regex,
    /// Keep the first capture group (`Bearer `) and redact the rest of the match.
    keep_prefix: bool,
    /// A match counts only if this accepts it (the Luhn check of card numbers).
    check: Option<fn(&str) -> bool>,
}

impl Pattern {
    pub(crate) fn new(label: impl Into<String>, regex: Regex) -> Self {
        Pattern { label: label.into(), regex, keep_prefix: false, check: None }
    }

    fn checked(mut self, check: fn(&str) -> bool) -> Self {
        self.check = Some(check);
        self
    }

    fn keeping_prefix(mut self) -> Self {
        self.keep_prefix = true;
        self
    }

    fn counts(&self, found: &str) -> bool {
        self.check.is_none_or(|check| check(found))
    }

    /// Whether `text` holds a match.
    pub(crate) fn is_in(&self, text: &str) -> bool {
        self.regex.find_iter(text).any(|m| self.counts(m.as_str()))
    }

    /// `text` with every match replaced by `replacement`.
    pub(crate) fn redact<'t>(&self, text: &'t str, replacement: &str) -> Cow<'t, str> {
        self.regex.replace_all(text, |caps: &Captures<'_>| {
            let found = &caps[0];
            if !self.counts(found) {
                return found.to_owned();
            }
            match caps.get(1).filter(|_| self.keep_prefix) {
                Some(prefix) => format!("{}{replacement}", prefix.as_str()),
                None => replacement.to_owned(),
            }
        })
    }
}

/// The Luhn checksum of the digits of `found` (separators ignored).
pub(crate) fn luhn(found: &str) -> bool {
    let digits: Vec<u32> = found.chars().filter_map(|c| c.to_digit(10)).collect();
    if !(13..=19).contains(&digits.len()) {
        return false;
    }
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| {
            if i % 2 == 1 {
                let doubled = d * 2;
                if doubled > 9 { doubled - 9 } else { doubled }
            } else {
                d
            }
        })
        .sum();
    sum.is_multiple_of(10)
}

/// International numbers have 8 to 15 digits (E.164).
fn phone_digits(found: &str) -> bool {
    (8..=15).contains(&found.chars().filter(char::is_ascii_digit).count())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redact(kind: SensitiveData, text: &str) -> String {
        let mut out = text.to_owned();
        for pattern in kind.patterns() {
            out = pattern.redact(&out, &format!("[{}]", pattern.label)).into_owned();
        }
        out
    }

    #[test]
    fn luhn_accepts_real_test_numbers_and_rejects_near_misses() {
        for good in ["4111 1111 1111 1111", "5500-0000-0000-0004", "378282246310005", "6011111111111117"] {
            assert!(luhn(good), "{good}");
        }
        for bad in ["4111 1111 1111 1112", "1234567890123", "411111111111"] {
            assert!(!luhn(bad), "{bad}");
        }
    }

    #[test]
    fn cards_are_found_only_when_the_checksum_holds() {
        assert_eq!(redact(SensitiveData::CreditCard, "card 4111 1111 1111 1111."), "card [credit_card].");
        assert_eq!(redact(SensitiveData::CreditCard, "amex 3782-822463-10005 ok"), "amex [credit_card] ok");
        assert_eq!(redact(SensitiveData::CreditCard, "order 4111111111111112"), "order 4111111111111112");
        assert_eq!(redact(SensitiveData::CreditCard, "id 1700000000000"), "id 1700000000000", "a timestamp");
    }

    #[test]
    fn emails_are_found_and_lookalikes_left() {
        assert_eq!(
            redact(SensitiveData::Email, "write to Ada.Lovelace+x@example.co.uk, or a@b.io"),
            "write to [email], or [email]"
        );
        assert_eq!(redact(SensitiveData::Email, "git@ no, user@localhost"), "git@ no, user@localhost");
    }

    #[test]
    fn phones_are_found_but_dates_versions_and_addresses_are_not() {
        assert_eq!(redact(SensitiveData::Phone, "call +1 415 555 2671 now"), "call [phone] now");
        assert_eq!(redact(SensitiveData::Phone, "or +44 (20) 7946 0958"), "or [phone]");
        assert_eq!(redact(SensitiveData::Phone, "(555) 123-4567 / 555.123.4567"), "[phone] / [phone]");
        for kept in ["on 2024-05-12", "v1.22.333", "host 192.168.100.200", "+1 2", "ticket 12345678"] {
            assert_eq!(redact(SensitiveData::Phone, kept), kept);
        }
    }

    #[test]
    fn api_keys_of_each_vendor_are_found() {
        let text = concat!(
            "openai sk-proj-abcdefghijklmnop1234, anthropic sk-ant-api03-AAAAAAAAAAAAAAAAAAAA, ",
            "aws AKIAIOSFODNN7EXAMPLE, github ghp_0123456789abcdefghij0123456789abcdef, ",
            "slack xoxb-1234567890-abcdef, header Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.sig=="
        );
        let out = redact(SensitiveData::ApiKey, text);
        assert_eq!(
            out,
            "openai [api_key], anthropic [api_key], aws [api_key], github [api_key], slack [api_key], header Authorization: Bearer [api_key]"
        );
        assert_eq!(redact(SensitiveData::ApiKey, "a task-list and sk-short"), "a task-list and sk-short");
    }
}
