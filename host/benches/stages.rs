//! A warm turn, stage by stage, with memory on, capture off and memory
//! off: one `g2 serve` (real Docker, Claude Code in the agent image, the
//! offline model) with the turn trace on (`G2_LOG=warn,g2::turn=debug`,
//! JSON log to a file), three groups answered in turn (`main`: capture and
//! injection; `capoff`: capture off; `off`: capture and injection off),
//! each message waiting for its reply on its group's SSE stream. The log's
//! stage stamps are joined to each message by group and time (POST sent →
//! reply seen on the stream).
//!
//! Prints, as Markdown: each group's total p50/p90, the paired differences
//! (on − off, capture-off − off, message by message), the stage table (p50
//! time since the POST per group, and p50 of each step: a stage minus the
//! one before it) and the traced spans' p50.
//!
//! `cargo bench -p g2-host --bench stages` (`G2_BENCH_MESSAGES` per group,
//! default 40). Needs the agent image (`g2 image build`).

// Tests and benches fail loudly: an unwrap is the assertion.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::{Serve, g2_ok, init_home};
use futures_util::StreamExt;
use g2_core::trace::{Stage, now_us};
use serde_json::Value;

const GROUPS: [(&str, &str); 3] = [
    ("main", "memory on"),
    ("capoff", "capture off"),
    ("off", "memory off"),
];

/// The table's rows: every stage but a hook's (a warm turn without tools
/// runs no hook process).
fn rows() -> impl Iterator<Item = Stage> {
    Stage::ALL
        .into_iter()
        .filter(|s| !matches!(s, Stage::HookStart | Stage::HookEnd))
}

/// One message: its group, when it was posted and when its reply was seen.
struct Turn {
    group: &'static str,
    posted_us: u64,
    seen_us: u64,
}

#[derive(Debug)]
struct Event {
    stage: String,
    group: Option<String>,
    seq: Option<i64>,
    at_us: u64,
    took_us: Option<u64>,
    late: bool,
}

fn main() {
    let n: usize = common::env_or("G2_BENCH_MESSAGES", 40);
    let home = tempfile::tempdir().unwrap();
    init_home(home.path());
    let h = home.path();
    for (g, name) in [("capoff", "CapOff"), ("off", "Off")] {
        g2_ok(h, &["groups", "add", g, "--name", name, "--no-trigger"]);
    }
    g2_ok(h, &["groups", "capture", "capoff", "off"]);
    g2_ok(h, &["groups", "capture", "off", "off"]);
    g2_ok(h, &["groups", "inject", "off", "off"]);
    let log = h.join("serve.log");
    let serve = Serve::start_logged(
        h,
        &[("G2_LOG", "warn,g2::turn=debug"), ("G2_LOG_FORMAT", "json")],
        &log,
    );
    let base = serve.url.clone();
    let turns = common::runtime().block_on(run(base, n));
    drop(serve);
    report(&turns, &read_log(&log), n);
}

async fn run(base: String, n: usize) -> Vec<Turn> {
    let client = reqwest::Client::builder()
        .tcp_nodelay(true)
        .build()
        .unwrap();
    let mut replies = HashMap::new();
    for (g, _) in GROUPS {
        let resp = client
            .get(format!("{base}/api/groups/{g}/stream"))
            .send()
            .await
            .unwrap();
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<(u64, String)>();
        tokio::spawn(async move {
            let mut messages = std::pin::pin!(g2_host::chat::message_stream(resp));
            while let Some(m) = messages.next().await {
                if m.from_bot {
                    let _ = tx.send((now_us(), m.text));
                }
            }
        });
        replies.insert(g, rx);
    }
    let mut turns = Vec::new();
    // Cold start and two warm turns each before measuring.
    for round in 0..n + 3 {
        for (g, _) in GROUPS {
            let text = format!("ping {g} {round}");
            let posted_us = now_us();
            common::post_to(&client, &base, g, &text).await;
            let wait = if round == 0 { 180 } else { 60 };
            let (seen_us, reply) = tokio::time::timeout(
                Duration::from_secs(wait),
                replies.get_mut(g).unwrap().recv(),
            )
            .await
            .expect("no reply")
            .unwrap();
            assert!(reply.contains(&format!("\"{text}\"")), "{reply}");
            if round >= 3 {
                turns.push(Turn {
                    group: g,
                    posted_us,
                    seen_us,
                });
            }
        }
    }
    // The last turns' capture intake is in the log too.
    tokio::time::sleep(Duration::from_millis(500)).await;
    turns
}

