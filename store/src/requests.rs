//! SQL of the agents' requests: the `ipc_log` table (every request and what
//! the host decided) and the "is this a known chat" question
//! `send_message` asks. The decisions themselves belong to the host's
//! `requests` module.

use crate::db::Db;
use crate::params;
use serde::Serialize;

use super::{Result, now_rfc3339};

/// One recorded request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LogEntry {
    pub id: i64,
    pub request_id: Option<String>,
    pub action: String,
    pub outcome: String,
    pub detail: Option<String>,
    pub at: String,
}

/// Records a request of `folder` with its outcome (`ok`, `refused`,
/// `failed`); an empty `detail` is stored as NULL.
pub fn log(
    tx: &Db<'_>,
    folder: &str,
    request_id: Option<&str>,
    action: &str,
    outcome: &str,
    detail: &str,
) -> Result<()> {
    tx.execute(
        "INSERT INTO ipc_log (group_folder, request_id, action, outcome, detail, at) VALUES (?1, ?2, ?3, ?4, NULLIF(?5, ''), ?6)",
        params![folder, request_id, action, outcome, detail, now_rfc3339()],
    )?;
    Ok(())
}

/// The newest `limit` entries of `folder`, newest first.
pub fn list(conn: &Db<'_>, folder: &str, limit: usize) -> Result<Vec<LogEntry>> {
    conn.query_all(
        "SELECT id, request_id, action, outcome, detail, at FROM ipc_log WHERE group_folder = ?1 ORDER BY id DESC LIMIT ?2",
        params![folder, limit as i64],
        |r| {
        Ok(LogEntry {
            id: r.get(0)?,
            request_id: r.get(1)?,
            action: r.get(2)?,
            outcome: r.get(3)?,
            detail: r.get(4)?,
            at: r.get(5)?,
        })
        },
    )
}

/// Whether `jid` is a registered group's chat or a chat seen before.
pub fn known_chat(conn: &Db<'_>, jid: &str) -> Result<bool> {
    conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM registered_groups WHERE jid = ?1) OR EXISTS (SELECT 1 FROM chats WHERE jid = ?1)",
        [jid],
        |r| r.get::<bool>(0),
    )
}
