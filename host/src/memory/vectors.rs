//! Similarity over one group's vectors: brute-force cosine over a copy kept
//! in memory per (group, kind, model), brought up to date from the store
//! before each use (new vectors appended by rowid; a count that no longer
//! adds up, after a delete or a re-embedding, reloads the group's copy).
//!
//! The group is the key of every read: a group's question is compared with
//! its own vectors and `global`'s only, never another group's.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use rusqlite::Connection;

use crate::Result;
use crate::store;

#[derive(Default)]
struct Copy {
    /// Rows in the store when last read, and the newest rowid.
    count: i64,
    last: i64,
    ids: Vec<i64>,
    /// `ids.len()` vectors, one after the other.
    data: Vec<f32>,
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

impl Copy {
    /// Appends the vectors stored after the newest one read.
    fn append(&mut self, conn: &Connection, key: &Key, dims: usize) -> Result<()> {
        let (group, kind, model) = key;
        for (rowid, id, bytes) in
            store::embeddings::vectors_after(conn, group, kind, model, self.last)?
        {
            if let Some(v) = g2_embed::from_bytes(&bytes).filter(|v| v.len() == dims) {
                self.ids.push(id);
                self.data.extend_from_slice(&v);
            }
            self.last = rowid;
            self.count += 1;
        }
        Ok(())
    }

    /// Up to date with the store: new vectors appended; when rows went
    /// (a delete, a re-embedding), read again from empty.
    fn refresh(&mut self, conn: &Connection, key: &Key, dims: usize) -> Result<()> {
        let (group, kind, model) = key;
        let (count, last) = store::embeddings::extent(conn, group, kind, model)?;
        if (count, last) == (self.count, self.last) {
            return Ok(());
        }
        self.append(conn, key, dims)?;
        if self.count != count {
            *self = Copy::default();
            self.append(conn, key, dims)?;
        }
        Ok(())
    }
}

/// The cosine of `q` with every vector of `kind` in `groups` (the asking
/// group's and `global`'s): (row id, cosine).
pub fn cosines(
    conn: &Connection,
    groups: [&str; 2],
    kind: &str,
    model: &str,
    q: &[f32],
) -> Result<Vec<(i64, f32)>> {
    let mut out = Vec::new();
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
        out.extend(
            c.ids
                .iter()
                .zip(c.data.chunks_exact(q.len()))
                .map(|(id, v)| (*id, g2_embed::dot(q, v))),
        );
    }
    Ok(out)
}

/// The `n` best of `cosines`, best first.
pub fn best(mut all: Vec<(i64, f32)>, n: usize) -> Vec<(i64, f32)> {
    if all.len() > n {
        all.select_nth_unstable_by(n, |a, b| b.1.total_cmp(&a.1));
        all.truncate(n);
    }
    all.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    all
}
