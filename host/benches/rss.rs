//! Host memory after large model requests: the resident set (VmRSS) of the
//! real `g2 serve` process idle, right after 100 gateway requests of 32 MiB
//! (the default `gateway.max_request_bytes`) through the main group's socket,
//! four at a time, and 60 s later. Freed request buffers should go back to
//! the system, so the last figure should be near the first.
//!
//! `cargo bench -p g2-host --bench rss` (`G2_BENCH_REQUESTS`, default 100;
//! `G2_BENCH_SETTLE_SECS`, default 60).

// Tests and benches fail loudly: an unwrap is the assertion.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::{Serve, init_home};
use futures_util::StreamExt;

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// A valid Messages request of exactly `size` bytes.
fn request_of(size: usize) -> bytes::Bytes {
    let head = r#"{"model":"m","max_tokens":16,"messages":[{"role":"user","content":""#;
    let tail = r#""}]}"#;
    let mut body = Vec::with_capacity(size);
    body.extend_from_slice(head.as_bytes());
    body.resize(size - tail.len(), b'x');
    body.extend_from_slice(tail.as_bytes());
    bytes::Bytes::from(body)
}

fn main() {
    let n: usize = common::env_or("G2_BENCH_REQUESTS", 100);
    let settle: u64 = common::env_or("G2_BENCH_SETTLE_SECS", 60);
    let home = tempfile::tempdir().unwrap();
    init_home(home.path());
    let serve = Serve::start(home.path(), &[("G2_PROVIDER", "offline")]);
    let pid = serve.child.id();
    std::thread::sleep(Duration::from_secs(5));
    let idle = rss_kib(pid);

    let socket = home.path().join("data/ipc/main/model.sock");
    let body = request_of(32 * 1024 * 1024);
    let rt = common::runtime();
    let started = Instant::now();
    let (ok, peak) = rt.block_on(async {
        let client = reqwest::Client::builder()
            .unix_socket(socket)
            .build()
            .unwrap();
        let peak = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let ok = futures_util::stream::iter(0..n)
            .map(|_| {
                let (client, body, peak) = (client.clone(), body.clone(), peak.clone());
                async move {
                    let r = client
                        .post("http://g2/v1/messages")
                        .body(body)
                        .send()
                        .await
                        .unwrap();
                    let status = r.status();
                    let _ = r.bytes().await;
                    peak.fetch_max(rss_kib(pid), std::sync::atomic::Ordering::Relaxed);
                    status.is_success()
                }
            })
            .buffer_unordered(4)
            .filter(|ok| std::future::ready(*ok))
            .count()
            .await;
        (ok, peak.load(std::sync::atomic::Ordering::Relaxed))
    });
    let took = started.elapsed();
    let after = rss_kib(pid);
    std::thread::sleep(Duration::from_secs(settle));
    let later = rss_kib(pid);
    drop(serve);

    println!("g2 serve resident memory (VmRSS), {n} gateway requests of 32 MiB, 4 at a time");
    println!(
        "  requests answered 2xx  {ok} of {n} in {:.1} s",
        took.as_secs_f64()
    );
    println!("  idle                   {}", mib(idle));
    println!("  highest seen           {}", mib(peak));
    println!("  right after            {}", mib(after));
    println!(
        "  {settle} s later            {} ({:+.1} MiB against idle)",
        mib(later),
        (later as f64 - idle as f64) / 1024.0
    );
}
