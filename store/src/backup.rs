//! `g2 backup` and `g2 restore`: a consistent copy of a SQLite store taken
//! while a host writes to it, and what a backup's manifest says of a store
//! (its schema version, every table's rows, the archives' files).
//!
//! The copy is `VACUUM INTO`: one read transaction, so it is the store as
//! it was at one commit (WAL lets the host's writer go on meanwhile), and a
//! compact file. What belongs to the running host alone is left out of the
//! copy: its heartbeat, and its leases end (their rows and generations stay,
//! so the fencing of writes goes on), so a restored home's host takes its
//! groups at once, under any host id.

use std::collections::BTreeMap;
use std::path::Path;

use rusqlite::{Connection, OpenFlags};

use crate::{Error, Result};

/// What a store holds, as a backup's manifest records it and a restore
/// checks it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Summary {
    /// `PRAGMA user_version`: the migrations applied.
    pub schema_version: i64,
    /// Rows of every table the host keeps (those `g2 migrate` copies).
    pub rows: BTreeMap<String, i64>,
}

/// Copies the SQLite store at `source` into the new file `dest` at one
/// point in time, without stopping its writers; in the copy the running
/// host's leases have ended and its heartbeat is gone. Blocking.
pub fn snapshot(source: &Path, dest: &Path, busy_timeout: std::time::Duration) -> Result<()> {
    let src = open_existing(source, OpenFlags::SQLITE_OPEN_READ_WRITE)?;
    src.busy_timeout(busy_timeout)?;
    let to = dest
        .to_str()
        .ok_or_else(|| Error::Invalid(format!("{} is not UTF-8", dest.display())))?;
    src.execute("VACUUM INTO ?1", [to])?;
    let copy = Connection::open_with_flags(dest, OpenFlags::SQLITE_OPEN_READ_WRITE)?;
    if has_table(&copy, "leases")? {
        copy.execute_batch("UPDATE leases SET expires_ms = 0; DELETE FROM cluster_hosts;")?;
    }
    Ok(())
}

/// The schema version and every table's rows of the SQLite file at `db`,
/// after an integrity check (a damaged file is an error). Blocking.
pub fn summarize(db: &Path) -> Result<Summary> {
    let c = read_only(db)?;
    let check: String = c.query_row("PRAGMA quick_check", [], |r| r.get(0))?;
    if check != "ok" {
        return Err(Error::Invalid(format!(
            "the database {} is damaged: {check}",
            db.display()
        )));
    }
    let schema_version = c.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    let mut rows = BTreeMap::new();
    for &table in crate::copy::TABLES {
        if has_table(&c, table)? {
            let n: i64 = c.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))?;
            rows.insert(table.to_string(), n);
        }
    }
    Ok(Summary {
        schema_version,
        rows,
    })
}

/// The home-relative path of every archive the SQLite file at `db`
/// records. Blocking.
pub fn archive_paths(db: &Path) -> Result<Vec<String>> {
    let c = read_only(db)?;
    let mut stmt = c.prepare("SELECT path FROM conversation_archives ORDER BY id")?;
    let paths = stmt
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<Vec<String>>>()?;
    Ok(paths)
}

fn read_only(db: &Path) -> Result<Connection> {
    open_existing(db, OpenFlags::SQLITE_OPEN_READ_ONLY)
}

/// A connection to the SQLite file at `path`, which must exist (it is
/// never created).
pub(crate) fn open_existing(path: &Path, flags: OpenFlags) -> Result<Connection> {
    if !path.is_file() {
        return Err(Error::NotFound(format!(
            "the SQLite store {}",
            path.display()
        )));
    }
    Ok(Connection::open_with_flags(
        path,
        flags | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?)
}

fn has_table(c: &Connection, name: &str) -> Result<bool> {
    Ok(c.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1",
        [name],
        |r| r.get::<_, i64>(0),
    )? > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_taken_beside_a_writer_holds_every_committed_row() {
        let dir = tempfile::tempdir().unwrap();
        let _store =
            crate::Store::open(&dir.path().join("g2.db"), std::time::Duration::from_secs(5))
                .unwrap();
        let db = dir.path().join("g2.db");
        // A reader holding an open transaction does not stop the snapshot.
        let reader = read_only(&db).unwrap();
        reader
            .execute_batch("BEGIN; SELECT count(*) FROM messages;")
            .unwrap();
        Connection::open(&db)
            .unwrap()
            .execute_batch(
                "INSERT INTO leases VALUES ('main', 'h', 3, 1, 9999999999999);
                 INSERT INTO cluster_hosts (host_id, started_ms, seen_ms) VALUES ('h', 1, 1);",
            )
            .unwrap();
        let copy = dir.path().join("copy.db");
        snapshot(&db, &copy, std::time::Duration::from_secs(5)).unwrap();
        let s = summarize(&copy).unwrap();
        assert_eq!(s.schema_version, crate::SQLITE_SCHEMA_VERSION);
        assert_eq!(s.rows.len(), crate::copy::TABLES.len());
        assert_eq!(s, summarize(&db).unwrap());
        let c = read_only(&copy).unwrap();
        let (generation, expires): (i64, i64) = c
            .query_row("SELECT generation, expires_ms FROM leases", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .unwrap();
        assert_eq!(
            (generation, expires),
            (3, 0),
            "the lease ended, its generation kept"
        );
        let hosts: i64 = c
            .query_row("SELECT count(*) FROM cluster_hosts", [], |r| r.get(0))
            .unwrap();
        assert_eq!(hosts, 0);
        assert!(
            snapshot(&db, &copy, std::time::Duration::from_secs(5)).is_err(),
            "never overwrites"
        );
    }

    #[test]
    fn a_damaged_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("bad.db");
        std::fs::write(&db, b"SQLite format 3\0 but not really a database at all").unwrap();
        assert!(summarize(&db).is_err());
        assert!(matches!(
            summarize(&dir.path().join("none.db")),
            Err(Error::NotFound(_))
        ));
    }
}
