//! Recall quality, on every data set, for every ranking compared, in one
//! run; and recall latency.
//!
//! **Quality.** Each data set (`recall/data.rs`: MemoryBank, a
//! LongMemEval_S subset, and a generated set) is recorded as the host
//! records archives: each group one g2 group, each session one archive
//! (`store::archives::insert`, passages of one exchange included) made
//! when the session began. Each question is asked in its group; for each ranking:
//! the share of questions whose session is ranked first and in the top 5
//! (a session ranks by its best passage), and whose answering exchange is
//! among the top 5 passages. Rankings compared: `g2 search` (archives),
//! `memory::recall` (the product), BM25 alone (FTS5 over passages, `OR`
//! of the content words), dense alone (all-MiniLM-L6-v2, the whole
//! exchange or its best message), reciprocal-rank fusions and dense
//! reranking of BM25's candidates (`recall/rank.rs`).
//!
//! **Latency.** `memory::recall` over one group of 10,000 archives (20
//! exchanges each, drawn with a seeded PRNG from MemoryBank), every
//! question asked 10 times: p50/p99.
//!
//! **Dates.** Every message is dated (`Transcript::times`: its session's
//! date and a minute a message), and every question is asked at a time
//! (`Filters::asked`, UTC): the date a data set gives it, else the day
//! after its group's last session; it sees only the sessions dated on or
//! before that day (`G2_BENCH_LATER=show`: every session).
//! `G2_BENCH_LAYOUT=conversation` records each group's sessions (those a
//! question sees) as one archive, in date order, instead of one archive
//! each (`session`, the default; `recall/layout.rs`). Every figure is also
//! given by the questions' kind.
//!
//! `cargo bench -p g2-host --bench recall` (`G2_BENCH_ARCHIVES`, default
//! 10,000; `G2_BENCH_ONLY=quality` or `latency` runs one part, `ranking`
//! the rankings alone; `G2_BENCH_SET=memorybank` or another set's name
//! ranks on that set alone; `G2_BENCH_STORE=postgres` runs it on
//! PostgreSQL; `G2_REALTALK_DIR` adds REALTALK). The model is
//! `tools/models/all-minilm-l6-v2` (`scripts/setup.sh`) or `$G2_EMBED_MODEL`.

// Tests and benches fail loudly: an unwrap is the assertion.
#![allow(clippy::unwrap_used)]

mod common;
#[path = "recall/data.rs"]
mod data;
#[path = "recall/layout.rs"]
mod layout;
#[path = "recall/rank.rs"]
mod rank;
#[path = "recall/report.rs"]
mod report;
#[path = "recall/vectors.rs"]
mod vectors;

use std::path::PathBuf;
use std::time::Instant;

use chrono::{DateTime, Utc};
use common::{Samples, env_or, fmt_dur, project_root};
use g2_core::archive::{self, ArchiveOptions};
use g2_core::transcript::{Entry, Span, Transcript};
use g2_core::validate::GroupFolder;
use g2_host::archives::{Prepared, Trigger};
use g2_host::memory::recall::recall;
use g2_host::store::Store;

pub fn slug(name: &str) -> GroupFolder {
    let s: String = name
        .trim()
        .to_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    GroupFolder::new(s.trim_matches('-')).unwrap()
}

/// Appends a session's exchanges to `t`, its `i`-th message said at
/// `start` + `i` minutes (`Transcript::times`); each exchange's message
/// indices (an empty text is left out of an archive).
pub fn append(
    t: &mut Transcript,
    exchanges: &[(String, String)],
    start: DateTime<Utc>,
) -> Vec<Vec<i64>> {
    let mut messages = Vec::new();
    let mut minute = 0;
    for (q, r) in exchanges {
        let mut idx = Vec::new();
        for (text, user) in [(q, true), (r, false)] {
            if text.trim().is_empty() {
                continue;
            }
            idx.push(t.entries.len() as i64);
            t.entries.push(if user {
                Entry::User(vec![text.clone()])
            } else {
                Entry::Assistant(vec![text.clone()])
            });
            let at = start + chrono::Duration::minutes(minute);
            t.times.push(Some(Span {
                first: at,
                last: at,
            }));
            minute += 1;
        }
        messages.push(idx);
    }
    messages
}

/// A transcript as an archive made at `at` (in UTC, as a timezone the
/// archive names its days in): its title and markdown.
pub fn markdown(t: &Transcript, at: DateTime<Utc>) -> (String, String) {
    let now = at.with_timezone(&chrono_tz::UTC);
    let opts = ArchiveOptions {
        max_message_chars: 100_000,
        ..ArchiveOptions::default()
    };
    let title = archive::title_with(None, t, &now, &opts);
    let body = archive::render(&title, t, &now, &opts);
    (title, body)
}

