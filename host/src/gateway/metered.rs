//! The answer on its way back: [`Metered`] relays a provider's body chunk
//! by chunk while a [`Meter`](super::meter::Meter) reads its usage, and
//! records one usage row when the body ends, breaks off, or is dropped
//! because the caller went away. It holds the caller's concurrency slot
//! until then.

use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use futures_util::Stream;
use tokio::sync::OwnedSemaphorePermit;

use super::usage::{Outcome, Record, Tokens};
use super::{Gateway, meter, provider};

/// Relays a provider's body and records usage when it ends or is dropped.
pub(super) struct Metered {
    pub(super) inner: provider::ByteStream,
    pub(super) meter: meter::Meter,
    pub(super) ok: bool,
    pub(super) rec: Option<Record>,
    pub(super) gw: Gateway,
    pub(super) started: Instant,
    /// Held until the answer is complete: the concurrency slot.
    pub(super) _permit: Option<OwnedSemaphorePermit>,
    pub(super) count_only: bool,
}

impl Metered {
    fn finish(&mut self, outcome: Outcome) {
        let Some(mut rec) = self.rec.take() else {
            return;
        };
        self.meter.finish();
        rec.tokens = if self.count_only {
            Tokens::default()
        } else {
            self.meter.tokens
        };
        rec.outcome = if outcome == Outcome::Ok && (!self.ok || self.meter.stream_error) {
            Outcome::Error
        } else {
            outcome
        };
        rec.duration_ms = self.started.elapsed().as_millis() as u64;
        if !self.count_only {
            crate::trace::stamp(g2_core::trace::Stage::ModelAnswered, &rec.caller, None);
        }
        self.gw.record(rec);
    }
}

impl Stream for Metered {
    type Item = Result<Bytes, std::io::Error>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        match this.inner.as_mut().poll_next(cx) {
            Poll::Ready(Some(Ok(chunk))) => {
                this.meter.feed(&chunk);
                Poll::Ready(Some(Ok(chunk)))
            }
            Poll::Ready(Some(Err(e))) => {
                tracing::warn!(error = %e, "provider stream broke off");
                this.ok = false;
                this.finish(Outcome::Error);
                Poll::Ready(Some(Err(e)))
            }
            Poll::Ready(None) => {
                this.finish(Outcome::Ok);
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Drop for Metered {
    fn drop(&mut self) {
        // Dropped before the end: the caller went away.
        self.finish(Outcome::Cancelled);
    }
}
