//! Helpers the benches share (`mod common;` in each bench): the `g2`
//! binary, running it without the caller's `G2_*` environment, timing
//! processes, and the statistics and formatting of the reports.

#![allow(dead_code)] // each bench uses a part of these

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

// The tests' `g2 serve` process, the same code for both.
#[path = "../../../tests/integration/serve_process.rs"]
mod serve_process;

// What else the tests and the benches share.
#[path = "../../../tests/integration/shared.rs"]
pub mod shared;

// The tests' local platform servers (with what they share), for the
// channels' bench.
#[path = "../../../tests/integration/bot_api.rs"]
pub mod bot_api;
#[path = "../../../tests/integration/discord_api.rs"]
pub mod discord_api;
#[path = "../../../tests/integration/graph_api.rs"]
pub mod graph_api;
#[path = "../../../tests/integration/local_api.rs"]
pub mod local_api;
#[path = "../../../tests/integration/slack_api.rs"]
pub mod slack_api;

// The tests' throwaway PostgreSQL cluster, for benches on that store.
#[path = "../../../tests/pg_cluster.rs"]
pub mod pg_cluster;

// The tests' headless Chromium, for the viewer's bench.
#[path = "../../../tests/integration/browser.rs"]
pub mod browser;

/// The `g2` binary Cargo built along with the bench (same profile, so
/// `target/release/g2` under `cargo bench`), or `$G2_BIN`.
pub fn g2_binary() -> PathBuf {
    std::env::var_os("G2_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_g2")))
}

/// A command without the bench's `G2_*` and `ANTHROPIC_*` environment: g2
/// reads settings from `G2_*` variables, and the benches' own
/// (`G2_BENCH_HOME`, `G2_FIXTURES`, `G2_BIN`) are not settings; a key in
/// the caller's environment would switch the gateway to the real API.
pub fn command(program: impl AsRef<Path>) -> Command {
    let mut c = Command::new(program.as_ref());
    for (k, _) in std::env::vars_os() {
        let k2 = k.to_string_lossy();
        if k2.starts_with("G2_") || k2.starts_with("ANTHROPIC_") {
            c.env_remove(k);
        }
    }
    c
}

/// The project checkout (the benches live in `host/benches/`).
pub fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Timings, sorted.
pub struct Samples {
    sorted: Vec<Duration>,
}

impl Samples {
    pub fn of(mut samples: Vec<Duration>) -> Samples {
        assert!(!samples.is_empty(), "no samples");
        samples.sort();
        Samples { sorted: samples }
    }

    pub fn n(&self) -> usize {
        self.sorted.len()
    }

    /// Nearest-rank percentile, `p` in `0.0..=1.0` (`0.0` is the best).
    pub fn at(&self, p: f64) -> Duration {
        let n = self.sorted.len();
        self.sorted[((p * n as f64).ceil() as usize).clamp(1, n) - 1]
    }

    /// `p50 850 µs p99 12.34 ms`, as the reports print them.
    pub fn p50_p99(&self) -> String {
        format!(
            "p50 {} p99 {}",
            fmt_dur(self.at(0.5)),
            fmt_dur(self.at(0.99))
        )
    }
}

/// Runs the command (built by `cmd`, which should start from [`command`];
/// output to /dev/null, stderr passed through) once to warm up, then `runs`
/// times. An exit code not in `ok` fails the bench.
pub fn time_process(runs: usize, ok: &[i32], cmd: impl Fn() -> Command) -> Samples {
    let run = || {
        let mut c = cmd();
        let t = Instant::now();
        let status = c
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .status()
            .expect("spawn");
        let d = t.elapsed();
        assert!(
            status.code().is_some_and(|c| ok.contains(&c)),
            "command failed: {status}"
        );
        d
    };
    run();
    Samples::of((0..runs).map(|_| run()).collect())
}

/// `850 µs`, `12.34 ms`.
pub fn fmt_dur(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1e3;
    if ms < 1.0 {
        format!("{:.0} µs", ms * 1e3)
    } else {
        format!("{ms:.2} ms")
    }
}

/// A `g2 serve` on a free loopback port, killed when dropped.
pub struct Serve {
    pub child: std::process::Child,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
}

