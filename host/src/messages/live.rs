//! Live delivery: every published message goes to the listeners once, as
//! a [`Live`] (its JSON serialized once for all of them), in `seq` order.
//! [`Log::follow`] gives one listener a chat's messages: those after
//! its `Last-Event-ID` from the store, then live ones, with no gap and no
//! repeat.
//!
//! Boundary: reads the store (a stream's backlog) and the sequencer's
//! broadcast; publishes nothing itself (the sequencer does, `sequencer.rs`).

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::sync::broadcast;

use super::{Log, Message, PAGE};
use crate::store;

/// Published messages a listener may fall behind before its stream is
/// closed (it resumes from the store with `Last-Event-ID`).
pub const LISTENER_BUFFER: usize = 4096;

/// A published message with its JSON, serialized once for every listener.
#[derive(Debug)]
pub struct Live {
    pub message: Message,
    pub json: String,
}

impl Live {
    pub(super) fn new(message: Message) -> Arc<Live> {
        let json = serde_json::to_string(&message).unwrap_or_default();
        Arc::new(Live { message, json })
    }
}

impl Log {
    /// Live messages of every chat, in `seq` order; a receiver more than
    /// [`LISTENER_BUFFER`] behind gets `Lagged`.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Live>> {
        self.events.subscribe()
    }

    /// A chat's messages for one listener: those after `after` from the
    /// store (none without it), then live ones, each once and in `seq`
    /// order. Ends when the listener falls [`LISTENER_BUFFER`] behind.
    pub fn follow(
        &self,
        chat_jid: String,
        after: Option<i64>,
    ) -> impl futures_util::Stream<Item = Arc<Live>> + Send + use<> {
        // Subscribed before the store is read: whatever is published after
        // the reads is in `rx`, whatever before is in the store.
        let rx = self.events.subscribe();
        let store = self.store.clone();
        let state = (
            rx,
            after.unwrap_or(0),
            after.is_some(),
            VecDeque::<Message>::new(),
        );
        futures_util::stream::unfold(
            state,
            move |(mut rx, mut last, mut catching_up, mut page)| {
                let (store, jid) = (store.clone(), chat_jid.clone());
                async move {
                    loop {
                        if let Some(m) = page.pop_front() {
                            last = m.seq;
                            return Some((Live::new(m), (rx, last, catching_up, page)));
                        }
                        if catching_up {
                            let j = jid.clone();
                            match store
                                .read(move |c| store::messages::after(c, &j, last, PAGE))
                                .await
                            {
                                Ok(rows) => {
                                    catching_up = rows.len() == PAGE;
                                    page = rows.into();
                                    continue;
                                }
                                Err(e) => {
                                    tracing::warn!(error = %e, "reading a stream's backlog; closing it");
                                    return None;
                                }
                            }
                        }
                        match rx.recv().await {
                            Ok(l) if l.message.chat_jid == jid && l.message.seq > last => {
                                last = l.message.seq;
                                return Some((l, (rx, last, catching_up, page)));
                            }
                            Ok(_) => {}
                            // Closed, not skipped past: the client resumes from
                            // the store with Last-Event-ID.
                            Err(broadcast::error::RecvError::Lagged(n)) => {
                                tracing::info!(chat = %jid, behind = n, "closing a stream that fell behind");
                                return None;
                            }
                            Err(broadcast::error::RecvError::Closed) => return None,
                        }
                    }
                }
            },
        )
    }
}
