//! Recall: the one function behind every memory read (`g2 memory search`,
//! the agents' memory tools, per-prompt injection, the viewer and the HTTP
//! search). A question in people's words goes in; ranked hits with their
//! provenance and day come out, from the group's own memory (and
//! `global`'s) only. Why it ranks as it does, and what that measures:
//! docs/recall.md.
//!
//! Sources: archive passages (one exchange each, `search::passages`),
//! observations, session summaries, and captured prompts no archive holds
//! yet. Three steps:
//! 1. **Candidates by words.** FTS5 finds the passages holding any of the
//!    question's content words (`search::question`) that is not common
//!    (`search::COMMON`), ranked by BM25 among the newest
//!    `store::recall::SCAN` that match; when every word is common, the
//!    newest passages holding them are weighed here. A question's cost is
//!    bounded by the rows read. A question naming a day also takes that
//!    day's passages.
//! 2. **Candidates by meaning.** With a model (`memory::embed`), the
//!    question's vector is compared with the group's passages
//!    (`memory::vectors`; the group is chosen before any similarity), and
//!    the [`DENSE_CANDIDATES`] nearest join, whatever their words.
//! 3. **One final score on an absolute scale** ([`Weights::SHIPPED`]): the
//!    lexical score (the share of the question's words a text holds, each
//!    weighing its IDF; BM25 relative to the best, counted as far as those
//!    words are there; adjacent pairs kept as phrases; a named day; a
//!    touch of recency; an observation's importance), weighing 0.6,
//!    and the cosine read on the model's scale (0 at 0.15, 1 at 0.65),
//!    weighing 0.4 (chosen on three public sets, docs/recall.md). A
//!    score means the same from one question to the next, so per-prompt
//!    injection gates on it and separate recalls merge by it.
//!
//! Boundary: the group is a [`GroupFolder`] the caller took from where the
//! request arrived; SQL is in `store::recall`.

use chrono::Datelike;
use rusqlite::Connection;
use serde::{Deserialize, Serialize};

use crate::Result;
use crate::search::question::{self, Question};
use crate::search::{SnippetTerms, make_snippet, stem};
use crate::store;
use g2_core::validate::{GroupFolder, MemoryFolder};

/// Candidates FTS5 hands on to the second step, at least.
pub const CANDIDATES: usize = 100;
/// Captured prompts not yet archived that one recall weighs, at most.
pub const PROMPTS: i64 = 50;
/// Most hits one recall returns.
pub const MAX_LIMIT: usize = 100;

/// The ranking's weights: [`Weights::SHIPPED`] is what every recall uses;
/// the recall bench compares others through [`recall_weighted`]
/// (docs/recall.md).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Weights {
    /// Share of the lexical score in the final one; the cosine with the
    /// question has the rest.
    pub lexical: f64,
    /// Within the lexical score: BM25 relative to the best candidate's,
    pub bm25: f64,
    /// the share of the question's words the text holds (each weighing its
    /// inverse document frequency when `idf`, else alike),
    pub coverage: f64,
    pub idf: bool,
    /// and the share of its adjacent word pairs held side by side; these
    /// three are scaled to 0–1 together.
    pub phrase: f64,
    /// Added: said on a day the question names; how recent (the newest
    /// candidate gets all of it).
    pub named_day: f64,
    pub recency: f64,
    /// Min-max scale the lexical score and the cosine over the candidates
    /// before mixing them (the final score then says nothing on its own).
    pub scaled: bool,
    /// Otherwise the cosine is read on the model's own scale: at or below
    /// `cos_floor` it counts 0 (unrelated texts), at `cos_full` and above 1.
    pub cos_floor: f64,
    pub cos_full: f64,
}

impl Weights {
    pub const SHIPPED: Weights = Weights {
        lexical: 0.6,
        bm25: 1.0,
        coverage: 0.6,
        idf: true,
        phrase: 0.3,
        named_day: 0.5,
        recency: 0.01,
        scaled: false,
        cos_floor: 0.15,
        cos_full: 0.65,
    };
}

impl Default for Weights {
    fn default() -> Self {
        Weights::SHIPPED
    }
}

/// Extra weight of an observation (a distilled memory) over raw text,
/// plus this much per point of importance.
pub const OBSERVATION: f64 = 0.1;
pub const IMPORTANCE: f64 = 0.01;