impl Serve {
    /// Starts `g2 serve` for `home` with extra settings in `env`; returns
    /// once it prints its address.
    pub fn start(home: &Path, env: &[(&str, &str)]) -> Serve {
        let mut g2 = command(g2_binary());
        g2.arg("--home")
            .arg(home)
            .envs(env.iter().copied())
            .stderr(Stdio::null());
        let (child, url) = serve_process::spawn(g2);
        Serve { child, url }
    }

    /// As [`Serve::start`], with the host's log (stderr) written to `log`.
    pub fn start_logged(home: &Path, env: &[(&str, &str)], log: &Path) -> Serve {
        let mut g2 = command(g2_binary());
        g2.arg("--home")
            .arg(home)
            .envs(env.iter().copied())
            .stderr(std::fs::File::create(log).unwrap());
        let (child, url) = serve_process::spawn(g2);
        Serve { child, url }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        serve_process::stop(&mut self.child);
    }
}

/// Runs `g2 --home HOME ARGS…` and fails the bench if it fails.
pub fn g2_ok(home: &Path, args: &[&str]) {
    let ok = command(g2_binary())
        .arg("--home")
        .arg(home)
        .args(args)
        .stdout(Stdio::null())
        .status()
        .unwrap()
        .success();
    assert!(ok, "g2 {args:?} failed");
}

/// `g2 --home HOME init`; with `G2_BENCH_STORE=postgres` the home's store
/// is a fresh database in a throwaway PostgreSQL cluster (its `g2.toml`
/// says so before `init`).
pub fn init_home(home: &Path) {
    if let Some(url) = postgres_database() {
        std::fs::write(home.join("g2.toml"), format!("[store]\nurl = \"{url}\"\n")).unwrap();
    }
    let ok = command(g2_binary())
        .arg("--home")
        .arg(home)
        .arg("init")
        .stdout(Stdio::null())
        .status()
        .unwrap()
        .success();
    assert!(ok, "g2 init failed");
}

/// A home with `g2 init` done and a group `bench` that needs a trigger:
/// every message to it is stored and checked by the router, none starts
/// an agent.
pub fn home_with_bench_group() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    init_home(home.path());
    let ok = command(g2_binary())
        .arg("--home")
        .arg(home.path())
        .args(["groups", "add", "bench", "--name", "Bench"])
        .stdout(Stdio::null())
        .status()
        .unwrap()
        .success();
    assert!(ok, "g2 groups add failed");
    home
}

/// Posts `text` to the main group's chat as `bench` (`POST
/// /api/groups/main/messages`) and checks it was accepted.
pub async fn post_main(client: &reqwest::Client, base: &str, text: &str) {
    post_to(client, base, "main", text).await;
}

/// A client without Nagle's delay and the main group's chat stream
/// (`GET /api/groups/main/stream`) it opened.
pub async fn main_stream(base: &str) -> (reqwest::Client, reqwest::Response) {
    let client = reqwest::Client::builder()
        .tcp_nodelay(true)
        .build()
        .unwrap();
    let resp = client
        .get(format!("{base}/api/groups/main/stream"))
        .send()
        .await
        .unwrap();
    (client, resp)
}

/// Posts `text` to a group's chat as `bench` and checks it was accepted.
pub async fn post_to(client: &reqwest::Client, base: &str, folder: &str, text: &str) {
    shared::post_message(client, base, None, folder, ("bench", text)).await;
}

/// How many of a group's chat messages are the assistant's.
pub async fn bot_replies(client: &reqwest::Client, base: &str, folder: &str) -> usize {
    let url = format!("{base}/api/groups/{folder}/messages?limit=1000");
    let all = shared::json_of(client.get(url)).await;
    all.as_array()
        .unwrap()
        .iter()
        .filter(|m| m["from_bot"] == true)
        .count()
}

/// A fresh store for a bench: SQLite in `dir`, or with
/// `G2_BENCH_STORE=postgres` a fresh database in a throwaway PostgreSQL
/// cluster (`tests/pg_cluster.rs`).
pub fn bench_store(dir: &Path) -> g2_host::store::Store {
    let timeout = Duration::from_secs(5);
    match postgres_database() {
        Some(url) => g2_host::store::Store::open_postgres(&url, timeout).unwrap(),
        None => g2_host::store::Store::open(&dir.join("g2.db"), timeout).unwrap(),
    }
}

