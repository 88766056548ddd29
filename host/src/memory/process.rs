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

use crate::Result;
use crate::background::Background;
use crate::config::MemorySettings;
use crate::memory::extract::{
    ActivityInput, BatchInput, ExtractError, Extractor, ObservationDraft, SummaryDraft,
};
use crate::search::question;
use crate::search::stem;
use crate::store::memory::BatchRow;
use crate::store::observations::{self as obs, Provenance, Queue};
use crate::store::{self, Store};
use g2_core::validate::GroupFolder;

/// Attempts before a job is `failed` for good.
pub const MAX_ATTEMPTS: i64 = 3;

/// What one pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Processed {
    pub batches: usize,
    pub observations: usize,
    pub summaries: usize,
    pub failed: usize,
    /// Jobs left waiting for their group's budget.
    pub deferred: usize,
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

/// How one job ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    /// Stored: this many observations (0 or 1 for a summary).
    Stored(usize),
    /// Failed; retried later or failed for good.
    Failed,
    /// Waits for the group's budget.
    Deferred,
}

/// How long a group whose budget is used up waits before its jobs are
/// tried again: until the next UTC day, or 15 minutes when that is sooner
/// to notice a raised cap.
fn paused_until(now: DateTime<Utc>) -> String {
    let tomorrow = (now.date_naive() + chrono::Days::new(1))
        .and_hms_opt(0, 0, 0)
        .map(|d| d.and_utc())
        .unwrap_or(now);
    ts(tomorrow.min(now + chrono::TimeDelta::minutes(15)))
}

/// One pass at `now`: queue what is ready, then extract and summarise up
/// to `max_concurrent` jobs of each kind. The extractor's calls run at
/// once; their outcomes are stored one by one in the order the jobs were
/// queued, so a later batch's statement supersedes an earlier one's and
/// never the other way round.
pub async fn pass(
    store: &Store,
    extractor: &Arc<dyn Extractor>,
    settings: &MemorySettings,
    now: DateTime<Utc>,
) -> Result<Processed> {
    use futures_util::StreamExt;
    let mut done = Processed::default();
    let n = settings.max_concurrent.max(1);
    let at = ts(now);
    for q in [Queue::Batches, Queue::Sessions] {
        let keys = store
            .write({
                let at = at.clone();
                move |tx| {
                    match q {
                        Queue::Batches => store::memory::queue_completed(tx, &at)?,
                        Queue::Sessions => obs::queue_summaries(tx, &at)?,
                    };
                    obs::claim(tx, q, &at, n)
                }
            })
            .await?;
        let mut extracted = futures_util::stream::iter(keys)
            .map(|key| extract(store, extractor, q, key))
            .buffered(n);
        while let Some(x) = extracted.next().await {
            match settle(store, x?, q, now).await? {
                Ended::Stored(k) if q == Queue::Batches => {
                    done.batches += 1;
                    done.observations += k;
                }
                Ended::Stored(_) => done.summaries += 1,
                Ended::Failed => done.failed += 1,
                Ended::Deferred => done.deferred += 1,
            }
        }
    }
    Ok(done)
}

/// A job's extraction, not yet stored.
enum Extraction {
    /// Its session was forgotten meanwhile: nothing to store.
    Gone(i64),
    Observations {
        key: i64,
        group: GroupFolder,
        session: i64,
        drafts: Vec<ObservationDraft>,
    },
    Summary {
        session: i64,
        group: GroupFolder,
        summary: SummaryDraft,
    },
    Failed {
        key: i64,
        group: GroupFolder,
        error: ExtractError,
    },
}