/// One recalled memory and where it came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecallHit {
    /// What it is: `passage` (a piece of an archived conversation),
    /// `prompt` (a captured prompt and its reply no archive holds yet),
    /// `observation` (something learned) or `summary` (of a session).
    pub kind: String,
    /// The passage's, prompt batch's, observation's or summary's id.
    pub id: i64,
    /// Its group: the asking group's, or `global` (read-only).
    pub group: String,
    /// The archive's title, the observation's or the summary's.
    pub title: String,
    /// For an observation: decision, fact, preference, …
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observation_kind: Option<String>,
    /// Claude Code's session id it came from.
    pub session_id: Option<String>,
    /// A passage's archive: its id, markdown file (relative to the home)
    /// and the messages it holds, by index in the archive (from 0),
    /// inclusive.
    pub archive_id: Option<i64>,
    pub archive_path: Option<String>,
    pub turn_start: Option<i64>,
    pub turn_end: Option<i64>,
    /// When it was said or learned (RFC 3339).
    pub at: String,
    /// The text around its first match, matches in `[` `]`.
    pub snippet: String,
    /// Higher is better; comparable within one recall only.
    pub score: f64,
    /// How many of the question's content words it holds, of how many.
    pub matched_words: usize,
    pub question_words: usize,
}

/// What a recall may return.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filters {
    /// `passage`, `observation`, `summary`, or an observation kind
    /// (`decision`, `fact`, …).
    pub kind: Option<String>,
    /// Only memories from this time on (RFC 3339, or a date).
    pub since: Option<String>,
}

impl Filters {
    fn wants(&self, kind: &str) -> bool {
        match self.kind.as_deref() {
            None => true,
            Some(k) if k == kind => true,
            Some(k) => kind == "observation" && crate::memory::extract::Kind::parse(k).is_some(),
        }
    }

    fn admits(&self, c: &Candidate) -> bool {
        let kind_ok = match self.kind.as_deref() {
            Some(k) if crate::memory::extract::Kind::parse(k).is_some() => {
                c.observation_kind.as_deref() == Some(k)
            }
            _ => true,
        };
        kind_ok && self.since.as_deref().is_none_or(|s| c.at.as_str() >= s)
    }
}

/// A candidate of any kind, before ranking.
struct Candidate {
    hit: RecallHit,
    /// The text its words are counted in (and its snippet cut from).
    text: String,
    at: String,
    observation_kind: Option<String>,
    /// bm25() relative to the best of its kind.
    relevance: f64,
    /// An observation's importance, 1–10.
    importance: Option<i64>,
}

/// The group's memories that answer `query`, best first, at most `limit`.
/// A query with no words recalls nothing.
pub fn recall(
    conn: &Connection,
    group: &GroupFolder,
    query: &str,
    limit: usize,
) -> Result<Vec<RecallHit>> {
    recall_with(conn, group, query, limit, &Filters::default())
}

/// [`recall`] with filters.
pub fn recall_with(
    conn: &Connection,
    group: &GroupFolder,
    query: &str,
    limit: usize,
    filters: &Filters,
) -> Result<Vec<RecallHit>> {
    recall_weighted(conn, group, query, limit, filters, &Weights::SHIPPED)
}