/// The store a home made by [`init_home`] uses (its `store.url`), and its
/// name for the report (`SQLite` or `PostgreSQL`).
pub fn home_store(home: &Path) -> (g2_host::store::Store, &'static str) {
    let settings = g2_host::config::Settings::load(home, None).unwrap();
    let store = g2_host::store::Store::open_url(
        &settings.store.url,
        &home.join("data/g2.db"),
        Duration::from_secs(5),
    )
    .unwrap();
    let name = match g2_host::store::Backend::of(&settings.store.url).unwrap() {
        g2_host::store::Backend::Postgres => "PostgreSQL",
        g2_host::store::Backend::Sqlite(_) => "SQLite",
    };
    (store, name)
}

/// With `G2_BENCH_STORE=postgres`, the URL of a fresh database in the
/// bench's throwaway cluster; `None` for SQLite.
fn postgres_database() -> Option<String> {
    if !std::env::var("G2_BENCH_STORE").is_ok_and(|v| v == "postgres") {
        return None;
    }
    let cluster = pg_cluster::Cluster::shared()
        .expect("G2_BENCH_STORE=postgres needs PostgreSQL (scripts/setup.sh)");
    Some(cluster.database())
}

/// A number from the environment (`G2_BENCH_*`), or `default`.
pub fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The client side of a bench: a two-thread runtime (the machine's size),
/// with rustls' ring provider installed for reqwest.
pub fn runtime() -> tokio::runtime::Runtime {
    let _ = rustls::crypto::ring::default_provider().install_default();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// `g2 gateway` on the offline model with a TCP listener on a free
/// loopback port (and every group's socket), killed when dropped.
pub struct Gateway {
    child: std::process::Child,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
}

impl Gateway {
    pub fn start(home: &Path) -> Gateway {
        use std::io::{BufRead, BufReader};
        let mut child = command(g2_binary())
            .arg("--home")
            .arg(home)
            .args(["gateway", "--listen", "127.0.0.1:0"])
            .env("G2_PROVIDER", "offline")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut url = None;
        for line in BufReader::new(child.stdout.take().unwrap()).lines() {
            let line = line.unwrap();
            if let Some(u) = line.strip_prefix("listening ") {
                url = Some(u.trim().to_string());
            }
            if line.starts_with("try") {
                break;
            }
        }
        Gateway {
            child,
            url: url.unwrap(),
        }
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `g2-agent` built for the agent image
/// (`target/<agent target>/release/g2-agent`, made by `g2 image build` or
/// `scripts/setup.sh`).
pub fn agent_binary() -> PathBuf {
    project_root()
        .join("target")
        .join(g2_host::container::image::AGENT_TARGET)
        .join("release/g2-agent")
}

/// Archive `i` of a bench's group `main`.
pub fn day_archive(i: usize, body: String) -> g2_host::archives::Prepared {
    g2_host::archives::Prepared {
        group: g2_core::validate::GroupFolder::new("main").unwrap(),
        session_id: None,
        title: format!("Day {i}"),
        file_name: format!("{i}.md"),
        rel_path: format!("groups/main/conversations/{i}.md"),
        body,
        trigger: g2_host::archives::Trigger::Manual,
        created_at: "2026-05-01T10:00:00.000Z".into(),
        stats: Default::default(),
        pending: false,
    }
}

/// A fixed-seed xorshift generator: the same bench data on every run.
pub struct Rng(u64);

impl Default for Rng {
    fn default() -> Self {
        Rng(0x9e37_79b9_7f4a_7c15)
    }
}

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Stores a random unit vector for every queued row, under the name the
/// model's vectors have.
pub fn random_vectors(store: &g2_host::store::Store) {
    let mut rng = Rng::default();
    let name = Path::new(g2_host::memory::embed::DEFAULT_MODEL)
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    unit_vectors(store, 384, &name, || rng.next());
}

/// Stores a unit vector of `dims` drawn from `next` for every queued row,
/// under `name`.
pub fn unit_vectors(
    store: &g2_host::store::Store,
    dims: usize,
    name: &str,
    mut next: impl FnMut() -> u64 + Send,
) {
    loop {
        let n = store
            .write_blocking(|tx| {
                let jobs = g2_host::store::embeddings::pending(tx, 5_000)?;
                for j in &jobs {
                    let mut v: Vec<f32> = (0..dims)
                        .map(|_| (next() % 2001) as f32 / 1000.0 - 1.0)
                        .collect();
                    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
                    for x in &mut v {
                        *x /= norm;
                    }
                    g2_host::store::embeddings::put(tx, j, name, &g2_embed::to_bytes(&v))?;
                }
                Ok(jobs.len())
            })
            .unwrap();
        if n == 0 {
            break;
        }
    }
}

/// Group `main`'s memory as the injection benches use it: 200
/// observations, 20 session summaries and 500 archives of 20 exchanges
/// each, drawn from `ex` (query, response).
pub fn group_memory(store: &g2_host::store::Store, ex: &[(String, String)]) {
    use g2_host::memory::extract::{Kind, ObservationDraft, SummaryDraft};
    use g2_host::store::{self, observations as obs};
    let m = g2_core::validate::GroupFolder::new("main").unwrap();
    let ex = ex.to_vec();
    store
        .write_blocking(move |tx| {
            let at = "2026-05-01T10:00:00.000Z";
            for (i, (q, _)) in ex.iter().take(200).enumerate() {
                let d = ObservationDraft {
                    kind: Kind::Fact,
                    title: q.chars().take(120).collect(),
                    narrative: q.clone(),
                    facts: vec![],
                    files: vec![],
                    importance: (i % 10 + 1) as u8,
                    concerns: vec!["Ann".into()],
                };
                obs::insert(tx, &(&m).into(), &d, Default::default(), at, |_| false)?;
            }
            for i in 0..20 {
                let s = store::memory::open_session(tx, &m, &format!("s{i}"), None, None, at)?;
                store::memory::end_session(tx, s, Some("clear"), at)?;
                let (q, r) = &ex[(i * 7) % ex.len()];
                let d = SummaryDraft {
                    title: q.chars().take(80).collect(),
                    request: q.clone(),
                    learned: r.clone(),
                    ..SummaryDraft::default()
                };
                obs::insert_summary(tx, &m, s, &d, at)?;
            }
            for i in 0..500 {
                let mut body = String::from("# A day\n\nArchived: x\n\n---\n\n");
                for k in 0..20 {
                    let (q, r) = &ex[(i * 20 + k) % ex.len()];
                    body.push_str(&format!("**User**: {q}\n\n**G2**: {r}\n\n"));
                }
                store::archives::insert(tx, &day_archive(i, body))?;
            }
            Ok(())
        })
        .unwrap();
}

/// The words [`word_archives`] draws from.
pub const WORDS: &[&str] = &[
    "boat", "pier", "harbour", "tide", "key", "shed", "garden", "lasagne", "sister", "birthday",
    "train", "ticket", "Monday", "invoice", "printer", "meeting", "budget", "holiday", "school",
    "the", "a", "is", "at", "on", "we", "should", "remember", "that", "next", "week",
];

pub fn sentence(rng: &mut Rng, n: usize) -> String {
    (0..n)
        .map(|_| WORDS[(rng.next() as usize) % WORDS.len()])
        .collect::<Vec<_>>()
        .join(" ")
}

/// `archives` archives of 20 exchanges each in group `main`, drawn from a
/// small vocabulary by a seeded PRNG: files in `groups/main/conversations/`
/// and their rows and index, 1,000 rows a transaction.
pub fn word_archives(home: &Path, archives: usize) {
    let (store, _) = home_store(home);
    let dir = home.join("groups/main/conversations");
    let mut rng = Rng::default();
    let mut batch = Vec::new();
    for i in 0..archives {
        let mut body = format!("# Day {i}\n\n---\n\n");
        for _ in 0..20 {
            let (u, a) = (4 + rng.next() as usize % 20, 8 + rng.next() as usize % 60);
            body.push_str(&format!(
                "**User**: {}\n\n**G2**: {}\n\n",
                sentence(&mut rng, u),
                sentence(&mut rng, a)
            ));
        }
        std::fs::write(dir.join(format!("{i}.md")), &body).unwrap();
        batch.push(day_archive(i, body));
        if batch.len() == 1000 || i + 1 == archives {
            let b = std::mem::take(&mut batch);
            store
                .write_blocking(move |tx| {
                    for p in &b {
                        g2_host::store::archives::insert(tx, p)?;
                    }
                    Ok(())
                })
                .unwrap();
        }
    }
}
