//! Snippets: the piece of an archive's body a hit shows, cut around the
//! first word matching a query term.
//!
//! Snippets are cut in Rust from the `body` column, not by FTS5's
//! `snippet()`, which tokenizes the whole body (about 0.35 ms per hit on a
//! 20 KB archive). `make_snippet` looks for the first word of the body
//! matching any query term (jumping between bytes that can start one) and
//! stops there; the snippet is about `SNIPPET_CHARS` (200) characters of
//! text around it, at most `SNIPPET_LEAD` (60) of them before the match,
//! cut at word boundaries, whitespace collapsed, every matching word in `[`
//! `]` and `…` where text was cut. Matching approximates the index's
//! tokenizer loosely (see the `stem` module): words are runs of letters and
//! digits, compared folded, after Porter's first step; a term whose stem has
//! at least `LOOSE_PREFIX_MIN` (5) characters also marks longer words
//! starting with it (`research` marks `researchers`), and a `word*` term
//! marks every word starting with `word`. A hit whose only match is in its
//! title (or that the approximation misses) gets the start of its body.

use std::borrow::Cow;

use super::query::query_words;
use super::stem::{fold_char, fold_into, stem};

/// Characters of archive text in a snippet (marks and `…` not counted).
const SNIPPET_CHARS: usize = 200;
/// Characters of context kept before the first match, at most.
const SNIPPET_LEAD: usize = 60;
/// Stems at least this long (in characters) also mark longer words that
/// start with them.
const LOOSE_PREFIX_MIN: usize = 5;

/// The query's terms as the snippet builder compares them: folded (see
/// `fold_into`) and stemmed.
pub(crate) struct SnippetTerms {
    terms: Vec<SnippetTerm>,
    /// Bytes a matching word can start with: the terms' first letters in
    /// both cases and every UTF-8 lead byte (`É` folds to `e`).
    starts: [bool; 256],
}

struct SnippetTerm {
    /// Folded; for a prefix term, the prefix itself, else Porter step 1.
    key: String,
    /// `word*`: every word starting with `key` matches.
    prefix: bool,
    /// The stem is long enough to mark longer words starting with it too.
    loose: bool,
    /// The first character of `key` (a cheap filter before folding a word).
    first: char,
}

impl SnippetTerms {
    pub(crate) fn new(query: &str) -> Self {
        let mut terms: Vec<SnippetTerm> = Vec::new();
        let mut folded = String::new();
        for (word, prefix) in query_words(query) {
            // A quoted word is a phrase of the tokens in it; `*` applies to
            // the last one.
            let tokens: Vec<&str> = word
                .split(|c: char| !c.is_alphanumeric())
                .filter(|t| !t.is_empty())
                .collect();
            for (i, token) in tokens.iter().enumerate() {
                let prefix = prefix && i + 1 == tokens.len();
                fold_into(token, &mut folded);
                let key = if prefix {
                    folded.clone()
                } else {
                    stem(&folded).into_owned()
                };
                let Some(first) = key.chars().next() else {
                    continue;
                };
                if terms.iter().any(|t| t.key == key && t.prefix == prefix) {
                    continue;
                }
                let loose = !prefix && key.chars().count() >= LOOSE_PREFIX_MIN;
                terms.push(SnippetTerm {
                    key,
                    prefix,
                    loose,
                    first,
                });
            }
        }
        let mut starts = [false; 256];
        for t in &terms {
            if t.first.is_ascii() {
                starts[t.first.to_ascii_lowercase() as usize] = true;
                starts[t.first.to_ascii_uppercase() as usize] = true;
            }
        }
        starts[0xc0..].fill(!terms.is_empty());
        SnippetTerms { terms, starts }
    }

    /// The byte range of the first word in `text` matching a term. Jumps
    /// from one byte in `starts` to the next rather than walking every
    /// word: 20 KB without a match take about 30 µs.
    fn first_match(&self, text: &str, buf: &mut String) -> Option<(usize, usize)> {
        let bytes = text.as_bytes();
        let mut i = 0;
        while let Some(offset) = bytes[i..].iter().position(|&b| self.starts[b as usize]) {
            // A `starts` byte is ASCII or a lead byte: a character boundary.
            let start = i + offset;
            let end = word_end(text, start);
            if end == start {
                i = start + 1;
                continue;
            }
            let word_start = text[..start]
                .chars()
                .next_back()
                .is_none_or(|c| !c.is_alphanumeric());
            if word_start && self.matches(&text[start..end], buf) {
                return Some((start, end));
            }
            i = end;
        }
        None
    }

