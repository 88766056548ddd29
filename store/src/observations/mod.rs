//! The processor's tables: `observations` (with `observations_fts`),
//! `session_summaries` (with `summaries_fts`), and the job state of
//! `memory_queue` (a batch to extract) and `summary_queue` (a session to
//! summarise). Every statement is scoped to its group where a caller names
//! one: another group's observation is never found, changed or forgotten.
//!
//! A job's outcome and its job state change in the caller's one
//! transaction, so a host killed mid-extraction stores nothing of that job
//! and finds it `pending` again (`release_claims` at start).

use crate::db::{Db, Dialect, Optional, Row};
use crate::params;
use serde::{Deserialize, Serialize};

use g2_core::validate::{GroupFolder, MemoryFolder};

use super::{Error, Result, query_all};

/// What kind of thing an observation records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Something chosen or agreed ("we'll use Postgres", "let's meet at 7").
    Decision,
    /// Something found out by looking (a cause, a result, a location).
    Discovery,
    /// Something stated to be so ("the boat is moored at pier 7").
    Fact,
    /// What someone likes, wants or always does.
    Preference,
    /// A file or system changed.
    Change,
    /// A fault found and fixed.
    Bugfix,
    /// Something someone committed to do, or asked to be done later.
    Todo,
    /// Who someone is (name, role, relation).
    Person,
}

impl Kind {
    pub const ALL: [Kind; 8] = [
        Kind::Decision,
        Kind::Discovery,
        Kind::Fact,
        Kind::Preference,
        Kind::Change,
        Kind::Bugfix,
        Kind::Todo,
        Kind::Person,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Decision => "decision",
            Kind::Discovery => "discovery",
            Kind::Fact => "fact",
            Kind::Preference => "preference",
            Kind::Change => "change",
            Kind::Bugfix => "bugfix",
            Kind::Todo => "todo",
            Kind::Person => "person",
        }
    }

    pub fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// What one batch taught (an extractor's answer, stored by [`insert`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObservationDraft {
    pub kind: Kind,
    /// One line, at most 120 characters.
    pub title: String,
    /// A few sentences: what, and why it matters.
    pub narrative: String,
    /// Short standalone statements.
    pub facts: Vec<String>,
    /// Files it concerns (read or changed).
    pub files: Vec<String>,
    /// 1 (trivia) to 10 (must never be forgotten).
    pub importance: u8,
    /// The people it concerns (sender names from routed chat).
    pub concerns: Vec<String>,
}

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

/// Which job table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Queue {
    /// `memory_queue`: a prompt batch to extract (key: the batch's row).
    Batches,
    /// `summary_queue`: a session to summarise (key: the session's row).
    Sessions,
}

impl Queue {
    fn table_key(self) -> (&'static str, &'static str) {
        match self {
            Queue::Batches => ("memory_queue", "batch_id"),
            Queue::Sessions => ("summary_queue", "session_id"),
        }
    }
}

/// Jobs `host`'s earlier process left `processing` (and those claimed
/// before claims were named) go back to `pending`: at its start.
pub fn release_claims(tx: &Db<'_>, host: &str) -> Result<usize> {
    release_where(tx, "(claimed_by IS NULL OR claimed_by = ?1)", Some(host))
}

/// Jobs claimed by a host that left (no longer among the store's hosts) or
/// whose process is gone (`absent`: [`crate::leases::hosts`] without their
/// presence) go back to `pending`; nothing on SQLite, where the one host
/// releases its own at start. Returns how many.
pub fn release_absent_claims(tx: &Db<'_>, absent: &[&str]) -> Result<usize> {
    if tx.dialect() == Dialect::Sqlite {
        return Ok(0);
    }
    let mut n = release_where(
        tx,
        "claimed_by IS NOT NULL AND claimed_by NOT IN (SELECT host_id FROM cluster_hosts)",
        None,
    )?;
    for h in absent {
        n += release_where(tx, "claimed_by = ?1", Some(h))?;
    }
    Ok(n)
}

