//! The message log: every message in and out of a group's chat, stored
//! before anything else happens to it, in arrival order (`seq`). The
//! router's per-group cursor is a `seq` in this log.
//!
//! Invariants: a message is stored exactly once (`id` is unique; inbound
//! ids are generated here); `seq` only grows; text is stored as received
//! (escaping happens when a prompt is built, and [`crate::terminal`]
//! neutralizes it when it is printed); sender names hold no control
//! characters.

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// Longest message text accepted.
pub const MAX_TEXT: usize = 32 * 1024;
/// Longest sender id or name.
const MAX_SENDER: usize = 200;

/// One message. Also the stable JSON shape of the API.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub seq: i64,
    pub id: String,
    pub chat_jid: String,
    pub sender: String,
    pub sender_name: Option<String>,
    pub text: String,
    /// RFC 3339, UTC.
    pub timestamp: String,
    /// Written by the assistant.
    pub from_bot: bool,
    /// The channel saw it address the assistant (a mention of the bot, a
    /// reply to one of its messages, a private chat): it wakes the agent
    /// like a trigger.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub addressed: bool,
    /// The assistant's answer to this message (`seq`): the one that woke it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<i64>,
}

/// An inbound message as a channel hands it over. Only `sender`,
/// `sender_name` and `text` come from the HTTP API; the rest is what a
/// platform's channel knows.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Inbound {
    pub sender: String,
    pub sender_name: Option<String>,
    pub text: String,
    /// The platform's id of the message, unique in its chat: a message
    /// handed over twice is stored once.
    #[serde(skip)]
    pub external_id: Option<String>,
    /// The platform's thread (forum topic) it was posted in.
    #[serde(skip)]
    pub thread: Option<String>,
    /// It addresses the assistant (see [`Message::addressed`]).
    #[serde(skip)]
    pub addressed: bool,
}

impl Inbound {
    pub fn check(&self) -> Result<()> {
        let bad = |why: &str| Err(Error::Invalid(why.to_string()));
        if self.sender.trim().is_empty() || self.sender.len() > MAX_SENDER {
            return bad("sender: 1-200 characters");
        }
        crate::terminal::check_name("sender", &self.sender)?;
        if let Some(name) = &self.sender_name {
            if name.len() > MAX_SENDER {
                return bad("sender_name: at most 200 characters");
            }
            crate::terminal::check_name("sender_name", name)?;
        }
        if self.text.trim().is_empty() {
            return bad("text must not be empty");
        }
        if self.text.len() > MAX_TEXT {
            return bad("text: at most 32 KiB");
        }
        Ok(())
    }
}
