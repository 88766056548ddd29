//! What `g2 cluster status` and `GET /api/cluster` show: the hosts sharing
//! the store, and who owns each group, by the database's clock.

use serde::Serialize;

use crate::Result;
use crate::store::{self, Store, leases};

/// The hosts and the groups' owners.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    /// The database's clock (ms since the epoch) the ages are taken at.
    pub now_ms: i64,
    pub lease_secs: u64,
    pub hosts: Vec<Host>,
    pub groups: Vec<Owner>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Host {
    pub host_id: String,
    pub api: String,
    pub started_ms: i64,
    /// Since its last heartbeat.
    pub seen_ago_ms: i64,
    /// Present, not stopping, and a heartbeat within half the lease time
    /// ([`super::is_live`]).
    pub live: bool,
    /// Its process holds its presence in the store (false: it died).
    pub present: bool,
    pub stopping: bool,
    /// The groups it holds a lease on.
    pub groups: usize,
}

/// A registered group (or a channel's connection) and its lease.
#[derive(Debug, Clone, Serialize)]
pub struct Owner {
    /// The group's folder, or `channel:…`.
    pub name: String,
    /// The host holding an unexpired lease; `None`: nobody (the next host
    /// to look takes it).
    pub host_id: Option<String>,
    pub generation: Option<i64>,
    /// Since the holder took it.
    pub held_ms: Option<i64>,
    /// Until it expires without a heartbeat.
    pub expires_in_ms: Option<i64>,
}

/// Reads the status in one snapshot.
pub async fn read(store: &Store, lease_secs: u64) -> Result<Status> {
    store
        .read(move |c| {
            let now = leases::now_ms(c)?;
            let ttl = i64::try_from(lease_secs.saturating_mul(1000)).unwrap_or(i64::MAX);
            let rows = leases::list(c)?;
            let held = |l: &leases::Lease| l.expires_ms > now;
            let hosts = leases::hosts(c)?
                .into_iter()
                .map(|h| Host {
                    groups: rows
                        .iter()
                        .filter(|l| held(l) && l.host_id == h.host_id)
                        .count(),
                    seen_ago_ms: now - h.seen_ms,
                    live: super::is_live(&h, now, ttl),
                    host_id: h.host_id,
                    api: h.api,
                    started_ms: h.started_ms,
                    present: h.present,
                    stopping: h.stopping,
                })
                .collect();
            let mut names: Vec<String> = store::groups::list(c)?
                .into_iter()
                .map(|g| g.folder.to_string())
                .collect();
            names.extend(
                rows.iter()
                    .filter(|l| l.name.starts_with("channel:"))
                    .map(|l| l.name.clone()),
            );
            let groups = names
                .into_iter()
                .map(|name| {
                    let lease = rows.iter().find(|l| l.name == name && held(l));
                    Owner {
                        host_id: lease.map(|l| l.host_id.clone()),
                        generation: lease.map(|l| l.generation),
                        held_ms: lease.map(|l| now - l.acquired_ms),
                        expires_in_ms: lease.map(|l| l.expires_ms - now),
                        name,
                    }
                })
                .collect();
            Ok(Status {
                now_ms: now,
                lease_secs,
                hosts,
                groups,
            })
        })
        .await
}
