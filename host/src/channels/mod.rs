//! Channels: where chat messages come from and replies go to.
//!
//! A [`Channel`] carries some chats (by jid) to people: the HTTP API and
//! its SSE stream (which `g2 chat` uses from a terminal), [`telegram`],
//! [`whatsapp`], [`discord`] and [`slack`]. Adding one means implementing the trait, registering it
//! in [`Channels`], and running the conformance suite
//! (`tests/integration/channels.rs`) against it; the router and the queue
//! never see channels, only the message log (the queue hands what it
//! stored to the [`Outlet`] that [`Channels`] implements).
//!
//! - Inbound: a channel calls [`Channels::receive`] (one message) or
//!   [`Channels::take_in`] (a platform's batch, with its own progress mark
//!   written in the same transaction), which hand the messages to the
//!   log's sequencer ([`crate::messages`]) and answer once they are
//!   stored, published, and the router is woken for their groups.
//! - Outbound: whoever stored an assistant message calls
//!   [`Channels::deliver`]; the log publishes it, and [`outbox`] sends it
//!   through the channel that owns the chat, in order per chat, exactly
//!   once (or, when a host died mid-request, at most once).
//!
//! The channels own the message [`Log`] and wire it:
//! they tell its sequencer which channel carries a chat and send the
//! notices it stores ([`messages::Hooks`], with the router's rule for
//! edits), and where to ring the router.
//!
//! Files: this one holds the [`Channel`] interface and [`Channels`];
//! [`outbox`] the sending; [`platform`] what the platforms share of
//! [`Channel`]; one folder per platform; [`split`] cuts a text to a
//! platform's limit.

pub mod discord;
pub mod markdown;
pub mod outbox;
pub mod platform;
pub mod rest;
pub mod slack;
pub mod split;
pub mod telegram;
#[cfg(test)]
pub(crate) mod tests;
pub mod whatsapp;

use futures_util::future::BoxFuture;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use g2_core::validate::GroupFolder;

use crate::Result;
use crate::media::Media;
use crate::messages::{self, Inbound, Intake, Log, Mark, Message, Taken};
use crate::routing::queue::Outlet;
use crate::store::{self, Db, Store};

/// Undelivered messages read from the store at a time (at start).
const PAGE: usize = 1000;

/// A channel's credential (a token, an app secret): shown nowhere, not
/// even in `Debug`, and read only where a request needs it.
#[derive(Clone)]
pub struct Secret(String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(redacted)")
    }
}

impl Secret {
    /// The variable's value from the environment or `{home}/.env`.
    pub fn find(home: &std::path::Path, name: &str) -> Option<Secret> {
        crate::gateway::credentials::secret(home, name).map(|(v, _)| Secret(v))
    }

    pub(crate) fn expose(&self) -> &str {
        &self.0
    }

    /// `text` with the secret replaced (an error a library wrote).
    pub(crate) fn redact(&self, text: &str) -> String {
        text.replace(&self.0, "[redacted]")
    }
}

/// A display name without control or bidi characters (the message log
/// refuses them), at most 200 bytes.
pub(crate) fn clean_name(name: &str) -> String {
    let mut out: String = name
        .chars()
        .filter(|c| !c.is_control() && !crate::terminal::is_bidi_control(*c))
        .collect();
    while out.len() > 200 {
        out.pop();
    }
    out.trim().to_string()
}

/// The message an assistant message answers (its platform id and
/// thread), when it is in the same chat: what a platform quotes, replies
/// to or threads under. Not found is not an error; a store that cannot be
/// read is, and the part is tried again.
pub(crate) async fn answered(
    store: &Store,
    m: &Message,
) -> std::result::Result<Option<store::messages::Reference>, SendError> {
    let Some(seq) = m.reply_to else {
        return Ok(None);
    };
    Ok(store
        .read(move |c| store::messages::reference(c, seq))
        .await
        .map_err(|e| SendError::Transient(e.to_string()))?
        .filter(|r| r.chat_jid == m.chat_jid))
}

