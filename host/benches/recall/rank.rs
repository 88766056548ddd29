//! The rankings compared, over one data set recorded in a fresh store.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use g2_embed::{Embedder, dot};
use g2_host::memory::context::{self, Injection};
use g2_host::memory::embed;
use g2_host::memory::recall::when::Asked;
use g2_host::memory::recall::{Filters, Weights, recall_weighted, recall_with};
use g2_host::search::question;
use g2_host::store;
use std::sync::Arc;

use super::data::Dataset;
use super::layout::{self, Layout};
use super::report::{self, Report};
use super::vectors::Cache;

/// Recall's filters for a question asked at `at`, in UTC.
fn asked(at: DateTime<Utc>) -> Filters {
    Filters {
        asked: Some(Asked {
            at,
            tz: chrono_tz::Tz::UTC,
        }),
        ..Filters::default()
    }
}

/// A passage as the rankings see it.
struct Unit {
    id: i64,
    archive: i64,
    turns: (i64, i64),
    whole: String,
    parts: Vec<String>,
}

/// A passage's messages without their speaker prefixes.
fn messages(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in text.lines() {
        let speaker = line.starts_with("**")
            && line[2..].find("**").is_some_and(|i| {
                let after = &line[2 + i + 2..];
                after.starts_with(':') || after.starts_with(" (")
            });
        if speaker {
            let i = line[2..].find("**").unwrap() + 4;
            let rest = line[i..]
                .trim_start_matches(|c| c != ':')
                .trim_start_matches(':')
                .trim();
            out.push(rest.to_string());
        } else if let Some(last) = out.last_mut() {
            last.push('\n');
            last.push_str(line);
        } else {
            out.push(line.to_string());
        }
    }
    out.into_iter()
        .map(|m| m.trim().to_string())
        .filter(|m| !m.is_empty())
        .collect()
}

/// The characters of a block that keeps the first `kept` of its `of`
/// lines (the header and the kept lines; none when nothing is kept).
fn block_chars(block: &str, kept: usize, of: usize) -> usize {
    if kept == 0 {
        return 0;
    }
    let lines: Vec<&str> = block.lines().collect();
    // <g2-memory>, the header, `of` lines, </g2-memory>.
    let body: usize = lines
        .iter()
        .skip(2)
        .take(kept.min(of))
        .map(|l| l.chars().count() + 1)
        .sum();
    body + lines
        .iter()
        .take(2)
        .map(|l| l.chars().count() + 1)
        .sum::<usize>()
        + 12
}

/// Passage ids, best first, from scores (higher better).
fn order(mut scored: Vec<(f64, i64)>) -> Vec<i64> {
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    scored.into_iter().map(|s| s.1).collect()
}

/// `a` × BM25's reciprocal rank + (1 − `a`) × the cosine, over the best
/// 100 of BM25's list and of the dense one.
fn linear(
    a: f64,
    bm25: &[i64],
    bm25_score: &HashMap<i64, f64>,
    dense: &[i64],
    cos: &HashMap<i64, f64>,
) -> Vec<i64> {
    let pool: HashSet<i64> = bm25
        .iter()
        .take(100)
        .chain(dense.iter().take(100))
        .copied()
        .collect();
    order(
        pool.into_iter()
            .map(|id| {
                (
                    a * bm25_score.get(&id).copied().unwrap_or(0.0) + (1.0 - a) * cos[&id],
                    id,
                )
            })
            .collect(),
    )
}

/// Reciprocal-rank fusion of rankings with weights.
fn rrf(lists: &[(&[i64], f64)]) -> Vec<i64> {
    let mut score: HashMap<i64, f64> = HashMap::new();
    for (list, w) in lists {
        for (r, id) in list.iter().enumerate() {
            *score.entry(*id).or_default() += w / (60.0 + r as f64 + 1.0);
        }
    }
    order(score.into_iter().map(|(id, s)| (s, id)).collect())
}

