//! Agent start-up and follow-up latency (needs Docker and Claude Code; run
//! `scripts/setup.sh` first).
//!
//! **Cold start.** From invoking `g2 run <group> <prompt>` to the first
//! model request reaching the gateway (its `model_usage.started_at`),
//! against the floor: `docker run` of the same image running the same
//! `claude -p` directly against the gateway's TCP listener (host network,
//! no runner, no mounts, no hardening). Ten of each, interleaved, each in a
//! fresh group (no session to resume); medians reported.
//!
//! **Warm follow-up.** A `g2-agent run` with the real Claude Code on the
//! offline model, outside a container (the path measured — inotify wake,
//! read, queue, write to Claude Code's stdin — is the same inside one):
//! from the moment a message file is renamed into `input/` to the runner
//! writing it to Claude Code's stdin (`G2_AGENT_TRACE`), 200 messages, one
//! per turn, p50/p99.
//!
//! `cargo bench -p g2-host --bench agents` (`G2_BENCH_COLD_RUNS`,
//! `G2_BENCH_FOLLOW_UPS` change the counts).

// Tests and benches fail loudly: an unwrap is the assertion.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{command, g2_binary};

fn g2(home: &Path) -> Command {
    let mut c = command(g2_binary());
    c.arg("--home").arg(home);
    c
}

