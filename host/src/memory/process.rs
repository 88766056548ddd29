//! The memory processor: turns what capture stored into observations and
//! session summaries, in the background, never in an agent's turn or the
//! router's way.
//!
//! Jobs live in SQLite (`store::observations`): a completed prompt batch
//! (queued by the recovery jobs, or by a pass here) is extracted into 0–N
//! observations; a completed session whose batches are all extracted gets
//! a summary. A pass claims at most `memory.max_concurrent` jobs of each
//! kind (`processing`), runs the extractor outside any transaction, then
//! stores the outcome and marks the job `done` in one transaction: a host
//! killed in between stores nothing of that job, and at the next start the
//! job is `pending` again (`release_claims`), so its observations are
//! stored once. A failed job is retried after 30 s, then 60 s, and after
//! [`MAX_ATTEMPTS`] it is `failed` with the reason.
//!
//! A new observation that says what an active one of its group and kind
//! already says ([`same_statement`]) supersedes it, so memory does not fill
//! with restatements.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;

use crate::background::Background;
use crate::config::MemorySettings;
use crate::memory::extract::{ActivityInput, BatchInput, Extractor};
use crate::search::question;
use crate::search::stem;
use crate::store::memory::BatchRow;
use crate::store::observations::{self as obs, Provenance, Queue};
use crate::store::{self, Store};
use crate::{Error, Result};

/// Attempts before a job is `failed` for good.
pub const MAX_ATTEMPTS: i64 = 3;

/// What one pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Processed {
    pub batches: usize,
    pub observations: usize,
    pub summaries: usize,
    pub failed: usize,
}

fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// A captured batch as the extractor takes it.
pub fn batch_input(b: &BatchRow) -> BatchInput {
    BatchInput {
        prompt_number: b.prompt_number,
        prompt: b.prompt.clone(),
        senders: b.senders.clone(),
        reply: b.reply.clone(),
        activities: b
            .activities
            .iter()
            .map(|a| ActivityInput {
                tool: a.tool.clone(),
                input: a.input.clone(),
                output: a.output.clone(),
                files_read: a.files_read.clone(),
                files_modified: a.files_modified.clone(),
                ok: a.ok,
            })
            .collect(),
        at: b.started_at.clone(),
    }
}

/// Whether two observation titles state the same thing: the same content
/// words (stop words out, stems), or one's words all within the other's
/// when it has at least three.
pub fn same_statement(a: &str, b: &str) -> bool {
    let words = |s: &str| -> HashSet<String> {
        question::words(s)
            .filter(|w| !question::is_stop(w))
            .map(|w| stem(&w).into_owned())
            .collect()
    };
    let (a, b) = (words(a), words(b));
    if a.is_empty() || b.is_empty() {
        return false;
    }
    if a == b {
        return true;
    }
    let (small, large) = if a.len() <= b.len() {
        (&a, &b)
    } else {
        (&b, &a)
    };
    small.len() >= 3 && small.is_subset(large)
}

/// When a job that failed its `attempts`-th time is tried again; None when
/// it has had its tries.
fn retry_at(now: DateTime<Utc>, attempts: i64) -> Option<String> {
    (attempts < MAX_ATTEMPTS).then(|| {
        let secs = 30_i64.saturating_mul(1_i64 << attempts.clamp(1, 10).saturating_sub(1));
        ts(now + chrono::TimeDelta::seconds(secs))
    })
}

/// One pass at `now`: queue what is ready, then extract and summarise up
/// to `max_concurrent` jobs of each kind.
pub async fn pass(
    store: &Store,
    extractor: &Arc<dyn Extractor>,
    settings: &MemorySettings,
    now: DateTime<Utc>,
) -> Result<Processed> {
    let mut done = Processed::default();
    let n = settings.max_concurrent.max(1);
    let at = ts(now);
    let batches = store
        .write({
            let at = at.clone();
            move |tx| {
                store::memory::queue_completed(tx, &at)?;
                obs::claim(tx, Queue::Batches, &at, n)
            }
        })
        .await?;
    for key in batches {
        match extract_batch(store, extractor, key, &at).await {
            Ok(k) => {
                done.batches += 1;
                done.observations += k;
            }
            Err(e) => {
                done.failed += 1;
                give_up_or_retry(store, Queue::Batches, key, &e, now).await?;
            }
        }
    }
    let sessions = store
        .write({
            let at = at.clone();
            move |tx| {
                obs::queue_summaries(tx, &at)?;
                obs::claim(tx, Queue::Sessions, &at, n)
            }
        })
        .await?;
    for key in sessions {
        match summarise(store, extractor, key, &at).await {
            Ok(()) => done.summaries += 1,
            Err(e) => {
                done.failed += 1;
                give_up_or_retry(store, Queue::Sessions, key, &e, now).await?;
            }
        }
    }
    Ok(done)
}

