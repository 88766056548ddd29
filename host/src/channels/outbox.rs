//! The outbox: sends assistant messages through their chat's channel, in
//! `seq` order per chat, each part exactly once where the platform lets us
//! know, and at most once where it cannot.
//!
//! Each chat has one worker task. [`Outbox::push`] only tells it that the
//! chat has work; the worker reads the chat's undelivered messages from
//! the store in `seq` order and sends them one after another (chats at the
//! same time). Reading from the store, not from the callers, keeps the
//! order whoever stored the messages and however their calls interleave,
//! and a store error only delays the chat: the worker reads again after a
//! backoff. For each part of a message ([`Channel::parts`]) the worker:
//!
//! 1. skips it if `deliveries` says it was sent, failed, or is uncertain;
//! 2. finds it `sending`: a host died between asking the platform and
//!    recording the answer. The platform may have posted it, and sending
//!    it again could post it twice, so it is marked `uncertain` (logged)
//!    and not sent;
//! 3. otherwise records `sending`, asks the channel, and records the
//!    outcome ([`SendError`] says which): `sent` with the platform's id;
//!    after a rate limit or a transient error the row is cleared and the
//!    part is tried again (the wait the platform asked for, or a backoff
//!    of 1 s doubling to 5 min: a chat's order holds, so later messages
//!    wait); `failed` when the chat is gone (the group is marked failing
//!    with the platform's reason) or the message is refused.
//!
//! When every part is settled the message is marked delivered; a host
//! that starts pushes every chat with undelivered messages
//! ([`Channels::redeliver`]).
//!
//! [`Channels::redeliver`]: super::Channels::redeliver

use g2_core::privacy::Redactor;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::AbortHandle;

use g2_core::validate::GroupFolder;

use super::{Channel, SendError};
use crate::Result;
use crate::messages::{self, Message};
use crate::store::deliveries::{self, State};
use crate::store::{self, Store};

/// The longest wait between attempts at a part that keeps failing.
const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// How often a typing indicator is renewed (Telegram's lasts 5 s).
const TYPING_EVERY: Duration = Duration::from_secs(4);
/// The longest a typing indicator is kept up without an answer.
const TYPING_AT_MOST: Duration = Duration::from_secs(600);

/// Messages a worker reads from the store at a time.
const PAGE: usize = 100;

type Queues = HashMap<String, mpsc::UnboundedSender<()>>;

/// The per-chat send queues and typing indicators.
pub struct Outbox {
    store: Store,
    /// What a sent message keeps in the log (`g2_core::privacy`).
    redactor: Redactor,
    queues: Mutex<Queues>,
    typing: Mutex<HashMap<GroupFolder, AbortHandle>>,
    /// Pushes not yet worked through (for [`Outbox::flush`]).
    pending: Arc<AtomicUsize>,
}

impl Outbox {
    pub fn new(store: Store, redactor: Redactor) -> Self {
        Outbox {
            store,
            redactor,
            queues: Mutex::default(),
            typing: Mutex::default(),
            pending: Arc::default(),
        }
    }

