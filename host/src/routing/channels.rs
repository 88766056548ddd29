//! Channels: where chat messages come from and replies go to.
//!
//! A [`Channel`] carries some chats (by jid) to people: the HTTP API and
//! its SSE stream (which `g2 chat` uses from a terminal) today; Telegram,
//! Slack or Discord later. Adding one means implementing the trait and
//! registering it in [`Channels`]; the router and the queue never see
//! channels, only the message log.
//!
//! - Inbound: a channel calls [`Channels::receive`], which hands the message
//!   to the sequencer and answers once it is stored, published, and the
//!   router is woken for the chat's group.
//! - Outbound: whoever stored an assistant message calls
//!   [`Channels::deliver`]; the sequencer publishes it, and it is sent
//!   through the channel that owns the chat, then marked delivered.
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

use futures_util::future::BoxFuture;
use std::collections::VecDeque;
use std::sync::{Arc, OnceLock};

use tokio::sync::{broadcast, mpsc, oneshot};

use g2_core::validate::GroupFolder;

use crate::routing::messages::{Inbound, Message};
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
    /// Delivers an assistant message. Storing a message never waits on
    /// this; a failure leaves it undelivered for a later attempt.
    fn send<'a>(&'a self, message: &'a Message) -> BoxFuture<'a, Result<()>>;
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

    fn send<'a>(&'a self, _message: &'a Message) -> BoxFuture<'a, Result<()>> {
        Box::pin(async { Ok(()) })
    }
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
    /// Store a checked inbound message for a group's chat and answer.
    Inbound {
        folder: GroupFolder,
        m: Inbound,
        done: oneshot::Sender<Result<Message>>,
    },
    /// Someone committed messages: publish what is new.
    Stored,
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
    /// Folders with new inbound messages, for the router.
    wake: Option<mpsc::UnboundedSender<GroupFolder>>,
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
                self.store.clone(),
                self.events.clone(),
                self.list.clone(),
                self.sequencer.start,
                self.wake.clone(),
                rx,
            ));
            tx
        })
    }

    fn channel_for(&self, chat_jid: &str) -> Arc<dyn Channel> {
        self.list
            .iter()
            .find(|c| c.owns(chat_jid))
            .cloned()
            .unwrap_or_else(|| Arc::new(HttpChannel))
    }

    /// Whether storing a message for this chat delivers it.
    pub fn stored_is_delivered(&self, chat_jid: &str) -> bool {
        self.channel_for(chat_jid).name() == HttpChannel.name()
    }

    /// Takes in a message for a group's chat: stored, published, routed
    /// (the router is rung once per group and batch).
    pub async fn receive(&self, folder: &GroupFolder, m: Inbound) -> Result<Message> {
        // The group is looked up in the batch's transaction (no read of
        // its own per message).
        m.check()?;
        let (done, stored) = oneshot::channel();
        self.jobs()
            .send(Job::Inbound {
                folder: folder.clone(),
                m,
                done,
            })
            .await
            .map_err(|_| stopped())?;
        stored.await.map_err(|_| stopped())?
    }

    /// Publishes an assistant message that was just stored (in `seq`
    /// order, through the sequencer) and sends it through its chat's
    /// channel — in the background, so a slow network never holds up the
    /// caller (the queue serves every group).
    pub async fn deliver(&self, m: Message) {
        if self.jobs().send(Job::Stored).await.is_err() {
            tracing::error!("the message sequencer stopped; a message was not published");
        }
        let channel = self.channel_for(&m.chat_jid);
        if channel.name() == HttpChannel.name() {
            return;
        }
        let store = self.store.clone();
        tokio::spawn(async move {
            match channel.send(&m).await {
                Ok(()) => {
                    let id = m.id.clone();
                    if let Err(e) = store
                        .write(move |tx| store::messages::mark_delivered(tx, &id))
                        .await
                    {
                        tracing::warn!(error = %e, "could not mark a message delivered");
                    }
                }
                Err(e) => {
                    tracing::warn!(channel = channel.name(), chat = %m.chat_jid, error = %e, "delivery failed; kept for a retry");
                }
            }
        });
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
            .write(move |tx| store::messages::insert_outbound(tx, &jid, &sender, &text, delivered))
            .await?;
        self.deliver(m.clone()).await;
        Ok(Some(m))
    }

    /// Sends what other channels have not confirmed yet (at start).
    pub async fn redeliver(&self) -> Result<usize> {
        let pending = self
            .store
            .read(|c| store::messages::undelivered(c, 1000))
            .await?;
        let n = pending.len();
        for m in pending {
            if !self.stored_is_delivered(&m.chat_jid) {
                self.deliver(m).await;
            } else {
                let id = m.id.clone();
                self.store
                    .write(move |tx| store::messages::mark_delivered(tx, &id))
                    .await?;
            }
        }
        Ok(n)
    }
}

fn stopped() -> Error {
    Error::io(
        "storing a message",
        std::io::Error::other("the message sequencer stopped"),
    )
}

