//! Recall quality and latency.
//!
//! **Quality.** MemoryBank's English evaluation data (15 people, each 10
//! days of conversation with an assistant, and 100 questions asked later;
//! MIT, in `../shared/fixtures/memory/memorybank` or `$G2_MEMORY_FIXTURES`)
//! with our labels of the day and exchange that answer each question
//! (`benches/data/memorybank_labels.jsonl`, how they were made in
//! `memorybank_labels.md`). Each person is a group, each day one archive
//! (a session, archived at noon that day) rendered and recorded as the host
//! records archives (`store::archives::insert`: passages included). Each
//! question is asked in its person's group; reported, in one run:
//! - `g2 search` (any word finds; every word, then phrases, rank first);
//! - a baseline that ranks archives, and passages, by how many of the
//!   question's distinct words they contain;
//! - `memory::recall`.
//!
//! For each: the share of questions whose session (day) is ranked first,
//! in the top 5, and whose exchange is among the top 5 passages. A
//! question whose answer is in no exchange is left out.
//!
//! **Latency.** `memory::recall` over one group of 10,000 archives (20
//! exchanges each, drawn with a seeded PRNG from the same conversations),
//! every question asked 10 times: p50/p99.
//!
//! `cargo bench -p g2-host --bench recall` (`G2_BENCH_ARCHIVES`, default
//! 10,000).

// Tests and benches fail loudly: an unwrap is the assertion.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::Value;

use common::{Samples, env_or, fmt_dur, project_root};
use g2_core::archive::{self, ArchiveOptions};
use g2_core::transcript::{Entry, Transcript};
use g2_core::validate::GroupFolder;
use g2_host::archives::{Prepared, Trigger};
use g2_host::memory::recall::recall;
use g2_host::store::Store;

/// One archived day: its exchanges' message indices in the archive.
struct Day {
    archive_id: i64,
    /// Exchange number → the archive's message indices it became.
    messages: Vec<Vec<i64>>,
}

struct Question {
    group: GroupFolder,
    text: String,
    /// (day, exchange) pairs that answer it.
    evidence: Vec<(String, usize)>,
}

