//! Archive throughput on the largest transcript fixture, against jq.
//!
//! Measures, on the largest `.jsonl` in the fixtures folder
//! (`spotter-auto-compact-4d5611e5.jsonl`, 3.1 MB):
//!
//! - parse only (`transcript::parse_file`), and parse from memory
//!   (`transcript::parse_bytes`, no file I/O);
//! - parse + title + render markdown: the whole in-memory archive pipeline;
//! - `archives::prepare` into a temp home: parse + render + atomic write of
//!   the file (with its `fsync`s), the file removed again between runs;
//! - jq run as a process doing the equivalent extraction of the user's and
//!   the assistant's text (`jq -r 'select(...) | .message.content | ...'`);
//! - `g2 archive` run as a process too (the binary Cargo builds with the
//!   bench), for a process-to-process comparison: start-up, settings,
//!   store open, parse, render, atomic write and the database row.
//!
//! Each in-process case runs a warm-up, then at least 50 timed runs; median
//! and best are reported, as MB/s (1 MB = 10^6 bytes of input transcript).
//! Processes run at least 10 times; median and best. The goal is archiving
//! at least 10x faster than jq (compared on medians).
//!
//! Run: `cargo bench -p g2-host --bench archive`. The fixtures folder is the project's
//! `tests/fixtures/transcripts/`, or `$G2_FIXTURES`; jq is `jq` on the PATH, or `$JQ`; the g2
//! binary is the one Cargo built with the bench, or `$G2_BIN`.

// Tests and benches fail loudly: an unwrap is the assertion.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Samples, command, fmt_dur, g2_binary, time_process};

use g2_core::archive::{self, ArchiveOptions};
use g2_core::transcript;
use g2_host::archives::{self, Trigger};
use g2_host::home::Home;
use g2_host::store::Store;

const WARMUP: usize = 5;
const RUNS: usize = 60;
const PROCESS_RUNS: usize = 21;

const JQ_FILTER: &str = r#"select((.type=="user" or .type=="assistant") and (.isMeta|not) and (.isSidechain|not)) | .message.content | if type=="string" then . else (.[]? | select(.type=="text") | .text) end"#;

