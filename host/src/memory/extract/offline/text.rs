//! Reading the captured text: who said what, sentence by sentence, with
//! markdown noise stripped.

use std::sync::LazyLock;

use regex::Regex;

use super::*;

/// The prompt as (sender, text) pieces: a routed prompt's `Name: text`
/// lines by sender (a line that names no sender continues the message
/// before it), anything else as one piece of no one in particular.
pub(super) fn spoken(prompt: &str, senders: &[String]) -> Vec<(Option<String>, String)> {
    // The worker hands the stored `Name: text` form; an envelope, should
    // one come, is read as the same thing.
    let (prompt, senders): (String, Vec<String>) = match envelope::read(prompt) {
        Some(env) if !env.messages.is_empty() => {
            let mut names: Vec<String> = Vec::new();
            for m in &env.messages {
                if !names.contains(&m.sender) {
                    names.push(m.sender.clone());
                }
            }
            let lines = env
                .messages
                .iter()
                .map(|m| format!("{}: {}", m.sender, m.text))
                .collect::<Vec<_>>()
                .join("\n");
            (lines, names)
        }
        _ => (prompt.to_string(), senders.to_vec()),
    };
    if senders.is_empty() {
        return if prompt.trim().is_empty() {
            Vec::new()
        } else {
            vec![(None, prompt)]
        };
    }
    let mut out: Vec<(Option<String>, String)> = Vec::new();
    for line in prompt.lines() {
        let named = senders.iter().find_map(|s| {
            line.strip_prefix(s.as_str())
                .and_then(|rest| rest.strip_prefix(": "))
                .map(|rest| (s, rest))
        });
        match (named, out.last_mut()) {
            (Some((name, rest)), _) => out.push((Some(name.clone()), rest.to_string())),
            (None, Some((_, text))) => {
                text.push('\n');
                text.push_str(line);
            }
            (None, None) => out.push((None, line.to_string())),
        }
    }
    out
}

// ---- text: markdown out, sentences ----

pub(super) static LINK: LazyLock<Regex> = LazyLock::new(|| re(r"!?\[([^\]\n]*)\]\([^)\s]*\)"));
pub(super) static TAG: LazyLock<Regex> =
    LazyLock::new(|| re(r"</?[A-Za-z][\w:-]*(?:\s[^<>\n]*)?/?>"));
pub(super) static BULLET: LazyLock<Regex> =
    LazyLock::new(|| re(r"^(?:[-*+•]\s+|\d{1,3}[.)]\s+)(?:\[[ xX]\]\s+)?"));

pub(super) fn re(pattern: &str) -> Regex {
    // The patterns are constants: a bad one is a bug the tests catch.
    #[allow(clippy::expect_used)]
    Regex::new(pattern).expect("offline extractor pattern")
}

/// The text's prose lines with markdown noise stripped: code blocks,
/// tables, headings and rules dropped; quote marks, bullets, emphasis,
/// inline code marks, tags and link targets taken off.
pub(super) fn prose(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fence = false;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("```") || t.starts_with("~~~") {
            fence = !fence;
            continue;
        }
        if fence || t.is_empty() || t.starts_with('|') || t.starts_with('#') {
            continue;
        }
        if t.chars().all(|c| matches!(c, '-' | '*' | '_' | '=' | ' ')) {
            continue;
        }
        let t = t.trim_start_matches('>').trim_start();
        let t = BULLET.replace(t, "");
        let t = LINK.replace_all(&t, "$1");
        let t = TAG.replace_all(&t, " ");
        let t: String = t
            .replace("**", "")
            .replace("__", "")
            .chars()
            .filter(|c| *c != '`' && *c != '*')
            .collect();
        let t = t.split_whitespace().collect::<Vec<_>>().join(" ");
        if !t.is_empty() {
            out.push(t);
        }
    }
    out
}

/// The sentences of `text`: each prose line split after `.`, `!` or `?`
/// where a space and no lowercase letter follow (so "e.g. this", "v1.2"
/// and "main.rs" stay whole). Hand-rolled: chat text is short and
/// informal, and a dot before a capital is all the splitting it needs.
pub(super) fn sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in prose(text) {
        let chars: Vec<(usize, char)> = line.char_indices().collect();
        let mut start = 0;
        for (n, &(i, c)) in chars.iter().enumerate() {
            if !matches!(c, '.' | '!' | '?') {
                continue;
            }
            let next = chars.get(n + 1).map(|p| p.1);
            let after = chars.get(n + 2).map(|p| p.1);
            if next == Some(' ') && after.is_some_and(|a| !a.is_lowercase()) {
                let s = line[start..i + c.len_utf8()].trim();
                if !s.is_empty() {
                    out.push(s.to_string());
                }
                start = i + c.len_utf8();
            }
        }
        let s = line[start..].trim();
        if !s.is_empty() {
            out.push(s.to_string());
        }
    }
    out
}

/// Shortens to at most `max` characters, cut at a word where there is one
/// and marked with `…`.
pub(crate) fn shorten(s: &str, max: usize) -> String {
    let s = s.trim();
    match s.char_indices().nth(max) {
        None => s.to_string(),
        Some(_) => {
            // Room for the mark.
            let end = s.char_indices().nth(max - 1).map_or(s.len(), |(i, _)| i);
            let cut = &s[..end];
            let cut = cut
                .rfind(' ')
                .filter(|&j| j > end / 2)
                .map_or(cut, |j| &cut[..j]);
            format!(
                "{}…",
                cut.trim_end_matches(|c: char| c.is_whitespace() || ",;:-".contains(c))
            )
        }
    }
}

/// A title as said: trailing punctuation off, the first letter kept as it
/// was written.
pub(super) fn tidy(s: &str) -> String {
    s.trim()
        .trim_end_matches(|c: char| matches!(c, '.' | '!' | ',' | ';' | ':') || c.is_whitespace())
        .trim()
        .to_string()
}