async fn give_up_or_retry(
    store: &Store,
    q: Queue,
    key: i64,
    e: &Error,
    now: DateTime<Utc>,
) -> Result<()> {
    let error = e.to_string();
    store
        .write(move |tx| {
            let attempts = obs::attempts(tx, q, key)?;
            let retry = retry_at(now, attempts);
            if retry.is_none() {
                tracing::warn!(?q, key, error = %error, "memory job failed for good");
            }
            obs::failed(tx, q, key, &error, retry.as_deref())
        })
        .await
}

async fn extract_batch(
    store: &Store,
    extractor: &Arc<dyn Extractor>,
    key: i64,
    at: &str,
) -> Result<usize> {
    let Some((group, session, row)) = store.read(move |c| store::memory::batch(c, key)).await?
    else {
        // Its session was forgotten meanwhile: nothing to do.
        store
            .write(move |tx| obs::done(tx, Queue::Batches, key))
            .await?;
        return Ok(0);
    };
    let input = batch_input(&row);
    let ex = extractor.clone();
    let drafts = tokio::task::spawn_blocking(move || ex.observations(&input))
        .await
        .map_err(|e| Error::Invalid(format!("extractor: {e}")))?
        .map_err(|e| Error::Invalid(e.to_string()))?;
    let at = at.to_string();
    store
        .write(move |tx| {
            for d in &drafts {
                let from = Provenance {
                    session: Some(session),
                    batch: Some(key),
                    remembered: false,
                };
                obs::insert(tx, &group, d, from, &at, |old| {
                    same_statement(old, &d.title)
                })?;
            }
            obs::done(tx, Queue::Batches, key)?;
            Ok(drafts.len())
        })
        .await
}

async fn summarise(
    store: &Store,
    extractor: &Arc<dyn Extractor>,
    session: i64,
    at: &str,
) -> Result<()> {
    let (group, batches) = store
        .read(move |c| {
            let group = store::memory::session_group_by_row(c, session)?;
            Ok((group, store::memory::batches_of(c, session)?))
        })
        .await?;
    let Some(group) = group else {
        store
            .write(move |tx| obs::done(tx, Queue::Sessions, session))
            .await?;
        return Ok(());
    };
    let inputs: Vec<BatchInput> = batches.iter().map(batch_input).collect();
    let ex = extractor.clone();
    let summary = tokio::task::spawn_blocking(move || ex.summary(&inputs))
        .await
        .map_err(|e| Error::Invalid(format!("extractor: {e}")))?
        .map_err(|e| Error::Invalid(e.to_string()))?;
    let at = at.to_string();
    store
        .write(move |tx| {
            obs::insert_summary(tx, &group, session, &summary, &at)?;
            obs::done(tx, Queue::Sessions, session)
        })
        .await
}

