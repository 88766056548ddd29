//! The `scheduled_tasks` and `task_run_logs` tables. The schedule logic
//! (what is due, what runs next, which status changes are allowed) is in
//! the host's `tasks`; these are its statements and rows.

use crate::db::{Db, Optional, Row, read_row};
use crate::params;
use serde::{Deserialize, Serialize};

use g2_core::validate::GroupFolder;

use super::{Result, folder_at, query_all};

/// One scheduled task. Also the stable JSON shape of the API.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Task {
    pub id: String,
    pub group_folder: GroupFolder,
    pub chat_jid: String,
    pub prompt: String,
    /// `cron`, `interval` or `once`.
    pub schedule_type: String,
    pub schedule_value: String,
    /// IANA name.
    pub timezone: String,
    /// `group` (the group's session) or `isolated` (a fresh one).
    pub context_mode: String,
    /// RFC 3339, UTC. NULL when no run is pending (a claimed or finished
    /// `once`). In a task returned by the host's `tasks::claim_due`: the
    /// slot being run.
    pub next_run: Option<String>,
    pub last_run: Option<String>,
    /// The last run's result, or `Error: …`; at most 2,000 characters.
    pub last_result: Option<String>,
    /// `active`, `paused`, `completed` or `cancelled`.
    pub status: String,
    pub created_at: String,
}

/// One row of a task's run log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskRun {
    pub id: i64,
    pub task_id: String,
    /// RFC 3339, UTC.
    pub run_at: String,
    pub duration_ms: i64,
    /// `success` or `error`.
    pub status: String,
    pub result: Option<String>,
    pub error: Option<String>,
}

/// Stores a new task.
pub fn insert(tx: &Db<'_>, task: &Task) -> Result<()> {
    tx.execute(
        "INSERT INTO scheduled_tasks
           (id, group_folder, chat_jid, prompt, schedule_type, schedule_value, timezone,
            context_mode, next_run, status, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        params![
            task.id,
            task.group_folder.as_str(),
            task.chat_jid,
            task.prompt,
            task.schedule_type,
            task.schedule_value,
            task.timezone,
            task.context_mode,
            task.next_run,
            task.status,
            task.created_at,
        ],
    )?;
    Ok(())
}

const COLUMNS: &str = "id, group_folder, chat_jid, prompt, schedule_type, schedule_value, timezone, \
     context_mode, next_run, last_run, last_result, status, created_at";

fn from_row(r: &Row<'_>) -> Result<Task> {
    Ok(read_row!(r => Task {
        id, group_folder = folder_at, chat_jid, prompt, schedule_type, schedule_value, timezone,
        context_mode, next_run, last_run, last_result, status, created_at,
    }))
}

/// Tasks of one group, or of every group (`None`), oldest first.
pub fn list(conn: &Db<'_>, group: Option<&str>) -> Result<Vec<Task>> {
    query_all(
        conn,
        &format!(
            "SELECT {COLUMNS} FROM scheduled_tasks
             WHERE CAST(?1 AS TEXT) IS NULL OR group_folder = ?1
             ORDER BY created_at, id"
        ),
        [group],
        from_row,
    )
}

pub fn get(conn: &Db<'_>, id: &str) -> Result<Option<Task>> {
    conn.query_row(
        &format!("SELECT {COLUMNS} FROM scheduled_tasks WHERE id = ?1"),
        [id],
        from_row,
    )
    .optional()
}

/// A task's run log, newest first.
pub fn runs(conn: &Db<'_>, task_id: &str, limit: usize) -> Result<Vec<TaskRun>> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    query_all(
        conn,
        "SELECT id, task_id, run_at, duration_ms, status, result, error FROM task_run_logs
         WHERE task_id = ?1 ORDER BY run_at DESC, id DESC LIMIT ?2",
        params![task_id, limit],
        |r| {
            Ok(TaskRun {
                id: r.get(0)?,
                task_id: r.get(1)?,
                run_at: r.get(2)?,
                duration_ms: r.get(3)?,
                status: r.get(4)?,
                result: r.get(5)?,
                error: r.get(6)?,
            })
        },
    )
}

/// Sets a task's status (`paused`, `cancelled`).
pub fn set_status(tx: &Db<'_>, id: &str, status: &str) -> Result<()> {
    tx.execute(
        "UPDATE scheduled_tasks SET status = ?2 WHERE id = ?1",
        params![id, status],
    )?;
    Ok(())
}

