//! The ledger: who counts the groups' files, when, and what the last count
//! said.
//!
//! Counting a tree costs CPU in proportion to its entries (a group may
//! make half a million), so it is never done on a request's path. Two
//! counting threads take jobs from the ledger's books and spend at most
//! `container.disk_cpu_percent` of one core between them ([`Budget`]):
//! - a count somebody waits for ([`Ledger::fresh`]: a container about to
//!   start whose last count is not to be trusted, a status with nothing
//!   counted yet) comes first;
//! - then counts nobody waits for ([`Ledger::want`]: every group when the
//!   host starts, a group whose container just stopped);
//! - then the groups whose agent runs ([`Ledger::running`]), each again
//!   once `container.disk_check_ms` has passed since its last count began.
//!
//! Readers ([`Ledger::latest`]) get the last finished count at once: the
//! running check of an agent and `GET …/status` never wait for a walk.
//!
//! A count is trusted for a start when it began after the group's last
//! container stopped: nothing of the group's wrote since, but the host and
//! the operator (whose additions the running checks then see).
//!
//! A running container's processes ([`Ledger::processes`]) are looked into
//! first, then the trees are walked ([`held`]): a file deleted between the
//! two is missed once rather than counted twice.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use tokio::sync::oneshot;

use g2_core::confined::{Tally, Walk};
use g2_core::validate::GroupFolder;

use super::budget::{self, Budget};
use super::held::{self, Held, Sight};
use crate::home::Home;
use crate::{Error, Result};

/// Counting threads (one may count a big group while the other serves a
/// start that waits).
const WORKERS: usize = 2;

/// One count of a group's three trees.
#[derive(Debug, Clone)]
pub struct Count {
    /// What the trees hold, or why the trees (or the processes of the
    /// group's container) could not be counted.
    pub outcome: std::result::Result<Tally, String>,
    /// What the container's processes held in files deleted while open
    /// (nothing when none runs).
    pub held: Held,
    pub started: Instant,
    pub finished_at: DateTime<Utc>,
    /// Wall time the count took, sleeps for the budget included.
    pub took: Duration,
    /// CPU time it used.
    pub cpu: Duration,
}

/// Counts groups' files in the background (see the module's docs).
#[derive(Clone)]
pub struct Ledger {
    shared: Arc<Shared>,
}

struct Shared {
    home: Home,
    every: Duration,
    give: Option<(u32, u32)>,
    budget: Budget,
    state: Mutex<State>,
    work: Condvar,
    /// Memory maps are looked into (until the kernel says no).
    maps: AtomicBool,
    /// A container's processes could not be looked into (said once).
    warned: AtomicBool,
}

#[derive(Default)]
struct State {
    books: HashMap<GroupFolder, Book>,
    stopping: bool,
}

type Waiter = (Instant, oneshot::Sender<Count>);

#[derive(Default)]
struct Book {
    latest: Option<Count>,
    /// Containers of the group running now.
    running: usize,
    walking: bool,
    /// A count that begins after this is wanted; nobody waits for it.
    wanted: Option<Instant>,
    /// Who waits for a count that begins after the instant they asked.
    waiting: Vec<Waiter>,
    /// When the group's last container stopped.
    ran_until: Option<Instant>,
    /// The process namespaces of its running containers, by container id.
    processes: Vec<(String, u64)>,
}

impl Book {
    /// When this book asks for a count, and how urgently (lower first).
    fn due(&self, every: Duration, now: Instant) -> Option<(u8, Instant)> {
        if self.walking {
            return None;
        }
        if let Some(asked) = self.waiting.iter().map(|w| w.0).min() {
            return Some((0, asked));
        }
        if let Some(asked) = self.wanted {
            return Some((1, asked));
        }
        if self.running > 0 {
            let at = self.latest.as_ref().map_or(now, |c| c.started + every);
            return Some((2, at));
        }
        None
    }
}

impl Ledger {
    /// A ledger for the groups of `home`, counting at most `cpu_percent`
    /// of one core; a running group is counted again every `every`. What
    /// a count finds that is not `give`'s (uid, gid) is given to it.
    pub fn new(home: Home, every: Duration, cpu_percent: u32, give: Option<(u32, u32)>) -> Self {
        let sight = Sight::of_self();
        if !sight.any_user || !sight.maps {
            tracing::warn!("disk quotas: {}", sight.describe());
        }
        let shared = Arc::new(Shared {
            home,
            every,
            give,
            budget: Budget::new(cpu_percent),
            state: Mutex::new(State::default()),
            work: Condvar::new(),
            maps: AtomicBool::new(sight.maps),
            warned: AtomicBool::new(false),
        });
        for i in 0..WORKERS {
            let weak = Arc::downgrade(&shared);
            let spawned = std::thread::Builder::new()
                .name(format!("g2-disk-{i}"))
                .spawn(move || work(&weak));
            if let Err(e) = spawned {
                tracing::error!(error = %e, "could not start a disk counting thread");
            }
        }
        Ledger { shared }
    }

