//! Back-off for wrong credentials, per client address: what keeps a guesser
//! of `api.token` slow (bearer tokens on `/api`, the viewer's `/login`).
//!
//! **The rule.** Each address (an IPv6 one by its /64, which one host
//! usually holds whole) has a count of consecutive wrong credentials. The
//! first [`FREE`] cost nothing (a typo); the next one makes the address
//! wait 1 s before its next credential is checked, and each further one
//! doubles the wait, up to [`MAX_WAIT`]. While it waits, every credential
//! from it is refused unread with 429 and `Retry-After`, the right one too:
//! checking it would tell a guesser when it had guessed right, so the wait
//! would slow nothing. Nothing sleeps: a refusal is answered at once and
//! no connection is held. The right credential ends the count; a count is
//! forgotten [`FORGET`] after its last failure.
//!
//! **Only a presented credential counts**: a request without one (or with
//! the viewer's session cookie, a signature nobody can guess) is never
//! counted or refused here, and another address's failures never touch an
//! address, so the operator keeps working while someone else guesses.
//!
//! **Memory is bounded**: at most [`CAPACITY`] addresses are tracked; a
//! new one pushes out the one whose last failure is oldest, so an attacker
//! cycling through addresses cannot grow it (each of its addresses then
//! gets its free tries, which is what many addresses buy anyway).
//!
//! The client's address is the connection's peer (`http::serve` hands it
//! to requests): behind a reverse proxy every client shares the proxy's
//! address, and a guesser slows them all (SECURITY.md, known limits).
//! Headers such as `X-Forwarded-For` are not believed: a guesser writes
//! them.

use std::convert::Infallible;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use hashlink::LruCache;

/// Consecutive wrong credentials an address may give without waiting.
pub const FREE: u32 = 2;
/// The wait after the first failure beyond [`FREE`]; it doubles with each
/// further one.
pub const FIRST_WAIT: Duration = Duration::from_secs(1);
/// The longest wait.
pub const MAX_WAIT: Duration = Duration::from_secs(60);
/// How long after its last failure an address's count is forgotten.
pub const FORGET: Duration = Duration::from_secs(15 * 60);
/// The most addresses tracked at once.
pub const CAPACITY: usize = 4096;

/// The failures of every tracked address; clones share them.
#[derive(Clone)]
pub struct Backoff {
    tracked: Arc<Mutex<LruCache<IpAddr, Failures>>>,
}

/// One address's consecutive failures.
#[derive(Debug, Clone, Copy)]
struct Failures {
    count: u32,
    last: Instant,
    /// No credential of the address is checked before this.
    until: Instant,
}

/// What became of a presented credential.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempt {
    /// It was the right one (the address's count ends).
    Right,
    /// It was wrong (counted).
    Wrong,
    /// Not checked: the address must wait this long first.
    Wait(Duration),
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff::with_capacity(CAPACITY)
    }
}

impl Backoff {
    fn with_capacity(capacity: usize) -> Self {
        Backoff {
            tracked: Arc::new(Mutex::new(LruCache::new(capacity))),
        }
    }

    /// Checks a credential `client` presented (`right` says whether it is
    /// the right one), unless the client must wait.
    pub fn attempt(&self, client: IpAddr, right: impl FnOnce() -> bool) -> Attempt {
        self.attempt_at(client, Instant::now(), right)
    }

    /// How long `client` must still wait before its next credential is
    /// checked, if it must: a caller whose check is costly (a lookup in the
    /// store) asks this first, so a waiting guesser costs nothing.
    pub fn waiting(&self, client: IpAddr) -> Option<Duration> {
        let now = Instant::now();
        let tracked = self.tracked.lock().unwrap_or_else(PoisonError::into_inner);
        tracked
            .peek(&key(client))
            .filter(|f| now.saturating_duration_since(f.last) < FORGET && f.until > now)
            .map(|f| f.until - now)
    }

