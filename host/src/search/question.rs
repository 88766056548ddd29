//! A question as recall reads it: its content words (stop words out), the
//! FTS5 query that finds anything holding any of them, the word pairs an
//! exact phrase would keep, and the calendar days it names.
//!
//! People ask "where is the boat moored?" or "on May 2nd I went to the
//! museum, what did I see?", not keyword lists: no word is required, so
//! the index is asked for passages holding *any* content word (an FTS5
//! `OR` of quoted terms, stemmed by the index's Porter tokenizer) and
//! BM25 weighs rare words over common ones. Stop words ("what", "did",
//! "the") are left out of the query: they match everything and say
//! nothing. A question made only of stop words falls back to all its
//! words, so "who are you" still asks something.
//!
//! Every query path (archive search, recall, the per-prompt hook, the
//! memory and session tools, the viewer, the CLI) reads at most the first
//! [`MAX_QUERY_WORDS`] content words of a query ([`cap`]), so what a
//! query costs is bounded whatever its length; the answer names what was
//! left out.

use std::collections::{BTreeSet, HashSet};

use super::stem::{fold_into, stem};

/// English function words and question words: never searched for.
const STOP_WORDS: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "against",
    "all",
    "am",
    "an",
    "and",
    "any",
    "are",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "could",
    "did",
    "do",
    "does",
    "doing",
    "don",
    "down",
    "during",
    "each",
    "else",
    "ever",
    "few",
    "for",
    "from",
    "further",
    "had",
    "has",
    "have",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "it",
    "its",
    "itself",
    "just",
    "let",
    "me",
    "might",
    "more",
    "most",
    "must",
    "my",
    "myself",
    "no",
    "nor",
    "not",
    "now",
    "of",
    "off",
    "on",
    "once",
    "only",
    "or",
    "other",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "please",
    "same",
    "shall",
    "she",
    "should",
    "so",
    "some",
    "such",
    "than",
    "that",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "to",
    "too",
    "under",
    "until",
    "up",
    "us",
    "very",
    "was",
    "we",
    "were",
    "what",
    "when",
    "where",
    "which",
    "while",
    "who",
    "whom",
    "why",
    "will",
    "with",
    "would",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
    "ll",
    "re",
    "ve",
    "s",
    "t",
    "d",
    "m",
    "also",
    "anything",
    "something",
    "thing",
    "things",
    "tell",
    "know",
    "remember",
    "recall",
    "mentioned",
    "say",
    "said",
    "told",
    "asked",
    "ago",
    "day",
    "days",
    "recently",
    "one",
    "time",
    "earlier",
    "last",
    "previously",
    "kind",
    "type",
    "sort",
];

/// Month names and their numbers, for the days a question names.
pub(crate) const MONTHS: &[(&str, u32)] = &[
    ("january", 1),
    ("jan", 1),
    ("february", 2),
    ("feb", 2),
    ("march", 3),
    ("mar", 3),
    ("april", 4),
    ("apr", 4),
    ("may", 5),
    ("june", 6),
    ("jun", 6),
    ("july", 7),
    ("jul", 7),
    ("august", 8),
    ("aug", 8),
    ("september", 9),
    ("sep", 9),
    ("sept", 9),
    ("october", 10),
    ("oct", 10),
    ("november", 11),
    ("nov", 11),
    ("december", 12),
    ("dec", 12),
];

/// A question, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    /// The content words, folded and stemmed as the snippet builder
    /// compares them, without repeats, in the question's order.
    pub terms: Vec<String>,
    /// The FTS5 query: every content word quoted, joined by `OR`.
    pub fts: String,
    /// Each content word as an FTS5 term (quoted), in `terms`' order.
    pub fts_terms: Vec<String>,
    /// The content words as asked, space-separated (for snippets).
    pub text: String,
    /// Adjacent content words of the question (stemmed): a passage that
    /// holds a pair next to each other holds a piece of the phrase.
    pub pairs: Vec<(String, String)>,
    /// The (month, day)s the question names ("May 2nd", "2 May",
    /// "2023-05-02", "05/02").
    pub days: BTreeSet<(u32, u32)>,
}

/// The words of a text as the index sees them: runs of letters and digits
/// (an apostrophe splits, as in the index), folded.
pub fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut s = String::with_capacity(w.len());
            fold_into(w, &mut s);
            s
        })
}

