//! The memory layer's costs.
//!
//! **Injection.** The built `g2-agent hook SessionStart` and
//! `UserPromptSubmit` (process start included), asking a real `g2 gateway`
//! for the group's memory over the group's socket, as in the container
//! (the workspace's `ipc/model.sock` is the group's socket): p50/p99 over
//! `G2_BENCH_RUNS` (default 1,000) runs each, with 200 observations, 20
//! session summaries and 500 archives in the group; each run must print
//! the block.
//!
//! **Extraction.** As the host runs it: the processor
//! (`memory::process::pass`, real SQLite) with the model extractor through
//! a gateway over the offline provider, on 2,000 completed prompt batches
//! built from MemoryBank's conversations (`$G2_MEMORY_FIXTURES`, default
//! `tests/fixtures/memory/memorybank`), one exchange each: batches per
//! minute and observations per batch, and the tokens per request the
//! gateway recorded (the request's size at 4 bytes a token: what the
//! `anthropic` provider would be sent).
//!
//! `cargo build --release -p g2-agent && cargo bench -p g2-host --bench memory`

// Tests and benches fail loudly: an unwrap is the assertion.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::Write;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use common::{Gateway, Samples, command, env_or, fmt_dur, project_root};
use g2_core::validate::GroupFolder;
use g2_host::memory::extract::Extractor;
use g2_host::store::{self, Store};

fn agent() -> std::path::PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().join("g2-agent")
}

fn hook(agent: &Path, ws: &Path, event: &str, input: &[u8]) -> (Duration, String) {
    let t = Instant::now();
    let mut child = command(agent)
        .args(["hook", event])
        .env(g2_core::wire::ENV_WORKSPACE, ws)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    let out = child.wait_with_output().unwrap();
    let d = t.elapsed();
    assert_eq!(out.status.code(), Some(0));
    (d, String::from_utf8_lossy(&out.stdout).into_owned())
}

fn bank() -> Value {
    let dir = std::env::var_os("G2_MEMORY_FIXTURES")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| project_root().join("tests/fixtures/memory/memorybank"));
    serde_json::from_str(&std::fs::read_to_string(dir.join("memory_bank_en.json")).unwrap())
        .unwrap()
}

/// Every exchange of the conversations, as (query, response).
fn exchanges() -> Vec<(String, String)> {
    let bank = bank();
    let mut out = Vec::new();
    for person in bank.as_object().unwrap().values() {
        for day in person["history"].as_object().unwrap().values() {
            for e in day.as_array().unwrap() {
                out.push((
                    e["query"].as_str().unwrap_or("").to_string(),
                    e["response"].as_str().unwrap_or("").to_string(),
                ));
            }
        }
    }
    out
}

