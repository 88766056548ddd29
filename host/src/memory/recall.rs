//! Recall: the one function behind every memory read. A question in
//! people's words goes in; ranked hits with their provenance come out, from
//! the group's own memory only.
//!
//! Today's sources are archive passages (each archive cut into exchanges,
//! `search::passages`). Ranking, in two steps:
//! 1. FTS5 finds the group's passages holding *any* of the question's
//!    content words (`search::question`: stop words out, Porter stems) and
//!    ranks them by BM25, which weighs rare words over common ones; the
//!    best [`CANDIDATES`] go on. A common word ([`COMMON`]) finds nothing
//!    when the question has a rarer one (when all are common, passages
//!    holding all of them are found first); it still counts in step 2. A
//!    question that names a day also takes that day's passages.
//! 2. Each candidate's score is its BM25 relative to the best candidate's,
//!    plus how much of the question it holds: the share of the content
//!    words it contains ([`COVERAGE`]: all words beat some), the share of
//!    the question's adjacent word pairs it holds side by side ([`PHRASE`]:
//!    the exact phrase beats scattered words), a bonus when it was said on
//!    a day the question names ([`NAMED_DAY`]: "on May 2nd …"), and, as a
//!    tie-breaker, how recent it is ([`RECENCY`]).
//!
//! Boundary: the group is a [`GroupFolder`] the caller took from where the
//! request arrived; SQL is in `store::recall`.

use chrono::Datelike;
use rusqlite::Connection;
use serde::{Deserialize, Serialize};

use crate::Result;
use crate::search::question::{self, Question};
use crate::search::{SnippetTerms, make_snippet, stem};
use crate::store;
use g2_core::validate::GroupFolder;

/// Candidates FTS5 hands on to the second step, at least.
pub const CANDIDATES: usize = 200;
/// A word held by at least this many passages is common: it does not find
/// candidates (when the question has a rarer one), it only counts in the
/// second step.
pub const COMMON: i64 = 1_000;
/// Weight of the share of the question's words a passage holds.
pub const COVERAGE: f64 = 0.6;
/// Weight of the share of the question's word pairs it holds as phrases.
pub const PHRASE: f64 = 0.3;
/// Bonus for a passage said on a day the question names.
pub const NAMED_DAY: f64 = 1.0;
/// Weight of recency (the newest candidate gets all of it).
pub const RECENCY: f64 = 0.02;
/// Most hits one recall returns.
pub const MAX_LIMIT: usize = 100;

/// One recalled memory and where it came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecallHit {
    /// What it is: `passage` (a piece of an archived conversation).
    pub kind: String,
    /// The passage's id.
    pub id: i64,
    pub group: String,
    pub session_id: Option<String>,
    /// The archive's title and markdown file (relative to the home).
    pub archive: String,
    pub archive_path: String,
    pub archive_id: i64,
    /// The messages it holds, by index in the archive (from 0), inclusive.
    pub turn_start: i64,
    pub turn_end: i64,
    /// When it was said (RFC 3339).
    pub at: String,
    /// The passage around its first match, matches in `[` `]`.
    pub snippet: String,
    /// Higher is better; comparable within one recall only.
    pub score: f64,
}

