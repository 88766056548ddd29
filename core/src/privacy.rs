//! What must never reach g2's memory: text a person marked private, the
//! memory g2 itself put into a prompt, and anything that looks like a
//! secret.
//!
//! Both sides apply it: the in-container hook before it writes an event
//! file, and the host again before anything is stored (defence in depth: a
//! file in the IPC folder is the agent's to write). [`clean`] is the whole
//! treatment; [`strip_tags`] and [`redact`] are its two halves.
//!
//! **Tags.** `<private>…</private>`, g2's own `<g2-memory>…</g2-memory>`
//! (so memory never feeds on itself) and Claude Code's
//! `<system-reminder>…</system-reminder>` are removed with what they hold;
//! tag names match in any case, with whitespace or attributes after the
//! name (`<private >`, `<private note="x">`), and the same tag nested
//! inside one is counted. An opening tag without its closing tag removes
//! everything after it: when in doubt, private stays private.
//!
//! **Secrets.** Keys and tokens of well-known shapes (Anthropic, OpenAI,
//! AWS access keys, GitHub, Slack, Telegram bot tokens, bearer tokens, PEM private keys) and the
//! values of `password=` / `secret=` / `token=` / `api_key=` assignments
//! (also as YAML `key: value`, JSON `"key": "value"`, and JSON escaped
//! inside JSON strings to any depth: `\"key\":\"value\"`,
//! `\\\"key\\\":\\\"value\\\"`, …; a quoted value not closed on its line is
//! redacted to the line's end) are replaced with `[redacted:<kind>]`; an assignment keeps
//! its name, so `password=hunter2` becomes `password=[redacted:assignment]`
//! and `{"token":"x"}` becomes `{"token":[redacted:assignment]}`. Text that
//! merely talks about secrets ("the token budget", "password policy") is
//! left alone. [`Redactor::with_literals`] adds exact strings (the host's
//! own credential) to the patterns.

use std::borrow::Cow;
use std::sync::OnceLock;

use regex::Regex;

/// Tags whose content never reaches storage.
pub const STRIPPED_TAGS: &[&str] = &["private", "g2-memory", "system-reminder"];

/// The tag g2 wraps the memory it injects into a prompt in.
pub const MEMORY_TAG: &str = "g2-memory";

/// Removes every [`STRIPPED_TAGS`] element with its content (an unclosed
/// one: to the end of the text). Borrowed when there was nothing to remove.
///
/// A tag is its name in any case, then `>`, `/` or whitespace: `<private>`,
/// `<private >`, `<Private note="x">` and `<private\n>` all open one, and
/// `<private` with no `>` after it makes the rest of the text private. A
/// closing tag may have whitespace (`</private >`, `</ private>`). The same
/// tag opened inside one is counted, so `<private>a<private>b</private>c
/// </private>` is removed whole.
pub fn strip_tags(text: &str) -> Cow<'_, str> {
    if !text.contains('<') {
        return Cow::Borrowed(text);
    }
    let lower = text.to_ascii_lowercase();
    let mut out = String::new();
    let mut copied = 0;
    let mut at = 0;
    while let Some((start, tag)) = next_open(&lower, at) {
        let end = element_end(&lower, start, tag);
        out.push_str(&text[copied..start]);
        copied = end;
        at = end;
    }
    if copied == 0 {
        return Cow::Borrowed(text);
    }
    out.push_str(&text[copied..]);
    Cow::Owned(out)
}

/// The first opening tag of [`STRIPPED_TAGS`] at or after `from` in the
/// lower-cased text: its byte offset and name.
fn next_open(lower: &str, from: usize) -> Option<(usize, &'static str)> {
    let bytes = lower.as_bytes();
    memchr::memchr_iter(b'<', &bytes[from..])
        .map(|i| from + i)
        .find_map(|i| opens(lower, i).map(|tag| (i, tag)))
}

/// The stripped tag that an opening tag at `i` (a `<`) names, if any.
fn opens(lower: &str, i: usize) -> Option<&'static str> {
    let rest = &lower[i + 1..];
    STRIPPED_TAGS.iter().copied().find(|tag| {
        rest.strip_prefix(tag).is_some_and(|after| {
            after
                .bytes()
                .next()
                .is_none_or(|b| b == b'>' || b == b'/' || b.is_ascii_whitespace())
        })
    })
}