/// A way to reach people in chats.
pub trait Channel: Send + Sync + 'static {
    /// Short name stored with each chat (`http`, `telegram`, …).
    fn name(&self) -> &'static str;
    /// Whether this channel carries the chat.
    fn owns(&self, chat_jid: &str) -> bool;
    /// Storing a message in the log is its delivery (the HTTP channel):
    /// nothing is sent.
    fn delivered_by_storing(&self) -> bool {
        false
    }
    /// The texts a message is sent as, in order (a platform's length
    /// limit splits long ones). The same message must give the same parts
    /// every time: a restarted host resumes at the first part not sent.
    fn parts(&self, m: &Message) -> Vec<String> {
        vec![m.text.clone()]
    }
    /// Sends one part of an assistant message; answers the platform's id
    /// of what it posted. Storing a message never waits on this.
    fn send<'a>(
        &'a self,
        m: &'a Message,
        part: usize,
        text: &'a str,
    ) -> BoxFuture<'a, std::result::Result<String, SendError>>;
    /// Shows the chat that the assistant is working (repeated every few
    /// seconds while it is); platforms without an indicator do nothing.
    fn typing<'a>(&'a self, _chat_jid: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }
}

/// Why a part was not sent, and so what happens next (see [`outbox`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SendError {
    /// The platform asks to wait; not sent. Sent again after the wait.
    #[error("rate limited: retry after {0:?}")]
    RetryAfter(Duration),
    /// Not sent (the platform answered with an error, or could not be
    /// reached). Sent again after a backoff.
    #[error("{0}")]
    Transient(String),
    /// The request may have reached the platform. Never sent again.
    #[error("{0}")]
    Uncertain(String),
    /// The chat cannot be reached (the bot was removed or blocked): the
    /// group is marked failing with this reason.
    #[error("{0}")]
    Gone(String),
    /// This message is refused for good.
    #[error("{0}")]
    Rejected(String),
}

/// The built-in channel: the message log, read through the HTTP API
/// (`GET …/messages`, `GET …/stream`). Storing and publishing a message is
/// its delivery, so sending is immediate. It carries every chat no other
/// channel claims.
pub struct HttpChannel;

impl Channel for HttpChannel {
    fn name(&self) -> &'static str {
        "http"
    }

    fn owns(&self, _chat_jid: &str) -> bool {
        true
    }

    fn delivered_by_storing(&self) -> bool {
        true
    }

    fn send<'a>(
        &'a self,
        _m: &'a Message,
        _part: usize,
        _text: &'a str,
    ) -> BoxFuture<'a, std::result::Result<String, SendError>> {
        Box::pin(async { Ok(String::new()) })
    }
}

/// The channels of a host and the message log they hand in to.
#[derive(Clone)]
pub struct Channels {
    store: Store,
    list: Arc<Vec<Arc<dyn Channel>>>,
    outbox: Arc<outbox::Outbox>,
    log: Log,
    media: Option<Media>,
}

impl Channels {
    /// These channels storing through `store` (the same database, guarded:
    /// [`Store::guarded`]); everything else is shared.
    pub fn with_store(&self, store: Store) -> Self {
        Self {
            log: self.log.with_store(store.clone()),
            store,
            ..self.clone()
        }
    }

    /// The HTTP channel only, no router (CLI commands).
    pub fn new(store: Store) -> Self {
        let list: Arc<Vec<Arc<dyn Channel>>> = Arc::new(vec![Arc::new(HttpChannel)]);
        let outbox = Arc::new(outbox::Outbox::new(store.clone(), Default::default()));
        let log = Log::new(store.clone(), hooks(&list, &outbox));
        Channels {
            store,
            list,
            outbox,
            log,
            media: None,
        }
    }

    /// Where the channels keep the files that come with messages (none:
    /// files are named in the text and not kept).
    pub fn with_media(mut self, media: Media) -> Self {
        self.media = Some(media);
        self
    }

    /// The media the channels keep files with, if any.
    pub fn media(&self) -> Option<&Media> {
        self.media.as_ref()
    }

    /// The message log these channels hand in to (its live streams:
    /// [`Log::follow`]).
    pub fn log(&self) -> &Log {
        &self.log
    }

    /// Takes in texts of at most `max_text` bytes on every channel (the
    /// host's `channels.max_text_bytes`); a longer one is refused, and a
    /// platform's chat told so by `assistant`. To be set before any
    /// message is taken in.
    pub fn with_text_limit(mut self, max_text: usize, assistant: &str) -> Self {
        self.log = self.log.with_text_limit(max_text, assistant);
        self
    }

