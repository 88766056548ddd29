//! Similarity over one group's vectors: brute-force cosine over a copy kept
//! in memory per (group, kind, model), brought up to date from the store
//! before each use in two index seeks (the newest rowid, and how many
//! vectors of the group and kind were ever deleted: new vectors are
//! appended by rowid; a delete reloads the copy).
//!
//! The copy holds each unit vector twice, small: as 8-bit integers with
//! a scale (a quarter of the memory of f32s; cosines within 0.01 of the
//! exact ones) and as its signs (48 bytes for 384 dimensions). A question
//! first ranks every vector by how many signs it shares (the Hamming
//! distance: a scan of 10 MB for 200,000 vectors, where the 8-bit values
//! would be 77 MB and take ~20 ms on this machine), then reads the 8-bit
//! cosine of the [`SHORTLIST`] nearest by signs (docs/recall.md: measured
//! before an index was considered). The scan is split over the shared
//! rayon pool.
//!
//! The group is the key of every read: a group's question is compared with
//! its own vectors and `global`'s only, never another group's.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use crate::store::db::Db;
use rayon::prelude::*;

use crate::Result;
use crate::store;

/// Vectors one task of the scan compares.
const CHUNK: usize = 16_384;
/// Vectors the sign scan keeps for their 8-bit cosines, per one wanted.
pub const SHORTLIST: usize = 10;

#[derive(Default)]
struct Copy {
    /// The newest rowid read, and the group's deletes of this kind then.
    last: i64,
    deletes: i64,
    dims: usize,
    ids: Vec<i64>,
    /// Each vector's scale: its cosine part is `scale × q / 127`.
    scales: Vec<f32>,
    /// `ids.len()` vectors of `dims` 8-bit values, one after the other.
    data: Vec<i8>,
    /// Their signs, `words` u64s each.
    signs: Vec<u64>,
    words: usize,
    /// Where each id is in `ids`.
    slots: HashMap<i64, usize>,
}

type Key = (String, String, String);

static COPIES: LazyLock<Mutex<HashMap<Key, Arc<Mutex<Copy>>>>> = LazyLock::new(Mutex::default);

fn copy_of(key: Key) -> Arc<Mutex<Copy>> {
    COPIES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .entry(key)
        .or_default()
        .clone()
}

/// A unit vector as 8-bit values and their scale.
/// A vector's signs, one bit a dimension (set: positive).
fn signs(v: &[f32]) -> Vec<u64> {
    let mut out = vec![0_u64; v.len().div_ceil(64)];
    for (i, x) in v.iter().enumerate() {
        if *x > 0.0 {
            out[i / 64] |= 1 << (i % 64);
        }
    }
    out
}

/// How many signs of two vectors differ.
fn hamming(a: &[u64], b: &[u64]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("popcnt") {
        // SAFETY: the CPU has POPCNT, checked above.
        return unsafe { hamming_popcnt(a, b) };
    }
    hamming_plain(a, b)
}

#[inline(always)]
fn hamming_plain(a: &[u64], b: &[u64]) -> u32 {
    a.iter().zip(b).map(|(x, y)| (x ^ y).count_ones()).sum()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt")]
fn hamming_popcnt(a: &[u64], b: &[u64]) -> u32 {
    hamming_plain(a, b)
}

fn quantize(v: &[f32]) -> (f32, Vec<i8>) {
    let max = v.iter().fold(0.0_f32, |m, x| m.max(x.abs()));
    if max == 0.0 {
        return (0.0, vec![0; v.len()]);
    }
    let k = 127.0 / max;
    (
        max / 127.0,
        v.iter().map(|x| (x * k).round() as i8).collect(),
    )
}

/// The dot product of two 8-bit vectors, in i32 lanes the compiler
/// vectorizes; with AVX2 where the CPU has it (the build targets plain
/// x86-64, whose vectors are half as wide).
fn dot8(a: &[i8], b: &[i8]) -> i32 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, checked above.
        return unsafe { dot8_avx2(a, b) };
    }
    dot8_plain(a, b)
}

