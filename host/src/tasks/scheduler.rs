//! The scheduler: fires due scheduled tasks into the group queue.
//!
//! It sleeps until the earliest `next_run` (at most `MAX_SLEEP`) or until
//! told that tasks changed, then claims due tasks in one transaction
//! ([`tasks::claim_due`]: a claimed task is never claimed twice, and its
//! next run is computed at claim time) and hands them to the queue
//! through `due` (the queue's task channel, wired in host/src/host.rs), which
//! runs them, logs each run in `task_run_logs` and delivers the result to
//! the group's chat. Schedules are [`tasks`]' business (cron with a
//! timezone, interval, once).
//!
//! At start, claims an earlier host left (it died mid-run) are released so
//! those tasks run again.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, mpsc};

use crate::Result;
use crate::background::Background;
use crate::cluster::Leases;
use crate::store::Store;
use crate::tasks::{self, Task};

/// Longest sleep between looks, in case the clock jumps.
const MAX_SLEEP: Duration = Duration::from_secs(60);
/// Most tasks claimed per look.
const CLAIM_BATCH: usize = 50;

/// What this host's schedulers claim tasks as start with (`host` is
/// `cluster.host_id`, which has no `/`).
pub fn claimer_prefix(host: &str) -> String {
    format!("g2/{host}/")
}

/// What this process's scheduler claims tasks as.
pub fn claimer(host: &str) -> String {
    format!("{}{}", claimer_prefix(host), std::process::id())
}

/// Starts the scheduler: due tasks are sent to `due`. `changed` wakes it
/// when tasks are added or change. With `leases` (hosts sharing the
/// store), only the tasks of this host's groups are claimed; claims of
/// another host are released by whoever takes their group next.
pub async fn start(
    store: Store,
    due: mpsc::UnboundedSender<Task>,
    changed: Arc<Notify>,
    leases: Option<Leases>,
) -> Result<Background> {
    let prefix = claimer_prefix(leases.as_ref().map_or("", |l| l.host_id()));
    // Alone, every claim was an earlier process's; shared, this host's own.
    let own = leases.is_some().then(|| prefix.clone());
    let released = store
        .write(move |tx| tasks::release_claims(tx, own.as_deref()))
        .await?;
    if released > 0 {
        tracing::warn!(
            released,
            "scheduled tasks an earlier host was running will run again"
        );
    }
    let claimer = claimer(leases.as_ref().map_or("", |l| l.host_id()));
    Ok(Background::spawn(move |mut stopped| async move {
        loop {
            let now = chrono::Utc::now();
            let (c, l) = (claimer.clone(), leases.clone());
            match store
                .write(move |tx| {
                    tasks::claim_due(tx, now, &c, CLAIM_BATCH, &|g| {
                        l.as_ref().is_none_or(|l| l.generation(g).is_some())
                    })
                })
                .await
            {
                Ok(claimed) => {
                    for t in claimed {
                        tracing::info!(task = %t.id, group = %t.group_folder, "scheduled task due");
                        let _ = due.send(t);
                    }
                }
                Err(e) => tracing::error!(error = %e, "claiming due tasks"),
            }
            let wait = match store.read(tasks::next_due).await {
                // A floor, so a task that cannot be claimed does not spin the loop.
                Ok(Some(at)) => (at - chrono::Utc::now())
                    .to_std()
                    .unwrap_or(Duration::ZERO)
                    .clamp(Duration::from_millis(20), MAX_SLEEP),
                Ok(None) => MAX_SLEEP,
                Err(e) => {
                    tracing::error!(error = %e, "reading the next due task");
                    MAX_SLEEP
                }
            };
            tokio::select! {
                _ = &mut stopped => break,
                _ = changed.notified() => {}
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }))
}
