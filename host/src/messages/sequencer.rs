//! The sequencer: one task that stores what the channels take in and
//! publishes every stored message in `seq` order to the live streams.
//!
//! It commits the inbound messages that are queued together in one
//! transaction (group commit), each for its group's chat, with the
//! platform's progress mark; then publishes everything stored since the
//! last publication (so the assistant's messages, stored by others, take
//! their place in the order too), rings the router once per group, and
//! answers the channels. What is delivered by storing it is cleaned in the
//! log once published.
//!
//! A text over the limit (`channels.max_text_bytes`) is refused here, for
//! every platform alike: nothing of it is stored, and a platform's chat
//! is answered with a notice ([`too_long`](super::too_long)), stored in the
//! same transaction (`intake.rs`) and handed to [`Hooks::refused`] to
//! send, once per platform id (stored under a key: the same message
//! reported twice is answered once). An
//! edit over the limit changes nothing; its chat is answered the same way
//! when the edited message is in the log (an edit of a message that was
//! itself refused, or never taken in, is not answered again).
//!
//! Boundary: [`Log::take_in`], [`Log::publish`] and
//! [`Log::clean_delivered`] hand it [`Job`]s; storing what a channel hands
//! in is `intake.rs`; what the layers above must say or do, [`Hooks`].

use std::sync::{Arc, OnceLock};

use tokio::sync::{broadcast, mpsc, oneshot};

use g2_core::validate::GroupFolder;

use super::intake::{Limit, store_inbound};
use super::{Hooks, Intake, Live, Log, Mark, Message, PAGE, Taken};
use crate::Result;
use crate::store::{self, Store};
use crate::trace::{self, Detail};
use g2_core::trace::Stage;

/// Most inbound messages committed in one transaction.
const MAX_BATCH: usize = 1024;
/// Inbound messages waiting for the sequencer before receivers wait too.
const QUEUE: usize = 8192;

/// What the sequencer is asked to do.
pub(super) enum Job {
    /// Store what a channel took in (and its mark) and answer.
    Take {
        items: Vec<Intake>,
        mark: Option<Mark>,
        done: oneshot::Sender<Result<Vec<Result<Taken>>>>,
    },
    /// Someone committed messages: publish what is new.
    Stored,
    /// A message delivered by storing it, published by now: the log keeps
    /// it cleaned (its listeners had it as written).
    Clean(Message),
}

/// The sequencer's queue, started on first use (inside the runtime).
pub(super) struct Sequencer {
    /// The highest `seq` when the log was made: nothing at or below it is
    /// published.
    start: i64,
    jobs: OnceLock<mpsc::Sender<Job>>,
}

impl Sequencer {
    /// Publishes nothing at or below `start` (the highest `seq` when the
    /// log was made).
    pub(super) fn new(start: i64) -> Self {
        Sequencer {
            start,
            jobs: OnceLock::new(),
        }
    }
}

impl Log {
    /// The sequencer's queue; the sequencer starts on first use.
    pub(super) fn jobs(&self) -> &mpsc::Sender<Job> {
        self.sequencer.jobs.get_or_init(|| {
            let (tx, rx) = mpsc::channel(QUEUE);
            tokio::spawn(sequence(
                Sequence {
                    store: self.store.clone(),
                    events: self.events.clone(),
                    hooks: self.hooks.clone(),
                    wake: self.wake.clone(),
                    redactor: self.redactor.clone(),
                    limit: Limit {
                        max_text: self.max_text,
                        assistant: self.assistant.clone(),
                    },
                },
                self.sequencer.start,
                rx,
            ));
            tx
        })
    }
}

/// What the sequencer works with.
struct Sequence {
    store: Store,
    events: broadcast::Sender<Arc<Live>>,
    hooks: Arc<dyn Hooks>,
    wake: Option<mpsc::UnboundedSender<GroupFolder>>,
    redactor: g2_core::privacy::Redactor,
    limit: Limit,
}

