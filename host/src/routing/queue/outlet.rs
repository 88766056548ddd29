//! The queue's one way to the chats: what it has stored goes out (replies,
//! notices, task results) and the state it shows (working, idle).
//! `Channels` implements it (host/src/channels/mod.rs) and `host.rs` wires
//! it in, so routing never imports the channels.
//!
//! Boundary: only what the queue uses. Storing a reply or notice is the
//! queue's (through `rules` and `notices`); publishing and sending it is
//! the outlet's.

use futures_util::future::BoxFuture;

use crate::Result;
use crate::messages::Message;
use g2_core::validate::GroupFolder;

/// Where the queue's messages and state changes go.
pub trait Outlet: Send + Sync + 'static {
    /// The group's agent is working on `chat_jid` (a typing indicator,
    /// where the platform has one) until [`Outlet::idle`].
    fn working(&self, folder: &GroupFolder, chat_jid: &str);
    /// The group's agent is done for now.
    fn idle(&self, folder: &GroupFolder);
    /// Whether storing a message for this chat is its delivery (it is
    /// then stored as delivered).
    fn stored_is_delivered(&self, chat_jid: &str) -> bool;
    /// What the log keeps of a message is cleaned with (private spans,
    /// secrets, the host's credentials).
    fn redactor(&self) -> &g2_core::privacy::Redactor;
    /// Publishes and sends an assistant message that was just stored.
    fn deliver(&self, m: Message) -> BoxFuture<'_, ()>;
    /// Stores an assistant message outside any cursor (a task's result)
    /// and delivers it; `None` when nothing is left to say.
    fn say<'a>(
        &'a self,
        chat_jid: &'a str,
        sender: &'a str,
        text: &'a str,
    ) -> BoxFuture<'a, Result<Option<Message>>>;
}
