//! `g2 memory search` as a process, and embedding throughput (issue 37).
//!
//! A home with two groups and `G2_BENCH_ARCHIVES` archives (default 60)
//! of 20 exchanges each, generated from a seeded PRNG (one passage an
//! exchange), embedded. Then:
//!
//! 1. **Model load**: `g2_embed::Embedder::load_timed`, the weights
//!    memory-mapped vs read whole (the earlier way), 5 loads each: the
//!    median of each step (tokenizer, weights, BERT build).
//! 2. **Batch sizes**: 256 of the passages embedded on every core at
//!    batch sizes 1-64 (sorted by tokens): rows per second.
//! 3. **Reindex throughput**, rows per second: `g2 memory reindex` as a
//!    process (every core, no host); the host's passes in-process at
//!    `Pace::Quiet` (one nice thread: what `g2 memory reindex` and the
//!    host's jobs ran before) and `Pace::Idle` (every core, nice).
//! 4. **Processes**: `g2 search WORDS` and `g2 memory search WORDS`,
//!    interleaved, `G2_BENCH_RUNS` (default 30) each: p50/p90, (a) with no
//!    host (the CLI loads the model itself) and (b) with a `g2 serve`
//!    running on the home (it answers `GET /api/memory/search`); the ratio
//!    to `g2 search`. Goal: within 3x.
//! 5. **Under a turn load** (needs the agent image, `g2 image build`):
//!    with the `g2 serve` of (b) answering messages posted to `main` one
//!    after another, the reindex again (the CLI and the host's jobs share
//!    the rows), and `Pace::Quiet` in-process.
//!
//! `cargo bench -p g2-host --bench memory_cli`. The model is
//! `tools/models/all-minilm-l6-v2` (`scripts/setup.sh`).

// Tests and benches fail loudly: an unwrap is the assertion.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{Samples, Serve, command, fmt_dur, g2_binary, g2_ok, init_home, project_root};
use g2_core::validate::GroupFolder;
use g2_host::archives::{Prepared, Trigger};
use g2_host::config::MemorySettings;
use g2_host::memory::embed::{self, Loaded, Pace};
use g2_host::store::{self, Store};

const WORDS: &[&str] = &[
    "boat", "pier", "harbour", "tide", "key", "shed", "garden", "lasagne", "sister", "birthday",
    "train", "ticket", "Monday", "invoice", "printer", "meeting", "budget", "holiday", "school",
    "doctor", "the", "a", "is", "at", "on", "we", "should", "remember", "that", "next", "week",
    "moved", "blue", "green", "seven", "after", "before", "dinner", "recipe", "flight", "hotel",
];

/// A seeded xorshift: the same home on every run.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn sentence(&mut self, min: usize, max: usize) -> String {
        let n = min + (self.next() as usize) % (max - min);
        (0..n)
            .map(|_| WORDS[(self.next() as usize) % WORDS.len()])
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn record(store: &Store, archives: usize) {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for n in 0..archives {
        let group = if n % 3 == 0 { "family" } else { "main" };
        let day = format!("2026-03-{:02}", 1 + n % 28);
        let mut body = format!("# Talk {n}\n\nArchived: {day}\n\n---\n\n");
        for _ in 0..20 {
            // Lengths as chats have them: mostly short, some long.
            let (u, a) = if rng.next().is_multiple_of(5) {
                (40, 160)
            } else {
                (4, 30)
            };
            body.push_str(&format!(
                "**User**: {}\n\n**G2**: {}\n\n",
                rng.sentence(u / 2, u),
                rng.sentence(a / 4, a)
            ));
        }
        let p = Prepared {
            group: GroupFolder::new(group).unwrap(),
            session_id: Some(format!("{group}-{n}")),
            title: format!("Talk {n}"),
            file_name: format!("{day}-{n}.md"),
            rel_path: format!("groups/{group}/conversations/{day}-{n}.md"),
            body,
            trigger: Trigger::Manual,
            created_at: format!("{day}T12:00:00.000Z"),
            stats: Default::default(),
            pending: false,
        };
        store
            .write_blocking(move |tx| Ok(store::archives::insert(tx, &p)?.id))
            .unwrap();
    }
}

fn queued(store: &Store) -> i64 {
    store.read_blocking(store::embeddings::queued).unwrap()
}

/// Rows per second of in-process passes at `pace`, every row queued again
/// (a running host's jobs may take some: the rate is the queue's).
fn passes(store: &Store, model: &embed::Model, pace: Pace) -> f64 {
    let rt = common::runtime();
    let total = rt.block_on(embed::requeue_all(store)).unwrap();
    let t = Instant::now();
    while queued(store) > 0 {
        embed::run_pass(store, model, pace).unwrap();
    }
    total as f64 / t.elapsed().as_secs_f64()
}

/// `g2 memory reindex` as a process: rows per second.
fn reindex(home: &Path, rows: i64) -> f64 {
    let t = Instant::now();
    g2_ok(home, &["memory", "reindex"]);
    rows as f64 / t.elapsed().as_secs_f64()
}

fn line(what: &str, rate: f64) {
    println!(
        "  {what:<44} {rate:>7.1} rows/s  (5,900 rows: {:.0} s)",
        5900.0 / rate
    );
}