/// Reads a claimed job's input and asks the extractor; stores nothing.
async fn extract(
    store: &Store,
    extractor: &Arc<dyn Extractor>,
    q: Queue,
    key: i64,
) -> Result<Extraction> {
    let failed = |group, error| Extraction::Failed { key, group, error };
    match q {
        Queue::Batches => {
            let Some((group, session, row)) =
                store.read(move |c| store::memory::batch(c, key)).await?
            else {
                return Ok(Extraction::Gone(key));
            };
            Ok(
                match extractor.observations(&group, &batch_input(&row)).await {
                    Ok(drafts) => Extraction::Observations {
                        key,
                        group,
                        session,
                        drafts,
                    },
                    Err(e) => failed(group, e),
                },
            )
        }
        Queue::Sessions => {
            let (group, batches) = store
                .read(move |c| {
                    let group = store::memory::session_group_by_row(c, key)?;
                    Ok((group, store::memory::batches_of(c, key)?))
                })
                .await?;
            let Some(group) = group else {
                return Ok(Extraction::Gone(key));
            };
            let inputs: Vec<BatchInput> = batches.iter().map(batch_input).collect();
            Ok(match extractor.summary(&group, &inputs).await {
                Ok(summary) => Extraction::Summary {
                    session: key,
                    group,
                    summary,
                },
                Err(e) => failed(group, e),
            })
        }
    }
}

