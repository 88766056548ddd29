//! Forgetting on request: the one path by which a person (CLI, HTTP API)
//! or an agent (its `forget` tool) forgets an observation, and by which a
//! person deletes what was captured of one session.
//!
//! Invariant: the owner is read and checked against the caller's scope in
//! the same transaction that forgets, so an observation of another memory
//! than the scope's is never touched. A forgotten observation stays as a
//! tombstone (`store::observations::forget` empties its text). What each
//! caller says about a missing or foreign observation is the caller's:
//! [`Forgotten`] tells it which case it met.

use g2_core::validate::MemoryFolder;

use crate::Result;
use crate::store::{self, Store};

/// What [`forget`] came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Forgotten {
    /// The observation is forgotten now.
    Done,
    /// No observation has that id.
    Missing,
    /// The observation is this other memory's, outside the scope: left as
    /// it was.
    Elsewhere(MemoryFolder),
}

/// Forgets observation `id` when it is `scope`'s (any memory's when
/// `None`: a person naming only the id).
pub async fn forget(store: &Store, id: i64, scope: Option<MemoryFolder>) -> Result<Forgotten> {
    store
        .write(move |tx| {
            let Some(owner) = store::observations::group_of(tx, id)? else {
                return Ok(Forgotten::Missing);
            };
            if scope.as_ref().is_some_and(|s| *s != owner) {
                return Ok(Forgotten::Elsewhere(owner));
            }
            Ok(if store::observations::forget(tx, &owner, id)? {
                Forgotten::Done
            } else {
                Forgotten::Missing
            })
        })
        .await
}

/// Deletes what was captured of Claude Code's session `session_id`,
/// whichever group holds it; false when none does.
pub async fn forget_session(store: &Store, session_id: &str) -> Result<bool> {
    let id = session_id.to_string();
    store
        .write(move |tx| match store::memory::session_group(tx, &id)? {
            Some(group) => store::memory::forget_session(tx, &group, &id),
            None => Ok(false),
        })
        .await
}

/// Deletes what was captured of `group`'s session `session_id`; false when
/// the group holds no such session (another group's is never touched).
pub async fn forget_group_session(
    store: &Store,
    group: &g2_core::validate::GroupFolder,
    session_id: &str,
) -> Result<bool> {
    let (g, id) = (group.clone(), session_id.to_string());
    store
        .write(move |tx| match store::memory::session_group(tx, &id)? {
            Some(owner) if owner == g => store::memory::forget_session(tx, &owner, &id),
            _ => Ok(false),
        })
        .await
}
