//! Full-text search over conversation archives (FTS5, BM25 ranking).
//!
//! A query is read like a question (`query::read`, which uses
//! `search::question`): stop words ("what", "did", "the") are left out
//! unless the query has nothing else, each remaining word is one quoted
//! FTS5 term (stemmed by the index's Porter tokenizer, so `research` finds
//! "researching"), and a trailing `*` makes a word a prefix term. No input
//! is ever FTS5 syntax, so none is a syntax error. No word is required:
//! "what did I run uname for" finds the archive that mentions uname.
//!
//! The order, exactly. With one term, archives holding it by
//! `bm25(archives_fts, 4.0, 1.0)` (titles weigh 4x bodies). With several:
//! 1. Candidates: the best [`CANDIDATES`] archives holding every term (FTS5
//!    `AND`), and the best [`CANDIDATES`] holding any term that is not
//!    common (FTS5 `OR`; a term held by [`COMMON`] archives or more finds
//!    no candidates when the query has a rarer one, as in
//!    `memory::recall`). When every term is common and no archive holds
//!    them all, the best holding any of them.
//! 2. Order: archives holding every term first; then by how many of the
//!    query's phrases (each stretch from one content word to the next, as
//!    typed, e.g. "run the uname") they hold exactly; then by BM25:
//!    archives holding every term by the BM25 of the every-term query, the
//!    others by that of the query that found them; ties by newest id.
//!
//! `Hit::score` encodes that order: its whole part is
//! `held_phrases + (phrases + 1)` for an archive holding every term, and
//! `held_phrases` otherwise; its fraction is the BM25 relative to the best
//! of the same query (in `(0, 1]`), so scores descend along the hits.
//! Each hit carries a snippet of its body around the first content word,
//! matches in `[` `]`.
//!
//! [`search`] is the API; inside, `query` reads the user's words,
//! `store::search` ranks and reads the archives (the statements and their
//! shape are documented there), `snippet` cuts each hit's snippet and
//! `stem` folds and stems words the way the snippet compares them.

use std::collections::{HashMap, HashSet};

use crate::store::db::Db;

use g2_core::validate;

use crate::{Error, Result, store};

mod query;
pub mod question;
mod snippet;
mod stem;

pub use crate::store::passages;
pub use crate::store::search::Hit;
pub use query::fts_query;
pub(crate) use snippet::{SnippetTerms, excerpt, make_snippet};
pub(crate) use stem::stem;

/// Most hits one search returns.
pub const MAX_LIMIT: usize = 1000;

/// Candidates each FTS5 query of a multi-word search hands on to the
/// re-ranking, at least (see the module doc).
pub const CANDIDATES: usize = 200;
/// A term held by at least this many archives is common: it finds no
/// candidates when the query has a rarer one (it still counts in the
/// every-term query and the phrases). Keeps a query's cost that of its rare
/// words.
pub const COMMON: i64 = 1_000;

/// The FTS5 terms of `terms` held by fewer than [`COMMON`] rows of
/// `index`: the ones that find candidates (search here, recall in
/// `memory::recall`).
pub fn rare_terms<'a>(
    conn: &Db<'_>,
    index: store::search::Index,
    terms: &'a [String],
) -> Result<Vec<&'a str>> {
    let mut rare = Vec::new();
    for t in terms {
        if store::search::capped_count(conn, index, t, COMMON)? < COMMON {
            rare.push(t.as_str());
        }
    }
    Ok(rare)
}