/// [`recall_with`] with other weights (the recall bench's comparisons).
pub fn recall_weighted(
    conn: &Connection,
    group: &GroupFolder,
    query: &str,
    limit: usize,
    filters: &Filters,
    w: &Weights,
) -> Result<Vec<RecallHit>> {
    let Some(q) = question::read(query) else {
        return Ok(Vec::new());
    };
    // The question's vector is made on another thread while the words find
    // their candidates here (docs/recall.md: it takes longer than they do).
    let vector = crate::memory::embed::model().is_some().then(|| {
        let text = query.to_string();
        std::thread::spawn(move || crate::memory::embed::query(&text))
    });
    let limit = limit.clamp(1, MAX_LIMIT);
    let want = CANDIDATES.max(limit * 10) as i64;
    // The group's own memory, and `global`'s, read-only.
    let groups = [group.as_str(), MemoryFolder::GLOBAL];
    let mut all: Vec<Candidate> = Vec::new();
    // How many passages hold each word (capped at `search::COMMON`): which
    // words find candidates, and what each weighs.
    let docs = doc_counts(conn, &q)?;
    let idf = idf(conn, &docs, w.idf)?;
    if filters.wants("passage") {
        all.extend(passages(conn, group, &q, &docs, want)?);
    }
    if filters.wants("prompt") {
        all.extend(prompts(conn, groups, &q)?);
    }
    if filters.wants("observation") {
        let rows = store::observations::matching(conn, groups, &q.fts, want)?;
        let best = rows.iter().map(|r| r.1).fold(f64::MIN, f64::max);
        all.extend(rows.into_iter().map(|(o, score)| {
            let text = format!("{}\n{}\n{}", o.title, o.narrative, o.facts.join("\n"));
            Candidate {
                hit: RecallHit {
                    kind: "observation".into(),
                    id: o.id,
                    group: o.group.to_string(),
                    title: o.title.clone(),
                    observation_kind: Some(o.kind.clone()),
                    session_id: o.session_id.clone(),
                    archive_id: None,
                    archive_path: o.archive_path.clone(),
                    turn_start: None,
                    turn_end: None,
                    at: o.created_at.clone(),
                    snippet: String::new(),
                    score: 0.0,
                    matched_words: 0,
                    question_words: 0,
                },
                text,
                at: o.created_at,
                observation_kind: Some(o.kind),
                relevance: relative(score, best),
                importance: Some(o.importance),
            }
        }));
    }
    if filters.wants("summary") {
        let rows = store::observations::matching_summaries(conn, groups, &q.fts, want)?;
        let best = rows.iter().map(|r| r.1).fold(f64::MIN, f64::max);
        all.extend(rows.into_iter().map(|(m, score)| {
            let text = [
                m.title.as_str(),
                &m.request,
                &m.investigated,
                &m.learned,
                &m.completed,
                &m.next_steps,
            ]
            .join("\n");
            Candidate {
                hit: RecallHit {
                    kind: "summary".into(),
                    id: m.id,
                    group: m.group.to_string(),
                    title: m.title.clone(),
                    observation_kind: None,
                    session_id: Some(m.session_id.clone()),
                    archive_id: None,
                    archive_path: None,
                    turn_start: None,
                    turn_end: None,
                    at: m.created_at.clone(),
                    snippet: String::new(),
                    score: 0.0,
                    matched_words: 0,
                    question_words: 0,
                },
                text,
                at: m.created_at,
                observation_kind: None,
                relevance: relative(score, best),
                importance: None,
            }
        }));
    }
    // Meaning: the question's vector against the group's.
    let dense = match vector.and_then(|v| v.join().ok().flatten()) {
        Some((model, qv)) => Some(meaning(conn, groups, &model.name, &qv, filters, &mut all)?),
        None => None,
    };
    all.retain(|c| filters.admits(c));
    let newest = all.iter().map(|c| c.at.clone()).max().unwrap_or_default();
    let oldest = all.iter().map(|c| c.at.clone()).min().unwrap_or_default();
    let words = q.terms.len();
    let parts = (w.bm25 + w.coverage + w.phrase).max(f64::EPSILON);
    let mut scored: Vec<(f64, usize, Candidate)> = all
        .into_iter()
        .map(|c| {
            let (seen, phrase) = matches(&q, &c.text);
            let matched = seen.iter().filter(|s| **s).count();
            let coverage = share(&seen, &idf);
            // Relative to the best candidate, BM25 alone would call the
            // best of junk matches perfect: on the absolute scale it counts
            // as much as the question's words are there.
            let relevance = if w.scaled {
                c.relevance
            } else {
                c.relevance * coverage
            };
            let score = (w.bm25 * relevance + w.coverage * coverage + w.phrase * phrase) / parts
                + w.named_day * f64::from(u8::from(on_named_day(&q, &c.at)))
                + w.recency * recency(&c.at, &oldest, &newest)
                + c.importance
                    .map_or(0.0, |i| OBSERVATION + IMPORTANCE * i as f64);
            (score, matched, c)
        })
        .collect();
    if let Some(cos) = &dense {
        fuse(&mut scored, cos, w);
    }
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.2.hit.id.cmp(&a.2.hit.id)));
    scored.truncate(limit);
    // Snippets for the hits returned only.
    let terms = SnippetTerms::new(&q.text);
    Ok(scored
        .into_iter()
        .map(|(score, matched, c)| RecallHit {
            snippet: make_snippet(&c.text, &terms),
            score,
            matched_words: matched,
            question_words: words,
            ..c.hit
        })
        .collect())
}

/// Passages the question's vector brings in, whatever their words.
pub const DENSE_CANDIDATES: usize = 100;