#[inline(always)]
fn dot8_plain(a: &[i8], b: &[i8]) -> i32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| i32::from(i16::from(*x) * i16::from(*y)))
        .sum()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn dot8_avx2(a: &[i8], b: &[i8]) -> i32 {
    dot8_plain(a, b)
}

impl Copy {
    /// Appends the vectors stored after the newest one read.
    fn append(&mut self, conn: &Db<'_>, key: &Key) -> Result<()> {
        let (group, kind, model) = key;
        for (rowid, id, bytes) in
            store::embeddings::vectors_after(conn, group, kind, model, self.last)?
        {
            if let Some(v) = g2_embed::from_bytes(&bytes).filter(|v| v.len() == self.dims) {
                let (scale, q) = quantize(&v);
                self.slots.insert(id, self.ids.len());
                self.ids.push(id);
                self.scales.push(scale);
                self.data.extend_from_slice(&q);
                self.signs.extend(signs(&v));
            }
            self.last = rowid;
        }
        Ok(())
    }

    /// Up to date with the store: new vectors appended; after a delete,
    /// read again from empty.
    fn refresh(&mut self, conn: &Db<'_>, key: &Key, dims: usize) -> Result<()> {
        let (group, kind, model) = key;
        let (last, deletes) = store::embeddings::extent(conn, group, kind, model)?;
        if deletes != self.deletes || dims != self.dims || last < self.last {
            *self = Copy {
                deletes,
                dims,
                words: dims.div_ceil(64),
                ..Copy::default()
            };
        }
        if last != self.last {
            self.append(conn, key)?;
        }
        Ok(())
    }

    /// The cosine of the row in `slot` with a question quantized to `q`
    /// (scale `qs`).
    fn cosine(&self, slot: usize, q: &[i8], qs: f32) -> f32 {
        let v = &self.data[slot * self.dims..(slot + 1) * self.dims];
        dot8(v, q) as f32 * self.scales[slot] * qs
    }

    /// The `n` nearest rows to `q` (signs `qb`), best first: the
    /// `n × SHORTLIST` nearest by signs, then by their 8-bit cosines.
    fn nearest(&self, q: &[i8], qs: f32, qb: &[u64], n: usize) -> Vec<(i64, f32)> {
        let short = n.saturating_mul(SHORTLIST);
        let rows = self.ids.len();
        let shortlist: Vec<(usize, u32)> = (0..rows.div_ceil(CHUNK))
            .into_par_iter()
            .map(|c| {
                let slots = c * CHUNK..((c + 1) * CHUNK).min(rows);
                let mut near: Vec<(usize, u32)> = slots
                    .map(|s| {
                        let b = &self.signs[s * self.words..(s + 1) * self.words];
                        (s, hamming(b, qb))
                    })
                    .collect();
                keep_nearest(&mut near, short);
                near
            })
            .reduce(Vec::new, |mut a, b| {
                a.extend(b);
                keep_nearest(&mut a, short);
                a
            });
        let mut best: Vec<(i64, f32)> = shortlist
            .into_iter()
            .map(|(s, _)| (self.ids[s], self.cosine(s, q, qs)))
            .collect();
        keep_best(&mut best, n);
        best.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        best
    }
}

/// Keeps the `n` of `v` with the fewest differing signs (in no order).
fn keep_nearest(v: &mut Vec<(usize, u32)>, n: usize) {
    if v.len() > n {
        v.select_nth_unstable_by_key(n, |x| x.1);
        v.truncate(n);
    }
}

/// Keeps the `n` highest of `v` (in no order).
fn keep_best(v: &mut Vec<(i64, f32)>, n: usize) {
    if v.len() > n {
        v.select_nth_unstable_by(n, |a, b| b.1.total_cmp(&a.1));
        v.truncate(n);
    }
}