/// Releases claims a killed host left, then runs a pass now and every
/// `memory.process_interval_secs` (or sooner when `wake` is notified)
/// until stopped.
pub fn start(
    store: Store,
    settings: MemorySettings,
    extractor: Arc<dyn Extractor>,
    wake: Arc<tokio::sync::Notify>,
) -> Background {
    let every = Duration::from_secs(settings.process_interval_secs.max(1));
    Background::spawn(|mut stopped| async move {
        match store.write(obs::release_claims).await {
            Ok(n) if n > 0 => tracing::info!(jobs = n, "memory jobs a stopped host left resumed"),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "memory jobs: releasing claims failed"),
        }
        loop {
            match pass(&store, &extractor, &settings, Utc::now()).await {
                Ok(p) if p != Processed::default() => tracing::info!(?p, "memory processed"),
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "memory processing failed; next pass retries"),
            }
            tokio::select! {
                _ = &mut stopped => break,
                _ = tokio::time::sleep(every) => {}
                _ = wake.notified() => {}
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::extract::{ExtractError, Kind, ObservationDraft, SummaryDraft};
    use g2_core::validate::GroupFolder;

    /// Remembers each prompt as a fact; fails on a prompt saying "fail".
    struct Echo;

    impl Extractor for Echo {
        fn observations(&self, b: &BatchInput) -> Result<Vec<ObservationDraft>, ExtractError> {
            if b.prompt.contains("fail") {
                return Err(ExtractError::Invalid("no".into()));
            }
            Ok(vec![ObservationDraft {
                kind: Kind::Fact,
                title: b.prompt.clone(),
                narrative: String::new(),
                facts: vec![],
                files: vec![],
                importance: 5,
                concerns: b.senders.clone(),
            }])
        }

        fn summary(&self, bs: &[BatchInput]) -> Result<SummaryDraft, ExtractError> {
            Ok(SummaryDraft {
                title: bs.first().map(|b| b.prompt.clone()).unwrap_or_default(),
                request: bs.first().map(|b| b.prompt.clone()).unwrap_or_default(),
                ..SummaryDraft::default()
            })
        }
    }

    #[tokio::test]
    async fn batches_become_observations_once_and_sessions_summaries() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(&dir.path().join("g2.db"), Duration::from_secs(1)).unwrap();
        let fam = GroupFolder::new("fam").unwrap();
        let t0: DateTime<Utc> = "2026-01-01T00:00:00Z".parse().unwrap();
        let f = fam.clone();
        s.write_blocking(move |tx| {
            let a = store::memory::open_session(tx, &f, "s", None, None, &ts(t0))?;
            for p in [
                "the boat is moored at pier 7",
                "the boat is moored at pier 7 now",
                "please fail",
            ] {
                let b = store::memory::start_batch(tx, a, p, &["Ann".to_string()], &ts(t0))?;
                store::memory::finish_batch(tx, b, Some("ok"), &ts(t0))?;
            }
            store::memory::end_session(tx, a, Some("clear"), &ts(t0))?;
            Ok(())
        })
        .unwrap();
        let ex: Arc<dyn Extractor> = Arc::new(Echo);
        let settings = MemorySettings {
            max_concurrent: 10,
            ..MemorySettings::default()
        };
        let p = pass(&s, &ex, &settings, t0).await.unwrap();
        assert_eq!((p.batches, p.observations, p.failed), (2, 2, 1), "{p:?}");
        // The restatement superseded the first.
        let list = s.read_blocking(move |c| obs::list(c, &fam, true)).unwrap();
        let active: Vec<&str> = list
            .iter()
            .filter(|o| o.status == "active")
            .map(|o| o.title.as_str())
            .collect();
        assert_eq!(active, ["the boat is moored at pier 7 now"]);
        assert_eq!(list.iter().filter(|o| o.status == "superseded").count(), 1);
        assert_eq!(list[0].concerns, ["Ann"]);
        // Not summarised while a batch job waits for its retry; retried
        // after the backoff, failed for good after the last attempt.
        let later = |m: i64| t0 + chrono::TimeDelta::minutes(m);
        assert_eq!(
            pass(&s, &ex, &settings, t0).await.unwrap(),
            Processed::default()
        );
        let p = pass(&s, &ex, &settings, later(1)).await.unwrap();
        assert_eq!(p.failed, 1);
        // The third failure is final: the session is summarised at once.
        let p = pass(&s, &ex, &settings, later(3)).await.unwrap();
        assert_eq!((p.failed, p.summaries), (1, 1), "{p:?}");
        let fam = GroupFolder::new("fam").unwrap();
        let sum = s
            .read_blocking(move |c| obs::summary(c, &fam, "s"))
            .unwrap()
            .unwrap();
        assert_eq!(sum.title, "the boat is moored at pier 7");
        // Nothing is left to do, and nothing is done twice.
        assert_eq!(
            pass(&s, &ex, &settings, later(20)).await.unwrap(),
            Processed::default()
        );
        assert_eq!(s.read_blocking(obs::pending).unwrap(), (0, 0));
    }

    #[tokio::test]
    async fn a_claim_left_by_a_killed_host_is_taken_again_and_stored_once() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(&dir.path().join("g2.db"), Duration::from_secs(1)).unwrap();
        let fam = GroupFolder::new("fam").unwrap();
        let t0: DateTime<Utc> = "2026-01-01T00:00:00Z".parse().unwrap();
        let f = fam.clone();
        s.write_blocking(move |tx| {
            let a = store::memory::open_session(tx, &f, "s", None, None, &ts(t0))?;
            let b = store::memory::start_batch(tx, a, "remember the oars", &[], &ts(t0))?;
            store::memory::finish_batch(tx, b, None, &ts(t0))?;
            store::memory::queue_completed(tx, &ts(t0))?;
            // A host claimed it and was killed before storing anything.
            obs::claim(tx, Queue::Batches, &ts(t0), 1)?;
            Ok(())
        })
        .unwrap();
        let ex: Arc<dyn Extractor> = Arc::new(Echo);
        let settings = MemorySettings::default();
        assert_eq!(pass(&s, &ex, &settings, t0).await.unwrap().batches, 0);
        assert_eq!(s.write_blocking(obs::release_claims).unwrap(), 1);
        assert_eq!(pass(&s, &ex, &settings, t0).await.unwrap().batches, 1);
        assert_eq!(pass(&s, &ex, &settings, t0).await.unwrap().batches, 0);
        let n = s
            .read_blocking(move |c| obs::list(c, &fam, true))
            .unwrap()
            .len();
        assert_eq!(n, 1);
    }

    #[test]
    fn restatements_are_recognised() {
        assert!(same_statement(
            "The boat is moored at pier 7",
            "the boat: moored at pier 7!"
        ));
        assert!(same_statement(
            "boat moored pier 7",
            "the boat is moored at pier 7 now"
        ));
        assert!(!same_statement(
            "the boat is at pier 7",
            "the car is at pier 7"
        ));
        assert!(!same_statement("", "x"));
    }
}
