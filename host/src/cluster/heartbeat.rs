//! The heartbeat ([`start`]): joins the store's hosts, then renews this
//! host's leases, gives up what it lost, takes free groups up to its share
//! and hands idle ones over above it (docs/cluster.md "Leases").

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{Hook, Inner, Leases, host_id, is_live, lock, share_of};
use crate::Result;
use crate::background::Background;
use crate::config::ClusterSettings;
use crate::store::{self, Store, leases};
use g2_core::validate::GroupFolder;

/// The running heartbeat; [`Membership::stop`] leaves the cluster (the
/// others take this host's groups at once).
pub struct Membership {
    leases: Leases,
    beat: Background,
    /// Dropped (the lock released) only after leaving.
    _presence: Option<store::presence::Presence>,
}

impl Membership {
    pub fn leases(&self) -> &Leases {
        &self.leases
    }

    /// Stops the heartbeat and gives every lease up. Call once no
    /// container of this host runs.
    pub async fn stop(self) {
        self.beat.stop().await;
        let me = self.leases.inner.host_id.clone();
        if let Err(e) = self
            .leases
            .inner
            .store
            .write(move |tx| leases::leave(tx, &me))
            .await
        {
            tracing::warn!(error = %e, "leaving the cluster; the leases expire on their own");
        }
    }
}

/// Joins the store's hosts as `api`, takes this host's share of the groups
/// and starts the heartbeat.
pub async fn start(
    store: Store,
    settings: &ClusterSettings,
    api: &str,
    gained: Hook,
    lost: Hook,
) -> Result<Membership> {
    let ttl = Duration::from_secs(settings.lease_secs);
    let leases = Leases {
        inner: Arc::new(Inner {
            store: store.clone(),
            host_id: host_id(settings),
            ttl_ms: i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX),
            held: Mutex::default(),
            running: Mutex::default(),
            turn: tokio::sync::Mutex::default(),
        }),
    };
    // Present before joining: a host listed without its presence counts
    // as dead and its leases are ended.
    let mut presence = store.presence(leases.host_id());
    if let Some(p) = &mut presence
        && !p.held_within(ttl).await
    {
        tracing::warn!(
            "this host's presence in the store is not held yet: the others take its groups until it is"
        );
    }
    let (me, a) = (leases.host_id().to_string(), api.to_string());
    store.write(move |tx| leases::join(tx, &me, &a)).await?;
    let mut next = beat(&leases, &gained, &lost).await?;
    tracing::info!(
        host = leases.host_id(),
        groups = leases.held().len(),
        "joined the cluster"
    );
    // Renewed three times a lease and at least every second; and just
    // after another host's lease ends, so that a group whose holder died
    // is taken as soon as it is free.
    let tick = (ttl / 3).min(Duration::from_secs(1));
    let l = leases.clone();
    let beat = Background::spawn(|mut stopped| async move {
        loop {
            let wait = next.map_or(tick, |end| tick.min(end + Duration::from_millis(20)));
            tokio::select! {
                _ = &mut stopped => break,
                _ = tokio::time::sleep(wait) => {}
            }
            next = match beat(&l, &gained, &lost).await {
                Ok(n) => n,
                Err(e) => {
                    tracing::warn!(error = %e, "cluster heartbeat failed; the next one retries");
                    None
                }
            };
        }
    });
    Ok(Membership {
        leases,
        beat,
        _presence: presence,
    })
}

