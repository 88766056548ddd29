//! Channels: where chat messages come from and replies go to.
//!
//! A [`Channel`] carries some chats (by jid) to people: the HTTP API and
//! its SSE stream (which `g2 chat` uses from a terminal), and
//! [`telegram`]. Adding one means implementing the trait, registering it
//! in [`Channels`], and running the conformance suite
//! (`tests/integration/channels.rs`) against it; the router and the queue
//! never see channels, only the message log (the queue hands what it
//! stored to the [`Outlet`] that [`Channels`] implements).
//!
//! - Inbound: a channel calls [`Channels::receive`] (one message) or
//!   [`Channels::take_in`] (a platform's batch, with its own progress mark
//!   written in the same transaction), which hand the messages to the
//!   sequencer and answer once they are stored, published, and the router
//!   is woken for their groups.
//! - Outbound: whoever stored an assistant message calls
//!   [`Channels::deliver`]; the sequencer publishes it, and [`outbox`]
//!   sends it through the channel that owns the chat, in order per chat,
//!   exactly once (or, when a host died mid-request, at most once).
//!
//! The sequencer is one task. It commits the inbound messages that are
//! queued together in one transaction (group commit) and publishes, after
//! each commit, every message stored since the last publication, read in
//! `seq` order from the store (so the assistant's messages, stored by
//! others, take their place in the order too). Listeners therefore see each
//! chat in `seq` order with no gaps; one that falls [`LISTENER_BUFFER`]
//! messages behind is closed, and resumes with `Last-Event-ID`.
//!
//! Invariant: storing comes before publishing or sending, and messages are
//! published in `seq` order, so a stream reader that catches up from the
//! store by `seq` sees everything exactly once.

pub mod outbox;
pub mod telegram;

use futures_util::future::BoxFuture;
use std::collections::VecDeque;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::sync::{broadcast, mpsc, oneshot};

use g2_core::validate::GroupFolder;

use crate::routing::messages::{CheckInbound, Inbound, Message};
use crate::routing::queue::Outlet;
use crate::store::{self, Store};
use crate::{Error, Result};

/// Published messages a listener may fall behind before its stream is
/// closed (it resumes from the store with `Last-Event-ID`).
pub const LISTENER_BUFFER: usize = 4096;
/// Most inbound messages committed in one transaction.
const MAX_BATCH: usize = 1024;
/// Inbound messages waiting for the sequencer before receivers wait too.
const QUEUE: usize = 8192;
/// Messages read from the store at a time when a stream catches up.
const PAGE: usize = 1000;

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

/// What a channel hands in.
#[derive(Debug, Clone, PartialEq)]
pub enum Intake {
    /// A new message for a group's chat.
    New { folder: GroupFolder, m: Inbound },
    /// The platform edited a message it handed in before: the new text
    /// replaces the stored one while that is still pending (not handed to
    /// the agent); an answered message stays as it was answered.
    Edit {
        folder: GroupFolder,
        external_id: String,
        text: String,
        /// The edited message addresses the assistant (a mention added by
        /// the edit counts; one removed does not un-call it).
        addressed: bool,
    },
}

impl Intake {
    fn folder(&self) -> &GroupFolder {
        match self {
            Intake::New { folder, .. } | Intake::Edit { folder, .. } => folder,
        }
    }
}

/// What became of one [`Intake`].
#[derive(Debug, Clone, PartialEq)]
pub enum Taken {
    Stored(Message),
    /// Its platform id was stored before (handed in twice).
    Duplicate,
    /// An edit that replaced a pending message's text.
    Edited,
    /// An edit of a message that is answered, in flight, or unknown.
    Unchanged,
}

/// A channel's progress (a `router_state` key and value, such as the
/// next Telegram update to fetch), written in the transaction that
/// stores what it took in: a host killed at any point neither loses nor
/// takes in twice.
#[derive(Debug, Clone, PartialEq)]
pub struct Mark {
    pub key: String,
    pub value: String,
}

/// A published message with its JSON, serialized once for every listener.
#[derive(Debug)]
pub struct Live {
    pub message: Message,
    pub json: String,
}

impl Live {
    fn new(message: Message) -> Arc<Live> {
        let json = serde_json::to_string(&message).unwrap_or_default();
        Arc::new(Live { message, json })
    }
}