/// Cosines of the candidates with vectors, by (kind, id); passages whose
/// meaning is nearest join the candidates.
fn meaning(
    conn: &Connection,
    groups: [&str; 2],
    model: &str,
    qv: &[f32],
    filters: &Filters,
    all: &mut Vec<Candidate>,
) -> Result<std::collections::HashMap<(String, i64), f64>> {
    use crate::memory::vectors;
    let mut cos = std::collections::HashMap::new();
    for kind in ["passage", "observation", "summary", "prompt"] {
        if !filters.wants(kind) {
            continue;
        }
        let have: Vec<i64> = all
            .iter()
            .filter(|c| c.hit.kind == kind)
            .map(|c| c.hit.id)
            .collect();
        // Passages by meaning join the candidates; the other kinds are few
        // and all found by their words already.
        let n = if kind == "passage" {
            DENSE_CANDIDATES
        } else {
            0
        };
        let near = vectors::near(conn, groups, kind, model, qv, n, &have)?;
        for (id, c) in near.of {
            cos.insert((kind.to_string(), id), f64::from(c));
        }
        let new: Vec<(i64, f32)> = near
            .best
            .into_iter()
            .filter(|(id, _)| !have.contains(id))
            .collect();
        if !new.is_empty() {
            let ids: Vec<i64> = new.iter().map(|(id, _)| *id).collect();
            let rows = store::recall::passages_by_ids(conn, &ids, groups)?;
            all.extend(rows.into_iter().map(|r| passage_candidate(r, 0.0)));
            cos.extend(
                new.into_iter()
                    .map(|(id, c)| ((kind.to_string(), id), f64::from(c))),
            );
        }
    }
    Ok(cos)
}

/// The final score: [`Weights::lexical`] of the lexical score and the rest
/// of the cosine (each first scaled to 0–1 over the candidates when
/// [`Weights::scaled`]). A candidate not embedded yet counts its lexical
/// score for both.
fn fuse(
    scored: &mut [(f64, usize, Candidate)],
    cos: &std::collections::HashMap<(String, i64), f64>,
    w: &Weights,
) {
    let key = |c: &Candidate| (c.hit.kind.clone(), c.hit.id);
    let (lex, dense) = if w.scaled {
        let span = |vals: &mut dyn Iterator<Item = f64>| {
            vals.fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)))
        };
        (
            Some(span(&mut scored.iter().map(|s| s.0))),
            Some(span(
                &mut scored.iter().filter_map(|s| cos.get(&key(&s.2)).copied()),
            )),
        )
    } else {
        (None, None)
    };
    let unit = |v: f64, span: Option<(f64, f64)>| match span {
        Some((lo, hi)) if hi > lo => (v - lo) / (hi - lo),
        Some(_) => 1.0,
        None => v,
    };
    let calibrated = |c: f64| {
        if w.scaled {
            unit(c, dense)
        } else {
            ((c - w.cos_floor) / (w.cos_full - w.cos_floor).max(f64::EPSILON)).clamp(0.0, 1.0)
        }
    };
    for s in scored.iter_mut() {
        let l = unit(s.0, lex);
        let d = cos.get(&key(&s.2)).map_or(l, |c| calibrated(*c));
        s.0 = w.lexical * l + (1.0 - w.lexical) * d;
    }
}

/// How many passages hold each of the question's words, up to
/// `search::COMMON` (FTS5 counts them as it indexes them).
fn doc_counts(conn: &Connection, q: &Question) -> Result<Vec<i64>> {
    q.fts_terms
        .iter()
        .map(|t| {
            store::search::capped_count(
                conn,
                store::search::Index::Passages,
                t,
                crate::search::COMMON,
            )
        })
        .collect()
}

/// Each word's inverse document frequency over every passage (BM25's),
/// or 1 each when `weighted` is off.
fn idf(conn: &Connection, docs: &[i64], weighted: bool) -> Result<Vec<f64>> {
    if !weighted {
        return Ok(vec![1.0; docs.len()]);
    }
    let n = store::recall::passage_count_estimate(conn)? as f64;
    Ok(docs
        .iter()
        .map(|&d| {
            let d = d as f64;
            (1.0 + (n - d + 0.5).max(0.0) / (d + 0.5)).ln().max(0.01)
        })
        .collect())
}

/// The weighted share of the flags that are set.
fn share(seen: &[bool], weight: &[f64]) -> f64 {
    let total: f64 = weight.iter().sum();
    if total <= 0.0 {
        return 0.0;
    }
    seen.iter()
        .zip(weight)
        .filter(|(s, _)| **s)
        .map(|(_, w)| w)
        .sum::<f64>()
        / total
}

fn relative(score: f64, best: f64) -> f64 {
    if best > 0.0 { score / best } else { 0.0 }
}