/// The stage events and the closed spans (name, group, µs) of the log.
fn read_log(path: &std::path::Path) -> (Vec<Event>, Vec<(String, String, f64)>) {
    let text = std::fs::read_to_string(path).unwrap();
    let (mut events, mut spans) = (Vec::new(), Vec::new());
    for v in text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
    {
        if v["target"] != "g2::turn" {
            continue;
        }
        let f = &v["fields"];
        if f["message"] == "close" {
            let took = duration_us(&f["time.busy"]) + duration_us(&f["time.idle"]);
            let span = &v["span"];
            if let (Some(name), Some(group)) = (span["name"].as_str(), span["group"].as_str()) {
                spans.push((name.to_string(), group.to_string(), took));
            }
            continue;
        }
        let (Some(stage), Some(at_us)) = (f["stage"].as_str(), f["at_us"].as_u64()) else {
            continue;
        };
        events.push(Event {
            stage: stage.into(),
            group: f["group"].as_str().map(str::to_string),
            seq: f["seq"].as_i64(),
            at_us,
            took_us: f["took_us"].as_u64(),
            late: f["late"] == true,
        });
    }
    (events, spans)
}

/// A span's `time.busy` / `time.idle` ("12.3µs", "4.56ms", "1.02s") in µs.
fn duration_us(v: &Value) -> f64 {
    let s = v.as_str().unwrap_or("0");
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let x: f64 = num.parse().unwrap_or(0.0);
    match unit {
        "ns" => x / 1e3,
        "µs" | "us" => x,
        "ms" => x * 1e3,
        "s" => x * 1e6,
        _ => 0.0,
    }
}

/// Each row's time (µs after the POST) in one turn, where it was seen.
fn stages_of(turn: &Turn, events: &[Event]) -> Vec<Option<u64>> {
    let within = |e: &&Event| e.at_us >= turn.posted_us && e.at_us <= turn.seen_us;
    let ours = |e: &&Event| e.group.as_deref() == Some(turn.group);
    let reply_seq = events
        .iter()
        .filter(within)
        .filter(ours)
        .find(|e| e.stage == "reply_stored")
        .and_then(|e| e.seq);
    rows()
        .map(|stage| {
            let found = events.iter().filter(within).find(|e| {
                e.stage == stage.as_str()
                    && if stage == Stage::Published {
                        reply_seq.is_some() && e.seq == reply_seq
                    } else {
                        ours(e)
                    }
            });
            found.map(|e| e.at_us - turn.posted_us)
        })
        .collect()
}

fn p(mut v: Vec<f64>, q: f64) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    Some(v[((v.len() - 1) as f64 * q).round() as usize])
}

fn ms(x: Option<f64>) -> String {
    x.map_or("–".into(), |us| format!("{:.1}", us / 1e3))
}

