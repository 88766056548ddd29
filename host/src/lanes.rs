//! Fair sharing between groups: each group's queries (archive search,
//! recall, the per-prompt memory block) run in the group's own lane, a
//! bounded number at a time with a bounded queue behind them, so one
//! group's heavy requests wait only for that group's.
//!
//! A lane is made on a group's first query and lives as long as the
//! process (one per group name, a few hundred bytes). Past its queue a
//! query is refused at once ([`Busy`]): the API answers 429, a hook an
//! empty block, a tool an error to try again. What a query costs is
//! bounded by `search::question::cap`; the work itself runs on the
//! store's blocking pool, never on a runtime worker.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Queries of one group run at once.
pub const PER_GROUP: usize = 2;
/// Queries of one group that may wait for a place; more are refused.
pub const QUEUE: usize = 16;
/// Lanes kept before idle ones are let go (names are many; a lane
/// nobody is in holds nothing).
const KEPT: usize = 1024;
/// The lane of a query that names no group (an archive search of every
/// group, the viewer's search of all).
pub const ALL_GROUPS: &str = "*";

/// A lane was full: the query was not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("group {0} has {QUEUE} queries waiting already; try again in a moment")]
pub struct Busy(pub String);

/// The query lanes of this process, one per group.
pub static QUERIES: LazyLock<Lanes> = LazyLock::new(|| Lanes::new(PER_GROUP, QUEUE));

/// Lanes keyed by group name.
pub struct Lanes {
    limit: usize,
    queue: usize,
    lanes: Mutex<HashMap<String, Arc<Lane>>>,
}

struct Lane {
    places: Arc<Semaphore>,
    waiting: AtomicUsize,
}

/// A place in a lane, held while the query runs.
#[derive(Debug)]
pub struct Place {
    _permit: OwnedSemaphorePermit,
}

impl Lanes {
    /// `limit` queries of a group at once, `queue` more waiting.
    pub fn new(limit: usize, queue: usize) -> Self {
        Lanes {
            limit: limit.max(1),
            queue,
            lanes: Mutex::new(HashMap::new()),
        }
    }

    fn lane(&self, group: &str) -> Arc<Lane> {
        let mut lanes = self
            .lanes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if lanes.len() >= KEPT && !lanes.contains_key(group) {
            // Names nobody queries now go (no query holds their lane).
            lanes.retain(|_, l| Arc::strong_count(l) > 1);
        }
        lanes
            .entry(group.to_string())
            .or_insert_with(|| {
                Arc::new(Lane {
                    places: Arc::new(Semaphore::new(self.limit)),
                    waiting: AtomicUsize::new(0),
                })
            })
            .clone()
    }

    /// A place in `group`'s lane: at once when one is free, after the
    /// group's earlier queries otherwise, or [`Busy`] when its queue is
    /// full.
    pub async fn enter(&self, group: &str) -> Result<Place, Busy> {
        let lane = self.lane(group);
        if let Ok(permit) = lane.places.clone().try_acquire_owned() {
            return Ok(Place { _permit: permit });
        }
        // Counted until the wait ends, also when the caller stops waiting
        // (a hook past its deadline drops this future): a place in the
        // queue is never kept by someone who left it.
        let (_waiting, ahead) = Waiting::join(&lane.waiting);
        if ahead >= self.queue {
            return Err(Busy(group.to_string()));
        }
        let permit = lane.places.clone().acquire_owned().await;
        // The semaphore is never closed.
        permit
            .map(|p| Place { _permit: p })
            .map_err(|_| Busy(group.to_string()))
    }
}

/// One caller in a lane's queue, for as long as this lives.
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    /// Joins the queue; also returns how many were in it before.
    fn join(count: &'a AtomicUsize) -> (Self, usize) {
        let ahead = count.fetch_add(1, Ordering::AcqRel);
        (Waiting(count), ahead)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Runs `f` on the store's blocking pool from a place in `group`'s lane,
/// held until `f` ends, even when its caller stopped waiting: the lane
/// bounds the work, not the waiting.
pub async fn read<T, F>(store: &crate::store::Store, group: &str, f: F) -> crate::Result<T>
where
    T: Send + 'static,
    F: FnOnce(&crate::store::db::Db<'_>) -> crate::Result<T> + Send + 'static,
{
    let place = QUERIES.enter(group).await?;
    store
        .read(move |c| {
            let _place = place;
            f(c)
        })
        .await
}

impl From<Busy> for crate::Error {
    fn from(b: Busy) -> Self {
        crate::Error::Busy(b.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_full_lane_delays_only_its_own_group() {
        let lanes = Lanes::new(2, 1);
        let a1 = lanes.enter("a").await.unwrap();
        let _a2 = lanes.enter("a").await.unwrap();
        // Another group goes at once.
        let b = tokio::time::timeout(Duration::from_millis(100), lanes.enter("b"))
            .await
            .expect("b never waits for a");
        assert!(b.is_ok());
        // A third of a's waits; a fourth is refused.
        let lanes = Arc::new(lanes);
        let l = lanes.clone();
        let waiting = tokio::spawn(async move { l.enter("a").await });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(lanes.enter("a").await.unwrap_err(), Busy("a".into()));
        assert!(!waiting.is_finished());
        drop(a1);
        let third = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .unwrap()
            .unwrap();
        assert!(third.is_ok());
    }

    #[tokio::test]
    async fn a_caller_that_stops_waiting_leaves_the_queue() {
        let lanes = Lanes::new(1, 2);
        let held = lanes.enter("a").await.unwrap();
        // Ten callers give up waiting (a hook past its deadline).
        for _ in 0..10 {
            let gave_up = tokio::time::timeout(Duration::from_millis(5), lanes.enter("a")).await;
            assert!(gave_up.is_err(), "the lane's one place is held");
        }
        // The queue is empty again: two more may wait, the third is refused.
        let lanes = Arc::new(lanes);
        let w: Vec<_> = (0..2)
            .map(|_| {
                let l = lanes.clone();
                // Each lets go of its place at once, for the next.
                tokio::spawn(async move { l.enter("a").await.map(drop) })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(lanes.enter("a").await.unwrap_err(), Busy("a".into()));
        drop(held);
        for w in w {
            let entered = tokio::time::timeout(Duration::from_secs(5), w)
                .await
                .unwrap()
                .unwrap();
            assert!(entered.is_ok());
        }
    }
}
