//! Several hosts on one PostgreSQL (docs/cluster.md), real `g2 serve`
//! processes, Docker, Claude Code and the offline model on one machine
//! (the hosts share its cores):
//!
//! - `throughput`: messages answered per second by 1, 2 and 3 hosts: 15
//!   groups spread over them, each round one message to every group (each
//!   posted to the next host in turn), timed until all are answered. The
//!   first round starts the containers; the later ones find them warm
//!   where a host has slots for them (`queue.max_containers`, 5 a host).
//! - `takeover`: kill -9 the host running five turns, 10 times (3 hosts,
//!   15 groups, the default 10-s lease): when another host holds each
//!   group, and when each turn, run again there, is answered.
//!
//! `cargo bench -p g2-host --bench cluster` (`G2_BENCH_ONLY=throughput` or
//! `takeover` runs one; `G2_BENCH_ROUNDS`, `G2_BENCH_KILLS`, `G2_BENCH_TURNS`).

// Tests and benches fail loudly: an unwrap is the assertion.
#![allow(clippy::unwrap_used)]

mod common;

use common::g2_ok as g2;

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use common::shared::owners;
use common::{Samples, Serve, fmt_dur};

const GROUPS: usize = 15;

fn main() {
    let only = std::env::var("G2_BENCH_ONLY").unwrap_or_default();
    let rt = common::runtime();
    if only.is_empty() || only == "throughput" {
        rt.block_on(throughput());
    }
    if only.is_empty() || only == "takeover" {
        rt.block_on(takeover());
    }
}

/// A home on a fresh PostgreSQL database with `n` groups that every
/// message wakes.
fn home(n: usize, prefix: &str) -> tempfile::TempDir {
    let cluster = common::pg_cluster::Cluster::shared()
        .expect("the cluster bench needs PostgreSQL (scripts/setup.sh)");
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("g2.toml"),
        format!("[store]\nurl = \"{}\"\n", cluster.database()),
    )
    .unwrap();
    g2(home.path(), &["init"]);
    for i in 1..=n {
        let g = format!("{prefix}{i:02}");
        g2(
            home.path(),
            &["groups", "add", &g, "--name", &g, "--no-trigger"],
        );
    }
    home
}

/// Host `id` of `home`, with its own runtime folder.
fn host(home: &Path, id: &str, lease_secs: &str) -> Serve {
    let runtime = format!("data/hosts/{id}");
    Serve::start(
        home,
        &[
            ("G2_CLUSTER__HOST_ID", id),
            ("G2_CLUSTER__LEASE_SECS", lease_secs),
            ("G2_CLUSTER__RUNTIME_DIR", &runtime),
        ],
    )
}

