//! Full-text search over conversation archives (FTS5, BM25 ranking).
//!
//! A user's query is never handed to FTS5 as syntax: each word becomes a
//! quoted term (all must match), and a trailing `*` on a word makes it a
//! prefix. So `tax research` finds archives with both words (and, through
//! the Porter stemmer, "researching"), and no input is a syntax error.
//! Titles weigh more than bodies.
//!
//! # Query shape
//!
//! One statement in two phases. The inner query ranks: it scores every
//! match with `bm25(archives_fts, 4.0, 1.0)` (title 4x body) and keeps the
//! best `limit` as (rowid, score) pairs only, so SQLite's sorter holds no
//! text. The outer query joins those few rows to `conversation_archives`
//! and reads their `body` back from `archives_fts` by rowid (no second
//! MATCH) for the snippet.
//!
//! With a group, the inner query joins each match to its archive row by
//! primary key and drops other groups' matches before bm25() runs, so a
//! small group's search costs little however large other groups are. The
//! joins are `CROSS JOIN`s to fix that order: FTS5 outside, lookups by key
//! inside. (Left to itself the planner may offer FTS5 the group's rowids as
//! `rowid IN (…)` constraints and run the MATCH once per archive of the
//! group: hundreds of times slower on the search bench.) Filtering by
//! `+rowid IN (SELECT id … WHERE group_folder = ?)` instead costs a list of
//! every archive of the group per query: better for a common word in a
//! small group, worse for a rare word in a large one.
//!
//! Not used: FTS5's rank-ordered path (`rank MATCH 'bm25(4.0, 1.0)' ORDER BY
//! rank`). It sorts every match in a nested statement and was 2-2.5x
//! slower than the above on the bench (the same for "the"), and a group
//! filter could only be applied after it has ranked every group's matches.
//!
//! Ranking reads every match's position list (bm25 counts every occurrence
//! of every term), so latency grows with the number of matching archives
//! and with how often the terms occur in them; everything after ranking is
//! paid per returned hit. Ranking only the newest N matches of very common
//! terms would bound that (on the bench about 3x faster for a term in 90%
//! of the archives, 5x for "the") but would drop older and better matches,
//! such as an old archive whose title is the word, so it is not done.
//!
//! # Snippets
//!
//! Snippets are cut in Rust from the `body` column, not by FTS5's
//! `snippet()`, which tokenizes the whole body (about 0.35 ms per hit on a
//! 20 KB archive). `make_snippet` looks for the first word of the body
//! matching any query term (jumping between bytes that can start one) and
//! stops there; the snippet is about `SNIPPET_CHARS` (200) characters of
//! text around it, at most `SNIPPET_LEAD` (60) of them before the match,
//! cut at word boundaries, whitespace collapsed, every matching word in `[`
//! `]` and `…` where text was cut. Matching approximates the index's tokenizer (`porter unicode61
//! remove_diacritics 2`) loosely: words are runs of letters and digits,
//! compared lower-cased with common Latin diacritics removed, after Porter's
//! first step (plurals, `-ed`, `-ing`, `-y`); a term whose stem has at least
//! `LOOSE_PREFIX_MIN` (5) characters also marks longer words starting with it
//! (`research` marks `researchers`), and a `word*` term marks every word
//! starting with `word`. A hit whose only match is in its title (or that the
//! approximation misses) gets the start of its body.

use std::borrow::Cow;

use rusqlite::types::ValueRef;
use rusqlite::{Connection, params};
use serde::{Deserialize, Serialize};

use g2_core::validate;

use crate::{Error, Result};

/// Most hits one search returns.
pub const MAX_LIMIT: usize = 1000;

/// Characters of archive text in a snippet (marks and `…` not counted).
const SNIPPET_CHARS: usize = 200;
/// Characters of context kept before the first match, at most.
const SNIPPET_LEAD: usize = 60;
/// Stems at least this long (in characters) also mark longer words that
/// start with them.
const LOOSE_PREFIX_MIN: usize = 5;

/// One hit. This is also the stable `--json` shape of `g2 search`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hit {
    pub archive_id: i64,
    pub group: String,
    /// The archive's title.
    pub name: String,
    /// The markdown file, relative to the home directory.
    pub path: String,
    pub session_id: Option<String>,
    /// When the archive was written (RFC 3339, UTC).
    pub created_at: String,
    /// Matching text, matches in `[` `]`.
    pub snippet: String,
    /// BM25 relevance; higher is better.
    pub score: f64,
}

