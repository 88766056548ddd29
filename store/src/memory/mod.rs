//! The memory-capture tables: `memory_sessions`, `prompt_batches`,
//! `activities`, `memory_queue` (and their FTS indexes, kept by triggers in
//! the same transaction).
//!
//! What is written here was already stripped of private spans and redacted
//! (`g2_core::privacy`, at the hook and again at the host); these functions
//! store it as given. Every statement is scoped to its group: a session id
//! of another group is never found, and never taken over.

use crate::db::{Db, Optional, Row, read_row};
use crate::params;
use serde::{Deserialize, Serialize};

use g2_core::validate::GroupFolder;

use super::{Error, Result, folder_at, query_all};

/// A captured session, as listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionRow {
    /// The row's own id.
    #[serde(skip)]
    pub row: i64,
    pub group: GroupFolder,
    /// Claude Code's session id.
    pub session_id: String,
    pub status: String,
    pub start_source: Option<String>,
    pub started_at: String,
    pub ended_at: Option<String>,
    pub last_activity_at: String,
    pub end_reason: Option<String>,
    pub prompts: i64,
    pub tool_calls: i64,
    pub title: Option<String>,
}

/// One prompt of a session and what the agent did for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BatchRow {
    #[serde(skip)]
    pub row: i64,
    pub prompt_number: i64,
    pub prompt: String,
    /// Who sent it, for a prompt routed from the chat.
    pub senders: Vec<String>,
    pub status: String,
    pub started_at: String,
    pub ended_at: Option<String>,
    pub reply: Option<String>,
    /// Made by recovery to hold activities that arrived without a prompt.
    pub recovered: bool,
    /// When its first message was said in the chat (a routed prompt's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub said_at: Option<String>,
    pub activities: Vec<ActivityRow>,
}

/// One tool call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ActivityRow {
    pub tool: String,
    pub tool_use_id: String,
    pub input: serde_json::Value,
    pub output: String,
    pub files_read: Vec<String>,
    pub files_modified: Vec<String>,
    pub ok: bool,
    pub subagent: bool,
    pub at: String,
}

/// A session's timeline: each prompt, its tool calls in order, the reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Timeline {
    pub session: SessionRow,
    pub batches: Vec<BatchRow>,
}

/// A tool call to record.
#[derive(Debug, Clone, Default)]
pub struct NewActivity<'a> {
    pub tool: &'a str,
    pub tool_use_id: &'a str,
    /// Compact JSON summary of the input.
    pub input: &'a str,
    pub output: &'a str,
    pub files_read: &'a [String],
    pub files_modified: &'a [String],
    pub ok: bool,
    pub subagent: bool,
    pub at: &'a str,
}

/// Records that the event file `name` of `group` is being taken in; false
/// when it was taken in before (a replay: nothing more to do).
pub fn first_sight(tx: &Db<'_>, group: &GroupFolder, name: &str, at: &str) -> Result<bool> {
    Ok(tx.execute(
        "INSERT INTO memory_events (group_folder, name, at) VALUES (?1, ?2, ?3)
         ON CONFLICT DO NOTHING",
        params![group.as_str(), name, at],
    )? == 1)
}

/// Forgets event file names seen before `cutoff` (their files are long
/// gone, so they cannot come back).
pub fn forget_seen_before(tx: &Db<'_>, cutoff: &str) -> Result<usize> {
    tx.execute("DELETE FROM memory_events WHERE at < ?1", [cutoff])
}