/// A session's exchanges as an archive made when the session began, its
/// messages dated from then: its title, markdown, and each exchange's
/// message indices.
pub fn render(exchanges: &[(String, String)], date: &str) -> (String, String, Vec<Vec<i64>>) {
    let mut t = Transcript::default();
    let messages = append(&mut t, exchanges, utc(date));
    let (title, body) = markdown(&t, utc(date));
    (title, body, messages)
}

/// `YYYY-MM-DD HH:MM` (UTC; noon without a time) as an instant.
pub fn utc(date: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(&rfc3339(date))
        .unwrap()
        .with_timezone(&Utc)
}

/// `YYYY-MM-DD HH:MM` as RFC 3339 (UTC).
pub fn rfc3339(date: &str) -> String {
    format!(
        "{}T{}:00.000Z",
        &date[..10],
        date.get(11..16).unwrap_or("12:00")
    )
}

pub fn record(store: &Store, batch: Vec<Prepared>) -> Vec<i64> {
    store
        .write_blocking(move |tx| {
            batch
                .iter()
                .map(|p| Ok(g2_host::store::archives::insert(tx, p)?.id))
                .collect()
        })
        .unwrap()
}

pub fn prepared(
    group: &GroupFolder,
    n: usize,
    date: &str,
    title: String,
    body: String,
) -> Prepared {
    let day = &date[..10];
    Prepared {
        group: group.clone(),
        session_id: Some(format!("{group}-{n}")),
        title,
        file_name: format!("{day}-{n}.md"),
        rel_path: format!("groups/{group}/conversations/{day}-{n}.md"),
        body,
        trigger: Trigger::Manual,
        created_at: rfc3339(date),
        stats: Default::default(),
        pending: false,
    }
}

fn model_dir() -> PathBuf {
    std::env::var_os("G2_EMBED_MODEL")
        .map(PathBuf::from)
        .unwrap_or_else(|| project_root().join("tools/models/all-minilm-l6-v2"))
}

fn main() {
    g2_host::memory::embed::use_every_core();
    let model = g2_embed::Embedder::load(&model_dir()).unwrap_or_else(|e| {
        panic!("the recall bench needs the embedding model (scripts/setup.sh): {e}")
    });
    let cache_path = project_root().join("target/recall-bench-vectors.bin");
    let mut cache = vectors::Cache::open(cache_path, model.dims());
    let settings = g2_host::config::MemorySettings {
        embedding_model: Some(model_dir()),
        ..Default::default()
    };
    let g2_host::memory::embed::Loaded::Model(product) =
        g2_host::memory::embed::load(&project_root(), &settings)
    else {
        panic!("the product could not load the model")
    };
    let sets = data::all(&project_root());
    let only = std::env::var("G2_BENCH_ONLY").unwrap_or_default();
    let set = std::env::var("G2_BENCH_SET")
        .unwrap_or_default()
        .to_lowercase();
    let layout = layout::Layout::from_env();
    let mut all_exchanges = Vec::new();
    for ds in &sets {
        if ds.name == "MemoryBank" {
            all_exchanges = ds
                .groups
                .iter()
                .flat_map(|g| &g.sessions)
                .flat_map(|s| s.exchanges.clone())
                .collect();
        }
        if only != "latency" && ds.name.to_lowercase().contains(&set) {
            rank::run(ds, layout, &model, &mut cache, &product);
        }
    }
    if only == "ranking" {
        return;
    }
    if only == "latency" {
        g2_host::memory::embed::install(Some(product.clone()));
        latency(&all_exchanges);
        return;
    }
    if cache.embedded > 0 {
        println!(
            "embedding throughput: {} texts in {:.1} s, {:.1} per second",
            cache.embedded,
            cache.seconds,
            cache.embedded as f64 / cache.seconds
        );
    }
    supersession(&model);
    throughput(&product, &all_exchanges);
    if only == "quality" {
        return;
    }
    latency(&all_exchanges);
}

/// The embedding jobs' speed, as the host runs them (`embed::run_once`,
/// on their own pool): 40 archives of 16 MemoryBank exchanges each.
fn throughput(
    product: &std::sync::Arc<g2_host::memory::embed::Model>,
    exchanges: &[(String, String)],
) {
    let home = tempfile::tempdir().unwrap();
    let store = common::bench_store(home.path());
    let g = GroupFolder::new("jobs").unwrap();
    let batch: Vec<Prepared> = (0..40)
        .map(|i| {
            let ex: Vec<(String, String)> =
                exchanges.iter().skip(i * 16).take(16).cloned().collect();
            let (title, body, _) = render(&ex, "2026-01-01 12:00");
            prepared(&g, i, "2026-01-01 12:00", title, body)
        })
        .collect();
    record(&store, batch);
    let t = Instant::now();
    let mut n = 0;
    loop {
        let k = g2_host::memory::embed::run_once(&store, product).unwrap();
        if k == 0 {
            break;
        }
        n += k;
    }
    let secs = t.elapsed().as_secs_f64();
    println!(
        "embedding jobs: {n} passages (MemoryBank exchanges) in {secs:.1} s, {:.1} per second",
        n as f64 / secs
    );
}

