//! What the memory modules' tests store before they ask.

use crate::store::{self, db::Db};
use g2_core::validate::MemoryFolder;

use super::extract::{Kind, ObservationDraft};

/// Stores a fact titled `title` for `owner`, said at `at`, about `concerns`
/// (no narrative, facts or files): its id.
pub(crate) fn insert_fact(
    tx: &Db<'_>,
    owner: &MemoryFolder,
    title: &str,
    importance: u8,
    concerns: &[&str],
    at: &str,
) -> store::Result<i64> {
    let draft = ObservationDraft {
        kind: Kind::Fact,
        title: title.into(),
        narrative: String::new(),
        facts: vec![],
        files: vec![],
        importance,
        concerns: concerns.iter().map(|&c| c.into()).collect(),
    };
    store::observations::insert(tx, owner, &draft, Default::default(), at, |_| false)
}
