//! The `registered_groups` table.

use crate::db::{Db, Optional, Row};
use crate::params;
use serde::{Deserialize, Serialize};

use g2_core::validate::GroupFolder;
use g2_settings::GroupContainerConfig;

use super::{Error, Result, folder_at, query_all};

/// A registered group (the host's `groups` validates one before it is
/// added).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Group {
    pub folder: GroupFolder,
    pub name: String,
    pub jid: String,
    /// Regex a message must match to wake the agent (when required).
    pub trigger_pattern: Option<String>,
    pub requires_trigger: bool,
    pub is_main: bool,
    /// Per-group container settings (limits, network, extra mounts).
    pub container_config: GroupContainerConfig,
    pub added_at: String,
}

pub fn add(tx: &Db<'_>, group: &Group) -> Result<()> {
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
            group.folder.as_str(),
            group.trigger_pattern,
            group.requires_trigger,
            group.is_main,
            serde_json::to_string(&group.container_config).unwrap_or_else(|_| "{}".into()),
            group.added_at,
        ],
    )?;
    Ok(())
}

const COLUMNS: &str =
    "folder, name, jid, trigger_pattern, requires_trigger, is_main, container_config, added_at";

fn from_row(r: &Row<'_>) -> Result<Group> {
    let folder = folder_at(r, 0)?;
    let config: String = r.get(6)?;
    let container_config = serde_json::from_str(&config).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(
            6,
            rusqlite::types::Type::Text,
            Box::new(Error::Invalid(format!(
                "the stored container_config of group {folder:?} is invalid: {e}"
            ))),
        )
    })?;
    Ok(Group {
        folder,
        name: r.get(1)?,
        jid: r.get(2)?,
        trigger_pattern: r.get(3)?,
        requires_trigger: r.get(4)?,
        is_main: r.get(5)?,
        container_config,
        added_at: r.get(7)?,
    })
}

pub fn get(conn: &Db<'_>, folder: &str) -> Result<Option<Group>> {
    conn.query_row(
        &format!("SELECT {COLUMNS} FROM registered_groups WHERE folder = ?1"),
        [folder],
        from_row,
    )
    .optional()
}

/// The group whose chat this is.
pub fn by_jid(conn: &Db<'_>, jid: &str) -> Result<Option<Group>> {
    conn.query_row(
        &format!("SELECT {COLUMNS} FROM registered_groups WHERE jid = ?1"),
        [jid],
        from_row,
    )
    .optional()
}

pub fn main_group(conn: &Db<'_>) -> Result<Option<Group>> {
    conn.query_row(
        &format!("SELECT {COLUMNS} FROM registered_groups WHERE is_main = 1"),
        (),
        from_row,
    )
    .optional()
}

pub fn list(conn: &Db<'_>) -> Result<Vec<Group>> {
    query_all(
        conn,
        &format!("SELECT {COLUMNS} FROM registered_groups ORDER BY is_main DESC, folder"),
        (),
        from_row,
    )
}

/// Replaces a registered group's `container_config`.
pub fn set_container_config(
    tx: &Db<'_>,
    folder: &GroupFolder,
    config: &GroupContainerConfig,
) -> Result<()> {
    let changed = tx.execute(
        "UPDATE registered_groups SET container_config = ?2 WHERE folder = ?1",
        params![folder.as_str(), serde_json::to_string(config)?],
    )?;
    if changed == 0 {
        return Err(Error::NotFound(format!("group {folder:?}")));
    }
    Ok(())
}

/// Unregisters a group. Its folder, sessions and archives stay: registering
/// the folder again picks them up.
pub fn remove(tx: &Db<'_>, folder: &GroupFolder) -> Result<Group> {
    let group = get(tx, folder)?.ok_or_else(|| Error::NotFound(format!("group {folder:?}")))?;
    tx.execute(
        "DELETE FROM registered_groups WHERE folder = ?1",
        [folder.as_str()],
    )?;
    Ok(group)
}

#[cfg(test)]
mod tests {
    use super::super::Store;
    use super::*;

    fn store_with(folder: &str) -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(&dir.path().join("g2.db"), std::time::Duration::from_secs(1)).unwrap();
        // What the host's `NewGroup { folder, name: "Fam", .. }` becomes.
        let g = Group {
            folder: GroupFolder::new(folder).unwrap(),
            name: "Fam".into(),
            jid: format!("local:{folder}"),
            trigger_pattern: Some(r"(?i)^@G2\b".into()),
            requires_trigger: true,
            is_main: false,
            container_config: GroupContainerConfig::default(),
            added_at: "2026-01-01T00:00:00.000Z".into(),
        };
        s.write_blocking(|tx| add(tx, &g)).unwrap();
        (dir, s)
    }

    #[test]
    fn container_config_is_parsed_when_the_row_is_read() {
        let (_d, s) = store_with("fam");
        s.write_blocking(|tx| {
            tx.execute(
                "UPDATE registered_groups SET container_config = '{\"memory_mb\":512,\"network\":true}'",
                (),
            )?;
            Ok(())
        })
        .unwrap();
        let g = s.read_blocking(|c| get(c, "fam")).unwrap().unwrap();
        assert_eq!(g.container_config.memory_mb, Some(512));
        assert_eq!(g.container_config.network, Some(true));
        assert_eq!(g.container_config.pids, None);
    }

    #[test]
    fn an_invalid_stored_config_is_an_error_naming_the_group() {
        let (_d, s) = store_with("fam");
        s.write_blocking(|tx| {
            tx.execute(
                "UPDATE registered_groups SET container_config = '{\"memory_mb\":\"lots\"}'",
                (),
            )?;
            Ok(())
        })
        .unwrap();
        let err = s.read_blocking(|c| get(c, "fam")).unwrap_err().to_string();
        assert!(err.contains("\"fam\""), "{err}");
        assert!(err.contains("container_config"), "{err}");
        let err = s.read_blocking(list).unwrap_err().to_string();
        assert!(err.contains("\"fam\""), "{err}");
    }

    #[test]
    fn a_default_config_is_stored_and_shown_as_an_empty_object() {
        let (_d, s) = store_with("fam");
        let stored: String = s
            .read_blocking(|c| {
                c.query_row(
                    "SELECT container_config FROM registered_groups WHERE folder = 'fam'",
                    (),
                    |r| r.get(0),
                )
            })
            .unwrap();
        assert_eq!(stored, "{}");
        let g = s.read_blocking(|c| get(c, "fam")).unwrap().unwrap();
        assert_eq!(
            serde_json::to_value(&g).unwrap()["container_config"],
            serde_json::json!({})
        );
    }
}
