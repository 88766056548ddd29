//! Several hosts on one store (docs/cluster.md): which groups this host
//! owns, through leases in the store ([`store::leases`]), and the
//! heartbeat that keeps them.
//!
//! [`Leases`] is the owned set, shared (cheap to clone): the queue asks it
//! before it starts a container ([`Leases::generation`], [`Leases::take`])
//! and fences its writes for the group with the generation it started
//! under. [`start`] joins the store's hosts and runs the heartbeat: every
//! third of `cluster.lease_secs` (at most a second) it renews what it holds, gives up (on the
//! `lost` hook: the queue closes the group's container) what it no longer
//! holds, and takes free groups up to its share (on the `gained` hook: the
//! queue routes what waits, as after a restart). A host alone holds every
//! group.
//!
//! Invariant: a group is acted on only under a lease the store still
//! shows as this host's at the generation the act started with; a host
//! that was paused or cut off while another took its group finds its
//! writes refused ([`crate::Error::Fenced`]) before it notices at its next
//! heartbeat. A lease that only expired (nobody took it) is still its.

mod heartbeat;
pub mod notify;
pub mod singleton;
pub mod status;

pub use heartbeat::{Membership, start};

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use crate::config::ClusterSettings;
use crate::store::{self, Store, leases};
use crate::{Error, Result};
use g2_core::validate::GroupFolder;

/// What the heartbeat tells the queue.
pub type Hook = Arc<dyn Fn(&GroupFolder) + Send + Sync>;

/// The groups this host owns, with their lease generations.
#[derive(Clone)]
pub struct Leases {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    host_id: String,
    ttl_ms: i64,
    held: Mutex<HashMap<GroupFolder, i64>>,
    /// Held groups with a container or a task under way: never handed
    /// over to even the load out. Locked after `held`.
    running: Mutex<HashSet<GroupFolder>>,
    /// One heartbeat or take at a time: a take between a heartbeat's
    /// renewal and its update of `held` would be taken for lost.
    turn: tokio::sync::Mutex<()>,
}

impl Leases {
    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<GroupFolder, i64>> {
        lock(&self.inner.held)
    }

    pub fn host_id(&self) -> &str {
        &self.inner.host_id
    }

    /// The generation this host holds `folder` at, as far as it knows
    /// (the store is the judge: [`Leases::fence`]).
    pub fn generation(&self, folder: &GroupFolder) -> Option<i64> {
        self.held().get(folder).copied()
    }

    /// The generation to start `folder`'s container under, marking it
    /// running (not handed over) until [`Leases::end`]; `None` when this
    /// host does not hold it.
    pub fn begin(&self, folder: &GroupFolder) -> Option<i64> {
        let held = self.held();
        let g = held.get(folder).copied()?;
        lock(&self.inner.running).insert(folder.clone());
        Some(g)
    }

    /// `folder`'s container has exited: it may be handed over.
    pub fn end(&self, folder: &GroupFolder) {
        lock(&self.inner.running).remove(folder);
    }

    /// The generation this host holds `folder` at, asked of the store (a
    /// host paused past its lease still believes it holds its groups):
    /// before a container starts. A lease found lost is forgotten.
    pub async fn confirm(&self, folder: &GroupFolder) -> Result<Option<i64>> {
        let Some(g) = self.generation(folder) else {
            return Ok(None);
        };
        let (me, f) = (self.inner.host_id.clone(), folder.to_string());
        let ours = self
            .inner
            .store
            .read(move |c| {
                Ok(leases::get(c, &f)?.is_some_and(|l| l.host_id == me && l.generation == g))
            })
            .await?;
        if !ours {
            self.forget(folder, g);
        }
        Ok(ours.then_some(g))
    }

    /// Takes the lease `name` (not a group's: no share applies) when
    /// nobody holds it; the generation, or `None`.
    pub async fn acquire_named(&self, name: &str) -> Result<Option<i64>> {
        let (me, n, ttl) = (
            self.inner.host_id.clone(),
            name.to_string(),
            self.inner.ttl_ms,
        );
        // Read first: another host holding it is the common case.
        if self.held_elsewhere(name).await? {
            return Ok(None);
        }
        let lease = self
            .inner
            .store
            .write(move |tx| leases::acquire(tx, &n, &me, ttl))
            .await?;
        Ok(lease.map(|l| l.generation))
    }

    /// Whether this host still holds the lease `name` at `generation`.
    pub async fn holds_named(&self, name: &str, generation: i64) -> Result<bool> {
        let (me, n) = (self.inner.host_id.clone(), name.to_string());
        self.inner
            .store
            .read(move |c| {
                Ok(leases::get(c, &n)?
                    .is_some_and(|l| l.host_id == me && l.generation == generation))
            })
            .await
    }

