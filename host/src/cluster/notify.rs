//! What other hosts stored, as they store it (the store's notices,
//! `store::notify`; PostgreSQL only): a message to the assistant wakes its
//! group's owner wherever it was posted, and every host's live streams
//! show every message. A lost connection is followed by a look at
//! everything (the notices sent meanwhile are gone).

use std::sync::Arc;

use crate::background::Background;
use crate::store::Store;
use crate::store::notify::{self, Notice};

/// What to do with what others stored.
pub struct Follow {
    /// A message to the assistant was stored in this chat.
    pub inbound: Arc<dyn Fn(&str) + Send + Sync>,
    /// Messages were stored: publish what is new.
    pub stored: Arc<dyn Fn() + Send + Sync>,
    /// Notices may have been lost: look at every group.
    pub missed: Arc<dyn Fn() + Send + Sync>,
}

/// Follows the store's message notices until stopped; `None` on SQLite
/// (one host: it knows what it stores).
pub fn follow(store: &Store, to: Follow) -> Option<Background> {
    let mut rx = store.listen(notify::MESSAGES)?;
    Some(Background::spawn(|mut stopped| async move {
        loop {
            let notice = tokio::select! {
                _ = &mut stopped => break,
                n = rx.recv() => match n {
                    Some(n) => n,
                    None => break,
                },
            };
            match notice {
                Notice::Payload(p) => {
                    if let Some(chat) = p.strip_prefix("in ") {
                        (to.inbound)(chat);
                    }
                    (to.stored)();
                }
                Notice::Missed => {
                    (to.missed)();
                    (to.stored)();
                }
            }
        }
    }))
}
