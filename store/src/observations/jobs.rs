//! The processor's job state: `memory_queue` (a batch to extract) and
//! `summary_queue` (a session to summarise), claimed by a host, done or
//! failed in the transaction that stores the job's outcome.

use crate::db::{Db, Dialect, Optional};
use crate::params;
use crate::{Error, Result, query_all};
use g2_core::validate::GroupFolder;

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

    /// The table the key is a row of (it carries the group).
    fn keyed(self) -> &'static str {
        match self {
            Queue::Batches => "prompt_batches",
            Queue::Sessions => "memory_sessions",
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
    let mut waiting = 0;
    for q in [Queue::Batches, Queue::Sessions] {
        let ((table, k), keyed) = (q.table_key(), q.keyed());
        waiting += tx.execute(
            &format!(
                "UPDATE {table} SET next_attempt_at = ?2, error = ?3
                 WHERE state = 'pending'
                   AND {k} IN (SELECT id FROM {keyed} WHERE group_folder = ?1)"
            ),
            params![group.as_str(), until, error],
        )?;
    }
    Ok(waiting)
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
