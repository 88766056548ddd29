//! Memory capture on the host: event files dropped into a group's
//! `events/` (as the in-container hooks write them) against a real
//! `g2 serve` — the lag from a file written to its row committed (one at a
//! time, p50/p99), the throughput of a burst, and the database's growth per
//! 1,000 tool calls with the default bounds.
//!
//! `cargo bench -p g2-host --bench capture` (`G2_BENCH_EVENTS`, default
//! 10,000 for the burst). Needs the Docker engine (`g2 serve` starts).

// Tests and benches fail loudly: an unwrap is the assertion.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{Samples, Serve, fmt_dur, init_home};
use g2_core::wire::{AgentEvent, Captured};

fn event(i: usize, output_bytes: usize) -> Vec<u8> {
    let ev = AgentEvent::Capture {
        session_id: Some("bench-session".into()),
        at: format!(
            "2026-11-22T10:{:02}:{:02}.{:03}Z",
            (i / 60_000) % 60,
            (i / 1000) % 60,
            i % 1000
        ),
        event: Captured::Tool {
            tool_use_id: Some(format!("toolu_bench_{i}")),
            tool: "Bash".into(),
            input: serde_json::json!({ "command": format!("grep -rn pattern{i} src/") }),
            output: "x".repeat(output_bytes),
            files_read: vec![format!("src/file{i}.rs")],
            files_modified: vec![],
            ok: true,
            subagent: false,
        },
    };
    serde_json::to_vec(&ev).unwrap()
}

fn count(db: &Path) -> i64 {
    let c = rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .unwrap();
    c.busy_timeout(Duration::from_secs(5)).unwrap();
    c.query_row("SELECT count(*) FROM activities", [], |r| r.get(0))
        .unwrap()
}

fn db_bytes(home: &Path) -> u64 {
    ["g2.db", "g2.db-wal"]
        .iter()
        .filter_map(|f| std::fs::metadata(home.join("data").join(f)).ok())
        .map(|m| m.len())
        .sum()
}

fn wait_for(db: &Path, n: i64) {
    let deadline = Instant::now() + Duration::from_secs(300);
    while count(db) < n {
        assert!(Instant::now() < deadline, "only {} of {n} rows", count(db));
        std::thread::sleep(Duration::from_micros(500));
    }
}

fn main() {
    let burst: usize = common::env_or("G2_BENCH_EVENTS", 10_000);
    let home = tempfile::tempdir().unwrap();
    init_home(home.path());
    let serve = Serve::start(home.path(), &[]);
    let events = home.path().join("data/ipc/main/events");
    std::fs::create_dir_all(&events).unwrap();
    let db = home.path().join("data/g2.db");
    let write = |i: usize, bytes: usize| {
        g2_core::ipc::write_atomic(&events, &format!("{i:012}.json"), &event(i, bytes)).unwrap();
    };

    // Lag: one file at a time, until its row is there.
    let mut lags = Vec::new();
    for i in 0..200 {
        let t = Instant::now();
        write(i, 200);
        wait_for(&db, i as i64 + 1);
        lags.push(t.elapsed());
    }
    let lag = Samples::of(lags);

    // Growth per 1,000 tool calls: typical (500 B out) and at the bound (4 KiB).
    let mut next = 200;
    let mut growth = Vec::new();
    for bytes in [500, 4096] {
        std::thread::sleep(Duration::from_millis(500));
        let before = db_bytes(home.path());
        for _ in 0..1000 {
            write(next, bytes);
            next += 1;
        }
        wait_for(&db, next as i64);
        std::thread::sleep(Duration::from_millis(500));
        growth.push((bytes, db_bytes(home.path()).saturating_sub(before)));
    }

    // Burst: many files at once.
    let t = Instant::now();
    for _ in 0..burst {
        write(next, 500);
        next += 1;
    }
    let written = t.elapsed();
    wait_for(&db, next as i64);
    let all = t.elapsed();
    drop(serve);

    println!("capture: event files -> rows, real g2 serve");
    println!(
        "  lag (file written -> row committed, one at a time, n={}): p50 {} p99 {}",
        lag.n(),
        fmt_dur(lag.at(0.5)),
        fmt_dur(lag.at(0.99))
    );
    println!(
        "  burst of {burst}: written in {}, all committed after {} ({:.0} events/s)",
        fmt_dur(written),
        fmt_dur(all),
        burst as f64 / all.as_secs_f64()
    );
    for (bytes, grew) in growth {
        println!(
            "  database growth per 1,000 tool calls with {bytes} B of output: {:.2} MB",
            grew as f64 / 1e6
        );
    }
}
