//! What each caller may still use, and what it used: the per-caller
//! concurrency slots (`gateway.max_concurrent`), the day totals the daily
//! budget is checked against (loaded from the store once a day, then kept
//! current here), and the writer that stores one usage row per request, in
//! order, off the request's path.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot};

use super::Gateway;
use super::usage::{self, Record};
use crate::Result;
use crate::store::{self, Store};

/// What the usage writer is asked to do.
pub(super) enum ToRecorder {
    Row(Record),
    Flush(oneshot::Sender<()>),
}

impl Gateway {
    /// Waits until every usage row recorded so far is in the database.
    pub async fn flush(&self) {
        let (tx, rx) = oneshot::channel();
        if self.inner.recorder.send(ToRecorder::Flush(tx)).is_ok() {
            let _ = rx.await;
        }
    }

    pub(super) fn slot(&self, caller: &str) -> std::result::Result<OwnedSemaphorePermit, u32> {
        let max = self
            .inner
            .settings
            .limits_for(caller)
            .max_concurrent
            .unwrap_or(1)
            .max(1);
        let sem = {
            let mut slots = self
                .inner
                .slots
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            slots
                .entry(caller.to_string())
                .or_insert_with(|| Arc::new(Semaphore::new(max as usize)))
                .clone()
        };
        sem.try_acquire_owned().map_err(|_| max)
    }

    /// Tokens the caller used today, loading the day's sum on first use.
    pub(super) async fn spent_today(&self, caller: &str) -> Result<u64> {
        let today = usage::today();
        if let Some((day, n)) = self
            .inner
            .spent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(caller)
            && *day == today
        {
            return Ok(*n);
        }
        let (c, d) = (caller.to_string(), today.clone());
        let n = self
            .inner
            .store
            .read(move |conn| store::usage::tokens_on(conn, &c, &d, None))
            .await?;
        let mut spent = self
            .inner
            .spent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let entry = spent
            .entry(caller.to_string())
            .or_insert((today.clone(), n));
        if entry.0 != today {
            *entry = (today, n);
        }
        Ok(entry.1)
    }

    fn add_spent(&self, caller: &str, day: &str, tokens: u64) {
        let mut spent = self
            .inner
            .spent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match spent.get_mut(caller) {
            Some((d, n)) if d == day => *n += tokens,
            // Not loaded yet (or a new day): the next check loads from the store.
            _ => {}
        }
    }

    pub(super) fn record(&self, r: Record) {
        self.add_spent(&r.caller, &r.day, r.tokens.billable());
        tracing::info!(
            caller = %r.caller, model = %r.model, status = r.status, outcome = r.outcome.as_str(),
            input_tokens = r.tokens.input, output_tokens = r.tokens.output, duration_ms = r.duration_ms,
            "model request"
        );
        let _ = self.inner.recorder.send(ToRecorder::Row(r));
    }
}

/// Writes usage rows in order; a failed write is logged, not retried (the
/// answer was already delivered).
pub(super) async fn record_loop(store: Store, mut rx: mpsc::UnboundedReceiver<ToRecorder>) {
    while let Some(msg) = rx.recv().await {
        match msg {
            ToRecorder::Row(r) => {
                if let Err(e) = store.write(move |tx| store::usage::insert(tx, &r)).await {
                    tracing::error!(error = %e, "recording model usage failed");
                }
            }
            ToRecorder::Flush(done) => {
                let _ = done.send(());
            }
        }
    }
}
