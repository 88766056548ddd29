//! Work one host of the cluster does at a time: polling Telegram, holding
//! the Discord gateway or Slack's socket (docs/cluster.md). Each is held
//! through a lease named `channel:{name}` in the store, like a group's; the
//! heartbeat renews it with the host's other leases. A host that does not
//! hold it tries every second (a dead holder's lease ends, and the first
//! to try after takes it); a holder that finds it lost (paused past it)
//! stops the work. A host that stops hands it over at once.

use std::time::Duration;

use super::Leases;
use crate::background::Background;
use crate::store::leases;

/// How often a host looks whether it should start or stop the work.
const LOOK: Duration = Duration::from_secs(1);

/// Starts the work.
pub type Start = Box<dyn Fn() -> Background + Send + Sync>;

/// The lease a singleton is held through.
pub fn lease_name(name: &str) -> String {
    format!("channel:{name}")
}

/// Runs `start`'s work while this host holds `channel:{name}`.
pub fn hold(leases: Leases, name: &'static str, start: Start) -> Background {
    let lease = lease_name(name);
    Background::spawn(|mut stopped| async move {
        let mut running: Option<(i64, Background)> = None;
        loop {
            running = match running {
                None => match leases.acquire_named(&lease).await {
                    Ok(Some(g)) => {
                        tracing::info!(
                            channel = name,
                            generation = g,
                            "this host runs the channel"
                        );
                        Some((g, start()))
                    }
                    Ok(None) => None,
                    Err(e) => {
                        tracing::warn!(channel = name, error = %e, "taking the channel's lease");
                        None
                    }
                },
                Some((g, work)) => match leases.holds_named(&lease, g).await {
                    Ok(false) => {
                        tracing::warn!(
                            channel = name,
                            "the channel's lease is another host's now; stopping it here"
                        );
                        work.stop().await;
                        None
                    }
                    // A failed look keeps the work: the lease decides.
                    _ => Some((g, work)),
                },
            };
            tokio::select! {
                _ = &mut stopped => break,
                _ = tokio::time::sleep(LOOK) => {}
            }
        }
        if let Some((g, work)) = running {
            work.stop().await;
            let (me, lease) = (leases.host_id().to_string(), lease.clone());
            let released = leases
                .store()
                .write(move |tx| leases::release(tx, &lease, &me, g))
                .await;
            if let Err(e) = released {
                tracing::warn!(channel = name, error = %e, "handing the channel over; its lease ends on its own");
            }
        }
    })
}