/// The length of a closing tag of `tag` at `i` (a `<`), if there is one.
fn closes(lower: &str, i: usize, tag: &str) -> Option<usize> {
    let b = lower.as_bytes();
    let skip_space = |mut j: usize| {
        while b.get(j).is_some_and(u8::is_ascii_whitespace) {
            j += 1;
        }
        j
    };
    if b.get(i + 1) != Some(&b'/') {
        return None;
    }
    let j = skip_space(i + 2);
    if !lower[j..].starts_with(tag) {
        return None;
    }
    let j = skip_space(j + tag.len());
    (b.get(j) == Some(&b'>')).then_some(j + 1 - i)
}

/// Where the element whose opening tag is at `start` ends: after its
/// matching closing tag, or at the end of the text.
fn element_end(lower: &str, start: usize, tag: &str) -> usize {
    let Some(gt) = lower[start..].find('>').map(|i| start + i + 1) else {
        return lower.len();
    };
    let mut depth = 1;
    let mut at = gt;
    while let Some(i) = lower[at..].find('<').map(|i| at + i) {
        if let Some(len) = closes(lower, i, tag) {
            depth -= 1;
            if depth == 0 {
                return i + len;
            }
            at = i + len;
        } else if opens(lower, i) == Some(tag) {
            depth += 1;
            match lower[i..].find('>') {
                Some(j) => at = i + j + 1,
                None => return lower.len(),
            }
        } else {
            at = i + 1;
        }
    }
    lower.len()
}

/// Whether `text` holds something, and nothing of it is left once the tags
/// are stripped: a prompt that is entirely private stores nothing at all.
pub fn entirely_private(text: &str) -> bool {
    !text.trim().is_empty() && strip_tags(text).trim().is_empty()
}

/// One secret pattern: the kind named in `[redacted:<kind>]`.
struct Pattern {
    kind: &'static str,
    source: &'static str,
    /// Compiled on first need: a hook process that sees no candidate never
    /// pays for it.
    re: OnceLock<Regex>,
    /// Text that cannot hold a match unless it holds one of these (in lower
    /// case when `any_case`): checked before the regex runs.
    needles: &'static [&'static str],
    any_case: bool,
    /// For an assignment: the regex matches the name and `=`, which stay;
    /// the value after it ([`value_end`]) is redacted.
    keeps_name: bool,
}

impl Pattern {
    const fn new(
        kind: &'static str,
        source: &'static str,
        needles: &'static [&'static str],
        any_case: bool,
        keeps_name: bool,
    ) -> Self {
        Pattern {
            kind,
            source,
            re: OnceLock::new(),
            needles,
            any_case,
            keeps_name,
        }
    }

    fn might_match(&self, text: &str, lower: &mut Option<String>) -> bool {
        if self.any_case {
            let lower = lower.get_or_insert_with(|| text.to_ascii_lowercase());
            self.needles.iter().any(|n| lower.contains(n))
        } else {
            self.needles.iter().any(|n| text.contains(n))
        }
    }

    fn re(&self) -> &Regex {
        self.re.get_or_init(|| {
            Regex::new(self.source).unwrap_or_else(|e| panic!("secret pattern {}: {e}", self.kind))
        })
    }
}

static PATTERNS: [Pattern; 9] = [
    Pattern::new(
        "private-key",
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\z)",
        &["-----BEGIN"],
        false,
        false,
    ),
    Pattern::new(
        "anthropic-key",
        r"\bsk-ant-[A-Za-z0-9_\-]{16,}",
        &["sk-ant-"],
        false,
        false,
    ),
    Pattern::new(
        "openai-key",
        r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}",
        &["sk-"],
        false,
        false,
    ),
    Pattern::new(
        "aws-access-key",
        r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
        &["AKIA", "ASIA"],
        false,
        false,
    ),
    Pattern::new(
        "github-token",
        r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})",
        &["ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"],
        false,
        false,
    ),
    Pattern::new(
        "slack-token",
        r"\bxox[abposr]-[A-Za-z0-9\-]{10,}",
        &["xox"],
        false,
        false,
    ),
    // A Telegram bot token: the bot's id, a colon, then characters
    // that start with "AA" (about 35).
    Pattern::new(
        "telegram-bot-token",
        r"\b\d{5,12}:AA[A-Za-z0-9_\-]{30,40}\b",
        &[":AA"],
        false,
        false,
    ),
    Pattern::new(
        "bearer-token",
        r"(?i)\bbearer\s+[A-Za-z0-9._~+/=\-]{16,}",
        &["bearer"],
        true,
        false,
    ),
    // The name and its `=` or `:` only: the value is found by
    // `value_end`, which knows quoting at any depth of JSON escaping.
    Pattern::new(
        "assignment",
        r#"(?i)\b(?:[a-z0-9_]*(?:password|passwd|secret|token|api[_-]?key|access[_-]?key))(?:\\*["'])?\s*[=:]\s*"#,
        &[
            "password",
            "passwd",
            "secret",
            "token",
            "apikey",
            "api_key",
            "api-key",
            "accesskey",
            "access_key",
            "access-key",
        ],
        true,
        true,
    ),
];

