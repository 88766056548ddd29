//! FTS5 query building: a user's words become quoted FTS5 terms, so no
//! input is ever FTS5 syntax.
//!
//! [`read`] reads a search the way recall reads a question
//! (`search::question`: stop words out, one term per stem; a query of only
//! stop words keeps them all), except that a trailing `*` on a word makes it
//! a prefix term (`resea*`), and it also keeps the query's phrases: each
//! stretch of the query from one content word to the next, stop words
//! between included (`run the uname` in "did I run the uname command"), as
//! an FTS5 phrase. Words made only of punctuation are dropped.
//! [`fts_query`] is the every-word query of the words as typed (what
//! `g2 search` ran before it ranked partial matches too).

use super::question;
use super::stem::stem;

/// A search query, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Query {
    /// One FTS5 term per distinct word: `"word"` (the index stems it) or
    /// `"prefix"*`.
    pub terms: Vec<String>,
    /// The query's phrases between adjacent content words, as FTS5 phrases
    /// (prefix words are not part of any).
    pub phrases: Vec<String>,
    /// What a snippet marks: the content words as asked and the `prefix*`
    /// words.
    pub snippet: String,
}

/// Reads a search query; `None` when it has no word to search for. Only
/// what [`question::cap`] keeps of it is read.
pub(super) fn read(input: &str) -> Option<Query> {
    let input = question::cap(input).text;
    // Runs of plain words, split by prefix words.
    let mut runs: Vec<Vec<&str>> = vec![Vec::new()];
    let mut prefixes: Vec<&str> = Vec::new();
    for (word, prefix) in query_words(input) {
        if prefix {
            prefixes.push(word);
            runs.push(Vec::new());
        } else if let Some(run) = runs.last_mut() {
            run.push(word);
        }
    }
    let plain = runs.iter().flatten().copied().collect::<Vec<_>>().join(" ");
    // Stop words next to a prefix word are not a query of stop words.
    let only_stop = question::words(&plain).all(|w| question::is_stop(&w));
    let q = question::read(&plain).filter(|_| prefixes.is_empty() || !only_stop);
    let mut terms = Vec::new();
    let mut snippet = Vec::new();
    let mut phrases = Vec::new();
    if let Some(q) = &q {
        terms.extend(q.fts_terms.iter().cloned());
        snippet.push(q.text.clone());
        for run in &runs {
            let words: Vec<String> = question::words(&run.join(" ")).collect();
            let mut last: Option<usize> = None;
            for (j, w) in words.iter().enumerate() {
                let s = stem(w);
                if !q.terms.iter().any(|t| *t == s) {
                    continue;
                }
                if let Some(i) = last
                    && stem(&words[i]) != s
                {
                    let phrase = format!("\"{}\"", words[i..=j].join(" "));
                    if !phrases.contains(&phrase) {
                        phrases.push(phrase);
                    }
                }
                last = Some(j);
            }
        }
    }
    for p in prefixes {
        let term = format!("\"{}\"*", p.replace('"', "\"\""));
        if !terms.contains(&term) {
            terms.push(term);
            snippet.push(format!("{p}*"));
        }
    }
    (!terms.is_empty()).then(|| Query {
        terms,
        phrases,
        snippet: snippet.join(" "),
    })
}

/// Turns free text into the FTS5 query that every word must match, or
/// `None` when it has no words.
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
pub(super) fn query_words(input: &str) -> impl Iterator<Item = (&str, bool)> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn questions_are_read_as_words_phrases_and_prefixes() {
        let q = read("What did I run the uname command for?").unwrap();
        assert_eq!(q.terms, [r#""run""#, r#""uname""#, r#""command""#]);
        assert_eq!(q.phrases, [r#""run the uname""#, r#""uname command""#]);
        assert_eq!(q.snippet, "run uname command");
        // A prefix word is its own term and splits phrases.
        let q = read("tax resea* deductions for the year").unwrap();
        assert_eq!(
            q.terms,
            [r#""tax""#, r#""deductions""#, r#""year""#, r#""resea"*"#]
        );
        assert_eq!(q.phrases, [r#""deductions for the year""#]);
        assert_eq!(q.snippet, "tax deductions year resea*");
        // Only stop words: all of them; next to a prefix word: none.
        assert_eq!(read("who are you").unwrap().terms.len(), 3);
        assert_eq!(read("the womb*").unwrap().terms, [r#""womb"*"#]);
        // Nothing a user types is syntax.
        let q = read(r#"boat" OR NEAR(x*"#).unwrap();
        assert_eq!(q.terms, [r#""boat""#, r#""NEAR(x"*"#]);
        assert_eq!(read("  -- ** \"\" "), None);
    }
}