/// The group's memories that answer `query`, best first, at most `limit`.
/// A query with no words recalls nothing.
pub fn recall(
    conn: &Connection,
    group: &GroupFolder,
    query: &str,
    limit: usize,
) -> Result<Vec<RecallHit>> {
    let Some(q) = question::read(query) else {
        return Ok(Vec::new());
    };
    let limit = limit.clamp(1, MAX_LIMIT);
    let want = CANDIDATES.max(limit * 10) as i64;
    let mut rows =
        store::recall::passage_candidates(conn, &finding_query(conn, &q)?, group.as_str(), want)?;
    if rows.is_empty() && q.fts_terms.len() > 1 {
        // Every word was common and no passage holds them all: any will do.
        rows = store::recall::passage_candidates(conn, &q.fts, group.as_str(), want)?;
    }
    if !q.days.is_empty() {
        // "What did we talk about on April 27th?": that day's passages are
        // candidates whatever their words.
        let days: Vec<String> = q
            .days
            .iter()
            .map(|(m, d)| format!("{m:02}-{d:02}"))
            .collect();
        for r in store::recall::passages_on_days(conn, group.as_str(), &days, want)? {
            if !rows.iter().any(|x| x.id == r.id) {
                rows.push(r);
            }
        }
    }
    let best = rows.iter().map(|r| r.score).fold(f64::MIN, f64::max);
    let newest = rows.iter().map(|r| r.at.clone()).max().unwrap_or_default();
    let oldest = rows.iter().map(|r| r.at.clone()).min().unwrap_or_default();
    let mut scored: Vec<(f64, store::recall::PassageRow)> = rows
        .into_iter()
        .map(|r| {
            let (coverage, phrase) = matches(&q, &r.text);
            let score = if best > 0.0 { r.score / best } else { 0.0 }
                + COVERAGE * coverage
                + PHRASE * phrase
                + NAMED_DAY * f64::from(u8::from(on_named_day(&q, &r.at)))
                + RECENCY * recency(&r.at, &oldest, &newest);
            (score, r)
        })
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.id.cmp(&a.1.id)));
    scored.truncate(limit);
    // Snippets for the hits returned only.
    let terms = SnippetTerms::new(&q.text);
    let hits = scored
        .into_iter()
        .map(|(score, r)| RecallHit {
            kind: "passage".into(),
            id: r.id,
            group: group.to_string(),
            session_id: r.session_id,
            archive: r.archive_name,
            archive_path: r.archive_path,
            archive_id: r.archive_id,
            turn_start: r.turn_start,
            turn_end: r.turn_end,
            snippet: make_snippet(&r.text, &terms),
            at: r.at,
            score,
        })
        .collect();
    Ok(hits)
}

/// The FTS5 query that finds candidates: any of the question's words that
/// are not common ([`COMMON`]); when every one is, all of them together
/// (and, should no passage hold them all, any of them: the caller's
/// fallback). BM25 gives a common word little weight anyway; leaving it out
/// of the search keeps a question's cost that of its rare words (ranking
/// every passage that says "book" in a large group is what would cost).
fn finding_query(conn: &Connection, q: &Question) -> Result<String> {
    if q.fts_terms.len() < 2 {
        return Ok(q.fts.clone());
    }
    let mut rare = Vec::new();
    for t in &q.fts_terms {
        if store::recall::capped_count(conn, t, COMMON)? < COMMON {
            rare.push(t.as_str());
        }
    }
    Ok(if rare.is_empty() {
        q.fts_terms.join(" AND ")
    } else {
        rare.join(" OR ")
    })
}

/// How much of the question the text holds, in one pass over its words:
/// the share of the question's terms it contains, and the share of the
/// question's adjacent word pairs it holds side by side (stop words between
/// them do not count as a gap). Only words that are question terms are
/// stemmed and kept.
fn matches(q: &Question, text: &str) -> (f64, f64) {
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
    let share = |v: &[bool]| {
        if v.is_empty() {
            0.0
        } else {
            v.iter().filter(|x| **x).count() as f64 / v.len() as f64
        }
    };
    (share(&seen), share(&pairs_seen))
}

/// Whether `at` (RFC 3339) falls on a (month, day) the question names.
fn on_named_day(q: &Question, at: &str) -> bool {
    if q.days.is_empty() {
        return false;
    }
    let md = (at.get(5..7), at.get(8..10));
    match md {
        (Some(m), Some(d)) => match (m.parse::<u32>(), d.parse::<u32>()) {
            (Ok(m), Ok(d)) => q.days.contains(&(m, d)),
            _ => false,
        },
        _ => false,
    }
}