/// Turns free text into an FTS5 query, or `None` when it has no words.
pub fn fts_query(input: &str) -> Option<String> {
    let terms: Vec<String> = query_words(input)
        .map(|(word, prefix)| {
            let quoted = format!("\"{}\"", word.replace('"', "\"\""));
            if prefix { format!("{quoted}*") } else { quoted }
        })
        .collect();
    (!terms.is_empty()).then(|| terms.join(" "))
}

/// The words of a query that can match something, each with whether it is
/// a prefix (`word*`).
fn query_words(input: &str) -> impl Iterator<Item = (&str, bool)> {
    input.split_whitespace().filter_map(|word| {
        let (word, prefix) = match word.strip_suffix('*') {
            Some(w) => (w, true),
            None => (word, false),
        };
        // Words made only of punctuation match nothing in unicode61.
        word.chars()
            .any(char::is_alphanumeric)
            .then_some((word, prefix))
    })
}

// The two-phase queries (see the module doc). bm25() is "lower is
// better"; weights: name 4, body 1.
const SEARCH_ALL: &str =
    "SELECT a.id, a.group_folder, a.name, a.path, a.session_id, a.created_at, f.body, s.score
 FROM (SELECT rowid AS id, bm25(archives_fts, 4.0, 1.0) AS score
       FROM archives_fts
       WHERE archives_fts MATCH ?1
       ORDER BY score
       LIMIT ?2) AS s
 CROSS JOIN conversation_archives a ON a.id = s.id
 CROSS JOIN archives_fts f ON f.rowid = s.id
 ORDER BY s.score";
const SEARCH_GROUP: &str =
    "SELECT a.id, a.group_folder, a.name, a.path, a.session_id, a.created_at, f.body, s.score
 FROM (SELECT archives_fts.rowid AS id, bm25(archives_fts, 4.0, 1.0) AS score
       FROM archives_fts
       CROSS JOIN conversation_archives g ON g.id = archives_fts.rowid
       WHERE archives_fts MATCH ?1 AND g.group_folder = ?3
       ORDER BY score
       LIMIT ?2) AS s
 CROSS JOIN conversation_archives a ON a.id = s.id
 CROSS JOIN archives_fts f ON f.rowid = s.id
 ORDER BY s.score";

/// Searches archives, best first; `group` limits to one group.
pub fn search(
    conn: &Connection,
    query: &str,
    group: Option<&str>,
    limit: usize,
) -> Result<Vec<Hit>> {
    if let Some(g) = group {
        validate::any_folder(g)?;
    }
    let fts = fts_query(query).ok_or_else(|| {
        Error::Invalid(format!("search query {query:?} has no words to search for"))
    })?;
    let limit = limit.clamp(1, MAX_LIMIT) as i64;
    let terms = SnippetTerms::new(query);
    let mut stmt;
    let mut rows = match group {
        Some(g) => {
            stmt = conn.prepare_cached(SEARCH_GROUP)?;
            stmt.query(params![fts, limit, g])?
        }
        None => {
            stmt = conn.prepare_cached(SEARCH_ALL)?;
            stmt.query(params![fts, limit])?
        }
    };
    let mut hits = Vec::new();
    while let Some(r) = rows.next()? {
        // The body is borrowed from SQLite, not copied; only the snippet is.
        let snippet = match r.get_ref(6)? {
            ValueRef::Text(b) => make_snippet(&String::from_utf8_lossy(b), &terms),
            _ => String::new(),
        };
        hits.push(Hit {
            archive_id: r.get(0)?,
            group: r.get(1)?,
            name: r.get(2)?,
            path: r.get(3)?,
            session_id: r.get(4)?,
            created_at: r.get(5)?,
            snippet,
            score: -r.get::<_, f64>(7)?,
        });
    }
    Ok(hits)
}