/// `g2 search` and `g2 memory search` interleaved: (search, memory search).
fn processes(home: &Path, runs: usize) -> (Samples, Samples) {
    let questions = [
        "where is the boat moored",
        "lasagne for the birthday",
        "printer invoice",
    ];
    let run = |args: &[&str]| {
        let mut c = command(g2_binary());
        c.arg("--home").arg(home).args(args);
        let t = Instant::now();
        let ok = c
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .status()
            .unwrap()
            .success();
        assert!(ok, "g2 {args:?} failed");
        t.elapsed()
    };
    run(&["memory", "search", "warm up"]);
    let (mut s, mut m) = (Vec::new(), Vec::new());
    for i in 0..runs {
        let q = questions[i % questions.len()];
        s.push(run(&["search", q]));
        m.push(run(&["memory", "search", q]));
    }
    (Samples::of(s), Samples::of(m))
}

fn report(what: &str, (s, m): &(Samples, Samples)) {
    let r = m.at(0.5).as_secs_f64() / s.at(0.5).as_secs_f64();
    println!(
        "  {what:<22} g2 search p50 {} p90 {} | g2 memory search p50 {} p90 {} | ratio {r:.1}x {}",
        fmt_dur(s.at(0.5)),
        fmt_dur(s.at(0.9)),
        fmt_dur(m.at(0.5)),
        fmt_dur(m.at(0.9)),
        if r <= 3.0 {
            "(goal met)"
        } else {
            "(goal missed)"
        }
    );
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let archives: usize = common::env_or("G2_BENCH_ARCHIVES", 60);
    let runs: usize = common::env_or("G2_BENCH_RUNS", 30);
    let dir = project_root().join(embed::DEFAULT_MODEL);
    assert!(
        dir.is_dir(),
        "no model at {} (scripts/setup.sh)",
        dir.display()
    );

    println!("model load (median of 5):");
    for how in [g2_embed::Weights::Read, g2_embed::Weights::Mapped] {
        let times: Vec<g2_embed::LoadTimes> = (0..5)
            .map(|_| g2_embed::Embedder::load_timed(&dir, how).unwrap().1)
            .collect();
        let part = |f: fn(&g2_embed::LoadTimes) -> Duration| median(times.iter().map(f).collect());
        let all = median(
            times
                .iter()
                .map(|t| t.tokenizer + t.weights + t.model)
                .collect(),
        );
        println!(
            "  {how:?}: tokenizer {} weights {} BERT build {} total {}",
            fmt_dur(part(|t| t.tokenizer)),
            fmt_dur(part(|t| t.weights)),
            fmt_dur(part(|t| t.model)),
            fmt_dur(all)
        );
    }

    let home = tempfile::tempdir().unwrap();
    init_home(home.path());
    g2_ok(
        home.path(),
        &[
            "groups",
            "add",
            "family",
            "--name",
            "Family",
            "--no-trigger",
        ],
    );
    let store = Store::open(
        &g2_host::home::Home::new(home.path()).unwrap().db_path(),
        Duration::from_secs(5),
    )
    .unwrap();
    record(&store, archives);
    let rows = queued(&store);
    println!("home: {archives} archives, {rows} rows to embed");

    let settings = MemorySettings {
        embedding_model: Some(dir.clone()),
        ..Default::default()
    };
    let Loaded::Model(model) = embed::load(&project_root(), &settings) else {
        panic!("the model did not load");
    };

    println!("batch sizes (256 passages, every core):");
    let texts: Vec<String> = store
        .write_blocking(|tx| store::embeddings::pending(tx, 256))
        .unwrap()
        .iter()
        .map(|j| embed::clean(&j.text))
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    for batch in [1, 8, 16, 32, 64] {
        let t = Instant::now();
        model.embedder.embed_in(&refs, batch).unwrap();
        println!(
            "  batch {batch:>2}: {:.1} rows/s",
            refs.len() as f64 / t.elapsed().as_secs_f64()
        );
    }

    println!("reindex, idle:");
    line(
        "g2 memory reindex (process, every core)",
        reindex(home.path(), rows),
    );
    let quiet = passes(&store, &model, Pace::Quiet);
    line("host passes, one nice thread (= before)", quiet);
    let idle = passes(&store, &model, Pace::Idle);
    line("host passes, every core, nice", idle);

    println!("processes ({runs} runs each, interleaved):");
    report("no host", &processes(home.path(), runs));
    let serve = Serve::start(home.path(), &[]);
    report("g2 serve running", &processes(home.path(), runs));

    let docker = command("docker")
        .args(["image", "inspect", "g2-agent"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !docker {
        println!("under a turn load: skipped (no agent image: g2 image build)");
        return;
    }
    println!("reindex under a turn load (messages to main, one after another):");
    let stop = Arc::new(AtomicBool::new(false));
    let turns = {
        let (stop, base) = (stop.clone(), serve.url.clone());
        std::thread::spawn(move || {
            let rt = common::runtime();
            rt.block_on(async move {
                let client = reqwest::Client::new();
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    let before = common::bot_replies(&client, &base, "main").await;
                    common::post_main(&client, &base, &format!("note {n}: the boat")).await;
                    let asked = Instant::now();
                    while common::bot_replies(&client, &base, "main").await == before
                        && asked.elapsed() < Duration::from_secs(120)
                    {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    n += 1;
                }
                n
            })
        })
    };
    // The first turn starts the container.
    std::thread::sleep(Duration::from_secs(20));
    let t = Instant::now();
    line(
        "g2 memory reindex (process) + host jobs",
        reindex(home.path(), rows),
    );
    let took = t.elapsed();
    let quiet = passes(&store, &model, Pace::Quiet);
    line("host passes, one nice thread (= before)", quiet);
    stop.store(true, Ordering::Relaxed);
    let n = turns.join().unwrap();
    println!(
        "  ({n} turns answered meanwhile; the reindex took {})",
        fmt_dur(took)
    );
    drop(serve);
}
