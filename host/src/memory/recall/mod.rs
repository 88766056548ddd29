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
//!    bounded by the rows read. A question naming a time ("last Tuesday",
//!    "in May", read by [`when`] in the asker's timezone) also takes the
//!    passages said then.
//! 2. **Candidates by meaning.** With a model (`memory::embed`), the
//!    question's vector is compared with the group's passages
//!    (`memory::vectors`; the group is chosen before any similarity), and
//!    the [`DENSE_CANDIDATES`] nearest passages and the [`DENSE_OTHERS`]
//!    nearest prompts, observations and summaries join, whatever their
//!    words.
//! 3. **One final score on an absolute scale** ([`Weights::SHIPPED`]): the
//!    lexical score (the share of the question's words a text holds, each
//!    weighing its IDF; BM25 relative to the best, counted as far as those
//!    words are there; adjacent pairs kept as phrases; a named time; a
//!    touch of recency; an observation's importance), weighing 0.6,
//!    and the cosine read on the model's scale (0 at 0.15, 1 at 0.65),
//!    weighing 0.4 (chosen on three public sets, docs/recall.md). A
//!    score means the same from one question to the next, so per-prompt
//!    injection gates on it and separate recalls merge by it.
//!
//! Boundary: the group is a [`GroupFolder`] the caller took from where the
//! request arrived; SQL is in `store::recall`.
//!
//! Files: `candidates.rs` gathers the candidates by words (step 1),
//! `meaning.rs` brings in and scores those by meaning and blends the two
//! (steps 2 and 3), `lexical.rs` holds the lexical measures, `when.rs`
//! reads the times a question names, `redate.rs` dates archives made
//! before passages were dated (`g2 memory reindex`); this file holds the
//! types, [`recall_weighted`] (the steps in order) and the passage index.

mod candidates;
pub mod indexing;
mod lexical;
mod meaning;
pub mod redate;
pub mod when;

use crate::store::db::Db;
use serde::{Deserialize, Serialize};

use crate::Result;
use crate::search::question;
use crate::search::{SnippetTerms, make_snippet};
use crate::store;
use g2_core::validate::{GroupFolder, MemoryFolder};

use candidates::{observations, passages, prompts, summaries};
use lexical::{doc_counts, idf, in_window, matches, recency, share};
pub use meaning::{DENSE_CANDIDATES, DENSE_OTHERS};
use meaning::{fuse, meaning};

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
    /// Added: said within a time the question names ([`when`]); how
    /// recent (the newest candidate gets all of it).
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
/// Times a question may name that recall looks up (one index seek each).
pub const MAX_WINDOWS: usize = 8;

pub const OBSERVATION: f64 = 0.1;
pub const IMPORTANCE: f64 = 0.01;

/// One recalled memory and where it came from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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
    /// When it was said (RFC 3339, UTC): a passage's first message, a
    /// prompt's, what an observation was learned from, a summary's
    /// session's start.
    pub at: String,
    /// When a passage's last message (a summary's session's end) was said,
    /// when it differs from `at`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_end: Option<String>,
    /// The local day (or days, `2026-05-08…05-10`) it was said on, in the
    /// timezone of the question: what every view of a hit shows.
    #[serde(default)]
    pub day: String,
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
    /// When and in which timezone the question is asked, for the times it
    /// names ([`when`]); none: now, in the group's timezone
    /// (`zone`).
    pub asked: Option<when::Asked>,
}

impl Filters {
    fn wants(&self, kind: &str) -> bool {
        match self.kind.as_deref() {
            None => true,
            Some(k) if k == kind => true,
            Some(k) => kind == "observation" && crate::memory::extract::Kind::parse(k).is_some(),
        }
    }

