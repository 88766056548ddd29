//! The processor's tables: `observations` (with `observations_fts`),
//! `session_summaries` (with `summaries_fts`), and the job state of
//! `memory_queue` (a batch to extract) and `summary_queue` (a session to
//! summarise). Every statement is scoped to its group where a caller names
//! one: another group's observation is never found, changed or forgotten.
//!
//! A job's outcome and its job state change in the caller's one
//! transaction, so a host killed mid-extraction stores nothing of that job
//! and finds it `pending` again (`release_claims` at start).
//!
//! Files: this one holds the observations; `summaries.rs` the session
//! summaries; `jobs.rs` the job state.

use crate::db::{Db, Dialect, Optional, Row};
use crate::params;
use serde::{Deserialize, Serialize};

use g2_core::validate::MemoryFolder;

use super::{Error, Result, query_all};

mod jobs;
mod summaries;

pub use jobs::*;
pub use summaries::*;

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
    /// When what it was learned from was said (RFC 3339, UTC): its prompt's
    /// said time, else the prompt's own; a remembered one's is when it was
    /// remembered; else `created_at`.
    pub said_at: String,
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
     ORDER BY a.created_at DESC LIMIT 1),
    coalesce(o.said_at, o.created_at)";

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
        said_at: r.get(16)?,
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
/// title says the same (`same_as`) is superseded by it. Returns its id. It
/// was said when its batch was (the batch's said time, else its start); a
/// remembered one at `at`.
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
           importance, origin, session_id, batch_id, created_at, said_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12,
           CASE WHEN ?9 = 'remembered' THEN ?12
                ELSE (SELECT coalesce(b.said_at, b.started_at) FROM prompt_batches b
                      WHERE b.id = ?11) END)
         RETURNING id",
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

/// The active observations of `groups` with these ids: those found by
/// meaning.
pub fn active_by_ids(conn: &Db<'_>, ids: &[i64], groups: [&str; 2]) -> Result<Vec<ObservationRow>> {
    query_all(
        conn,
        &format!(
            "SELECT {OBSERVATION_COLUMNS} FROM observations o
             WHERE {} AND o.group_folder IN (?2, ?3) AND o.status = 'active'",
            crate::db::id_in_json(conn.dialect(), "o.id", 1)
        ),
        params![
            serde_json::to_string(ids).unwrap_or_default(),
            groups[0],
            groups[1]
        ],
        observation_from_row,
    )
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
        |r| Ok((observation_from_row(r)?, -r.get::<f64>(17)?)),
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