/// The session row for `session_id` of `group`, made when it is new (the
/// same id always maps to the same row) and marked active. A session id
/// another group holds is refused.
pub fn open_session(
    tx: &Db<'_>,
    group: &GroupFolder,
    session_id: &str,
    source: Option<&str>,
    transcript_path: Option<&str>,
    at: &str,
) -> Result<i64> {
    let source = source.filter(|s| matches!(*s, "startup" | "resume" | "clear" | "compact"));
    tx.execute(
        "INSERT INTO memory_sessions
           (group_folder, content_session_id, start_source, started_at, last_activity_at, transcript_path)
         VALUES (?1, ?2, ?3, ?4, ?4, ?5)
         ON CONFLICT (content_session_id) DO NOTHING",
        params![group.as_str(), session_id, source, at, transcript_path],
    )?;
    let (row, owner): (i64, String) = tx.query_row(
        "SELECT id, group_folder FROM memory_sessions WHERE content_session_id = ?1",
        [session_id],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    if owner != group.as_str() {
        return Err(Error::Forbidden(format!(
            "session {session_id} belongs to another group"
        )));
    }
    tx.execute(
        "UPDATE memory_sessions SET status = 'active', ended_at = NULL, end_reason = NULL,
           last_activity_at = max(last_activity_at, ?2),
           transcript_path = coalesce(?3, transcript_path)
         WHERE id = ?1",
        params![row, at, transcript_path],
    )?;
    Ok(row)
}

/// Starts the next prompt of a session (ending the one still open): its
/// number is the session's prompt count after this one. When it was said
/// is not known: read as `at`.
pub fn start_batch(
    tx: &Db<'_>,
    session: i64,
    prompt: &str,
    senders: &[String],
    at: &str,
) -> Result<i64> {
    start_said_batch(tx, session, prompt, senders, None, at)
}

/// [`start_batch`] for a prompt first said at `said_at` (RFC 3339, UTC;
/// none: not known).
pub fn start_said_batch(
    tx: &Db<'_>,
    session: i64,
    prompt: &str,
    senders: &[String],
    said_at: Option<&str>,
    at: &str,
) -> Result<i64> {
    complete_open_batches(tx, session, at)?;
    tx.execute(
        "UPDATE memory_sessions SET prompt_count = prompt_count + 1,
           last_activity_at = max(last_activity_at, ?2) WHERE id = ?1",
        params![session, at],
    )?;
    let senders = (!senders.is_empty())
        .then(|| serde_json::to_string(senders))
        .transpose()?;
    tx.query_row(
        "INSERT INTO prompt_batches
           (session_id, group_folder, prompt_number, prompt, senders, started_at, last_activity_at,
            said_at)
         SELECT id, group_folder, prompt_count, ?2, ?3, ?4, ?4, ?5 FROM memory_sessions WHERE id = ?1
         RETURNING id",
        params![session, prompt, senders, at, said_at],
        |r| r.get(0),
    )
}

/// The session's batch that is still open, if any.
pub fn open_batch(conn: &Db<'_>, session: i64) -> Result<Option<i64>> {
    conn.query_row(
        "SELECT id FROM prompt_batches WHERE session_id = ?1 AND status = 'active'
             ORDER BY prompt_number DESC LIMIT 1",
        [session],
        |r| r.get(0),
    )
    .optional()
}

/// The session's open batch, else its latest one.
pub fn current_batch(conn: &Db<'_>, session: i64) -> Result<Option<i64>> {
    conn.query_row(
        "SELECT id FROM prompt_batches WHERE session_id = ?1
             ORDER BY status = 'active' DESC, prompt_number DESC LIMIT 1",
        [session],
        |r| r.get(0),
    )
    .optional()
}

/// Records a tool call in `batch` (none: recovery attaches it later);
/// false when its `tool_use_id` was recorded already.
pub fn add_activity(
    tx: &Db<'_>,
    session: i64,
    batch: Option<i64>,
    a: &NewActivity<'_>,
) -> Result<bool> {
    let inserted = tx.execute(
        "INSERT INTO activities
           (session_id, batch_id, group_folder, tool, tool_use_id, input, output,
            files_read, files_modified, ok, subagent, at)
         SELECT id, ?2, group_folder, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11
         FROM memory_sessions WHERE id = ?1
         ON CONFLICT (tool_use_id) DO NOTHING",
        params![
            session,
            batch,
            a.tool,
            a.tool_use_id,
            a.input,
            a.output,
            serde_json::to_string(a.files_read)?,
            serde_json::to_string(a.files_modified)?,
            a.ok,
            a.subagent,
            a.at,
        ],
    )?;
    touch(tx, session, batch, a.at)?;
    Ok(inserted == 1)
}

/// Moves a session's (and its batch's) last activity forward.
fn touch(tx: &Db<'_>, session: i64, batch: Option<i64>, at: &str) -> Result<()> {
    tx.execute(
        "UPDATE memory_sessions SET last_activity_at = max(last_activity_at, ?2) WHERE id = ?1",
        params![session, at],
    )?;
    if let Some(b) = batch {
        tx.execute(
            "UPDATE prompt_batches SET last_activity_at = max(last_activity_at, ?2) WHERE id = ?1",
            params![b, at],
        )?;
    }
    Ok(())
}

/// Ends a batch with the agent's reply (`Stop`).
pub fn finish_batch(tx: &Db<'_>, batch: i64, reply: Option<&str>, at: &str) -> Result<()> {
    tx.execute(
        "UPDATE prompt_batches SET status = 'completed', ended_at = coalesce(ended_at, ?2),
           reply = coalesce(?3, reply), last_activity_at = max(last_activity_at, ?2)
         WHERE id = ?1 AND status = 'active'",
        params![batch, at, reply],
    )?;
    Ok(())
}

fn complete_open_batches(tx: &Db<'_>, session: i64, at: &str) -> Result<usize> {
    tx.execute(
        "UPDATE prompt_batches SET status = 'completed', ended_at = ?2
         WHERE session_id = ?1 AND status = 'active'",
        params![session, at],
    )
}

/// Ends a session (`SessionEnd`, or recovery with reason `stale`), and its
/// open batch with it.
pub fn end_session(tx: &Db<'_>, session: i64, reason: Option<&str>, at: &str) -> Result<()> {
    complete_open_batches(tx, session, at)?;
    tx.execute(
        "UPDATE memory_sessions SET status = 'completed', ended_at = ?2, end_reason = ?3,
           last_activity_at = max(last_activity_at, ?2)
         WHERE id = ?1 AND status = 'active'",
        params![session, at, reason],
    )?;
    Ok(())
}

// --- recovery ------------------------------------------------------------------

/// Batches open with no activity since `idle_since` become `completed`.
pub fn close_idle_batches(tx: &Db<'_>, idle_since: &str) -> Result<usize> {
    tx.execute(
        "UPDATE prompt_batches SET status = 'completed', ended_at = last_activity_at
         WHERE status = 'active' AND last_activity_at < ?1",
        [idle_since],
    )
}

/// Sessions open with no activity since `idle_since` become `completed`
/// with reason `stale` (their open batches too).
pub fn close_stale_sessions(tx: &Db<'_>, idle_since: &str) -> Result<usize> {
    let stale: Vec<(i64, String)> = query_all(
        tx,
        "SELECT id, last_activity_at FROM memory_sessions
         WHERE status = 'active' AND last_activity_at < ?1",
        [idle_since],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    for (id, last) in &stale {
        end_session(tx, *id, Some("stale"), last)?;
    }
    Ok(stale.len())
}

/// Activities without a batch are attached to the latest batch of their
/// session that started before them, else to a recovery batch made for
/// the session.
pub fn attach_orphans(tx: &Db<'_>) -> Result<usize> {
    let orphans: Vec<(i64, i64, String)> = query_all(
        tx,
        "SELECT id, session_id, at FROM activities WHERE batch_id IS NULL ORDER BY at",
        (),
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )?;
    for (id, session, at) in &orphans {
        let batch: Option<i64> = tx
            .query_row(
                "SELECT id FROM prompt_batches WHERE session_id = ?1 AND started_at <= ?2
                 ORDER BY started_at DESC, prompt_number DESC LIMIT 1",
                params![session, at],
                |r| r.get(0),
            )
            .optional()?;
        let batch = match batch {
            Some(b) => b,
            None => recovery_batch(tx, *session, at)?,
        };
        tx.execute(
            "UPDATE activities SET batch_id = ?2 WHERE id = ?1",
            params![id, batch],
        )?;
    }
    Ok(orphans.len())
}

/// The session's recovery batch (made, completed, the first time): prompt
/// number 0.
fn recovery_batch(tx: &Db<'_>, session: i64, at: &str) -> Result<i64> {
    if let Some(b) = tx
        .query_row(
            "SELECT id FROM prompt_batches WHERE session_id = ?1 AND recovered = 1",
            [session],
            |r| r.get(0),
        )
        .optional()?
    {
        return Ok(b);
    }
    // Number 0: it is no prompt of the session's, and leaves its open
    // batch and its prompt count alone.
    tx.query_row(
        "INSERT INTO prompt_batches
           (session_id, group_folder, prompt_number, prompt, status, started_at, ended_at,
            last_activity_at, recovered)
         SELECT id, group_folder, 0, '', 'completed', ?2, ?2, ?2, 1 FROM memory_sessions WHERE id = ?1
         RETURNING id",
        params![session, at],
        |r| r.get(0),
    )
}

/// Completed batches not queued yet go to the memory processor's queue.
pub fn queue_completed(tx: &Db<'_>, at: &str) -> Result<usize> {
    tx.execute(
        "INSERT INTO memory_queue (batch_id, queued_at)
         SELECT id, ?1 FROM prompt_batches
         WHERE status = 'completed' AND id NOT IN (SELECT batch_id FROM memory_queue)",
        [at],
    )
}

// --- retention -----------------------------------------------------------------

/// Deletes sessions (their batches, activities and index rows with them)
/// that ended, or were last active, before `cutoff`.
pub fn forget_before(tx: &Db<'_>, cutoff: &str) -> Result<usize> {
    tx.execute(
        "DELETE FROM memory_sessions WHERE coalesce(ended_at, last_activity_at) < ?1",
        [cutoff],
    )
}

/// Deletes one session's capture; false when the group has no such session.
pub fn forget_session(tx: &Db<'_>, group: &GroupFolder, session_id: &str) -> Result<bool> {
    Ok(tx.execute(
        "DELETE FROM memory_sessions WHERE group_folder = ?1 AND content_session_id = ?2",
        params![group.as_str(), session_id],
    )? == 1)
}

// --- reading -------------------------------------------------------------------

/// The group of a captured session, by its row id.
pub fn session_group_by_row(conn: &Db<'_>, session: i64) -> Result<Option<GroupFolder>> {
    conn.query_row(
        "SELECT group_folder FROM memory_sessions WHERE id = ?1",
        [session],
        |r| folder_at(r, 0),
    )
    .optional()
}

/// The group that holds a captured session.
pub fn session_group(conn: &Db<'_>, session_id: &str) -> Result<Option<GroupFolder>> {
    conn.query_row(
        "SELECT group_folder FROM memory_sessions WHERE content_session_id = ?1",
        [session_id],
        |r| folder_at(r, 0),
    )
    .optional()
}

const SESSION_COLUMNS: &str =
    "s.id, s.group_folder, s.content_session_id, s.status, s.start_source,
    s.started_at, s.ended_at, s.last_activity_at, s.end_reason, s.prompt_count,
    (SELECT count(*) FROM activities a WHERE a.session_id = s.id), s.title";

fn session_from_row(r: &Row<'_>) -> Result<SessionRow> {
    Ok(SessionRow {
        row: r.get(0)?,
        group: folder_at(r, 1)?,
        session_id: r.get(2)?,
        status: r.get(3)?,
        start_source: r.get(4)?,
        started_at: r.get(5)?,
        ended_at: r.get(6)?,
        last_activity_at: r.get(7)?,
        end_reason: r.get(8)?,
        prompts: r.get(9)?,
        tool_calls: r.get(10)?,
        title: r.get(11)?,
    })
}

/// A group's captured sessions, newest first.
pub fn sessions(conn: &Db<'_>, group: &GroupFolder) -> Result<Vec<SessionRow>> {
    query_all(
        conn,
        &format!(
            "SELECT {SESSION_COLUMNS} FROM memory_sessions s
             WHERE s.group_folder = ?1 ORDER BY s.started_at DESC, s.id DESC"
        ),
        [group.as_str()],
        session_from_row,
    )
}

/// One session of a group with every prompt and tool call in order; `None`
/// when the group has no such session.
pub fn timeline(conn: &Db<'_>, group: &GroupFolder, session_id: &str) -> Result<Option<Timeline>> {
    let Some(session) = conn
        .query_row(
            &format!(
                "SELECT {SESSION_COLUMNS} FROM memory_sessions s
                 WHERE s.group_folder = ?1 AND s.content_session_id = ?2"
            ),
            params![group.as_str(), session_id],
            session_from_row,
        )
        .optional()?
    else {
        return Ok(None);
    };
    let batches = batches_of(conn, session.row)?;
    Ok(Some(Timeline { session, batches }))
}

/// A session's batches (by its row id), each with its tool calls in order.
pub fn batches_of(conn: &Db<'_>, session: i64) -> Result<Vec<BatchRow>> {
    let mut batches = query_all(
        conn,
        "SELECT id, prompt_number, prompt, senders, status, started_at, ended_at, reply, recovered,
                said_at
         FROM prompt_batches WHERE session_id = ?1 ORDER BY prompt_number",
        [session],
        batch_from_row,
    )?;
    for b in &mut batches {
        b.activities = activities_of(conn, b.row)?;
    }
    Ok(batches)
}

/// One batch (by row id) with its tool calls, and its group and session row.
pub fn batch(conn: &Db<'_>, batch: i64) -> Result<Option<(GroupFolder, i64, BatchRow)>> {
    let Some((group, session, mut row)) = conn
        .query_row(
            "SELECT id, prompt_number, prompt, senders, status, started_at, ended_at, reply, recovered,
                    said_at, group_folder, session_id
             FROM prompt_batches WHERE id = ?1",
            [batch],
            |r| Ok((folder_at(r, 10)?, r.get::<i64>(11)?, batch_from_row(r)?)),
        )
        .optional()?
    else {
        return Ok(None);
    };
    row.activities = activities_of(conn, row.row)?;
    Ok(Some((group, session, row)))
}

fn batch_from_row(r: &Row<'_>) -> Result<BatchRow> {
    let senders: Option<String> = r.get(3)?;
    Ok(BatchRow {
        row: r.get(0)?,
        prompt_number: r.get(1)?,
        prompt: r.get(2)?,
        senders: senders
            .and_then(|s| serde_json::from_str(&s).ok())
            .unwrap_or_default(),
        status: r.get(4)?,
        started_at: r.get(5)?,
        ended_at: r.get(6)?,
        reply: r.get(7)?,
        recovered: r.get(8)?,
        said_at: r.get(9)?,
        activities: Vec::new(),
    })
}

fn activities_of(conn: &Db<'_>, batch: i64) -> Result<Vec<ActivityRow>> {
    query_all(
        conn,
        "SELECT tool, tool_use_id, input, output, files_read, files_modified, ok, subagent, at
         FROM activities WHERE batch_id = ?1 ORDER BY at, id",
        [batch],
        |r| {
            let json = |i: usize| -> Result<serde_json::Value> {
                let s: String = r.get(i)?;
                Ok(serde_json::from_str(&s).unwrap_or(serde_json::Value::String(s)))
            };
            let list = |i: usize| -> Result<Vec<String>> {
                let s: String = r.get(i)?;
                Ok(serde_json::from_str(&s).unwrap_or_default())
            };
            Ok(ActivityRow {
                tool: r.get(0)?,
                tool_use_id: r.get(1)?,
                input: json(2)?,
                output: r.get(3)?,
                files_read: list(4)?,
                files_modified: list(5)?,
                ok: r.get(6)?,
                subagent: r.get(7)?,
                at: r.get(8)?,
            })
        },
    )
}

/// Where a group's memory feed has got to: the last id seen of each kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeedCursor {
    pub prompt: i64,
    pub tool: i64,
    pub observation: i64,
    pub summary: i64,
}

/// One record of the memory feed, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FeedItem {
    /// `prompt`, `tool`, `observation` or `summary`.
    pub kind: &'static str,
    pub id: i64,
    /// Claude Code's session id it belongs to, when it has one.
    pub session_id: Option<String>,
    /// The prompt, the tool and its input, the observation's kind and
    /// title, the summary's title.
    pub text: String,
    pub at: String,
}