/// Redacts secrets: the built-in patterns, plus exact strings.
#[derive(Clone, Default)]
pub struct Redactor {
    literals: Vec<String>,
}

/// Never shows the literals: they are secrets.
impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Redactor({} literals)", self.literals.len())
    }
}

impl Redactor {
    /// Also redacts each of `literals` wherever it appears (kind
    /// `credential`); strings shorter than 8 characters are ignored, since
    /// they would match ordinary text.
    pub fn with_literals<I, S>(literals: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Redactor {
            literals: literals
                .into_iter()
                .map(Into::into)
                .filter(|s: &String| s.chars().count() >= 8)
                .collect(),
        }
    }

    /// `text` with every secret replaced by `[redacted:<kind>]`. Borrowed
    /// when nothing was found.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(text);
        for lit in &self.literals {
            if out.contains(lit.as_str()) {
                out = Cow::Owned(out.replace(lit.as_str(), "[redacted:credential]"));
            }
        }
        let mut lower = None;
        for p in &PATTERNS {
            if !p.might_match(&out, &mut lower) || !p.re().is_match(&out) {
                continue;
            }
            let replaced = if p.keeps_name {
                match redact_values(&out, p) {
                    Some(r) => r,
                    None => continue,
                }
            } else {
                p.re()
                    .replace_all(&out, format!("[redacted:{}]", p.kind).as_str())
                    .into_owned()
            };
            out = Cow::Owned(replaced);
            // The text changed: its lower-case copy is stale.
            lower = None;
        }
        out
    }

    /// [`strip_tags`], then [`Redactor::redact`].
    pub fn clean<'a>(&self, text: &'a str) -> Cow<'a, str> {
        match strip_tags(text) {
            Cow::Borrowed(t) => self.redact(t),
            Cow::Owned(t) => Cow::Owned(self.redact(&t).into_owned()),
        }
    }

    /// [`Redactor::clean`]'s text when it differs from `text`; None when
    /// there was nothing to clean (what a stored row is rewritten with).
    pub fn cleaned(&self, text: &str) -> Option<String> {
        match self.clean(text) {
            Cow::Owned(c) if c != text => Some(c),
            _ => None,
        }
    }
}

/// `text` with the value after each of `p`'s matches (a name and its `=`)
/// redacted; None when there was none to redact.
fn redact_values(text: &str, p: &Pattern) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    for m in p.re().find_iter(text) {
        if m.start() < copied {
            continue;
        }
        let Some(end) = value_end(text, m.end()) else {
            continue;
        };
        out.push_str(&text[copied..m.end()]);
        out.push_str("[redacted:");
        out.push_str(p.kind);
        out.push(']');
        copied = end;
    }
    (copied > 0).then(|| {
        out.push_str(&text[copied..]);
        out
    })
}

