//! Stream delivery: 1,000 SSE listeners on one chat of a real `g2 serve`
//! while 100 clients post N messages concurrently. Reports, over every
//! listener, messages lost, duplicated and out of `seq` order (goal: 0),
//! how often a listener was closed for falling behind (it then resumes with
//! `Last-Event-ID`, as a browser does), and the delivery latency from the
//! post being sent to the listener reading it.
//!
//! `cargo bench -p g2-host --bench stream` (`G2_BENCH_MESSAGES` sets N,
//! default 5,000; `G2_BENCH_LISTENERS` the listeners, default 1,000). The
//! host is started with `api.max_connections` raised to fit them: at its
//! default (256) the listeners past the bound wait to be accepted.

// Tests and benches fail loudly: an unwrap is the assertion.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::{Samples, Serve, fmt_dur};
use futures_util::StreamExt;

const CLIENTS: usize = 100;

/// What one listener saw.
#[derive(Default)]
struct Seen {
    seqs: Vec<i64>,
    /// Microseconds from send to receipt, per message.
    latency_us: Vec<u64>,
    closed: usize,
}

async fn open(client: &reqwest::Client, url: &str, last: Option<i64>) -> reqwest::Response {
    let mut req = client.get(url);
    if let Some(l) = last {
        req = req.header("last-event-id", l.to_string());
    }
    let r = req.send().await.expect("opening the stream");
    assert_eq!(r.status(), 200);
    r
}

fn main() {
    let total = common::env_or("G2_BENCH_MESSAGES", 5_000);
    let listeners = common::env_or("G2_BENCH_LISTENERS", 1_000);
    let home = common::home_with_bench_group();
    // Every listener holds a connection: the API's bound (256 by
    // default) must leave room for them and the posting clients.
    let room = (listeners + CLIENTS + 64).to_string();
    let serve = Serve::start(home.path(), &[("G2_API__MAX_CONNECTIONS", room.as_str())]);
    let post_url = format!("{}/api/groups/bench/messages", serve.url);
    let stream_url = format!("{}/api/groups/bench/stream", serve.url);
    let rt = common::runtime();
    let (seen, posted, elapsed) = rt.block_on(async move {
        let start = Instant::now();
        let client = reqwest::Client::builder()
            .tcp_nodelay(true)
            .pool_max_idle_per_host(listeners + CLIENTS)
            .build()
            .unwrap();
        // Every listener is subscribed (its headers came) before posting starts.
        let mut tasks = Vec::new();
        for _ in 0..listeners {
            let (client, url) = (client.clone(), stream_url.clone());
            let first = open(&client, &url, None).await;
            tasks.push(tokio::spawn(async move {
                let mut seen = Seen::default();
                let mut resp = first;
                loop {
                    let mut messages = std::pin::pin!(g2_host::chat::message_stream(resp));
                    while let Some(m) = messages.next().await {
                        let now = start.elapsed().as_micros() as u64;
                        let sent: u64 = m
                            .text
                            .split_once(' ')
                            .and_then(|(t, _)| t.parse().ok())
                            .unwrap_or(now);
                        seen.seqs.push(m.seq);
                        seen.latency_us.push(now.saturating_sub(sent));
                        if seen.seqs.len() >= total {
                            return seen;
                        }
                    }
                    // Closed for falling behind: resume where it stopped.
                    seen.closed += 1;
                    resp = open(&client, &url, seen.seqs.last().copied()).await;
                }
            }));
        }
        let posting = Instant::now();
        let mut posters = Vec::new();
        for c in 0..CLIENTS {
            let (client, url) = (client.clone(), post_url.clone());
            posters.push(tokio::spawn(async move {
                let mut seqs = Vec::new();
                let mut i = c;
                while i < total {
                    let body = format!(
                        "{{\"sender\":\"u{c}\",\"text\":\"{} message {i}\"}}",
                        start.elapsed().as_micros()
                    );
                    let r = client
                        .post(&url)
                        .header("content-type", "application/json")
                        .body(body)
                        .send()
                        .await
                        .unwrap();
                    assert_eq!(r.status(), 202);
                    let v: serde_json::Value = r.json().await.unwrap();
                    seqs.push(v["seq"].as_i64().unwrap());
                    i += CLIENTS;
                }
                seqs
            }));
        }
        let mut posted = Vec::new();
        for p in posters {
            posted.extend(p.await.unwrap());
        }
        posted.sort_unstable();
        // Listeners that stall for good would hang the bench: bounded wait.
        let mut seen = Vec::new();
        for t in tasks {
            match tokio::time::timeout(Duration::from_secs(300), t).await {
                Ok(s) => seen.push(s.unwrap()),
                Err(_) => seen.push(Seen::default()),
            }
        }
        (seen, posted, posting.elapsed())
    });
    drop(serve);

    let (mut lost, mut duplicated, mut out_of_order, mut closed) = (0usize, 0usize, 0usize, 0usize);
    let mut latencies = Vec::with_capacity(listeners * total);
    for s in &seen {
        out_of_order += s.seqs.windows(2).filter(|w| w[1] <= w[0]).count();
        let mut unique = s.seqs.clone();
        unique.sort_unstable();
        unique.dedup();
        duplicated += s.seqs.len() - unique.len();
        lost += posted
            .iter()
            .filter(|q| unique.binary_search(q).is_err())
            .count();
        closed += s.closed;
        latencies.extend(s.latency_us.iter().map(|&us| Duration::from_micros(us)));
    }
    let l = Samples::of(latencies);
    println!(
        "stream: {total} messages from {CLIENTS} concurrent clients, {listeners} SSE listeners"
    );
    println!(
        "  posted and delivered to every listener in {} ({:.0} messages/s in, {:.0} events/s out)",
        fmt_dur(elapsed),
        total as f64 / elapsed.as_secs_f64(),
        (total * listeners) as f64 / elapsed.as_secs_f64()
    );
    println!(
        "  lost {lost}, duplicated {duplicated}, out of order {out_of_order} (over all listeners)"
    );
    println!("  listeners closed for falling behind (resumed with Last-Event-ID): {closed}");
    println!(
        "  delivery latency p50 {} p99 {} max {}",
        fmt_dur(l.at(0.5)),
        fmt_dur(l.at(0.99)),
        fmt_dur(l.at(1.0))
    );
}
