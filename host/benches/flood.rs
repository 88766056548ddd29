//! One group's flood against another group's latency, through a release
//! `g2 serve` (offline model, the product's 50 ms hook deadline) with two
//! groups: alpha (30 archived exchanges) and beta (one remembered fact).
//!
//! Beta is measured twice, alone and while alpha floods: 8 concurrent
//! loops, each a 10,000-word per-prompt memory request on alpha's socket
//! then a 10,000-word memory search over HTTP, and 8 of alpha's agent's
//! 10,000-word `search_sessions` requests. Beta's figures: its hook's round
//! trip on its socket (p50/p99, and how many came back within the deadline
//! with the fact), its memory search over HTTP, and its agent's
//! `list_tasks` request (request file written to answer read). Each
//! measurement stops at `G2_BENCH_BUDGET` seconds (default 60) and says
//! how many samples it got.
//!
//! `cargo bench -p g2-host --bench flood`; `G2_BIN=…/g2` measures another
//! build of g2 (an earlier commit, for a before figure).

// Tests and benches fail loudly: an unwrap is the assertion.
#![allow(clippy::unwrap_used)]

mod common;
#[path = "../../tests/integration/flood_load.rs"]
mod flood_load;

use common::g2_ok as g2;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use g2_core::wire::{Action, TaskRequest, TaskResponse};
use serde_json::json;

use common::{Samples, Serve, env_or, fmt_dur, g2_binary, runtime};
use flood_load::{Flood, flood, hook, long_query};

/// The hook's deadline: `memory.inject_wait_ms`'s default.
const DEADLINE: Duration = Duration::from_millis(50);

