//! What counting groups' files costs the host (disk quotas,
//! `container::disk`):
//! - **per 100,000 entries**: CPU time of one walk of a tree of 100 folders
//!   of 1,000 empty files (and of 1 KB files), unpaced, p50 of 5 walks;
//!   and the wall time of the same walk within the default CPU share;
//! - **a group making 500,000 files** through its real agent (real `g2
//!   serve`, Docker, Claude Code, the offline model), its quotas raised so
//!   that it is not stopped: the `g2 serve` process's CPU while the files
//!   are made (mean and the busiest second, from `/proc/PID/stat`), and the
//!   latency of `GET /api/groups/family/status` asked every 50 ms meanwhile
//!   (p50/p99/max);
//! - **files deleted while held open** (`disk::held`): CPU of one pass over
//!   `/proc` (every process of the host, none of them a container's) and
//!   of looking into a Node process (its threads' open files and its memory
//!   maps, as Claude Code's would be), p50 of 20 each, and what they cost a
//!   running group counted every second.
//!
//! Needs the agent image (`g2 image build`, done here when missing).
//! `cargo bench -p g2-host --bench disk` (`G2_BENCH_FILES` changes the
//! 500,000; `-- held` runs only the parts whose name holds `held`).

#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{Samples, Serve, env_or, fmt_dur, init_home};
use g2_core::confined::{Dir, Tally, Walk};
use g2_host::container::disk::thread_cpu;