    /// Whether `word` (one run of alphanumerics) matches a term; `buf` is
    /// scratch space.
    fn matches(&self, word: &str, buf: &mut String) -> bool {
        let Some(c) = word.chars().next() else {
            return false;
        };
        let first = fold_char(c);
        if !self.terms.iter().any(|t| t.first == first) {
            return false;
        }
        fold_into(word, buf);
        let mut stemmed: Option<Cow<'_, str>> = None;
        self.terms.iter().any(|t| {
            if t.first != first {
                return false;
            }
            if buf.starts_with(&t.key) && (t.prefix || t.loose) {
                return true;
            }
            !t.prefix && &**stemmed.get_or_insert_with(|| stem(buf)) == t.key.as_str()
        })
    }
}

/// Byte ranges of the words (runs of alphanumeric characters) in `text`.
fn words(text: &str) -> impl Iterator<Item = (usize, usize)> + '_ {
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < text.len() {
            let c = char_at(text, i);
            if c.is_alphanumeric() {
                let start = i;
                i = word_end(text, start);
                return Some((start, i));
            }
            i += c.len_utf8();
        }
        None
    })
}

/// The character starting at byte `i` (a character boundary).
fn char_at(text: &str, i: usize) -> char {
    let b = text.as_bytes()[i];
    if b.is_ascii() {
        b as char
    } else {
        text[i..]
            .chars()
            .next()
            .unwrap_or(char::REPLACEMENT_CHARACTER)
    }
}

/// The end of the run of alphanumeric characters starting at byte `from`.
fn word_end(text: &str, from: usize) -> usize {
    let bytes = text.as_bytes();
    let mut i = from;
    while i < bytes.len() {
        if bytes[i].is_ascii() {
            if !bytes[i].is_ascii_alphanumeric() {
                break;
            }
            i += 1;
        } else {
            let c = char_at(text, i);
            if !c.is_alphanumeric() {
                break;
            }
            i += c.len_utf8();
        }
    }
    i
}

/// A snippet of `body` around the first word matching `terms` (or from the
/// start of the body when none does); see the module doc.
pub(crate) fn make_snippet(body: &str, terms: &SnippetTerms) -> String {
    cut(body, terms, SNIPPET_CHARS, SNIPPET_LEAD, true)
}

/// About `chars` characters of `body` around its first match (a quarter
/// of them before it), cut and collapsed as [`make_snippet`] does, without
/// marks: what per-prompt injection quotes of a long message.
pub(crate) fn excerpt(body: &str, terms: &SnippetTerms, chars: usize) -> String {
    cut(body, terms, chars.max(8), chars.max(8) / 4, false)
}

fn cut(body: &str, terms: &SnippetTerms, chars: usize, lead: usize, mark: bool) -> String {
    let mut buf = String::new();
    let first = terms.first_match(body, &mut buf);

    // Start: up to `lead` characters before the match, moved forward
    // to the start of a word.
    let start = match first {
        None => 0,
        Some((m, _)) => {
            let lead = body[..m]
                .char_indices()
                .rev()
                .nth(lead - 1)
                .map_or(0, |(i, _)| i);
            if lead == 0 || body[..lead].ends_with(char::is_whitespace) {
                lead
            } else {
                body[lead..m].find(char::is_whitespace).map_or(m, |ws| {
                    let after = lead + ws;
                    after
                        + body[after..m]
                            .find(|c: char| !c.is_whitespace())
                            .unwrap_or(m - after)
                })
            }
        }
    };
    let start = start
        + body[start..]
            .find(|c: char| !c.is_whitespace())
            .unwrap_or(body.len() - start);

    // End: `chars` characters on, moved back to the end of a word
    // when that cuts one (unless the only word there is the match itself).
    let mut end = body[start..]
        .char_indices()
        .nth(chars)
        .map_or(body.len(), |(i, _)| start + i);
    if end < body.len() {
        let cut_word = !body[end..].starts_with(char::is_whitespace)
            && !body[..end].ends_with(char::is_whitespace);
        if cut_word
            && let Some(ws) = body[start..end].rfind(char::is_whitespace)
            && start + ws >= first.map_or(start, |(_, e)| e)
        {
            end = start + ws;
        }
    }
    let text = body[start..end].trim_end();
    let more = !body[start + text.len()..].trim().is_empty();

    let mut out = String::with_capacity(text.len() + 16);
    if !body[..start].trim().is_empty() {
        out.push('…');
    }
    let mut at = 0;
    for (s, e) in words(text) {
        push_collapsed(&mut out, &text[at..s]);
        if mark && terms.matches(&text[s..e], &mut buf) {
            out.push('[');
            out.push_str(&text[s..e]);
            out.push(']');
        } else {
            out.push_str(&text[s..e]);
        }
        at = e;
    }
    push_collapsed(&mut out, &text[at..]);
    if more {
        out.push('…');
    }
    out
}