    /// [`Backoff::attempt`] at `now`. The check runs under the lock, so
    /// concurrent guesses from one address are checked no faster than
    /// one after another.
    fn attempt_at(&self, client: IpAddr, now: Instant, right: impl FnOnce() -> bool) -> Attempt {
        let key = key(client);
        let mut tracked = self.tracked.lock().unwrap_or_else(PoisonError::into_inner);
        let before = tracked
            .peek(&key)
            .copied()
            .filter(|f| now.saturating_duration_since(f.last) < FORGET);
        if let Some(f) = before
            && f.until > now
        {
            return Attempt::Wait(f.until - now);
        }
        if right() {
            tracked.remove(&key);
            return Attempt::Right;
        }
        let count = before.map_or(0, |f| f.count).saturating_add(1);
        // Re-inserted, so it is the last to be pushed out.
        tracked.remove(&key);
        tracked.insert(
            key,
            Failures {
                count,
                last: now,
                until: now + wait_after(count),
            },
        );
        Attempt::Wrong
    }

    /// How many addresses are tracked.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.tracked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// The wait after `count` consecutive failures.
fn wait_after(count: u32) -> Duration {
    match count.checked_sub(FREE + 1) {
        None => Duration::ZERO,
        Some(doublings) => FIRST_WAIT
            .checked_mul(1u32.checked_shl(doublings).unwrap_or(u32::MAX))
            .map_or(MAX_WAIT, |w| w.min(MAX_WAIT)),
    }
}

/// The address a client is counted under: IPv4 as it is (an IPv4-mapped
/// IPv6 address too), IPv6 by its /64.
fn key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !u128::from(u64::MAX))),
        v4 => v4,
    }
}

/// `Retry-After` for a wait: whole seconds, rounded up.
pub fn retry_after_secs(wait: Duration) -> u64 {
    (wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1)
}

/// The client's address: the connection's peer, as `http::serve` hands
/// it to each request. A request without one (none is served so) counts
/// under one shared address.
#[derive(Debug, Clone, Copy)]
pub struct Client(pub IpAddr);