    /// Whether a candidate is of the kind asked for (`since` is read in
    /// the asker's timezone, in the recall).
    fn admits(&self, c: &Candidate) -> bool {
        match self.kind.as_deref() {
            Some(k) if crate::memory::extract::Kind::parse(k).is_some() => {
                c.observation_kind.as_deref() == Some(k)
            }
            _ => true,
        }
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
    conn: &Db<'_>,
    group: &GroupFolder,
    query: &str,
    limit: usize,
) -> Result<Vec<RecallHit>> {
    recall_with(conn, group, query, limit, &Filters::default())
}

/// [`recall`] with filters.
pub fn recall_with(
    conn: &Db<'_>,
    group: &GroupFolder,
    query: &str,
    limit: usize,
    filters: &Filters,
) -> Result<Vec<RecallHit>> {
    recall_weighted(conn, group, query, limit, filters, &Weights::SHIPPED)
}

/// [`recall`] over several groups' memories at once (a person's search of
/// every group): final scores are on one scale, so the recalls merge by
/// score; `global`'s memory, which comes with every group's, counts once;
/// the best `limit`.
pub fn recall_groups(
    conn: &Db<'_>,
    groups: &[GroupFolder],
    query: &str,
    limit: usize,
) -> Result<Vec<RecallHit>> {
    let mut all = Vec::new();
    for g in groups {
        all.extend(recall(conn, g, query, limit)?);
    }
    all.sort_by(|a, b| b.score.total_cmp(&a.score));
    let mut seen = std::collections::HashSet::new();
    all.retain(|h| seen.insert((h.kind.clone(), h.id)));
    all.truncate(limit);
    Ok(all)
}

/// Makes `query`'s vector ahead of its recall, on the model's pool, so the
/// recall finds it made or joins its making (`embed::making`): the
/// host knows a prompt before the agent's runner asks about it. Nothing
/// without a model or without a word to ask.
pub fn warm(query: &str) {
    let text = question::cap(query).text;
    if crate::memory::embed::model().is_none() || question::read(text).is_none() {
        return;
    }
    // Its recall joins this making (`embed::making`).
    let _ = crate::memory::embed::making_ahead(text);
}

/// [`recall_with`] with other weights (the recall bench's comparisons).
pub fn recall_weighted(
    conn: &Db<'_>,
    group: &GroupFolder,
    query: &str,
    limit: usize,
    filters: &Filters,
    w: &Weights,
) -> Result<Vec<RecallHit>> {
    // What is read of the query (its words and its vector): a long one
    // costs what its first words do.
    let query = question::cap(query).text;
    let Some(q) = question::read(query) else {
        return Ok(Vec::new());
    };
    let asked = filters.asked.unwrap_or_else(|| when::Asked {
        at: chrono::Utc::now(),
        tz: crate::zone::of(group.as_str()),
    });
    // The times it names ("last Tuesday", "in May"), read in the asker's
    // timezone.
    let words: Vec<String> = question::words(query).collect();
    let mut when = when::read(&words, &asked);
    // A question's cost stays bounded however many dates it lists.
    when.windows.truncate(MAX_WINDOWS);
    when.loose.truncate(MAX_WINDOWS);
    // A time past that it names ("last Tuesday", "on 8 May") lifts what was
    // said then. One named by everyday words ("tonight", "on Tuesday",
    // "this week", which also speak of plans) lifts it only where the
    // question's words are, or when it asks about nothing but the time.
    let only_time = !when.words.is_empty()
        && words
            .iter()
            .enumerate()
            .all(|(i, w)| when.words.contains(&i) || question::is_stop(w));
    let (loose, past): (Vec<_>, Vec<_>) =
        when.windows.iter().zip(&when.loose).partition(|(_, l)| **l);
    let past: Vec<when::Window> = past.into_iter().map(|(w, _)| *w).collect();
    let loose: Vec<when::Window> = loose.into_iter().map(|(w, _)| *w).collect();
    let since = filters.since.as_deref().map(|s| since(s, &asked));
    // The question's vector is made on the model's shared pool (rayon's,
    // one thread a core: bounded, and where its products run anyway) while
    // the words find their candidates here (docs/recall.md: it takes
    // longer than they do). Never called from inside that pool.
    let vector = crate::memory::embed::model()
        .is_some()
        .then(|| crate::memory::embed::making(query));
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
        all.extend(passages(conn, group, &q, &when.windows, &docs, want)?);
    }
    if filters.wants("prompt") {
        all.extend(prompts(conn, groups, &q)?);
    }
    if filters.wants("observation") {
        all.extend(observations(conn, groups, &q, want)?);
    }
    if filters.wants("summary") {
        all.extend(summaries(conn, groups, &q, want)?);
    }
    // Meaning: the question's vector against the group's.
    let dense = match vector.and_then(crate::memory::embed::Making::wait) {
        Some((model, qv)) => Some(meaning(conn, groups, &model.name, &qv, filters, &mut all)?),
        None => None,
    };
    all.retain(|c| filters.admits(c) && since.as_deref().is_none_or(|s| c.at.as_str() >= s));
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
                + w.named_day
                    * f64::from(u8::from(
                        in_window(&past, &c.at, c.hit.at_end.as_deref())
                            || ((only_time || matched > 0)
                                && in_window(&loose, &c.at, c.hit.at_end.as_deref())),
                    ))
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
    let tz = asked.tz;
    Ok(scored
        .into_iter()
        .map(|(score, matched, c)| RecallHit {
            day: when::day(&c.hit.at, c.hit.at_end.as_deref(), tz),
            snippet: make_snippet(&c.text, &terms),
            score,
            matched_words: matched,
            question_words: words,
            ..c.hit
        })
        .collect())
}

