//! Host memory idle: the resident set (VmRSS) of `g2 serve` with 1 and
//! with 1,000 registered groups (each with its gateway socket and inotify
//! watches on its `messages/` and `tasks/`), after it
//! has settled. Containers are not started: nothing is sent.
//!
//! `cargo bench -p g2-host --bench idle` (`G2_BENCH_GROUPS`, default 1000).

// Tests and benches fail loudly: an unwrap is the assertion.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::{Serve, init_home};

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn measure(home: &std::path::Path) -> u64 {
    let serve = Serve::start(home, &[]);
    std::thread::sleep(Duration::from_secs(5));
    let a = rss_kib(serve.child.id());
    std::thread::sleep(Duration::from_secs(5));
    let b = rss_kib(serve.child.id());
    drop(serve);
    a.max(b)
}

fn main() {
    let n: usize = common::env_or("G2_BENCH_GROUPS", 1000);
    let home = tempfile::tempdir().unwrap();
    init_home(home.path());
    let one = measure(home.path());
    // Register through the API of a running host, as a user would.
    let serve = Serve::start(home.path(), &[]);
    let _ = rustls::crypto::ring::default_provider().install_default();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let c = reqwest::Client::new();
        for i in 1..n {
            let r = c
                .post(format!("{}/api/groups", serve.url))
                .json(&serde_json::json!({ "folder": format!("group-{i:04}"), "name": format!("Group {i}") }))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 201);
        }
    });
    drop(serve);
    let many = measure(home.path());
    println!("idle g2 serve, resident memory (VmRSS)");
    println!("  1 group        {:.1} MiB", one as f64 / 1024.0);
    println!(
        "  {n} groups   {:.1} MiB ({:.1} KiB per group)",
        many as f64 / 1024.0,
        (many - one) as f64 / (n - 1) as f64
    );
}
