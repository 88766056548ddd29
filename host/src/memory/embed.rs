//! Recall by meaning: the local embedding model, the background jobs that
//! embed what recall reads, and the question's vector.
//!
//! **Shared state.** One model per process, installed at start
//! ([`init`]: the host, and the CLI commands that recall) and read by
//! `memory::recall` through [`query`]. With `memory.embeddings = "off"`, or
//! a model that fails to load, nothing is installed and recall is lexical.
//!
//! **Jobs.** A trigger queues a job in the transaction that writes a
//! passage, an observation, a summary or a finished prompt
//! (`migrations/0012_embeddings.sql`); [`start`] takes them newest first,
//! embeds them off the async runtime and stores each vector in the
//! transaction that ends its job. A host killed mid-way finds the jobs
//! still queued; a vector stored is never made again. Never in an agent's
//! turn or the router's path: only the question of a recall is embedded
//! where it is asked (about 5 ms).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use g2_embed::Embedder;

use crate::background::Background;
use crate::config::{EmbeddingsMode, MemorySettings};
use crate::store::{self, Store};

/// Where `scripts/setup.sh` unpacks the model, under a project root.
pub const DEFAULT_MODEL: &str = "tools/models/all-minilm-l6-v2";
/// Rows one job pass embeds together.
const BATCH: i64 = 32;
/// How long the jobs wait when nothing is queued.
const IDLE: Duration = Duration::from_secs(1);

static MODEL: RwLock<Option<Arc<Model>>> = RwLock::new(None);

/// A loaded model and the name its vectors are stored under.
pub struct Model {
    pub embedder: Embedder,
    pub name: String,
}

/// What [`load`] found.
pub enum Loaded {
    Off,
    Model(Arc<Model>),
    /// Why the model could not be loaded (recall is lexical).
    Failed(String),
}

/// The model's folder: the configured one, else [`DEFAULT_MODEL`] under
/// one of `home::install_roots`. `None` when none exists.
pub fn find(root: &Path, settings: &MemorySettings) -> Option<PathBuf> {
    if let Some(p) = &settings.embedding_model {
        return Some(p.clone());
    }
    crate::home::install_roots(root)
        .into_iter()
        .map(|r| r.join(DEFAULT_MODEL))
        .find(|p| p.is_dir())
}

/// Loads the model the settings name.
pub fn load(root: &Path, settings: &MemorySettings) -> Loaded {
    if settings.embeddings == EmbeddingsMode::Off {
        return Loaded::Off;
    }
    let Some(dir) = find(root, settings) else {
        return Loaded::Failed(format!(
            "no model at {DEFAULT_MODEL} (run scripts/setup.sh, or set memory.embedding_model)"
        ));
    };
    match Embedder::load(&dir) {
        Ok(embedder) => {
            let name = dir
                .file_name()
                .map_or_else(|| "model".into(), |n| n.to_string_lossy().into_owned());
            Loaded::Model(Arc::new(Model { embedder, name }))
        }
        Err(e) => Loaded::Failed(format!("{}: {e}", dir.display())),
    }
}

/// Loads the model and installs it for this process; says what happened.
pub fn init(root: &Path, settings: &MemorySettings) -> Option<Arc<Model>> {
    let model = match load(root, settings) {
        Loaded::Off => None,
        Loaded::Model(m) => {
            tracing::info!(model = %m.name, dims = m.embedder.dims(), "embedding model loaded");
            Some(m)
        }
        Loaded::Failed(why) => {
            tracing::warn!(%why, "embedding model not loaded; recall is lexical");
            None
        }
    };
    install(model.clone());
    model
}

/// Installs `model` for this process (`None`: recall is lexical).
pub fn install(model: Option<Arc<Model>>) {
    if let Ok(mut m) = MODEL.write() {
        *m = model;
    }
}

/// The installed model.
pub fn model() -> Option<Arc<Model>> {
    MODEL.read().ok().and_then(|m| m.clone())
}

/// The last question embedded, and by which model: one search is a recall
/// per group (`g2 memory search`, the viewer), each of the same question.
type Last = (Arc<Model>, String, Vec<f32>);
static LAST: Mutex<Option<Last>> = Mutex::new(None);

/// A question's vector, when a model is installed.
pub fn query(text: &str) -> Option<(Arc<Model>, Vec<f32>)> {
    let m = model()?;
    let last = || {
        LAST.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    };
    if let Some((lm, lt, v)) = last().as_ref()
        && Arc::ptr_eq(lm, &m)
        && lt == text
    {
        return Some((m, v.clone()));
    }
    // Embedded outside the lock: other groups' questions do not wait.
    match m.embedder.embed_one(text) {
        Ok(v) => {
            *last() = Some((m.clone(), text.to_string(), v.clone()));
            Some((m, v))
        }
        Err(e) => {
            tracing::warn!(error = %e, "embedding a question failed; recall is lexical");
            None
        }
    }
}

/// What is embedded of a row's text: a passage's messages without their
/// speaker marks (`**User**: `, `**Ann** (09:00): `; as
/// `search::passages` reads them), one per line.
pub fn clean(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| crate::search::passages::speaker(l).map_or(l, |(_, text)| text))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Embeds up to [`BATCH`] queued rows; how many were stored.
pub fn run_once(store: &Store, model: &Model) -> crate::Result<usize> {
    let jobs = store.write_blocking(|tx| store::embeddings::pending(tx, BATCH))?;
    if jobs.is_empty() {
        return Ok(0);
    }
    let texts: Vec<String> = jobs.iter().map(|j| clean(&j.text)).collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let vectors = model.embedder.embed(&refs)?;
    let name = model.name.clone();
    store.write_blocking(move |tx| {
        let mut n = 0;
        for (job, v) in jobs.iter().zip(&vectors) {
            n += usize::from(store::embeddings::put(
                tx,
                job,
                &name,
                &g2_embed::to_bytes(v),
            )?);
        }
        Ok(n)
    })
}

/// The jobs, in the background until stopped.
pub fn start(store: Store, model: Arc<Model>) -> Background {
    Background::spawn(|mut stopped| async move {
        loop {
            let (s, m) = (store.clone(), model.clone());
            let done = tokio::task::spawn_blocking(move || run_once(&s, &m)).await;
            let wait = match done {
                Ok(Ok(0)) => IDLE,
                Ok(Ok(_)) => Duration::ZERO,
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "embedding jobs failed; the next pass retries");
                    IDLE * 10
                }
                Err(e) => {
                    tracing::warn!(error = %e, "embedding jobs stopped");
                    IDLE * 10
                }
            };
            tokio::select! {
                _ = &mut stopped => break,
                _ = tokio::time::sleep(wait) => {}
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speaker_marks_are_left_out() {
        assert_eq!(
            clean(
                "**User**: the boat is at pier 7\n\n**G2**: noted\n**Ann** (09:00): and the oars?\nmore"
            ),
            "the boat is at pier 7\nnoted\nand the oars?\nmore"
        );
        assert_eq!(clean("**bold** words: stay"), "**bold** words: stay");
    }
}