    /// Waits until every chat pushed so far was worked through, or `limit`
    /// passed; whether they were. A host stopping calls this so that a
    /// reply stored last is sent, not left `sending` for the next start.
    pub async fn flush(&self, limit: Duration) -> bool {
        let until = tokio::time::Instant::now() + limit;
        while self.pending.load(Ordering::Acquire) > 0 {
            if tokio::time::Instant::now() >= until {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        true
    }

    /// Tells a chat's worker (started on first use) that the chat has
    /// messages to send.
    pub fn push(&self, channel: Arc<dyn Channel>, chat_jid: &str) {
        let mut queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
        self.pending.fetch_add(1, Ordering::AcqRel);
        if queues.get(chat_jid).is_some_and(|q| q.send(()).is_ok()) {
            return;
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let _ = tx.send(());
        queues.insert(chat_jid.to_string(), tx);
        tokio::spawn(worker(
            self.store.clone(),
            self.redactor.clone(),
            channel,
            chat_jid.to_string(),
            self.pending.clone(),
            rx,
        ));
    }

    /// Keeps a group's typing indicator up in its chat (renewed until
    /// [`Outbox::stop_typing`], at most `TYPING_AT_MOST`).
    pub fn start_typing(&self, folder: &GroupFolder, channel: Arc<dyn Channel>, chat_jid: &str) {
        let mut typing = self.typing.lock().unwrap_or_else(PoisonError::into_inner);
        if typing.get(folder).is_some_and(|h| !h.is_finished()) {
            return;
        }
        let jid = chat_jid.to_string();
        let task = tokio::spawn(async move {
            let until = tokio::time::Instant::now() + TYPING_AT_MOST;
            while tokio::time::Instant::now() < until {
                channel.typing(&jid).await;
                tokio::time::sleep(TYPING_EVERY).await;
            }
        });
        typing.insert(folder.clone(), task.abort_handle());
    }

    /// Stops a group's typing indicator, if one is up.
    pub fn stop_typing(&self, folder: &GroupFolder) {
        let mut typing = self.typing.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(h) = typing.remove(folder) {
            h.abort();
        }
    }
}

/// Sends one chat's undelivered messages in `seq` order each time it is
/// told there are some.
async fn worker(
    store: Store,
    redactor: Redactor,
    channel: Arc<dyn Channel>,
    chat_jid: String,
    pending: Arc<AtomicUsize>,
    mut rx: mpsc::UnboundedReceiver<()>,
) {
    let mut backoff = Duration::from_secs(1);
    while rx.recv().await.is_some() {
        let mut pushes = 1;
        while rx.try_recv().is_ok() {
            pushes += 1;
        }
        loop {
            let jid = chat_jid.clone();
            let done = match store
                .read(move |c| store::messages::undelivered_in(c, &jid, PAGE))
                .await
            {
                Ok(page) if page.is_empty() => break,
                Ok(page) => {
                    let mut outcome = Ok(());
                    for m in &page {
                        outcome = send_message(&store, &redactor, channel.as_ref(), m).await;
                        if outcome.is_err() {
                            break;
                        }
                    }
                    outcome
                }
                Err(e) => Err(e),
            };
            match done {
                Ok(()) => backoff = Duration::from_secs(1),
                Err(e) => {
                    // The store failed: nothing is skipped; read again later.
                    tracing::error!(chat = %chat_jid, error = %e, retry_in = ?backoff, "recording a delivery");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
        pending.fetch_sub(pushes, Ordering::AcqRel);
    }
}

/// Sends what is left of one message, part by part, then marks it
/// delivered, keeping it cleaned of private spans and secrets in the log.
async fn send_message(
    store: &Store,
    redactor: &Redactor,
    channel: &dyn Channel,
    m: &Message,
) -> Result<()> {
    let id = m.id.clone();
    let known = store.read(move |c| deliveries::of(c, &id)).await?;
    for (part, text) in channel.parts(m).iter().enumerate() {
        match known.iter().find(|p| p.part == part).map(|p| p.state) {
            Some(State::Sent | State::Failed | State::Uncertain) => continue,
            Some(State::Sending) => {
                tracing::warn!(
                    channel = channel.name(), chat = %m.chat_jid, message = %m.id, part,
                    "a host stopped while sending this part; it may have been posted, so it is not sent again"
                );
                record(
                    store,
                    m,
                    part,
                    State::Uncertain,
                    None,
                    Some("host stopped mid-send"),
                )
                .await?;
                continue;
            }
            None => {}
        }
        if !send_part(store, channel, m, part, text).await? {
            break;
        }
    }
    if messages::mark_delivered(store, m, redactor).await? {
        store.truncate_wal();
    }
    Ok(())
}

/// Sends one part until it is settled; false when the rest of the message
/// must not be sent (the chat is gone).
async fn send_part(
    store: &Store,
    channel: &dyn Channel,
    m: &Message,
    part: usize,
    text: &str,
) -> Result<bool> {
    let mut backoff = Duration::from_secs(1);
    loop {
        record(store, m, part, State::Sending, None, None).await?;
        let outcome = channel.send(m, part, text).await;
        let wait = match outcome {
            Ok(external) => {
                record(store, m, part, State::Sent, Some(&external), None).await?;
                return Ok(true);
            }
            Err(SendError::RetryAfter(d)) => {
                tracing::info!(channel = channel.name(), chat = %m.chat_jid, wait = ?d, "rate limited; waiting as asked");
                d
            }
            Err(SendError::Transient(why)) => {
                tracing::warn!(channel = channel.name(), chat = %m.chat_jid, error = %why, retry_in = ?backoff, "sending failed; trying again");
                let d = backoff;
                backoff = (backoff * 2).min(MAX_BACKOFF);
                d
            }
            Err(SendError::Uncertain(why)) => {
                tracing::warn!(channel = channel.name(), chat = %m.chat_jid, error = %why, "the platform's answer was lost; not sent again");
                record(store, m, part, State::Uncertain, None, Some(&why)).await?;
                return Ok(true);
            }
            Err(SendError::Rejected(why)) => {
                tracing::warn!(channel = channel.name(), chat = %m.chat_jid, error = %why, "the platform refused a message");
                record(store, m, part, State::Failed, None, Some(&why)).await?;
                return Ok(true);
            }
            Err(SendError::Gone(why)) => {
                tracing::warn!(channel = channel.name(), chat = %m.chat_jid, error = %why, "the chat cannot be reached; its group is marked failing");
                record(store, m, part, State::Failed, None, Some(&why)).await?;
                let (jid, why) = (m.chat_jid.clone(), format!("{}: {why}", channel.name()));
                store
                    .write(move |tx| {
                        if let Some(g) = store::groups::by_jid(tx, &jid)? {
                            messages::mark_failing(tx, &g.folder, &why)?;
                        }
                        Ok(())
                    })
                    .await?;
                return Ok(false);
            }
        };
        // Known not sent: a later attempt is a first one.
        let id = m.id.clone();
        store
            .write(move |tx| deliveries::clear(tx, &id, part))
            .await?;
        tokio::time::sleep(wait).await;
    }
}

async fn record(
    store: &Store,
    m: &Message,
    part: usize,
    state: State,
    external: Option<&str>,
    detail: Option<&str>,
) -> Result<()> {
    let (id, external, detail) = (
        m.id.clone(),
        external.map(str::to_string),
        detail.map(str::to_string),
    );
    store
        .write(move |tx| {
            deliveries::set(tx, &id, part, state, external.as_deref(), detail.as_deref())
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::channels::tests::{Scripted, store_with_group};

    async fn setup(script: Vec<SendError>) -> (tempfile::TempDir, Store, Arc<Scripted>) {
        let (d, store) = store_with_group("fam", Some("s:1")).await;
        (d, store, Scripted::new(script))
    }

    async fn outbound(store: &Store, text: &str) -> Message {
        let text = text.to_string();
        store
            .write(move |tx| {
                store::messages::insert_outbound(tx, "s:1", "Andy", &text, None, false)
            })
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn parts_go_in_order_after_waits_and_a_part_left_sending_is_never_sent() {
        let (_d, store, ch) = setup(vec![
            SendError::RetryAfter(Duration::from_secs(1)),
            SendError::Transient("connection refused".into()),
        ])
        .await;
        let outbox = Outbox::new(store.clone(), Redactor::default());
        let first = outbound(&store, "a|b").await;
        let second = outbound(&store, "c").await;
        // A host died while sending `second`'s only part.
        let id = second.id.clone();
        store
            .write(move |tx| deliveries::set(tx, &id, 0, State::Sending, None, None))
            .await
            .unwrap();
        let _ = first;
        outbox.push(ch.clone(), "s:1");
        assert!(outbox.flush(Duration::from_secs(60)).await);
        assert_eq!(ch.sent.lock().unwrap().as_slice(), ["a", "b"]);
        let id = second.id.clone();
        let parts = store.read(move |c| deliveries::of(c, &id)).await.unwrap();
        assert_eq!(parts[0].state, State::Uncertain);
        assert!(
            store
                .read(|c| store::messages::undelivered(c, 0, 10))
                .await
                .unwrap()
                .is_empty()
        );
        // Pushed again (a restart): nothing is sent twice.
        outbound(&store, "d").await;
        outbox.push(ch.clone(), "s:1");
        assert!(outbox.flush(Duration::from_secs(60)).await);
        assert_eq!(ch.sent.lock().unwrap().as_slice(), ["a", "b", "d"]);
    }

    #[tokio::test]
    async fn a_chat_that_is_gone_marks_its_group_failing() {
        let (_d, store, ch) = setup(vec![SendError::Gone(
            "Forbidden: bot was kicked from the group chat".into(),
        )])
        .await;
        let outbox = Outbox::new(store.clone(), Redactor::default());
        outbound(&store, "x|y").await;
        outbox.push(ch.clone(), "s:1");
        assert!(outbox.flush(Duration::from_secs(10)).await);
        assert!(ch.sent.lock().unwrap().is_empty(), "the rest is not sent");
        let failing = store
            .read(|c| messages::failing(c, "fam"))
            .await
            .unwrap()
            .unwrap();
        assert!(failing.error.contains("kicked"), "{failing:?}");
    }
}