    /// The last finished count of the group, if any.
    pub fn latest(&self, folder: &GroupFolder) -> Option<Count> {
        self.shared
            .lock()
            .books
            .get(folder)
            .and_then(|b| b.latest.clone())
    }

    /// Asks for a count nobody waits for.
    pub fn want(&self, folder: &GroupFolder) {
        let mut st = self.shared.lock();
        let book = st.books.entry(folder.clone()).or_default();
        book.wanted.get_or_insert_with(Instant::now);
        self.shared.work.notify_all();
    }

    /// A count that begins after this call.
    pub async fn fresh(&self, folder: &GroupFolder) -> Result<Count> {
        let (tx, rx) = oneshot::channel();
        {
            let mut st = self.shared.lock();
            if st.stopping {
                return Err(Error::Invalid("the host is stopping".into()));
            }
            let book = st.books.entry(folder.clone()).or_default();
            book.waiting.push((Instant::now(), tx));
            self.shared.work.notify_all();
        }
        rx.await
            .map_err(|_| Error::Invalid("the host is stopping".into()))
    }

    /// The last count when it can be trusted for a start (it began after
    /// the group's last container stopped), else a fresh one.
    pub async fn trusted(&self, folder: &GroupFolder) -> Result<Count> {
        {
            let st = self.shared.lock();
            if let Some(b) = st.books.get(folder)
                && let Some(c) = &b.latest
                && b.running == 0
                && b.ran_until.is_none_or(|end| c.started > end)
            {
                return Ok(c.clone());
            }
        }
        self.fresh(folder).await
    }

    /// Counts the group every `every` until the guard is dropped (its
    /// container stopped), then once more.
    pub fn running(&self, folder: &GroupFolder) -> Running {
        let mut st = self.shared.lock();
        st.books.entry(folder.clone()).or_default().running += 1;
        self.shared.work.notify_all();
        Running {
            shared: self.shared.clone(),
            folder: folder.clone(),
        }
    }

    /// Counts what the container `id` of the group holds in files deleted
    /// while open with the group's trees, until the guard is dropped.
    /// `pid` is its first process as the engine names it (None: it ended
    /// already). When its processes cannot be looked into, the log says
    /// why (once) and only the trees count.
    pub fn processes(&self, folder: &GroupFolder, id: &str, pid: Option<u32>) -> Option<Processes> {
        let ns = match held::namespace(pid?, id) {
            Ok(ns) => ns,
            Err(why) => {
                if !self.shared.warned.swap(true, Ordering::Relaxed) {
                    tracing::warn!(group = %folder, container = id, "disk quotas: files the agent deletes but holds open are not counted: {why}");
                }
                return None;
            }
        };
        let mut st = self.shared.lock();
        st.books
            .entry(folder.clone())
            .or_default()
            .processes
            .push((id.to_string(), ns));
        Some(Processes {
            shared: self.shared.clone(),
            folder: folder.clone(),
            id: id.to_string(),
        })
    }

    /// Stops counting: walks under way end, waiters are let go.
    pub fn stop(&self) {
        let mut st = self.shared.lock();
        st.stopping = true;
        for b in st.books.values_mut() {
            b.waiting.clear();
        }
        self.shared.work.notify_all();
    }
}

/// Held while a group's container runs (see [`Ledger::running`]).
pub struct Running {
    shared: Arc<Shared>,
    folder: GroupFolder,
}

impl Drop for Running {
    fn drop(&mut self) {
        let mut st = self.shared.lock();
        if let Some(b) = st.books.get_mut(&self.folder) {
            b.running = b.running.saturating_sub(1);
            let now = Instant::now();
            b.ran_until = Some(now);
            b.wanted.get_or_insert(now);
        }
        self.shared.work.notify_all();
    }
}

/// Held while a container's processes are looked into (see
/// [`Ledger::processes`]).
pub struct Processes {
    shared: Arc<Shared>,
    folder: GroupFolder,
    id: String,
}

impl Drop for Processes {
    fn drop(&mut self) {
        let mut st = self.shared.lock();
        if let Some(b) = st.books.get_mut(&self.folder) {
            b.processes.retain(|(id, _)| *id != self.id);
        }
    }
}

/// Charges the counting thread's CPU to the budget as it goes and sleeps
/// off an overdraft.
struct Pacer<'a> {
    shared: &'a Shared,
    last: Duration,
}