impl Client {
    /// The client of a request with these extensions.
    pub fn of(extensions: &axum::http::Extensions) -> Client {
        Client(
            extensions
                .get::<ConnectInfo<SocketAddr>>()
                .map_or(IpAddr::V6(Ipv6Addr::UNSPECIFIED), |c| c.0.ip()),
        )
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Client {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Infallible> {
        Ok(Client::of(&parts.extensions))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 1));
    const B: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 2));

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    #[test]
    fn the_wait_doubles_from_the_first_failure_past_the_free_ones_up_to_the_cap() {
        let waits: Vec<u64> = (1..=12).map(|n| wait_after(n).as_secs()).collect();
        assert_eq!(waits, [0, 0, 1, 2, 4, 8, 16, 32, 60, 60, 60, 60]);
        assert_eq!(wait_after(u32::MAX), MAX_WAIT);
    }

    #[test]
    fn waiting_says_whether_an_address_must_wait_without_counting() {
        let b = Backoff::default();
        let now = Instant::now();
        for _ in 0..FREE {
            assert_eq!(b.attempt_at(A, now, || false), Attempt::Wrong);
            assert_eq!(b.waiting(A), None, "the free ones cost nothing");
        }
        assert_eq!(b.attempt_at(A, now, || false), Attempt::Wrong);
        let w = b.waiting(A).expect("waits after the third");
        assert!(w <= FIRST_WAIT && w > Duration::ZERO, "{w:?}");
        assert_eq!(b.waiting(B), None, "another address never waits for A");
        assert_eq!(b.len(), 1, "asking counts nothing and tracks no one");
    }

    #[test]
    fn a_guesser_waits_longer_after_each_failure_and_is_refused_unchecked_meanwhile() {
        let b = Backoff::default();
        let t0 = Instant::now();
        assert_eq!(b.attempt_at(A, t0, || false), Attempt::Wrong);
        assert_eq!(b.attempt_at(A, t0, || false), Attempt::Wrong);
        assert_eq!(b.attempt_at(A, t0, || false), Attempt::Wrong);
        // Now 1 s: refused without a look at the credential, right or not.
        let mut checked = false;
        let r = b.attempt_at(A, t0 + secs(0.25), || {
            checked = true;
            true
        });
        assert_eq!(r, Attempt::Wait(secs(0.75)));
        assert!(!checked, "a waiting address's credential is not checked");
        // A refusal does not lengthen the wait.
        assert_eq!(b.attempt_at(A, t0 + secs(1.0), || false), Attempt::Wrong);
        assert_eq!(
            b.attempt_at(A, t0 + secs(2.5), || true),
            Attempt::Wait(secs(0.5)),
            "2 s after the fourth failure"
        );
        // Each failure doubles it, up to the cap.
        let mut t = t0 + secs(3.0);
        let mut waits = Vec::new();
        for _ in 0..8 {
            assert_eq!(b.attempt_at(A, t, || false), Attempt::Wrong);
            let Attempt::Wait(w) = b.attempt_at(A, t, || true) else {
                panic!("not waiting")
            };
            waits.push(w.as_secs());
            t += w;
        }
        assert_eq!(waits, [4, 8, 16, 32, 60, 60, 60, 60]);
    }

    #[test]
    fn the_right_credential_ends_the_count_and_an_old_count_is_forgotten() {
        let b = Backoff::default();
        let t0 = Instant::now();
        for _ in 0..3 {
            b.attempt_at(A, t0, || false);
        }
        assert_eq!(b.attempt_at(A, t0 + secs(1.0), || true), Attempt::Right);
        assert_eq!(b.len(), 0);
        // Free failures again.
        for _ in 0..FREE {
            assert_eq!(b.attempt_at(A, t0 + secs(1.0), || false), Attempt::Wrong);
            assert_eq!(b.attempt_at(A, t0 + secs(1.0), || true), Attempt::Right);
        }
        // Long after its last failure, an address starts from nothing.
        for _ in 0..10 {
            b.attempt_at(B, t0, || false);
        }
        let later = t0 + FORGET + secs(1.0);
        assert_eq!(b.attempt_at(B, later, || false), Attempt::Wrong);
        assert_eq!(b.attempt_at(B, later, || false), Attempt::Wrong);
        assert_eq!(b.attempt_at(B, later, || false), Attempt::Wrong);
        assert!(matches!(b.attempt_at(B, later, || true), Attempt::Wait(_)));
    }

    #[test]
    fn one_address_never_slows_another() {
        let b = Backoff::default();
        let t0 = Instant::now();
        for i in 0..50 {
            b.attempt_at(A, t0 + secs(f64::from(i) * 100.0), || false);
        }
        assert!(matches!(
            b.attempt_at(A, t0 + secs(4900.5), || true),
            Attempt::Wait(_)
        ));
        assert_eq!(b.attempt_at(B, t0 + secs(4900.5), || true), Attempt::Right);
        // One IPv6 host is its /64; the next /64 is another.
        let v6 = |s: &str| s.parse::<IpAddr>().unwrap();
        for _ in 0..3 {
            b.attempt_at(v6("2001:db8:0:1::1"), t0, || false);
        }
        assert!(matches!(
            b.attempt_at(v6("2001:db8:0:1:ffff::9"), t0, || true),
            Attempt::Wait(_)
        ));
        assert_eq!(
            b.attempt_at(v6("2001:db8:0:2::1"), t0, || true),
            Attempt::Right
        );
        // An IPv4-mapped address is its IPv4 one.
        assert!(matches!(
            b.attempt_at(v6("::ffff:192.0.2.1"), t0 + secs(4900.5), || true),
            Attempt::Wait(_)
        ));
    }

    #[test]
    fn many_addresses_stay_within_the_bound_and_push_out_the_oldest() {
        let b = Backoff::with_capacity(100);
        let t0 = Instant::now();
        let addr = |i: u32| IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + i));
        // The first address is throttled, then 1,000 others fail once each.
        for _ in 0..3 {
            b.attempt_at(addr(0), t0, || false);
        }
        for i in 1..=1000 {
            b.attempt_at(addr(i), t0 + secs(0.001 * f64::from(i)), || false);
            assert!(b.len() <= 100);
        }
        assert_eq!(b.len(), 100);
        // The most recent are kept, the oldest went.
        for _ in 0..2 {
            b.attempt_at(addr(1000), t0 + secs(1.5), || false);
        }
        assert!(matches!(
            b.attempt_at(addr(1000), t0 + secs(1.5), || true),
            Attempt::Wait(_)
        ));
        assert_eq!(
            b.attempt_at(addr(0), t0 + secs(0.5), || true),
            Attempt::Right
        );
    }

    #[test]
    fn retry_after_is_whole_seconds_rounded_up() {
        assert_eq!(retry_after_secs(secs(0.001)), 1);
        assert_eq!(retry_after_secs(secs(1.0)), 1);
        assert_eq!(retry_after_secs(secs(1.2)), 2);
        assert_eq!(retry_after_secs(secs(59.9)), 60);
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
    }
}