/// A tree of `folders` × `per` files of `size` bytes.
fn tree(root: &Path, folders: usize, per: usize, size: usize) {
    let body = vec![b'x'; size];
    for d in 0..folders {
        let dir = root.join(format!("d{d}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..per {
            std::fs::write(dir.join(format!("f{f}")), &body).unwrap();
        }
    }
}

fn walk(root: &Path) -> (Tally, Duration) {
    let mut pace = |_: &Tally| Ok(());
    let before = thread_cpu();
    let t = Dir::open(root)
        .unwrap()
        .tally(&mut Walk {
            give: None,
            pace: &mut pace,
        })
        .unwrap();
    (t, thread_cpu() - before)
}

fn per_100k(size: usize) {
    let d = tempfile::tempdir().unwrap();
    tree(d.path(), 100, 1_000, size);
    walk(d.path()); // warm the caches
    let mut cpu = Vec::new();
    let mut entries = 0;
    for _ in 0..5 {
        let (t, c) = walk(d.path());
        entries = t.entries;
        cpu.push(c);
    }
    let s = Samples::of(cpu);
    println!(
        "walk of {entries} entries ({size}-byte files): {} CPU (p50 of {})",
        fmt_dur(s.at(0.5)),
        s.n()
    );
    // The same walk through the ledger, within the default share.
    let home = tempfile::tempdir().unwrap();
    init_home(home.path());
    let group = home.path().join("groups/main/many");
    std::fs::rename(d.path().join("d0"), &group).unwrap();
    for i in 1..100 {
        std::fs::rename(d.path().join(format!("d{i}")), group.join(format!("d{i}"))).unwrap();
    }
    let settings = g2_host::config::ContainerSettings::default();
    let ledger = g2_host::container::disk::Ledger::new(
        g2_host::home::Home::new(home.path()).unwrap(),
        Duration::from_secs(1),
        settings.disk_cpu_percent,
        None,
    );
    let rt = common::runtime();
    let main = g2_core::validate::GroupFolder::new("main").unwrap();
    let c = rt.block_on(ledger.fresh(&main)).unwrap();
    println!(
        "  within the default share ({} % of a core): {} wall, {} CPU, {} entries",
        settings.disk_cpu_percent,
        fmt_dur(c.took),
        fmt_dur(c.cpu),
        c.outcome.unwrap().entries
    );
}

/// User + system CPU of a process so far (clock ticks → time).
fn process_cpu(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = after.split(' ').collect();
    // Fields 14 and 15 (utime, stime), counted from 1 with the pid and name.
    let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
    // SAFETY: sysconf only reads a system constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1);
    Duration::from_secs_f64(ticks as f64 / hz as f64)
}

fn making_files(files: usize) {
    let home = tempfile::tempdir().unwrap();
    init_home(home.path());
    let g2 = |args: &[&str]| common::g2_ok(home.path(), args);
    eprintln!("building the agent image (if needed)…");
    g2(&["image", "build"]);
    g2(&common::shared::ADD_FAMILY);
    let serve = Serve::start(
        home.path(),
        &[
            ("G2_CONTAINER__MAX_GROUP_FILES", "10000000"),
            ("G2_CONTAINER__DISK_MB", "100000"),
        ],
    );
    let pid = serve.child.id();
    let rt = common::runtime();
    let http = reqwest::Client::new();
    let folders = files.div_ceil(1_000);
    let script = format!(
        "g2:bash mkdir -p /workspace/group/many && cd /workspace/group/many && \
         for d in $(seq 1 {folders}); do mkdir $d && (cd $d && seq 1 1000 | xargs touch); done; \
         echo made-all"
    );
    let (status, cpu, took) = rt.block_on(async {
        common::post_to(&http, &serve.url, "family", &script).await;
        let started = Instant::now();
        let cpu_start = process_cpu(pid);
        let mut status = Vec::new();
        let mut busiest = Duration::ZERO;
        let (mut last_cpu, mut last_at) = (cpu_start, Instant::now());
        let url = format!("{}/api/groups/family/status", serve.url);
        loop {
            let t = Instant::now();
            let r = http.get(&url).send().await.unwrap();
            assert!(r.status().is_success());
            r.bytes().await.unwrap();
            status.push(t.elapsed());
            if last_at.elapsed() >= Duration::from_secs(1) {
                let now = process_cpu(pid);
                let share = (now - last_cpu).as_secs_f64() / last_at.elapsed().as_secs_f64();
                busiest = busiest.max(Duration::from_secs_f64(share));
                (last_cpu, last_at) = (now, Instant::now());
            }
            let replied = common::bot_replies(&http, &serve.url, "family").await;
            if replied > 0 {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(600),
                "the files were not made in 10 minutes"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let took = started.elapsed();
        let cpu = (process_cpu(pid) - cpu_start).as_secs_f64() / took.as_secs_f64();
        (Samples::of(status), (cpu, busiest.as_secs_f64()), took)
    });
    // Until a count has seen them all (the container has stopped: this is
    // the count after its run).
    let caught_up = Instant::now();
    let end: serde_json::Value = rt.block_on(async {
        loop {
            let url = format!("{}/api/groups/family/status", serve.url);
            let st = common::shared::json_of(http.get(url)).await;
            if st["disk"]["entries"].as_u64().unwrap_or(0) >= files as u64 {
                return st;
            }
            assert!(caught_up.elapsed() < Duration::from_secs(120), "{st}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    println!(
        "a group making {files} files ({} s): g2 serve used {:.1} % of a core (busiest second {:.1} %); \
         status p50 {} p99 {} max {} over {} requests; a count saw all {} entries {} s later",
        took.as_secs(),
        cpu.0 * 100.0,
        cpu.1 * 100.0,
        fmt_dur(status.at(0.5)),
        fmt_dur(status.at(0.99)),
        fmt_dur(status.at(1.0)),
        status.n(),
        end["disk"]["entries"],
        caught_up.elapsed().as_secs_f64().round()
    );
}

/// CPU of `f`, p50 of 20 runs.
fn cpu_p50(mut f: impl FnMut()) -> Duration {
    f(); // warm the caches
    let mut cpu = Vec::new();
    for _ in 0..20 {
        let before = thread_cpu();
        f();
        cpu.push(thread_cpu() - before);
    }
    Samples::of(cpu).at(0.5)
}

fn held() {
    use g2_host::container::disk::held::Scan;
    let mut node = std::process::Command::new("node")
        .args(["-e", "setInterval(() => {}, 1000)"])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(1));
    let pid = node.id();
    let d = tempfile::tempdir().unwrap();
    let devices = std::collections::HashSet::from([std::os::unix::fs::MetadataExt::dev(
        &std::fs::metadata(d.path()).unwrap(),
    )]);
    let count = |p: String| std::fs::read_dir(p).unwrap().count();
    let processes = common::shared::count_entries("/proc", |n| n.parse::<u32>().is_ok());
    let mut free = || Ok(());
    let sweep = cpu_p50(|| {
        Scan::new(devices.clone(), true, &mut free)
            .namespaces(&[1])
            .unwrap();
    });
    let look = cpu_p50(|| {
        Scan::new(devices.clone(), true, &mut free)
            .process(pid)
            .unwrap();
    });
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .unwrap()
        .lines()
        .count();
    println!(
        "held: a pass over /proc ({processes} processes): {} CPU; looking into node \
         ({} threads, {} open files, {maps} maps): {} CPU (p50 of 20)",
        fmt_dur(sweep),
        count(format!("/proc/{pid}/task")),
        count(format!("/proc/{pid}/fd")),
        fmt_dur(look)
    );
    println!(
        "  a running group counted every second: {:.2} % of a core",
        (sweep + look).as_secs_f64() * 100.0
    );
    node.kill().unwrap();
    node.wait().unwrap();
}

fn main() {
    // `cargo bench -p g2-host --bench disk -- held` runs that part only.
    let only = std::env::args().skip(1).find(|a| !a.starts_with("--"));
    let run = |name: &str| only.as_deref().is_none_or(|o| name.contains(o));
    if run("per_100k") {
        per_100k(0);
        per_100k(1024);
    }
    if run("held") {
        held();
    }
    if run("making_files") {
        making_files(env_or("G2_BENCH_FILES", 500_000));
    }
}
