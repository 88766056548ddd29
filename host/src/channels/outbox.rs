//! The outbox: sends assistant messages through their chat's channel, in
//! `seq` order per chat, each part exactly once where the platform lets us
//! know, and at most once where it cannot.
//!
//! Each chat has one worker task and a queue; messages of one chat are
//! sent one after another, those of different chats at the same time.
//! For each part of a message ([`Channel::parts`]) the worker:
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
//! that starts finds the others with [`Channels::redeliver`] and pushes
//! them here again.
//!
//! [`Channels::redeliver`]: super::Channels::redeliver

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::AbortHandle;

use g2_core::validate::GroupFolder;

use super::{Channel, SendError};
use crate::Result;
use crate::routing::messages::Message;
use crate::store::deliveries::{self, State};
use crate::store::{self, Store};

/// The longest wait between attempts at a part that keeps failing.
const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// How often a typing indicator is renewed (Telegram's lasts 5 s).
const TYPING_EVERY: Duration = Duration::from_secs(4);
/// The longest a typing indicator is kept up without an answer.
const TYPING_AT_MOST: Duration = Duration::from_secs(600);

type Queues = HashMap<String, mpsc::UnboundedSender<(Arc<dyn Channel>, Message)>>;

/// The per-chat send queues and typing indicators.
pub struct Outbox {
    store: Store,
    queues: Mutex<Queues>,
    typing: Mutex<HashMap<GroupFolder, AbortHandle>>,
}

impl Outbox {
    pub fn new(store: Store) -> Self {
        Outbox {
            store,
            queues: Mutex::default(),
            typing: Mutex::default(),
        }
    }

    /// Queues a message for its chat's worker (started on first use).
    pub fn push(&self, channel: Arc<dyn Channel>, m: Message) {
        let mut queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
        let jid = m.chat_jid.clone();
        let mut item = Some((channel, m));
        if let Some(q) = queues.get(&jid) {
            match q.send(item.take().expect("set above")) {
                Ok(()) => return,
                Err(mpsc::error::SendError(back)) => item = Some(back),
            }
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let _ = tx.send(item.expect("not sent"));
        queues.insert(jid, tx);
        tokio::spawn(worker(self.store.clone(), rx));
    }

    /// Starts (or stops) renewing a group's typing indicator.
    pub fn working(&self, list: &[Arc<dyn Channel>], folder: &GroupFolder, on: bool) {
        let mut typing = self.typing.lock().unwrap_or_else(PoisonError::into_inner);
        if !on {
            if let Some(h) = typing.remove(folder) {
                h.abort();
            }
            return;
        }
        if typing.get(folder).is_some_and(|h| !h.is_finished()) {
            return;
        }
        let (store, f, list) = (self.store.clone(), folder.clone(), list.to_vec());
        let task = tokio::spawn(async move {
            let g = f.clone();
            let Ok(Some(group)) = store.read(move |c| store::groups::get(c, &g)).await else {
                return;
            };
            let channel = super::owner(&list, &group.jid);
            if channel.delivered_by_storing() {
                return;
            }
            let until = tokio::time::Instant::now() + TYPING_AT_MOST;
            while tokio::time::Instant::now() < until {
                channel.typing(&group.jid).await;
                tokio::time::sleep(TYPING_EVERY).await;
            }
        });
        typing.insert(folder.clone(), task.abort_handle());
    }
}

/// Sends one chat's messages, in the order they were queued.
async fn worker(store: Store, mut rx: mpsc::UnboundedReceiver<(Arc<dyn Channel>, Message)>) {
    while let Some((channel, m)) = rx.recv().await {
        if let Err(e) = send_message(&store, channel.as_ref(), &m).await {
            // The store failed: the message stays undelivered and the next
            // start sends what is left of it.
            tracing::error!(chat = %m.chat_jid, error = %e, "recording a delivery; left for the next start");
        }
    }
}

/// Sends what is left of one message, part by part, then marks it
/// delivered.
async fn send_message(store: &Store, channel: &dyn Channel, m: &Message) -> Result<()> {
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
    let id = m.id.clone();
    store
        .write(move |tx| store::messages::mark_delivered(tx, &id))
        .await
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
                            crate::routing::rules::mark_failing(tx, &g.folder, &why)?;
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
