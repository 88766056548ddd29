//! Channels: where chat messages come from and replies go to.
//!
//! A [`Channel`] carries some chats (by jid) to people: the HTTP API and
//! its SSE stream (which `g2 chat` uses from a terminal) today; Telegram,
//! Slack or Discord later. Adding one means implementing the trait and
//! registering it in [`Channels`]; the router and the queue never see
//! channels, only the message log.
//!
//! - Inbound: a channel calls [`Channels::receive`], which stores the
//!   message first (the log is the source of truth), publishes it to the
//!   live streams and wakes the router for the chat's group.
//! - Outbound: whoever stored an assistant message calls
//!   [`Channels::deliver`]; it is published to the live streams and sent
//!   through the channel that owns the chat, then marked delivered.
//!
//! Invariant: storing comes before publishing or sending, so a stream
//! reader that catches up with `?after=` sees everything exactly once.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio::sync::{broadcast, mpsc};

use crate::Result;
use crate::groups;
use crate::messages::{self, Inbound, Message};
use crate::store::Store;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

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

/// The channels of a host, the live message stream, and the router's bell.
#[derive(Clone)]
pub struct Channels {
    store: Store,
    list: Arc<Vec<Arc<dyn Channel>>>,
    events: broadcast::Sender<Message>,
    /// Folders with new inbound messages, for the router.
    wake: Option<mpsc::UnboundedSender<String>>,
}

impl Channels {
    /// The HTTP channel only, no router (CLI commands).
    pub fn new(store: Store) -> Self {
        Channels {
            store,
            list: Arc::new(vec![Arc::new(HttpChannel)]),
            events: broadcast::channel(1024).0,
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
    pub fn with_router(mut self, wake: mpsc::UnboundedSender<String>) -> Self {
        self.wake = Some(wake);
        self
    }

    /// Live messages of every chat (for SSE streams).
    pub fn subscribe(&self) -> broadcast::Receiver<Message> {
        self.events.subscribe()
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

    /// Takes in a message for a group's chat: stored, published, routed.
    pub async fn receive(&self, folder: &str, m: Inbound) -> Result<Message> {
        let g = groups::require(&self.store, folder).await?;
        m.check()?;
        let channel = self.channel_for(&g.jid).name();
        let stored = self
            .store
            .write(move |tx| messages::insert_inbound(tx, &g.jid, channel, &m))
            .await?;
        // Nobody listening is fine.
        let _ = self.events.send(stored.clone());
        if let Some(w) = &self.wake {
            let _ = w.send(folder.to_string());
        }
        Ok(stored)
    }

    /// Publishes an assistant message that was just stored and sends it
    /// through its chat's channel — in the background, so a slow network
    /// never holds up the caller (the queue serves every group).
    pub async fn deliver(&self, m: Message) {
        let _ = self.events.send(m.clone());
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
                        .write(move |tx| messages::mark_delivered(tx, &id))
                        .await
                    {
                        tracing::warn!(error = %e, "could not mark a message delivered");
                    }
                }
                Err(e) => {
                    tracing::warn!(channel = channel.name(), chat = %m.chat_jid, error = %e, "delivery failed; kept for a retry")
                }
            }
        });
    }

    /// Stores an assistant message for a chat (outside any cursor: a
    /// `send_message` or a task's result) and delivers it.
    pub async fn say(&self, chat_jid: &str, sender: &str, text: &str) -> Result<Option<Message>> {
        let text = crate::router::strip_internal(text);
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
            .write(move |tx| messages::insert_outbound(tx, &jid, &sender, &text, delivered))
            .await?;
        self.deliver(m.clone()).await;
        Ok(Some(m))
    }

    /// Sends what other channels have not confirmed yet (at start).
    pub async fn redeliver(&self) -> Result<usize> {
        let pending = self.store.read(|c| messages::undelivered(c, 1000)).await?;
        let n = pending.len();
        for m in pending {
            if !self.stored_is_delivered(&m.chat_jid) {
                self.deliver(m).await;
            } else {
                let id = m.id.clone();
                self.store
                    .write(move |tx| messages::mark_delivered(tx, &id))
                    .await?;
            }
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
        store.write(move |tx| groups::add(tx, &g)).await.unwrap();
        let mut live = ch.subscribe();
        let m = ch
            .receive(
                "tg",
                Inbound {
                    sender: "u".into(),
                    sender_name: None,
                    text: "hi".into(),
                },
            )
            .await
            .unwrap();
        assert_eq!(rx.recv().await.unwrap(), "tg");
        assert_eq!(live.recv().await.unwrap().id, m.id);
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
        assert_eq!(live.recv().await.unwrap().id, out.id);
        // Sent in the background, then marked delivered.
        for _ in 0..100 {
            if store
                .read(|c| messages::undelivered(c, 10))
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
                .read(|c| messages::undelivered(c, 10))
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
}
