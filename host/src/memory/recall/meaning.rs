//! Steps 2 and 3 of a recall: the candidates by meaning (the question's
//! vector against the group's, `memory::vectors`) and the final score that
//! blends the lexical score with the cosine ([`Weights`]).

use crate::store::db::Db;

use super::candidates::{
    observation_candidate, passage_candidate, prompt_candidate, summary_candidate,
};
use super::{Candidate, Filters, Weights};
use crate::Result;
use crate::store;

/// Passages the question's vector brings in, whatever their words.
pub const DENSE_CANDIDATES: usize = 100;
/// Prompts, observations and summaries it brings in, of each kind: they
/// are few, and one said in other words than the question's is still an
/// answer ("where is the yacht kept?" for "the boat is moored at pier 7").
pub const DENSE_OTHERS: usize = 8;
/// The cosine one of those needs to join by meaning alone: where meaning
/// alone reaches injection's floor (0.2 of its 0.4 weight, on the
/// model's scale from 0.15 to 0.65), so a prompt no word links to joins
/// only when it plainly bears on the question.
pub const DENSE_OTHERS_MIN_COSINE: f32 = 0.40;

/// Cosines of the candidates with vectors, by (kind, id); passages whose
/// meaning is nearest join the candidates.
pub(super) fn meaning(
    conn: &Db<'_>,
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
        let n = if kind == "passage" {
            DENSE_CANDIDATES
        } else {
            DENSE_OTHERS
        };
        let near = vectors::near(conn, groups, kind, model, qv, n, &have)?;
        for (id, c) in near.of {
            cos.insert((kind.to_string(), id), f64::from(c));
        }
        let new: Vec<(i64, f32)> = near
            .best
            .into_iter()
            .filter(|(id, c)| {
                !have.contains(id) && (kind == "passage" || *c >= DENSE_OTHERS_MIN_COSINE)
            })
            .collect();
        if !new.is_empty() {
            let ids: Vec<i64> = new.iter().map(|(id, _)| *id).collect();
            match kind {
                "passage" => {
                    let rows = store::recall::passages_by_ids(conn, &ids, groups)?;
                    all.extend(rows.into_iter().map(|r| passage_candidate(r, 0.0)));
                }
                "observation" => {
                    let rows = store::observations::active_by_ids(conn, &ids, groups)?;
                    all.extend(rows.into_iter().map(|o| observation_candidate(o, 0.0)));
                }
                "summary" => {
                    let rows = store::observations::summaries_by_ids(conn, &ids, groups)?;
                    all.extend(rows.into_iter().map(|m| summary_candidate(m, 0.0)));
                }
                _ => {
                    let rows = store::recall::unarchived_prompts_by_ids(conn, &ids, groups)?;
                    all.extend(rows.into_iter().map(|r| {
                        let text = format!("{}\n{}", r.prompt, r.reply);
                        prompt_candidate(r, text, 0.0)
                    }));
                }
            }
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
pub(super) fn fuse(
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