/// The `processing` jobs `which` picks (`?1`: `host`) go back to `pending`.
fn release_where(tx: &Db<'_>, which: &str, host: Option<&str>) -> Result<usize> {
    let mut n = 0;
    for q in [Queue::Batches, Queue::Sessions] {
        let (table, _) = q.table_key();
        let sql = format!(
            "UPDATE {table} SET state = 'pending', claimed_by = NULL
             WHERE state = 'processing' AND {which}"
        );
        n += match host {
            Some(h) => tx.execute(&sql, [h])?,
            None => tx.execute(&sql, ())?,
        };
    }
    Ok(n)
}

/// Claims up to `n` pending jobs that are due at `now`, oldest first, for
/// `host`: `processing`, one more attempt. Returns their keys.
pub fn claim(tx: &Db<'_>, q: Queue, now: &str, n: usize, host: &str) -> Result<Vec<i64>> {
    let (table, key) = q.table_key();
    let keys: Vec<i64> = query_all(
        tx,
        &format!(
            "SELECT {key} FROM {table}
             WHERE state = 'pending' AND (next_attempt_at IS NULL OR next_attempt_at <= ?1)
             ORDER BY queued_at, {key} LIMIT ?2"
        ),
        params![now, n as i64],
        |r| r.get(0),
    )?;
    for k in &keys {
        tx.execute(
            &format!(
                "UPDATE {table} SET state = 'processing', attempts = attempts + 1, claimed_by = ?2
                 WHERE {key} = ?1"
            ),
            params![k, host],
        )?;
    }
    Ok(keys)
}

/// Refuses the write it runs in unless `host` still holds the claim on
/// job `key` (another host may have released it and run it meanwhile: its
/// outcome is the one kept).
pub fn check_claim(tx: &Db<'_>, q: Queue, key: i64, host: &str) -> Result<()> {
    let (table, k) = q.table_key();
    let ours = tx
        .query_row(
            &format!(
                "SELECT 1 FROM {table} WHERE {k} = ?1 AND state = 'processing' AND claimed_by = ?2"
            ),
            params![key, host],
            |_| Ok(()),
        )
        .optional()?
        .is_some();
    if ours {
        Ok(())
    } else {
        Err(Error::Conflict(format!(
            "{table} job {key}: no longer claimed by {host}; its outcome is dropped"
        )))
    }
}

/// A job's attempts so far.
pub fn attempts(conn: &Db<'_>, q: Queue, key: i64) -> Result<i64> {
    let (table, k) = q.table_key();
    Ok(conn
        .query_row(
            &format!("SELECT attempts FROM {table} WHERE {k} = ?1"),
            [key],
            |r| r.get(0),
        )
        .optional()?
        .unwrap_or(0))
}

/// The job is done (a batch job also marks its batch `processed`); refused
/// unless `host` still holds its claim ([`check_claim`]).
pub fn done(tx: &Db<'_>, q: Queue, key: i64, host: &str) -> Result<()> {
    check_claim(tx, q, key, host)?;
    let (table, k) = q.table_key();
    tx.execute(
        &format!(
            "UPDATE {table} SET state = 'done', error = NULL, claimed_by = NULL WHERE {k} = ?1"
        ),
        [key],
    )?;
    if q == Queue::Batches {
        tx.execute(
            "UPDATE prompt_batches SET status = 'processed' WHERE id = ?1",
            [key],
        )?;
    }
    Ok(())
}

/// The job failed: `pending` again from `retry_at`, or `failed` for good
/// when `retry_at` is None; `error` says why. Refused unless `host` still
/// holds its claim ([`check_claim`]).
pub fn failed(
    tx: &Db<'_>,
    (q, key): (Queue, i64),
    host: &str,
    error: &str,
    retry_at: Option<&str>,
) -> Result<()> {
    check_claim(tx, q, key, host)?;
    let (table, k) = q.table_key();
    tx.execute(
        &format!(
            "UPDATE {table} SET state = CASE WHEN CAST(?3 AS TEXT) IS NULL THEN 'failed' ELSE 'pending' END,
               next_attempt_at = ?3, error = ?2, claimed_by = NULL WHERE {k} = ?1"
        ),
        params![key, error, retry_at],
    )?;
    Ok(())
}