/// The product's ranking with other weights, compared in the same run.
fn variants() -> Vec<(String, Weights)> {
    let s = Weights::SHIPPED;
    let mut v = vec![
        (
            "recall: lexical only".to_string(),
            Weights { lexical: 1.0, ..s },
        ),
        (
            "recall: scaled 0.3, words alike".into(),
            Weights {
                lexical: 0.3,
                idf: false,
                scaled: true,
                ..s
            },
        ),
        (
            "recall: scaled 0.5".into(),
            Weights {
                lexical: 0.5,
                scaled: true,
                ..s
            },
        ),
        ("recall: words alike".into(), Weights { idf: false, ..s }),
        ("recall: no phrase".into(), Weights { phrase: 0.0, ..s }),
        ("recall: no BM25".into(), Weights { bm25: 0.0, ..s }),
        (
            "recall: raw cosine".into(),
            Weights {
                cos_floor: 0.0,
                cos_full: 1.0,
                ..s
            },
        ),
        (
            "recall: cosine 0.1-0.7".into(),
            Weights {
                cos_floor: 0.1,
                cos_full: 0.7,
                ..s
            },
        ),
        (
            "recall: cosine 0.2-0.6".into(),
            Weights {
                cos_floor: 0.2,
                cos_full: 0.6,
                ..s
            },
        ),
    ];
    for l in [0.4, 0.5, 0.6, 0.7, 0.8] {
        v.push((format!("recall: {l} lexical"), Weights { lexical: l, ..s }));
    }
    v
}

/// Prompts no group's memory answers: what per-prompt injection should
/// leave alone.
const UNRELATED: &[&str] = &[
    "write a haiku about the sea",
    "what is the capital of France?",
    "how do I reverse a list in Python?",
    "good morning everyone!",
    "can you explain how a transformer model works?",
    "translate 'thank you very much' into Spanish",
    "what's 17 times 23?",
    "summarise the plot of Hamlet in three sentences",
    "give me a recipe for pancakes",
    "what is the difference between TCP and UDP?",
    "tell me a joke about cats",
    "how far is the Moon from the Earth?",
    "write a SQL query that counts rows per day",
    "what are good names for a golden retriever puppy?",
    "explain compound interest simply",
    "which planets have rings?",
    "draft a polite email declining a meeting",
    "how do vaccines work?",
    "what year did the Berlin Wall fall?",
    "suggest a 20 minute workout without equipment",
];

/// Per-prompt injection configurations compared: (hits, characters per
/// message).
pub const INJECTIONS: [(usize, usize); 5] = [(3, 300), (5, 300), (5, 200), (8, 200), (5, 500)];
/// Gates compared: (the best hit's, every other hit's).
pub const GATES: [(f64, f64); 10] = [
    (0.0, 0.0),
    (0.2, 0.2),
    (0.25, 0.15),
    (0.25, 0.2),
    (0.25, 0.25),
    (0.28, 0.2),
    (0.3, 0.2),
    (0.3, 0.25),
    (0.35, 0.25),
    (0.4, 0.3),
];

/// The passages' ids among `hits`, in their order.
fn passage_ids(hits: &[g2_host::memory::recall::RecallHit]) -> Vec<i64> {
    hits.iter()
        .filter(|h| h.kind == "passage")
        .map(|h| h.id)
        .collect()
}

/// The hits a block keeps under a gate: none unless the best passes it,
/// then those above the floor.
fn gated(
    hits: &[g2_host::memory::recall::RecallHit],
    (gate, floor): (f64, f64),
) -> Vec<&g2_host::memory::recall::RecallHit> {
    if hits.first().is_none_or(|h| h.score < gate) {
        return Vec::new();
    }
    hits.iter().filter(|h| h.score >= floor).collect()
}