/// Where the value that starts at `at` ends; None when there is none (or
/// it is redacted already). A value is
/// - quoted with `"` at any depth of JSON escaping: `"…"`, `\"…\"`,
///   `\\\"…\\\"`, …; with k backslashes before its opening quote, it ends
///   at the first quote whose run of backslashes is k modulo 2(k+1) (a
///   quote of the value itself, escaped once more, has 2k+1);
/// - quoted with `'`, to the next `'`;
/// - or bare, to a space, one of `"',;&}]`, or backslashes before a quote
///   (the end of the string it is in).
///
/// A quoted value not closed on its line is a value to the end of the line:
/// when in doubt, redacted.
fn value_end(text: &str, at: usize) -> Option<usize> {
    let rest = &text.as_bytes()[at..];
    if rest.starts_with(b"[redacted:") {
        return None;
    }
    let k = rest.iter().take_while(|&&c| c == b'\\').count();
    match rest.get(k) {
        Some(b'"') => {
            let period = 2 * (k + 1);
            let mut run = 0;
            for (i, &c) in rest.iter().enumerate().skip(k + 1) {
                match c {
                    b'\\' => run += 1,
                    b'"' if run % period == k => return Some(at + i + 1),
                    b'\n' => return Some(at + i),
                    _ => run = 0,
                }
            }
            Some(text.len())
        }
        Some(b'\'') if k == 0 => Some(match memchr::memchr2(b'\'', b'\n', &rest[1..]) {
            Some(i) if rest[1 + i] == b'\'' => at + i + 2,
            Some(i) => at + 1 + i,
            None => text.len(),
        }),
        _ => {
            let mut i = 0;
            while let Some(&c) = rest.get(i) {
                if c.is_ascii_whitespace() || b"\"',;&}]".contains(&c) {
                    break;
                }
                if c == b'\\' {
                    let run = rest[i..].iter().take_while(|&&c| c == b'\\').count();
                    if rest.get(i + run) == Some(&b'"') {
                        break;
                    }
                    i += run;
                    continue;
                }
                i += 1;
            }
            (i > 0).then_some(at + i)
        }
    }
}

/// [`Redactor::redact`] with the built-in patterns only.
pub fn redact(text: &str) -> Cow<'_, str> {
    Redactor::default().redact(text)
}

