//! Vectors of what recall reads (`embeddings`) and the jobs that make them
//! (`embedding_jobs`, filled by triggers when a row is written; see
//! `migrations/0012_embeddings.sql`). `memory::embed` runs the jobs.

use crate::db::{Db, Dialect};
use crate::params;

use super::{Result, query_all};

/// A row waiting for its vector.
#[derive(Debug, Clone)]
pub struct Job {
    pub kind: String,
    pub id: i64,
    pub group: String,
    /// What is embedded (speaker marks and all: the caller cleans it).
    pub text: String,
}

/// The text of each kind's row, by id (`?1`), with its group.
fn source(kind: &str, dialect: Dialect) -> Option<&'static str> {
    Some(match kind {
        "passage" => "SELECT group_folder, text FROM archive_passages WHERE id = ?1",
        // `json_lines` is the PostgreSQL schema's: a JSON array's strings,
        // one per line, or the text itself when it is not one.
        "observation" if dialect == Dialect::Postgres => {
            "SELECT group_folder, title || chr(10) || narrative || chr(10) || json_lines(facts)
             FROM observations WHERE id = ?1 AND status <> 'forgotten'"
        }
        "observation" => {
            "SELECT group_folder, title || char(10) || narrative || char(10)
                    || CASE WHEN json_valid(facts)
                            THEN coalesce((SELECT group_concat(value, char(10)) FROM json_each(facts)), '')
                            ELSE facts END
             FROM observations WHERE id = ?1 AND status <> 'forgotten'"
        }
        "summary" => {
            "SELECT group_folder, title || char(10) || request || char(10) || learned
                    || char(10) || completed
             FROM session_summaries WHERE id = ?1"
        }
        "prompt" => {
            "SELECT group_folder, prompt || char(10) || coalesce(reply, '')
             FROM prompt_batches WHERE id = ?1"
        }
        _ => return None,
    })
}

/// Up to `limit` jobs, newest rows first (what was just said is the likeliest
/// to be asked about), with their texts. A job whose row is gone is dropped.
pub fn pending(tx: &Db<'_>, limit: i64) -> Result<Vec<Job>> {
    let keys: Vec<(String, i64)> = query_all(
        tx,
        "SELECT kind, item_id FROM embedding_jobs ORDER BY item_id DESC LIMIT ?1",
        [limit],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    let mut out = Vec::with_capacity(keys.len());
    for (kind, id) in keys {
        let row = match source(&kind, tx.dialect()) {
            Some(sql) => query_all(tx, sql, [id], |r| Ok((r.get(0)?, r.get(1)?)))?
                .into_iter()
                .next(),
            None => None,
        };
        match row {
            Some((group, text)) => out.push(Job {
                kind,
                id,
                group,
                text,
            }),
            None => {
                tx.execute(
                    "DELETE FROM embedding_jobs WHERE kind = ?1 AND item_id = ?2",
                    params![kind, id],
                )?;
            }
        }
    }
    Ok(out)
}

/// Stores a job's vector and ends the job, in one transaction: a job that
/// is gone (its row deleted meanwhile) stores nothing. A vector the row
/// had is deleted first (counted as a delete), never replaced in place.
pub fn put(tx: &Db<'_>, job: &Job, model: &str, vector: &[u8]) -> Result<bool> {
    let ended = tx.execute(
        "DELETE FROM embedding_jobs WHERE kind = ?1 AND item_id = ?2",
        params![job.kind, job.id],
    )?;
    if ended == 0 {
        return Ok(false);
    }
    tx.execute(
        "DELETE FROM embeddings WHERE kind = ?1 AND item_id = ?2",
        params![job.kind, job.id],
    )?;
    tx.execute(
        "INSERT INTO embeddings (kind, item_id, group_folder, model, vector)
         VALUES (?1, ?2, ?3, ?4, ?5)",
        params![job.kind, job.id, job.group, model, vector],
    )?;
    Ok(true)
}

/// The vectors of `kind` in `group` made by `model` and stored after
/// `after` (the table's rowid): (rowid, row id, vector bytes), in rowid
/// order. The group filter is the index's first column: another group's
/// vectors are never read.
pub fn vectors_after(
    conn: &Db<'_>,
    group: &str,
    kind: &str,
    model: &str,
    after: i64,
) -> Result<Vec<(i64, i64, Vec<u8>)>> {
    query_all(
        conn,
        "SELECT rowid, item_id, vector FROM embeddings
         WHERE group_folder = ?1 AND kind = ?2 AND rowid > ?4 AND model = ?3
         ORDER BY rowid",
        params![group, kind, model, after],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )
}

/// The newest rowid of `group`'s vectors of `kind` by `model`, and how many
/// of its vectors of `kind` were ever deleted: two index seeks.
pub fn extent(conn: &Db<'_>, group: &str, kind: &str, model: &str) -> Result<(i64, i64)> {
    conn.query_row(
        "SELECT (SELECT coalesce(max(rowid), 0) FROM embeddings
                 WHERE group_folder = ?1 AND kind = ?2 AND model = ?3),
                (SELECT coalesce(max(n), 0) FROM embedding_deletes
                 WHERE group_folder = ?1 AND kind = ?2)",
        params![group, kind, model],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
}

/// (rows with a vector of `model`, jobs waiting).
pub fn counts(conn: &Db<'_>, model: &str) -> Result<(i64, i64)> {
    conn.query_row(
        "SELECT (SELECT count(*) FROM embeddings WHERE model = ?1),
                (SELECT count(*) FROM embedding_jobs)",
        [model],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
}

/// Forgets every vector and queues every row again (`g2 memory reindex`).
pub fn reset(tx: &Db<'_>) -> Result<i64> {
    tx.execute("DELETE FROM embeddings", ())?;
    tx.execute_batch(
        "INSERT OR IGNORE INTO embedding_jobs (kind, item_id) SELECT 'passage', id FROM archive_passages;
         INSERT OR IGNORE INTO embedding_jobs (kind, item_id)
           SELECT 'observation', id FROM observations WHERE status <> 'forgotten';
         INSERT OR IGNORE INTO embedding_jobs (kind, item_id) SELECT 'summary', id FROM session_summaries;
         INSERT OR IGNORE INTO embedding_jobs (kind, item_id)
           SELECT 'prompt', id FROM prompt_batches WHERE reply IS NOT NULL;",
    )?;
    tx.query_row("SELECT count(*) FROM embedding_jobs", (), |r| r.get(0))
}

/// How many rows wait for a vector: a read, so an idle host's jobs look
/// without taking the writer.
pub fn queued(conn: &Db<'_>) -> Result<i64> {
    conn.query_row("SELECT count(*) FROM embedding_jobs", (), |r| r.get(0))
}

/// Whether any of `groups` holds a vector: recall by meaning needs the
/// model only then (one index seek per group).
pub fn any_in(conn: &Db<'_>, groups: &[&str]) -> Result<bool> {
    for g in groups {
        let found: i64 = conn.query_row(
            "SELECT count(*) FROM (SELECT 1 FROM embeddings WHERE group_folder = ?1 LIMIT 1) AS x",
            [g],
            |r| r.get(0),
        )?;
        if found != 0 {
            return Ok(true);
        }
    }
    Ok(false)
}