fn archive(home: &Path, group: &str, name: &str, user: &str) {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("t.jsonl");
    let id = "44444444-4444-4444-8444-444444444444";
    let lines = [
        json!({"type": "user", "uuid": "u0", "sessionId": id,
               "message": {"role": "user", "content": user}}),
        json!({"type": "assistant", "uuid": "a0", "sessionId": id,
               "message": {"role": "assistant", "content": [{"type": "text", "text": "noted"}]}}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&t, text).unwrap();
    g2(home, &common::shared::archive_args(&t, group, name));
}

fn socket_client(path: &Path) -> reqwest::Client {
    reqwest::Client::builder()
        .unix_socket(path)
        .timeout(Duration::from_secs(600))
        .build()
        .unwrap()
}

/// Writes an agent request into the group's IPC folder, as its MCP tool
/// does; returns where its answer will be.
fn put(home: &Path, folder: &str, id: &str, action: Action) -> PathBuf {
    let req = TaskRequest {
        request_id: id.to_string(),
        action,
    };
    g2_core::ipc::write_request(&home.join(format!("data/ipc/{folder}")), &req).unwrap()
}

/// The answer at `path`, polled every millisecond until `until`.
async fn answer(path: &Path, until: Instant) -> Option<TaskResponse> {
    while Instant::now() < until {
        if let Ok(bytes) = std::fs::read(path)
            && let Ok(r) = serde_json::from_slice::<TaskResponse>(&bytes)
        {
            return Some(r);
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    None
}

/// One line of the report: p50/p99 of `s` and a note.
fn row(what: &str, s: Vec<Duration>, note: String) {
    if s.is_empty() {
        println!("    {what:<22} no answer{note}");
        return;
    }
    let s = Samples::of(s);
    println!(
        "    {what:<22} n {:>3}  p50 {:>10}  p99 {:>10}{note}",
        s.n(),
        fmt_dur(s.at(0.5)),
        fmt_dur(s.at(0.99)),
    );
}

/// Beta's three figures, each within `budget`.
async fn measure(home: &Path, url: &str, beta: &Path, budget: Duration, tag: &str) {
    let socket = socket_client(beta);
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(600))
        .build()
        .unwrap();

    let until = Instant::now() + budget;
    let (mut hooks, mut in_time) = (Vec::new(), 0);
    while hooks.len() < 200 && Instant::now() < until {
        // A new prompt each time, as in a chat: each is embedded anew.
        let prompt = format!("where is the boat moored, {tag} question {}?", hooks.len());
        let (took, block) = hook(&socket, &prompt).await;
        in_time += usize::from(took <= DEADLINE && block.contains("pier 7"));
        hooks.push(took);
    }
    let n = hooks.len();
    row(
        "hook round trip",
        hooks,
        format!("  ({in_time} of {n} within 50 ms with the fact)"),
    );

    let until = Instant::now() + budget;
    let (mut searches, mut refused) = (Vec::new(), 0);
    while searches.len() + refused < 50 && Instant::now() < until {
        let search = reqwest::Url::parse_with_params(
            &format!("{url}/api/groups/beta/memory/search"),
            &[(
                "q",
                format!(
                    "where is the boat moored, {tag} search {}?",
                    searches.len() + refused
                ),
            )],
        )
        .unwrap();
        let t = Instant::now();
        let r = http.get(search).send().await.unwrap();
        let status = r.status();
        r.bytes().await.unwrap();
        match status.as_u16() {
            200 => searches.push(t.elapsed()),
            429 => refused += 1,
            other => panic!("beta's search: {other}"),
        }
    }
    row(
        "memory search (HTTP)",
        searches,
        format!("  ({refused} refused as busy)"),
    );

    let until = Instant::now() + budget;
    let (mut tasks, mut unanswered) = (Vec::new(), 0);
    while tasks.len() < 20 && Instant::now() < until {
        let t = Instant::now();
        let id = format!("{tag}-tasks-{}", tasks.len());
        match answer(&put(home, "beta", &id, Action::ListTasks {}), until).await {
            Some(r) => {
                assert!(r.ok, "{r:?}");
                tasks.push(t.elapsed());
            }
            None => unanswered += 1,
        }
    }
    row(
        "list_tasks request",
        tasks,
        format!("  ({unanswered} unanswered within {budget:?})"),
    );
}

fn main() {
    let budget = Duration::from_secs(env_or("G2_BENCH_BUDGET", 60));
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    common::init_home(home);
    g2(home, &["groups", "add", "alpha", "--name", "Alpha"]);
    g2(home, &["groups", "add", "beta", "--name", "Beta"]);
    let filler = "we talked about many other things that day. ".repeat(40);
    for i in 0..30 {
        archive(
            home,
            "alpha",
            &format!("Trip {i}"),
            &format!("the wombat slept by pier {i}. {filler}"),
        );
    }
    g2(
        home,
        &["memory", "remember", "beta", "the boat is moored at pier 7"],
    );
    let serve = Serve::start(home, &[("G2_PROVIDER", "offline")]);
    println!(
        "flood: beta's latency, alone and while alpha floods ({}, budget {budget:?} a measurement)",
        g2_binary().display()
    );
    let rt = runtime();
    rt.block_on(async {
        let sock = |g: &str| home.join(format!("data/ipc/{g}/model.sock"));
        let (alpha, beta) = (sock("alpha"), sock("beta"));
        // Ready: both sockets answer, beta's fact is recalled.
        let ready = Instant::now() + Duration::from_secs(120);
        loop {
            if alpha.exists() && beta.exists() {
                let (_, block) = hook(&socket_client(&beta), "where is the boat moored?").await;
                if block.contains("pier 7") {
                    break;
                }
            }
            assert!(Instant::now() < ready, "beta's memory never answered");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // Start-up indexing settles.
        tokio::time::sleep(Duration::from_secs(3)).await;

        println!("  beta alone");
        measure(home, &serve.url, &beta, budget, "quiet").await;

        let long = Arc::new(long_query());
        let Flood {
            stop,
            rounds,
            loops,
        } = flood(home, &serve.url, &long, || socket_client(&alpha));
        // The flood under way: its requests reached the host.
        tokio::time::sleep(Duration::from_secs(1)).await;
        println!("  while alpha floods");
        measure(home, &serve.url, &beta, budget, "flood").await;
        stop.store(true, Ordering::Relaxed);
        println!(
            "  (alpha's flood loops completed {} rounds meanwhile)",
            rounds.load(Ordering::Relaxed)
        );
        for f in loops {
            f.abort();
        }
    });
    rt.shutdown_background();
    drop(serve);
}
