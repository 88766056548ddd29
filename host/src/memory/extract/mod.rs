//! Extraction: what a prompt batch taught, as typed observations, and what
//! a session did, as a summary. The processing worker (`memory::process`)
//! hands an [`Extractor`] the captured rows and stores what it returns; the
//! extractor never touches the store, the user's session or the network
//! beyond the model gateway's provider.
//!
//! The host runs [`model::ModelExtractor`]: one Messages API call per
//! batch (and per session summary) through the model gateway's provider,
//! accounted to the group under purpose `memory` and capped per group and
//! day, asking for a strict JSON shape ([`ObservationDraft`],
//! [`SummaryDraft`]) that is validated. With the `anthropic` provider a
//! model (`memory.model`) answers; with the `offline` provider the offline
//! model answers extraction requests with the rules of [`offline`]
//! (deterministic, no account: decisions and commitments from the replies,
//! facts and preferences people stated, files changed and commands run
//! from the activities, an extractive summary). The rules also run on
//! their own, as [`offline::Offline`], for tests and benchmarks.

use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};

use g2_core::validate::GroupFolder;

pub mod model;
pub mod offline;

pub use crate::store::observations::{Kind, ObservationDraft, SummaryDraft};

/// One tool call of a batch, as captured.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ActivityInput {
    pub tool: String,
    /// The captured input summary (`command`, `file_path`, `pattern`, …).
    pub input: serde_json::Value,
    pub output: String,
    pub files_read: Vec<String>,
    pub files_modified: Vec<String>,
    pub ok: bool,
}

/// One prompt batch: the prompt (a routed prompt is `Ann: …` lines, one per
/// message), who sent it, the agent's reply and its tool calls in order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BatchInput {
    pub prompt_number: i64,
    pub prompt: String,
    /// Sender names of a routed prompt, in order of first message.
    pub senders: Vec<String>,
    pub reply: Option<String>,
    pub activities: Vec<ActivityInput>,
    /// When the prompt came (RFC 3339).
    pub at: String,
}

/// Why an extraction produced nothing.
#[derive(Debug, thiserror::Error)]
pub enum ExtractError {
    /// The model's answer was not the shape asked for, even when asked
    /// again: the job fails for good.
    #[error("invalid extractor output: {0}")]
    Invalid(String),
    /// The model could not be reached, or answered with an error: the job
    /// is retried later.
    #[error("extractor unavailable: {0}")]
    Unavailable(String),
    /// The group's tokens for today are used up: the job waits for the
    /// next UTC day.
    #[error("extraction paused: {0}")]
    OverBudget(String),
}

/// What an extraction returns.
pub type Extracted<'a, T> = BoxFuture<'a, Result<T, ExtractError>>;

/// Turns captured batches into observations and sessions into summaries,
/// for `group` (whose budget a model-backed extractor spends).
pub trait Extractor: Send + Sync {
    /// 0–N observations from one completed batch.
    fn observations<'a>(
        &'a self,
        group: &'a GroupFolder,
        batch: &'a BatchInput,
    ) -> Extracted<'a, Vec<ObservationDraft>>;
    /// The summary of a session from its batches, in order.
    fn summary<'a>(
        &'a self,
        group: &'a GroupFolder,
        batches: &'a [BatchInput],
    ) -> Extracted<'a, SummaryDraft>;
}