/// Makes a task active again with its next run.
pub fn reactivate(tx: &Db<'_>, id: &str, next_run: Option<&str>) -> Result<()> {
    tx.execute(
        "UPDATE scheduled_tasks SET status = 'active', next_run = ?2 WHERE id = ?1",
        params![id, next_run],
    )?;
    Ok(())
}

/// Up to `limit` active, unclaimed tasks due at `now`, earliest first.
pub fn due(tx: &Db<'_>, now: &str, limit: usize) -> Result<Vec<Task>> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    query_all(
        tx,
        &format!(
            "SELECT {COLUMNS} FROM scheduled_tasks
             WHERE status = 'active' AND claimed_by IS NULL
               AND next_run IS NOT NULL AND next_run <= ?1
             ORDER BY next_run, id
             LIMIT ?2"
        ),
        params![now, limit],
        from_row,
    )
}

/// Pauses a task unless it was claimed or changed meanwhile.
pub fn pause_unclaimed(tx: &Db<'_>, id: &str) -> Result<()> {
    tx.execute(
        "UPDATE scheduled_tasks SET status = 'paused'
             WHERE id = ?1 AND status = 'active' AND claimed_by IS NULL",
        [id],
    )?;
    Ok(())
}

/// Claims an active, unclaimed task for `claimer` and moves its next run
/// to `following`; false when someone else had it.
pub fn claim(
    tx: &Db<'_>,
    id: &str,
    claimer: &str,
    now: &str,
    following: Option<&str>,
) -> Result<bool> {
    let changed = tx.execute(
        "UPDATE scheduled_tasks SET claimed_by = ?2, claimed_at = ?3, next_run = ?4
             WHERE id = ?1 AND claimed_by IS NULL AND status = 'active'",
        params![id, claimer, now, following],
    )?;
    Ok(changed == 1)
}

/// Adds a row to a task's run log.
pub fn log_run(
    tx: &Db<'_>,
    id: &str,
    run_at: &str,
    duration_ms: i64,
    status: &str,
    result: Option<&str>,
    error: Option<&str>,
) -> Result<()> {
    tx.execute(
        "INSERT INTO task_run_logs (task_id, run_at, duration_ms, status, result, error)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![id, run_at, duration_ms, status, result, error],
    )?;
    Ok(())
}

/// Records the end of a run on the task: `last_run`, `last_result`, the
/// claim cleared; a `once` task completed unless it was cancelled.
pub fn end_run(tx: &Db<'_>, id: &str, run_at: &str, last_result: &str) -> Result<()> {
    tx.execute(
        "UPDATE scheduled_tasks SET
           last_run = ?2, last_result = ?3, claimed_by = NULL, claimed_at = NULL,
           status = CASE WHEN schedule_type = 'once' AND status IN ('active', 'paused')
                         THEN 'completed' ELSE status END,
           next_run = CASE WHEN schedule_type = 'once' THEN NULL ELSE next_run END
         WHERE id = ?1",
        params![id, run_at, last_result],
    )?;
    Ok(())
}

/// Claimed tasks (of claimers whose name starts with `claimer_prefix`, or
/// all) with the time each was claimed.
pub fn claimed(tx: &Db<'_>, claimer_prefix: Option<&str>) -> Result<Vec<Claimed>> {
    query_all(
        tx,
        &format!(
            "SELECT {COLUMNS}, claimed_at, claimed_by FROM scheduled_tasks
             WHERE claimed_by IS NOT NULL
               AND (CAST(?1 AS TEXT) IS NULL OR substr(claimed_by, 1, length(?1)) = ?1)"
        ),
        [claimer_prefix],
        |r| {
            Ok(Claimed {
                task: from_row(r)?,
                claimed_at: r.get(13)?,
                claimed_by: r.get(14)?,
            })
        },
    )
}

/// A claimed task, when and by whom.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub task: Task,
    pub claimed_at: Option<String>,
    pub claimed_by: String,
}

/// Clears a task's claim and sets its next run.
pub fn release(tx: &Db<'_>, id: &str, next_run: Option<&str>) -> Result<()> {
    tx.execute(
        "UPDATE scheduled_tasks SET claimed_by = NULL, claimed_at = NULL, next_run = ?2
             WHERE id = ?1",
        params![id, next_run],
    )?;
    Ok(())
}

/// The earliest `next_run` among active, unclaimed tasks.
pub fn earliest_next_run(conn: &Db<'_>) -> Result<Option<String>> {
    conn.query_row(
        "SELECT min(next_run) FROM scheduled_tasks
         WHERE status = 'active' AND claimed_by IS NULL AND next_run IS NOT NULL",
        (),
        |r| r.get(0),
    )
}
