//! The `cluster_hosts` and `leases` tables: which hosts share the store
//! and which of them owns a group or a channel's connection, by the
//! database's clock (docs/cluster.md). The rules (spreading, takeover,
//! handing over) are the host's `cluster`; here are the statements.
//!
//! Every writing function runs in a write transaction, and those are
//! serialised on both backends (SQLite's one writer, PostgreSQL's write
//! lock), so a read-then-write here is atomic. Time is the database's
//! clock, never a host's: hosts on different machines disagree about the
//! time, the store does not.

use serde::Serialize;

use crate::db::{Db, Dialect, Optional, Row};
use crate::{Error, Result, params, query_all};

/// Who owns `name` (a group's folder, or `channel:…`) until when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Lease {
    pub name: String,
    pub host_id: String,
    /// Grows with every new holder; a write carries the one it was given.
    pub generation: i64,
    pub acquired_ms: i64,
    pub expires_ms: i64,
}

/// A host that shares the store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Host {
    pub host_id: String,
    /// Its API address, as it printed it.
    pub api: String,
    pub started_ms: i64,
    /// Its last heartbeat.
    pub seen_ms: i64,
    /// It is handing its groups over before it stops.
    pub stopping: bool,
    /// Its process holds its presence in the store (always on SQLite):
    /// false once it died, before its heartbeat is even late
    /// ([`crate::presence`]).
    pub present: bool,
}

/// The database's clock, in milliseconds since the epoch.
pub fn now_ms(db: &Db<'_>) -> Result<i64> {
    let sql = match db.dialect() {
        Dialect::Sqlite => "SELECT CAST(unixepoch('subsec') * 1000 AS INTEGER)",
        Dialect::Postgres => "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint",
    };
    db.query_row(sql, (), |r| r.get(0))
}

/// A host (re)joins: started now, not stopping. Returns the clock. A host
/// restarted under its name keeps the leases nobody took from it, each at
/// a new generation: whatever its earlier process still had under way is
/// fenced.
pub fn join(tx: &Db<'_>, host_id: &str, api: &str) -> Result<i64> {
    let now = now_ms(tx)?;
    tx.execute(
        "UPDATE leases SET generation = generation + 1 WHERE host_id = ?1",
        [host_id],
    )?;
    tx.execute(
        "INSERT INTO cluster_hosts (host_id, api, started_ms, seen_ms, stopping)
         VALUES (?1, ?2, ?3, ?3, 0)
         ON CONFLICT (host_id) DO UPDATE SET
           api = excluded.api, started_ms = excluded.started_ms,
           seen_ms = excluded.seen_ms, stopping = 0",
        params![host_id, api, now],
    )?;
    Ok(now)
}

/// A host's heartbeat (and whether it is stopping). Returns the clock.
pub fn beat(tx: &Db<'_>, host_id: &str, stopping: bool) -> Result<i64> {
    let now = now_ms(tx)?;
    tx.execute(
        "UPDATE cluster_hosts SET seen_ms = ?2, stopping = ?3 WHERE host_id = ?1",
        params![host_id, now, stopping],
    )?;
    Ok(now)
}

/// A host leaves: its row goes and its leases are released, so the others
/// take its groups at once rather than after the lease time.
pub fn leave(tx: &Db<'_>, host_id: &str) -> Result<()> {
    let now = now_ms(tx)?;
    tx.execute(
        "UPDATE leases SET host_id = ?3, expires_ms = min(expires_ms, ?2) WHERE host_id = ?1",
        params![host_id, now, NOBODY],
    )?;
    tx.execute("DELETE FROM cluster_hosts WHERE host_id = ?1", [host_id])?;
    Ok(())
}

/// The lease on `name` for `host_id` for `ttl_ms` from now: renewed (same
/// generation) while it is still its (expired or not: nobody took it),
/// taken (next generation) when it is nobody's or another holder's has
/// expired; `None` while another host holds it.
pub fn acquire(tx: &Db<'_>, name: &str, host_id: &str, ttl_ms: i64) -> Result<Option<Lease>> {
    let now = now_ms(tx)?;
    let expires = now + ttl_ms;
    let lease = match get(tx, name)? {
        Some(l) if l.host_id == host_id => Lease {
            expires_ms: expires,
            ..l
        },
        Some(l) if l.expires_ms > now => return Ok(None),
        Some(l) => Lease {
            name: name.into(),
            host_id: host_id.into(),
            generation: l.generation + 1,
            acquired_ms: now,
            expires_ms: expires,
        },
        None => Lease {
            name: name.into(),
            host_id: host_id.into(),
            generation: 1,
            acquired_ms: now,
            expires_ms: expires,
        },
    };
    tx.execute(
        "INSERT INTO leases (name, host_id, generation, acquired_ms, expires_ms)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (name) DO UPDATE SET host_id = excluded.host_id,
           generation = excluded.generation, acquired_ms = excluded.acquired_ms,
           expires_ms = excluded.expires_ms",
        params![
            lease.name,
            lease.host_id,
            lease.generation,
            lease.acquired_ms,
            lease.expires_ms
        ],
    )?;
    Ok(Some(lease))
}

