//! What people are shown of a group's memory (the HTTP API and the web
//! viewer): the live feed, the captured sessions and their timelines,
//! summaries and observations. Reads only; what agents are given is
//! [`recall`](super::recall) and [`context`](super::context).
//!
//! Invariant: every read names its group, and the group is part of the
//! query, so another group's record is simply not found.

use g2_core::validate::{GroupFolder, MemoryFolder};

use crate::Result;
use crate::store::{self, Store};

pub use crate::store::memory::{FeedCursor, FeedItem, SessionRow, Timeline};
pub use crate::store::observations::{ObservationRow, SummaryRow};

/// Where the group's feed stands now: what is stored after it is new.
pub async fn feed_now(store: &Store, group: &GroupFolder) -> Result<FeedCursor> {
    let g = group.clone();
    store.read(move |c| store::memory::feed_now(c, &g)).await
}

/// Up to `limit` records stored after `from`, oldest first, and where the
/// feed stands after them.
pub async fn feed_after(
    store: &Store,
    group: &GroupFolder,
    from: FeedCursor,
    limit: i64,
) -> Result<(Vec<FeedItem>, FeedCursor)> {
    let g = group.clone();
    store
        .read(move |c| store::memory::feed_after(c, &g, from, limit))
        .await
}

/// What was captured of the group's agent sessions, newest first.
pub async fn sessions(store: &Store, group: &GroupFolder) -> Result<Vec<SessionRow>> {
    let g = group.clone();
    store.read(move |c| store::memory::sessions(c, &g)).await
}

/// One captured session's timeline; `None` when it is not this group's.
pub async fn timeline(
    store: &Store,
    group: &GroupFolder,
    session_id: &str,
) -> Result<Option<Timeline>> {
    let (g, s) = (group.clone(), session_id.to_string());
    store
        .read(move |c| store::memory::timeline(c, &g, &s))
        .await
}

/// One session's summary; `None` when there is none of this group's.
pub async fn summary(
    store: &Store,
    group: &GroupFolder,
    session_id: &str,
) -> Result<Option<SummaryRow>> {
    let (g, s) = (group.clone(), session_id.to_string());
    store
        .read(move |c| store::observations::summary(c, &g, &s))
        .await
}

/// The group whose captured session `session_id` is (a person names the
/// session alone); `None` when no group's is.
pub async fn session_group(store: &Store, session_id: &str) -> Result<Option<GroupFolder>> {
    let s = session_id.to_string();
    store
        .read(move |c| store::memory::session_group(c, &s))
        .await
}

/// What recall finds for `question` in `groups`' memories, merged
/// ([`recall_groups`](super::recall::recall_groups)): a person's search.
pub async fn recall_groups(
    store: &Store,
    groups: Vec<GroupFolder>,
    question: &str,
    limit: usize,
) -> Result<Vec<super::recall::RecallHit>> {
    let q = question.to_string();
    store
        .read(move |c| super::recall::recall_groups(c, &groups, &q, limit))
        .await
}

/// The owner's observations, active ones only unless `all`.
pub async fn observations(
    store: &Store,
    owner: &MemoryFolder,
    all: bool,
) -> Result<Vec<ObservationRow>> {
    let o = owner.clone();
    store
        .read(move |c| store::observations::list(c, &o, all))
        .await
}

/// Everything the memory page shows, read in one snapshot.
pub struct Page {
    /// The block the group's next session starts with.
    pub next: String,
    pub observations: Vec<ObservationRow>,
    /// The latest summaries.
    pub summaries: Vec<SummaryRow>,
    /// For a question: what recall finds, and the block a prompt asking
    /// it would be given.
    pub answer: Option<(Vec<super::recall::RecallHit>, String)>,
}

/// The memory page's reads: the session-start block within
/// `inject_tokens`, the active observations, the 10 latest summaries, and
/// for a non-empty `question` its recall and its prompt block within
/// `prompt_tokens`.
pub async fn page(
    store: &Store,
    group: &GroupFolder,
    inject_tokens: usize,
    prompt_tokens: usize,
    question: &str,
) -> Result<Page> {
    let (g, asked) = (group.clone(), question.to_string());
    store
        .read(move |c| {
            let next = super::context::session_start(c, &g, inject_tokens)?;
            let observations = store::observations::list(c, &(&g).into(), false)?;
            let summaries = store::observations::latest_summaries(c, &g, 10)?;
            let answer = if asked.is_empty() {
                None
            } else {
                Some((
                    super::recall::recall(c, &g, &asked, 10)?,
                    super::context::for_prompt(c, &g, &asked, prompt_tokens)?,
                ))
            };
            Ok(Page {
                next,
                observations,
                summaries,
                answer,
            })
        })
        .await
}