/// One heartbeat: renew, give up what is lost, take free groups up to the
/// share, and hand over idle groups above it (a host that joined takes
/// them at its next heartbeat).
async fn beat(leases: &Leases, gained: &Hook, lost: &Hook) -> Result<Option<Duration>> {
    let _turn = leases.inner.turn.lock().await;
    let (me, ttl) = (leases.inner.host_id.clone(), leases.inner.ttl_ms);
    let (renewed, taken, keep, next_end, gone) = leases
        .inner
        .store
        .write(move |tx| {
            leases::beat(tx, &me, false)?;
            // Read once (presence comes from the server's lock table).
            let hosts = leases::hosts(tx)?;
            // A host whose process died: its leases end now, and the
            // memory jobs it had claimed are anyone's again (this host's
            // own too, when another process holds its presence).
            let absent = leases::absent(&hosts);
            let others: Vec<&str> = absent.iter().copied().filter(|h| *h != me).collect();
            let gone: Vec<String> = leases::expire_hosts(tx, &others)?
                .into_iter()
                .map(str::to_string)
                .collect();
            let jobs = store::observations::release_absent_claims(tx, &absent)?;
            if jobs > 0 {
                tracing::info!(jobs, "memory jobs of a gone host released");
            }
            let renewed = leases::renew(tx, &me, ttl)?;
            let now = leases::now_ms(tx)?;
            let all = leases::list(tx)?;
            let groups = store::groups::list(tx)?;
            let share = share_of(
                groups.len(),
                hosts.iter().filter(|h| is_live(h, now, ttl)).count(),
            );
            // Without its presence (another process runs under this host
            // id) this host takes nothing: the others end what it holds.
            let present = hosts.iter().any(|h| h.host_id == me && h.present);
            let room = if present {
                share.saturating_sub(renewed.len())
            } else {
                0
            };
            // Another live host below the even share while this one holds
            // the rounded-up share: this one keeps only the even share
            // (16 groups on 3 hosts are 6, 5, 5, never 6, 6, 4).
            let live: Vec<String> = hosts
                .into_iter()
                .filter(|h| is_live(h, now, ttl) && h.host_id != me)
                .map(|h| h.host_id)
                .collect();
            let floor = groups.len() / (live.len() + 1);
            let short = live.iter().any(|h| {
                all.iter()
                    .filter(|l| &l.host_id == h && l.expires_ms > now && !l.name.contains(':'))
                    .count()
                    < floor
            });
            let keep = if short { floor } else { share };
            let busy: HashSet<String> = all
                .iter()
                .filter(|l| l.expires_ms > now)
                .map(|l| l.name.clone())
                .collect();
            // When the next lease of another host ends: its holder may be
            // gone, and the group free then.
            let next_end = all
                .iter()
                .filter(|l| l.host_id != me && l.expires_ms > now)
                .map(|l| l.expires_ms - now)
                .min();
            let mut taken = Vec::new();
            for g in groups {
                if taken.len() >= room {
                    break;
                }
                if busy.contains(g.folder.as_str()) {
                    continue;
                }
                if let Some(l) = leases::acquire(tx, g.folder.as_str(), &me, ttl)? {
                    taken.push((g.folder, l.generation));
                }
            }
            Ok((renewed, taken, keep, next_end, gone))
        })
        .await?;
    for h in &gone {
        tracing::warn!(host = %h, "host gone (its presence in the store ended): its leases end now");
    }
    // What the store says this host holds now, against what it thought.
    let now: HashMap<GroupFolder, i64> = renewed
        .into_iter()
        .filter_map(|l| Some((GroupFolder::new(l.name).ok()?, l.generation)))
        .chain(taken)
        .collect();
    let (gone, got, surplus) = {
        let mut held = leases.held();
        let gone: Vec<GroupFolder> = held
            .iter()
            .filter(|(f, g)| now.get(*f) != Some(*g))
            .map(|(f, _)| f.clone())
            .collect();
        let got: Vec<GroupFolder> = now
            .iter()
            .filter(|(f, g)| held.get(*f) != Some(*g))
            .map(|(f, _)| f.clone())
            .collect();
        *held = now;
        // Above the share: idle groups go (forgotten here first, so no
        // container starts under the lease being released).
        let running = lock(&leases.inner.running);
        let over = held.len().saturating_sub(keep);
        let mut idle: Vec<(GroupFolder, i64)> = held
            .iter()
            .filter(|(f, _)| !running.contains(*f) && !got.contains(*f))
            .map(|(f, g)| (f.clone(), *g))
            .collect();
        idle.sort();
        idle.truncate(over);
        for (f, _) in &idle {
            held.remove(f);
        }
        (gone, got, idle)
    };
    for f in &gone {
        tracing::warn!(group = %f, "lease lost: another host owns the group now");
        lost(f);
    }
    for f in &got {
        tracing::info!(group = %f, "lease taken");
        gained(f);
    }
    if !surplus.is_empty() {
        let me = leases.inner.host_id.clone();
        let these = surplus.clone();
        leases
            .inner
            .store
            .write(move |tx| {
                for (f, g) in &these {
                    leases::release(tx, f.as_str(), &me, *g)?;
                }
                Ok(())
            })
            .await?;
        for (f, _) in &surplus {
            tracing::info!(group = %f, "handed over: above this host's share");
            lost(f);
        }
    }
    Ok(next_end.map(|ms| Duration::from_millis(u64::try_from(ms).unwrap_or(0))))
}