/// The query's terms as the snippet builder compares them: folded (see
/// `fold_into`) and stemmed.
struct SnippetTerms {
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
    fn new(query: &str) -> Self {
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
fn make_snippet(body: &str, terms: &SnippetTerms) -> String {
    let mut buf = String::new();
    let first = terms.first_match(body, &mut buf);

    // Start: up to SNIPPET_LEAD characters before the match, moved forward
    // to the start of a word.
    let start = match first {
        None => 0,
        Some((m, _)) => {
            let lead = body[..m]
                .char_indices()
                .rev()
                .nth(SNIPPET_LEAD - 1)
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

    // End: SNIPPET_CHARS characters on, moved back to the end of a word
    // when that cuts one (unless the only word there is the match itself).
    let mut end = body[start..]
        .char_indices()
        .nth(SNIPPET_CHARS)
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
        if terms.matches(&text[s..e], &mut buf) {
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

/// Latin-1 lower-case letters U+00E0..=U+00FF without their diacritics.
const LATIN1_BASE: &str = "aaaaaaæceeeeiiiiðnooooo÷ouuuuyþy";
/// Latin Extended-A U+0100..=U+017F without diacritics (`.`: kept as is,
/// such as `ĳ`, `ŋ`, `œ`).
const LATIN_EXT_A_BASE: &str = concat!(
    "aaaaaa",
    "cccccccc",
    "dddd",
    "eeeeeeeeee",
    "gggggggg",
    "hhhh",
    "iiiiiiiiii",
    "..",
    "jj",
    "kkk",
    "llllllllll",
    "nnnnnnn",
    "..",
    "oooooo",
    "..",
    "rrrrrr",
    "ssssssss",
    "tttttt",
    "uuuuuuuuuuuu",
    "ww",
    "yyy",
    "zzzzzz",
    "s",
);

/// Lower case, with the diacritics of common Latin letters removed.
fn fold_char(c: char) -> char {
    let c = if c.is_ascii() {
        c.to_ascii_lowercase()
    } else {
        c.to_lowercase().next().unwrap_or(c)
    };
    match c as u32 {
        0xe0..=0xff => LATIN1_BASE.chars().nth(c as usize - 0xe0).unwrap_or(c),
        0x100..=0x17f => match LATIN_EXT_A_BASE.as_bytes()[c as usize - 0x100] {
            b'.' => c,
            b => b as char,
        },
        _ => c,
    }
}

/// `word` folded character by character into `out` (cleared first).
fn fold_into(word: &str, out: &mut String) {
    out.clear();
    out.extend(word.chars().map(fold_char));
}

/// Porter's step 1 (1a plurals, 1b `-ed` / `-ing`, 1c `-y`) on a folded
/// word; words with non-ASCII letters are left alone.
fn stem(w: &str) -> Cow<'_, str> {
    if w.len() < 3 || !w.bytes().all(|b| b.is_ascii_lowercase()) {
        return Cow::Borrowed(w);
    }
    let mut s = w.to_string();
    // 1a
    if s.ends_with("sses") || s.ends_with("ies") {
        s.truncate(s.len() - 2);
    } else if s.ends_with('s') && !s.ends_with("ss") {
        s.pop();
    }
    // 1b
    if s.ends_with("eed") {
        if measure(&s[..s.len() - 3]) > 0 {
            s.pop();
        }
    } else if let Some(base) = s.strip_suffix("ed").or_else(|| s.strip_suffix("ing"))
        && has_vowel(base)
    {
        s.truncate(base.len());
        let b = s.as_bytes();
        let n = b.len();
        if s.ends_with("at") || s.ends_with("bl") || s.ends_with("iz") {
            s.push('e');
        } else if n >= 2
            && b[n - 1] == b[n - 2]
            && consonant(b, n - 1)
            && !matches!(b[n - 1], b'l' | b's' | b'z')
        {
            s.pop();
        } else if measure(&s) == 1 && cvc(s.as_bytes()) {
            s.push('e');
        }
    }
    // 1c
    if s.len() > 1 && s.ends_with('y') && has_vowel(&s[..s.len() - 1]) {
        s.pop();
        s.push('i');
    }
    Cow::Owned(s)
}

/// Porter's consonant test for `b[i]` (`y` after a consonant is a vowel).
fn consonant(b: &[u8], i: usize) -> bool {
    match b[i] {
        b'a' | b'e' | b'i' | b'o' | b'u' => false,
        b'y' => i == 0 || !consonant(b, i - 1),
        _ => true,
    }
}

fn has_vowel(s: &str) -> bool {
    (0..s.len()).any(|i| !consonant(s.as_bytes(), i))
}

/// Porter's m: the number of vowel-consonant sequences.
fn measure(s: &str) -> usize {
    let b = s.as_bytes();
    let mut m = 0;
    let mut vowel = false;
    for i in 0..b.len() {
        let c = consonant(b, i);
        if c && vowel {
            m += 1;
        }
        vowel = !c;
    }
    m
}

/// Ends consonant-vowel-consonant, the last not `w`, `x` or `y`.
fn cvc(b: &[u8]) -> bool {
    let n = b.len();
    n >= 3
        && consonant(b, n - 1)
        && !consonant(b, n - 2)
        && consonant(b, n - 3)
        && !matches!(b[n - 1], b'w' | b'x' | b'y')
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
    fn queries_are_quoted() {
        assert_eq!(fts_query("tax research").unwrap(), r#""tax" "research""#);
        assert_eq!(fts_query("resea*").unwrap(), r#""resea"*"#);
        assert_eq!(
            fts_query(r#"a"b OR NEAR("#).unwrap(),
            r#""a""b" "OR" "NEAR(""#
        );
        assert_eq!(fts_query("  -- ** \"\" "), None);
        assert_eq!(fts_query(""), None);
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

    #[test]
    fn porter_step_one() {
        for (word, stemmed) in [
            ("caresses", "caress"),
            ("ponies", "poni"),
            ("caress", "caress"),
            ("cats", "cat"),
            ("feed", "feed"),
            ("agreed", "agree"),
            ("plastered", "plaster"),
            ("bled", "bled"),
            ("motoring", "motor"),
            ("sing", "sing"),
            ("conflated", "conflate"),
            ("troubled", "trouble"),
            ("sized", "size"),
            ("hopping", "hop"),
            ("falling", "fall"),
            ("hissing", "hiss"),
            ("failing", "fail"),
            ("filing", "file"),
            ("happy", "happi"),
            ("sky", "sky"),
            ("is", "is"),
            ("naïve", "naïve"),
        ] {
            assert_eq!(stem(word), stemmed, "{word}");
        }
    }

    #[test]
    fn diacritic_tables_line_up() {
        assert_eq!(LATIN1_BASE.chars().count(), 0x100 - 0xe0);
        assert_eq!(LATIN_EXT_A_BASE.len(), 0x180 - 0x100);
        for (c, base) in [
            ('à', 'a'),
            ('ç', 'c'),
            ('ñ', 'n'),
            ('ø', 'o'),
            ('ÿ', 'y'),
            ('Ā', 'a'),
            ('č', 'c'),
        ] {
            assert_eq!(fold_char(c), base, "{c}");
        }
        for (c, base) in [
            ('ď', 'd'),
            ('ě', 'e'),
            ('ğ', 'g'),
            ('ı', 'i'),
            ('ł', 'l'),
            ('ő', 'o'),
            ('ř', 'r'),
        ] {
            assert_eq!(fold_char(c), base, "{c}");
        }
        for (c, base) in [
            ('š', 's'),
            ('ţ', 't'),
            ('ů', 'u'),
            ('ŵ', 'w'),
            ('ŷ', 'y'),
            ('ž', 'z'),
            ('ſ', 's'),
        ] {
            assert_eq!(fold_char(c), base, "{c}");
        }
        assert_eq!(fold_char('œ'), 'œ');
        assert_eq!(fold_char('Ж'), 'ж');
    }

    /// A store with archives in two groups, for the query itself.
    fn store_with(archives: &[(&str, &str, &str)]) -> (tempfile::TempDir, crate::store::Store) {
        let dir = tempfile::tempdir().unwrap();
        let store =
            crate::store::Store::open(&dir.path().join("g2.db"), std::time::Duration::from_secs(5))
                .unwrap();
        let rows: Vec<(String, String, String)> = archives
            .iter()
            .map(|(g, n, b)| (g.to_string(), n.to_string(), b.to_string()))
            .collect();
        store
            .write_blocking(move |tx| {
                for (i, (group, name, body)) in rows.iter().enumerate() {
                    tx.execute(
                        "INSERT INTO conversation_archives (group_folder, session_id, name, path, trigger, created_at)
                         VALUES (?1, NULL, ?2, ?3, 'manual', '2025-01-01T00:00:00.000Z')",
                        params![group, name, format!("groups/{group}/conversations/{i}.md")],
                    )?;
                    tx.execute(
                        "INSERT INTO archives_fts (rowid, name, body) VALUES (?1, ?2, ?3)",
                        params![tx.last_insert_rowid(), name, body],
                    )?;
                }
                Ok(())
            })
            .unwrap();
        (dir, store)
    }

    #[test]
    fn search_ranks_filters_and_limits() {
        let filler = "other things ".repeat(50);
        let (_dir, store) = store_with(&[
            ("main", "Once", &format!("a wombat once. {filler}")),
            ("main", "Often", "wombat wombat wombats, the wombat"),
            ("dev", "Wombat notes", &format!("notes. {filler}")),
            ("dev", "Elsewhere", "a wombat here"),
            ("main", "Unrelated", "nothing"),
            ("main", "Unrelated 2", "nothing else"),
            ("dev", "Unrelated 3", "nothing more"),
            ("main", "Unrelated 4", "nothing at all"),
            ("main", "Unrelated 5", "still nothing"),
        ]);
        store
            .read_blocking(|c| {
                let names = |hits: &[Hit]| hits.iter().map(|h| h.name.clone()).collect::<Vec<_>>();
                let all = search(c, "wombat", None, 10)?;
                assert_eq!(all.len(), 4, "{:?}", names(&all));
                assert!(all.windows(2).all(|w| w[0].score >= w[1].score));
                assert!(all.iter().all(|h| h.score > 0.0));
                let often = all.iter().find(|h| h.name == "Often").unwrap();
                assert_eq!(often.snippet, "[wombat] [wombat] [wombats], the [wombat]");
                // A title-only match gets the start of the body.
                let notes = all.iter().find(|h| h.name == "Wombat notes").unwrap();
                assert!(
                    notes.snippet.starts_with("notes. other things"),
                    "{}",
                    notes.snippet
                );

                let mut dev = names(&search(c, "wombat", Some("dev"), 10)?);
                dev.sort();
                assert_eq!(dev, ["Elsewhere", "Wombat notes"]);
                let main = search(c, "wombat", Some("main"), 1)?;
                assert_eq!(names(&main), ["Often"]);
                assert!(search(c, "wombat", Some("nobody"), 10)?.is_empty());
                assert_eq!(search(c, "wombat", None, 2)?.len(), 2);
                // The filtered ranking is the unfiltered one, restricted.
                let main_all = search(c, "wombat", Some("main"), 10)?;
                let expected: Vec<_> = all.iter().filter(|h| h.group == "main").cloned().collect();
                assert_eq!(main_all, expected);
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn query_plans_keep_fts5_outside() {
        // Ranking scans FTS5 with MATCH (no per-rowid MATCH, no driving
        // from the group index), and the body is read back by rowid.
        let (_dir, store) = store_with(&[("main", "A", "wombat")]);
        store
            .read_blocking(|c| {
                use rusqlite::types::Value;
                for (sql, args) in [(SEARCH_ALL, 2), (SEARCH_GROUP, 3)] {
                    let mut stmt = c.prepare(&format!("EXPLAIN QUERY PLAN {sql}"))?;
                    let vals = [
                        Value::Text("\"wombat\"".into()),
                        Value::Integer(10),
                        Value::Text("main".into()),
                    ];
                    let plan: Vec<String> = stmt
                        .query_map(rusqlite::params_from_iter(&vals[..args]), |r| {
                            r.get::<_, String>(3)
                        })?
                        .collect::<rusqlite::Result<_>>()?;
                    let idx = |table: &str| {
                        plan.iter()
                            .find_map(|l| {
                                l.strip_prefix(&format!("SCAN {table} VIRTUAL TABLE INDEX "))
                            })
                            .unwrap_or_else(|| panic!("no {table} scan: {plan:?}"))
                    };
                    let rank = idx("archives_fts");
                    assert!(rank.contains('M') && !rank.contains('='), "{plan:?}");
                    assert!(idx("f").ends_with(":="), "{plan:?}");
                    assert!(
                        !plan
                            .iter()
                            .any(|l| l.contains("conversation_archives_group")),
                        "{plan:?}"
                    );
                    let scans_archives = |l: &String| {
                        matches!(
                            l.strip_prefix("SCAN ").and_then(|r| r.split(' ').next()),
                            Some("a" | "g")
                        )
                    };
                    assert!(!plan.iter().any(scans_archives), "{plan:?}");
                }
                Ok(())
            })
            .unwrap();
    }
}