    /// Whether another host holds the unexpired lease `name` (a read).
    async fn held_elsewhere(&self, name: &str) -> Result<bool> {
        let (me, n) = (self.inner.host_id.clone(), name.to_string());
        self.inner
            .store
            .read(move |c| {
                let now = leases::now_ms(c)?;
                Ok(leases::get(c, &n)?.is_some_and(|l| l.host_id != me && l.expires_ms > now))
            })
            .await
    }

    fn store(&self) -> &Store {
        &self.inner.store
    }

    /// The groups this host holds, as far as it knows.
    pub fn held_groups(&self) -> Vec<GroupFolder> {
        self.held().keys().cloned().collect()
    }

    /// Takes `folder`'s lease when nobody holds it and this host is within
    /// its share; the generation it holds it at, or `None`.
    pub async fn take(&self, folder: &GroupFolder) -> Result<Option<i64>> {
        let _turn = self.inner.turn.lock().await;
        if let Some(g) = self.generation(folder) {
            return Ok(Some(g));
        }
        // Read first: another live host holding it is the common case (a
        // message for its group came here), and needs no write.
        if self.held_elsewhere(folder).await? {
            return Ok(None);
        }
        let (me, f, ttl) = (
            self.inner.host_id.clone(),
            folder.to_string(),
            self.inner.ttl_ms,
        );
        let held = self.held().len();
        let lease = self
            .inner
            .store
            .write(move |tx| {
                if held >= share(tx, ttl)? {
                    return Ok(None);
                }
                leases::acquire(tx, &f, &me, ttl)
            })
            .await?;
        Ok(lease.map(|l| {
            self.held().insert(folder.clone(), l.generation);
            l.generation
        }))
    }

    /// The lease on a group at `generation`, as the writes of a run started
    /// under it carry it.
    pub fn at(&self, generation: i64) -> Fence {
        Fence {
            leases: self.clone(),
            generation,
        }
    }

    /// Refuses the write it runs in unless this host still holds `folder`
    /// at `generation`.
    pub fn fence(&self, tx: &store::Db<'_>, folder: &GroupFolder, generation: i64) -> Result<()> {
        let r = leases::fence(tx, folder.as_str(), &self.inner.host_id, generation);
        if matches!(r, Err(Error::Fenced { .. })) {
            self.forget(folder, generation);
        }
        r
    }

    /// Forgets `folder` if it is held at `generation` (a fenced write says
    /// it is not this host's any more).
    fn forget(&self, folder: &GroupFolder, generation: i64) {
        let mut held = self.held();
        if held.get(folder) == Some(&generation) {
            held.remove(folder);
        }
    }
}

/// A run's lease, carried by its writes for the group: [`Fence::check`]
/// refuses the write it runs in once the lease is not this host's at that
/// generation.
#[derive(Clone)]
pub struct Fence {
    leases: Leases,
    generation: i64,
}

impl Fence {
    pub fn check(&self, tx: &store::Db<'_>, folder: &GroupFolder) -> Result<()> {
        self.leases.fence(tx, folder, self.generation)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Whether `e` says a lease was lost.
pub fn is_fenced(e: &Error) -> bool {
    matches!(e, Error::Fenced { .. })
}

/// Whether a host counts among the live ones: present (its process holds
/// its presence lock; [`store::presence`]), not stopping, and heard from
/// within half a lease (it beats at least three times a lease). A dead
/// process is counted out at once; a paused one by the time its leases
/// end (it has been silent for half a lease), so the others take its
/// groups then.
pub fn is_live(h: &leases::Host, now_ms: i64, ttl_ms: i64) -> bool {
    h.present && !h.stopping && now_ms - h.seen_ms < ttl_ms / 2
}

/// How many groups a host should hold: the registered groups over the
/// live hosts ([`is_live`]), rounded up.
fn share(tx: &store::Db<'_>, ttl_ms: i64) -> Result<usize> {
    let now = leases::now_ms(tx)?;
    let live = leases::hosts(tx)?
        .iter()
        .filter(|h| is_live(h, now, ttl_ms))
        .count();
    Ok(share_of(store::groups::list(tx)?.len(), live))
}

/// [`share`] of `groups` over `live` hosts.
fn share_of(groups: usize, live: usize) -> usize {
    groups.div_ceil(live.max(1)).max(1)
}

/// This host's name: `cluster.host_id`, else the machine's host name.
pub fn host_id(settings: &ClusterSettings) -> String {
    settings.host_id.clone().unwrap_or_else(|| {
        rustix::system::uname()
            .nodename()
            .to_string_lossy()
            .into_owned()
    })
}