/// Observations de-duplicated by meaning: for each threshold, how many of
/// the labelled pairs (`data/supersede/pairs.jsonl`) a new observation
/// would supersede the old one of, by what the pair is.
fn supersession(model: &g2_embed::Embedder) {
    let text =
        std::fs::read_to_string(project_root().join("host/benches/data/supersede/pairs.jsonl"))
            .unwrap();
    let pairs: Vec<serde_json::Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let cos: Vec<(String, f32)> = pairs
        .iter()
        .map(|p| {
            let v = model
                .embed(&[p["old"].as_str().unwrap(), p["new"].as_str().unwrap()])
                .unwrap();
            (
                p["note"].as_str().unwrap().to_string(),
                g2_embed::dot(&v[0], &v[1]),
            )
        })
        .collect();
    let n = |note: &str| cos.iter().filter(|c| c.0 == note).count();
    println!(
        "observation supersession ({} pairs: {} restatements, {} updates, {} different)",
        cos.len(),
        n("restatement"),
        n("update"),
        n("different")
    );
    println!("  threshold  restatements  updates  different (wrongly superseded)");
    for t in [0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95] {
        let k = |note: &str| cos.iter().filter(|c| c.0 == note && c.1 >= t).count();
        println!(
            "  {t:9.2}  {:12}  {:7}  {:9}",
            k("restatement"),
            k("update"),
            k("different")
        );
    }
    let mut diff: Vec<f32> = cos
        .iter()
        .filter(|c| c.0 == "different")
        .map(|c| c.1)
        .collect();
    diff.sort_by(f32::total_cmp);
    println!(
        "  highest cosine of a different pair: {:.3}",
        diff.last().unwrap_or(&0.0)
    );
}

fn latency(all_exchanges: &[(String, String)]) {
    let home = tempfile::tempdir().unwrap();
    let store = common::bench_store(home.path());
    let n_archives: usize = env_or("G2_BENCH_ARCHIVES", 10_000);
    let big = GroupFolder::new("big").unwrap();
    let mut rng = common::Rng::default();
    let mut next = move || rng.next();
    let t = Instant::now();
    let mut batch = Vec::new();
    for i in 0..n_archives {
        let ex: Vec<(String, String)> = (0..20)
            .map(|_| all_exchanges[(next() % all_exchanges.len() as u64) as usize].clone())
            .collect();
        let day = chrono::NaiveDate::from_ymd_opt(2020, 1, 1).unwrap()
            + chrono::Days::new((i / 10) as u64);
        let date = format!("{} 12:00", day.format("%Y-%m-%d"));
        let (title, body, _) = render(&ex, &date);
        batch.push(prepared(&big, i, &date, title, body));
        if batch.len() == 500 || i + 1 == n_archives {
            record(&store, std::mem::take(&mut batch));
        }
    }
    eprintln!(
        "{n_archives} archives recorded in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    // Vectors for every passage: random unit vectors (embedding 200,000
    // passages would take the bench an hour; their values do not change
    // the cost of comparing them).
    let dims = g2_host::memory::embed::model().map_or(384, |m| m.embedder.dims());
    let name = g2_host::memory::embed::model().map_or_else(String::new, |m| m.name.clone());
    common::unit_vectors(&store, dims, &name, &mut next);
    let questions: Vec<String> = data::all(&project_root())
        .into_iter()
        .next()
        .unwrap()
        .questions
        .into_iter()
        .map(|q| q.text)
        .collect();
    // The question's vector alone, then recall without and with the model
    // (the copy of the group's vectors read once before).
    let model = g2_host::memory::embed::model();
    let embed_only = |q: &str| {
        let m = model.as_ref().unwrap();
        let t = Instant::now();
        m.embedder.embed_one(q).unwrap();
        t.elapsed()
    };
    let run = |label: &str, with_model: bool| {
        g2_host::memory::embed::install(if with_model { model.clone() } else { None });
        let mut samples = Vec::new();
        store
            .read_blocking(|c| {
                recall(c, &big, "warm the copy", 10)?;
                for _ in 0..10 {
                    for q in &questions {
                        let t = Instant::now();
                        let hits = recall(c, &big, q, 10)?;
                        samples.push(t.elapsed());
                        assert!(hits.len() <= 10);
                    }
                }
                Ok(())
            })
            .unwrap();
        let s = Samples::of(samples);
        println!(
            "recall latency over {n_archives} archives in one group ({} questions), {label}: p50 {}  p99 {}",
            s.n(),
            fmt_dur(s.at(0.5)),
            fmt_dur(s.at(0.99))
        );
    };
    if model.is_some() {
        let s = Samples::of(questions.iter().map(|q| embed_only(q)).collect());
        println!(
            "a question's embedding ({} questions): p50 {}  p99 {}",
            s.n(),
            fmt_dur(s.at(0.5)),
            fmt_dur(s.at(0.99))
        );
    }
    run("words only", false);
    run("words and meaning, the question embedded", true);
}
