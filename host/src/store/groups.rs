//! The `registered_groups` table.

use rusqlite::{Connection, OptionalExtension, Row, Transaction, params};

use crate::groups::Group;
use crate::{Error, Result, store};
use g2_core::validate;

pub fn add(tx: &Transaction<'_>, group: &Group) -> Result<()> {
    if get(tx, &group.folder)?.is_some() {
        return Err(Error::Conflict(format!(
            "a group with folder {:?} is registered already",
            group.folder
        )));
    }
    let jid_taken: Option<String> = tx
        .query_row(
            "SELECT folder FROM registered_groups WHERE jid = ?1",
            [&group.jid],
            |r| r.get(0),
        )
        .optional()?;
    if let Some(other) = jid_taken {
        return Err(Error::Conflict(format!(
            "jid {:?} belongs to group {other:?} already",
            group.jid
        )));
    }
    if group.is_main
        && let Some(main) = main_group(tx)?
    {
        return Err(Error::Conflict(format!(
            "group {:?} is the main group already; there is only one",
            main.folder
        )));
    }
    tx.execute(
        "INSERT INTO registered_groups
           (jid, name, folder, trigger_pattern, requires_trigger, is_main, container_config, added_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![
            group.jid,
            group.name,
            group.folder,
            group.trigger_pattern,
            group.requires_trigger,
            group.is_main,
            group.container_config.to_string(),
            group.added_at,
        ],
    )?;
    Ok(())
}

const COLUMNS: &str =
    "folder, name, jid, trigger_pattern, requires_trigger, is_main, container_config, added_at";

fn from_row(r: &Row<'_>) -> rusqlite::Result<Group> {
    let config: String = r.get(6)?;
    Ok(Group {
        folder: r.get(0)?,
        name: r.get(1)?,
        jid: r.get(2)?,
        trigger_pattern: r.get(3)?,
        requires_trigger: r.get(4)?,
        is_main: r.get(5)?,
        container_config: serde_json::from_str(&config).unwrap_or_default(),
        added_at: r.get(7)?,
    })
}

pub fn get(conn: &Connection, folder: &str) -> Result<Option<Group>> {
    Ok(conn
        .query_row(
            &format!("SELECT {COLUMNS} FROM registered_groups WHERE folder = ?1"),
            [folder],
            from_row,
        )
        .optional()?)
}

pub fn main_group(conn: &Connection) -> Result<Option<Group>> {
    Ok(conn
        .query_row(
            &format!("SELECT {COLUMNS} FROM registered_groups WHERE is_main = 1"),
            [],
            from_row,
        )
        .optional()?)
}

pub fn list(conn: &Connection) -> Result<Vec<Group>> {
    store::query_all(
        conn,
        &format!("SELECT {COLUMNS} FROM registered_groups ORDER BY is_main DESC, folder"),
        [],
        from_row,
    )
}

/// Unregisters a group. Its folder, sessions and archives stay: registering
/// the folder again picks them up.
pub fn remove(tx: &Transaction<'_>, folder: &str) -> Result<Group> {
    validate::group_folder(folder)?;
    let group = get(tx, folder)?.ok_or_else(|| Error::NotFound(format!("group {folder:?}")))?;
    tx.execute("DELETE FROM registered_groups WHERE folder = ?1", [folder])?;
    Ok(group)
}