/// Appends `text` with each run of whitespace as one space.
fn push_collapsed(out: &mut String, text: &str) {
    let mut space = false;
    for c in text.chars() {
        if c.is_whitespace() {
            space = true;
        } else {
            if space {
                out.push(' ');
                space = false;
            }
            out.push(c);
        }
    }
    if space {
        out.push(' ');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snippet(body: &str, query: &str) -> String {
        make_snippet(body, &SnippetTerms::new(query))
    }

    /// The snippet's text without marks and ellipses.
    fn plain(s: &str) -> String {
        s.replace(['[', ']'], "").trim_matches('…').to_string()
    }

    #[test]
    fn snippet_marks_every_match_in_the_window() {
        let s = snippet(
            "We saw a Wombat. Then two wombats, and the wombat's den.",
            "wombat",
        );
        assert_eq!(
            s,
            "We saw a [Wombat]. Then two [wombats], and the [wombat]'s den."
        );
        // All query terms are marked; case does not matter.
        let s = snippet("the tax office and the research team", "RESEARCH Tax");
        assert_eq!(s, "the [tax] office and the [research] team");
    }

    #[test]
    fn snippet_follows_stemming_loosely() {
        let s = snippet("researching what researchers research", "researched");
        assert_eq!(s, "[researching] what [researchers] [research]");
        let s = snippet("she hoped for ponies; hope and pony", "hoping pony");
        assert_eq!(s, "she [hoped] for [ponies]; [hope] and [pony]");
        // Short words match only their own forms: "the" is not "then".
        let s = snippet("then there was the theme", "the");
        assert_eq!(s, "then there was [the] theme");
    }

    #[test]
    fn snippet_prefix_terms_and_phrases() {
        assert_eq!(
            snippet("a wombat in a womb", "womb*"),
            "a [wombat] in a [womb]"
        );
        assert_eq!(
            snippet("a wombat in a womb", "womb"),
            "a wombat in a [womb]"
        );
        // A word with punctuation is a phrase of its tokens; `*` is on the last.
        assert_eq!(
            snippet("e mail and e-mailing", "e-mail*"),
            "[e] [mail] and [e]-[mailing]"
        );
    }

    #[test]
    fn snippet_ignores_case_and_diacritics() {
        assert_eq!(snippet("Un CAFÉ crème", "cafe creme"), "Un [CAFÉ] [crème]");
        assert_eq!(snippet("un cafe creme", "Café"), "un [cafe] creme");
        assert_eq!(snippet("ŁÓDŹ and Łódź", "lodz"), "[ŁÓDŹ] and [Łódź]");
    }

    #[test]
    fn snippet_is_a_window_around_the_first_match() {
        let before = "alpha ".repeat(100);
        let after = " omega".repeat(100);
        let body = format!("# Title\n\n{before}wombat{after}");
        let s = snippet(&body, "wombat");
        assert!(s.starts_with('…') && s.ends_with('…'), "{s}");
        assert!(s.contains(" alpha [wombat] omega "), "{s}");
        let text = plain(&s);
        assert!(text.chars().count() <= SNIPPET_CHARS, "{s}");
        // Cut at word boundaries: whole words only.
        assert!(
            text.split(' ')
                .all(|w| ["alpha", "omega", "wombat"].contains(&w)),
            "{s}"
        );
        // Lead context is bounded.
        let lead = text.find("wombat").unwrap();
        assert!(lead <= SNIPPET_LEAD && lead > SNIPPET_LEAD / 2, "{s}");
    }

    #[test]
    fn snippet_collapses_whitespace() {
        let s = snippet(
            "**User**: hello\n\n**G2**:\tthe\r\nwombat   sleeps",
            "wombat",
        );
        assert_eq!(s, "**User**: hello **G2**: the [wombat] sleeps");
    }

    #[test]
    fn snippet_finds_matches_beyond_the_first_64_kb() {
        let filler = "lorem ipsum dolor sit amet ".repeat(4000); // 108 KB
        assert!(filler.len() > 64 * 1024);
        let body = format!("{filler}the wombat appears late. {filler}");
        let s = snippet(&body, "wombat");
        assert!(s.starts_with('…') && s.ends_with('…'), "{s}");
        assert!(s.contains("the [wombat] appears late."), "{s}");
    }

    #[test]
    fn snippet_without_a_match_is_the_start_of_the_body() {
        let body = format!(
            "\n# Budget\n\nArchived: Jan 1, 2025\n\n---\n\n{}",
            "words here ".repeat(100)
        );
        let s = snippet(&body, "budget2 nothing");
        assert!(
            s.starts_with("# Budget Archived: Jan 1, 2025 --- words here"),
            "{s}"
        );
        assert!(s.ends_with('…') && !s.contains('['), "{s}");
        assert_eq!(snippet("short body", "absent"), "short body");
        assert_eq!(snippet("", "absent"), "");
        assert_eq!(snippet("   \n ", "absent"), "");
    }

    #[test]
    fn snippet_never_splits_a_character() {
        // 2-, 3- and 4-byte characters, with and without spaces, the match
        // at every offset near the window's edges.
        for filler in ["é", "日本", "😀", "é 日 😀 ", "a\u{301}"] {
            for n in [0, 1, 59, 60, 61, 199, 200, 201, 250] {
                let before = filler.repeat(n);
                for body in [
                    format!("{before}wombat{before}"),
                    format!("{before} wombat {before}"),
                    format!("{before}{before}"),
                ] {
                    let s = snippet(&body, "wombat");
                    assert!(
                        plain(&s).split(' ').all(|w| body.contains(w)),
                        "{filler:?} {n}: {s}"
                    );
                    if body.contains(" wombat ") {
                        assert!(s.contains("[wombat]"), "{filler:?} {n}: {s}");
                    }
                    assert!(
                        plain(&s).chars().count() <= SNIPPET_CHARS,
                        "{filler:?} {n}: {s}"
                    );
                }
            }
        }
        // A match glued to multibyte letters is one word with them.
        assert_eq!(snippet("日本wombat", "wombat"), "日本wombat");
        // One enormous word: cut after SNIPPET_CHARS characters.
        let s = snippet(&"ü".repeat(1000), "x");
        assert_eq!(s, format!("{}…", "ü".repeat(SNIPPET_CHARS)));
    }

    #[test]
    fn first_match_agrees_with_a_word_by_word_scan() {
        let bodies = [
            "Wombat at the start",
            "the end is a wombat",
            "a xwombat, wombatx and Éclair éclair eclairs",
            "日本 wombat Ωmega ωmega œuvre Œuvre — wombat's",
            "no match here at all",
            "",
        ];
        let queries = [
            "wombat", "eclair", "ωmega", "œuvre", "wom*", "the", "at", "日本", "x", "ÉCLAIRS",
        ];
        for body in bodies {
            for query in queries {
                let terms = SnippetTerms::new(query);
                let mut buf = String::new();
                let naive = words(body).find(|&(s, e)| terms.matches(&body[s..e], &mut buf));
                assert_eq!(
                    terms.first_match(body, &mut buf),
                    naive,
                    "{query:?} in {body:?}"
                );
            }
        }
    }
}
