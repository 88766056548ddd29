//! The lexical measures of a recall: how many passages hold each word and
//! what it weighs (IDF), how much of the question a text holds (its words,
//! weighted, and its adjacent pairs), BM25 with equal weights for the
//! candidates FTS5 did not rank, a named time and recency. Pure functions
//! of the question and the text, apart from the two counts read from the
//! index.

use crate::store::db::Db;
use chrono::Datelike;

use super::when::Window;
use crate::Result;
use crate::search::question::{self, Question};
use crate::search::stem;
use crate::store;

/// How many passages hold each of the question's words, up to
/// `search::COMMON` (FTS5 counts them as it indexes them).
pub(super) fn doc_counts(conn: &Db<'_>, q: &Question) -> Result<Vec<i64>> {
    q.fts_terms
        .iter()
        .map(|t| {
            store::search::capped_count(
                conn,
                store::search::Index::Passages,
                t,
                crate::search::COMMON,
            )
        })
        .collect()
}

/// Each word's inverse document frequency over every passage (BM25's),
/// or 1 each when `weighted` is off.
pub(super) fn idf(conn: &Db<'_>, docs: &[i64], weighted: bool) -> Result<Vec<f64>> {
    if !weighted {
        return Ok(vec![1.0; docs.len()]);
    }
    let n = store::recall::passage_count_estimate(conn)? as f64;
    Ok(docs
        .iter()
        .map(|&d| {
            let d = d as f64;
            (1.0 + (n - d + 0.5).max(0.0) / (d + 0.5)).ln().max(0.01)
        })
        .collect())
}

/// The weighted share of the flags that are set.
pub(super) fn share(seen: &[bool], weight: &[f64]) -> f64 {
    let total: f64 = weight.iter().sum();
    if total <= 0.0 {
        return 0.0;
    }
    seen.iter()
        .zip(weight)
        .filter(|(s, _)| **s)
        .map(|(_, w)| w)
        .sum::<f64>()
        / total
}

/// How often each of the question's terms occurs in `text`, and its length
/// in words (stop words included, as the index counts them).
pub(super) fn term_counts(q: &Question, text: &str) -> (Vec<u32>, usize) {
    let mut tf = vec![0_u32; q.terms.len()];
    let mut len = 0;
    for w in question::words(text) {
        len += 1;
        if question::is_stop(&w) {
            continue;
        }
        let s = stem(&w);
        if let Some(t) = q.terms.iter().position(|t| *t == s) {
            tf[t] += 1;
        }
    }
    (tf, len)
}

/// [`equal_weight_bm25`] of each text, lengths measured against the
/// texts' own average.
pub(super) fn weigh_alike<'a>(q: &Question, texts: impl Iterator<Item = &'a str>) -> Vec<f64> {
    let found: Vec<(Vec<u32>, usize)> = texts.map(|t| term_counts(q, t)).collect();
    let avg = found.iter().map(|f| f.1).sum::<usize>() as f64 / found.len().max(1) as f64;
    found
        .iter()
        .map(|(tf, len)| equal_weight_bm25(tf, *len, avg))
        .collect()
}

/// BM25 (k1 = 1.2, b = 0.75) with every term weighing 1.
pub(super) fn equal_weight_bm25(tf: &[u32], len: usize, avg_len: f64) -> f64 {
    const K1: f64 = 1.2;
    const B: f64 = 0.75;
    let norm = K1 * (1.0 - B + B * len as f64 / avg_len.max(1.0));
    tf.iter()
        .map(|&f| {
            let f = f64::from(f);
            f * (K1 + 1.0) / (f + norm)
        })
        .sum()
}

/// How much of the question the text holds, in one pass over its words:
/// the share of the question's terms it contains, and the share of the
/// question's adjacent word pairs it holds side by side (stop words between
/// them do not count as a gap). Only words that are question terms are
/// stemmed and kept.
pub(super) fn matches(q: &Question, text: &str) -> (Vec<bool>, f64) {
    let mut seen = vec![false; q.terms.len()];
    let mut pairs_seen = vec![false; q.pairs.len()];
    let mut prev: Option<usize> = None;
    for w in question::words(text) {
        if question::is_stop(&w) {
            continue;
        }
        let s = stem(&w);
        let Some(t) = q.terms.iter().position(|t| *t == s) else {
            prev = None;
            continue;
        };
        seen[t] = true;
        if let Some(p) = prev {
            for (k, (a, b)) in q.pairs.iter().enumerate() {
                if *a == q.terms[p] && *b == q.terms[t] {
                    pairs_seen[k] = true;
                }
            }
        }
        prev = Some(t);
    }
    let phrase = if pairs_seen.is_empty() {
        0.0
    } else {
        pairs_seen.iter().filter(|x| **x).count() as f64 / pairs_seen.len() as f64
    };
    (seen, phrase)
}

/// Whether what was said from `at` to `at_end` (RFC 3339) touches a
/// time the question names.
pub(super) fn in_window(windows: &[Window], at: &str, at_end: Option<&str>) -> bool {
    let time = |s: &str| {
        chrono::DateTime::parse_from_rfc3339(s)
            .ok()
            .map(|t| t.to_utc())
    };
    let Some(first) = time(at) else {
        return false;
    };
    let last = at_end.and_then(time).unwrap_or(first).max(first);
    windows.iter().any(|w| w.touches(first, last))
}

/// 0 for the oldest candidate, 1 for the newest (RFC 3339 strings compare
/// as times; their date part is enough for a tie-breaker).
pub(super) fn recency(at: &str, oldest: &str, newest: &str) -> f64 {
    let day = |s: &str| {
        chrono::NaiveDate::parse_from_str(s.get(..10).unwrap_or(""), "%Y-%m-%d")
            .map(|d| d.num_days_from_ce())
            .unwrap_or(0)
    };
    let (a, o, n) = (day(at), day(oldest), day(newest));
    if n > o {
        f64::from(a - o) / f64::from(n - o)
    } else {
        0.0
    }
}