/// Waits until every group has an owner and the hosts hold within one of
/// an even share.
async fn spread(client: &reqwest::Client, base: &str, hosts: usize) -> HashMap<String, String> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let o = owners(client, base).await;
        let mut n: HashMap<&str, usize> = HashMap::new();
        for h in o.values().flatten() {
            *n.entry(h.as_str()).or_default() += 1;
        }
        let even = o.len().div_ceil(hosts);
        if o.values().all(Option::is_some)
            && n.len() == hosts
            && n.values().all(|c| c.abs_diff(even) <= 1)
        {
            return o.into_iter().map(|(g, h)| (g, h.unwrap())).collect();
        }
        assert!(Instant::now() < deadline, "not spread: {n:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn throughput() {
    let rounds: usize = common::env_or("G2_BENCH_ROUNDS", 4);
    let client = reqwest::Client::new();
    println!("cluster throughput: {GROUPS} groups, one message to each per round, {rounds} rounds");
    for n in 1..=3 {
        let home = home(GROUPS, "t");
        let hosts: Vec<Serve> = (0..n)
            .map(|i| host(home.path(), &format!("host-{i}"), "10"))
            .collect();
        spread(&client, &hosts[0].url, n).await;
        let groups: Vec<String> = (1..=GROUPS).map(|i| format!("t{i:02}")).collect();
        let mut times = Vec::new();
        for round in 1..=rounds {
            let started = Instant::now();
            for (i, g) in groups.iter().enumerate() {
                let base = &hosts[i % n].url;
                common::post_to(&client, base, g, &format!("round {round}")).await;
            }
            for g in &groups {
                let deadline = Instant::now() + Duration::from_secs(300);
                while common::bot_replies(&client, &hosts[0].url, g).await < round {
                    assert!(Instant::now() < deadline, "{g} unanswered in round {round}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
            times.push(started.elapsed());
        }
        let rate = |d: &Duration| GROUPS as f64 / d.as_secs_f64();
        let warm: Vec<f64> = times[1..].iter().map(rate).collect();
        let mean = warm.iter().sum::<f64>() / warm.len().max(1) as f64;
        println!(
            "  {n} host(s): first round {:.1} msg/s ({}), later rounds {mean:.1} msg/s ({})",
            rate(&times[0]),
            fmt_dur(times[0]),
            times[1..]
                .iter()
                .map(|d| fmt_dur(*d))
                .collect::<Vec<_>>()
                .join(", ")
        );
        drop(hosts);
    }
}

async fn takeover() {
    let kills: usize = common::env_or("G2_BENCH_KILLS", 10);
    let turns: usize = common::env_or("G2_BENCH_TURNS", 5);
    let client = reqwest::Client::new();
    let home = home(3 * turns, "k");
    let ids = ["host-a", "host-b", "host-c"];
    let mut hosts: Vec<Serve> = ids.iter().map(|id| host(home.path(), id, "10")).collect();
    // Per group (every turn of every kill), and per kill (its last group).
    let (mut moved, mut answered) = (Vec::new(), Vec::new());
    let (mut all_moved, mut all_answered) = (Vec::new(), Vec::new());
    for k in 0..kills {
        let via = &hosts[(k + 1) % 3].url;
        let owner = spread(&client, via, 3).await;
        let victim = k % 3;
        let mut mine: Vec<String> = owner
            .iter()
            .filter(|(_, h)| *h == ids[victim])
            .map(|(g, _)| g.clone())
            .collect();
        mine.sort();
        mine.truncate(turns);
        let mark = format!("mark-{k}");
        let cmd =
            format!("g2:bash if [ -e {mark} ]; then echo again; else touch {mark}; sleep 60; fi");
        let mut before = HashMap::new();
        for g in &mine {
            before.insert(g.clone(), common::bot_replies(&client, via, g).await);
            common::post_to(&client, via, g, &cmd).await;
        }
        let deadline = Instant::now() + Duration::from_secs(120);
        while !mine
            .iter()
            .all(|g| home.path().join(format!("groups/{g}/{mark}")).exists())
        {
            assert!(Instant::now() < deadline, "the turns did not start");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        hosts[victim].child.kill().unwrap();
        hosts[victim].child.wait().unwrap();
        let killed = Instant::now();
        let survivor = &hosts[(victim + 1) % 3].url;
        let (mut took, mut done) = (HashMap::new(), HashMap::new());
        while done.len() < mine.len() {
            let now = owners(&client, survivor).await;
            for g in &mine {
                if now[g].as_deref().is_some_and(|h| h != ids[victim]) {
                    took.entry(g.clone()).or_insert_with(|| killed.elapsed());
                }
                if !done.contains_key(g)
                    && common::bot_replies(&client, survivor, g).await > before[g]
                {
                    done.insert(g.clone(), killed.elapsed());
                }
            }
            assert!(
                killed.elapsed() < Duration::from_secs(120),
                "never answered"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let last = |m: &HashMap<String, Duration>| m.values().max().copied().unwrap_or_default();
        println!(
            "  kill {}: {} turns taken over by {}, all answered by {}",
            k + 1,
            mine.len(),
            fmt_dur(last(&took)),
            fmt_dur(last(&done))
        );
        all_moved.push(last(&took));
        all_answered.push(last(&done));
        moved.extend(took.into_values());
        answered.extend(done.into_values());
        hosts[victim] = host(home.path(), ids[victim], "10");
    }
    println!(
        "takeover after kill -9, {kills} kills, 3 hosts, 10-s lease, {turns} turns mid-way each time:"
    );
    for (what, samples) in [
        ("a group held by another host", moved),
        ("its turn answered there", answered),
        ("all of a kill's groups held", all_moved),
        ("all of a kill's turns answered", all_answered),
    ] {
        let s = Samples::of(samples);
        println!(
            "  {what:<32} p50 {} max {}",
            fmt_dur(s.at(0.5)),
            fmt_dur(s.at(1.0))
        );
    }
}
