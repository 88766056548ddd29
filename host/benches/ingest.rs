//! Ingest: messages per second that `POST /api/groups/{folder}/messages`
//! accepts into SQLite with 100 concurrent clients (each on a kept-alive
//! connection), against a real `g2 serve` process; every message is also
//! checked by the router (the group needs a trigger, so none starts an agent).
//!
//! `cargo bench -p g2-host --bench ingest` (`G2_BENCH_MESSAGES` sets the
//! total, default 20,000).

// Tests and benches fail loudly: an unwrap is the assertion.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Instant;

use common::{Samples, Serve, fmt_dur};

const CLIENTS: usize = 100;

fn main() {
    let total: usize = common::env_or("G2_BENCH_MESSAGES", 20_000);
    let home = common::home_with_bench_group();
    let serve = Serve::start(home.path(), &[]);
    let url = format!("{}/api/groups/bench/messages", serve.url);
    let rt = common::runtime();
    let (elapsed, latencies) = rt.block_on(async move {
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(CLIENTS)
            .tcp_nodelay(true)
            .build()
            .unwrap();
        // Warm the connections.
        let body = |i: usize| {
            format!(
                "{{\"sender\":\"u{}\",\"text\":\"message number {i} with a little text\"}}",
                i % CLIENTS
            )
        };
        let started = Instant::now();
        let mut tasks = Vec::new();
        for c in 0..CLIENTS {
            let (client, url) = (client.clone(), url.clone());
            tasks.push(tokio::spawn(async move {
                let mut lat = Vec::new();
                let mut i = c;
                while i < total {
                    let t = Instant::now();
                    let r = client
                        .post(&url)
                        .header("content-type", "application/json")
                        .body(body(i))
                        .send()
                        .await
                        .unwrap();
                    assert_eq!(r.status(), 202);
                    let _ = r.bytes().await;
                    lat.push(t.elapsed());
                    i += CLIENTS;
                }
                lat
            }));
        }
        let mut all = Vec::new();
        for t in tasks {
            all.extend(t.await.unwrap());
        }
        (started.elapsed(), all)
    });
    drop(serve);
    // Every message is in the database, once.
    let (store, backend) = common::home_store(home.path());
    let stored: i64 = store
        .read_blocking(|c| c.query_row("SELECT count(*) FROM messages", (), |r| r.get(0)))
        .unwrap();
    assert_eq!(stored as usize, total, "messages lost");
    let s = Samples::of(latencies);
    println!("ingest: {total} messages from {CLIENTS} concurrent clients into {backend}");
    println!(
        "  {:.0} messages/s ({} in all)",
        total as f64 / elapsed.as_secs_f64(),
        fmt_dur(elapsed)
    );
    println!(
        "  request latency p50 {} p99 {}",
        fmt_dur(s.at(0.5)),
        fmt_dur(s.at(0.99))
    );
}
