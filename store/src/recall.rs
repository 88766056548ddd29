//! Recall's tables: `archive_passages` (with `passages_fts`, kept by
//! triggers) written when an archive is recorded or reindexed, and the
//! candidate query `memory::recall` ranks.
//!
//! Candidates are found by FTS5 with an `OR` of the question's words and
//! ranked by bm25() inside the group only: the group's passages are joined
//! by key before bm25() runs, as `store::search` does for archives, so a
//! group never sees another's passages and a small group's question costs
//! little however large the others are.

use crate::db::{Db, Dialect, Row, read_row};
use crate::params;

use super::passages::Passage;
use super::{Result, query_all};

/// Records an archive's passages in the caller's transaction, each dated
/// by its messages, else `at` (the archive's time).
pub fn insert_passages(
    tx: &Db<'_>,
    archive_id: i64,
    group: &str,
    at: &str,
    passages: &[Passage],
) -> Result<()> {
    for p in passages {
        tx.execute(
            "INSERT INTO archive_passages (archive_id, group_folder, ordinal, turn_start, turn_end, text, at, at_end)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
            archive_id,
            group,
            p.ordinal,
            p.turn_start,
            p.turn_end,
            p.text,
            p.first.as_deref().unwrap_or(at),
            p.last.as_deref().or(p.first.as_deref()).unwrap_or(at)
        ],
        )?;
    }
    Ok(())
}

/// Up to `limit` archives that have no passages yet, after id `after` in
/// id order: (id, group, created_at, body). Read in pages so that a home
/// of many large archives is never held in memory (or in one transaction)
/// at once.
pub fn archives_without_passages(
    conn: &Db<'_>,
    after: i64,
    limit: i64,
) -> Result<Vec<(i64, String, String, String)>> {
    query_all(
        conn,
        "SELECT a.id, a.group_folder, a.created_at, f.body
         FROM conversation_archives a
         CROSS JOIN archives_fts f ON f.rowid = a.id
         WHERE a.id > ?1
           AND NOT EXISTS (SELECT 1 FROM archive_passages p WHERE p.archive_id = a.id)
         ORDER BY a.id
         LIMIT ?2",
        params![after, limit],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
    )
}

/// How many archives have no passages yet.
pub fn count_archives_without_passages(conn: &Db<'_>) -> Result<i64> {
    conn.query_row(
        "SELECT count(*) FROM conversation_archives a
         WHERE NOT EXISTS (SELECT 1 FROM archive_passages p WHERE p.archive_id = a.id)",
        (),
        |r| r.get(0),
    )
}

/// Deletes every passage (their index rows go with them).
pub fn clear_passages(tx: &Db<'_>) -> Result<usize> {
    tx.execute("DELETE FROM archive_passages", ())
}

/// The columns [`row`] reads, before the score and the group.
macro_rules! passage_columns {
    () => {
        "p.id, p.archive_id, p.ordinal, p.turn_start, p.turn_end, p.text, p.at, p.at_end,
         a.name, a.path, a.session_id"
    };
}

/// A passage that matched, with its archive.
#[derive(Debug, Clone)]
pub struct PassageRow {
    pub id: i64,
    pub archive_id: i64,
    pub ordinal: i64,
    pub turn_start: i64,
    pub turn_end: i64,
    pub text: String,
    /// When its first message was said (RFC 3339, UTC); for passages
    /// recorded before messages were dated, the archive's time.
    pub at: String,
    /// When its last message was said; none when not known.
    pub at_end: Option<String>,
    pub archive_name: String,
    pub archive_path: String,
    pub session_id: Option<String>,
    /// bm25(), made "higher is better".
    pub score: f64,
    /// Its group (the asking group's, or `global`).
    pub group: String,
}

const CANDIDATES: &str = concat!(
    "SELECT ",
    passage_columns!(),
    ", s.score, p.group_folder
 FROM (SELECT id, score
       FROM (SELECT passages_fts.rowid AS id, bm25(passages_fts) AS score
             FROM passages_fts
             CROSS JOIN archive_passages g ON g.id = passages_fts.rowid
             WHERE passages_fts MATCH ?1 AND g.group_folder IN (?2, ?5)
             ORDER BY passages_fts.rowid DESC
             LIMIT ?4) AS newest
       ORDER BY score
       LIMIT ?3) AS s
 CROSS JOIN archive_passages p ON p.id = s.id
 CROSS JOIN conversation_archives a ON a.id = p.archive_id
 ORDER BY s.score"
);