/// Searches archives, best first (the order in the module doc); `group`
/// limits to one group.
pub fn search(conn: &Db<'_>, query: &str, group: Option<&str>, limit: usize) -> Result<Vec<Hit>> {
    if let Some(g) = group {
        validate::any_folder(g)?;
    }
    let q = query::read(query).ok_or_else(|| {
        Error::Invalid(format!("search query {query:?} has no words to search for"))
    })?;
    let limit = limit.clamp(1, MAX_LIMIT);
    let terms = SnippetTerms::new(&q.snippet);
    let snippet = |body: &str| make_snippet(body, &terms);
    if let [term] = q.terms.as_slice() {
        // One term: BM25 is the whole order; one statement reads the hits.
        let mut hits = store::search::archive_hits(conn, term, limit as i64, group, snippet)?;
        let best = hits.first().map_or(1.0, |h| h.score);
        for h in &mut hits {
            h.score = 1.0 + relative(h.score, best);
        }
        return Ok(hits);
    }
    let ranked = rank(conn, &q, group, limit)?;
    store::search::hits_for(conn, &ranked, snippet)
}

/// The best `limit` (id, score) pairs of a query of several terms.
fn rank(
    conn: &Db<'_>,
    q: &query::Query,
    group: Option<&str>,
    limit: usize,
) -> Result<Vec<(i64, f64)>> {
    let want = CANDIDATES.max(limit) as i64;
    let every = q.terms.join(" AND ");
    let rare = rare_terms(conn, store::search::Index::Archives, &q.terms)?;
    let all = store::search::ranked(conn, &every, want, group)?;
    // The query candidates holding only some terms were found by.
    let finding = if !rare.is_empty() {
        Some(rare.join(" OR "))
    } else if all.is_empty() {
        Some(q.terms.join(" OR "))
    } else {
        None
    };
    let some = match &finding {
        Some(f) => store::search::ranked(conn, f, want, group)?,
        None => Vec::new(),
    };
    let holds_all: HashSet<i64> = all.iter().map(|(id, _)| *id).collect();
    // (id, holds every term, BM25 relative to its query's best).
    let mut candidates: Vec<(i64, bool, f64)> = Vec::new();
    let best_all = all.first().map_or(1.0, |c| c.1);
    candidates.extend(
        all.iter()
            .map(|(id, s)| (*id, true, relative(*s, best_all))),
    );
    let best_some = some.first().map_or(1.0, |c| c.1);
    candidates.extend(
        some.iter()
            .filter(|(id, _)| !holds_all.contains(id))
            .map(|(id, s)| (*id, false, relative(*s, best_some))),
    );
    // Which candidates hold each phrase. Asked together with the query that
    // found the candidates, so a phrase of common words costs no more than
    // that query.
    let mut held: HashMap<i64, usize> = HashMap::new();
    let within = finding.as_deref().unwrap_or(&every);
    let ids: HashSet<i64> = candidates.iter().map(|c| c.0).collect();
    for phrase in &q.phrases {
        for id in store::search::matching(conn, &format!("({within}) AND {phrase}"))? {
            if ids.contains(&id) {
                *held.entry(id).or_default() += 1;
            }
        }
    }
    let phrases = q.phrases.len();
    let mut scored: Vec<(i64, f64)> = candidates
        .into_iter()
        .map(|(id, every, rel)| {
            let held = held.get(&id).copied().unwrap_or(0);
            let class = held + if every { phrases + 1 } else { 0 };
            (id, class as f64 + rel)
        })
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
    scored.truncate(limit);
    Ok(scored)
}