/// Stores a job's outcome and marks it done, failed or waiting, in one
/// transaction.
async fn settle(store: &Store, x: Extraction, q: Queue, now: DateTime<Utc>) -> Result<Ended> {
    let at = ts(now);
    let (key, group, e) = match x {
        Extraction::Gone(key) => {
            store.write(move |tx| obs::done(tx, q, key)).await?;
            return Ok(Ended::Stored(0));
        }
        Extraction::Observations {
            key,
            group,
            session,
            drafts,
        } => {
            let n = store
                .write(move |tx| {
                    for d in &drafts {
                        let from = Provenance {
                            session: Some(session),
                            batch: Some(key),
                            remembered: false,
                        };
                        obs::insert(tx, &(&group).into(), d, from, &at, |old| {
                            same_statement(old, &d.title)
                        })?;
                    }
                    obs::done(tx, Queue::Batches, key)?;
                    Ok(drafts.len())
                })
                .await?;
            return Ok(Ended::Stored(n));
        }
        Extraction::Summary {
            session,
            group,
            summary,
        } => {
            store
                .write(move |tx| {
                    obs::insert_summary(tx, &group, session, &summary, &at)?;
                    obs::done(tx, Queue::Sessions, session)
                })
                .await?;
            return Ok(Ended::Stored(1));
        }
        Extraction::Failed { key, group, error } => (key, group, error),
    };
    let error = e.to_string();
    if let ExtractError::OverBudget(_) = e {
        let until = paused_until(now);
        let waiting = store
            .write({
                let (g, error, until) = (group.clone(), error.clone(), until.clone());
                move |tx| obs::defer_group(tx, &g, (q, key), &until, &error)
            })
            .await?;
        tracing::warn!(%group, jobs = waiting, until = %until, reason = %error,
            "memory extraction paused for the group");
        return Ok(Ended::Deferred);
    }
    // Invalid output was already asked for again: final at once.
    let last = matches!(e, ExtractError::Invalid(_));
    store
        .write(move |tx| {
            let attempts = obs::attempts(tx, q, key)?;
            let retry = if last { None } else { retry_at(now, attempts) };
            if retry.is_none() {
                tracing::warn!(%group, ?q, key, error = %error, "memory job failed for good");
            } else {
                tracing::info!(%group, ?q, key, error = %error, "memory job failed; retried later");
            }
            obs::failed(tx, q, key, &error, retry.as_deref())
        })
        .await?;
    Ok(Ended::Failed)
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
    use crate::memory::extract::{Extracted, Kind, ObservationDraft, SummaryDraft};

    /// Remembers each prompt as a fact; fails on a prompt saying "fail".
    struct Echo;

    impl Extractor for Echo {
        fn observations<'a>(
            &'a self,
            _group: &'a GroupFolder,
            b: &'a BatchInput,
        ) -> Extracted<'a, Vec<ObservationDraft>> {
            if b.prompt.contains("fail") {
                return Box::pin(std::future::ready(Err(ExtractError::Unavailable(
                    "no".into(),
                ))));
            }
            if b.prompt.contains("garbled") {
                return Box::pin(std::future::ready(Err(ExtractError::Invalid(
                    "not JSON".into(),
                ))));
            }
            if _group.as_str() == "broke" {
                return Box::pin(std::future::ready(Err(ExtractError::OverBudget(
                    "used up".into(),
                ))));
            }
            Box::pin(std::future::ready(Ok(vec![ObservationDraft {
                kind: Kind::Fact,
                title: b.prompt.clone(),
                narrative: String::new(),
                facts: vec![],
                files: vec![],
                importance: 5,
                concerns: b.senders.clone(),
            }])))
        }

        fn summary<'a>(
            &'a self,
            _group: &'a GroupFolder,
            bs: &'a [BatchInput],
        ) -> Extracted<'a, SummaryDraft> {
            Box::pin(std::future::ready(Ok(SummaryDraft {
                title: bs.first().map(|b| b.prompt.clone()).unwrap_or_default(),
                request: bs.first().map(|b| b.prompt.clone()).unwrap_or_default(),
                completed: format!("{} prompts", bs.len()),
                ..SummaryDraft::default()
            })))
        }
    }

    /// [`Echo`], with room for every job of a test in one pass.
    fn echo() -> (Arc<dyn Extractor>, MemorySettings) {
        let settings = MemorySettings {
            max_concurrent: 10,
            ..MemorySettings::default()
        };
        (Arc::new(Echo), settings)
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
        let (ex, settings) = echo();
        let p = pass(&s, &ex, &settings, t0).await.unwrap();
        assert_eq!((p.batches, p.observations, p.failed), (2, 2, 1), "{p:?}");
        // The restatement superseded the first.
        let list = s
            .read_blocking(move |c| obs::list(c, &(&fam).into(), true))
            .unwrap();
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
            .read_blocking(move |c| obs::list(c, &(&fam).into(), true))
            .unwrap()
            .len();
        assert_eq!(n, 1);
    }

    #[tokio::test]
    async fn invalid_answers_fail_at_once_and_a_spent_budget_pauses_its_group_only() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(&dir.path().join("g2.db"), Duration::from_secs(1)).unwrap();
        let t0: DateTime<Utc> = "2026-01-01T23:50:00Z".parse().unwrap();
        s.write_blocking(move |tx| {
            for (group, prompts) in [
                ("fam", &["garbled", "the oars are in the shed"][..]),
                ("broke", &["one", "two", "three"][..]),
            ] {
                let g = GroupFolder::new(group).unwrap();
                let a = store::memory::open_session(tx, &g, group, None, None, &ts(t0))?;
                for p in prompts {
                    let b = store::memory::start_batch(tx, a, p, &[], &ts(t0))?;
                    store::memory::finish_batch(tx, b, None, &ts(t0))?;
                }
            }
            Ok(())
        })
        .unwrap();
        let (ex, settings) = echo();
        let p = pass(&s, &ex, &settings, t0).await.unwrap();
        assert_eq!((p.batches, p.failed, p.deferred), (1, 1, 3), "{p:?}");
        let states: Vec<(String, i64, Option<String>, Option<String>)> = s
            .read_blocking(|c| {
                store::query_all(
                    c,
                    "SELECT state, attempts, next_attempt_at, error FROM memory_queue ORDER BY batch_id",
                    [],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
                )
            })
            .unwrap();
        // Invalid output is final at once, with its reason.
        assert_eq!(states[0].0, "failed");
        assert!(states[0].3.as_deref().unwrap().contains("not JSON"));
        assert_eq!(states[1].0, "done");
        // The spent group's jobs wait until midnight, no attempt used.
        for st in &states[2..] {
            assert_eq!(
                (st.0.as_str(), st.1, st.2.as_deref()),
                ("pending", 0, Some("2026-01-02T00:00:00.000Z")),
                "{states:?}"
            );
            assert!(st.3.as_deref().unwrap().contains("used up"));
        }
        assert_eq!(
            pass(&s, &ex, &settings, t0 + chrono::TimeDelta::minutes(5))
                .await
                .unwrap(),
            Processed::default()
        );
        assert_eq!(
            paused_until(t0 - chrono::TimeDelta::hours(5)),
            "2026-01-01T19:05:00.000Z"
        );
    }

    #[tokio::test]
    async fn a_compaction_gets_a_summary_that_the_end_of_the_session_renews() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(&dir.path().join("g2.db"), Duration::from_secs(1)).unwrap();
        let fam = GroupFolder::new("fam").unwrap();
        let t0: DateTime<Utc> = "2026-01-01T10:00:00Z".parse().unwrap();
        let later = |m: i64| t0 + chrono::TimeDelta::minutes(m);
        let f = fam.clone();
        let session = s
            .write_blocking(move |tx| {
                let a = store::memory::open_session(tx, &f, "s", None, None, &ts(t0))?;
                for p in ["the oars are in the shed", "the boat is blue"] {
                    let b = store::memory::start_batch(tx, a, p, &[], &ts(t0))?;
                    store::memory::finish_batch(tx, b, None, &ts(t0))?;
                }
                // The turn under way when Claude Code compacted.
                store::memory::start_batch(tx, a, "and the sail?", &[], &ts(t0))?;
                store::archives::insert(
                    tx,
                    &crate::archives::Prepared {
                        group: f.clone(),
                        session_id: Some("s".into()),
                        title: "Boat".into(),
                        file_name: "boat.md".into(),
                        rel_path: "groups/fam/conversations/boat.md".into(),
                        body: "# Boat\n".into(),
                        trigger: crate::archives::Trigger::Precompact,
                        created_at: ts(later(1)),
                        stats: Default::default(),
                        pending: false,
                    },
                )?;
                Ok(a)
            })
            .unwrap();
        let (ex, settings) = echo();
        let summary = || {
            let f = fam.clone();
            s.read_blocking(move |c| obs::summary(c, &f, "s"))
                .unwrap()
                .map(|m| m.completed)
        };
        let p = pass(&s, &ex, &settings, later(2)).await.unwrap();
        assert_eq!((p.batches, p.summaries), (2, 1), "{p:?}");
        assert_eq!(summary().as_deref(), Some("3 prompts"));
        // Nothing new: no new summary.
        let p = pass(&s, &ex, &settings, later(3)).await.unwrap();
        assert_eq!(p, Processed::default());
        // The session ends: its summary is made again, over everything.
        s.write_blocking(move |tx| {
            let b = store::memory::start_batch(tx, session, "the mast is new", &[], &ts(later(4)))?;
            store::memory::finish_batch(tx, b, None, &ts(later(4)))?;
            tx.execute(
                "UPDATE prompt_batches SET status = 'completed' WHERE status = 'active'",
                [],
            )?;
            store::memory::end_session(tx, session, Some("clear"), &ts(later(5)))?;
            Ok(())
        })
        .unwrap();
        let p = pass(&s, &ex, &settings, later(6)).await.unwrap();
        assert_eq!(p.summaries, 1, "{p:?}");
        assert_eq!(summary().as_deref(), Some("4 prompts"));
        // Its index follows the newer text.
        let f = fam.clone();
        let hits = s
            .read_blocking(move |c| {
                crate::memory::recall::recall_with(
                    c,
                    &f,
                    "4 prompts",
                    5,
                    &crate::memory::recall::Filters {
                        kind: Some("summary".into()),
                        since: None,
                    },
                )
            })
            .unwrap();
        assert_eq!(hits.len(), 1, "{hits:?}");
        assert_eq!(
            pass(&s, &ex, &settings, later(7)).await.unwrap(),
            Processed::default()
        );
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