/// [`CANDIDATES`] on PostgreSQL: its `passages_fts` carries each passage's
/// group, so the newest matches are found without a join (joined, the
/// planner walked every passage newest first), and `ts_rank` reads the
/// `tsvector` of those only.
const CANDIDATES_PG: &str = concat!(
    "SELECT ",
    passage_columns!(),
    ", s.score, p.group_folder
 FROM (SELECT f.rowid AS id, bm25(f) AS score
       FROM (SELECT passages_fts.rowid AS id
             FROM passages_fts
             WHERE passages_fts MATCH ?1 AND passages_fts.group_folder IN (?2, ?5)
             ORDER BY passages_fts.rowid DESC
             LIMIT ?4) AS newest
       CROSS JOIN passages_fts f ON f.rowid = newest.id
       ORDER BY score
       LIMIT ?3) AS s
 CROSS JOIN archive_passages p ON p.id = s.id
 CROSS JOIN conversation_archives a ON a.id = p.archive_id
 ORDER BY s.score"
);

/// How long before a window a passage may start and still reach into it
/// (a passage's messages span at most a few days).
pub const SPAN_DAYS: i64 = 7;

/// The group's passages said within any of `windows` (UTC `[from, to)`,
/// RFC 3339 as the rows hold them: a passage whose first message is
/// before `to` and whose last is at or after `from`), newest first, at
/// most `limit` a window: "what did we say last Tuesday?" is answered by
/// Tuesday's passages whatever their words. One seek of the (group, time)
/// index per window, reaching [`SPAN_DAYS`] before it.
pub fn passages_in(
    conn: &Db<'_>,
    group: &str,
    windows: &[(String, String)],
    limit: i64,
) -> Result<Vec<PassageRow>> {
    let mut out: Vec<PassageRow> = Vec::new();
    for (from, to) in windows {
        let reach = chrono::DateTime::parse_from_rfc3339(from)
            .map(|f| {
                (f - chrono::Duration::days(SPAN_DAYS))
                    .to_utc()
                    .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
            })
            .unwrap_or_else(|_| from.clone());
        let rows = query_all(
            conn,
            &format!(
                "{PASSAGE}
                 WHERE p.group_folder = ?1 AND p.at >= ?2 AND p.at < ?3
                   AND coalesce(p.at_end, p.at) >= ?4
                 ORDER BY p.at DESC, p.id
                 LIMIT ?5"
            ),
            params![group, reach, to, from, limit],
            row,
        )?;
        for r in rows {
            if !out.iter().any(|x| x.id == r.id) {
                out.push(r);
            }
        }
    }
    Ok(out)
}

/// bm25() made "higher is better".
fn bm25_score(r: &Row<'_>, i: usize) -> Result<f64> {
    Ok(-r.get::<f64>(i)?)
}

fn row(r: &Row<'_>) -> Result<PassageRow> {
    Ok(read_row!(r => PassageRow {
        id, archive_id, ordinal, turn_start, turn_end, text, at, at_end, archive_name, archive_path,
        session_id, score = bm25_score, group,
    }))
}

const PASSAGE: &str = concat!(
    "SELECT ",
    passage_columns!(),
    ", 0.0, p.group_folder
 FROM archive_passages p CROSS JOIN conversation_archives a ON a.id = p.archive_id"
);

/// One passage by id, with its group.
pub fn passage(conn: &Db<'_>, id: i64) -> Result<Option<(String, PassageRow)>> {
    Ok(
        query_all(conn, &format!("{PASSAGE} WHERE p.id = ?1"), [id], |r| {
            let p = row(r)?;
            Ok((p.group.clone(), p))
        })?
        .into_iter()
        .next(),
    )
}

/// About how many passages there are, in one index seek: the newest id
/// (ids are not reused, so deletions make it high, never low).
pub fn passage_count_estimate(conn: &Db<'_>) -> Result<i64> {
    conn.query_row(
        "SELECT coalesce(max(id), 0) FROM archive_passages",
        (),
        |r| r.get(0),
    )
}

/// The passages of an archive from ordinal `from` to `to`, in order.
pub fn passages_between(
    conn: &Db<'_>,
    archive_id: i64,
    from: i64,
    to: i64,
) -> Result<Vec<PassageRow>> {
    query_all(
        conn,
        &format!(
            "{PASSAGE} WHERE p.archive_id = ?1 AND p.ordinal BETWEEN ?2 AND ?3 ORDER BY p.ordinal"
        ),
        params![archive_id, from, to],
        row,
    )
}