/// The sequencer: takes whatever is queued (up to [`MAX_BATCH`] inbound
/// messages), commits it in one transaction, then publishes everything
/// stored since `published`, in `seq` order, rings the router once per
/// group, and answers the receivers.
/// Ends when every [`Channels`] is gone.
async fn sequence(
    store: Store,
    events: broadcast::Sender<Arc<Live>>,
    list: Arc<Vec<Arc<dyn Channel>>>,
    mut published: i64,
    wake: Option<mpsc::UnboundedSender<GroupFolder>>,
    mut jobs: mpsc::Receiver<Job>,
) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while jobs.recv_many(&mut batch, MAX_BATCH).await > 0 {
        let (mut items, mut dones) = (Vec::new(), Vec::new());
        for job in batch.drain(..) {
            if let Job::Inbound { folder, m, done } = job {
                items.push((folder, m));
                dones.push(done);
            }
        }
        if items.is_empty() {
            published = publish_stored(&store, &events, published).await;
            continue;
        }
        let (after, items) = (published, Arc::new(items));
        let (batch_items, batch_list) = (items.clone(), list.clone());
        let committed = store
            .write(move |tx| {
                let answers = store_inbound(tx, &batch_list, &batch_items)?;
                // Ours are consecutive; what others stored before them is
                // committed (we hold the write lock) and not yet published.
                let first = answers.iter().flatten().next().map_or(i64::MAX, |m| m.seq);
                let others = store::messages::between(tx, after, first)?;
                Ok((others, answers))
            })
            .await;
        let answers = match committed {
            Ok((others, answers)) => {
                for m in others.into_iter().chain(answers.iter().flatten().cloned()) {
                    published = m.seq;
                    let _ = events.send(Live::new(m));
                }
                answers
            }
            Err(e) => {
                // One bad message must not sink the others: each alone.
                tracing::warn!(error = %e, n = items.len(), "a batch of messages did not commit; storing them one by one");
                let mut answers = Vec::with_capacity(dones.len());
                for i in 0..items.len() {
                    let (items, list) = (items.clone(), list.clone());
                    let one = store
                        .write(move |tx| store_inbound(tx, &list, &items[i..=i]))
                        .await;
                    answers.push(one.and_then(|mut a| a.pop().unwrap_or_else(|| Err(stopped()))));
                }
                published = publish_stored(&store, &events, published).await;
                answers
            }
        };
        // Published, then the router, then the senders.
        let mut folders: Vec<&GroupFolder> = Vec::new();
        for ((folder, _), answer) in items.iter().zip(&answers) {
            if answer.is_ok() && !folders.contains(&folder) {
                folders.push(folder);
            }
        }
        ring(&wake, &folders);
        for (done, answer) in dones.into_iter().zip(answers) {
            let _ = done.send(answer);
        }
    }
}

/// Stores inbound messages in the caller's transaction, each for its
/// group's chat (looked up once per group); a message for a group that is
/// not registered is answered "not found" and the rest are stored.
fn store_inbound(
    tx: &rusqlite::Transaction<'_>,
    list: &[Arc<dyn Channel>],
    items: &[(GroupFolder, Inbound)],
) -> Result<Vec<Result<Message>>> {
    let mut chats: Vec<(&str, Option<(String, &'static str)>)> = Vec::new();
    let mut answers = Vec::with_capacity(items.len());
    for (folder, m) in items {
        let chat = match chats.iter().find(|(f, _)| f == folder) {
            Some((_, c)) => c.clone(),
            None => {
                let c = store::groups::get(tx, folder)?.map(|g| {
                    let channel = list
                        .iter()
                        .find(|c| c.owns(&g.jid))
                        .map_or(HttpChannel.name(), |c| c.name());
                    (g.jid, channel)
                });
                chats.push((folder, c.clone()));
                c
            }
        };
        answers.push(match chat {
            Some((jid, channel)) => Ok(store::messages::insert_inbound(tx, &jid, channel, m)?),
            None => Err(Error::NotFound(format!("group {folder:?}"))),
        });
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

#[cfg(test)]
mod tests {
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
        fn send<'a>(&'a self, m: &'a Message) -> BoxFuture<'a, Result<()>> {
            self.0.lock().unwrap().push(m.text.clone());
            Box::pin(async { Ok(()) })
        }
    }

    #[tokio::test]
    async fn a_new_channel_plugs_in_without_the_router() {
        let d = tempfile::tempdir().unwrap();
        let store =
            Store::open(&d.path().join("g2.db"), std::time::Duration::from_secs(1)).unwrap();
        let rec = Arc::new(Recorder(Mutex::new(Vec::new())));
        let (tx, mut rx) = mpsc::unbounded_channel();
        let ch = Channels::new(store.clone())
            .with(rec.clone())
            .with_router(tx);
        let g = groups::NewGroup {
            folder: "tg".into(),
            name: "TG".into(),
            jid: Some("rec:42".into()),
            ..Default::default()
        }
        .into_group("Andy")
        .unwrap();
        store
            .write(move |tx| store::groups::add(tx, &g))
            .await
            .unwrap();
        let mut live = ch.subscribe();
        let m = ch
            .receive(
                &GroupFolder::new("tg").unwrap(),
                Inbound {
                    sender: "u".into(),
                    sender_name: None,
                    text: "hi".into(),
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
                .read(|c| store::messages::undelivered(c, 10))
                .await
                .unwrap()
                .is_empty()
            {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert_eq!(rec.0.lock().unwrap().as_slice(), ["hello"]);
        assert!(
            store
                .read(|c| store::messages::undelivered(c, 10))
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
        let d = tempfile::tempdir().unwrap();
        let store =
            Store::open(&d.path().join("g2.db"), std::time::Duration::from_secs(5)).unwrap();
        let g = groups::NewGroup {
            folder: "fam".into(),
            name: "Fam".into(),
            ..Default::default()
        }
        .into_group("Andy")
        .unwrap();
        let jid = g.jid.clone();
        store
            .write(move |tx| store::groups::add(tx, &g))
            .await
            .unwrap();
        (d, store, jid)
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
