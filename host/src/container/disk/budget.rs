//! The CPU share the host may spend counting groups' files: a token bucket
//! filled with wall-clock time times the share and drained by the counting
//! threads' own CPU time (`CLOCK_THREAD_CPUTIME_ID`), shared by every
//! thread that counts. A thread that overdraws it sleeps until the bucket
//! is back at zero, so over any stretch of time the counting threads
//! together use at most `share` of one core, plus one burst.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// CPU time a counting thread may use at once before the share applies.
pub const BURST: Duration = Duration::from_millis(20);

pub struct Budget {
    share: f64,
    bucket: Mutex<Bucket>,
}

struct Bucket {
    /// CPU seconds that may still be spent (negative: overdrawn).
    tokens: f64,
    filled_at: Instant,
}

impl Budget {
    /// `percent` of one core (1–100).
    pub fn new(percent: u32) -> Self {
        Budget {
            share: f64::from(percent.clamp(1, 100)) / 100.0,
            bucket: Mutex::new(Bucket {
                tokens: BURST.as_secs_f64(),
                filled_at: Instant::now(),
            }),
        }
    }

    /// Charges `cpu` just spent; returns how long to sleep before going on.
    pub fn charge(&self, cpu: Duration) -> Duration {
        let mut b = self
            .bucket
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = Instant::now();
        let refill = now.duration_since(b.filled_at).as_secs_f64() * self.share;
        b.tokens = (b.tokens + refill).min(BURST.as_secs_f64()) - cpu.as_secs_f64();
        b.filled_at = now;
        if b.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-b.tokens / self.share)
        }
    }
}

/// CPU time the calling thread has used.
pub fn thread_cpu() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(
        t.tv_sec.max(0) as u64,
        t.tv_nsec.clamp(0, 999_999_999) as u32,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_that_overdraws_sleeps_for_its_share() {
        let b = Budget::new(25);
        // The burst is free.
        assert_eq!(b.charge(Duration::from_millis(10)), Duration::ZERO);
        // 100 ms of CPU more at 25 %: about 400 ms of sleep (less the
        // little wall time that passed and the burst left).
        let sleep = b.charge(Duration::from_millis(100));
        assert!(
            (Duration::from_millis(340)..=Duration::from_millis(400)).contains(&sleep),
            "{sleep:?}"
        );
    }

    #[test]
    fn thread_cpu_counts_this_threads_work() {
        let before = thread_cpu();
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(thread_cpu() > before);
    }
}