/// Passages one candidate query ranks at most: the group's newest that
/// match. Bounds a question's cost however many passages hold its words
/// (FTS5 walks a match newest first and stops there; bm25() is computed
/// for those rows only).
pub const SCAN: i64 = 500;

/// The best `limit` passages of `group` matching the FTS5 query `fts`,
/// among its newest [`SCAN`] that match.
pub fn passage_candidates(
    conn: &Db<'_>,
    fts: &str,
    groups: [&str; 2],
    limit: i64,
) -> Result<Vec<PassageRow>> {
    let sql = match conn.dialect() {
        Dialect::Sqlite => CANDIDATES,
        Dialect::Postgres => CANDIDATES_PG,
    };
    query_all(
        conn,
        sql,
        params![fts, groups[0], limit, SCAN, groups[1]],
        row,
    )
}

/// Up to `limit` of the newest passages of `group` matching the FTS5
/// query `fts`, unranked (score 0): FTS5 walks the match newest first and
/// stops there, so the cost is that of the rows read, however common the
/// words.
pub fn newest_matching(
    conn: &Db<'_>,
    fts: &str,
    groups: [&str; 2],
    limit: i64,
) -> Result<Vec<PassageRow>> {
    // PostgreSQL: the newest matches by the group `passages_fts` carries
    // first, then their rows (see CANDIDATES_PG).
    let sql = match conn.dialect() {
        Dialect::Sqlite => concat!(
            "SELECT ",
            passage_columns!(),
            ", 0.0, p.group_folder
             FROM passages_fts
             CROSS JOIN archive_passages p ON p.id = passages_fts.rowid
             CROSS JOIN conversation_archives a ON a.id = p.archive_id
             WHERE passages_fts MATCH ?1 AND p.group_folder IN (?2, ?4)
             ORDER BY passages_fts.rowid DESC
             LIMIT ?3"
        ),
        Dialect::Postgres => concat!(
            "SELECT ",
            passage_columns!(),
            ", 0.0, p.group_folder
             FROM (SELECT passages_fts.rowid AS id FROM passages_fts
                   WHERE passages_fts MATCH ?1 AND passages_fts.group_folder IN (?2, ?4)
                   ORDER BY passages_fts.rowid DESC
                   LIMIT ?3) AS newest
             CROSS JOIN archive_passages p ON p.id = newest.id
             CROSS JOIN conversation_archives a ON a.id = p.archive_id
             ORDER BY p.id DESC"
        ),
    };
    matching(conn, sql, fts, groups, limit, row)
}

/// The best `limit` passages of `groups` matching the FTS5 query `fts`, by
/// bm25() over every passage that matches (no scan bound: its cost grows
/// with how many passages hold the question's words).
pub fn bm25_passages(
    conn: &Db<'_>,
    fts: &str,
    groups: [&str; 2],
    limit: i64,
) -> Result<Vec<PassageRow>> {
    const SQL: &str = concat!(
        "SELECT ",
        passage_columns!(),
        ", s.score, p.group_folder
         FROM (SELECT passages_fts.rowid AS id, bm25(passages_fts) AS score
               FROM passages_fts
               CROSS JOIN archive_passages g ON g.id = passages_fts.rowid
               WHERE passages_fts MATCH ?1 AND g.group_folder IN (?2, ?4)
               ORDER BY score
               LIMIT ?3) AS s
         CROSS JOIN archive_passages p ON p.id = s.id
         CROSS JOIN conversation_archives a ON a.id = p.archive_id
         ORDER BY s.score"
    );
    matching(conn, SQL, fts, groups, limit, row)
}