/// A group's budget for today is used up: its pending jobs (and `key`,
/// claimed by `host` and not tried) wait until `until` with `error` saying
/// why; the claim's attempt is given back. Returns how many jobs wait.
/// Refused unless `host` still holds the claim ([`check_claim`]).
pub fn defer_group(
    tx: &Db<'_>,
    group: &GroupFolder,
    claimed: (Queue, i64),
    host: &str,
    until: &str,
    error: &str,
) -> Result<usize> {
    check_claim(tx, claimed.0, claimed.1, host)?;
    let (table, k) = claimed.0.table_key();
    tx.execute(
        &format!(
            "UPDATE {table} SET state = 'pending', attempts = max(attempts - 1, 0), claimed_by = NULL
             WHERE {k} = ?1 AND state = 'processing'"
        ),
        [claimed.1],
    )?;
    let batches = tx.execute(
        "UPDATE memory_queue SET next_attempt_at = ?2, error = ?3
         WHERE state = 'pending'
           AND batch_id IN (SELECT id FROM prompt_batches WHERE group_folder = ?1)",
        params![group.as_str(), until, error],
    )?;
    let sessions = tx.execute(
        "UPDATE summary_queue SET next_attempt_at = ?2, error = ?3
         WHERE state = 'pending'
           AND session_id IN (SELECT id FROM memory_sessions WHERE group_folder = ?1)",
        params![group.as_str(), until, error],
    )?;
    Ok(batches + sessions)
}

/// Sessions ready for a summary get a summary job: completed sessions, and
/// sessions that compacted (a `precompact` archive), once every batch that
/// is not still being answered is extracted (or failed for good). A done
/// job whose session completed or compacted again after it was queued is
/// queued again, so the summary grows with the session (the newer summary
/// replaces the older, `insert_summary`).
pub fn queue_summaries(tx: &Db<'_>, now: &str) -> Result<usize> {
    const SETTLED: &str = "EXISTS (SELECT 1 FROM prompt_batches b WHERE b.session_id = s.id)
           AND NOT EXISTS (SELECT 1 FROM prompt_batches b
                           LEFT JOIN memory_queue m ON m.batch_id = b.id
                           WHERE b.session_id = s.id AND b.status <> 'active'
                             AND coalesce(m.state, 'pending') NOT IN ('done', 'failed'))";
    let queued = tx.execute(
        &format!(
            "INSERT INTO summary_queue (session_id, queued_at)
             SELECT s.id, ?1 FROM memory_sessions s
             WHERE (s.status = 'completed'
                    OR EXISTS (SELECT 1 FROM conversation_archives a
                               WHERE a.session_id = s.content_session_id
                                 AND a.trigger = 'precompact'))
               AND NOT EXISTS (SELECT 1 FROM summary_queue q WHERE q.session_id = s.id)
               AND {SETTLED}"
        ),
        [now],
    )?;
    let again = tx.execute(
        &format!(
            "UPDATE summary_queue AS q
             SET state = 'pending', attempts = 0, next_attempt_at = NULL, error = NULL,
                 queued_at = ?1
             WHERE q.state = 'done'
               AND EXISTS (
                 SELECT 1 FROM memory_sessions s
                 WHERE s.id = q.session_id
                   AND ((s.status = 'completed' AND s.ended_at > q.queued_at)
                        OR EXISTS (SELECT 1 FROM conversation_archives a
                                   WHERE a.session_id = s.content_session_id
                                     AND a.trigger = 'precompact'
                                     AND a.created_at > q.queued_at))
                   AND {SETTLED})"
        ),
        [now],
    )?;
    Ok(queued + again)
}