impl Pacer<'_> {
    fn pace(&mut self) -> std::io::Result<()> {
        let now = budget::thread_cpu();
        let mut sleep = self.shared.budget.charge(now.saturating_sub(self.last));
        self.last = now;
        // Sleep in slices, so a stopping host is not kept waiting.
        while !sleep.is_zero() {
            if self.shared.stopping() {
                return Err(std::io::Error::other("the host is stopping"));
            }
            let slice = sleep.min(Duration::from_millis(100));
            std::thread::sleep(slice);
            sleep -= slice;
        }
        if self.shared.stopping() {
            return Err(std::io::Error::other("the host is stopping"));
        }
        Ok(())
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn stopping(&self) -> bool {
        self.lock().stopping
    }

    /// The next group to count, or how long to wait for one.
    fn next(&self, st: &mut State) -> std::result::Result<GroupFolder, Duration> {
        let now = Instant::now();
        let best = st
            .books
            .iter()
            .filter_map(|(f, b)| b.due(self.every, now).map(|d| (d, f)))
            .min_by_key(|(d, _)| *d);
        match best {
            Some(((_, at), f)) if at <= now => {
                let f = f.clone();
                if let Some(b) = st.books.get_mut(&f) {
                    b.walking = true;
                }
                Ok(f)
            }
            Some(((_, at), _)) => Err(at - now),
            None => Err(Duration::from_secs(1)),
        }
    }

    /// Counts what the group's running containers hold open, then its
    /// three trees, within the budget.
    fn count(&self, folder: &GroupFolder) -> Count {
        let started = Instant::now();
        let cpu_at_start = budget::thread_cpu();
        let mut pacer = Pacer {
            shared: self,
            last: cpu_at_start,
        };
        let (held, outcome) = match self.held(folder, &mut pacer) {
            Ok(held) => {
                let mut pace = |_: &Tally| pacer.pace();
                let mut walk = Walk {
                    give: self.give,
                    pace: &mut pace,
                };
                let t = super::tally(&self.home, folder, &mut walk).map_err(|e| e.to_string());
                (held, t)
            }
            Err(e) => (Held::default(), Err(e)),
        };
        let end = budget::thread_cpu();
        self.budget.charge(end.saturating_sub(pacer.last));
        Count {
            outcome,
            held,
            started,
            finished_at: Utc::now(),
            took: started.elapsed(),
            cpu: end.saturating_sub(cpu_at_start),
        }
    }

    /// What the processes of the group's running containers hold in files
    /// deleted while open, on the devices of its trees.
    fn held(
        &self,
        folder: &GroupFolder,
        pacer: &mut Pacer<'_>,
    ) -> std::result::Result<Held, String> {
        let namespaces: Vec<u64> = self
            .lock()
            .books
            .get(folder)
            .map(|b| b.processes.iter().map(|(_, ns)| *ns).collect())
            .unwrap_or_default();
        if namespaces.is_empty() {
            return Ok(Held::default());
        }
        let devices = super::devices(&self.home, folder).map_err(|e| e.to_string())?;
        let mut pace = || pacer.pace();
        let mut scan = held::Scan::new(devices, self.maps.load(Ordering::Relaxed), &mut pace);
        scan.namespaces(&namespaces).map_err(|e| e.to_string())?;
        if scan.maps_denied && self.maps.swap(false, Ordering::Relaxed) {
            tracing::warn!(
                "disk quotas: files an agent deleted but maps into memory are not counted: the kernel refused to follow its maps"
            );
        }
        Ok(scan.held())
    }

    /// Files a finished count: the latest, and to whoever waited for one
    /// that began no earlier than they asked.
    fn file(&self, folder: &GroupFolder, count: Count) {
        let mut st = self.lock();
        let Some(b) = st.books.get_mut(folder) else {
            return;
        };
        b.walking = false;
        if b.wanted.is_some_and(|w| w <= count.started) {
            b.wanted = None;
        }
        let (served, left): (Vec<Waiter>, Vec<Waiter>) = std::mem::take(&mut b.waiting)
            .into_iter()
            .partition(|w| w.0 <= count.started);
        b.waiting = left;
        for (_, tx) in served {
            let _ = tx.send(count.clone());
        }
        b.latest = Some(count);
        self.work.notify_all();
    }
}