    /// The longest text taken in, in bytes (`channels.max_text_bytes`).
    pub fn max_text(&self) -> usize {
        self.log.max_text()
    }

    /// Adds a channel; channels added later are asked first.
    pub fn with(mut self, channel: Arc<dyn Channel>) -> Self {
        let mut list: Vec<_> = self.list.iter().cloned().collect();
        list.insert(0, channel);
        self.list = Arc::new(list);
        self.log = self.log.with_hooks(hooks(&self.list, &self.outbox));
        self
    }

    /// Cleans what the log keeps with `redactor` (the built-in patterns
    /// plus the host's credentials); to be set before any message is sent.
    pub fn with_redactor(mut self, redactor: g2_core::privacy::Redactor) -> Self {
        self.outbox = Arc::new(outbox::Outbox::new(self.store.clone(), redactor.clone()));
        self.log = self
            .log
            .with_redactor(redactor)
            .with_hooks(hooks(&self.list, &self.outbox));
        self
    }

    /// What the log keeps of messages is cleaned with.
    pub fn redactor(&self) -> &g2_core::privacy::Redactor {
        self.log.redactor()
    }

    /// Where inbound messages ring (the router).
    pub fn with_router(mut self, wake: mpsc::UnboundedSender<GroupFolder>) -> Self {
        self.log = self.log.with_router(wake);
        self
    }

    /// The channel that carries a chat.
    pub fn channel_for(&self, chat_jid: &str) -> Arc<dyn Channel> {
        owner(&self.list, chat_jid)
    }

    /// Whether storing a message for this chat delivers it: the HTTP
    /// channel's chats. A platform's chat whose channel is not running
    /// (Telegram disabled, or `g2 run`) is not: its messages wait,
    /// undelivered, for a host that runs it.
    pub fn stored_is_delivered(&self, chat_jid: &str) -> bool {
        self.channel_for(chat_jid).delivered_by_storing() && !crate::jid::on_a_platform(chat_jid)
    }

    /// Takes in a message for a group's chat: stored, published, routed
    /// ([`Log::receive`]).
    pub async fn receive(&self, folder: &GroupFolder, m: Inbound) -> Result<Message> {
        self.log.receive(folder, m).await
    }

    /// Takes in what a channel received, in order, with its `mark` in the
    /// same transaction ([`Log::take_in`]).
    pub async fn take_in(
        &self,
        items: Vec<Intake>,
        mark: Option<Mark>,
    ) -> Result<Vec<Result<Taken>>> {
        self.log.take_in(items, mark).await
    }

    /// Publishes an assistant message that was just stored (in `seq`
    /// order, through the log's sequencer) and hands it to its chat's
    /// channel through the outbox, which sends in the background: a slow
    /// network never holds up the caller (the queue serves every group).
    pub async fn deliver(&self, m: Message) {
        if self.log.publish().await.is_err() {
            tracing::error!("the message sequencer stopped; a message was not published");
        }
        let channel = self.channel_for(&m.chat_jid);
        if !channel.delivered_by_storing() {
            // Sent by the outbox, which cleans it once sent.
            self.outbox.push(channel, &m.chat_jid);
        } else if self.stored_is_delivered(&m.chat_jid) {
            self.log.clean_delivered(m).await;
        }
    }

    /// Waits (at most `limit`) for what the outbox has to send; whether it
    /// all went.
    pub async fn flush(&self, limit: Duration) -> bool {
        self.outbox.flush(limit).await
    }

    /// Shows a group's chat that its agent is working (a typing
    /// indicator, where the platform has one) until [`Channels::idle`].
    pub fn working(&self, folder: &GroupFolder, chat_jid: &str) {
        let channel = self.channel_for(chat_jid);
        if !channel.delivered_by_storing() {
            self.outbox.start_typing(folder, channel, chat_jid);
        }
    }

    /// The group's agent is done for now: its typing indicator goes.
    pub fn idle(&self, folder: &GroupFolder) {
        self.outbox.stop_typing(folder);
    }

