//! The offline extractor: deterministic, no model, no account.

use super::{BatchInput, ExtractError, Extractor, ObservationDraft, SummaryDraft};

/// Rules over the captured text (see the module doc of `memory::extract`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Offline;

impl Extractor for Offline {
    fn observations(&self, _batch: &BatchInput) -> Result<Vec<ObservationDraft>, ExtractError> {
        Ok(Vec::new())
    }

    fn summary(&self, _batches: &[BatchInput]) -> Result<SummaryDraft, ExtractError> {
        Ok(SummaryDraft::default())
    }
}
