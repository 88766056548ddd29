//! The archive search queries: `archives_fts` ranked with bm25() and
//! joined to `conversation_archives`. `search::search` builds the FTS5
//! queries, re-ranks and cuts the snippets; this runs the statements.
//!
//! A one-term search is `archive_hits`, one statement (below). A search of
//! several terms ranks candidates with `ranked` (the inner phase alone:
//! (rowid, score) pairs), asks `capped_count` whether a term is common and
//! `matching` which archives hold a phrase, and reads its final hits only
//! with `hits_for` (archive row and body by key).
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

use crate::db::{Db, Optional, Row, Value};
use crate::params;
use serde::{Deserialize, Serialize};

use super::{Result, query_all};

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

// The ranking phase alone, for candidates that are re-ranked before any
// row is read (see `search::search`).
const RANK_ALL: &str = "SELECT rowid, bm25(archives_fts, 4.0, 1.0) AS score
 FROM archives_fts
 WHERE archives_fts MATCH ?1
 ORDER BY score
 LIMIT ?2";
const RANK_GROUP: &str = "SELECT archives_fts.rowid, bm25(archives_fts, 4.0, 1.0) AS score
 FROM archives_fts
 CROSS JOIN conversation_archives g ON g.id = archives_fts.rowid
 WHERE archives_fts MATCH ?1 AND g.group_folder = ?3
 ORDER BY score
 LIMIT ?2";

/// The best `limit` archives matching the FTS5 query `fts` as (id, score)
/// pairs, best first, score made "higher is better"; `group` limits to one
/// group.
pub fn ranked(
    conn: &Db<'_>,
    fts: &str,
    limit: i64,
    group: Option<&str>,
) -> Result<Vec<(i64, f64)>> {
    let row = |r: &Row<'_>| Ok((r.get(0)?, -r.get::<f64>(1)?));
    match group {
        Some(g) => query_all(conn, RANK_GROUP, params![fts, limit, g], row),
        None => query_all(conn, RANK_ALL, params![fts, limit], row),
    }
}

/// Every archive matching the FTS5 query `fts` (ids, unranked).
pub fn matching(conn: &Db<'_>, fts: &str) -> Result<Vec<i64>> {
    query_all(
        conn,
        "SELECT rowid FROM archives_fts WHERE archives_fts MATCH ?1",
        params![fts],
        |r| r.get(0),
    )
}

/// How many rows of `index` hold the FTS5 term `term`, counted up to `cap`
/// (a common word's count stops there: counting costs as much as it
/// counts).
pub fn capped_count(conn: &Db<'_>, index: Index, term: &str, cap: i64) -> Result<i64> {
    let t = index.table();
    conn.query_row(
        &format!("SELECT count(*) FROM (SELECT 1 FROM {t} WHERE {t} MATCH ?1 LIMIT ?2) AS m"),
        params![term, cap],
        |r| r.get(0),
    )
}

/// A full-text index whose terms [`capped_count`] counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Index {
    /// `archives_fts`: whole archives (`g2 search`).
    Archives,
    /// `passages_fts`: archive passages (recall).
    Passages,
}

impl Index {
    fn table(self) -> &'static str {
        match self {
            Index::Archives => "archives_fts",
            Index::Passages => "passages_fts",
        }
    }
}

/// The hits for archives already ranked: (id, score) pairs, in that order.
/// Each archive row and body is read by key; an id that is gone is skipped.
pub fn hits_for(
    conn: &Db<'_>,
    ranked: &[(i64, f64)],
    snippet: impl Fn(&str) -> String,
) -> Result<Vec<Hit>> {
    let mut hits = Vec::with_capacity(ranked.len());
    for (id, score) in ranked {
        let found = conn
            .query_row(
                "SELECT a.id, a.group_folder, a.name, a.path, a.session_id, a.created_at, f.body
                 FROM conversation_archives a
                 CROSS JOIN archives_fts f ON f.rowid = a.id
                 WHERE a.id = ?1",
                params![id],
                |r| hit(r, &snippet, *score),
            )
            .optional()?;
        hits.extend(found);
    }
    Ok(hits)
}

fn hit(r: &Row<'_>, snippet: impl Fn(&str) -> String, score: f64) -> Result<Hit> {
    // The body is borrowed from SQLite, not copied; only the snippet is.
    let text = match r.get_ref(6)? {
        Value::Text(b) => snippet(b),
        _ => String::new(),
    };
    Ok(Hit {
        archive_id: r.get(0)?,
        group: r.get(1)?,
        name: r.get(2)?,
        path: r.get(3)?,
        session_id: r.get(4)?,
        created_at: r.get(5)?,
        snippet: text,
        score,
    })
}

/// The best `limit` archives matching the FTS5 query `fts`, best first;
/// `group` limits to one group. `snippet` cuts a hit's snippet from its
/// body, which it gets borrowed from SQLite.
pub fn archive_hits(
    conn: &Db<'_>,
    fts: &str,
    limit: i64,
    group: Option<&str>,
    snippet: impl Fn(&str) -> String,
) -> Result<Vec<Hit>> {
    let row = |r: &Row<'_>| {
        let score = -r.get::<f64>(7)?;
        hit(r, &snippet, score)
    };
    match group {
        Some(g) => conn.query_all(SEARCH_GROUP, params![fts, limit, g], row),
        None => conn.query_all(SEARCH_ALL, params![fts, limit], row),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::store_with_archives as store_with;

    #[test]
    fn query_plans_keep_fts5_outside() {
        // Ranking scans FTS5 with MATCH (no per-rowid MATCH, no driving
        // from the group index), and the body is read back by rowid.
        let (_dir, store) = store_with(&[("main", "A", "wombat")]);
        store
            .read_blocking(|c| {
                use rusqlite::types::Value;
                let c = c.as_sqlite().expect("a SQLite store");
                for (sql, args, reads_body) in [
                    (SEARCH_ALL, 2, true),
                    (SEARCH_GROUP, 3, true),
                    (RANK_ALL, 2, false),
                    (RANK_GROUP, 3, false),
                ] {
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
                    assert!(!reads_body || idx("f").ends_with(":="), "{plan:?}");
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
