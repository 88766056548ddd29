//! A scheduled task's run, once it is over: its outcome read from what the
//! run produced, the task row finished and the run logged
//! ([`tasks::finish`](super::finish)), and the text to post to the task's
//! chat (its result, or the failure).
//!
//! Boundary: the queue runs the task and calls [`outcome`] and [`record`]
//! when its container has exited, and posts the text [`record`] answers;
//! nothing here starts or stops a run or reaches a chat.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::Task;
use crate::agent::RunReport;
use crate::store::Store;

/// What the run of a task came to: the reply it gave, else the error it
/// reported, else why the run failed (could not start, the agent died, the
/// agent's last error, or no result at all).
pub fn outcome(
    reply: Option<String>,
    error: Option<String>,
    result: &crate::Result<RunReport>,
) -> Result<String, String> {
    match (reply, error, result) {
        (Some(r), _, _) => Ok(r),
        (None, Some(e), _) => Err(e),
        (None, None, Err(e)) => Err(e.to_string()),
        (None, None, Ok(r)) if r.crash.is_some() => {
            Err(format!("the agent {}", r.crash.clone().unwrap_or_default()))
        }
        (None, None, Ok(r)) => Err(r
            .errors
            .last()
            .cloned()
            .unwrap_or_else(|| "the task produced no result".into())),
    }
}

/// Logs the run (started at `run_at`, `took` long) on the task's row,
/// cleaned with `redactor` (the row keeps no private span or secret of the
/// agent's answer), and answers what to post to the task's chat: its
/// result, or the failure (at most 500 characters of why). Errors are
/// logged, not returned: the run is over either way.
pub async fn record(
    store: &Store,
    redactor: &g2_core::privacy::Redactor,
    task: &Task,
    run_at: DateTime<Utc>,
    took: Duration,
    outcome: Result<String, String>,
) -> String {
    let clean = |s: &String| redactor.clean(s).into_owned();
    let (id, o) = (task.id.clone(), outcome.as_ref().map(clean).map_err(clean));
    let res = store
        .write(move |tx| {
            super::finish(
                tx,
                &id,
                run_at,
                took.as_millis() as u64,
                o.as_ref().map(String::as_str).map_err(String::as_str),
            )
        })
        .await;
    if let Err(e) = res {
        tracing::error!(task = %task.id, error = %e, "recording a task run");
    }
    match outcome {
        Ok(r) => r,
        Err(e) => format!(
            "Scheduled task {} failed: {}",
            task.id,
            e.chars().take(500).collect::<String>()
        ),
    }
}