/// The group's archive passages that may answer `q`.
fn passages(
    conn: &Connection,
    group: &GroupFolder,
    q: &Question,
    docs: &[i64],
    want: i64,
) -> Result<Vec<Candidate>> {
    let (mut rows, ranked) =
        candidates(conn, [group.as_str(), MemoryFolder::GLOBAL], q, docs, want)?;
    if !q.days.is_empty() {
        // "What did we talk about on April 27th?": that day's passages are
        // candidates whatever their words.
        let days: Vec<String> = q
            .days
            .iter()
            .map(|(m, d)| format!("{m:02}-{d:02}"))
            .collect();
        for r in store::recall::passages_on_days(conn, group.as_str(), &days, want)? {
            if !rows.iter().any(|x| x.id == r.id) {
                rows.push(r);
            }
        }
    }
    if !ranked {
        // Found without BM25: weighed here, every word alike.
        let scores = weigh_alike(q, rows.iter().map(|r| r.text.as_str()));
        for (r, score) in rows.iter_mut().zip(scores) {
            r.score = score;
        }
    }
    let best = rows.iter().map(|r| r.score).fold(f64::MIN, f64::max);
    Ok(rows
        .into_iter()
        .map(|r| {
            let relevance = relative(r.score, best);
            passage_candidate(r, relevance)
        })
        .collect())
}

fn passage_candidate(r: store::recall::PassageRow, relevance: f64) -> Candidate {
    Candidate {
        hit: RecallHit {
            kind: "passage".into(),
            id: r.id,
            group: r.group,
            title: r.archive_name,
            observation_kind: None,
            session_id: r.session_id,
            archive_id: Some(r.archive_id),
            archive_path: Some(r.archive_path),
            turn_start: Some(r.turn_start),
            turn_end: Some(r.turn_end),
            at: r.at.clone(),
            snippet: String::new(),
            score: 0.0,
            matched_words: 0,
            question_words: 0,
        },
        text: r.text,
        at: r.at,
        observation_kind: None,
        relevance,
        importance: None,
    }
}

/// Captured prompts (with their replies) that no archive holds yet: the
/// live conversation, weighed like common-word passages.
fn prompts(conn: &Connection, groups: [&str; 2], q: &Question) -> Result<Vec<Candidate>> {
    let rows = store::recall::unarchived_prompts(conn, &q.fts, groups, PROMPTS)?;
    let texts: Vec<String> = rows
        .iter()
        .map(|r| format!("{}\n{}", r.prompt, r.reply))
        .collect();
    let scores = weigh_alike(q, texts.iter().map(String::as_str));
    let best = scores.iter().copied().fold(f64::MIN, f64::max);
    Ok(rows
        .into_iter()
        .zip(texts)
        .zip(scores)
        .map(|((r, text), score)| Candidate {
            hit: RecallHit {
                kind: "prompt".into(),
                id: r.id,
                group: r.group,
                title: g2_core::archive::truncate(&crate::memory::context::one_line(&r.prompt), 80)
                    .into_owned(),
                observation_kind: None,
                session_id: Some(r.session_id),
                archive_id: None,
                archive_path: None,
                turn_start: None,
                turn_end: None,
                at: r.at.clone(),
                snippet: String::new(),
                score: 0.0,
                matched_words: 0,
                question_words: 0,
            },
            text,
            at: r.at,
            observation_kind: None,
            relevance: relative(score, best),
            importance: None,
        })
        .collect())
}

/// The passages that may answer `q`, and whether FTS5 ranked them by BM25.
///
/// The question's words that are not common (held by fewer than
/// `search::COMMON` passages) find the candidates, any of them, ranked by
/// BM25 among the newest `store::recall::SCAN` that match; a common word
/// finds nothing when the question has a rarer one (it still counts in
/// the second step). When every word is common BM25 is not asked: its
/// weights cost a walk over each word's whole posting list, and common
/// words weigh about alike anyway. The candidates are then the newest
/// passages holding all the words, or else any of them, weighed by
/// [`equal_weight_bm25`]. Either way a question's cost is bounded by the
/// rows read, not by how many passages hold its words.
fn candidates(
    conn: &Connection,
    groups: [&str; 2],
    q: &Question,
    docs: &[i64],
    want: i64,
) -> Result<(Vec<store::recall::PassageRow>, bool)> {
    let rare: Vec<&str> = q
        .fts_terms
        .iter()
        .zip(docs)
        .filter(|(_, d)| **d < crate::search::COMMON)
        .map(|(t, _)| t.as_str())
        .collect();
    if !rare.is_empty() {
        let rows = store::recall::passage_candidates(conn, &rare.join(" OR "), groups, want)?;
        // Rare words may be words no passage holds: then the common ones.
        if !rows.is_empty() {
            return Ok((rows, true));
        }
    }
    let mut rows = store::recall::newest_matching(conn, &q.fts_terms.join(" AND "), groups, want)?;
    if rows.is_empty() && q.fts_terms.len() > 1 {
        rows = store::recall::newest_matching(conn, &q.fts, groups, want)?;
    }
    Ok((rows, false))
}

