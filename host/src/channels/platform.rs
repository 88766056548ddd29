//! A chat platform's side of [`Channel`]: what it says of itself
//! ([`About`]: its name, its jids, its parts) and how it sends one part to
//! a chat it has read. The rest of [`Channel`] is written here once for
//! every [`Platform`]: a jid the platform cannot read is refused before
//! anything is sent.

use std::future::Future;

use futures_util::future::BoxFuture;

use super::{Channel, SendError};
use crate::messages::Message;

/// What sending one part answers: the platform's id of what it posted.
pub type Sent = Result<String, SendError>;

/// What a platform says of itself.
pub struct About<J> {
    /// Its name, stored with each chat (`telegram`, …).
    pub name: &'static str,
    /// The prefix of its chats' jids: it carries every chat with it.
    pub prefix: &'static str,
    /// What it calls a chat ("Telegram chat"), in the refusal of a jid it
    /// cannot read.
    pub chat: &'static str,
    /// Reads one of its jids (None: not one).
    pub parse: fn(&str) -> Option<J>,
    /// The parts a message's markdown is sent as ([`Channel::parts`]).
    pub split: fn(&str) -> Vec<String>,
}

impl<J> About<J> {
    /// In the order of the fields.
    pub const fn new(
        name: &'static str,
        prefix: &'static str,
        chat: &'static str,
        parse: fn(&str) -> Option<J>,
        split: fn(&str) -> Vec<String>,
    ) -> Self {
        About {
            name,
            prefix,
            chat,
            parse,
            split,
        }
    }
}

/// A chat platform (Telegram, WhatsApp, Discord, Slack); each is a
/// [`Channel`].
pub trait Platform: Send + Sync + 'static {
    /// A chat of the platform, as its jid reads.
    type Jid: Send;
    /// Its name, jids and parts.
    const ABOUT: About<Self::Jid>;
    /// Sends one part of an assistant message to its chat
    /// ([`Channel::send`]).
    fn send_to(
        &self,
        m: &Message,
        part: usize,
        jid: Self::Jid,
        text: &str,
    ) -> impl Future<Output = Sent> + Send;
    /// Shows the chat that the assistant is working ([`Channel::typing`]);
    /// by default nothing.
    fn typing_in(&self, _jid: Self::Jid) -> impl Future<Output = ()> + Send {
        async {}
    }
}

impl<P: Platform> Channel for P {
    fn name(&self) -> &'static str {
        P::ABOUT.name
    }

    fn owns(&self, chat_jid: &str) -> bool {
        chat_jid.starts_with(P::ABOUT.prefix)
    }

    fn parts(&self, m: &Message) -> Vec<String> {
        (P::ABOUT.split)(&m.text)
    }

    fn send<'a>(&'a self, m: &'a Message, part: usize, text: &'a str) -> BoxFuture<'a, Sent> {
        Box::pin(async move {
            let about = P::ABOUT;
            let jid = (about.parse)(&m.chat_jid).ok_or_else(|| {
                SendError::Rejected(format!("{:?} is not a {}", m.chat_jid, about.chat))
            })?;
            self.send_to(m, part, jid, text).await
        })
    }

    fn typing<'a>(&'a self, chat_jid: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if let Some(jid) = (P::ABOUT.parse)(chat_jid) {
                self.typing_in(jid).await;
            }
        })
    }
}
