//! Recall by meaning: the local embedding model, the background jobs that
//! embed what recall reads, and the question's vector.
//!
//! **Shared state.** One model per process, installed at start
//! ([`init`]: the host, and the CLI commands that recall) and read by
//! `memory::recall` through [`query`]. With `memory.embeddings = "off"`, or
//! a model that fails to load, nothing is installed and recall is lexical.
//!
//! **Jobs.** A trigger queues a job in the transaction that writes a
//! passage, an observation, a summary or a finished prompt
//! (`migrations/0012_embeddings.sql`); [`start`] takes them newest first,
//! embeds them off the async runtime and stores each vector in the
//! transaction that ends its job. A host killed mid-way finds the jobs
//! still queued; a vector stored is never made again. Never in an agent's
//! turn or the router's path: only the question of a recall is embedded
//! where it is asked (about 5 ms).

use std::collections::VecDeque;
use std::num::NonZero;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex, RwLock};
use std::time::{Duration, Instant};

use g2_embed::Embedder;

use crate::background::Background;
use crate::config::{EmbeddingsMode, MemorySettings};
use crate::store::{self, Store};

/// Where `scripts/setup.sh` unpacks the model, under a project root.
pub const DEFAULT_MODEL: &str = "tools/models/all-minilm-l6-v2";
/// Rows one pass of the host's jobs takes while the host is busy: a pass
/// holds no lock while it embeds, and a short one yields the single thread
/// soon to what waits.
const PASS: i64 = 32;
/// Rows one pass takes on an idle host (every core): enough for a batch a
/// core with little padding, and back to [`busy`]'s check within seconds.
const IDLE_PASS: i64 = 128;
/// Rows one pass of the CLI's reindex takes: more rows sort into batches
/// that pad less (`g2_embed::Embedder::embed_in`), and commit less often.
const CLI_PASS: i64 = 256;
/// A new observation whose vector is at least this near an active one of
/// the same group and kind supersedes it (docs/recall.md: measured on
/// labelled pairs of restatements, updates and different statements).
pub const SUPERSEDE: f32 = 0.85;
/// How long the jobs wait when nothing is queued.
const IDLE: Duration = Duration::from_secs(1);
/// A backlog at least this large is logged as it goes, every [`LOG_EVERY`].
const LARGE_BACKLOG: i64 = 500;
const LOG_EVERY: Duration = Duration::from_secs(10);
/// After a question, the host counts itself busy this long: questions come
/// with turns (the runner asks one for each prompt), so turns are likely running.
const BUSY_FOR: Duration = Duration::from_secs(10);

static MODEL: RwLock<Option<Arc<Model>>> = RwLock::new(None);

/// The host's jobs' pools, both at nice 10 (`g2_embed::background_pool`):
/// one thread while the host is busy ([`busy`]), so that a turn and its
/// hook's question keep the other cores; every core otherwise, so that a
/// backlog (a reindex, an import) goes as fast as the machine allows.
/// `None` if a pool could not be made (then the questions' pool is used).
static JOBS_ONE: LazyLock<Option<rayon::ThreadPool>> = LazyLock::new(|| jobs_pool(1));
static JOBS_ALL: LazyLock<Option<rayon::ThreadPool>> =
    LazyLock::new(|| jobs_pool(std::thread::available_parallelism().map_or(1, NonZero::get)));

fn jobs_pool(threads: usize) -> Option<rayon::ThreadPool> {
    match g2_embed::background_pool(threads) {
        Ok(p) => Some(p),
        Err(e) => {
            tracing::warn!(error = %e, "no pool of its own for the embedding jobs");
            None
        }
    }
}

/// Questions being embedded now, and when the last one was asked (ms
/// after [`EPOCH`]): what [`busy`] reads.
static ASKING: AtomicUsize = AtomicUsize::new(0);
static ASKED_AT: AtomicU64 = AtomicU64::new(0);
static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);