/// A counting thread: takes the next job until the ledger is gone or
/// stopping.
fn work(weak: &Weak<Shared>) {
    loop {
        let Some(shared) = weak.upgrade() else {
            return;
        };
        let job = {
            let mut st = shared.lock();
            if st.stopping {
                return;
            }
            match shared.next(&mut st) {
                Ok(f) => Some(f),
                Err(wait) => {
                    // Woken by news, or after a while to see whether the
                    // ledger is still there.
                    let wait = wait.min(Duration::from_secs(1));
                    let _ = shared.work.wait_timeout(st, wait);
                    None
                }
            }
        };
        if let Some(folder) = job {
            let count = shared.count(&folder);
            if shared.stopping() {
                return;
            }
            if let Err(e) = &count.outcome {
                tracing::warn!(group = %folder, error = %e, "counting the group's files");
            }
            shared.file(&folder, count);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ledger() -> (tempfile::TempDir, Home, Ledger) {
        let d = tempfile::tempdir().unwrap();
        let home = Home::new(d.path()).unwrap();
        home.ensure_layout().unwrap();
        let l = Ledger::new(home.clone(), Duration::from_millis(50), 100, None);
        (d, home, l)
    }

    fn tally(c: &Count) -> Tally {
        c.outcome.clone().unwrap()
    }

    #[tokio::test]
    async fn fresh_counts_begin_after_the_ask_and_are_kept() {
        let (_d, home, l) = ledger();
        let g = GroupFolder::new("fam").unwrap();
        assert!(l.latest(&g).is_none());
        let first = l.fresh(&g).await.unwrap();
        // Counting made no folder.
        let dir = home.group_dir(&g).unwrap();
        assert!(!dir.exists());
        assert_eq!(tally(&first), Tally::default());
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("a.bin"), vec![1u8; 64 << 10]).unwrap();
        // The first count is trusted (no container ran since)…
        let again = l.trusted(&g).await.unwrap();
        assert_eq!(again.started, first.started);
        // …until one ran: then the next start counts again.
        drop(l.running(&g));
        let after = l.trusted(&g).await.unwrap();
        assert!(after.started > first.started);
        assert_eq!(tally(&after).entries, 1);
        assert!(tally(&after).bytes >= tally(&first).bytes + (64 << 10));
        assert_eq!(l.latest(&g).unwrap().started, after.started);
    }

    #[tokio::test]
    async fn what_a_containers_processes_hold_open_is_counted_with_the_trees() {
        let (_d, home, l) = ledger();
        let g = GroupFolder::new("fam").unwrap();
        let dir = home.group_dir(&g).unwrap();
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("held.bin");
        std::fs::write(&path, vec![1u8; 2 << 20]).unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .stdin(std::fs::File::open(&path).unwrap())
            .spawn()
            .unwrap();
        std::fs::remove_file(&path).unwrap();
        let before = l.fresh(&g).await.unwrap();
        assert_eq!(before.held, Held::default(), "no container runs");
        // A container's namespace, as `processes` files it (ours here: it
        // refuses the host's own).
        let own = rustix::fs::stat("/proc/self/ns/pid").unwrap().st_ino;
        let guard = Processes {
            shared: l.shared.clone(),
            folder: g.clone(),
            id: "c1".into(),
        };
        l.shared
            .lock()
            .books
            .get_mut(&g)
            .unwrap()
            .processes
            .push(("c1".into(), own));
        let c = l.fresh(&g).await.unwrap();
        assert!(c.held.bytes >= 2 << 20, "{:?}", c.held);
        let cx = super::super::Quotas {
            bytes: 1 << 20,
            entries: 100,
            host_free_bytes: u64::MAX,
            host_reserve_bytes: 0,
        };
        let u = super::super::usage(&c, &cx).unwrap();
        assert_eq!(u.used_bytes, tally(&c).bytes + c.held.bytes);
        assert!(u.over_quota() && u.refusal().unwrap().contains("held open"));
        drop(guard);
        assert_eq!(l.fresh(&g).await.unwrap().held, Held::default());
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[tokio::test]
    async fn a_running_group_is_counted_again_and_again() {
        let (_d, home, l) = ledger();
        let g = GroupFolder::new("fam").unwrap();
        let dir = home.group_dir(&g).unwrap();
        std::fs::create_dir_all(&dir).unwrap();
        let guard = l.running(&g);
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut seen = Vec::new();
        for i in 0..3u64 {
            std::fs::write(dir.join(format!("f{i}")), b"x").unwrap();
            loop {
                let c = l.latest(&g);
                if let Some(c) = c.filter(|c| tally(c).entries == i + 1) {
                    seen.push(c.started);
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "never counted again: {:?}",
                    l.latest(&g)
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        assert!(seen.windows(2).all(|w| w[0] < w[1]));
        drop(guard);
        l.stop();
        assert!(
            l.fresh(&g).await.is_err(),
            "a stopped ledger counts no more"
        );
    }
}
