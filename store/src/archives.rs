//! The `conversation_archives` table and its full-text index `archives_fts`.

use crate::db::{Db, Optional, Row};
use crate::params;
use serde::{Deserialize, Serialize};

use g2_core::validate::GroupFolder;

use super::{Result, folder_at, query_all};

/// What started an archive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Trigger {
    /// The session was cleared (or left for another one).
    Clear,
    /// Claude Code compacted the session.
    Precompact,
    /// Someone ran `g2 archive`.
    Manual,
}

impl Trigger {
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Clear => "clear",
            Trigger::Precompact => "precompact",
            Trigger::Manual => "manual",
        }
    }
}

/// A row of `conversation_archives`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArchiveRecord {
    pub id: i64,
    pub group: GroupFolder,
    pub session_id: Option<String>,
    /// The archive's title.
    pub name: String,
    /// Relative to the home directory.
    pub path: String,
    pub trigger: Trigger,
    pub created_at: String,
}

/// What [`insert`] records of an archive written but not yet recorded (the
/// host's `archives::Prepared` converts into one).
#[derive(Debug, Clone, Copy)]
pub struct NewArchive<'a> {
    pub group: &'a GroupFolder,
    pub session_id: Option<&'a str>,
    pub title: &'a str,
    /// Path as stored (relative to the home).
    pub rel_path: &'a str,
    /// The markdown, indexed and split into passages.
    pub body: &'a str,
    pub trigger: Trigger,
    pub created_at: &'a str,
}

/// Whether an archive row holds this path (relative to the home).
pub fn is_recorded(conn: &Db<'_>, rel_path: &str) -> Result<bool> {
    conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM conversation_archives WHERE path = ?1)",
        [rel_path],
        |r| r.get::<bool>(0),
    )
}

/// Records and indexes a prepared archive (a [`NewArchive`], or what
/// converts into one: the host's `archives::Prepared`) in the caller's
/// transaction; its body is split into recall's passages with it.
pub fn insert<'a>(tx: &Db<'_>, archive: impl Into<NewArchive<'a>>) -> Result<ArchiveRecord> {
    let p = archive.into();
    let id: i64 = tx.query_row(
        "INSERT INTO conversation_archives (group_folder, session_id, name, path, trigger, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6) RETURNING id",
        params![p.group.as_str(), p.session_id, p.title, p.rel_path, p.trigger.as_str(), p.created_at],
        |r| r.get(0),
    )?;
    tx.execute(
        "INSERT INTO archives_fts (rowid, name, body) VALUES (?1, ?2, ?3)",
        params![id, p.title, p.body],
    )?;
    super::recall::insert_passages(
        tx,
        id,
        p.group.as_str(),
        p.created_at,
        &super::passages::split(p.body),
    )?;
    Ok(ArchiveRecord {
        id,
        group: p.group.clone(),
        session_id: p.session_id.map(str::to_string),
        name: p.title.to_string(),
        path: p.rel_path.to_string(),
        trigger: p.trigger,
        created_at: p.created_at.to_string(),
    })
}

/// Moves an archive's row to another path (its file was settled under a
/// name other than the one it was recorded with).
pub fn move_to(tx: &Db<'_>, id: i64, rel_path: &str) -> Result<()> {
    tx.execute(
        "UPDATE conversation_archives SET path = ?2 WHERE id = ?1",
        params![id, rel_path],
    )?;
    Ok(())
}

/// The archive recorded at a path (relative to the home).
pub fn by_path(conn: &Db<'_>, rel_path: &str) -> Result<Option<ArchiveRecord>> {
    conn.query_row(
        &format!("SELECT {COLUMNS} FROM conversation_archives WHERE path = ?1"),
        [rel_path],
        from_row,
    )
    .optional()
}

const COLUMNS: &str = "id, group_folder, session_id, name, path, trigger, created_at";

fn from_row(r: &Row<'_>) -> Result<ArchiveRecord> {
    let trigger: String = r.get(5)?;
    Ok(ArchiveRecord {
        id: r.get(0)?,
        group: folder_at(r, 1)?,
        session_id: r.get(2)?,
        name: r.get(3)?,
        path: r.get(4)?,
        trigger: match trigger.as_str() {
            "clear" => Trigger::Clear,
            "precompact" => Trigger::Precompact,
            _ => Trigger::Manual,
        },
        created_at: r.get(6)?,
    })
}

/// A group's archives, newest first.
pub fn list(conn: &Db<'_>, group: &str) -> Result<Vec<ArchiveRecord>> {
    query_all(
        conn,
        &format!(
            "SELECT {COLUMNS} FROM conversation_archives WHERE group_folder = ?1 ORDER BY created_at DESC, id DESC"
        ),
        [group],
        from_row,
    )
}

pub fn get(conn: &Db<'_>, id: i64) -> Result<Option<ArchiveRecord>> {
    conn.query_row(
        &format!("SELECT {COLUMNS} FROM conversation_archives WHERE id = ?1"),
        [id],
        from_row,
    )
    .optional()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Store;

    #[test]
    fn a_recorded_archive_is_split_into_passages_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let store =
            Store::open(&dir.path().join("g2.db"), std::time::Duration::from_secs(5)).unwrap();
        let group = GroupFolder::new("main").unwrap();
        let (n, hits) = store
            .write_blocking(move |tx| {
                let p = NewArchive {
                    group: &group,
                    session_id: None,
                    title: "Boat",
                    rel_path: "groups/main/conversations/2026-05-01-boat.md",
                    body: "# Boat\n\nArchived: x\n\n---\n\n**User**: the boat is at pier 7\n\n**G2**: noted\n\n**User**: and the oars?\n\n**G2**: in the shed\n",
                    trigger: Trigger::Manual,
                    created_at: "2026-05-01T10:00:00.000Z",
                };
                let rec = insert(tx, p)?;
                let n: i64 = tx.query_row(
                    "SELECT count(*) FROM archive_passages WHERE archive_id = ?1",
                    [rec.id],
                    |r| r.get(0),
                )?;
                let hits = super::super::recall::passage_candidates(tx, "\"oars\"", ["main", "main"], 10)?;
                Ok((n, hits))
            })
            .unwrap();
        assert_eq!(n, 2);
        assert_eq!(hits.len(), 1);
        assert_eq!(
            (hits[0].ordinal, hits[0].turn_start, hits[0].turn_end),
            (1, 2, 3)
        );
        assert_eq!(hits[0].archive_name, "Boat");
    }
}
