//! SQL of the `sessions` and `session_history` tables: the pointer row of
//! each group and its bookmarks. Pure row access: the generation guard,
//! name rules and the clear/resume operations belong to the host's
//! `sessions` module.

use crate::db::{Db, Optional, Row};
use crate::params;
use serde::{Deserialize, Serialize};

use g2_core::validate::GroupFolder;

use super::{Result, folder_at, now_rfc3339};

/// A group's active session pointer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pointer {
    pub group: GroupFolder,
    /// `None`: no active session; the next message starts a new one.
    pub session_id: Option<String>,
    /// Grows by one with every change of the pointer.
    pub generation: i64,
    /// When this session became the active one.
    pub created_at: Option<String>,
}

/// A bookmark of an earlier session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryEntry {
    pub id: i64,
    pub group: GroupFolder,
    pub session_id: String,
    pub name: String,
    pub created_at: String,
    pub archived_at: String,
}

/// The group's pointer; generation 0 and no session when it has no row.
pub fn pointer(conn: &Db<'_>, group: &GroupFolder) -> Result<Pointer> {
    Ok(conn
        .query_row(
            "SELECT session_id, generation, created_at FROM sessions WHERE group_folder = ?1",
            [group.as_str()],
            |r| {
                Ok(Pointer {
                    group: group.clone(),
                    session_id: r.get(0)?,
                    generation: r.get(1)?,
                    created_at: r.get(2)?,
                })
            },
        )
        .optional()?
        .unwrap_or_else(|| Pointer {
            group: group.clone(),
            session_id: None,
            generation: 0,
            created_at: None,
        }))
}

/// Writes the pointer and bumps its generation.
pub fn write(
    tx: &Db<'_>,
    current: &Pointer,
    session_id: Option<&str>,
    created_at: Option<&str>,
) -> Result<Pointer> {
    let now = now_rfc3339();
    let generation = current.generation + 1;
    tx.execute(
        "INSERT INTO sessions (group_folder, session_id, generation, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (group_folder) DO UPDATE SET
           session_id = excluded.session_id, generation = excluded.generation,
           created_at = excluded.created_at, updated_at = excluded.updated_at",
        params![
            current.group.as_str(),
            session_id,
            generation,
            created_at,
            now
        ],
    )?;
    Ok(Pointer {
        group: current.group.clone(),
        session_id: session_id.map(str::to_string),
        generation,
        created_at: created_at.map(str::to_string),
    })
}

/// Bookmarks `session_id` (the pointer `current` held) under `name`, which
/// the caller has checked.
pub fn insert_history(
    tx: &Db<'_>,
    current: &Pointer,
    session_id: &str,
    name: &str,
) -> Result<HistoryEntry> {
    let archived_at = now_rfc3339();
    let created_at = current
        .created_at
        .clone()
        .unwrap_or_else(|| archived_at.clone());
    let id: i64 = tx.query_row(
        "INSERT INTO session_history (group_folder, session_id, name, created_at, archived_at)
         VALUES (?1, ?2, ?3, ?4, ?5) RETURNING id",
        params![
            current.group.as_str(),
            session_id,
            name,
            created_at,
            archived_at
        ],
        |r| r.get(0),
    )?;
    Ok(HistoryEntry {
        id,
        group: current.group.clone(),
        session_id: session_id.to_string(),
        name: name.to_string(),
        created_at,
        archived_at,
    })
}

const HISTORY_COLUMNS: &str = "id, group_folder, session_id, name, created_at, archived_at";

fn history_from_row(r: &Row<'_>) -> Result<HistoryEntry> {
    Ok(HistoryEntry {
        id: r.get(0)?,
        group: folder_at(r, 1)?,
        session_id: r.get(2)?,
        name: r.get(3)?,
        created_at: r.get(4)?,
        archived_at: r.get(5)?,
    })
}

/// A group's bookmarks, newest first.
pub fn history(conn: &Db<'_>, group: &str) -> Result<Vec<HistoryEntry>> {
    conn.query_all(
        &format!(
            "SELECT {HISTORY_COLUMNS} FROM session_history WHERE group_folder = ?1 ORDER BY id DESC"
        ),
        [group],
        history_from_row,
    )
}

/// One bookmark of the group; another group's id is simply not found.
pub fn history_entry(conn: &Db<'_>, group: &str, id: i64) -> Result<Option<HistoryEntry>> {
    conn.query_row(
        &format!(
            "SELECT {HISTORY_COLUMNS} FROM session_history WHERE id = ?1 AND group_folder = ?2"
        ),
        params![id, group],
        history_from_row,
    )
    .optional()
}

/// Removes a bookmark (it became the pointer again).
pub fn delete_history(tx: &Db<'_>, id: i64) -> Result<()> {
    tx.execute("DELETE FROM session_history WHERE id = ?1", [id])?;
    Ok(())
}