fn main() {
    let fixture = largest_fixture();
    let bytes = std::fs::metadata(&fixture).expect("fixture metadata").len();
    let jq = std::env::var("JQ").unwrap_or_else(|_| "jq".into());
    let jq_version = match Command::new(&jq).arg("--version").output() {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_string(),
        _ => {
            eprintln!(
                "error: jq not found (tried {jq:?}); install it (apt-get install jq) or set JQ=/path/to/jq"
            );
            std::process::exit(2);
        }
    };

    println!("archive bench");
    println!("  fixture  {} ({} bytes)", fixture.display(), bytes);
    println!("  jq       {jq_version}");
    println!(
        "  cores    {}",
        std::thread::available_parallelism().map_or(0, std::num::NonZero::get)
    );
    println!();

    // What each side extracts, as a sanity check that the work is comparable.
    let parsed = transcript::parse_file(&fixture).expect("parse fixture");
    let now = chrono::Utc::now().with_timezone(&chrono_tz::Tz::UTC);
    let opts = ArchiveOptions::default();
    let title = archive::title(None, &parsed, &now);
    let body = archive::render(&title, &parsed, &now, &opts);
    let jq_out = Command::new(&jq)
        .args(["-r", JQ_FILTER])
        .arg(&fixture)
        .stderr(Stdio::inherit())
        .output()
        .expect("run jq");
    assert!(jq_out.status.success(), "jq failed");
    println!(
        "  g2: {} entries ({} user, {} assistant turns), {} lines ({} skipped), markdown {} bytes",
        parsed.entries.len(),
        parsed.user_turns(),
        parsed.assistant_turns(),
        parsed.stats.lines,
        parsed.stats.skipped,
        body.len()
    );
    println!("  jq: extracted text {} bytes", jq_out.stdout.len());
    println!();

    let mut rows: Vec<(String, Samples)> = Vec::new();

    let raw = std::fs::read(&fixture).expect("read fixture");
    rows.push((
        "parse (parse_bytes, in memory)".into(),
        time_runs(|| {
            let t = transcript::parse_bytes(&raw);
            std::hint::black_box(t.entries.len());
        }),
    ));
    rows.push((
        "parse (parse_file)".into(),
        time_runs(|| {
            let t = transcript::parse_file(&fixture).unwrap();
            std::hint::black_box(t.entries.len());
        }),
    ));
    rows.push((
        "parse + render markdown".into(),
        time_runs(|| {
            let t = transcript::parse_file(&fixture).unwrap();
            let now = chrono::Utc::now().with_timezone(&chrono_tz::Tz::UTC);
            let title = archive::title(None, &t, &now);
            let body = archive::render(&title, &t, &now, &opts);
            std::hint::black_box(body.len());
        }),
    ));

    let tmp = tempfile::tempdir().expect("tempdir");
    let home = Home::new(tmp.path()).unwrap();
    home.ensure_layout().unwrap();
    let main = g2_core::validate::GroupFolder::new("main").unwrap();
    home.ensure_group(&main, "Main", true).unwrap();
    let store = Store::open(&home.db_path(), Duration::from_secs(5)).unwrap();
    rows.push((
        "parse + archives::prepare (+ atomic write, fsync)".into(),
        time_runs_with_cleanup(|| {
            let parsed = transcript::parse_file(&fixture).expect("parse");
            let p = archives::prepare(
                &home,
                &store,
                &opts,
                &main,
                parsed,
                None,
                None,
                Trigger::Manual,
            )
            .expect("prepare");
            p.path(&home)
        }),
    ));
    drop(tmp);

    let jq_stats = time_process(PROCESS_RUNS, &[0], || {
        let mut c = Command::new(&jq);
        c.args(["-r", JQ_FILTER]).arg(&fixture);
        c
    });
    let jq_startup = time_process(PROCESS_RUNS, &[0], || {
        let mut c = Command::new(&jq);
        c.args(["-n", "empty"]);
        c
    });

    let g2 = g2_binary();
    let g2_cli = {
        let tmp = tempfile::tempdir().expect("tempdir");
        let status = command(&g2)
            .arg("--home")
            .arg(tmp.path())
            .arg("init")
            .stdout(Stdio::null())
            .status()
            .expect("g2 init");
        assert!(status.success(), "g2 init failed");
        // Files are kept: removing one while its row stays would make the
        // next archive of the same title reuse the name, which the
        // database's UNIQUE(path) refuses. Names go -2, -3, … instead.
        time_process(PROCESS_RUNS, &[0], || {
            let mut c = command(&g2);
            c.arg("--home")
                .arg(tmp.path())
                .args(["archive", "--group", "main"])
                .arg(&fixture);
            c
        })
    };

    println!(
        "{:<44} {:>10} {:>10} {:>10} {:>10}",
        "case", "median", "best", "MB/s med", "MB/s best"
    );
    let line = |name: &str, s: &Samples| {
        println!(
            "{:<44} {:>10} {:>10} {:>10.1} {:>10.1}",
            format!("{name} (n={})", s.n()),
            fmt_dur(s.at(0.5)),
            fmt_dur(s.at(0.0)),
            mbps(bytes, s.at(0.5)),
            mbps(bytes, s.at(0.0))
        );
    };
    for (name, s) in &rows {
        line(name, s);
    }
    line("jq extraction (process)", &jq_stats);
    println!(
        "{:<44} {:>10} {:>10}",
        format!("  jq startup only: jq -n empty (n={})", jq_startup.n()),
        fmt_dur(jq_startup.at(0.5)),
        fmt_dur(jq_startup.at(0.0))
    );
    line("g2 archive (process, incl. db + fsync)", &g2_cli);
    println!();

    println!("speedup vs jq (jq median / g2 median; goal >= 10x):");
    let jq_med = jq_stats.at(0.5).as_secs_f64();
    let mut goal_met = true;
    for (name, s) in rows.iter().skip(1) {
        let x = jq_med / s.at(0.5).as_secs_f64();
        println!("  {name:<44} {x:>8.1}x");
        if name.starts_with("parse + render") {
            goal_met = x >= 10.0;
        }
    }
    let jq_work = jq_stats.at(0.5).saturating_sub(jq_startup.at(0.5));
    println!(
        "  {:<44} {:>8.1}x",
        "g2 archive process vs jq process",
        jq_med / g2_cli.at(0.5).as_secs_f64()
    );
    println!(
        "  {:<44} {:>8.1}x",
        "parse + render vs jq minus jq startup",
        jq_work.as_secs_f64() / rows[2].1.at(0.5).as_secs_f64()
    );
    println!();
    println!(
        "goal (parse + render at least 10x faster than jq): {}",
        if goal_met { "MET" } else { "MISSED" }
    );
}

/// The largest `.jsonl` in the fixtures folder.
fn largest_fixture() -> PathBuf {
    let dir = std::env::var_os("G2_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/transcripts")
        });
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| {
        eprintln!(
            "error: fixtures folder {}: {e} (set G2_FIXTURES)",
            dir.display()
        );
        std::process::exit(2);
    });
    entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .max_by_key(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
        .unwrap_or_else(|| {
            eprintln!("error: no .jsonl fixture in {}", dir.display());
            std::process::exit(2);
        })
}

fn time_runs(mut f: impl FnMut()) -> Samples {
    for _ in 0..WARMUP {
        f();
    }
    let samples = (0..RUNS)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    Samples::of(samples)
}

/// Like [`time_runs`]; the file `f` returns is removed after the clock stops.
fn time_runs_with_cleanup(mut f: impl FnMut() -> PathBuf) -> Samples {
    for _ in 0..WARMUP {
        std::fs::remove_file(f()).unwrap();
    }
    let samples = (0..RUNS)
        .map(|_| {
            let t = Instant::now();
            let file = f();
            let d = t.elapsed();
            std::fs::remove_file(file).unwrap();
            d
        })
        .collect();
    Samples::of(samples)
}

fn mbps(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / 1e6 / d.as_secs_f64()
}
