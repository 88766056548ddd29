//! Memory's background jobs under `g2 serve`, started together: the
//! recovery of interrupted capture and retention ([`recovery`](super::recovery)),
//! the processor that extracts observations and summaries
//! ([`process`](super::process)), and, when recall has a model, the
//! embedding jobs ([`embed`](super::embed)).

use std::path::Path;
use std::sync::Arc;

use tokio::sync::Notify;

use crate::Result;
use crate::background::Background;
use crate::config::MemorySettings;
use crate::gateway::Gateway;
use crate::store::Store;

use super::extract::model::ModelExtractor;

/// The running jobs, until [`Jobs::into_backgrounds`] hands them over to
/// be stopped.
pub struct Jobs {
    recovery: Background,
    processor: Background,
    /// None when recall is lexical.
    embedder: Option<Background>,
}

/// Starts the jobs of `host` (its name among the hosts of the home, which
/// its claims on memory jobs carry).
pub async fn start(
    store: &Store,
    root: &Path,
    settings: &MemorySettings,
    gateway: &Gateway,
    host: &str,
) -> Result<Jobs> {
    // A pass at start: what a killed host or a dead container left.
    let recovery = super::recovery::start(store.clone(), settings.clone());
    // Extraction goes through the gateway's provider, accounted to the
    // group under purpose `memory` (the offline model answers it with
    // its rules).
    let processor = super::process::start(
        store.clone(),
        settings.clone(),
        Arc::new(ModelExtractor::new(gateway.clone(), settings.clone())),
        Arc::new(Notify::new()),
        host.to_string(),
    );
    // Recall by meaning: the model is loaded once, the jobs embed in the
    // background.
    let embedder = super::embed::serve(root, settings, store).await?;
    Ok(Jobs {
        recovery,
        processor,
        embedder,
    })
}

impl Jobs {
    /// Each job's handle, to be stopped with the host's other jobs.
    pub fn into_backgrounds(self) -> impl Iterator<Item = Background> {
        [self.recovery, self.processor]
            .into_iter()
            .chain(self.embedder)
    }
}