/// A "higher is better" BM25 relative to the best one's, in `(0, 1]`
/// (FTS5 keeps every matching score away from 0).
fn relative(score: f64, best: f64) -> f64 {
    if best > 0.0 { score / best } else { 1.0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_support::store_with_archives as store_with;

    #[test]
    fn a_long_query_is_searched_for_its_first_words_only() {
        let (_dir, store) = store_with(&[
            ("main", "Pier", "the wombat sleeps by the pier"),
            ("main", "Other", "nothing here"),
        ]);
        let tail: Vec<String> = (0..10_000).map(|i| format!("w{i}x")).collect();
        let long = format!("wombat pier {}", tail.join(" "));
        let read = question::cap(&long).text.to_string();
        store
            .read_blocking(move |c| {
                let ids = |q: &str| -> Result<Vec<i64>> {
                    Ok(search(c, q, None, 10)?
                        .iter()
                        .map(|h| h.archive_id)
                        .collect())
                };
                let hits = ids(&long)?;
                assert_eq!(hits.len(), 1);
                assert_eq!(hits, ids(&read)?);
                Ok(())
            })
            .unwrap();
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
    fn any_word_finds_and_all_words_then_phrases_rank_first() {
        let filler = "other things ".repeat(50);
        let (_dir, store) = store_with(&[
            ("main", "Dense", "wombat wombat wombat, the wombat"),
            ("main", "Apart", &format!("planning for a wombat. {filler}")),
            (
                "main",
                "Phrase",
                &format!("the wombat planning went well. {filler}"),
            ),
            ("main", "Plans", "planning planning planning"),
            (
                "main",
                "Kernel",
                "I ran uname -a to see which kernel it was",
            ),
            ("main", "Unrelated", "nothing at all"),
        ]);
        store
            .read_blocking(|c| {
                let names = |hits: &[Hit]| hits.iter().map(|h| h.name.clone()).collect::<Vec<_>>();
                // No word is required: any one finds, all of them rank
                // first, the exact phrase before scattered words, then BM25.
                let hits = search(c, "wombat planning", None, 10)?;
                let mut partial = names(&hits[2..]);
                partial.sort();
                assert_eq!(names(&hits[..2]), ["Phrase", "Apart"], "{hits:#?}");
                assert_eq!(partial, ["Dense", "Plans"], "{hits:#?}");
                assert!(hits.windows(2).all(|w| w[0].score > w[1].score));
                assert!(
                    hits[0].snippet.contains("[wombat] [planning]"),
                    "{}",
                    hits[0].snippet
                );
                // A question in people's words: its stop words find nothing.
                let hits = search(c, "what did I run uname for", None, 10)?;
                assert_eq!(names(&hits), ["Kernel"], "{hits:#?}");
                assert!(hits[0].snippet.contains("[uname]"), "{}", hits[0].snippet);
                // A prefix word is a term of its own.
                let mut both = names(&search(c, "womb* plan*", None, 2)?);
                both.sort();
                assert_eq!(both, ["Apart", "Phrase"]);
                // Only stop words: they are searched.
                assert_eq!(names(&search(c, "to see which", None, 10)?), ["Kernel"]);
                assert!(search(c, "platypus zebra", None, 10)?.is_empty());
                assert!(search(c, "?!", None, 10).is_err());
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn common_words_find_nothing_next_to_a_rarer_one() {
        let mut archives: Vec<(&str, String, String)> = Vec::new();
        for i in 0..COMMON {
            archives.push(("main", format!("W{i}"), "the weather was fine".into()));
            archives.push(("main", format!("T{i}"), "the traffic was slow".into()));
        }
        archives.push(("main", "Rare".into(), "an okapi at the zoo".into()));
        archives.push(("main", "Both".into(), "an okapi in fine weather".into()));
        let rows: Vec<(&str, &str, &str)> = archives
            .iter()
            .map(|(g, n, b)| (*g, n.as_str(), b.as_str()))
            .collect();
        let (_dir, store) = store_with(&rows);
        store
            .read_blocking(|c| {
                let names = |hits: &[Hit]| hits.iter().map(|h| h.name.clone()).collect::<Vec<_>>();
                // "weather" is in over COMMON archives: it finds nothing,
                // but the archive that also holds it ranks first.
                let hits = search(c, "okapi weather", None, 10)?;
                assert_eq!(names(&hits), ["Both", "Rare"], "{hits:#?}");
                // Every word common and never together: any of them.
                let hits = search(c, "weather traffic", Some("main"), 4)?;
                assert_eq!(hits.len(), 4, "{hits:#?}");
                // Every word common: the archives holding all of them.
                let hits = search(c, "fine weather", None, 1000)?;
                assert!(
                    hits.len() >= CANDIDATES && hits.iter().all(|h| h.snippet.contains("[fine]")),
                    "{hits:#?}"
                );
                Ok(())
            })
            .unwrap();
    }
}