/// Whether a folded word is a stop word (recall asks this of every word of
/// its candidates: a hash lookup, not a scan of the list).
pub fn is_stop(word: &str) -> bool {
    static SET: std::sync::LazyLock<HashSet<&'static str>> =
        std::sync::LazyLock::new(|| STOP_WORDS.iter().copied().collect());
    SET.contains(word)
}

/// The most content words (not on the stop list) a query is read for.
pub const MAX_QUERY_WORDS: usize = 64;
/// The most words, stop words included, a query is read for.
pub const MAX_QUERY_ALL_WORDS: usize = 4 * MAX_QUERY_WORDS;
/// The most bytes of a query that are read.
pub const MAX_QUERY_BYTES: usize = 4096;

/// A query cut to what is read of it ([`cap`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capped<'a> {
    /// The query up to where reading stopped.
    pub text: &'a str,
    /// Words of the query left out (0 when all of it is read).
    pub ignored: usize,
}

impl Capped<'_> {
    /// What an answer says of a cut query ("the first 64 content words …"),
    /// or None when nothing was left out.
    pub fn note(&self) -> Option<String> {
        (self.ignored > 0).then(|| {
            format!(
                "only the first {MAX_QUERY_WORDS} content words of the query were searched for \
                 (at most {MAX_QUERY_ALL_WORDS} words, {MAX_QUERY_BYTES} bytes); {} words after them were ignored",
                self.ignored
            )
        })
    }
}

/// What is read of a query: up to its [`MAX_QUERY_WORDS`]th content word,
/// within its first [`MAX_QUERY_ALL_WORDS`] words and [`MAX_QUERY_BYTES`]
/// bytes. One pass over the text: the cost of a query that is cut is that
/// of the part read plus a count of the rest.
pub fn cap(query: &str) -> Capped<'_> {
    let mut end = query.len().min(MAX_QUERY_BYTES);
    while !query.is_char_boundary(end) {
        end -= 1;
    }
    let (mut content, mut all) = (0, 0);
    let mut cut: Option<usize> = None;
    let mut ignored = 0;
    let mut folded = String::new();
    for (start, w) in word_spans(query) {
        if cut.is_some() {
            ignored += 1;
            continue;
        }
        folded.clear();
        fold_into(w, &mut folded);
        let stop = is_stop(&folded);
        if start + w.len() > end
            || all == MAX_QUERY_ALL_WORDS
            || (!stop && content == MAX_QUERY_WORDS)
        {
            cut = Some(start);
            ignored += 1;
            continue;
        }
        all += 1;
        content += usize::from(!stop);
    }
    Capped {
        text: cut.map_or(query, |c| &query[..c]),
        ignored,
    }
}

/// The words of a text ([`words`]' runs of letters and digits) with where
/// each starts.
fn word_spans(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        // `split` yields pieces of `text`: where one starts is its offset.
        .map(move |w| (w.as_ptr() as usize - text.as_ptr() as usize, w))
}

/// Reads a question; `None` when it has no word at all. Only what [`cap`]
/// keeps of it is read.
pub fn read(question: &str) -> Option<Question> {
    let all: Vec<String> = words(cap(question).text).collect();
    if all.is_empty() {
        return None;
    }
    let days = days_named(&all);
    let month_or_ordinal = |w: &str| {
        !days.is_empty()
            && (MONTHS.iter().any(|(m, _)| *m == w) || ordinal_day(w).is_some() || is_year(w))
    };
    let mut content: Vec<&str> = all
        .iter()
        .map(String::as_str)
        .filter(|w| !is_stop(w) && !month_or_ordinal(w))
        .collect();
    if content.is_empty() {
        content = all.iter().map(String::as_str).collect();
    }
    let mut terms: Vec<String> = Vec::new();
    let mut fts: Vec<String> = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    for w in &content {
        let s = stem(w).into_owned();
        if seen.insert(s.clone()) {
            terms.push(s);
            fts.push(format!("\"{}\"", w.replace('"', "\"\"")));
        }
    }
    let pairs = content
        .windows(2)
        .map(|p| (stem(p[0]).into_owned(), stem(p[1]).into_owned()))
        .filter(|(a, b)| a != b)
        .collect();
    Some(Question {
        terms,
        fts: fts.join(" OR "),
        fts_terms: fts.clone(),
        text: content.join(" "),
        pairs,
        days,
    })
}

fn is_year(w: &str) -> bool {
    w.len() == 4
        && w.chars().all(|c| c.is_ascii_digit())
        && (w.starts_with("19") || w.starts_with("20"))
}