/// The group's cursor as of now: a feed that starts here shows what comes.
pub fn feed_now(conn: &Db<'_>, group: &GroupFolder) -> Result<FeedCursor> {
    conn.query_row(
        "SELECT (SELECT coalesce(max(id), 0) FROM prompt_batches WHERE group_folder = ?1),
                (SELECT coalesce(max(id), 0) FROM activities WHERE group_folder = ?1),
                (SELECT coalesce(max(id), 0) FROM observations WHERE group_folder = ?1),
                (SELECT coalesce(max(id), 0) FROM session_summaries WHERE group_folder = ?1)",
        [group.as_str()],
        |r| Ok(read_row!(r => FeedCursor { prompt, tool, observation, summary })),
    )
}

/// What the group stored after `from` (at most `limit` of each kind),
/// oldest first, and the cursor after it.
pub fn feed_after(
    conn: &Db<'_>,
    group: &GroupFolder,
    from: FeedCursor,
    limit: i64,
) -> Result<(Vec<FeedItem>, FeedCursor)> {
    let g = group.as_str();
    let mut items = Vec::new();
    let mut to = from;
    let item = |kind: &'static str| {
        move |r: &Row<'_>| -> Result<FeedItem> {
            Ok(FeedItem {
                kind,
                id: r.get(0)?,
                session_id: r.get(1)?,
                text: r.get(2)?,
                at: r.get(3)?,
            })
        }
    };
    for (kind, sql, after) in [
        (
            "prompt",
            "SELECT b.id, s.content_session_id, b.prompt, b.started_at FROM prompt_batches b
             CROSS JOIN memory_sessions s ON s.id = b.session_id
             WHERE b.group_folder = ?1 AND b.id > ?2 ORDER BY b.id LIMIT ?3",
            from.prompt,
        ),
        (
            "tool",
            "SELECT a.id, s.content_session_id, a.tool || ' ' || a.input, a.at FROM activities a
             CROSS JOIN memory_sessions s ON s.id = a.session_id
             WHERE a.group_folder = ?1 AND a.id > ?2 ORDER BY a.id LIMIT ?3",
            from.tool,
        ),
        (
            "observation",
            "SELECT o.id, s.content_session_id, o.kind || ': ' || o.title, o.created_at
             FROM observations o LEFT JOIN memory_sessions s ON s.id = o.session_id
             WHERE o.group_folder = ?1 AND o.id > ?2 AND o.status <> 'forgotten'
             ORDER BY o.id LIMIT ?3",
            from.observation,
        ),
        (
            "summary",
            "SELECT m.id, s.content_session_id, m.title, m.created_at FROM session_summaries m
             CROSS JOIN memory_sessions s ON s.id = m.session_id
             WHERE m.group_folder = ?1 AND m.id > ?2 ORDER BY m.id LIMIT ?3",
            from.summary,
        ),
    ] {
        let rows = query_all(conn, sql, params![g, after, limit], item(kind))?;
        if let Some(last) = rows.last() {
            match kind {
                "prompt" => to.prompt = last.id,
                "tool" => to.tool = last.id,
                "observation" => to.observation = last.id,
                _ => to.summary = last.id,
            }
        }
        items.extend(rows);
    }
    items.sort_by(|a, b| a.at.cmp(&b.at));
    Ok((items, to))
}

#[cfg(test)]
mod tests;
