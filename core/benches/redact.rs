//! Redaction throughput: the host's redactor (the patterns plus three
//! credentials of its own, as `gateway::credentials::redactor` builds it)
//! over a 24 MB transcript.
//!
//! The transcript is the largest `.jsonl` fixture repeated to 24 MB
//! (24 × 10^6 bytes). Cases:
//!
//! - `clean` over the whole text as one string;
//! - `clean` line by line (what archives and memory capture do: one call
//!   per message);
//! - line by line with one line in 500 carrying a credential in some
//!   encoding (base64, percent, hex, spaced, split) or an assignment.
//!
//! Each case runs once to warm up, then `G2_BENCH_RUNS` times (default 7);
//! median and best as MB/s (1 MB = 10^6 bytes of input).
//!
//! Run: `cargo bench -p g2-core --bench redact`. The fixtures folder is the
//! project's `tests/fixtures/transcripts/`, or `$G2_FIXTURES`. (A bench of
//! g2-core: the redactor is all it measures, and it builds in a minute
//! where the host's release build takes most of an hour on two cores.)

// Tests and benches fail loudly: an unwrap is the assertion.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use g2_core::privacy::Redactor;

const SIZE: usize = 24_000_000;

fn main() {
    let fixture = largest_fixture();
    let one = std::fs::read_to_string(&fixture).unwrap();
    let mut text = String::with_capacity(SIZE + one.len());
    while text.len() < SIZE {
        text.push_str(&one);
    }
    let lines: Vec<&str> = text.lines().collect();
    let (token, key, chat) = credentials();
    let r = Redactor::with_literals([token.as_str(), key.as_str(), chat.as_str()]);
    let planted: Vec<String> = lines
        .iter()
        .enumerate()
        .map(|(i, l)| {
            if i % 500 == 0 {
                format!("{l} {}", shape(i / 500, &token, &key))
            } else {
                (*l).to_string()
            }
        })
        .collect();
    let runs: usize = std::env::var("G2_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(7);
    println!(
        "redact: {} ({:.1} MB, {} lines), {runs} runs",
        fixture.file_name().unwrap().to_string_lossy(),
        text.len() as f64 / 1e6,
        lines.len()
    );
    let mb = text.len() as f64 / 1e6;
    report("clean, whole text", mb, runs, || {
        std::hint::black_box(r.clean(&text));
    });
    report("clean, line by line", mb, runs, || {
        for l in &lines {
            std::hint::black_box(r.clean(l));
        }
    });
    let planted_mb = planted.iter().map(String::len).sum::<usize>() as f64 / 1e6;
    report(
        "clean, line by line, secrets planted",
        planted_mb,
        runs,
        || {
            for l in &planted {
                std::hint::black_box(r.clean(l));
            }
        },
    );
}

/// Runs `f` once, then `runs` times, and prints MB/s.
fn report(name: &str, mb: f64, runs: usize, mut f: impl FnMut()) {
    f();
    let mut samples: Vec<Duration> = (0..runs.max(1))
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    samples.sort();
    let rate = |d: Duration| mb / d.as_secs_f64();
    println!(
        "  {name:<40} median {:>7.1} MB/s   best {:>7.1} MB/s",
        rate(samples[samples.len() / 2]),
        rate(samples[0])
    );
}

/// Made-up credentials of the real shapes (nothing real).
fn credentials() -> (String, String, String) {
    // A fixed-seed xorshift: the same credentials on every run.
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut pick = |n: usize, alphabet: &[u8]| -> String {
        (0..n)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                alphabet[(state % alphabet.len() as u64) as usize] as char
            })
            .collect()
    };
    let an = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let token = pick(43, an);
    let key = format!("sk-ant-api03-{}-{}AA", pick(80, an), pick(12, an));
    let chat = format!("7{}:AA{}", pick(9, b"0123456789"), pick(33, an));
    (token, key, chat)
}

/// The `n`th planted shape of a credential.
fn shape(n: usize, token: &str, key: &str) -> String {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD;
    match n % 7 {
        0 => b64.encode(format!("Authorization: {token}")),
        1 => b64.encode(format!("x{key}")),
        2 => key.bytes().map(|b| format!("%{b:02X}")).collect(),
        3 => token.bytes().map(|b| format!("{b:02x}")).collect(),
        4 => key.chars().map(|c| format!("{c} ")).collect(),
        5 => format!("{}\n{}", &key[..20], &key[20..]),
        _ => format!("export DEPLOY_TOKEN=\"{token}\""),
    }
}

/// The largest transcript fixture.
fn largest_fixture() -> PathBuf {
    let dir = std::env::var_os("G2_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/transcripts")
        });
    std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .unwrap()
}
