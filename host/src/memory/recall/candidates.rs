//! Step 1 of a recall: the candidates by words, of every kind (archive
//! passages, captured prompts no archive holds yet, observations and
//! session summaries), each with its BM25 relevance relative to the best
//! of its kind. What is read is bounded by `want` rows a kind.

use crate::store::db::Db;

use super::lexical::weigh_alike;
use super::when::Window;
use super::{Candidate, PROMPTS, RecallHit};
use crate::Result;
use crate::search::question::Question;
use crate::store;
use g2_core::validate::{GroupFolder, MemoryFolder};

/// The group's archive passages that may answer `q`, asked about the
/// times in `windows`.
pub(super) fn passages(
    conn: &Db<'_>,
    group: &GroupFolder,
    q: &Question,
    windows: &[Window],
    docs: &[i64],
    want: i64,
) -> Result<Vec<Candidate>> {
    let (mut rows, ranked) =
        candidates(conn, [group.as_str(), MemoryFolder::GLOBAL], q, docs, want)?;
    if !windows.is_empty() {
        // "What did we talk about last Tuesday?": that time's passages are
        // candidates whatever their words.
        let spans: Vec<(String, String)> = windows
            .iter()
            .map(|w| (stamp(w.from), stamp(w.to)))
            .collect();
        for r in store::recall::passages_in(conn, group.as_str(), &spans, want)? {
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

pub(super) fn passage_candidate(r: store::recall::PassageRow, relevance: f64) -> Candidate {
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
            // Only when the passage ends later than it starts.
            at_end: r.at_end.filter(|e| *e != r.at),
            snippet: String::new(),
            score: 0.0,
            matched_words: 0,
            question_words: 0,
            day: String::new(),
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
pub(super) fn prompts(conn: &Db<'_>, groups: [&str; 2], q: &Question) -> Result<Vec<Candidate>> {
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
        .map(|((r, text), score)| prompt_candidate(r, text, relative(score, best)))
        .collect())
}

/// A captured prompt (and its reply, `text`) as a candidate.
pub(super) fn prompt_candidate(
    r: store::recall::PromptRow,
    text: String,
    relevance: f64,
) -> Candidate {
    Candidate {
        hit: RecallHit {
            kind: "prompt".into(),
            id: r.id,
            group: r.group,
            title: g2_core::archive::truncate(&g2_core::quote::one_line(&r.prompt), 80)
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
            at_end: None,
            day: String::new(),
        },
        text,
        at: r.at,
        observation_kind: None,
        relevance,
        importance: None,
    }
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
/// [`equal_weight_bm25`](super::lexical::equal_weight_bm25). Either way a question's cost is bounded by the
/// rows read, not by how many passages hold its words.
fn candidates(
    conn: &Db<'_>,
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

/// The observations (the group's and `global`'s) that hold the question's
/// words.
pub(super) fn observations(
    conn: &Db<'_>,
    groups: [&str; 2],
    q: &Question,
    want: i64,
) -> Result<Vec<Candidate>> {
    let rows = store::observations::matching(conn, groups, &q.fts, want)?;
    let best = rows.iter().map(|r| r.1).fold(f64::MIN, f64::max);
    Ok(rows
        .into_iter()
        .map(|(o, score)| observation_candidate(o, relative(score, best)))
        .collect())
}

/// The session summaries (the group's and `global`'s) that hold the
/// question's words.
pub(super) fn summaries(
    conn: &Db<'_>,
    groups: [&str; 2],
    q: &Question,
    want: i64,
) -> Result<Vec<Candidate>> {
    let rows = store::observations::matching_summaries(conn, groups, &q.fts, want)?;
    let best = rows.iter().map(|r| r.1).fold(f64::MIN, f64::max);
    Ok(rows
        .into_iter()
        .map(|(m, score)| summary_candidate(m, relative(score, best)))
        .collect())
}

/// An observation as a candidate.
pub(super) fn observation_candidate(
    o: store::observations::ObservationRow,
    relevance: f64,
) -> Candidate {
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
            at: o.said_at.clone(),
            snippet: String::new(),
            score: 0.0,
            matched_words: 0,
            question_words: 0,
            at_end: None,
            day: String::new(),
        },
        text,
        at: o.said_at,
        observation_kind: Some(o.kind),
        relevance,
        importance: Some(o.importance),
    }
}

/// A session summary as a candidate.
pub(super) fn summary_candidate(m: store::observations::SummaryRow, relevance: f64) -> Candidate {
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
            at: m.said_from.clone(),
            snippet: String::new(),
            score: 0.0,
            matched_words: 0,
            question_words: 0,
            at_end: m.said_to.filter(|to| *to != m.said_from),
            day: String::new(),
        },
        text,
        at: m.said_from,
        observation_kind: None,
        relevance,
        importance: None,
    }
}

fn relative(score: f64, best: f64) -> f64 {
    if best > 0.0 { score / best } else { 0.0 }
}

/// A time as the store's rows write it (RFC 3339, milliseconds, `Z`), so
/// they compare as text.
pub(super) fn stamp(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}