fn report(turns: &[Turn], (events, spans): &(Vec<Event>, Vec<(String, String, f64)>), n: usize) {
    let of = |g: &'static str| turns.iter().filter(move |t| t.group == g);
    let total = |t: &Turn| (t.seen_us - t.posted_us) as f64;
    println!(
        "A warm turn, {n} messages per group, interleaved (POST sent → reply on the stream)\n"
    );
    println!("| group | p50 ms | p90 ms |\n|---|---|---|");
    for (g, label) in GROUPS {
        let all: Vec<f64> = of(g).map(total).collect();
        println!(
            "| {label} (`{g}`) | {} | {} |",
            ms(p(all.clone(), 0.5)),
            ms(p(all, 0.9))
        );
    }
    let off: Vec<f64> = of("off").map(total).collect();
    for (g, label) in [("main", "memory on − off"), ("capoff", "capture off − off")] {
        let d: Vec<f64> = of(g).map(total).zip(&off).map(|(a, b)| a - b).collect();
        println!(
            "\nPaired difference, {label}: p50 {} ms, p90 {} ms",
            ms(p(d.clone(), 0.5)),
            ms(p(d, 0.9))
        );
    }

    // Per group, per turn, per row.
    let table: HashMap<&str, Vec<Vec<Option<u64>>>> = GROUPS
        .iter()
        .map(|(g, _)| (*g, of(g).map(|t| stages_of(t, events)).collect()))
        .collect();
    println!(
        "\nStage table: p50 ms since the POST, and p50 ms of each step (the stage minus the row above it, in the same turn)\n"
    );
    print!("| stage |");
    for (_, label) in GROUPS {
        print!(" {label} |");
    }
    for (_, label) in GROUPS {
        print!(" step, {label} |");
    }
    println!("\n|---|{}", "---|".repeat(GROUPS.len() * 2));
    for (i, stage) in rows().enumerate() {
        print!("| {} |", stage.as_str());
        let mut steps = Vec::new();
        for (g, _) in GROUPS {
            let rows = &table[g];
            let at: Vec<f64> = rows.iter().filter_map(|r| r[i]).map(|x| x as f64).collect();
            let seen = at.len();
            let step: Vec<f64> = rows
                .iter()
                .filter_map(|r| {
                    let prev = r[..i].iter().rev().flatten().next()?;
                    Some(r[i]? as f64 - *prev as f64)
                })
                .collect();
            steps.push(step);
            let cell = ms(p(at, 0.5));
            if seen < rows.len() {
                print!(" {cell} ({seen}/{}) |", rows.len());
            } else {
                print!(" {cell} |");
            }
        }
        for step in steps {
            print!(" {} |", ms(p(step, 0.5)));
        }
        println!();
    }
    print!("| reply on the stream |");
    for (g, _) in GROUPS {
        print!(" {} |", ms(p(of(g).map(total).collect(), 0.5)));
    }
    for (g, _) in GROUPS {
        let step: Vec<f64> = table[g]
            .iter()
            .zip(of(g))
            .filter_map(|(r, t)| Some(total(t) - *r.iter().rev().flatten().next()? as f64))
            .collect();
        print!(" {} |", ms(p(step, 0.5)));
    }
    println!();

    // What overlapped: the capture intake's writes, late memory answers.
    println!(
        "\n| also | {} |\n|---|{}",
        GROUPS.map(|g| g.1).join(" | "),
        "---|".repeat(3)
    );
    let in_turns = |g: &'static str, f: &dyn Fn(&Event) -> bool| -> Vec<&Event> {
        events
            .iter()
            .filter(|e| e.group.as_deref() == Some(g) && f(e))
            .filter(|e| of(g).any(|t| e.at_us >= t.posted_us && e.at_us <= t.seen_us))
            .collect()
    };
    print!("| events_taken within turns (count; p50 write ms) |");
    for (g, _) in GROUPS {
        let e = in_turns(g, &|e| e.stage == "events_taken");
        let took = e
            .iter()
            .filter_map(|e| e.took_us)
            .map(|x| x as f64)
            .collect();
        print!(" {}; {} |", e.len(), ms(p(took, 0.5)));
    }
    for (what, stage) in [
        ("memory answers past the deadline", "memory_answered"),
        ("model requests whose memory was late", "memory_attached"),
    ] {
        print!("\n| {what} |");
        for (g, _) in GROUPS {
            let e = in_turns(g, &|e| e.stage == stage);
            print!(" {}/{} |", e.iter().filter(|e| e.late).count(), e.len());
        }
    }
    println!();
    for name in ["hand_over", "memory_answer", "store_reply"] {
        print!("| span `{name}` p50 ms (busy + idle) |");
        for (g, _) in GROUPS {
            let d = spans
                .iter()
                .filter(|(s, sg, _)| s == name && sg == g)
                .map(|s| s.2)
                .collect();
            print!(" {} |", ms(p(d, 0.5)));
        }
        println!();
    }
}
