//! A host's presence on a PostgreSQL store: a session-level advisory lock
//! named after its host id, held on a connection of its own for as long as
//! the host runs (docs/cluster.md "Leases"). When the process dies, even
//! by kill -9, the operating system closes that connection and the server
//! drops the lock at once, so the other hosts see the death within a
//! heartbeat instead of a lease time ([`crate::leases::expire_hosts`]).
//!
//! A paused process keeps its connection and so its lock: the others wait
//! for its leases to expire, as they would without presence. A host that
//! only lost the connection (a network fault) may lose its groups early;
//! that is safe, since every write for a group is fenced by its lease
//! generation. SQLite has one host: no presence.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::watch;

use crate::{Result, Store};

/// The first key of the presence locks ("g2pr" in ASCII); the second is
/// `hashtext(host_id)`. Two-key advisory locks never meet the store's
/// one-key write and migration locks (`pg_locks.objsubid` 2, not 1).
pub(crate) const PRESENCE_CLASS: i32 = 0x6732_7072;

/// Whether the host `h.host_id` holds its presence lock, as SQL over a
/// `cluster_hosts h` row.
pub(crate) const PRESENT_SQL: &str = "EXISTS (SELECT 1 FROM pg_locks l
    WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND l.classid = 1731358834::oid AND l.objid = hashtext(h.host_id)::oid)";

/// How often the holder checks that its connection is alive and that it
/// is still wanted; and how long it waits between attempts to connect.
const POLL: Duration = Duration::from_millis(500);

/// This host's presence lock, held by a thread until dropped.
pub struct Presence {
    stop: Arc<AtomicBool>,
    held: watch::Receiver<bool>,
}

impl Presence {
    /// Waits until the lock is held (or `limit` passes): false when it is
    /// not (another process runs under this host id, or the store cannot
    /// be reached).
    pub async fn held_within(&mut self, limit: Duration) -> bool {
        tokio::time::timeout(limit, self.held.wait_for(|h| *h))
            .await
            .is_ok_and(|r| r.is_ok())
    }
}

impl Drop for Presence {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl Store {
    /// Holds `host_id`'s presence lock until the [`Presence`] is dropped,
    /// taking it again after a lost connection; `None` on SQLite.
    pub fn presence(&self, host_id: &str) -> Option<Presence> {
        let (config, _) = self.postgres_config()?;
        let config = config.clone();
        let host_id = host_id.to_string();
        let stop = Arc::new(AtomicBool::new(false));
        let (held_tx, held) = watch::channel(false);
        let s = stop.clone();
        std::thread::Builder::new()
            .name("presence".into())
            .spawn(move || {
                while !s.load(Ordering::Relaxed) {
                    if let Err(e) = hold_once(&config, &host_id, &s, &held_tx) {
                        tracing::warn!(error = %e, "presence in the store lost; reconnecting");
                    }
                    held_tx.send_replace(false);
                    std::thread::sleep(POLL);
                }
            })
            .ok()?;
        Some(Presence { stop, held })
    }
}

/// One connection's worth of presence: takes the lock (waiting while
/// another process holds it), then keeps the connection until it fails or
/// `stop` is set; closing it releases the lock.
fn hold_once(
    config: &postgres::Config,
    host_id: &str,
    stop: &AtomicBool,
    held: &watch::Sender<bool>,
) -> Result<()> {
    let mut client = config.connect(postgres::NoTls)?;
    let mut warned = false;
    loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        let got: bool = client
            .query_one(
                "SELECT pg_try_advisory_lock($1, hashtext($2))",
                &[&PRESENCE_CLASS, &host_id],
            )?
            .get(0);
        if got {
            break;
        }
        if !warned {
            tracing::warn!(
                host = host_id,
                "another process holds this host id's presence in the store; waiting for it"
            );
            warned = true;
        }
        std::thread::sleep(POLL);
    }
    held.send_replace(true);
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(POLL);
        if client.is_valid(POLL * 4).is_err() {
            return Err(crate::Error::Invalid(
                "the presence connection closed".into(),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sql_names_the_lock_taken() {
        let class = format!("l.classid = {PRESENCE_CLASS}::oid");
        assert!(PRESENT_SQL.contains(&class), "{PRESENT_SQL}");
    }
}