fn injection(runs: usize) {
    let home = tempfile::tempdir().unwrap();
    common::init_home(home.path());
    let store = Store::open(&home.path().join("data/g2.db"), Duration::from_secs(5)).unwrap();
    common::group_memory(&store, &exchanges());
    // Every row's vector, as the jobs would store it: random unit vectors
    // under the model's name (their values do not change what comparing
    // them costs; embedding 10,000 passages first would take minutes).
    common::random_vectors(&store);
    let _gw = Gateway::start(home.path());
    let ws = tempfile::tempdir().unwrap();
    let ws = ws.path();
    for d in ["group", "ipc/events"] {
        std::fs::create_dir_all(ws.join(d)).unwrap();
    }
    std::os::unix::fs::symlink(
        home.path().join("data/ipc/main/model.sock"),
        ws.join("ipc/model.sock"),
    )
    .unwrap();
    let agent = agent();
    assert!(agent.exists(), "cargo build --release -p g2-agent");
    let base = json!({
        "session_id": "0f9c2a8e-5a2b-4c4e-9d7e-3b1f6a2c9e10",
        "transcript_path": "/nonexistent.jsonl",
        "cwd": "/workspace/group",
    });
    let with = |event: &str, extra: Value| {
        let mut v = base.clone();
        v["hook_event_name"] = json!(event);
        v.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        v.to_string().into_bytes()
    };
    println!(
        "memory injection: g2-agent hook asking g2 gateway over the group socket, {runs} runs each"
    );
    for (label, event, input, expect) in [
        (
            "SessionStart",
            "SessionStart",
            with("SessionStart", json!({"source": "startup"})),
            "Remembered:",
        ),
        (
            "UserPromptSubmit (related)",
            "UserPromptSubmit",
            with(
                "UserPromptSubmit",
                json!({"prompt": "<messages>\n<message sender=\"Ann\" time=\"2026-01-01T09:00:00Z\">can you recommend some good books about painting and piano?</message>\n</messages>"}),
            ),
            "Memory that may bear on this message",
        ),
    ] {
        // The first asks load the group's vector copy and warm the model,
        // past the hook's deadline: a running host has done both.
        let mut out = String::new();
        for _ in 0..50 {
            out = hook(&agent, ws, event, &input).1;
            if out.contains(expect) {
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        assert!(out.contains(expect), "{label}: {out}");
        let mut samples = Vec::new();
        for _ in 0..runs {
            let (d, out) = hook(&agent, ws, event, &input);
            assert!(out.contains("additionalContext"), "{label}: {out}");
            samples.push(d);
        }
        let s = Samples::of(samples);
        println!(
            "  {label:<28} p50 {:>9}  p99 {:>9}  max {:>9}",
            fmt_dur(s.at(0.5)),
            fmt_dur(s.at(0.99)),
            fmt_dur(s.at(1.0))
        );
        std::fs::remove_dir_all(ws.join("ipc/events")).unwrap();
        std::fs::create_dir_all(ws.join("ipc/events")).unwrap();
    }
    // Under load: 100 more archives for the gateway's jobs to embed (the
    // real model, in the background) and a busy loop on the other core.
    let ex = exchanges();
    store
        .write_blocking(move |tx| {
            for i in 500..600 {
                let mut body = String::from("# A day\n\nArchived: x\n\n---\n\n");
                for k in 0..20 {
                    let (q, r) = &ex[(i * 20 + k) % ex.len()];
                    body.push_str(&format!("**User**: {q}\n\n**G2**: {r}\n\n"));
                }
                store::archives::insert(tx, &common::day_archive(i, body))?;
            }
            Ok(())
        })
        .unwrap();
    let busy = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let spin = {
        let busy = busy.clone();
        std::thread::spawn(move || {
            let mut x: u64 = 1;
            while busy.load(std::sync::atomic::Ordering::Relaxed) {
                for _ in 0..100_000 {
                    x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                }
                std::hint::black_box(x);
            }
        })
    };
    let input = with(
        "UserPromptSubmit",
        json!({"prompt": "<messages>\n<message sender=\"Ann\" time=\"2026-01-01T09:00:00Z\">can you recommend some good books about painting and piano?</message>\n</messages>"}),
    );
    let jobs = || -> i64 {
        store
            .read_blocking(|c| c.query_row("SELECT count(*) FROM embedding_jobs", (), |r| r.get(0)))
            .unwrap()
    };
    let before = jobs();
    let mut samples = Vec::new();
    let mut empty = 0;
    let t = Instant::now();
    for _ in 0..runs {
        let (d, out) = hook(&agent, ws, "UserPromptSubmit", &input);
        empty += usize::from(!out.contains("Memory that may bear"));
        samples.push(d);
    }
    let secs = t.elapsed().as_secs_f64();
    let after = jobs();
    busy.store(false, std::sync::atomic::Ordering::Relaxed);
    spin.join().unwrap();
    let s = Samples::of(samples);
    println!(
        "  {:<28} p50 {:>9}  p99 {:>9}  max {:>9}  (no block: {empty} of {runs}; the jobs embedded {} rows meanwhile, {:.1} per second)",
        "UserPromptSubmit under load",
        fmt_dur(s.at(0.5)),
        fmt_dur(s.at(0.99)),
        fmt_dur(s.at(1.0)),
        before - after,
        (before - after) as f64 / secs
    );
}

fn extraction(batches: usize) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("g2.db"), Duration::from_secs(5)).unwrap();
    let fam = GroupFolder::new("fam").unwrap();
    let ex = exchanges();
    let f = fam.clone();
    let chars = store
        .write_blocking(move |tx| {
            let at = "2026-05-01T10:00:00.000Z";
            let mut chars = 0usize;
            let mut session = 0;
            for i in 0..batches {
                if i % 10 == 0 {
                    session =
                        store::memory::open_session(tx, &f, &format!("s{i}"), None, None, at)?;
                }
                let (q, r) = &ex[i % ex.len()];
                let prompt = format!("Ann: {q}");
                chars += prompt.len() + r.len();
                let b = store::memory::start_batch(tx, session, &prompt, &["Ann".to_string()], at)?;
                store::memory::finish_batch(tx, b, Some(r), at)?;
            }
            Ok(chars)
        })
        .unwrap();
    let settings = g2_host::config::MemorySettings {
        max_concurrent: 50,
        daily_tokens: u64::MAX,
        ..Default::default()
    };
    let rt = common::runtime();
    // As the host runs it: through a gateway over the offline provider,
    // each batch one Messages API request, its usage recorded.
    let gateway = {
        let _in = rt.enter();
        g2_host::gateway::Gateway::with_provider(
            &Default::default(),
            store.clone(),
            Arc::new(
                g2_host::gateway::offline::Offline::new(None)
                    .with_delegate(g2_host::memory::extract::model::answer_offline),
            ),
        )
    };
    let extractor: Arc<dyn Extractor> = Arc::new(
        g2_host::memory::extract::model::ModelExtractor::new(gateway.clone(), settings.clone()),
    );
    let t = Instant::now();
    let (mut done, mut observations) = (0, 0);
    while done < batches {
        let p = rt
            .block_on(g2_host::memory::process::pass(
                &store,
                &extractor,
                &settings,
                "bench",
                chrono::Utc::now(),
            ))
            .unwrap();
        assert!(p.batches > 0 || p.summaries > 0, "{p:?}");
        done += p.batches;
        observations += p.observations;
    }
    let secs = t.elapsed().as_secs_f64();
    rt.block_on(gateway.flush());
    println!(
        "memory extraction (offline model, through the processor and the gateway): {batches} batches in {secs:.1} s = {:.0} batches/min, {:.2} observations per batch",
        batches as f64 / secs * 60.0,
        observations as f64 / batches as f64
    );
    // The requests' own size, as the offline provider estimates it (4
    // bytes a token): what the anthropic provider would be sent.
    let lines = store
        .read_blocking(|c| store::usage::report(c, Some("fam"), None))
        .unwrap();
    let memory: Vec<_> = lines
        .iter()
        .filter(|l| l.purpose == g2_host::gateway::usage::Purpose::Memory)
        .collect();
    let requests: u64 = memory.iter().map(|l| l.requests).sum();
    let input: u64 = memory.iter().map(|l| l.input_tokens).sum();
    let output: u64 = memory.iter().map(|l| l.output_tokens).sum();
    assert!(requests as usize >= batches, "{lines:?}");
    println!(
        "  per request (batches and session summaries, {requests} requests): {:.0} input tokens, {:.0} output tokens (exchanges of {:.0} characters)",
        input as f64 / requests as f64,
        output as f64 / requests as f64,
        chars as f64 / batches as f64
    );
}

fn main() {
    injection(env_or("G2_BENCH_RUNS", 1000));
    extraction(env_or("G2_BENCH_BATCHES", 2000));
}