fn now_ms() -> u64 {
    u64::try_from(EPOCH.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Whether a question is being embedded, or was within [`BUSY_FOR`].
fn busy() -> bool {
    let asked = ASKED_AT.load(Ordering::Relaxed);
    let recent = u64::try_from(BUSY_FOR.as_millis()).unwrap_or(u64::MAX);
    ASKING.load(Ordering::Relaxed) > 0 || (asked > 0 && now_ms().saturating_sub(asked) < recent)
}

/// Who runs a pass, and so on which threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pace {
    /// The host's jobs while it is busy: one thread at nice 10.
    Quiet,
    /// The host's jobs while it is idle: every core at nice 10.
    Idle,
    /// A command run by a person (`g2 memory reindex`): every core, at
    /// the command's own priority, in larger passes.
    Cli,
}

/// A loaded model and the name its vectors are stored under.
pub struct Model {
    pub embedder: Embedder,
    pub name: String,
}

/// What [`load`] found.
pub enum Loaded {
    Off,
    Model(Arc<Model>),
    /// Why the model could not be loaded (recall is lexical).
    Failed(String),
}

/// The model's folder: the configured one, else [`DEFAULT_MODEL`] under
/// one of `home::install_roots`. `None` when none exists.
pub fn find(root: &Path, settings: &MemorySettings) -> Option<PathBuf> {
    if let Some(p) = &settings.embedding_model {
        return Some(p.clone());
    }
    crate::home::install_roots(root)
        .into_iter()
        .map(|r| r.join(DEFAULT_MODEL))
        .find(|p| p.is_dir())
}

/// Has candle run a question's products on every core the process may
/// use. It counts physical cores, which a virtual machine may report as
/// one: a question then takes about 18 ms instead of 10 on 2 cores
/// (docs/recall.md). Sets `RAYON_NUM_THREADS` unless it is set; call it
/// first in `main`, before any other thread exists.
pub fn use_every_core() {
    if std::env::var_os("RAYON_NUM_THREADS").is_none() {
        let n = std::thread::available_parallelism().map_or(1, NonZero::get);
        // SAFETY: the process has one thread yet (the caller's promise), so
        // nothing reads the environment meanwhile.
        unsafe { std::env::set_var("RAYON_NUM_THREADS", n.to_string()) };
    }
}

/// Loads the model the settings name.
pub fn load(root: &Path, settings: &MemorySettings) -> Loaded {
    if settings.embeddings == EmbeddingsMode::Off {
        return Loaded::Off;
    }
    let Some(dir) = find(root, settings) else {
        return Loaded::Failed(format!(
            "no model at {DEFAULT_MODEL} (run scripts/setup.sh, or set memory.embedding_model)"
        ));
    };
    match Embedder::load(&dir) {
        Ok(embedder) => {
            let name = dir
                .file_name()
                .map_or_else(|| "model".into(), |n| n.to_string_lossy().into_owned());
            Loaded::Model(Arc::new(Model { embedder, name }))
        }
        Err(e) => Loaded::Failed(format!("{}: {e}", dir.display())),
    }
}

/// Loads the model and installs it for this process; says what happened.
pub fn init(root: &Path, settings: &MemorySettings) -> Option<Arc<Model>> {
    let model = match load(root, settings) {
        Loaded::Off => None,
        Loaded::Model(m) => {
            tracing::info!(model = %m.name, dims = m.embedder.dims(), "embedding model loaded");
            Some(m)
        }
        Loaded::Failed(why) => {
            tracing::warn!(%why, "embedding model not loaded; recall is lexical");
            None
        }
    };
    install(model.clone());
    model
}

/// [`init`] off the async runtime (loading reads the weights), then the
/// jobs ([`start`]) when a model loaded: recall by meaning for a process
/// that serves groups (`g2 serve`, `g2 gateway`).
pub async fn serve(
    root: &Path,
    settings: &MemorySettings,
    store: &Store,
) -> crate::Result<Option<Background>> {
    let (root, m) = (root.to_path_buf(), settings.clone());
    let model = tokio::task::spawn_blocking(move || init(&root, &m)).await?;
    Ok(model.map(|model| start(store.clone(), model)))
}

/// Installs `model` for this process (`None`: recall is lexical).
pub fn install(model: Option<Arc<Model>>) {
    if let Ok(mut m) = MODEL.write() {
        *m = model;
    }
}

/// The installed model.
pub fn model() -> Option<Arc<Model>> {
    MODEL.read().ok().and_then(|m| m.clone())
}

/// Recent questions' vectors, by model and text, newest last: one search
/// is a recall per group of the same question, and a prompt's question is
/// made ahead of its recall (`recall::warm`). Only made vectors are kept
/// here; one being made is joined through [`making`], outside the pool.
type Recent = VecDeque<(Arc<Model>, String, Vec<f32>)>;
static RECENT: Mutex<Recent> = Mutex::new(VecDeque::new());
/// Questions kept in [`RECENT`].
const RECENT_QUESTIONS: usize = 16;

fn recent() -> std::sync::MutexGuard<'static, Recent> {
    lock(&RECENT)
}

/// A question's vector being made on the model's pool.
pub struct Making(Arc<Slot>);