/// How often each of the question's terms occurs in `text`, and its length
/// in words (stop words included, as the index counts them).
fn term_counts(q: &Question, text: &str) -> (Vec<u32>, usize) {
    let mut tf = vec![0_u32; q.terms.len()];
    let mut len = 0;
    for w in question::words(text) {
        len += 1;
        if question::is_stop(&w) {
            continue;
        }
        let s = stem(&w);
        if let Some(t) = q.terms.iter().position(|t| *t == s) {
            tf[t] += 1;
        }
    }
    (tf, len)
}

/// [`equal_weight_bm25`] of each text, lengths measured against the
/// texts' own average.
fn weigh_alike<'a>(q: &Question, texts: impl Iterator<Item = &'a str>) -> Vec<f64> {
    let found: Vec<(Vec<u32>, usize)> = texts.map(|t| term_counts(q, t)).collect();
    let avg = found.iter().map(|f| f.1).sum::<usize>() as f64 / found.len().max(1) as f64;
    found
        .iter()
        .map(|(tf, len)| equal_weight_bm25(tf, *len, avg))
        .collect()
}

/// BM25 (k1 = 1.2, b = 0.75) with every term weighing 1.
fn equal_weight_bm25(tf: &[u32], len: usize, avg_len: f64) -> f64 {
    const K1: f64 = 1.2;
    const B: f64 = 0.75;
    let norm = K1 * (1.0 - B + B * len as f64 / avg_len.max(1.0));
    tf.iter()
        .map(|&f| {
            let f = f64::from(f);
            f * (K1 + 1.0) / (f + norm)
        })
        .sum()
}

/// How much of the question the text holds, in one pass over its words:
/// the share of the question's terms it contains, and the share of the
/// question's adjacent word pairs it holds side by side (stop words between
/// them do not count as a gap). Only words that are question terms are
/// stemmed and kept.
fn matches(q: &Question, text: &str) -> (Vec<bool>, f64) {
    let mut seen = vec![false; q.terms.len()];
    let mut pairs_seen = vec![false; q.pairs.len()];
    let mut prev: Option<usize> = None;
    for w in question::words(text) {
        if question::is_stop(&w) {
            continue;
        }
        let s = stem(&w);
        let Some(t) = q.terms.iter().position(|t| *t == s) else {
            prev = None;
            continue;
        };
        seen[t] = true;
        if let Some(p) = prev {
            for (k, (a, b)) in q.pairs.iter().enumerate() {
                if *a == q.terms[p] && *b == q.terms[t] {
                    pairs_seen[k] = true;
                }
            }
        }
        prev = Some(t);
    }
    let phrase = if pairs_seen.is_empty() {
        0.0
    } else {
        pairs_seen.iter().filter(|x| **x).count() as f64 / pairs_seen.len() as f64
    };
    (seen, phrase)
}

/// Whether `at` (RFC 3339) falls on a (month, day) the question names.
fn on_named_day(q: &Question, at: &str) -> bool {
    if q.days.is_empty() {
        return false;
    }
    let md = (at.get(5..7), at.get(8..10));
    match md {
        (Some(m), Some(d)) => match (m.parse::<u32>(), d.parse::<u32>()) {
            (Ok(m), Ok(d)) => q.days.contains(&(m, d)),
            _ => false,
        },
        _ => false,
    }
}

/// 0 for the oldest candidate, 1 for the newest (RFC 3339 strings compare
/// as times; their date part is enough for a tie-breaker).
fn recency(at: &str, oldest: &str, newest: &str) -> f64 {
    let day = |s: &str| {
        chrono::NaiveDate::parse_from_str(s.get(..10).unwrap_or(""), "%Y-%m-%d")
            .map(|d| d.num_days_from_ce())
            .unwrap_or(0)
    };
    let (a, o, n) = (day(at), day(oldest), day(newest));
    if n > o {
        f64::from(a - o) / f64::from(n - o)
    } else {
        0.0
    }
}

/// Splits every archive that has no passages yet (archives recorded before
/// passages existed) in one transaction; returns how many were split.
pub fn index_missing(tx: &rusqlite::Transaction<'_>) -> Result<usize> {
    let missing = store::recall::archives_without_passages(tx)?;
    for (id, group, at, body) in &missing {
        let passages = crate::search::passages::split(body);
        store::recall::insert_passages(tx, *id, group, at, &passages)?;
    }
    Ok(missing.len())
}