/// 0 for the oldest candidate, 1 for the newest (RFC 3339 strings compare
/// as times; their date part is enough for a tie-breaker).
fn recency(at: &str, oldest: &str, newest: &str) -> f64 {
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

/// Splits every archive that has no passages yet (archives recorded before
/// passages existed) in one transaction; returns how many were split.
pub fn index_missing(tx: &rusqlite::Transaction<'_>) -> Result<usize> {
    let missing = store::recall::archives_without_passages(tx)?;
    for (id, group, at, body) in &missing {
        let passages = crate::search::passages::split(body);
        store::recall::insert_passages(tx, *id, group, at, &passages)?;
    }
    Ok(missing.len())
}

/// Rebuilds every passage from the archives' indexed text.
pub fn reindex(tx: &rusqlite::Transaction<'_>) -> Result<usize> {
    store::recall::clear_passages(tx)?;
    index_missing(tx)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store_with(archives: &[(&str, &str, &str)]) -> (tempfile::TempDir, store::Store) {
        let dir = tempfile::tempdir().unwrap();
        let store =
            store::Store::open(&dir.path().join("g2.db"), std::time::Duration::from_secs(5))
                .unwrap();
        let rows: Vec<(String, String, String)> = archives
            .iter()
            .map(|(g, at, b)| (g.to_string(), at.to_string(), b.to_string()))
            .collect();
        store
            .write_blocking(move |tx| {
                for (i, (group, at, body)) in rows.iter().enumerate() {
                    tx.execute(
                        "INSERT INTO conversation_archives (group_folder, session_id, name, path, trigger, created_at)
                         VALUES (?1, ?2, ?3, ?4, 'manual', ?5)",
                        rusqlite::params![group, format!("s{i}"), format!("A{i}"), format!("groups/{group}/conversations/{i}.md"), at],
                    )?;
                    tx.execute(
                        "INSERT INTO archives_fts (rowid, name, body) VALUES (?1, ?2, ?3)",
                        rusqlite::params![tx.last_insert_rowid(), format!("A{i}"), body],
                    )?;
                }
                index_missing(tx)
            })
            .unwrap();
        (dir, store)
    }

    fn md(exchanges: &[(&str, &str)]) -> String {
        let mut s = String::from("# T\n\nArchived: x\n\n---\n\n");
        for (u, a) in exchanges {
            s.push_str(&format!("**User**: {u}\n\n**G2**: {a}\n\n"));
        }
        s
    }

    #[test]
    fn questions_find_the_turn_that_answers_them() {
        let (_d, store) = store_with(&[
            (
                "main",
                "2026-05-01T10:00:00.000Z",
                &md(&[
                    ("we sailed today", "nice"),
                    ("remember that the boat is moored at pier 7", "noted"),
                    ("the weather was fine", "good"),
                ]),
            ),
            (
                "main",
                "2026-05-02T10:00:00.000Z",
                &md(&[
                    ("I went to the museum", "which exhibition?"),
                    ("the boat show", "fun"),
                ]),
            ),
            (
                "fam",
                "2026-05-03T10:00:00.000Z",
                &md(&[("the boat is moored at pier 9", "ok")]),
            ),
        ]);
        let main = GroupFolder::new("main").unwrap();
        store
            .read_blocking(|c| {
                // No word is required: "where" and "is" are not searched.
                let hits = recall(c, &main, "where is the boat moored?", 5)?;
                assert_eq!(
                    (hits[0].archive_id, hits[0].turn_start),
                    (1, 2),
                    "{hits:#?}"
                );
                assert!(hits[0].snippet.contains("[boat]"), "{}", hits[0].snippet);
                // Never another group's.
                assert!(
                    hits.iter()
                        .all(|h| h.group == "main" && !h.snippet.contains("pier 9"))
                );
                // A named day lifts that day's passages.
                let hits = recall(c, &main, "on May 2nd, what did I see at the boat show?", 5)?;
                assert_eq!(hits[0].archive_id, 2, "{hits:#?}");
                // A named day brings that day's talk, whatever its words.
                let hits = recall(c, &main, "what did we talk about on May 1st?", 5)?;
                assert!(
                    !hits.is_empty() && hits.iter().all(|h| h.archive_id == 1),
                    "{hits:#?}"
                );
                assert!(recall(c, &main, "?!", 5)?.is_empty());
                assert!(recall(c, &main, "zebra", 5)?.is_empty());
                Ok(())
            })
            .unwrap();
    }
}