/// How many jobs wait, by queue: (batches, sessions).
pub fn pending(conn: &Db<'_>) -> Result<(i64, i64)> {
    conn.query_row(
        "SELECT (SELECT count(*) FROM memory_queue WHERE state IN ('pending', 'processing')),
                (SELECT count(*) FROM summary_queue WHERE state IN ('pending', 'processing'))",
        (),
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
}

// --- observations -----------------------------------------------------------

/// An observation as read back.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ObservationRow {
    pub id: i64,
    pub group: MemoryFolder,
    pub kind: String,
    pub title: String,
    pub narrative: String,
    pub facts: Vec<String>,
    pub files: Vec<String>,
    pub concerns: Vec<String>,
    pub importance: i64,
    pub status: String,
    pub superseded_by: Option<i64>,
    pub origin: String,
    /// Claude Code's session id it came from.
    pub session_id: Option<String>,
    pub prompt_number: Option<i64>,
    pub created_at: String,
    /// The newest archive of the session it came from (relative to the
    /// home), once the session was archived.
    pub archive_path: Option<String>,
}

const OBSERVATION_COLUMNS: &str =
    "o.id, o.group_folder, o.kind, o.title, o.narrative, o.facts, o.files,
    o.concerns, o.importance, o.status, o.superseded_by, o.origin,
    (SELECT content_session_id FROM memory_sessions s WHERE s.id = o.session_id),
    (SELECT prompt_number FROM prompt_batches b WHERE b.id = o.batch_id), o.created_at,
    (SELECT a.path FROM memory_sessions s
     CROSS JOIN conversation_archives a ON a.session_id = s.content_session_id
     WHERE s.id = o.session_id AND a.group_folder = o.group_folder
     ORDER BY a.created_at DESC LIMIT 1)";

/// A column as a [`MemoryFolder`] (a group's folder or `global`).
fn memory_folder_at(r: &Row<'_>, i: usize) -> Result<MemoryFolder> {
    let name: String = r.get(i)?;
    MemoryFolder::new(name).map_err(|e| Error::Column {
        index: i,
        why: e.to_string(),
    })
}

fn observation_from_row(r: &Row<'_>) -> Result<ObservationRow> {
    let list = |i: usize| -> Result<Vec<String>> {
        let s: String = r.get(i)?;
        Ok(serde_json::from_str(&s).unwrap_or_default())
    };
    Ok(ObservationRow {
        id: r.get(0)?,
        group: memory_folder_at(r, 1)?,
        kind: r.get(2)?,
        title: r.get(3)?,
        narrative: r.get(4)?,
        facts: list(5)?,
        files: list(6)?,
        concerns: list(7)?,
        importance: r.get(8)?,
        status: r.get(9)?,
        superseded_by: r.get(10)?,
        origin: r.get(11)?,
        session_id: r.get(12)?,
        prompt_number: r.get(13)?,
        created_at: r.get(14)?,
        archive_path: r.get(15)?,
    })
}

/// Where an observation came from.
#[derive(Debug, Clone, Copy, Default)]
pub struct Provenance {
    /// The session's and the batch's rows.
    pub session: Option<i64>,
    pub batch: Option<i64>,
    /// A person or the agent asked for it to be remembered.
    pub remembered: bool,
}

/// Records an observation; an active one of the same group and kind whose
/// title says the same (`same_as`) is superseded by it. Returns its id.
pub fn insert(
    tx: &Db<'_>,
    group: &MemoryFolder,
    o: &ObservationDraft,
    from: Provenance,
    at: &str,
    same_as: impl Fn(&str) -> bool,
) -> Result<i64> {
    let list = |v: &[String]| serde_json::to_string(v).unwrap_or_else(|_| "[]".into());
    let id: i64 = tx.query_row(
        "INSERT INTO observations (group_folder, kind, title, narrative, facts, files, concerns,
           importance, origin, session_id, batch_id, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) RETURNING id",
        params![
            group.as_str(),
            o.kind.as_str(),
            o.title,
            o.narrative,
            list(&o.facts),
            list(&o.files),
            list(&o.concerns),
            i64::from(o.importance.clamp(1, 10)),
            if from.remembered {
                "remembered"
            } else {
                "extracted"
            },
            from.session,
            from.batch,
            at
        ],
        |r| r.get(0),
    )?;
    let older: Vec<(i64, String)> = query_all(
        tx,
        "SELECT id, title FROM observations
         WHERE group_folder = ?1 AND kind = ?2 AND status = 'active' AND id <> ?3",
        params![group.as_str(), o.kind.as_str(), id],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    for (old, title) in older {
        if same_as(&title) {
            supersede(tx, old, id)?;
        }
    }
    Ok(id)
}