/// Runs a query of `groups` matching the FTS5 query `fts`, at most `limit`
/// rows: `?1` the query, `?2` and `?4` the groups, `?3` the limit.
fn matching<T>(
    conn: &Db<'_>,
    sql: &str,
    fts: &str,
    groups: [&str; 2],
    limit: i64,
    read: fn(&Row<'_>) -> Result<T>,
) -> Result<Vec<T>> {
    query_all(conn, sql, params![fts, groups[0], limit, groups[1]], read)
}

/// The passages with these ids that belong to `groups` (score 0).
pub fn passages_by_ids(conn: &Db<'_>, ids: &[i64], groups: [&str; 2]) -> Result<Vec<PassageRow>> {
    query_all(
        conn,
        concat!(
            "SELECT ",
            passage_columns!(),
            ", 0.0, p.group_folder
             FROM json_each(?1) j
             CROSS JOIN archive_passages p ON p.id = j.value
             CROSS JOIN conversation_archives a ON a.id = p.archive_id
             WHERE p.group_folder IN (?2, ?3)"
        )
        .replace("json_each(?1) j", json_values(conn, 1, "j").as_str())
        .replace(
            "p.id = j.value",
            if conn.dialect() == Dialect::Postgres {
                "p.id = j.value::bigint"
            } else {
                "p.id = j.value"
            },
        )
        .as_str(),
        params![
            serde_json::to_string(ids).unwrap_or_default(),
            groups[0],
            groups[1]
        ],
        row,
    )
}

/// Every passage of `group`, in id order.
pub fn group_passages(conn: &Db<'_>, group: &str) -> Result<Vec<PassageRow>> {
    query_all(
        conn,
        &format!("{PASSAGE} WHERE p.group_folder = ?1 ORDER BY p.id"),
        [group],
        row,
    )
}

/// A captured prompt that matched, with its reply.
#[derive(Debug, Clone)]
pub struct PromptRow {
    /// The batch's id.
    pub id: i64,
    pub group: String,
    /// Claude Code's session id.
    pub session_id: String,
    pub prompt_number: i64,
    pub prompt: String,
    pub reply: String,
    /// When it was said: its first message's time, else when it was
    /// captured.
    pub at: String,
}

const PROMPT: &str = "SELECT b.id, b.group_folder, m.content_session_id, b.prompt_number, b.prompt,
        coalesce(b.reply, ''), coalesce(b.said_at, b.started_at)
 FROM prompt_batches b CROSS JOIN memory_sessions m ON m.id = b.session_id";

fn prompt_row(r: &Row<'_>) -> Result<PromptRow> {
    Ok(read_row!(r => PromptRow {
        id, group, session_id, prompt_number, prompt, reply, at,
    }))
}

/// Up to `limit` of the newest captured prompts of `groups` matching the
/// FTS5 query `fts` that no archive holds yet (said after their session's
/// last archive: the live conversation), unranked. Archived prompts are
/// recalled as archive passages; a prompt still being answered (`active`)
/// is the asker's own turn and is left out.
pub fn unarchived_prompts(
    conn: &Db<'_>,
    fts: &str,
    groups: [&str; 2],
    limit: i64,
) -> Result<Vec<PromptRow>> {
    matching(
        conn,
        &format!(
            "{PROMPT}
             WHERE b.id IN (SELECT prompts_fts.rowid FROM prompts_fts
                            CROSS JOIN prompt_batches g ON g.id = prompts_fts.rowid
                            WHERE prompts_fts MATCH ?1 AND g.group_folder IN (?2, ?4)
                              AND g.status <> 'active'
                              AND NOT EXISTS (
                                SELECT 1 FROM memory_sessions gm
                                CROSS JOIN conversation_archives a
                                  ON a.session_id = gm.content_session_id
                                WHERE gm.id = g.session_id AND a.created_at >= g.started_at)
                            ORDER BY prompts_fts.rowid DESC
                            LIMIT ?3)
             ORDER BY b.id DESC"
        ),
        fts,
        groups,
        limit,
        prompt_row,
    )
}

/// The captured prompts with these ids that [`unarchived_prompts`] would
/// return (of `groups`, answered, no archive holding them yet): those
/// found by meaning.
pub fn unarchived_prompts_by_ids(
    conn: &Db<'_>,
    ids: &[i64],
    groups: [&str; 2],
) -> Result<Vec<PromptRow>> {
    query_all(
        conn,
        &format!(
            "{PROMPT}
             WHERE {} AND b.group_folder IN (?2, ?3) AND b.status <> 'active'
               AND NOT EXISTS (
                 SELECT 1 FROM conversation_archives a
                 WHERE a.session_id = m.content_session_id AND a.created_at >= b.started_at)
             ORDER BY b.id DESC",
            crate::db::id_in_json(conn.dialect(), "b.id", 1)
        ),
        params![
            serde_json::to_string(ids).unwrap_or_default(),
            groups[0],
            groups[1]
        ],
        prompt_row,
    )
}

/// One captured prompt by its batch id.
pub fn prompt(conn: &Db<'_>, id: i64) -> Result<Option<PromptRow>> {
    Ok(
        query_all(conn, &format!("{PROMPT} WHERE b.id = ?1"), [id], prompt_row)?
            .into_iter()
            .next(),
    )
}

/// The rows of the JSON array in parameter `n` as a table `alias` with a
/// text column `value`: SQLite's `json_each`, PostgreSQL's
/// `jsonb_array_elements_text`.
fn json_values(conn: &Db<'_>, n: usize, alias: &str) -> String {
    match conn.dialect() {
        Dialect::Sqlite => format!("json_each(?{n}) {alias}"),
        Dialect::Postgres => format!("jsonb_array_elements_text(?{n}::jsonb) {alias}(value)"),
    }
}

/// Dates passage `ordinal` of archive `archive_id`: when its first message
/// was said and its last (RFC 3339, UTC).
pub fn set_passage_times(
    tx: &Db<'_>,
    archive_id: i64,
    ordinal: i64,
    at: &str,
    at_end: Option<&str>,
) -> Result<usize> {
    tx.execute(
        "UPDATE archive_passages SET at = ?1, at_end = ?2 WHERE archive_id = ?3 AND ordinal = ?4",
        params![at, at_end, archive_id, ordinal],
    )
}

/// An archive as `g2 memory reindex` dates it again: its row and its
/// indexed text.
#[derive(Debug, Clone)]
pub struct ArchiveToDate {
    pub id: i64,
    pub group: String,
    pub session_id: Option<String>,
    pub created_at: String,
    pub body: String,
}

/// Up to `limit` archives after id `after`, in id order, with their
/// indexed text: read in pages, so a home of many large archives is never
/// held in memory at once.
pub fn archives_after(conn: &Db<'_>, after: i64, limit: i64) -> Result<Vec<ArchiveToDate>> {
    query_all(
        conn,
        "SELECT a.id, a.group_folder, a.session_id, a.created_at, f.body
         FROM conversation_archives a
         CROSS JOIN archives_fts f ON f.rowid = a.id
         WHERE a.id > ?1
         ORDER BY a.id
         LIMIT ?2",
        params![after, limit],
        |r| {
            Ok(ArchiveToDate {
                id: r.get(0)?,
                group: r.get(1)?,
                session_id: r.get(2)?,
                created_at: r.get(3)?,
                body: r.get(4)?,
            })
        },
    )
}

/// A stored passage as the reindex compares it with a new split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredPassage {
    pub ordinal: i64,
    pub turn_start: i64,
    pub turn_end: i64,
    pub text: String,
    pub at: String,
    pub at_end: Option<String>,
}