/// What the sequencer is asked to do.
enum Job {
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
struct Sequencer {
    /// The highest `seq` when the channels were made: nothing at or below
    /// it is published.
    start: i64,
    jobs: OnceLock<mpsc::Sender<Job>>,
}

/// The channels of a host, the live message stream, and the router's bell.
#[derive(Clone)]
pub struct Channels {
    store: Store,
    list: Arc<Vec<Arc<dyn Channel>>>,
    events: broadcast::Sender<Arc<Live>>,
    sequencer: Arc<Sequencer>,
    outbox: Arc<outbox::Outbox>,
    /// Folders with new inbound messages, for the router.
    wake: Option<mpsc::UnboundedSender<GroupFolder>>,
    /// What the log keeps of a message once it is answered or sent: no
    /// private span, no secret (`g2_core::privacy`).
    redactor: g2_core::privacy::Redactor,
}

impl Channels {
    /// The HTTP channel only, no router (CLI commands).
    pub fn new(store: Store) -> Self {
        // One indexed lookup; the channels are made once, at start.
        let start = store.read_blocking(store::messages::last_seq).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "reading the last message seq; publishing from the start");
            0
        });
        Channels {
            outbox: Arc::new(outbox::Outbox::new(store.clone(), Default::default())),
            redactor: Default::default(),
            store,
            list: Arc::new(vec![Arc::new(HttpChannel)]),
            events: broadcast::channel(LISTENER_BUFFER).0,
            sequencer: Arc::new(Sequencer {
                start,
                jobs: OnceLock::new(),
            }),
            wake: None,
        }
    }

    /// Adds a channel; channels added later are asked first.
    pub fn with(mut self, channel: Arc<dyn Channel>) -> Self {
        let mut list: Vec<_> = self.list.iter().cloned().collect();
        list.insert(0, channel);
        self.list = Arc::new(list);
        self
    }

    /// Cleans what the log keeps with `redactor` (the built-in patterns
    /// plus the host's credentials); to be set before any message is sent.
    pub fn with_redactor(mut self, redactor: g2_core::privacy::Redactor) -> Self {
        self.outbox = Arc::new(outbox::Outbox::new(self.store.clone(), redactor.clone()));
        self.redactor = redactor;
        self
    }

    /// What the log keeps of messages is cleaned with.
    pub fn redactor(&self) -> &g2_core::privacy::Redactor {
        &self.redactor
    }

    /// Where inbound messages ring (the router).
    pub fn with_router(mut self, wake: mpsc::UnboundedSender<GroupFolder>) -> Self {
        self.wake = Some(wake);
        self
    }

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

    fn jobs(&self) -> &mpsc::Sender<Job> {
        self.sequencer.jobs.get_or_init(|| {
            let (tx, rx) = mpsc::channel(QUEUE);
            tokio::spawn(sequence(
                Sequence {
                    store: self.store.clone(),
                    events: self.events.clone(),
                    list: self.list.clone(),
                    wake: self.wake.clone(),
                    redactor: self.redactor.clone(),
                },
                self.sequencer.start,
                rx,
            ));
            tx
        })
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
        self.channel_for(chat_jid).delivered_by_storing() && !on_a_platform(chat_jid)
    }

    /// Takes in a message for a group's chat: stored, published, routed
    /// (the router is rung once per group and batch).
    pub async fn receive(&self, folder: &GroupFolder, m: Inbound) -> Result<Message> {
        // The group is looked up in the batch's transaction (no read of
        // its own per message).
        m.check()?;
        let taken = self
            .take_in(
                vec![Intake::New {
                    folder: folder.clone(),
                    m,
                }],
                None,
            )
            .await?;
        match taken.into_iter().next() {
            Some(Ok(Taken::Stored(m))) => Ok(m),
            Some(Ok(_)) => Err(Error::Conflict("this message was stored before".into())),
            Some(Err(e)) => Err(e),
            None => Err(stopped()),
        }
    }

    /// Takes in what a channel received, in order, and writes its `mark`
    /// in the same transaction; answers for each item. An item that cannot
    /// be stored (a group removed meanwhile, a message refused) is answered
    /// with its error and the others are stored; the mark is written all
    /// the same. An error means nothing was stored and the mark did not
    /// move (the store failed).
    pub async fn take_in(
        &self,
        items: Vec<Intake>,
        mark: Option<Mark>,
    ) -> Result<Vec<Result<Taken>>> {
        let (done, taken) = oneshot::channel();
        self.jobs()
            .send(Job::Take { items, mark, done })
            .await
            .map_err(|_| stopped())?;
        taken.await.map_err(|_| stopped())?
    }

    /// Publishes an assistant message that was just stored (in `seq`
    /// order, through the sequencer) and hands it to its chat's channel
    /// through the outbox, which sends in the background: a slow network
    /// never holds up the caller (the queue serves every group).
    pub async fn deliver(&self, m: Message) {
        if self.jobs().send(Job::Stored).await.is_err() {
            tracing::error!("the message sequencer stopped; a message was not published");
        }
        let channel = self.channel_for(&m.chat_jid);
        if !channel.delivered_by_storing() {
            // Sent by the outbox, which cleans it once sent.
            self.outbox.push(channel, &m.chat_jid);
        } else if self.stored_is_delivered(&m.chat_jid) {
            let _ = self.jobs().send(Job::Clean(m)).await;
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
    /// `send_message` or a task's result) and delivers it.
    pub async fn say(&self, chat_jid: &str, sender: &str, text: &str) -> Result<Option<Message>> {
        let text = crate::routing::rules::strip_internal(text);
        if text.is_empty() {
            return Ok(None);
        }
        let (jid, sender, delivered) = (
            chat_jid.to_string(),
            sender.to_string(),
            self.stored_is_delivered(chat_jid),
        );
        let m = self
            .store
            .write(move |tx| {
                store::messages::insert_outbound(tx, &jid, &sender, &text, None, delivered)
            })
            .await?;
        self.deliver(m.clone()).await;
        Ok(Some(m))
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
                    let id = m.id.clone();
                    let kept = self.redactor.cleaned(&m.text);
                    self.store
                        .write(move |tx| store::messages::mark_delivered(tx, &id, kept.as_deref()))
                        .await?;
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

/// Whether a jid names a chat on a chat platform (not the HTTP API's log).
fn on_a_platform(chat_jid: &str) -> bool {
    chat_jid.starts_with(telegram::PREFIX)
}

/// The channel that carries a chat: the first that owns it.
fn owner(list: &[Arc<dyn Channel>], chat_jid: &str) -> Arc<dyn Channel> {
    list.iter()
        .find(|c| c.owns(chat_jid))
        .cloned()
        .unwrap_or_else(|| Arc::new(HttpChannel))
}

fn stopped() -> Error {
    Error::io(
        "storing a message",
        std::io::Error::other("the message sequencer stopped"),
    )
}

/// What the sequencer works with.
struct Sequence {
    store: Store,
    events: broadcast::Sender<Arc<Live>>,
    list: Arc<Vec<Arc<dyn Channel>>>,
    wake: Option<mpsc::UnboundedSender<GroupFolder>>,
    redactor: g2_core::privacy::Redactor,
}

/// The sequencer: takes whatever is queued (up to [`MAX_BATCH`] jobs),
/// commits it in one transaction, then publishes everything stored since
/// `published`, in `seq` order, rings the router once per group, and
/// answers the channels; then cleans in the log what was delivered by
/// storing it ([`Job::Clean`]).
/// Ends when every [`Channels`] is gone.
async fn sequence(seq: Sequence, mut published: i64, mut jobs: mpsc::Receiver<Job>) {
    let Sequence {
        store,
        events,
        list,
        wake,
        redactor,
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
        let (batch_takes, batch_list) = (takes.clone(), list.clone());
        let committed = store
            .write(move |tx| {
                let mut answers = Vec::with_capacity(batch_takes.len());
                for (items, mark) in batch_takes.iter() {
                    answers.push(store_inbound(tx, &batch_list, items, mark.as_ref())?);
                }
                // Ours are consecutive; what others stored before them is
                // committed (we hold the write lock) and not yet published.
                let first = answers
                    .iter()
                    .flatten()
                    .find_map(|a| match a {
                        Ok(Taken::Stored(m)) => Some(m.seq),
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
                    Ok(Taken::Stored(m)) => Some(m.clone()),
                    _ => None,
                });
                for m in others.into_iter().chain(ours) {
                    published = m.seq;
                    let _ = events.send(Live::new(m));
                }
                answers.into_iter().map(Ok).collect()
            }
            Err(e) => {
                // One bad job must not sink the others: each alone.
                tracing::warn!(error = %e, n = takes.len(), "a batch of messages did not commit; storing them one by one");
                let mut answers = Vec::with_capacity(takes.len());
                for i in 0..takes.len() {
                    let (these, list) = (takes.clone(), list.clone());
                    let one = store
                        .write(move |tx| {
                            let (items, mark) = &these[i];
                            store_inbound(tx, &list, items, mark.as_ref())
                        })
                        .await;
                    answers.push(one);
                }
                published = publish_stored(&store, &events, published).await;
                answers
            }
        };
        // Published, then the router, then the channels.
        let mut folders: Vec<&GroupFolder> = Vec::new();
        for ((items, _), answer) in takes.iter().zip(&answers) {
            for (item, a) in items.iter().zip(answer.iter().flatten()) {
                let wakes = matches!(a, Ok(Taken::Stored(_) | Taken::Edited));
                if wakes && !folders.contains(&item.folder()) {
                    folders.push(item.folder());
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

/// Stores what a channel took in, in the caller's transaction, each item
/// for its group's chat (looked up once per group), then its mark. An item
/// for a group that is not registered is answered "not found", one that is
/// refused with why, and the rest are stored.
fn store_inbound(
    tx: &rusqlite::Transaction<'_>,
    list: &[Arc<dyn Channel>],
    items: &[Intake],
    mark: Option<&Mark>,
) -> Result<Vec<Result<Taken>>> {
    let mut chats: Vec<(&GroupFolder, Option<(String, &'static str)>)> = Vec::new();
    let mut answers = Vec::with_capacity(items.len());
    for item in items {
        let folder = item.folder();
        let chat = match chats.iter().find(|(f, _)| *f == folder) {
            Some((_, c)) => c.clone(),
            None => {
                let c = store::groups::get(tx, folder)?
                    .map(|g| (g.jid.clone(), owner(list, &g.jid).name()));
                chats.push((folder, c.clone()));
                c
            }
        };
        let Some((jid, channel)) = chat else {
            answers.push(Err(Error::NotFound(format!("group {folder:?}"))));
            continue;
        };
        answers.push(match item {
            Intake::New { m, .. } => match m.check() {
                Ok(()) => Ok(store::messages::insert_inbound(tx, &jid, channel, m)?
                    .map_or(Taken::Duplicate, Taken::Stored)),
                Err(e) => Err(e),
            },
            Intake::Edit {
                external_id,
                text,
                addressed,
                ..
            } => {
                // What an edit may change is the router's rule.
                let edited =
                    crate::routing::rules::edit(tx, folder, &jid, external_id, text, *addressed)?;
                Ok(if edited {
                    Taken::Edited
                } else {
                    Taken::Unchanged
                })
            }
        });
    }
    if let Some(mark) = mark {
        store::router_state::set(tx, &mark.key, &mark.value)?;
    }
    Ok(answers)
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::groups;
    use std::sync::Mutex;

    /// A channel that records what it was asked to send.
    struct Recorder(Mutex<Vec<String>>);

    impl Channel for Recorder {
        fn name(&self) -> &'static str {
            "recorder"
        }
        fn owns(&self, jid: &str) -> bool {
            jid.starts_with("rec:")
        }
        fn send<'a>(
            &'a self,
            _m: &'a Message,
            _part: usize,
            text: &'a str,
        ) -> BoxFuture<'a, std::result::Result<String, SendError>> {
            self.0.lock().unwrap().push(text.to_string());
            Box::pin(async { Ok("1".to_string()) })
        }
    }

    #[tokio::test]
    async fn a_new_channel_plugs_in_without_the_router() {
        let (_d, store) = store_with_group("tg", Some("rec:42")).await;
        let rec = Arc::new(Recorder(Mutex::new(Vec::new())));
        let (tx, mut rx) = mpsc::unbounded_channel();
        let ch = Channels::new(store.clone())
            .with(rec.clone())
            .with_router(tx);
        let mut live = ch.subscribe();
        let m = ch
            .receive(
                &GroupFolder::new("tg").unwrap(),
                Inbound {
                    sender: "u".into(),
                    sender_name: None,
                    text: "hi".into(),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(rx.recv().await.unwrap(), "tg");
        assert_eq!(live.recv().await.unwrap().message.id, m.id);
        let chan: String = store
            .read(|c| {
                Ok(
                    c.query_row("SELECT channel FROM chats WHERE jid = 'rec:42'", [], |r| {
                        r.get(0)
                    })?,
                )
            })
            .await
            .unwrap();
        assert_eq!(chan, "recorder");
        let out = ch
            .say("rec:42", "Andy", "hello <internal>x</internal>")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(live.recv().await.unwrap().message.id, out.id);
        // Sent in the background, then marked delivered.
        for _ in 0..100 {
            if store
                .read(|c| store::messages::undelivered(c, 0, 10))
                .await
                .unwrap()
                .is_empty()
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(rec.0.lock().unwrap().as_slice(), ["hello"]);
        assert!(
            store
                .read(|c| store::messages::undelivered(c, 0, 10))
                .await
                .unwrap()
                .is_empty(),
            "marked delivered"
        );
        assert!(
            ch.say("rec:42", "Andy", "<internal>only</internal>")
                .await
                .unwrap()
                .is_none()
        );
    }

    /// A store with the group `fam` registered; its chat's jid.
    async fn store_with_fam() -> (tempfile::TempDir, Store, String) {
        let (d, store) = store_with_group("fam", None).await;
        (d, store, "local:fam".to_string())
    }

    /// A fresh store with one group registered (its jid, else the default).
    pub(super) async fn store_with_group(
        folder: &str,
        jid: Option<&str>,
    ) -> (tempfile::TempDir, Store) {
        let d = tempfile::tempdir().unwrap();
        let store = Store::open(&d.path().join("g2.db"), Duration::from_secs(5)).unwrap();
        let g = groups::NewGroup {
            folder: folder.into(),
            name: folder.to_uppercase(),
            jid: jid.map(str::to_string),
            ..Default::default()
        }
        .into_group("Andy")
        .unwrap();
        store
            .write(move |tx| store::groups::add(tx, &g))
            .await
            .unwrap();
        (d, store)
    }

    #[tokio::test]
    async fn a_platform_batch_commits_with_its_mark_once_and_edits_only_what_is_pending() {
        let (_d, store, jid) = store_with_fam().await;
        let ch = Channels::new(store.clone());
        let fam = GroupFolder::new("fam").unwrap();
        let new = |id: &str, text: &str| Intake::New {
            folder: fam.clone(),
            m: Inbound {
                sender: "42".into(),
                sender_name: None,
                text: text.into(),
                external_id: Some(id.into()),
                ..Default::default()
            },
        };
        let mark = |v: &str| {
            Some(Mark {
                key: "test:offset".into(),
                value: v.into(),
            })
        };
        let taken = ch
            .take_in(vec![new("1", "one"), new("2", "two")], mark("3"))
            .await
            .unwrap();
        assert!(matches!(&taken[0], Ok(Taken::Stored(m)) if m.text == "one"));
        let offset = store
            .read(|c| store::router_state::get(c, "test:offset"))
            .await
            .unwrap();
        assert_eq!(offset.as_deref(), Some("3"));
        // Handed in again (a host killed before its mark): stored once.
        let again = ch.take_in(vec![new("2", "two")], mark("3")).await.unwrap();
        assert!(matches!(again[0], Ok(Taken::Duplicate)), "{again:?}");
        // An edit of a pending message replaces its text ...
        let edit = |id: &str, text: &str| Intake::Edit {
            folder: fam.clone(),
            external_id: id.into(),
            text: text.into(),
            addressed: true,
        };
        let e = ch
            .take_in(vec![edit("1", "one, fixed")], None)
            .await
            .unwrap();
        assert!(matches!(e[0], Ok(Taken::Edited)), "{e:?}");
        // ... not one that was answered.
        let seq2 = match &taken[1] {
            Ok(Taken::Stored(m)) => m.seq,
            other => panic!("{other:?}"),
        };
        store
            .write(move |tx| crate::routing::rules::advance(tx, "fam", seq2))
            .await
            .unwrap();
        let e = ch
            .take_in(vec![edit("2", "rewritten")], None)
            .await
            .unwrap();
        assert!(matches!(e[0], Ok(Taken::Unchanged)), "{e:?}");
        let texts: Vec<String> = store
            .read(move |c| store::messages::after(c, &jid, 0, 10))
            .await
            .unwrap()
            .into_iter()
            .map(|m| m.text)
            .collect();
        assert_eq!(texts, ["one, fixed", "two"]);
        let addressed = store
            .read(|c| store::messages::latest(c, "local:fam", 10))
            .await
            .unwrap()
            .iter()
            .map(|m| m.addressed)
            .collect::<Vec<_>>();
        assert_eq!(addressed, [true, false], "the edit called the assistant");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_posts_and_replies_are_published_in_seq_order() {
        use futures_util::StreamExt;
        let (_d, store, jid) = store_with_fam().await;
        let ch = Channels::new(store.clone());
        let mut live = ch.subscribe();
        let follow = ch.follow(jid.clone(), None);
        let mut tasks = Vec::new();
        for p in 0..8 {
            let ch = ch.clone();
            tasks.push(tokio::spawn(async move {
                for i in 0..100 {
                    ch.receive(
                        &GroupFolder::new("fam").unwrap(),
                        Inbound {
                            sender: format!("u{p}"),
                            sender_name: None,
                            text: format!("{i}"),
                            ..Default::default()
                        },
                    )
                    .await
                    .unwrap();
                }
            }));
        }
        let (ch2, j2) = (ch.clone(), jid.clone());
        tasks.push(tokio::spawn(async move {
            for i in 0..50 {
                ch2.say(&j2, "Andy", &format!("reply {i}")).await.unwrap();
            }
        }));
        for t in tasks {
            t.await.unwrap();
        }
        let mut seqs = Vec::new();
        while seqs.len() < 850 {
            seqs.push(live.recv().await.unwrap().message.seq);
        }
        assert!(
            seqs.windows(2).all(|w| w[0] < w[1]),
            "published out of order"
        );
        let followed: Vec<i64> = follow.take(850).map(|l| l.message.seq).collect().await;
        assert_eq!(followed, seqs);
        let stored = store
            .read(move |c| store::messages::after(c, &jid, 0, 1000))
            .await
            .unwrap();
        assert_eq!(stored.iter().map(|m| m.seq).collect::<Vec<_>>(), seqs);
        // An unknown group is refused; nothing is stored for it.
        let none = ch
            .receive(
                &GroupFolder::new("nobody").unwrap(),
                Inbound {
                    sender: "u".into(),
                    sender_name: None,
                    text: "x".into(),
                    ..Default::default()
                },
            )
            .await;
        assert!(matches!(none, Err(Error::NotFound(_))), "{none:?}");
        assert_eq!(
            store.read(store::messages::last_seq).await.unwrap(),
            *seqs.last().unwrap()
        );
    }

    #[tokio::test]
    async fn a_listener_that_falls_behind_is_closed_and_resumes_from_the_store() {
        use futures_util::StreamExt;
        let (_d, store, jid) = store_with_fam().await;
        let ch = Channels::new(store.clone());
        let mut slow = std::pin::pin!(ch.follow(jid.clone(), None));
        let n = LISTENER_BUFFER + 10;
        for i in 0..n {
            ch.say(&jid, "Andy", &format!("m{i}")).await.unwrap();
        }
        // Let the sequencer publish everything (the last `say` is stored).
        let mut probe = ch.subscribe();
        ch.say(&jid, "Andy", "last").await.unwrap();
        while probe.recv().await.unwrap().message.text != "last" {}
        // Nothing skipped silently: the stream ends instead.
        assert!(slow.next().await.is_none());
        let resumed: Vec<String> = ch
            .follow(jid.clone(), Some(0))
            .take(n + 1)
            .map(|l| l.message.text.clone())
            .collect()
            .await;
        assert_eq!(resumed.len(), n + 1);
        assert_eq!(resumed[0], "m0");
        assert_eq!(resumed[n], "last");
    }
}