/// A question's vector with the model that made it (`None`: no model, or
/// it failed).
type Made = Option<(Arc<Model>, Vec<f32>)>;

struct Slot {
    text: String,
    /// `None` until made.
    vector: Mutex<Option<Made>>,
    ready: std::sync::Condvar,
}

/// The questions being made now.
static MAKING: Mutex<Vec<Arc<Slot>>> = Mutex::new(Vec::new());

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Starts making `text`'s vector on the model's pool ([`query`]), or joins
/// the making of the same question already under way: a prompt's question
/// is started when the host hands the prompt over ([`making_ahead`]), and
/// its recall, asked a few milliseconds later, waits for that one instead
/// of making it again beside it on the same cores.
pub fn making(text: &str) -> Making {
    begin(text, None)
}

/// [`making`] for a prompt handed to a running agent: on one thread of its
/// own (`AHEAD`), beside Claude Code rather than on every core. Claude
/// Code works on the prompt for about 37 ms before its model request, and
/// the gateway puts the memory in only then (`memory::attach`): one thread
/// has the vector in time, and Claude Code keeps a core (on two cores, the
/// shared pool took both and slowed it by about as much as it saved).
pub fn making_ahead(text: &str) -> Making {
    begin(text, ahead())
}

/// The ahead pools' priority: below Claude Code's, which works on the
/// same prompt meanwhile and is what the turn waits for, and above the
/// embedding jobs' (nice 10).
const AHEAD_NICE: i32 = 5;

/// One-thread pools, one a core, for questions made ahead: each question
/// runs on one thread, and questions from several groups at once still
/// run side by side. (candle runs its products on the pool it is called
/// from, so a question inside a one-thread pool uses one thread.)
static AHEAD: LazyLock<Vec<(rayon::ThreadPool, AtomicUsize)>> = LazyLock::new(|| {
    let cores = std::thread::available_parallelism().map_or(1, NonZero::get);
    (0..cores)
        .filter_map(|_| g2_embed::pool_at("g2-embed-ahead", 1, AHEAD_NICE).ok())
        .map(|p| (p, AtomicUsize::new(0)))
        .collect()
});

/// A pool and how many questions it has to make.
type Ahead = (&'static rayon::ThreadPool, &'static AtomicUsize);

/// The least busy of [`AHEAD`]'s pools, if any could be made (else the
/// shared pool makes the question).
fn ahead() -> Option<Ahead> {
    AHEAD
        .iter()
        .min_by_key(|(_, n)| n.load(Ordering::Relaxed))
        .map(|(p, n)| (p, n))
}

fn begin(text: &str, pool: Option<Ahead>) -> Making {
    let mut all = lock(&MAKING);
    if let Some(slot) = all.iter().find(|s| s.text == text) {
        return Making(slot.clone());
    }
    let slot = Arc::new(Slot {
        text: text.to_string(),
        vector: Mutex::new(None),
        ready: std::sync::Condvar::new(),
    });
    all.push(slot.clone());
    drop(all);
    let job = slot.clone();
    let make = move || {
        let made = query(&job.text);
        lock(&MAKING).retain(|s| !Arc::ptr_eq(s, &job));
        *lock(&job.vector) = Some(made);
        job.ready.notify_all();
    };
    match pool {
        Some((pool, queued)) => {
            queued.fetch_add(1, Ordering::Relaxed);
            pool.spawn(move || {
                make();
                queued.fetch_sub(1, Ordering::Relaxed);
            });
        }
        None => rayon::spawn(make),
    }
    Making(slot)
}