/// Extends every lease still `host_id`'s by `ttl_ms` from now; returns
/// them. One that expired while nobody took it is still its (same
/// generation): nobody else acted on the group meanwhile, since taking it
/// changes the holder.
pub fn renew(tx: &Db<'_>, host_id: &str, ttl_ms: i64) -> Result<Vec<Lease>> {
    let now = now_ms(tx)?;
    tx.execute(
        "UPDATE leases SET expires_ms = ?2 WHERE host_id = ?1",
        params![host_id, now + ttl_ms],
    )?;
    query_all(
        tx,
        &format!("SELECT {COLUMNS} FROM leases WHERE host_id = ?1 ORDER BY name"),
        [host_id],
        from_row,
    )
}

/// Gives the lease up: nobody holds it from now (the row and its
/// generation stay, so the next holder's is higher). False when it was no
/// longer `host_id`'s at `generation`.
pub fn release(tx: &Db<'_>, name: &str, host_id: &str, generation: i64) -> Result<bool> {
    let now = now_ms(tx)?;
    let n = tx.execute(
        "UPDATE leases SET host_id = ?5, expires_ms = min(expires_ms, ?4)
         WHERE name = ?1 AND host_id = ?2 AND generation = ?3",
        params![name, host_id, generation, now, NOBODY],
    )?;
    Ok(n == 1)
}

/// Fencing: `Ok` only while `host_id` holds `name` at `generation`.
/// Called inside the write it guards, so the check and the write are one
/// transaction. An expired lease nobody took still passes: writes are
/// serialised and taking a lease changes its holder, so no other host has
/// acted on the group before this write.
pub fn fence(tx: &Db<'_>, name: &str, host_id: &str, generation: i64) -> Result<()> {
    match get(tx, name)? {
        Some(l) if l.host_id == host_id && l.generation == generation => Ok(()),
        _ => Err(Error::Fenced {
            name: name.into(),
            generation,
        }),
    }
}

/// The lease row of `name` (held or expired).
pub fn get(db: &Db<'_>, name: &str) -> Result<Option<Lease>> {
    db.query_row(
        &format!("SELECT {COLUMNS} FROM leases WHERE name = ?1"),
        [name],
        from_row,
    )
    .optional()
}

/// Every lease row, held or expired, by name.
pub fn list(db: &Db<'_>) -> Result<Vec<Lease>> {
    query_all(
        db,
        &format!("SELECT {COLUMNS} FROM leases ORDER BY name"),
        (),
        from_row,
    )
}

/// Every host that joined and has not left, oldest first.
pub fn hosts(db: &Db<'_>) -> Result<Vec<Host>> {
    query_all(
        db,
        &format!(
            "SELECT host_id, api, started_ms, seen_ms, stopping, {} FROM cluster_hosts h
             ORDER BY started_ms, host_id",
            present(db)
        ),
        (),
        |r| {
            Ok(Host {
                host_id: r.get(0)?,
                api: r.get(1)?,
                started_ms: r.get(2)?,
                seen_ms: r.get(3)?,
                stopping: r.get(4)?,
                present: r.get(5)?,
            })
        },
    )
}

/// The hosts of `hosts` whose process is gone (its presence lock dropped:
/// [`crate::presence`]; none on SQLite).
pub fn absent(hosts: &[Host]) -> Vec<&str> {
    hosts
        .iter()
        .filter(|h| !h.present)
        .map(|h| h.host_id.as_str())
        .collect()
}

/// Ends now the unexpired leases of `gone` hosts ([`absent`]), so that
/// they are taken at once rather than when they run out; returns the hosts
/// that had any. A host that was only cut off from the store finds the
/// leases it still holds renewed at its next heartbeat, and those taken
/// meanwhile fenced.
pub fn expire_hosts<'a>(tx: &Db<'_>, gone: &[&'a str]) -> Result<Vec<&'a str>> {
    if gone.is_empty() {
        return Ok(Vec::new());
    }
    let now = now_ms(tx)?;
    let mut ended = Vec::new();
    for h in gone {
        let n = tx.execute(
            "UPDATE leases SET expires_ms = ?2 WHERE host_id = ?1 AND expires_ms > ?2",
            params![h, now],
        )?;
        if n > 0 {
            ended.push(*h);
        }
    }
    Ok(ended)
}

/// Whether `h` (a `cluster_hosts` row) holds its presence, as SQL.
fn present(db: &Db<'_>) -> &'static str {
    match db.dialect() {
        Dialect::Sqlite => "1",
        Dialect::Postgres => crate::presence::PRESENT_SQL,
    }
}

const COLUMNS: &str = "name, host_id, generation, acquired_ms, expires_ms";

/// The holder of a released lease: no host has this name (host ids are
/// never empty).
const NOBODY: &str = "";

fn from_row(r: &Row<'_>) -> Result<Lease> {
    Ok(Lease {
        name: r.get(0)?,
        host_id: r.get(1)?,
        generation: r.get(2)?,
        acquired_ms: r.get(3)?,
        expires_ms: r.get(4)?,
    })
}