/// [`strip_tags`] then [`redact`] with the built-in patterns only.
pub fn clean(text: &str) -> Cow<'_, str> {
    Redactor::default().clean(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_and_own_memory_are_removed_with_their_content() {
        assert_eq!(strip_tags("no tags here"), "no tags here");
        assert!(matches!(strip_tags("a < b"), Cow::Borrowed(_)));
        assert_eq!(
            strip_tags("my pin is <private>4417</private>, remember it"),
            "my pin is , remember it"
        );
        assert_eq!(strip_tags("a<PRIVATE>x</Private>b"), "ab");
        assert_eq!(
            strip_tags("<g2-memory>earlier: milk</g2-memory>what now?"),
            "what now?"
        );
        assert_eq!(
            strip_tags("x<system-reminder>ctx</system-reminder>y<private>p</private>z"),
            "xyz"
        );
        // Unclosed: private to the end, never leaked.
        assert_eq!(strip_tags("keep <private>4417 and more"), "keep ");
        // Two in a row, and a closing tag alone is just text.
        assert_eq!(
            strip_tags("<private>a</private><private>b</private>c</private>"),
            "c</private>"
        );
        // Multi-byte text around the tags.
        assert_eq!(strip_tags("é<private>ü</private>ß"), "éß");
    }

    #[test]
    fn tags_with_whitespace_attributes_or_nesting_are_private_too() {
        for text in [
            "a<private >4417</private>b",
            "a<private note=\"x\">4417</private>b",
            "a<PRIVATE\n  lang='en'>4417</Private\t>b",
            "a<private>4417</ private >b",
            "a<private/>4417</private>b",
            "a<private>x<private>4417</private>4417</private>b",
            "a<private note=\"1 > 0\">4417</private>b",
        ] {
            assert_eq!(strip_tags(text), "ab", "{text:?}");
        }
        // Unclosed, or without the opening tag's '>': private to the end.
        assert_eq!(strip_tags("a<private note=\"x\">4417 and on"), "a");
        assert_eq!(strip_tags("a<private note=\"x"), "a");
        assert_eq!(strip_tags("a<private"), "a");
        // Other names stay text.
        for text in [
            "a <privateer> b",
            "<private-notes>x",
            "</private> alone",
            "a < private b",
        ] {
            assert_eq!(strip_tags(text), text, "{text:?}");
        }
        assert_eq!(
            strip_tags("<g2-memory  source=\"recall\">old</g2-memory>new"),
            "new"
        );
    }

    #[test]
    fn secrets_are_redacted_through_any_depth_of_json_escaping() {
        let secret = "hunter2-zq81";
        let mut text = format!(r#"{{"user":"ann","password":"{secret}","n":1}}"#);
        for depth in 0..6 {
            let cleaned = redact(&text).into_owned();
            assert!(!cleaned.contains("hunter2"), "depth {depth}: {cleaned}");
            assert!(cleaned.contains("ann") && cleaned.contains("[redacted:assignment]"));
            // The JSON around it is intact: it still parses at its depth.
            let mut v = cleaned.clone();
            for _ in 0..depth {
                v = serde_json::from_str::<String>(&v).unwrap();
            }
            let parsed: serde_json::Value =
                serde_json::from_str(&v.replace("[redacted:assignment]", "null")).unwrap();
            assert_eq!(parsed["n"], 1, "depth {depth}: {v}");
            text = serde_json::to_string(&text).unwrap();
        }
        // The issue's shape, written by hand.
        assert_eq!(
            redact(r#"{\\\"password\\\":\\\"s3cr3t pass\\\"}"#),
            r#"{\\\"password\\\":[redacted:assignment]}"#
        );
        // A quote or backslash inside the value, escaped once more.
        let inner = serde_json::to_string(&serde_json::json!({"token": "a\"b\\c-zq81"})).unwrap();
        let outer = serde_json::to_string(&inner).unwrap();
        for t in [&inner, &outer] {
            let r = redact(t);
            assert!(!r.contains("zq81") && !r.contains("b\\"), "{r}");
        }
        // Unclosed: to the end of its line.
        assert_eq!(
            redact("password=\"hunter2 and more\nnext line"),
            "password=[redacted:assignment]\nnext line"
        );
        assert_eq!(redact("token: 'abc"), "token: [redacted:assignment]");
    }

    #[test]
    fn an_entirely_private_prompt_is_known() {
        assert!(entirely_private("<private>my pin is 4417</private>"));
        assert!(entirely_private("  <private>x</private>\n<private>y"));
        assert!(!entirely_private("hi <private>x</private>"));
        assert!(!entirely_private(""));
        assert!(!entirely_private("plain"));
    }

    #[test]
    fn each_kind_of_secret_is_redacted() {
        let cases = [
            (
                "key sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789-ABCD done",
                "key [redacted:anthropic-key] done",
            ),
            (
                "OPENAI sk-proj-abcdefghijklmnopqrstuvwx1234",
                "OPENAI [redacted:openai-key]",
            ),
            (
                "aws AKIAIOSFODNN7EXAMPLE.",
                "aws [redacted:aws-access-key].",
            ),
            (
                "gh ghp_abcdefghijklmnopqrstuvwxyz0123456789 x",
                "gh [redacted:github-token] x",
            ),
            ("xoxb-123456789012-abcdefABCDEF", "[redacted:slack-token]"),
            (
                "bot 110201543:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw here",
                "bot [redacted:telegram-bot-token] here",
            ),
            (
                "Authorization: Bearer abc.def.ghijklmnopqrstuvwxyz",
                "Authorization: [redacted:bearer-token]",
            ),
            ("password=hunter22", "password=[redacted:assignment]"),
            (
                "DB_PASSWORD: \"s3cr3t value\"",
                "DB_PASSWORD: [redacted:assignment]",
            ),
            (
                "export API_KEY='abc123'",
                "export API_KEY=[redacted:assignment]",
            ),
            ("token = abc&x=1", "token = [redacted:assignment]&x=1"),
            // JSON, and JSON inside a JSON string (a tool's input).
            (
                r#"{"user":"ann","password":"hunter22"}"#,
                r#"{"user":"ann","password":[redacted:assignment]}"#,
            ),
            (
                r#"{"client_secret": "a b", "n": 1}"#,
                r#"{"client_secret": [redacted:assignment], "n": 1}"#,
            ),
            (
                r#""{\"api_key\":\"abc def\",\"n\":1}""#,
                r#""{\"api_key\":[redacted:assignment],\"n\":1}""#,
            ),
            ("{'token': 'abc'}", "{'token': [redacted:assignment]}"),
            (r#"{"token":12345}"#, r#"{"token":[redacted:assignment]}"#),
        ];
        for (input, want) in cases {
            assert_eq!(redact(input), want, "{input}");
        }
        let pem = "before\n-----BEGIN RSA PRIVATE KEY-----\nMIIE\nabc\n-----END RSA PRIVATE KEY-----\nafter";
        assert_eq!(redact(pem), "before\n[redacted:private-key]\nafter");
        // Cut off mid-key: the rest is still a key.
        assert_eq!(
            redact("x -----BEGIN PRIVATE KEY-----\nMIIE"),
            "x [redacted:private-key]"
        );
    }

    #[test]
    fn talk_about_secrets_is_not_a_secret() {
        for text in [
            "the token budget is 30k",
            "our password policy says 12 characters",
            "ask for a sk- prefix key",
            "risk-free, desk-ant-hill",
            "AKIA alone",
            "bearer of bad news",
            r#"{"usage":{"input_tokens":1234,"max_tokens":100}}"#,
        ] {
            assert_eq!(redact(text), text);
            assert!(matches!(redact(text), Cow::Borrowed(_)), "{text}");
        }
    }

    #[test]
    fn redaction_is_stable_and_literals_are_added() {
        let once = redact("password=hunter22 sk-ant-api03-abcdefghijklmnopqrstu");
        assert_eq!(redact(&once), once, "a second pass changes nothing");
        let r = Redactor::with_literals(["super-secret-value", "short"]);
        assert_eq!(
            r.redact("x super-secret-value y short"),
            "x [redacted:credential] y short"
        );
    }

    #[test]
    fn clean_strips_then_redacts() {
        let r = Redactor::default();
        assert_eq!(r.cleaned("nothing here"), None);
        assert_eq!(r.cleaned("a <b> c"), None);
        assert_eq!(r.cleaned("x<private>y</private>").as_deref(), Some("x"));
        assert_eq!(
            clean("<private>4417</private>run with AKIAIOSFODNN7EXAMPLE"),
            "run with [redacted:aws-access-key]"
        );
    }

    proptest::proptest! {
        /// A private span in any spelling of its tags (case, whitespace,
        /// attributes, closing whitespace, nesting) never survives.
        #[test]
        fn every_spelling_of_a_private_tag_is_stripped(
            before in "[ -~\n]{0,30}",
            after in "[ -~\n]{0,30}",
            pin in "[0-9]{6,9}",
            upper in proptest::collection::vec(proptest::bool::ANY, 7),
            space in "[ \t\n]{0,3}",
            attr in proptest::option::of("[a-z]{1,5}=\"[a-z0-9 >]{0,8}\""),
            close_space in "[ \t]{0,2}",
            nested in proptest::bool::ANY,
            closed in proptest::bool::ANY,
        ) {
            let name: String = "private"
                .chars()
                .zip(&upper)
                .map(|(c, u)| if *u { c.to_ascii_uppercase() } else { c })
                .collect();
            let sep = if space.is_empty() && attr.is_some() { " " } else { &space };
            let open = format!("<{name}{sep}{}>", attr.unwrap_or_default());
            let body = if nested {
                format!("a{open}{pin}</{name}>{pin}")
            } else {
                pin.clone()
            };
            let close = if closed { format!("</{close_space}{name}{close_space}>") } else { String::new() };
            let text = format!("{before}{open}{body}{close}{after}");
            let cleaned = strip_tags(&text).into_owned();
            proptest::prop_assert!(!cleaned.contains(&pin), "{text:?} -> {cleaned:?}");
        }

        /// A secret assigned in JSON, escaped into JSON strings to any
        /// depth, never survives, whatever its characters.
        #[test]
        fn an_assigned_secret_never_survives_escaping(
            key in "(password|api_key|client_secret|token|DB_PASSWD)",
            core in "[A-Za-z0-9]{10,16}",
            pre in "[ -~]{0,4}",
            post in "[ -~]{0,4}",
            depth in 0usize..5,
        ) {
            let value = format!("{pre}{core}{post}");
            let mut text = serde_json::json!({ "cmd": "deploy", key: value }).to_string();
            for _ in 0..depth {
                text = serde_json::to_string(&text).unwrap();
            }
            let cleaned = redact(&text).into_owned();
            proptest::prop_assert!(!cleaned.contains(&core), "{text} -> {cleaned}");
            proptest::prop_assert_eq!(redact(&cleaned).into_owned(), cleaned);
        }

        /// Whatever surrounds them, a private span and a generated key never
        /// survive cleaning, and cleaning twice changes nothing more.
        #[test]
        fn nothing_marked_or_shaped_as_secret_survives(
            before in "[ -~\\n]{0,40}",
            after in "[ -~\\n]{0,40}",
            pin in "[0-9]{6,9}",
            key in "[A-Z2-7]{16}",
        ) {
            let aws = format!("AKIA{key}");
            let text = format!("{before} <private>{pin}</private> {aws} {after}");
            let cleaned = clean(&text).into_owned();
            proptest::prop_assert!(!cleaned.contains(&aws), "{cleaned}");
            proptest::prop_assert!(!cleaned.contains(&format!("<private>{pin}")), "{cleaned}");
            proptest::prop_assert_eq!(clean(&cleaned).into_owned(), cleaned);
        }
    }
}