fn fixtures() -> PathBuf {
    std::env::var_os("G2_MEMORY_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| project_root().join("../shared/fixtures/memory/memorybank"))
}

fn slug(name: &str) -> GroupFolder {
    let s: String = name
        .trim()
        .to_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    GroupFolder::new(s).unwrap()
}

/// A day's exchanges as an archive: its markdown, and each exchange's
/// message indices (an empty text is left out of an archive).
fn render_day(exchanges: &[(String, String)], day: &str) -> (String, String, Vec<Vec<i64>>) {
    let mut t = Transcript::default();
    let mut messages = Vec::new();
    let mut next = 0;
    for (q, r) in exchanges {
        let mut idx = Vec::new();
        for (text, user) in [(q, true), (r, false)] {
            if text.trim().is_empty() {
                continue;
            }
            t.entries.push(if user {
                Entry::User(vec![text.clone()])
            } else {
                Entry::Assistant(vec![text.clone()])
            });
            idx.push(next);
            next += 1;
        }
        messages.push(idx);
    }
    let now = chrono::DateTime::parse_from_rfc3339(&format!("{day}T12:00:00+00:00")).unwrap();
    let opts = ArchiveOptions {
        max_message_chars: 100_000,
        ..ArchiveOptions::default()
    };
    let title = archive::title_with(None, &t, &now, &opts);
    (
        title.clone(),
        archive::render(&title, &t, &now, &opts),
        messages,
    )
}

fn record(store: &Store, group: &GroupFolder, n: usize, day: &str, title: &str, body: &str) -> i64 {
    let p = Prepared {
        group: group.clone(),
        session_id: Some(format!("{group}-{n}")),
        title: title.to_string(),
        file_name: format!("{day}-{n}.md"),
        rel_path: format!("groups/{group}/conversations/{day}-{n}.md"),
        body: body.to_string(),
        trigger: Trigger::Manual,
        created_at: format!("{day}T12:00:00.000Z"),
        stats: Default::default(),
        pending: false,
    };
    store
        .write_blocking(move |tx| Ok(g2_host::store::archives::insert(tx, &p)?.id))
        .unwrap()
}

fn lower_words(text: &str) -> HashSet<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

#[derive(Default)]
struct Tally {
    n: usize,
    session_first: usize,
    session_top5: usize,
    turn_top5: usize,
}

impl Tally {
    fn add(&mut self, session_rank: Option<usize>, turn_in_top5: Option<bool>) {
        self.n += 1;
        if session_rank == Some(0) {
            self.session_first += 1;
        }
        if session_rank.is_some_and(|r| r < 5) {
            self.session_top5 += 1;
        }
        if turn_in_top5 == Some(true) {
            self.turn_top5 += 1;
        }
    }

    fn pct(&self, k: usize) -> String {
        format!("{:5.1}%", 100.0 * k as f64 / self.n.max(1) as f64)
    }
}

fn main() {
    let dir = fixtures();
    let bank: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("memory_bank_en.json")).unwrap())
            .unwrap();
    let home = tempfile::tempdir().unwrap();
    let store = Store::open(&home.path().join("g2.db"), Duration::from_secs(5)).unwrap();

    // Every person's days, recorded as archives.
    let mut days: HashMap<(String, String), Day> = HashMap::new();
    let mut texts: BTreeMap<(String, i64), (String, Vec<String>)> = BTreeMap::new();
    let mut all_exchanges: Vec<(String, String)> = Vec::new();
    for (name, person) in bank.as_object().unwrap() {
        let group = slug(name);
        for (n, (day, list)) in person["history"].as_object().unwrap().iter().enumerate() {
            let exchanges: Vec<(String, String)> = list
                .as_array()
                .unwrap()
                .iter()
                .map(|e| {
                    (
                        e["query"].as_str().unwrap_or("").to_string(),
                        e["response"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect();
            all_exchanges.extend(exchanges.iter().cloned());
            let (title, body, messages) = render_day(&exchanges, day);
            let archive_id = record(&store, &group, n, day, &title, &body);
            let turns: Vec<String> = exchanges.iter().map(|(q, r)| format!("{q}\n{r}")).collect();
            texts.insert((group.to_string(), archive_id), (body, turns));
            days.insert(
                (name.trim().to_string(), day.clone()),
                Day {
                    archive_id,
                    messages,
                },
            );
        }
    }

    // The questions and their labels, checked against the source.
    let source: HashMap<String, Vec<String>> =
        std::fs::read_to_string(dir.join("probing_questions_en.jsonl"))
            .unwrap()
            .lines()
            .filter(|l| !l.trim().is_empty())
            .flat_map(|l| {
                let v: HashMap<String, Vec<String>> = serde_json::from_str(l).unwrap();
                v.into_iter()
            })
            .map(|(k, v)| (k.trim().to_string(), v))
            .collect();
    let labels =
        std::fs::read_to_string(project_root().join("host/benches/data/memorybank_labels.jsonl"))
            .unwrap();
    let mut questions = Vec::new();
    let mut unanswerable = 0;
    for line in labels.lines().filter(|l| !l.trim().is_empty()) {
        let l: Value = serde_json::from_str(line).unwrap();
        let person = l["person"].as_str().unwrap().trim().to_string();
        let q = l["q"].as_u64().unwrap() as usize;
        let text = l["question"].as_str().unwrap().to_string();
        assert_eq!(source[&person][q], text, "label of {person} q{q}");
        let evidence: Vec<(String, usize)> = l["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["day"].as_str().unwrap().to_string(),
                    e["turn"].as_u64().unwrap() as usize,
                )
            })
            .collect();
        for (day, turn) in &evidence {
            let d = &days[&(person.clone(), day.clone())];
            assert!(*turn < d.messages.len(), "{person} {day} turn {turn}");
        }
        if evidence.is_empty() {
            unanswerable += 1;
            continue;
        }
        questions.push((
            person.clone(),
            Question {
                group: slug(&person),
                text,
                evidence,
            },
        ));
    }

    let (mut today, mut count_words, mut recalled) =
        (Tally::default(), Tally::default(), Tally::default());
    for (person, q) in &questions {
        let answer_archives: HashSet<i64> = q
            .evidence
            .iter()
            .map(|(d, _)| days[&(person.clone(), d.clone())].archive_id)
            .collect();
        let answer_messages: HashSet<(i64, i64)> = q
            .evidence
            .iter()
            .flat_map(|(d, t)| {
                let day = &days[&(person.clone(), d.clone())];
                day.messages[*t].iter().map(move |m| (day.archive_id, *m))
            })
            .collect();
        let rank_of = |order: &[i64]| order.iter().position(|a| answer_archives.contains(a));

        // g2 search: archives, every word and phrases first.
        let hits = store
            .read_blocking({
                let (text, g) = (q.text.clone(), q.group.to_string());
                move |c| g2_host::search::search(c, &text, Some(&g), 10)
            })
            .unwrap_or_default();
        let order: Vec<i64> = hits.iter().map(|h| h.archive_id).collect();
        today.add(rank_of(&order), None);

        // Count the question's words: archives, and exchanges.
        let qw = lower_words(&q.text);
        let mut archives: Vec<(usize, i64)> = texts
            .iter()
            .filter(|((g, _), _)| *g == q.group.as_str())
            .map(|((_, id), (body, _))| (lower_words(body).intersection(&qw).count(), *id))
            .collect();
        archives.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let order: Vec<i64> = archives.iter().map(|a| a.1).collect();
        let mut turns: Vec<(usize, i64, usize)> = texts
            .iter()
            .filter(|((g, _), _)| *g == q.group.as_str())
            .flat_map(|((_, id), (_, ts))| {
                ts.iter()
                    .enumerate()
                    .map(|(i, t)| (lower_words(t).intersection(&qw).count(), *id, i))
            })
            .collect();
        turns.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
        let turn_hit = turns.iter().take(5).any(|(_, id, i)| {
            q.evidence
                .iter()
                .any(|(d, t)| days[&(person.clone(), d.clone())].archive_id == *id && t == i)
        });
        count_words.add(rank_of(&order), Some(turn_hit));

        // Recall.
        let hits = store
            .read_blocking({
                let (text, g) = (q.text.clone(), q.group.clone());
                move |c| recall(c, &g, &text, 50)
            })
            .unwrap();
        let mut order: Vec<i64> = Vec::new();
        for id in hits.iter().filter_map(|h| h.archive_id) {
            if !order.contains(&id) {
                order.push(id);
            }
        }
        let turn_hit =
            hits.iter()
                .take(5)
                .any(|h| match (h.archive_id, h.turn_start, h.turn_end) {
                    (Some(a), Some(s), Some(e)) => {
                        (s..=e).any(|m| answer_messages.contains(&(a, m)))
                    }
                    _ => false,
                });
        recalled.add(rank_of(&order), Some(turn_hit));
        if std::env::var_os("G2_BENCH_VERBOSE").is_some() && rank_of(&order) != Some(0) {
            eprintln!(
                "miss: {person}: {} → {:?}",
                q.text,
                hits.first().map(|h| &h.snippet)
            );
        }
    }

    println!(
        "recall quality: MemoryBank, {} questions with an answer ({unanswerable} without), 15 groups of 10 sessions",
        questions.len()
    );
    println!(
        "  {:<34} {:>14} {:>14} {:>14}",
        "", "session first", "session top 5", "turn top 5"
    );
    for (name, t, turns) in [
        ("g2 search", &today, false),
        ("count the question's words", &count_words, true),
        ("memory::recall", &recalled, true),
    ] {
        println!(
            "  {name:<34} {:>14} {:>14} {:>14}",
            t.pct(t.session_first),
            t.pct(t.session_top5),
            if turns {
                t.pct(t.turn_top5)
            } else {
                "–".into()
            }
        );
    }

    // Latency over a large group.
    let n_archives: usize = env_or("G2_BENCH_ARCHIVES", 10_000);
    let big = GroupFolder::new("big").unwrap();
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let t = Instant::now();
    let mut batch = Vec::new();
    for i in 0..n_archives {
        let ex: Vec<(String, String)> = (0..20)
            .map(|_| all_exchanges[(next() % all_exchanges.len() as u64) as usize].clone())
            .collect();
        let day = chrono::NaiveDate::from_ymd_opt(2020, 1, 1).unwrap()
            + chrono::Days::new((i / 10) as u64);
        let day = day.format("%Y-%m-%d").to_string();
        let (title, body, _) = render_day(&ex, &day);
        batch.push(Prepared {
            group: big.clone(),
            session_id: Some(format!("big-{i}")),
            title,
            file_name: format!("{day}-{i}.md"),
            rel_path: format!("groups/big/conversations/{day}-{i}.md"),
            body,
            trigger: Trigger::Manual,
            created_at: format!("{day}T12:00:00.000Z"),
            stats: Default::default(),
            pending: false,
        });
        if batch.len() == 500 || i + 1 == n_archives {
            let b = std::mem::take(&mut batch);
            store
                .write_blocking(move |tx| {
                    for p in &b {
                        g2_host::store::archives::insert(tx, p)?;
                    }
                    Ok(())
                })
                .unwrap();
        }
    }
    eprintln!(
        "{n_archives} archives recorded in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let mut samples = Vec::new();
    store
        .read_blocking(|c| {
            for _ in 0..10 {
                for (_, q) in &questions {
                    let t = Instant::now();
                    let hits = recall(c, &big, &q.text, 10)?;
                    samples.push(t.elapsed());
                    assert!(hits.len() <= 10);
                }
            }
            Ok(())
        })
        .unwrap();
    let s = Samples::of(samples);
    println!(
        "recall latency over {n_archives} archives in one group ({} questions): p50 {}  p99 {}",
        s.n(),
        fmt_dur(s.at(0.5)),
        fmt_dur(s.at(0.99))
    );
}
