//! The recovery jobs (Open Agent Kit's four), run at start and every
//! `memory.recovery_interval_secs`: a batch idle for `batch_idle_secs` is
//! completed; a session idle for `session_idle_secs` is completed with
//! reason `stale`; an activity without a batch is attached to the latest
//! earlier batch of its session (else to the session's recovery batch);
//! completed batches are queued for the memory processor. Then retention:
//! sessions that ended more than `retention_days` ago are deleted with
//! everything captured in them.
//!
//! **Invariants:** one pass is one transaction and is idempotent (a second
//! pass at the same time changes nothing), so a container that died
//! mid-turn or a host killed between events ends consistent after the next
//! pass, and two hosts' passes could never double anything.

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;

use crate::Result;
use crate::background::Background;
use crate::config::MemorySettings;
use crate::store::{self, Store};

/// What one pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Recovered {
    pub idle_batches: usize,
    pub stale_sessions: usize,
    pub orphans: usize,
    pub queued: usize,
    pub forgotten: usize,
}

fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

fn before(now: DateTime<Utc>, secs: u64) -> String {
    let back = chrono::TimeDelta::try_seconds(i64::try_from(secs).unwrap_or(i64::MAX))
        .unwrap_or(chrono::TimeDelta::MAX);
    ts(now
        .checked_sub_signed(back)
        .unwrap_or(DateTime::<Utc>::MIN_UTC))
}

/// One pass of the jobs at `now`, in one transaction.
pub fn recover(
    tx: &store::Db<'_>,
    now: DateTime<Utc>,
    settings: &MemorySettings,
) -> Result<Recovered> {
    let idle_batches =
        store::memory::close_idle_batches(tx, &before(now, settings.batch_idle_secs))?;
    let stale_sessions =
        store::memory::close_stale_sessions(tx, &before(now, settings.session_idle_secs))?;
    let orphans = store::memory::attach_orphans(tx)?;
    let queued = store::memory::queue_completed(tx, &ts(now))?;
    // Replays come within moments of a crash; a day is plenty.
    store::memory::forget_seen_before(tx, &before(now, 24 * 60 * 60))?;
    let forgotten = match settings.retention_days {
        Some(days) => store::memory::forget_before(
            tx,
            &before(now, u64::from(days).saturating_mul(24 * 60 * 60)),
        )?,
        None => 0,
    };
    Ok(Recovered {
        idle_batches,
        stale_sessions,
        orphans,
        queued,
        forgotten,
    })
}

/// Runs a pass now and then every `recovery_interval_secs` until stopped.
pub fn start(store: Store, settings: MemorySettings) -> Background {
    let every = Duration::from_secs(settings.recovery_interval_secs.max(1));
    Background::spawn(|mut stopped| async move {
        loop {
            let s = settings.clone();
            match store.write(move |tx| recover(tx, Utc::now(), &s)).await {
                Ok(r) if r != Recovered::default() => {
                    tracing::info!(?r, "memory recovery");
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "memory recovery failed; next pass retries"),
            }
            tokio::select! {
                _ = &mut stopped => break,
                _ = tokio::time::sleep(every) => {}
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use g2_core::validate::GroupFolder;

    #[test]
    fn a_pass_brings_interrupted_capture_to_rest_and_a_second_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(&dir.path().join("g2.db"), Duration::from_secs(1)).unwrap();
        let fam = GroupFolder::new("fam").unwrap();
        let t0: DateTime<Utc> = "2026-01-01T00:00:00Z".parse().unwrap();
        s.write_blocking(|tx| {
            let a = store::memory::open_session(tx, &fam, "s", None, None, &ts(t0))?;
            store::memory::start_batch(tx, a, "p", &[], &ts(t0))?;
            let orphan = store::memory::NewActivity {
                tool: "Bash",
                tool_use_id: "t",
                input: "{}",
                output: "",
                ok: true,
                at: &ts(t0 + chrono::TimeDelta::seconds(1)),
                ..Default::default()
            };
            store::memory::add_activity(tx, a, None, &orphan)?;
            Ok(())
        })
        .unwrap();
        let settings = MemorySettings {
            retention_days: Some(30),
            ..MemorySettings::default()
        };
        // A minute later: nothing is idle yet, the orphan is attached.
        let soon = t0 + chrono::TimeDelta::minutes(1);
        let r = s.write_blocking(|tx| recover(tx, soon, &settings)).unwrap();
        assert_eq!(
            r,
            Recovered {
                orphans: 1,
                ..Default::default()
            }
        );
        // Two hours later: the batch and the session are done and queued.
        let later = t0 + chrono::TimeDelta::hours(2);
        let r = s
            .write_blocking(|tx| recover(tx, later, &settings))
            .unwrap();
        assert_eq!((r.idle_batches, r.stale_sessions, r.queued), (1, 1, 1));
        assert_eq!(
            s.write_blocking(|tx| recover(tx, later, &settings))
                .unwrap(),
            Recovered::default()
        );
        // Past the retention: gone.
        let next_year = t0 + chrono::TimeDelta::days(365);
        let r = s
            .write_blocking(|tx| recover(tx, next_year, &settings))
            .unwrap();
        assert_eq!(r.forgotten, 1);
        assert!(
            s.read_blocking(|c| store::memory::sessions(c, &fam))
                .unwrap()
                .is_empty()
        );
    }
}