/// A group's observations, most important and newest first; `all` includes
/// superseded ones and tombstones.
pub fn list(conn: &Db<'_>, group: &MemoryFolder, all: bool) -> Result<Vec<ObservationRow>> {
    first(conn, [group.as_str(), group.as_str()], all, -1)
}

/// The first `n` of [`list`] over one or two groups (the group and
/// `global`; a negative `n`: every one).
pub fn first(conn: &Db<'_>, groups: [&str; 2], all: bool, n: i64) -> Result<Vec<ObservationRow>> {
    // SQLite reads LIMIT -1 as no limit, PostgreSQL refuses it.
    let n = if n < 0 { i64::MAX } else { n };
    query_all(
        conn,
        &format!(
            "SELECT {OBSERVATION_COLUMNS} FROM observations o
             WHERE o.group_folder IN (?1, ?4) AND (?2 OR o.status = 'active')
             ORDER BY o.importance DESC, o.created_at DESC, o.id DESC
             LIMIT ?3"
        ),
        params![groups[0], all, n, groups[1]],
        observation_from_row,
    )
}

/// One observation of the group; None when the group has none such.
pub fn get(conn: &Db<'_>, group: &MemoryFolder, id: i64) -> Result<Option<ObservationRow>> {
    conn
        .query_row(
            &format!("SELECT {OBSERVATION_COLUMNS} FROM observations o WHERE o.id = ?1 AND o.group_folder = ?2"),
            params![id, group.as_str()],
            observation_from_row,
        )
        .optional()
}

/// The group an observation belongs to (for a person's command, which
/// names only the id).
pub fn group_of(conn: &Db<'_>, id: i64) -> Result<Option<MemoryFolder>> {
    conn.query_row(
        "SELECT group_folder FROM observations WHERE id = ?1",
        [id],
        |r| memory_folder_at(r, 0),
    )
    .optional()
}

/// Forgets an observation of the group: its text is emptied (the index
/// rows with it) and it stays as a tombstone. False when the group has no
/// such observation.
pub fn forget(tx: &Db<'_>, group: &MemoryFolder, id: i64) -> Result<bool> {
    Ok(tx.execute(
        "UPDATE observations SET status = 'forgotten', title = '', narrative = '', facts = '[]',
           files = '[]', concerns = '[]'
         WHERE id = ?1 AND group_folder = ?2",
        params![id, group.as_str()],
    )? == 1)
}