/// Rebuilds every passage from the archives' indexed text.
pub fn reindex(tx: &rusqlite::Transaction<'_>) -> Result<usize> {
    store::recall::clear_passages(tx)?;
    index_missing(tx)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store_with(archives: &[(&str, &str, &str)]) -> (tempfile::TempDir, store::Store) {
        let dir = tempfile::tempdir().unwrap();
        let store =
            store::Store::open(&dir.path().join("g2.db"), std::time::Duration::from_secs(5))
                .unwrap();
        let rows: Vec<(String, String, String)> = archives
            .iter()
            .map(|(g, at, b)| (g.to_string(), at.to_string(), b.to_string()))
            .collect();
        store
            .write_blocking(move |tx| {
                for (i, (group, at, body)) in rows.iter().enumerate() {
                    tx.execute(
                        "INSERT INTO conversation_archives (group_folder, session_id, name, path, trigger, created_at)
                         VALUES (?1, ?2, ?3, ?4, 'manual', ?5)",
                        rusqlite::params![group, format!("s{i}"), format!("A{i}"), format!("groups/{group}/conversations/{i}.md"), at],
                    )?;
                    tx.execute(
                        "INSERT INTO archives_fts (rowid, name, body) VALUES (?1, ?2, ?3)",
                        rusqlite::params![tx.last_insert_rowid(), format!("A{i}"), body],
                    )?;
                }
                index_missing(tx)
            })
            .unwrap();
        (dir, store)
    }

    fn md(exchanges: &[(&str, &str)]) -> String {
        let mut s = String::from("# T\n\nArchived: x\n\n---\n\n");
        for (u, a) in exchanges {
            s.push_str(&format!("**User**: {u}\n\n**G2**: {a}\n\n"));
        }
        s
    }

    #[test]
    fn questions_find_the_turn_that_answers_them() {
        let (_d, store) = store_with(&[
            (
                "main",
                "2026-05-01T10:00:00.000Z",
                &md(&[
                    ("we sailed today", "nice"),
                    ("remember that the boat is moored at pier 7", "noted"),
                    ("the weather was fine", "good"),
                ]),
            ),
            (
                "main",
                "2026-05-02T10:00:00.000Z",
                &md(&[
                    ("I went to the museum", "which exhibition?"),
                    ("the boat show", "fun"),
                ]),
            ),
            (
                "fam",
                "2026-05-03T10:00:00.000Z",
                &md(&[("the boat is moored at pier 9", "ok")]),
            ),
        ]);
        let main = GroupFolder::new("main").unwrap();
        store
            .read_blocking(|c| {
                // No word is required: "where" and "is" are not searched.
                let hits = recall(c, &main, "where is the boat moored?", 5)?;
                assert_eq!(
                    (hits[0].archive_id, hits[0].turn_start),
                    (Some(1), Some(2)),
                    "{hits:#?}"
                );
                assert!(hits[0].snippet.contains("[boat]"), "{}", hits[0].snippet);
                // Never another group's.
                assert!(
                    hits.iter()
                        .all(|h| h.group == "main" && !h.snippet.contains("pier 9"))
                );
                // A named day lifts that day's passages.
                let hits = recall(c, &main, "on May 2nd, what did I see at the boat show?", 5)?;
                assert_eq!(hits[0].archive_id, Some(2), "{hits:#?}");
                // A named day brings that day's talk, whatever its words.
                let hits = recall(c, &main, "what did we talk about on May 1st?", 5)?;
                assert!(
                    !hits.is_empty() && hits.iter().all(|h| h.archive_id == Some(1)),
                    "{hits:#?}"
                );
                assert!(recall(c, &main, "?!", 5)?.is_empty());
                assert!(recall(c, &main, "zebra", 5)?.is_empty());
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn observations_rank_first_and_forgetting_removes_them() {
        use crate::memory::extract::{Kind, ObservationDraft};
        use crate::store::observations as obs;
        let (_d, store) = store_with(&[(
            "main",
            "2026-05-01T10:00:00.000Z",
            &md(&[("remember that the boat is moored at pier 7", "noted")]),
        )]);
        let main = GroupFolder::new("main").unwrap();
        let fam = GroupFolder::new("fam").unwrap();
        let (m, f) = (main.clone(), fam.clone());
        let id = store
            .write_blocking(move |tx| {
                let draft = |title: &str| ObservationDraft {
                    kind: Kind::Fact,
                    title: title.into(),
                    narrative: String::new(),
                    facts: vec![],
                    files: vec![],
                    importance: 8,
                    concerns: vec!["Ann".into()],
                };
                let at = "2026-05-01T10:00:01.000Z";
                obs::insert(
                    tx,
                    &(&f).into(),
                    &draft("the boat is at pier 9"),
                    Default::default(),
                    at,
                    |_| false,
                )?;
                obs::insert(
                    tx,
                    &(&m).into(),
                    &draft("the boat is moored at pier 7"),
                    Default::default(),
                    at,
                    |_| false,
                )
            })
            .unwrap();
        let ask = |filters: Filters| {
            let m = main.clone();
            store
                .read_blocking(move |c| recall_with(c, &m, "where is the boat?", 5, &filters))
                .unwrap()
        };
        let hits = ask(Filters::default());
        assert_eq!(
            (hits[0].kind.as_str(), hits[0].id),
            ("observation", id),
            "{hits:#?}"
        );
        assert_eq!(hits[0].observation_kind.as_deref(), Some("fact"));
        assert!(hits.iter().any(|h| h.kind == "passage"));
        // Never the other group's.
        assert!(
            hits.iter().all(|h| !h.snippet.contains("pier 9")),
            "{hits:#?}"
        );
        let only = |k: &str| Filters {
            kind: Some(k.into()),
            since: None,
        };
        assert!(ask(only("passage")).iter().all(|h| h.kind == "passage"));
        assert_eq!(ask(only("fact")).len(), 1);
        assert!(ask(only("decision")).is_empty());
        assert!(
            ask(Filters {
                kind: None,
                since: Some("2027".into())
            })
            .is_empty()
        );
        // Forgotten through another group: nothing happens.
        let (f, m) = (fam.clone(), main.clone());
        assert!(
            !store
                .write_blocking(move |tx| obs::forget(tx, &(&f).into(), id))
                .unwrap()
        );
        assert!(
            store
                .write_blocking(move |tx| obs::forget(tx, &(&m).into(), id))
                .unwrap()
        );
        assert!(ask(only("observation")).is_empty());
    }

    #[test]
    fn global_memory_and_the_live_conversation_are_recalled_too() {
        use crate::memory::extract::{Kind, ObservationDraft};
        use crate::store::observations as obs;
        let (_d, store) = store_with(&[(
            "main",
            "2026-05-01T10:00:00.000Z",
            &md(&[("we talked about the weather", "it was sunny")]),
        )]);
        let main = GroupFolder::new("main").unwrap();
        store
            .write_blocking(|tx| {
                let draft = ObservationDraft {
                    kind: Kind::Fact,
                    title: "the family doctor is Dr. Lee".into(),
                    narrative: String::new(),
                    facts: vec![],
                    files: vec![],
                    importance: 9,
                    concerns: vec![],
                };
                let at = "2026-05-01T10:00:01.000Z";
                let global = MemoryFolder::global();
                obs::insert(tx, &global, &draft, Default::default(), at, |_| false)?;
                // A session archived at 10:00 whose later prompt is not.
                let m = GroupFolder::new("main").unwrap();
                let s = store::memory::open_session(tx, &m, "live", None, None, at)?;
                for (p, when) in [
                    ("the lawnmower is in the shed", "2026-05-01T09:00:00.000Z"),
                    ("the kayak is behind the garage", "2026-05-01T11:00:00.000Z"),
                ] {
                    let b = store::memory::start_batch(tx, s, p, &[], when)?;
                    store::memory::finish_batch(tx, b, Some("noted"), when)?;
                }
                tx.execute("UPDATE conversation_archives SET session_id = 'live'", [])?;
                Ok(())
            })
            .unwrap();
        let ask = |q: &str| {
            let (m, q) = (main.clone(), q.to_string());
            store.read_blocking(move |c| recall(c, &m, &q, 5)).unwrap()
        };
        let hits = ask("who is our doctor?");
        assert_eq!(
            (hits[0].kind.as_str(), hits[0].group.as_str()),
            ("observation", "global"),
            "{hits:#?}"
        );
        let hits = ask("where is the kayak?");
        assert_eq!(hits[0].kind, "prompt", "{hits:#?}");
        assert_eq!(hits[0].session_id.as_deref(), Some("live"));
        // What the archive holds is recalled as its passage, not as a prompt.
        assert!(
            ask("where is the lawnmower?")
                .iter()
                .all(|h| h.kind != "prompt"),
        );
        // Another group does not see main's prompts, but does see global's.
        let fam = GroupFolder::new("fam").unwrap();
        let theirs = store
            .read_blocking(move |c| {
                Ok((recall(c, &fam, "kayak", 5)?, recall(c, &fam, "doctor", 5)?))
            })
            .unwrap();
        assert!(theirs.0.is_empty(), "{theirs:#?}");
        assert_eq!(theirs.1.len(), 1, "{theirs:#?}");
    }
}