/// The passages of archive `archive_id`, by ordinal.
pub fn archive_passages(conn: &Db<'_>, archive_id: i64) -> Result<Vec<StoredPassage>> {
    query_all(
        conn,
        "SELECT ordinal, turn_start, turn_end, text, at, at_end
         FROM archive_passages WHERE archive_id = ?1 ORDER BY ordinal",
        [archive_id],
        |r| {
            Ok(StoredPassage {
                ordinal: r.get(0)?,
                turn_start: r.get(1)?,
                turn_end: r.get(2)?,
                text: r.get(3)?,
                at: r.get(4)?,
                at_end: r.get(5)?,
            })
        },
    )
}

/// Replaces archive `archive_id`'s passages with `passages` (dated as
/// [`insert_passages`] dates them) in the caller's transaction; false,
/// with nothing written, when the archive is gone.
pub fn replace_passages(
    tx: &Db<'_>,
    archive_id: i64,
    group: &str,
    at: &str,
    passages: &[Passage],
) -> Result<bool> {
    tx.execute(
        "DELETE FROM archive_passages WHERE archive_id = ?1",
        [archive_id],
    )?;
    let there: i64 = tx.query_row(
        "SELECT count(*) FROM conversation_archives WHERE id = ?1",
        [archive_id],
        |r| r.get(0),
    )?;
    if there == 0 {
        return Ok(false);
    }
    insert_passages(tx, archive_id, group, at, passages)?;
    Ok(true)
}

/// Rebuilds the passages' full-text index from their rows (the reindex
/// keeps passages that are still their archive's split).
pub fn rebuild_passage_index(tx: &Db<'_>) -> Result<()> {
    match tx.dialect() {
        Dialect::Sqlite => {
            tx.execute_batch("INSERT INTO passages_fts (passages_fts) VALUES ('rebuild');")
        }
        Dialect::Postgres => tx.execute_batch(
            "DELETE FROM passages_fts;
             INSERT INTO passages_fts (rowid, text, group_folder)
             SELECT id, text, group_folder FROM archive_passages;",
        ),
    }
}
