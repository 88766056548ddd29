//! The bench's vectors: every passage's text and its messages, embedded
//! once with the real model and kept in `target/` by text hash, so a
//! second run embeds only what changed.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::time::Instant;

use g2_embed::Embedder;

pub struct Cache {
    path: PathBuf,
    map: HashMap<u64, Vec<f32>>,
    dims: usize,
    pub embedded: usize,
    pub seconds: f64,
}

fn key(text: &str) -> u64 {
    let mut h = DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}

impl Cache {
    pub fn open(path: PathBuf, dims: usize) -> Cache {
        let mut map = HashMap::new();
        if let Ok(mut f) = std::fs::File::open(&path) {
            let mut b = Vec::new();
            f.read_to_end(&mut b).unwrap();
            let rec = 8 + dims * 4;
            for c in b.chunks_exact(rec) {
                let k = u64::from_le_bytes(c[..8].try_into().unwrap());
                map.insert(k, g2_embed::from_bytes(&c[8..]).unwrap());
            }
        }
        Cache {
            path,
            map,
            dims,
            embedded: 0,
            seconds: 0.0,
        }
    }

    /// Embeds what the cache lacks of `texts`.
    pub fn fill(&mut self, model: &Embedder, texts: &[String]) {
        let mut missing: Vec<&str> = texts
            .iter()
            .filter(|t| !self.map.contains_key(&key(t)))
            .map(String::as_str)
            .collect();
        missing.sort_unstable();
        missing.dedup();
        if missing.is_empty() {
            return;
        }
        let t = Instant::now();
        // `target/` of the checkout: absent when builds go elsewhere
        // (`CARGO_TARGET_DIR`).
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        let mut out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .unwrap();
        for (n, chunk) in missing.chunks(256).enumerate() {
            let vs = model.embed(chunk).unwrap();
            for (text, v) in chunk.iter().zip(vs) {
                assert_eq!(v.len(), self.dims);
                out.write_all(&key(text).to_le_bytes()).unwrap();
                out.write_all(&g2_embed::to_bytes(&v)).unwrap();
                self.map.insert(key(text), v);
            }
            eprintln!(
                "embedded {} of {}",
                (n + 1) * 256.min(chunk.len()),
                missing.len()
            );
        }
        self.embedded += missing.len();
        self.seconds += t.elapsed().as_secs_f64();
    }

    pub fn get(&self, text: &str) -> &[f32] {
        &self.map[&key(text)]
    }
}