impl Making {
    /// The vector, once made. Never called from inside the model's pool:
    /// a wait there could hold a thread the making needs.
    pub fn wait(self) -> Made {
        debug_assert!(
            rayon::current_thread_index().is_none(),
            "a question's vector waited for inside the model's pool"
        );
        let mut v = lock(&self.0.vector);
        loop {
            if let Some(made) = v.as_ref() {
                return made.clone();
            }
            v = self
                .0
                .ready
                .wait(v)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }
}

/// A question's vector, when a model is installed.
pub fn query(text: &str) -> Option<(Arc<Model>, Vec<f32>)> {
    let m = model()?;
    {
        let mut recent = recent();
        if let Some(i) = recent
            .iter()
            .position(|(lm, t, _)| Arc::ptr_eq(lm, &m) && t == text)
            && let Some(entry) = recent.remove(i)
        {
            let v = entry.2.clone();
            recent.push_back(entry);
            return Some((m, v));
        }
    }
    // Embedded outside the lock: other questions do not wait. The jobs
    // see it (`busy`) and keep to one thread meanwhile.
    ASKED_AT.store(now_ms().max(1), Ordering::Relaxed);
    ASKING.fetch_add(1, Ordering::Relaxed);
    let embedded = m.embedder.embed_one(text);
    ASKING.fetch_sub(1, Ordering::Relaxed);
    match embedded {
        Ok(v) => {
            let mut recent = recent();
            recent.retain(|(lm, t, _)| !(Arc::ptr_eq(lm, &m) && t == text));
            recent.push_back((m.clone(), text.to_string(), v.clone()));
            while recent.len() > RECENT_QUESTIONS {
                recent.pop_front();
            }
            Some((m, v))
        }
        Err(e) => {
            tracing::warn!(error = %e, "embedding a question failed; recall is lexical");
            None
        }
    }
}

/// What is embedded of a row's text: a passage's messages without their
/// speaker marks (`**User**: `, `**Ann** (09:00): `; as
/// `search::passages` reads them), one per line.
pub fn clean(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| crate::search::passages::speaker(l).map_or(l, |(_, text)| text))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Forgets every vector and queues every row for a new one (`g2 memory
/// reindex`); returns how many rows wait.
pub async fn requeue_all(store: &Store) -> crate::Result<i64> {
    store.write(store::embeddings::reset).await
}

/// Embeds what is queued until no job waits, telling `progress` how many
/// this call has embedded after each pass; blocking, on every core
/// ([`Pace::Cli`]). A running host's jobs may take some of them (each is
/// embedded once either way): then it waits for them.
pub fn embed_queued(store: &Store, model: &Model, progress: impl Fn(u64)) -> crate::Result<u64> {
    let mut n = 0;
    loop {
        let k = run_pass(store, model, Pace::Cli)?;
        if k == 0 {
            if store.read_blocking(store::embeddings::queued)? == 0 {
                return Ok(n);
            }
            // A running host's jobs hold the rest: wait for them.
            std::thread::sleep(Duration::from_millis(200));
        }
        n += k as u64;
        progress(n);
    }
}

/// The host's error for the model's (the store's error type, below the
/// model, holds it in words).
fn embed_error(e: g2_embed::Error) -> crate::Error {
    crate::Error::Embed(e.to_string())
}

/// One pass of the host's jobs: [`Pace::Quiet`] while the host is busy
/// (a question within the last 10 s), [`Pace::Idle`] otherwise.
pub fn run_once(store: &Store, model: &Model) -> crate::Result<usize> {
    run_pass(store, model, if busy() { Pace::Quiet } else { Pace::Idle })
}

/// Embeds the newest queued rows (32 a pass, 256 for [`Pace::Cli`]);
/// how many were stored. Nothing queued costs a read, not the writer.
pub fn run_pass(store: &Store, model: &Model, pace: Pace) -> crate::Result<usize> {
    if store.read_blocking(store::embeddings::queued)? == 0 {
        return Ok(0);
    }
    let take = match pace {
        Pace::Cli => CLI_PASS,
        Pace::Idle => IDLE_PASS,
        Pace::Quiet => PASS,
    };
    let jobs = store.write_blocking(move |tx| store::embeddings::pending(tx, take))?;
    if jobs.is_empty() {
        return Ok(0);
    }
    let texts: Vec<String> = jobs.iter().map(|j| clean(&j.text)).collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    // The host's on a pool of its own at a lower priority: a question asked
    // meanwhile (the hook's 50 ms) does not wait behind a batch.
    let pool = match pace {
        Pace::Cli => None,
        Pace::Quiet => JOBS_ONE.as_ref(),
        Pace::Idle => JOBS_ALL.as_ref(),
    };
    let vectors = match pool {
        Some(pool) => pool.install(|| model.embedder.embed(&refs)),
        None => model.embedder.embed(&refs),
    }
    .map_err(embed_error)?;
    let name = model.name.clone();
    let stored = store.write_blocking(move |tx| {
        let mut n = 0;
        for (job, v) in jobs.iter().zip(&vectors) {
            let stored = store::embeddings::put(tx, job, &name, &g2_embed::to_bytes(v))?;
            if stored && job.kind == "observation" {
                supersede_near(tx, job.id, v, &name)?;
            }
            n += usize::from(stored);
        }
        Ok(n)
    })?;
    // Crash tests stop the host here: a batch stored, the rest queued.
    fail::fail_point!("embed-stored");
    Ok(stored)
}

/// A rate and an estimate of what is left: `85/s, about 55 s left`.
pub fn pace_line(done: u64, total: u64, took: Duration) -> String {
    let secs = took.as_secs_f64();
    if done == 0 || secs <= 0.0 {
        return "starting".into();
    }
    let rate = done as f64 / secs;
    let left = total.saturating_sub(done) as f64 / rate;
    format!("{rate:.0}/s, about {left:.0} s left")
}

/// A large backlog the host's jobs work through, logged as it goes.
struct Backlog {
    started: Instant,
    logged: Instant,
    total: u64,
    done: u64,
}

impl Backlog {
    /// After a pass that stored `k`: starts one when at least
    /// [`LARGE_BACKLOG`] rows wait, logs every [`LOG_EVERY`], ends with
    /// the queue.
    fn passed(this: &mut Option<Backlog>, store: &Store, k: usize) {
        if k == 0 {
            if let Some(b) = this.take() {
                let secs = b.started.elapsed().as_secs();
                tracing::info!(rows = b.done, secs, "embedding backlog done");
            }
            return;
        }
        match this {
            Some(b) => {
                b.done += k as u64;
                if b.logged.elapsed() >= LOG_EVERY {
                    b.logged = Instant::now();
                    let line = pace_line(b.done, b.total, b.started.elapsed());
                    tracing::info!("embedded {}/{} ({line})", b.done, b.total);
                }
            }
            None => {
                let waiting = store.read_blocking(store::embeddings::queued).unwrap_or(0);
                if waiting >= LARGE_BACKLOG {
                    let now = Instant::now();
                    let total = u64::try_from(waiting).unwrap_or(0) + k as u64;
                    tracing::info!(rows = total, "embedding a backlog");
                    *this = Some(Backlog {
                        started: now,
                        logged: now,
                        total,
                        done: k as u64,
                    });
                }
            }
        }
    }
}

/// Observations de-duplicated by meaning: the active observations of the
/// same group and kind, older than `id`, whose vectors are within
/// [`SUPERSEDE`] of its `vector`, are superseded by it. How many were.
pub fn supersede_near(
    tx: &store::Db<'_>,
    id: i64,
    vector: &[f32],
    model: &str,
) -> crate::Result<usize> {
    let Some((group, kind)) = store::observations::active_kind(tx, id)? else {
        return Ok(0);
    };
    let mut n = 0;
    for (old, bytes) in store::observations::active_vectors(tx, &group, &kind, id, model)? {
        let near = g2_embed::from_bytes(&bytes)
            .is_some_and(|v| v.len() == vector.len() && g2_embed::dot(&v, vector) >= SUPERSEDE);
        if old < id && near && store::observations::supersede(tx, old, id)? {
            tracing::debug!(%group, old, new = id, "observation superseded by one of the same meaning");
            n += 1;
        }
    }
    Ok(n)
}

/// The jobs, in the background until stopped.
pub fn start(store: Store, model: Arc<Model>) -> Background {
    Background::spawn(|mut stopped| async move {
        let mut backlog: Option<Backlog> = None;
        loop {
            let (s, m) = (store.clone(), model.clone());
            // A stop does not wait for the batch: it finishes (and stores
            // its vectors in its own transaction) or dies with the process.
            let done = tokio::select! {
                biased;
                _ = &mut stopped => break,
                done = tokio::task::spawn_blocking(move || run_once(&s, &m)) => done,
            };
            if let Ok(Ok(k)) = &done {
                let k = *k;
                let s = store.clone();
                let mut b = backlog.take();
                backlog = tokio::task::spawn_blocking(move || {
                    Backlog::passed(&mut b, &s, k);
                    b
                })
                .await
                .unwrap_or(None);
            }
            let wait = match done {
                Ok(Ok(0)) => IDLE,
                Ok(Ok(_)) => Duration::ZERO,
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "embedding jobs failed; the next pass retries");
                    IDLE * 10
                }
                Err(e) => {
                    tracing::warn!(error = %e, "embedding jobs stopped");
                    IDLE * 10
                }
            };
            tokio::select! {
                _ = &mut stopped => break,
                _ = tokio::time::sleep(wait) => {}
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speaker_marks_are_left_out() {
        assert_eq!(
            clean(
                "**User**: the boat is at pier 7\n\n**G2**: noted\n**Ann** (09:00): and the oars?\nmore"
            ),
            "the boat is at pier 7\nnoted\nand the oars?\nmore"
        );
        assert_eq!(clean("**bold** words: stay"), "**bold** words: stay");
    }
}