    /// Stores an assistant message for a chat (outside any cursor: a
    /// `send_message` or a task's result; [`messages::say`]) and delivers
    /// it.
    pub async fn say(&self, chat_jid: &str, sender: &str, text: &str) -> Result<Option<Message>> {
        let delivered = self.stored_is_delivered(chat_jid);
        let m = messages::say(&self.store, chat_jid, sender, text, delivered).await?;
        if let Some(m) = &m {
            self.deliver(m.clone()).await;
        }
        Ok(m)
    }

    /// Sends what other channels have not confirmed yet (at start), in
    /// order per chat; a part an earlier host was sending when it died is
    /// not sent again ([`outbox`]). Messages of a platform that is not
    /// running stay for a host that runs it. Returns how many messages
    /// wait.
    pub async fn redeliver(&self) -> Result<usize> {
        let mut n = 0;
        let mut after = 0;
        let mut chats: Vec<String> = Vec::new();
        loop {
            let pending = self
                .store
                .read(move |c| store::messages::undelivered(c, after, PAGE))
                .await?;
            let Some(last) = pending.last() else {
                break;
            };
            after = last.seq;
            n += pending.len();
            for m in pending {
                if self.stored_is_delivered(&m.chat_jid) {
                    messages::mark_delivered(&self.store, &m, self.redactor()).await?;
                } else if !chats.contains(&m.chat_jid) {
                    chats.push(m.chat_jid);
                }
            }
        }
        for jid in chats {
            let channel = self.channel_for(&jid);
            if channel.delivered_by_storing() {
                tracing::warn!(chat = %jid, "replies wait for a channel that is not enabled");
            } else {
                self.outbox.push(channel, &jid);
            }
        }
        Ok(n)
    }
}

/// What the log's sequencer asks of the channels: which one carries a
/// chat, and sending the refusals it stores; the router's rule for what
/// an edit may change.
struct Carriers {
    list: Arc<Vec<Arc<dyn Channel>>>,
    outbox: Arc<outbox::Outbox>,
}

fn hooks(
    list: &Arc<Vec<Arc<dyn Channel>>>,
    outbox: &Arc<outbox::Outbox>,
) -> Arc<dyn messages::Hooks> {
    Arc::new(Carriers {
        list: list.clone(),
        outbox: outbox.clone(),
    })
}

impl messages::Hooks for Carriers {
    fn channel(&self, chat_jid: &str) -> &'static str {
        owner(&self.list, chat_jid).name()
    }

    fn answers_in_chat(&self, chat_jid: &str) -> bool {
        crate::jid::on_a_platform(chat_jid) || !owner(&self.list, chat_jid).delivered_by_storing()
    }

    fn refused(&self, notice: &Message) {
        let channel = owner(&self.list, &notice.chat_jid);
        if !channel.delivered_by_storing() {
            self.outbox.push(channel, &notice.chat_jid);
        }
    }

    fn settled(&self, tx: &Db<'_>, folder: &str) -> Result<i64> {
        crate::routing::rules::settled(tx, folder)
    }
}

/// The channel that carries a chat: the first that owns it.
fn owner(list: &[Arc<dyn Channel>], chat_jid: &str) -> Arc<dyn Channel> {
    list.iter()
        .find(|c| c.owns(chat_jid))
        .cloned()
        .unwrap_or_else(|| Arc::new(HttpChannel))
}

/// The queue's way to the chats: what it stored is published and sent
/// here, and its agents' working state shown.
impl Outlet for Channels {
    fn working(&self, folder: &GroupFolder, chat_jid: &str) {
        Channels::working(self, folder, chat_jid);
    }

    fn idle(&self, folder: &GroupFolder) {
        Channels::idle(self, folder);
    }

    fn stored_is_delivered(&self, chat_jid: &str) -> bool {
        Channels::stored_is_delivered(self, chat_jid)
    }

    fn redactor(&self) -> &g2_core::privacy::Redactor {
        Channels::redactor(self)
    }

    fn deliver(&self, m: Message) -> BoxFuture<'_, ()> {
        Box::pin(Channels::deliver(self, m))
    }

    fn say<'a>(
        &'a self,
        chat_jid: &'a str,
        sender: &'a str,
        text: &'a str,
    ) -> BoxFuture<'a, Result<Option<Message>>> {
        Box::pin(Channels::say(self, chat_jid, sender, text))
    }
}