/// An observation's group and kind, while it is active.
pub fn active_kind(conn: &Db<'_>, id: i64) -> Result<Option<(String, String)>> {
    Ok(query_all(
        conn,
        "SELECT group_folder, kind FROM observations WHERE id = ?1 AND status = 'active'",
        [id],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?
    .into_iter()
    .next())
}

/// The other active observations of `group` and `kind` that `model` has
/// embedded: (id, vector bytes). The group is the first filter.
pub fn active_vectors(
    conn: &Db<'_>,
    group: &str,
    kind: &str,
    except: i64,
    model: &str,
) -> Result<Vec<(i64, Vec<u8>)>> {
    query_all(
        conn,
        "SELECT o.id, e.vector FROM observations o
         JOIN embeddings e ON e.kind = 'observation' AND e.item_id = o.id AND e.model = ?4
         WHERE o.group_folder = ?1 AND o.kind = ?2 AND o.status = 'active' AND o.id <> ?3",
        params![group, kind, except, model],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
}

/// Marks `old` superseded by `new`, when `old` is still active.
pub fn supersede(tx: &Db<'_>, old: i64, new: i64) -> Result<bool> {
    Ok(tx.execute(
        "UPDATE observations SET status = 'superseded', superseded_by = ?2
         WHERE id = ?1 AND status = 'active'",
        params![old, new],
    )? == 1)
}

/// Active observations of the group that match the FTS5 query `fts`,
/// best first, with their bm25() made "higher is better".
pub fn matching(
    conn: &Db<'_>,
    groups: [&str; 2],
    fts: &str,
    limit: i64,
) -> Result<Vec<(ObservationRow, f64)>> {
    query_all(
        conn,
        &format!(
            "SELECT {OBSERVATION_COLUMNS}, s.score
             FROM (SELECT observations_fts.rowid AS id, bm25(observations_fts, 4.0, 1.0, 2.0) AS score
                   FROM observations_fts
                   CROSS JOIN observations g ON g.id = observations_fts.rowid
                   WHERE observations_fts MATCH ?1 AND g.group_folder IN (?2, ?4)
                     AND g.status = 'active'
                   ORDER BY score LIMIT ?3) AS s
             CROSS JOIN observations o ON o.id = s.id
             ORDER BY s.score"
        ),
        params![fts, groups[0], limit, groups[1]],
        |r| Ok((observation_from_row(r)?, -r.get::<f64>(16)?)),
    )
}

// --- summaries --------------------------------------------------------------

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
}

const SUMMARY_COLUMNS: &str = "m.id, m.group_folder, s.content_session_id, m.title, m.request,
    m.investigated, m.learned, m.completed, m.next_steps, m.created_at";

fn summary_from_row(r: &Row<'_>) -> Result<SummaryRow> {
    Ok(SummaryRow {
        id: r.get(0)?,
        group: memory_folder_at(r, 1)?,
        session_id: r.get(2)?,
        title: r.get(3)?,
        request: r.get(4)?,
        investigated: r.get(5)?,
        learned: r.get(6)?,
        completed: r.get(7)?,
        next_steps: r.get(8)?,
        created_at: r.get(9)?,
    })
}

/// Records a session's summary (a newer one replaces it: the session
/// compacted again or completed) and fills the session's title when it has
/// none.
pub fn insert_summary(
    tx: &Db<'_>,
    group: &GroupFolder,
    session: i64,
    s: &SummaryDraft,
    at: &str,
) -> Result<()> {
    tx.execute(
        "INSERT INTO session_summaries (session_id, group_folder, title, request, investigated,
           learned, completed, next_steps, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
         ON CONFLICT (session_id) DO UPDATE SET title = excluded.title,
           request = excluded.request, investigated = excluded.investigated,
           learned = excluded.learned, completed = excluded.completed,
           next_steps = excluded.next_steps, created_at = excluded.created_at",
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
        |r| Ok((summary_from_row(r)?, -r.get::<f64>(10)?)),
    )
}

/// Rebuilds the observations' and summaries' full-text indexes from their
/// rows.
pub fn rebuild_indexes(tx: &Db<'_>) -> Result<()> {
    if tx.dialect() == Dialect::Postgres {
        return tx.execute_batch(
            "DELETE FROM observations_fts;
             INSERT INTO observations_fts (rowid, title, narrative, facts)
             SELECT id, title, narrative, facts FROM observations;
             DELETE FROM summaries_fts;
             INSERT INTO summaries_fts (rowid, title, body)
             SELECT s.id, s.title, summary_body(s) FROM session_summaries s;",
        );
    }
    tx.execute_batch(
        "INSERT INTO observations_fts (observations_fts) VALUES ('rebuild');
         DELETE FROM summaries_fts;
         INSERT INTO summaries_fts (rowid, title, body)
         SELECT id, title, request || char(10) || investigated || char(10) || learned
                || char(10) || completed || char(10) || next_steps
         FROM session_summaries;",
    )?;
    Ok(())
}