/// `2`, `2nd`, `21st`, `3rd`, `4th` as a day of the month.
fn ordinal_day(w: &str) -> Option<u32> {
    let digits = w.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let suffix = &w[digits.len()..];
    if !matches!(suffix, "" | "st" | "nd" | "rd" | "th") {
        return None;
    }
    digits.parse().ok().filter(|d| (1..=31).contains(d))
}

/// The days a question's words name: a month next to a day number, in
/// either order, or an ISO date (`2023 05 02` once split into words).
fn days_named(words: &[String]) -> BTreeSet<(u32, u32)> {
    let month = |w: &str| MONTHS.iter().find(|(m, _)| *m == w).map(|(_, n)| *n);
    let mut out = BTreeSet::new();
    for (i, w) in words.iter().enumerate() {
        if let Some(m) = month(w) {
            // "may" is also a verb: only a month when a day is next to it.
            let next = words.get(i + 1).and_then(|n| ordinal_day(n));
            let prev = i
                .checked_sub(1)
                .and_then(|p| words.get(p))
                .and_then(|p| ordinal_day(p));
            if let Some(d) = next.or(prev) {
                out.insert((m, d));
            }
        }
        // 2023-05-02 → "2023" "05" "02".
        if is_year(w)
            && let (Some(m), Some(d)) = (words.get(i + 1), words.get(i + 2))
            && let (Ok(m), Ok(d)) = (m.parse::<u32>(), d.parse::<u32>())
            && (1..=12).contains(&m)
            && (1..=31).contains(&d)
        {
            out.insert((m, d));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_query_is_read_up_to_its_64th_content_word() {
        // Short: all of it.
        let c = cap("where is the boat moored?");
        assert_eq!(
            (c.text, c.ignored, c.note()),
            ("where is the boat moored?", 0, None)
        );
        // 10,000 distinct words: the first 64, the rest counted.
        let long: Vec<String> = (0..10_000).map(|i| format!("w{i}x")).collect();
        let long = long.join(" ");
        let c = cap(&long);
        assert_eq!(words(c.text).count(), MAX_QUERY_WORDS);
        assert_eq!(c.ignored, 10_000 - MAX_QUERY_WORDS);
        let note = c.note().unwrap();
        assert!(
            note.contains("first 64 content words") && note.contains("9936 words"),
            "{note}"
        );
        assert_eq!(read(&long).unwrap().terms.len(), MAX_QUERY_WORDS);
        assert_eq!(read(&long), read(c.text));
        // Stop words count towards all the words read.
        let stops = format!("{} boat", "the ".repeat(300));
        let c = cap(&stops);
        assert_eq!(
            (words(c.text).count(), c.ignored),
            (MAX_QUERY_ALL_WORDS, 45)
        );
        // Bytes: a word crossing the limit is left out whole.
        let wide = format!("{} boat", "a".repeat(MAX_QUERY_BYTES + 1));
        let c = cap(&wide);
        assert_eq!((c.text, c.ignored), ("", 2));
        // Cut at a word's start, never inside a character.
        let accents = "é ".repeat(MAX_QUERY_BYTES);
        let c = cap(&accents);
        assert!(c.text.len() <= MAX_QUERY_BYTES && c.ignored > 0);
    }

    #[test]
    fn stop_words_are_left_out_and_any_word_may_match() {
        let q = read("Where is the boat moored?").unwrap();
        assert_eq!(q.terms, ["boat", "moor"]);
        assert_eq!(q.fts, r#""boat" OR "moored""#);
        assert_eq!(q.pairs, [("boat".to_string(), "moor".to_string())]);
        assert!(q.days.is_empty());
        // Only stop words: all of them are asked.
        let q = read("who are you").unwrap();
        assert_eq!(q.fts, r#""who" OR "are" OR "you""#);
        assert_eq!(read("?!"), None);
        // Quotes cannot break out of a term.
        assert_eq!(
            read(r#"boat" NEAR(x*"#).unwrap().fts,
            r#""boat" OR "near" OR "x""#
        );
    }

    #[test]
    fn days_are_read_in_the_ways_people_write_them() {
        let d = |s: &str| read(s).unwrap().days.into_iter().collect::<Vec<_>>();
        assert_eq!(d("On May 2nd, I went to the museum"), [(5, 2)]);
        assert_eq!(d("what did I do on 27 April"), [(4, 27)]);
        assert_eq!(d("the note of 2023-05-06"), [(5, 6)]);
        assert_eq!(d("you may go"), []);
        // The date's words are not content words.
        let q = read("On May 2nd I went to the museum").unwrap();
        assert_eq!(q.terms, ["went", "museum"]);
    }
}
