//! Remembering on request: a text a person or an agent asked to keep,
//! stored as a `fact` observation of importance 9 (origin `remembered`),
//! cleaned like everything memory keeps (with the host's own credentials
//! among the secrets: the caller's redactor). A restatement of an active one
//! supersedes it, as for extracted observations. The owner may be
//! `global`: the memory every group reads (only people write there).

use g2_core::privacy::Redactor;
use g2_core::validate::MemoryFolder;

use crate::memory::extract::{Kind, ObservationDraft};
use crate::store::Store;
use crate::store::observations::{self as obs, Provenance};
use crate::{Error, Result};

/// Longest title of a remembered observation, in characters.
const TITLE_CHARS: usize = 120;

/// Stores `text` for `owner`; returns the observation's id.
pub async fn remember(
    store: &Store,
    redactor: &Redactor,
    owner: MemoryFolder,
    text: &str,
) -> Result<i64> {
    let text = redactor.clean(text).trim().to_string();
    if text.is_empty() {
        return Err(Error::Invalid("there is nothing to remember".into()));
    }
    let title =
        g2_core::archive::truncate(&g2_core::quote::one_line(&text), TITLE_CHARS).into_owned();
    let draft = ObservationDraft {
        kind: Kind::Fact,
        title,
        narrative: text,
        facts: Vec::new(),
        files: Vec::new(),
        importance: 9,
        concerns: Vec::new(),
    };
    let at = crate::now_rfc3339();
    store
        .write(move |tx| {
            let from = Provenance {
                remembered: true,
                ..Provenance::default()
            };
            obs::insert(tx, &owner, &draft, from, &at, |old| {
                crate::memory::process::same_statement(old, &draft.title)
            })
        })
        .await
}
