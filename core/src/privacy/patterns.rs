//! Secrets of known shapes, and values assigned to secret-sounding names.
//!
//! Keys and tokens of well-known shapes (Anthropic, OpenAI, AWS access
//! keys, GitHub, Slack, Telegram bot tokens, bearer tokens, PEM private
//! keys) become `[redacted:<kind>]`. An assignment keeps its name and loses
//! its value: `password=hunter2` becomes `password=[redacted:assignment]`.
//! A name is secret-sounding when it ends in `password`, `passwd`,
//! `secret`, `token`, `api_key`, `access_key` or `secret_key` /
//! `private_key` / `signing_key` / `encryption_key` / `master_key` (any
//! case), or is an environment-style upper-case name ending in `_KEY`
//! (`SECRET_KEY`, `STRIPE_KEY`, `SECRET_KEY_BASE`) other than the ones that
//! name no secret ([`NOT_SECRET_KEYS`]: `PRIMARY_KEY`, `FOREIGN_KEY`,
//! `PUBLIC_KEY`, …). The value is found by [`value_end`]: quoted at any
//! depth of JSON escaping, bare, or a YAML block (`password: |` and the
//! lines indented under it, with real or JSON-escaped line breaks). Text
//! that merely talks about secrets ("the token budget", `max_tokens: 5`)
//! is left alone.
//!
//! Word boundaries are ASCII (`(?-u:\b)`): with a Unicode one the regex
//! engine leaves its DFA for a far slower one on any text that is not
//! ASCII (a 24 MB transcript went at 0.5 MB/s).

use std::borrow::Cow;
use std::sync::OnceLock;

use regex::Regex;

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
    /// For an assignment: names (the match, trimmed) that are no secret.
    skip: Option<fn(&str) -> bool>,
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
            skip: None,
        }
    }

    const fn skipping(mut self, skip: fn(&str) -> bool) -> Self {
        self.skip = Some(skip);
        self
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

static PATTERNS: [Pattern; 10] = [
    Pattern::new(
        "private-key",
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\z)",
        &["-----BEGIN"],
        false,
        false,
    ),
    Pattern::new(
        "anthropic-key",
        r"(?-u:\b)sk-ant-[A-Za-z0-9_\-]{16,}",
        &["sk-ant-"],
        false,
        false,
    ),
    Pattern::new(
        "openai-key",
        r"(?-u:\b)sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}",
        &["sk-"],
        false,
        false,
    ),
    Pattern::new(
        "aws-access-key",
        r"(?-u:\b)(?:AKIA|ASIA)[0-9A-Z]{16}(?-u:\b)",
        &["AKIA", "ASIA"],
        false,
        false,
    ),
    Pattern::new(
        "github-token",
        r"(?-u:\b)(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})",
        &["ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"],
        false,
        false,
    ),
    Pattern::new(
        "slack-token",
        r"(?-u:\b)xox[abposr]-[A-Za-z0-9\-]{10,}",
        &["xox"],
        false,
        false,
    ),
    // A Telegram bot token: the bot's id, a colon, then characters
    // that start with "AA" (about 35).
    Pattern::new(
        "telegram-bot-token",
        r"(?-u:\b)\d{5,12}:AA[A-Za-z0-9_\-]{30,40}(?-u:\b)",
        &[":AA"],
        false,
        false,
    ),
    Pattern::new(
        "bearer-token",
        r"(?i)(?-u:\b)bearer\s+[A-Za-z0-9._~+/=\-]{16,}",
        &["bearer"],
        true,
        false,
    ),
    // The name and its `=` or `:` only: the value is found by
    // `value_end`, which knows quoting at any depth of JSON escaping.
    Pattern::new(
        "assignment",
        r#"(?i)(?-u:\b)(?:[a-z0-9_]*(?:password|passwd|secret|token|api[_-]?key|access[_-]?key|(?:secret|private|signing|encryption|master)[_-]?key))(?:\\*["'])?\s*[=:]\s*"#,
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
            "privatekey",
            "private_key",
            "private-key",
            "signingkey",
            "signing_key",
            "signing-key",
            "encryptionkey",
            "encryption_key",
            "encryption-key",
            "masterkey",
            "master_key",
            "master-key",
        ],
        true,
        true,
    ),
    // An environment variable's shape (`SECRET_KEY=`, `export STRIPE_KEY=`):
    // upper case, ending in `_KEY`; the names of [`NOT_SECRET_KEYS`] are
    // skipped. Lower-case `*_key` is too often a column or a map's key.
    Pattern::new(
        "assignment",
        r#"(?-u:\b)[A-Z][A-Z0-9_]*_KEY(?:_BASE)?(?:\\*["'])?[ \t]*[=:][ \t]*"#,
        &["_KEY"],
        false,
        true,
    )
    .skipping(not_a_secret_key),
];