pub fn run(
    ds: &Dataset,
    layout: Layout,
    model: &Embedder,
    cache: &mut Cache,
    product: &Arc<embed::Model>,
) {
    let home = tempfile::tempdir().unwrap();
    let store = crate::common::bench_store(home.path());
    let views = layout::record(ds, &store, layout);
    // Every view's passages, and their vectors.
    let mut units: HashMap<String, Vec<Unit>> = HashMap::new();
    let mut texts: Vec<String> = ds.questions.iter().map(|q| q.text.clone()).collect();
    for (folder, _) in &views.views {
        let key = folder.to_string();
        let folder = folder.clone();
        let rows = store
            .read_blocking(move |c| store::recall::group_passages(c, folder.as_str()))
            .unwrap();
        let us: Vec<Unit> = rows
            .into_iter()
            .map(|r| {
                let parts = messages(&r.text);
                Unit {
                    id: r.id,
                    archive: r.archive_id,
                    turns: (r.turn_start, r.turn_end),
                    whole: embed::clean(&r.text),
                    parts,
                }
            })
            .collect();
        for u in &us {
            texts.push(u.whole.clone());
            texts.extend(u.parts.iter().cloned());
        }
        units.insert(key, us);
    }
    cache.fill(model, &texts);
    // The product's vectors: what its jobs would store (the text they
    // embed, `embed::clean`), through the bench's cache so that a second
    // run embeds nothing again; the jobs' own speed is measured apart.
    loop {
        let jobs = store
            .write_blocking(|tx| store::embeddings::pending(tx, 1_000))
            .unwrap();
        if jobs.is_empty() {
            break;
        }
        let texts: Vec<String> = jobs.iter().map(|j| embed::clean(&j.text)).collect();
        cache.fill(model, &texts);
        let vectors: Vec<Vec<u8>> = texts
            .iter()
            .map(|t| g2_embed::to_bytes(cache.get(t)))
            .collect();
        let name = product.name.clone();
        store
            .write_blocking(move |tx| {
                for (j, v) in jobs.iter().zip(&vectors) {
                    store::embeddings::put(tx, j, &name, v)?;
                }
                Ok(())
            })
            .unwrap();
    }

    let names = [
        "g2 search (archives)",
        "memory::recall, embeddings off",
        "memory::recall",
        "BM25 (OR, passages)",
        "dense: exchange",
        "dense: best message",
        "RRF bm25 + dense msg w1.0",
        "RRF bm25 + dense msg w0.5",
        "RRF bm25 + dense msg w0.3",
        "BM25 top 30, dense rerank",
        "linear 0.5 bm25 + 0.5 dense",
        "linear 0.3 bm25 + 0.7 dense",
        "linear 0.3 bm25 + 0.7 dense exch",
        "RRF lexical + dense exch w1.0",
        "RRF lexical + dense exch w0.5",
        "norm 0.3 lexical + 0.7 dense exch",
        "norm 0.5 lexical + 0.5 dense exch",
        "norm 0.6 lexical + 0.4 dense exch",
        "norm 0.7 lexical + 0.3 dense exch",
        "norm 0.8 lexical + 0.2 dense exch",
    ];
    let variants = variants();
    let names: Vec<String> = names
        .iter()
        .map(ToString::to_string)
        .chain(variants.iter().map(|v| v.0.clone()))
        .collect();
    let mut r = Report::new(ds, layout, &views, names);
    let inject = |folder: &g2_core::validate::GroupFolder,
                  text: &str,
                  at: DateTime<Utc>,
                  (hits, message_chars): (usize, usize)| {
        let how = Injection {
            hits,
            gate: f64::MIN,
            floor: f64::MIN,
            message_chars,
        };
        let (g, t) = (folder.clone(), text.to_string());
        store
            .read_blocking(move |c| context::prompt_memory_with(c, &g, &t, 500, &how, &asked(at)))
            .unwrap()
    };
    for (q, folder) in ds.questions.iter().zip(&views.folder) {
        let recorded = |s: &String| &views.sessions[&(folder.clone(), s.clone())];
        let answer_sessions: HashSet<&str> = q.evidence.iter().map(|(s, _)| s.as_str()).collect();
        let answer_archives: HashSet<i64> = q.evidence.iter().map(|(s, _)| recorded(s).0).collect();
        let answer_messages: HashSet<(i64, i64)> = q
            .evidence
            .iter()
            .flat_map(|(s, e)| {
                let (a, m) = recorded(s);
                m[*e].iter().map(move |i| (*a, *i))
            })
            .collect();
        let us = &units[folder.as_str()];
        let by_id: HashMap<i64, &Unit> = us.iter().map(|u| (u.id, u)).collect();
        // A session ranks by its best passage.
        let judge = |passages: &[i64]| -> (Option<usize>, bool) {
            let mut sessions: Vec<&str> = Vec::new();
            for p in passages {
                let u = by_id[p];
                for s in views.sessions_of(u.archive, u.turns) {
                    if !sessions.contains(&s) {
                        sessions.push(s);
                    }
                }
            }
            let rank = sessions.iter().position(|s| answer_sessions.contains(s));
            let turn = passages.iter().take(5).any(|p| {
                let u = by_id[p];
                (u.turns.0..=u.turns.1).any(|m| answer_messages.contains(&(u.archive, m)))
            });
            (rank, turn)
        };
        let mut results: Vec<(Option<usize>, bool)> = Vec::new();

        // g2 search: archives.
        let hits = store
            .read_blocking({
                let (t, g) = (q.text.clone(), folder.to_string());
                move |c| g2_host::search::search(c, &t, Some(&g), 10)
            })
            .unwrap_or_default();
        let order_a: Vec<i64> = hits.iter().map(|h| h.archive_id).collect();
        results.push((
            order_a.iter().position(|a| answer_archives.contains(a)),
            false,
        ));

        // The product, lexical (no model installed) and as it ships.
        let ask = || {
            store
                .read_blocking({
                    let (t, g, f) = (q.text.clone(), folder.clone(), asked(q.asked));
                    move |c| recall_with(c, &g, &t, 50, &f)
                })
                .unwrap()
        };
        embed::install(None);
        let hits = ask();
        embed::install(Some(product.clone()));
        let ids = passage_ids(&hits);
        results.push(judge(&ids));
        results.push(judge(&passage_ids(&ask())));

        // BM25.
        let bm25: Vec<i64> = match question::read(&q.text) {
            Some(qq) => {
                let g = folder.to_string();
                store
                    .read_blocking(move |c| {
                        store::recall::bm25_passages(c, &qq.fts, [g.as_str(), "global"], 200)
                    })
                    .unwrap()
                    .into_iter()
                    .map(|r| r.id)
                    .collect()
            }
            None => Vec::new(),
        };
        let bm25_score: HashMap<i64, f64> = bm25
            .iter()
            .enumerate()
            .map(|(r, id)| (*id, 1.0 / (1.0 + r as f64)))
            .collect();
        results.push(judge(&bm25));

        // Dense.
        let qv = cache.get(&q.text);
        let cos_whole: HashMap<i64, f64> = us
            .iter()
            .map(|u| (u.id, f64::from(dot(qv, cache.get(&u.whole)))))
            .collect();
        let whole: Vec<(f64, i64)> = cos_whole.iter().map(|(id, s)| (*s, *id)).collect();
        let best: Vec<(f64, i64)> = us
            .iter()
            .map(|u| {
                let m = u
                    .parts
                    .iter()
                    .map(|p| dot(qv, cache.get(p)))
                    .fold(f32::MIN, f32::max);
                (f64::from(m), u.id)
            })
            .collect();
        let cos: HashMap<i64, f64> = best.iter().map(|(s, id)| (*id, *s)).collect();
        let dense_whole = order(whole);
        let dense_best = order(best);
        results.push(judge(&dense_whole));
        results.push(judge(&dense_best));
        for w in [1.0, 0.5, 0.3] {
            results.push(judge(&rrf(&[(&bm25, 1.0), (&dense_best, w)])));
        }
        // Rerank BM25's best 30 by cosine plus a little of BM25's rank.
        let mut rr: Vec<(f64, i64)> = bm25
            .iter()
            .take(30)
            .enumerate()
            .map(|(r, id)| (cos[id] + 0.5 / (1.0 + r as f64), *id))
            .collect();
        let rest: Vec<i64> = bm25.iter().skip(30).copied().collect();
        rr.sort_by(|a, b| b.0.total_cmp(&a.0));
        let mut reranked: Vec<i64> = rr.into_iter().map(|x| x.1).collect();
        reranked.extend(rest);
        if reranked.is_empty() {
            reranked = dense_best.clone();
        }
        results.push(judge(&reranked));
        for a in [0.5, 0.3] {
            results.push(judge(&linear(a, &bm25, &bm25_score, &dense_best, &cos)));
        }
        results.push(judge(&linear(
            0.3,
            &bm25,
            &bm25_score,
            &dense_whole,
            &cos_whole,
        )));
        for w in [1.0, 0.5] {
            results.push(judge(&rrf(&[(&ids, 1.0), (&dense_whole, w)])));
        }
        // Min-max normalised product score and cosine over both pools.
        let rec: HashMap<i64, f64> = hits
            .iter()
            .filter(|h| h.kind == "passage")
            .map(|h| (h.id, h.score))
            .collect();
        for a in [0.3, 0.5, 0.6, 0.7, 0.8] {
            let pool: Vec<i64> = ids
                .iter()
                .take(100)
                .chain(dense_whole.iter().take(100))
                .copied()
                .collect::<HashSet<_>>()
                .into_iter()
                .collect();
            let norm = |m: &HashMap<i64, f64>| {
                let vals: Vec<f64> = pool.iter().filter_map(|id| m.get(id).copied()).collect();
                let lo = vals.iter().copied().fold(f64::MAX, f64::min);
                let hi = vals.iter().copied().fold(f64::MIN, f64::max);
                move |v: Option<f64>| {
                    v.map_or(0.0, |v| if hi > lo { (v - lo) / (hi - lo) } else { 1.0 })
                }
            };
            let (nr, nc) = (norm(&rec), norm(&cos_whole));
            let s = pool
                .iter()
                .map(|id| {
                    (
                        a * nr(rec.get(id).copied()) + (1.0 - a) * nc(cos_whole.get(id).copied()),
                        *id,
                    )
                })
                .collect();
            results.push(judge(&order(s)));
        }
        for (_, w) in &variants {
            let (t, g, w, f) = (q.text.clone(), folder.clone(), *w, asked(q.asked));
            let hits = store
                .read_blocking(move |c| recall_weighted(c, &g, &t, 50, &f, &w))
                .unwrap();
            results.push(judge(&passage_ids(&hits)));
        }
        // Per-prompt injection: does the block hold an answering turn?
        let answers = |h: &g2_host::memory::recall::RecallHit| {
            h.kind == "passage"
                && by_id.get(&h.id).is_some_and(|u| {
                    (u.turns.0..=u.turns.1).any(|m| answer_messages.contains(&(u.archive, m)))
                })
        };
        let mut held = [[false; GATES.len()]; INJECTIONS.len()];
        for (i, how) in INJECTIONS.iter().enumerate() {
            let m = inject(folder, &q.text, q.asked, *how);
            if i == 1 {
                r.top_scores
                    .push(m.hits.first().map_or(f64::MIN, |h| h.score));
            }
            for (k, gate) in GATES.iter().enumerate() {
                let kept = gated(&m.hits, *gate);
                held[i][k] = kept.iter().any(|h| answers(h));
                r.chars[i][k] += block_chars(&m.block, kept.len(), m.hits.len());
            }
        }
        r.add(&q.kind, &results, &held);
    }
    // Unrelated prompts, asked in every group (as its last question is).
    for (folder, at) in &views.unrelated {
        for p in UNRELATED {
            r.unrelated_n += 1;
            for (i, how) in INJECTIONS.iter().enumerate() {
                let m = inject(folder, p, *at, *how);
                if i == 1 {
                    r.unrelated_top
                        .push(m.hits.first().map_or(f64::MIN, |h| h.score));
                }
                for (k, gate) in GATES.iter().enumerate() {
                    r.noisy[i][k] += usize::from(!gated(&m.hits, *gate).is_empty());
                }
            }
        }
    }
    report::print(&r);
}