/// `since` as a time the rows compare with: a date (`2026-05-08`) is that
/// day's start in the asker's timezone; an RFC 3339 time is that instant;
/// anything else is compared as written.
fn since(s: &str, asked: &when::Asked) -> String {
    let s = s.trim();
    if let Ok(d) = chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d") {
        return candidates::stamp(g2_core::archive::dates::instant(
            asked.tz,
            d.and_time(chrono::NaiveTime::MIN),
        ));
    }
    // Any offset compares as the rows are written: UTC, milliseconds.
    chrono::DateTime::parse_from_rfc3339(s)
        .map_or_else(|_| s.to_string(), |t| candidates::stamp(t.to_utc()))
}

/// Splits every archive that has no passages yet (archives recorded before
/// passages existed) in the caller's transaction; returns how many were
/// split. `g2 serve` does this in the background instead, an archive per
/// transaction ([`indexing`]).
pub fn index_missing(tx: &Db<'_>) -> Result<usize> {
    let (mut after, mut n) = (0, 0);
    while let Some((last, split)) = index_after(tx, after, 16)? {
        after = last;
        n += split;
    }
    Ok(n)
}

/// Splits up to `limit` archives without passages whose ids follow `after`,
/// in id order; returns the last id split and how many were, or `None`
/// when none is left.
/// Pages keep the bodies read at once bounded; the id, rather than "has no
/// passages", moves the page on, since an empty archive gives none.
pub fn index_after(tx: &Db<'_>, after: i64, limit: i64) -> Result<Option<(i64, usize)>> {
    let missing = store::recall::archives_without_passages(tx, after, limit)?;
    for (id, group, at, body) in &missing {
        // An archive from before archives named their timezone was
        // written in the group's.
        let passages = crate::search::passages::split_in(body, crate::zone::of(group));
        store::recall::insert_passages(tx, *id, group, at, &passages)?;
    }
    Ok(missing.last().map(|(id, ..)| (*id, missing.len())))
}

/// `g2 memory reindex`: the full-text indexes of observations, summaries
/// and passages rebuilt from their rows, then every archive's passages split
/// and dated again ([`redate`]: from its transcript while it exists, else
/// from its markdown), a page of archives per transaction; passages that
/// are still their archive's split keep their rows (and vectors).
pub async fn rebuild(
    store: &store::Store,
    home: &crate::home::Home,
    opts: g2_core::archive::ArchiveOptions,
) -> Result<redate::Reindexed> {
    store
        .write(|tx| {
            store::observations::rebuild_indexes(tx)?;
            store::recall::rebuild_passage_index(tx)
        })
        .await?;
    let (store, home) = (store.clone(), home.clone());
    tokio::task::spawn_blocking(move || redate::all(&store, &home, &opts)).await?
}

#[cfg(test)]
mod tests;
