//! Full-text search over conversation archives (FTS5, BM25 ranking).
//!
//! A user's query is never handed to FTS5 as syntax: each word becomes a
//! quoted term (all must match), and a trailing `*` on a word makes it a
//! prefix. So `tax research` finds archives with both words (and, through
//! the Porter stemmer, "researching"), and no input is a syntax error.
//! Titles weigh more than bodies. Each hit carries a snippet of its body
//! around the first match, matches in `[` `]`.
//!
//! [`search`] is the API; inside, `query` turns the user's words into the
//! FTS5 query, `store::search` ranks and reads the archives (the statement
//! and its shape are documented there), `snippet` cuts each hit's snippet
//! and `stem` folds and stems words the way the snippet compares them.

use rusqlite::Connection;
use serde::{Deserialize, Serialize};

use g2_core::validate;

use crate::{Error, Result, store};

pub mod passages;
mod query;
pub mod question;
mod snippet;
mod stem;

pub use query::fts_query;
pub(crate) use snippet::{SnippetTerms, make_snippet};
pub(crate) use stem::stem;

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
    store::search::archive_hits(conn, &fts, limit, group, |body| make_snippet(body, &terms))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::search::tests::store_with;

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
}