fn ok(c: &mut Command) -> String {
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{:?}: {}",
        c,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// The first model request of `caller` that started at or after `t0`.
fn first_request_after(db: &Path, caller: &str, t0: u128) -> u128 {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.busy_timeout(Duration::from_secs(5)).unwrap();
    for _ in 0..100 {
        let rows: Vec<String> = conn
            .prepare("SELECT started_at FROM model_usage WHERE caller = ?1 ORDER BY id")
            .unwrap()
            .query_map([caller], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let first = rows
            .iter()
            .filter_map(|s| chrono::DateTime::parse_from_rfc3339(s).ok())
            .map(|t| t.timestamp_nanos_opt().unwrap() as u128)
            // started_at has millisecond resolution.
            .filter(|t| *t + 1_000_000 >= t0)
            .min();
        if let Some(t) = first {
            return t;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("no model request from {caller} was recorded");
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn main() {
    let cold_runs: usize = common::env_or("G2_BENCH_COLD_RUNS", 10);
    let follow_ups: usize = common::env_or("G2_BENCH_FOLLOW_UPS", 200);
    let home_dir = tempfile::tempdir().unwrap();
    let home = home_dir.path();
    ok(g2(home).arg("init"));
    eprintln!("building the agent image (if needed)…");
    ok(g2(home).args(["image", "build"]));
    for i in 0..cold_runs {
        ok(g2(home).args([
            "groups",
            "add",
            &format!("cold{i}"),
            "--name",
            &format!("Cold {i}"),
        ]));
    }
    // The gateway serves every group's socket and the TCP listener.
    let gw = common::Gateway::start(home);
    let db = home.join("data/g2.db");
    let (uid, gid) = g2_host::home::agent_ids();

    // Warm both paths once (page cache, image layers).
    ok(g2(home).args(["run", "main", "warm-up"]));
    let floor = |prompt: &str| {
        let mut c = Command::new("docker");
        c.args([
            "run",
            "--rm",
            "--network",
            "host",
            "--user",
            &format!("{uid}:{gid}"),
        ])
        .args([
            "-e",
            "HOME=/tmp",
            "-e",
            &format!("ANTHROPIC_BASE_URL={}", gw.url),
        ])
        .args([
            "-e",
            "ANTHROPIC_API_KEY=placeholder",
            "-e",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
        ])
        .args([
            "--entrypoint",
            g2_core::wire::CLAUDE_EXE,
            g2_host::container::image::IMAGE,
            "-p",
            prompt,
        ])
        .stdout(Stdio::null());
        c
    };
    ok(&mut floor("warm-up"));

    let (mut g2_ms, mut floor_ms) = (Vec::new(), Vec::new());
    for i in 0..cold_runs {
        let t0 = now_ns();
        ok(g2(home).args(["run", &format!("cold{i}"), "cold start"]));
        g2_ms.push((first_request_after(&db, &format!("cold{i}"), t0) - t0) as f64 / 1e6);

        let t0 = now_ns();
        ok(&mut floor("cold start"));
        floor_ms.push((first_request_after(&db, "@local", t0) - t0) as f64 / 1e6);
    }
    let (g, f) = (median(&mut g2_ms), median(&mut floor_ms));
    println!("cold start to the first model request, median of {cold_runs} (ms)");
    println!("  g2 run                          {g:>8.0}");
    println!("  docker run + claude -p (floor)  {f:>8.0}");
    println!(
        "  g2 adds                         {:>8.0}  ({:+.1}%)",
        g - f,
        (g / f - 1.0) * 100.0
    );

    // --- warm follow-ups -------------------------------------------------
    let agent = common::agent_binary();
    let claude = g2_host::doctor::find_claude(
        &g2_host::home::Home::new(home).unwrap(),
        &Default::default(),
    )
    .unwrap();
    let ws = tempfile::tempdir().unwrap();
    let ws = ws.path();
    for d in ["group", "ipc/input", "home"] {
        std::fs::create_dir_all(ws.join(d)).unwrap();
    }
    std::os::unix::fs::symlink(
        home.join("data/ipc/main/model.sock"),
        ws.join("ipc/model.sock"),
    )
    .unwrap();
    let mut child = Command::new(&agent)
        .arg("run")
        .env(g2_core::wire::ENV_WORKSPACE, ws)
        .env(g2_core::wire::ENV_CLAUDE, &claude)
        .env(g2_core::wire::ENV_AGENT_TRACE, "1")
        .env("HOME", ws.join("home"))
        // Outside a container and as root, Claude Code wants to be told it is sandboxed.
        .env("IS_SANDBOX", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(
            br#"{"prompt":"first","groupFolder":"main","chatJid":"local:main","isMain":true}"#,
        )
        .unwrap();
    let (frames_tx, frames) = mpsc::channel::<String>();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line.starts_with('{') {
                let _ = frames_tx.send(line);
            }
        }
    });
    let (trace_tx, traces) = mpsc::channel::<u128>();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(rest) = line.strip_prefix("g2-agent trace: stdin ")
                && let Some(ns) = rest.split_whitespace().next().and_then(|n| n.parse().ok())
            {
                let _ = trace_tx.send(ns);
            }
        }
    });
    let idle = |frames: &mpsc::Receiver<String>| loop {
        let f = frames
            .recv_timeout(Duration::from_secs(60))
            .expect("a frame");
        if f.contains("\"result\":null") {
            return;
        }
    };
    traces.recv_timeout(Duration::from_secs(60)).unwrap();
    idle(&frames);
    let input = ws.join("ipc/input");
    let mut lat = Vec::new();
    for i in 0..follow_ups {
        let name = format!("{i:08}.json");
        let tmp = input.join(format!(".{name}.tmp"));
        std::fs::write(
            &tmp,
            format!("{{\"type\":\"message\",\"text\":\"follow-up {i}\"}}"),
        )
        .unwrap();
        let t_write = now_ns();
        std::fs::rename(&tmp, input.join(&name)).unwrap();
        let t_stdin = traces
            .recv_timeout(Duration::from_secs(30))
            .expect("the message reached claude");
        lat.push((t_stdin.saturating_sub(t_write)) as f64 / 1e6);
        idle(&frames);
    }
    std::fs::write(input.join("_close"), b"").unwrap();
    let _ = child.wait();
    println!(
        "\nwarm follow-up: file in input/ → on Claude Code's stdin, {follow_ups} messages (ms)"
    );
    println!(
        "  p50 {:.3}   p99 {:.3}   max {:.3}",
        pct(&mut lat, 0.5),
        pct(&mut lat, 0.99),
        pct(&mut lat, 1.0)
    );
    drop(gw);
}
