//! Full-text search over conversation archives (FTS5, BM25 ranking).
//!
//! A user's query is never handed to FTS5 as syntax: each word becomes a
//! quoted term (all must match), and a trailing `*` on a word makes it a
//! prefix. So `tax research` finds archives with both words (and, through
//! the Porter stemmer, "researching"), and no input is a syntax error.
//! Titles weigh more than bodies.

use rusqlite::{Connection, params};
use serde::{Deserialize, Serialize};

use g2_core::validate;

use crate::{Error, Result};

/// Most hits one search returns.
pub const MAX_LIMIT: usize = 1000;

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
    let terms: Vec<String> = input
        .split_whitespace()
        .filter_map(|word| {
            let (word, prefix) = match word.strip_suffix('*') {
                Some(w) => (w, true),
                None => (word, false),
            };
            // Words made only of punctuation match nothing in unicode61.
            if !word.chars().any(char::is_alphanumeric) {
                return None;
            }
            let quoted = format!("\"{}\"", word.replace('"', "\"\""));
            Some(if prefix { format!("{quoted}*") } else { quoted })
        })
        .collect();
    (!terms.is_empty()).then(|| terms.join(" "))
}

/// Searches archives, best first; `group` limits to one group.
pub fn search(conn: &Connection, query: &str, group: Option<&str>, limit: usize) -> Result<Vec<Hit>> {
    if let Some(g) = group {
        validate::any_folder(g)?;
    }
    let fts = fts_query(query)
        .ok_or_else(|| Error::Invalid(format!("search query {query:?} has no words to search for")))?;
    let limit = limit.clamp(1, MAX_LIMIT) as i64;
    // Two phases: rank every match with bm25() and keep the top `limit`
    // rowids, then make snippets for those rows only. In one flat query
    // SQLite builds each matching row's snippet before sorting, which made
    // common words 4-6x slower. bm25() is "lower is better"; weights: name
    // 4, body 1.
    let mut stmt = conn.prepare_cached(
        "SELECT a.id, a.group_folder, a.name, a.path, a.session_id, a.created_at,
                snippet(archives_fts, 1, '[', ']', '…', 16), bm25(archives_fts, 4.0, 1.0) AS score
         FROM archives_fts
         JOIN conversation_archives a ON a.id = archives_fts.rowid
         WHERE archives_fts MATCH ?1
           AND archives_fts.rowid IN (
             SELECT rowid FROM archives_fts
             WHERE archives_fts MATCH ?1
               AND (?2 IS NULL OR rowid IN
                     (SELECT id FROM conversation_archives WHERE group_folder = ?2))
             ORDER BY bm25(archives_fts, 4.0, 1.0)
             LIMIT ?3)
         ORDER BY score",
    )?;
    let rows = stmt.query_map(params![fts, group, limit], |r| {
        Ok(Hit {
            archive_id: r.get(0)?,
            group: r.get(1)?,
            name: r.get(2)?,
            path: r.get(3)?,
            session_id: r.get(4)?,
            created_at: r.get(5)?,
            snippet: r.get::<_, String>(6)?.replace('\n', " "),
            score: -r.get::<_, f64>(7)?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_are_quoted() {
        assert_eq!(fts_query("tax research").unwrap(), r#""tax" "research""#);
        assert_eq!(fts_query("resea*").unwrap(), r#""resea"*"#);
        assert_eq!(fts_query(r#"a"b OR NEAR("#).unwrap(), r#""a""b" "OR" "NEAR(""#);
        assert_eq!(fts_query("  -- ** \"\" "), None);
        assert_eq!(fts_query(""), None);
    }
}
