//! The start-up recovery of recall's index: archives that have no passages
//! yet (recorded before passages existed) are split in the background, one
//! archive per transaction, so `g2 serve` answers at once, other writers
//! interleave, and a stop waits for no archive (the one being split rolls
//! back with its transaction). Until it is done recall sees fewer passages;
//! what is left is taken up by the next start. Progress goes to the log.

use std::time::{Duration, Instant};

use crate::background::Background;
use crate::store::{self, Store};

/// How often progress is logged, at most (and after the first archive).
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// Splits the archives without passages until done or stopped.
pub fn start(store: Store) -> Background {
    Background::spawn(|mut stopped| async move {
        let total = match store
            .read(store::recall::count_archives_without_passages)
            .await
        {
            Ok(0) => return,
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(error = %e, "recovery: counting the archives to index failed; the next start retries");
                return;
            }
        };
        tracing::info!("recovery: {total} archives to split into passages for recall");
        let began = Instant::now();
        let (mut after, mut done, mut told) = (0, 0_i64, None::<Instant>);
        loop {
            let next = tokio::select! {
                biased;
                _ = &mut stopped => {
                    tracing::info!("recovery: stopped at {done}/{total} archives; the next start goes on");
                    return;
                }
                r = store.write(move |tx| super::index_after(tx, after, 1)) => r,
            };
            match next {
                Ok(Some((last, n))) => {
                    after = last;
                    done += i64::try_from(n).unwrap_or(i64::MAX);
                }
                Ok(None) => break,
                Err(e) => {
                    // Skip the archive that failed (the next start tries it
                    // again); stop if the store cannot even say which.
                    let skip = store
                        .read(move |c| store::recall::archives_without_passages(c, after, 1))
                        .await;
                    match skip.as_deref() {
                        Ok([(id, ..)]) => {
                            tracing::warn!(archive = id, error = %e, "recovery: splitting an archive failed; skipped until the next start");
                            after = *id;
                        }
                        _ => {
                            tracing::warn!(error = %e, "recovery: indexing archives failed; the next start goes on");
                            return;
                        }
                    }
                }
            }
            if done < total && told.is_none_or(|t| t.elapsed() >= PROGRESS_EVERY) {
                tracing::info!("recovery: indexed {done}/{total} archives");
                told = Some(Instant::now());
            }
        }
        tracing::info!(took = ?began.elapsed(), "recovery: indexed {done}/{total} archives; done");
    })
}