/// What a question finds among the vectors of `kind` in `groups` (the
/// asking group's and `global`'s).
#[derive(Debug, Default)]
pub struct Near {
    /// The nearest rows, best first.
    pub best: Vec<(i64, f32)>,
    /// The cosine of each of the rows asked about that has a vector.
    pub of: HashMap<i64, f32>,
}

/// The `n` rows of `kind` nearest `q`, and the cosines of the rows `also`
/// (the candidates found by words).
pub fn near(
    conn: &Db<'_>,
    groups: [&str; 2],
    kind: &str,
    model: &str,
    q: &[f32],
    n: usize,
    also: &[i64],
) -> Result<Near> {
    let (qs, qq) = quantize(q);
    let qb = signs(q);
    let mut out = Near::default();
    let mut seen = Vec::with_capacity(2);
    for g in groups {
        if seen.contains(&g) {
            continue;
        }
        seen.push(g);
        let key = (g.to_string(), kind.to_string(), model.to_string());
        let copy = copy_of(key.clone());
        let mut c = copy
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        c.refresh(conn, &key, q.len())?;
        if n > 0 {
            out.best.extend(c.nearest(&qq, qs, &qb, n));
        }
        for id in also {
            if let Some(&slot) = c.slots.get(id) {
                out.of.insert(*id, c.cosine(slot, &qq, qs));
            }
        }
    }
    keep_best(&mut out.best, n);
    out.best
        .sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random unit vectors, seeded.
    fn units(seed: u64) -> impl FnMut() -> Vec<f32> {
        let mut seed = seed;
        move || {
            let mut v: Vec<f32> = (0..384)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    (seed % 2001) as f32 / 1000.0 - 1.0
                })
                .collect();
            normalise(&mut v);
            v
        }
    }

    fn normalise(v: &mut [f32]) {
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        for x in v.iter_mut() {
            *x /= norm;
        }
    }

    #[test]
    fn the_nearest_by_signs_then_bytes_are_the_nearest() {
        let mut unit = units(11);
        let q = unit();
        let mut c = Copy {
            dims: 384,
            words: 6,
            ..Copy::default()
        };
        let push = |c: &mut Copy, id: i64, v: &[f32]| {
            let (scale, b) = quantize(v);
            c.slots.insert(id, c.ids.len());
            c.ids.push(id);
            c.scales.push(scale);
            c.data.extend_from_slice(&b);
            c.signs.extend(signs(v));
        };
        // 20 texts near the question (cosine about 0.6–0.9) among 20,000
        // unrelated ones.
        for id in 0..20_000 {
            let v = if id % 1_000 == 7 {
                let noise = unit();
                let w = 0.3 + (id / 1_000) as f32 * 0.04;
                let mut v: Vec<f32> = q.iter().zip(&noise).map(|(a, b)| a + w * b).collect();
                normalise(&mut v);
                v
            } else {
                unit()
            };
            push(&mut c, id, &v);
        }
        let (qs, qq) = quantize(&q);
        let best = c.nearest(&qq, qs, &signs(&q), 20);
        let planted = best.iter().filter(|(id, _)| id % 1_000 == 7).count();
        assert_eq!(planted, 20, "{best:?}");
        // Best first, the nearest planted one (the least noise) on top.
        assert_eq!(best[0].0, 7);
        assert!(best.windows(2).all(|w| w[0].1 >= w[1].1));
    }

    #[test]
    fn quantized_cosines_are_close_to_the_exact_ones() {
        let mut unit = units(7);
        for _ in 0..200 {
            let (a, b) = (unit(), unit());
            let (sa, qa) = quantize(&a);
            let (sb, qb) = quantize(&b);
            let approx = dot8(&qa, &qb) as f32 * sa * sb;
            assert!((approx - g2_embed::dot(&a, &b)).abs() < 0.01);
            // A vector with itself: 1.
            assert!((dot8(&qa, &qa) as f32 * sa * sa - 1.0).abs() < 0.01);
        }
        assert_eq!(quantize(&[0.0; 4]).1, vec![0; 4]);
    }
}
