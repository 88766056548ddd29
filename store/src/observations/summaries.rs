//! `session_summaries` (with `summaries_fts`): what a session did, one
//! summary per session, a newer one replacing it.

use g2_core::validate::{GroupFolder, MemoryFolder};
use serde::{Deserialize, Serialize};

use super::memory_folder_at;
use crate::db::{Db, Optional, Row, read_row};
use crate::params;
use crate::{Result, query_all};

/// What a session did, for the archive, history and later sessions (stored
/// by [`insert_summary`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SummaryDraft {
    /// What was asked.
    pub request: String,
    /// What was looked into.
    pub investigated: String,
    /// What was learned.
    pub learned: String,
    /// What was done.
    pub completed: String,
    /// What is left to do.
    pub next_steps: String,
    /// A short title (at most 80 characters) for a session cleared without
    /// a name.
    pub title: String,
}

/// A session's summary as read back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SummaryRow {
    pub id: i64,
    pub group: MemoryFolder,
    /// Claude Code's session id.
    pub session_id: String,
    pub title: String,
    pub request: String,
    pub investigated: String,
    pub learned: String,
    pub completed: String,
    pub next_steps: String,
    pub created_at: String,
    /// When its session's first and last prompts were said (RFC 3339, UTC;
    /// each prompt's said time, else its start): its first is `created_at`
    /// when not known.
    pub said_from: String,
    pub said_to: Option<String>,
}

const SUMMARY_COLUMNS: &str = "m.id, m.group_folder, s.content_session_id, m.title, m.request,
    m.investigated, m.learned, m.completed, m.next_steps, m.created_at,
    coalesce(m.said_from, m.created_at), m.said_to";

fn summary_from_row(r: &Row<'_>) -> Result<SummaryRow> {
    Ok(read_row!(r => SummaryRow {
        id, group = memory_folder_at, session_id, title, request, investigated, learned, completed,
        next_steps, created_at, said_from, said_to,
    }))
}

/// Records a session's summary (a newer one replaces it: the session
/// compacted again or completed) and fills the session's title when it has
/// none. It spans the times its session's prompts were said.
pub fn insert_summary(
    tx: &Db<'_>,
    group: &GroupFolder,
    session: i64,
    s: &SummaryDraft,
    at: &str,
) -> Result<()> {
    tx.execute(
        "INSERT INTO session_summaries (session_id, group_folder, title, request, investigated,
           learned, completed, next_steps, created_at, said_from, said_to)
         SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9,
           min(coalesce(b.said_at, b.started_at)), max(coalesce(b.said_at, b.started_at))
         FROM prompt_batches b WHERE b.session_id = ?1
         ON CONFLICT (session_id) DO UPDATE SET title = excluded.title,
           request = excluded.request, investigated = excluded.investigated,
           learned = excluded.learned, completed = excluded.completed,
           next_steps = excluded.next_steps, created_at = excluded.created_at,
           said_from = excluded.said_from, said_to = excluded.said_to",
        params![
            session,
            group.as_str(),
            s.title,
            s.request,
            s.investigated,
            s.learned,
            s.completed,
            s.next_steps,
            at
        ],
    )?;
    tx.execute(
        "UPDATE memory_sessions SET title = ?2 WHERE id = ?1 AND title IS NULL AND ?2 <> ''",
        params![session, s.title],
    )?;
    Ok(())
}

/// One summary by id, with its group.
pub fn summary_by_id(conn: &Db<'_>, id: i64) -> Result<Option<SummaryRow>> {
    conn.query_row(
        &format!(
            "SELECT {SUMMARY_COLUMNS} FROM session_summaries m
                 CROSS JOIN memory_sessions s ON s.id = m.session_id WHERE m.id = ?1"
        ),
        [id],
        summary_from_row,
    )
    .optional()
}

/// The summaries of `groups` with these ids: those found by meaning.
pub fn summaries_by_ids(conn: &Db<'_>, ids: &[i64], groups: [&str; 2]) -> Result<Vec<SummaryRow>> {
    query_all(
        conn,
        &format!(
            "SELECT {SUMMARY_COLUMNS} FROM session_summaries m
                 CROSS JOIN memory_sessions s ON s.id = m.session_id
             WHERE {} AND m.group_folder IN (?2, ?3)",
            crate::db::id_in_json(conn.dialect(), "m.id", 1)
        ),
        params![
            serde_json::to_string(ids).unwrap_or_default(),
            groups[0],
            groups[1]
        ],
        summary_from_row,
    )
}

/// The summary of a group's session (by Claude Code's session id).
pub fn summary(conn: &Db<'_>, group: &GroupFolder, session_id: &str) -> Result<Option<SummaryRow>> {
    conn.query_row(
        &format!(
            "SELECT {SUMMARY_COLUMNS} FROM session_summaries m
                 CROSS JOIN memory_sessions s ON s.id = m.session_id
                 WHERE m.group_folder = ?1 AND s.content_session_id = ?2"
        ),
        params![group.as_str(), session_id],
        summary_from_row,
    )
    .optional()
}

/// A group's latest summaries, newest first.
pub fn latest_summaries(conn: &Db<'_>, group: &GroupFolder, n: i64) -> Result<Vec<SummaryRow>> {
    query_all(
        conn,
        &format!(
            "SELECT {SUMMARY_COLUMNS} FROM session_summaries m
             CROSS JOIN memory_sessions s ON s.id = m.session_id
             WHERE m.group_folder = ?1 ORDER BY m.created_at DESC, m.id DESC LIMIT ?2"
        ),
        params![group.as_str(), n],
        summary_from_row,
    )
}

/// Summaries of the group matching the FTS5 query `fts`, best first, with
/// bm25() made "higher is better".
pub fn matching_summaries(
    conn: &Db<'_>,
    groups: [&str; 2],
    fts: &str,
    limit: i64,
) -> Result<Vec<(SummaryRow, f64)>> {
    query_all(
        conn,
        &format!(
            "SELECT {SUMMARY_COLUMNS}, x.score
             FROM (SELECT summaries_fts.rowid AS id, bm25(summaries_fts, 2.0, 1.0) AS score
                   FROM summaries_fts
                   CROSS JOIN session_summaries g ON g.id = summaries_fts.rowid
                   WHERE summaries_fts MATCH ?1 AND g.group_folder IN (?2, ?4)
                   ORDER BY score LIMIT ?3) AS x
             CROSS JOIN session_summaries m ON m.id = x.id
             CROSS JOIN memory_sessions s ON s.id = m.session_id
             ORDER BY x.score"
        ),
        params![fts, groups[0], limit, groups[1]],
        |r| Ok((summary_from_row(r)?, -r.get::<f64>(12)?)),
    )
}
