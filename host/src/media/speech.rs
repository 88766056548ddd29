//! Voice to text on this machine (Whisper, through `g2_speech`): one
//! worker for the whole host, so transcription never takes the runtime's
//! threads or more than its share of the cores; each job has a timeout.
//! The model is loaded on first use and kept.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OnceCell, Semaphore};

use crate::config::MediaSettings;

/// Where `scripts/setup.sh` makes the model, under a project root.
pub const DEFAULT_MODEL: &str = "tools/models/whisper-tiny-en";

/// What was heard.
#[derive(Debug, Clone, PartialEq)]
pub struct Heard {
    pub text: String,
    pub seconds: u32,
}

/// The host's transcriber.
pub struct Speech {
    model: Option<PathBuf>,
    max_seconds: u32,
    timeout: Duration,
    loaded: OnceCell<Result<Arc<g2_speech::Transcriber>, String>>,
    /// One transcription at a time: it uses every core it is given.
    worker: Arc<Semaphore>,
}

/// The model's folder: the configured one, else [`DEFAULT_MODEL`] under
/// one of `home::install_roots`.
pub fn find(root: &Path, settings: &MediaSettings) -> Option<PathBuf> {
    if let Some(p) = &settings.speech_model {
        return Some(p.clone());
    }
    crate::home::install_roots(root)
        .into_iter()
        .map(|r| r.join(DEFAULT_MODEL))
        .find(|p| p.is_dir())
}

impl Speech {
    pub fn new(root: &Path, settings: &MediaSettings) -> Self {
        Speech {
            model: find(root, settings),
            max_seconds: settings.max_seconds,
            timeout: Duration::from_secs(settings.transcribe_timeout_secs),
            loaded: OnceCell::new(),
            worker: Arc::new(Semaphore::new(1)),
        }
    }

    /// The model's folder, if one was found.
    pub fn model(&self) -> Option<&Path> {
        self.model.as_deref()
    }

    async fn transcriber(&self) -> Result<Arc<g2_speech::Transcriber>, String> {
        self.loaded
            .get_or_init(|| async {
                let Some(dir) = self.model.clone() else {
                    return Err(format!(
                        "no speech model (run scripts/setup.sh, or set media.speech_model; it is {DEFAULT_MODEL})"
                    ));
                };
                tokio::task::spawn_blocking(move || {
                    g2_speech::Transcriber::load(&dir)
                        .map(Arc::new)
                        .map_err(|e| format!("the speech model at {} does not load: {e}", dir.display()))
                })
                .await
                .unwrap_or_else(|e| Err(format!("loading the speech model: {e}")))
            })
            .await
            .clone()
    }

    /// The words in a sound file (any format `g2_speech::decode` reads),
    /// or why not. Waits its turn on the worker; gives up after the
    /// timeout (the work then finishes in the background, still holding
    /// the worker, so the host never runs two).
    pub async fn transcribe(&self, bytes: Vec<u8>) -> Result<Heard, String> {
        let model = self.transcriber().await?;
        let max = self.max_seconds;
        let worker = self.worker.clone();
        let job = async move {
            let permit = worker
                .acquire_owned()
                .await
                .map_err(|_| "the transcriber stopped".to_string())?;
            tokio::task::spawn_blocking(move || {
                let _permit = permit;
                // Decoding stops a little past the limit: a long file costs no more.
                let audio =
                    g2_speech::decode_at_most(&bytes, Duration::from_secs(u64::from(max) + 1))
                        .map_err(|e| format!("the sound does not decode: {e}"))?;
                let seconds = audio.duration.as_secs_f64().round() as u32;
                if seconds > max {
                    return Err(format!(
                        "it is {}, longer than the {} g2 transcribes",
                        g2_core::media::clock(seconds),
                        g2_core::media::clock(max)
                    ));
                }
                let text = model
                    .transcribe(&audio)
                    .map_err(|e| format!("transcription failed: {e}"))?;
                Ok(Heard {
                    text: text.trim().to_string(),
                    seconds,
                })
            })
            .await
            .unwrap_or_else(|e| Err(format!("transcription failed: {e}")))
        };
        // The wait for the worker counts: a queue of long notes gives up too.
        tokio::time::timeout(self.timeout, job)
            .await
            .unwrap_or_else(|_| Err(format!("it took longer than {} s", self.timeout.as_secs())))
    }
}
