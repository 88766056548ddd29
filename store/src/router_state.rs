//! The `router_state` table: the routing rules' small per-group values
//! (cursor, in-flight mark, failing note), each under its own key.

use crate::db::{Db, Optional};
use crate::params;

use super::Result;

/// The value stored under `key`.
pub fn get(conn: &Db<'_>, key: &str) -> Result<Option<String>> {
    conn.query_row(
        "SELECT value FROM router_state WHERE key = ?1",
        [key],
        |r| r.get(0),
    )
    .optional()
}

/// Stores `value` under `key`, replacing what was there.
pub fn set(tx: &Db<'_>, key: &str, value: &str) -> Result<()> {
    tx.execute(
        "INSERT INTO router_state (key, value) VALUES (?1, ?2)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        params![key, value],
    )?;
    Ok(())
}

/// Removes `key`.
pub fn delete(tx: &Db<'_>, key: &str) -> Result<()> {
    tx.execute("DELETE FROM router_state WHERE key = ?1", [key])?;
    Ok(())
}