/// Upper-case `_KEY` names that are no secret: database and sort keys,
/// public keys, keyboard keys.
const NOT_SECRET_KEYS: &[&str] = &[
    "PRIMARY_KEY",
    "FOREIGN_KEY",
    "UNIQUE_KEY",
    "PUBLIC_KEY",
    "SORT_KEY",
    "PARTITION_KEY",
    "RANGE_KEY",
    "HASH_KEY",
    "CACHE_KEY",
    "IDEMPOTENCY_KEY",
    "LOOKUP_KEY",
    "SHIFT_KEY",
    "CTRL_KEY",
    "ALT_KEY",
    "META_KEY",
    "ESCAPE_KEY",
];

/// Whether an upper-case `_KEY` assignment (its match) names no secret.
fn not_a_secret_key(matched: &str) -> bool {
    let name = matched.trim_end_matches(|c: char| "\\\"' \t=:".contains(c));
    NOT_SECRET_KEYS.iter().any(|k| name.ends_with(k))
}

/// `text` with every pattern's matches redacted. Borrowed when nothing was
/// found.
pub(super) fn redact(text: &str) -> Cow<'_, str> {
    let mut out = Cow::Borrowed(text);
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

/// `text` with the value after each of `p`'s matches (a name and its `=`)
/// redacted; None when there was none to redact.
fn redact_values(text: &str, p: &Pattern) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    for m in p.re().find_iter(text) {
        if m.start() < copied || p.skip.is_some_and(|skip| skip(m.as_str())) {
            continue;
        }
        let Some(end) = value_end(text, m.start(), m.end()) else {
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
/// - or a YAML block ([`block_end`]).
///
/// A quoted value not closed on its line is a value to the end of the line:
/// when in doubt, redacted.
fn value_end(text: &str, name_start: usize, at: usize) -> Option<usize> {
    let rest = &text.as_bytes()[at..];
    if rest.starts_with(b"[redacted:") {
        return None;
    }
    if let Some(end) = block_end(text.as_bytes(), name_start, at) {
        return Some(end);
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

/// Where a YAML block value at `at` ends: `|` or `>` (with its
/// indicators), a line break, then the lines indented deeper than the
/// name's line (blank lines among them). The line breaks may be
/// JSON-escaped (`\n`, `\\n`, … as a tool's input shows a file); the
/// name's indentation is the spaces right before it. None when `at` holds
/// no block, or the block has no line.
fn block_end(b: &[u8], name_start: usize, at: usize) -> Option<usize> {
    if !matches!(b.get(at), Some(b'|' | b'>')) {
        return None;
    }
    let mut i = at + 1;
    while matches!(b.get(i), Some(b'+' | b'-' | b'0'..=b'9' | b' ' | b'\t')) {
        i += 1;
    }
    let brk: &[u8] = match b.get(i)? {
        b'\n' => b"\n",
        b'\r' if b.get(i + 1) == Some(&b'\n') => b"\r\n",
        b'\\' => {
            let run = b[i..].iter().take_while(|&&c| c == b'\\').count();
            (b.get(i + run) == Some(&b'n')).then(|| &b[i..=i + run])?
        }
        _ => return None,
    };
    let escaped = brk[0] == b'\\';
    let indent = b[..name_start]
        .iter()
        .rev()
        .take_while(|&&c| c == b' ')
        .count();
    let mut end = None;
    let mut p = i;
    while b[p..].starts_with(brk) {
        let start = p + brk.len();
        let rest = &b[start..];
        let len = memchr::memmem::find(rest, brk).unwrap_or(rest.len());
        // An escaped block ends with the JSON string it is in.
        let len = match escaped {
            true => memchr::memchr(b'"', &rest[..len]).map_or(len, |q| {
                q - rest[..q].iter().rev().take_while(|&&c| c == b'\\').count()
            }),
            false => len,
        };
        let line = &rest[..len];
        let spaces = line.iter().take_while(|&&c| c == b' ').count();
        if spaces == line.len() {
            // Blank: part of the block only if an indented line follows.
        } else if spaces > indent {
            end = Some(start + len);
        } else {
            break;
        }
        if len < rest.len() && !rest[len..].starts_with(brk) {
            break;
        }
        p = start + len;
    }
    end
}
