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
//! stored once. A claim names its host: several hosts on one store each
//! release only their own at start, the heartbeat releases a dead host's
//! (docs/cluster.md), and an outcome is stored only while its claim
//! stands. A failed job is retried after 30 s, then 60 s, and after
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

/// One pass at `now` by host `host` (the name its claims carry): queue
/// what is ready, then extract and summarise up to `max_concurrent` jobs
/// of each kind. The extractor's calls run at
/// once; their outcomes are stored one by one in the order the jobs were
/// queued, so a later batch's statement supersedes an earlier one's and
/// never the other way round.
pub async fn pass(
    store: &Store,
    extractor: &Arc<dyn Extractor>,
    settings: &MemorySettings,
    host: &str,
    now: DateTime<Utc>,
) -> Result<Processed> {
    use futures_util::StreamExt;
    let mut done = Processed::default();
    let n = settings.max_concurrent.max(1);
    let at = ts(now);
    for q in [Queue::Batches, Queue::Sessions] {
        let keys = store
            .write({
                let (at, host) = (at.clone(), host.to_string());
                move |tx| {
                    match q {
                        Queue::Batches => store::memory::queue_completed(tx, &at)?,
                        Queue::Sessions => obs::queue_summaries(tx, &at)?,
                    };
                    obs::claim(tx, q, &at, n, &host)
                }
            })
            .await?;
        let mut extracted = futures_util::stream::iter(keys)
            .map(|key| extract(store, extractor, q, key))
            .buffered(n);
        while let Some(x) = extracted.next().await {
            match settle(store, x?, q, now, host).await? {
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
/// transaction, while `host`'s claim on it stands.
async fn settle(
    store: &Store,
    x: Extraction,
    q: Queue,
    now: DateTime<Utc>,
    host: &str,
) -> Result<Ended> {
    let at = ts(now);
    let h = host.to_string();
    let (key, group, e) = match x {
        Extraction::Gone(key) => {
            store.write(move |tx| obs::done(tx, q, key, &h)).await?;
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
                    obs::done(tx, Queue::Batches, key, &h)?;
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
                    obs::done(tx, Queue::Sessions, session, &h)
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
                let (g, error, until, h) = (group.clone(), error.clone(), until.clone(), h.clone());
                move |tx| obs::defer_group(tx, &g, (q, key), &h, &until, &error)
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
            obs::failed(tx, (q, key), &h, &error, retry.as_deref())
        })
        .await?;
    Ok(Ended::Failed)
}

/// Releases the claims this host's killed process left (the other hosts
/// release a dead host's: the cluster heartbeat), then runs a pass as
/// `host` now and every `memory.process_interval_secs` (or sooner when
/// `wake` is notified) until stopped.
pub fn start(
    store: Store,
    settings: MemorySettings,
    extractor: Arc<dyn Extractor>,
    wake: Arc<tokio::sync::Notify>,
    host: String,
) -> Background {
    let every = Duration::from_secs(settings.process_interval_secs.max(1));
    Background::spawn(|mut stopped| async move {
        let me = host.clone();
        match store.write(move |tx| obs::release_claims(tx, &me)).await {
            Ok(n) if n > 0 => tracing::info!(jobs = n, "memory jobs a stopped host left resumed"),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "memory jobs: releasing claims failed"),
        }
        loop {
            match pass(&store, &extractor, &settings, &host, Utc::now()).await {
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
mod tests;