/// The sequencer: takes whatever is queued (up to [`MAX_BATCH`] jobs),
/// commits it in one transaction, then publishes everything stored since
/// `published`, in `seq` order, rings the router once per group, and
/// answers the channels; then cleans in the log what was delivered by
/// storing it ([`Job::Clean`]).
/// Ends when every [`Log`] is gone.
async fn sequence(seq: Sequence, mut published: i64, mut jobs: mpsc::Receiver<Job>) {
    let Sequence {
        store,
        events,
        hooks,
        wake,
        redactor,
        limit,
    } = seq;
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while jobs.recv_many(&mut batch, MAX_BATCH).await > 0 {
        let mut takes = Vec::new();
        let mut cleans = Vec::new();
        for job in batch.drain(..) {
            match job {
                Job::Take { items, mark, done } => takes.push((items, mark, done)),
                Job::Clean(m) => cleans.push(m),
                Job::Stored => {}
            }
        }
        if takes.is_empty() {
            published = publish_stored(&store, &events, published).await;
            clean_published(&store, &redactor, cleans).await;
            continue;
        }
        let (dones, takes): (Vec<_>, Vec<_>) = takes
            .into_iter()
            .map(|(items, mark, done)| (done, (items, mark)))
            .unzip();
        let (after, takes) = (published, Arc::new(takes));
        let (batch_takes, batch_hooks, batch_limit) = (takes.clone(), hooks.clone(), limit.clone());
        let committed = store
            .write(move |tx| {
                let mut answers = Vec::with_capacity(batch_takes.len());
                for (items, mark) in batch_takes.iter() {
                    answers.push(store_inbound(
                        tx,
                        batch_hooks.as_ref(),
                        &batch_limit,
                        items,
                        mark.as_ref(),
                    )?);
                }
                // Ours are consecutive; what others stored before them is
                // committed (we hold the write lock) and not yet published.
                let first = answers
                    .iter()
                    .flatten()
                    .find_map(|a| match a {
                        Ok(Taken::Stored(m) | Taken::Refused(m)) => Some(m.seq),
                        _ => None,
                    })
                    .unwrap_or(i64::MAX);
                let others = store::messages::between(tx, after, first)?;
                Ok((others, answers))
            })
            .await;
        let answers: Vec<Result<Vec<Result<Taken>>>> = match committed {
            Ok((others, answers)) => {
                let ours = answers.iter().flatten().filter_map(|a| match a {
                    Ok(Taken::Stored(m) | Taken::Refused(m)) => Some(m.clone()),
                    _ => None,
                });
                for m in others.into_iter().chain(ours) {
                    published = m.seq;
                    traced(&m);
                    let _ = events.send(Live::new(m));
                }
                answers.into_iter().map(Ok).collect()
            }
            Err(e) => {
                // One bad job must not sink the others: each alone.
                tracing::warn!(error = %e, n = takes.len(), "a batch of messages did not commit; storing them one by one");
                let mut answers = Vec::with_capacity(takes.len());
                for i in 0..takes.len() {
                    let (these, hooks, limit) = (takes.clone(), hooks.clone(), limit.clone());
                    let one = store
                        .write(move |tx| {
                            let (items, mark) = &these[i];
                            store_inbound(tx, hooks.as_ref(), &limit, items, mark.as_ref())
                        })
                        .await;
                    answers.push(one);
                }
                published = publish_stored(&store, &events, published).await;
                answers
            }
        };
        // Published, then the router, the refusals' notices sent, then
        // the channels.
        let mut folders: Vec<&GroupFolder> = Vec::new();
        for ((items, _), answer) in takes.iter().zip(&answers) {
            for (item, a) in items.iter().zip(answer.iter().flatten()) {
                let wakes = matches!(a, Ok(Taken::Stored(_) | Taken::Edited));
                if let Ok(Taken::Stored(m)) = a {
                    trace::stamp(Stage::Stored, item.folder(), Some(m.seq));
                }
                if wakes && !folders.contains(&item.folder()) {
                    folders.push(item.folder());
                }
                if let Ok(Taken::Refused(notice)) = a {
                    refused(hooks.as_ref(), item, notice, limit.max_text);
                }
            }
        }
        ring(&wake, &folders);
        for (done, answer) in dones.into_iter().zip(answers) {
            let _ = done.send(answer);
        }
        clean_published(&store, &redactor, cleans).await;
    }
}

/// Logs a refusal (the chat and the size, never the text) and has its
/// notice sent.
fn refused(hooks: &dyn Hooks, item: &Intake, notice: &Message, max_text: usize) {
    let (bytes, edit) = match item {
        Intake::New { m, .. } => (m.text.len(), false),
        Intake::Edit { text, .. } => (text.len(), true),
    };
    tracing::warn!(chat = %notice.chat_jid, bytes, limit = max_text, edit, "a text over channels.max_text_bytes was refused; its chat is told why");
    hooks.refused(notice);
}

/// Tells the router which groups have new messages (once each).
fn ring(wake: &Option<mpsc::UnboundedSender<GroupFolder>>, folders: &[&GroupFolder]) {
    if let Some(w) = wake {
        for f in folders {
            let _ = w.send((*f).clone());
        }
    }
}

/// Cleans delivered messages in the log once they are published (the
/// store's WAL is truncated after a change).
async fn clean_published(
    store: &Store,
    redactor: &g2_core::privacy::Redactor,
    messages: Vec<Message>,
) {
    let kept: Vec<(i64, String)> = messages
        .into_iter()
        .filter_map(|m| redactor.cleaned(&m.text).map(|c| (m.seq, c)))
        .collect();
    if kept.is_empty() {
        return;
    }
    let done = store
        .write(move |tx| {
            for (seq, text) in &kept {
                store::messages::replace_text(tx, *seq, text)?;
            }
            Ok(())
        })
        .await;
    match done {
        Ok(()) => store.truncate_wal(),
        Err(e) => tracing::warn!(error = %e, "cleaning delivered messages in the log"),
    }
}

/// Publishes what others stored after `published` (read from the store in
/// `seq` order); returns the new high-water mark.
async fn publish_stored(
    store: &Store,
    events: &broadcast::Sender<Arc<Live>>,
    mut published: i64,
) -> i64 {
    loop {
        let after = published;
        match store
            .read(move |c| store::messages::since(c, after, PAGE))
            .await
        {
            Ok(rows) => {
                let full = rows.len() == PAGE;
                for m in rows {
                    published = m.seq;
                    traced(&m);
                    let _ = events.send(Live::new(m));
                }
                if !full {
                    return published;
                }
            }
            Err(e) => {
                // Published with the next commit instead.
                tracing::warn!(error = %e, "reading new messages to publish");
                return published;
            }
        }
    }
}

/// An assistant's message goes to the listeners: the turn's `published`
/// stage, by chat (the log knows no group; its `reply_stored` has the seq).
fn traced(m: &Message) {
    if m.from_bot {
        let chat = Detail {
            chat: Some(&m.chat_jid),
            ..Detail::default()
        };
        trace::record(Stage::Published, None, Some(m.seq), chat);
    }
}
