//! The message log: every message in and out of a group's chat, stored
//! before anything else happens to it, in arrival order (`seq`). The
//! router's per-group cursor is a `seq` in this log.
//!
//! Invariants: a message is stored exactly once (`id` is unique; inbound
//! ids are generated here); `seq` only grows; text is stored as received
//! (escaping happens when a prompt is built, and [`crate::terminal`]
//! neutralizes it when it is printed); sender names hold no control
//! characters.

use crate::store::{self, Store};
use crate::{Error, Result};

pub use crate::store::messages::{Inbound, Message};

/// Up to `limit` messages of a chat after `seq` `after`, oldest first.
pub async fn after(
    store: &Store,
    chat_jid: &str,
    after: i64,
    limit: usize,
) -> Result<Vec<Message>> {
    let jid = chat_jid.to_string();
    store
        .read(move |c| store::messages::after(c, &jid, after, limit))
        .await
}

/// A chat's `limit` latest messages, oldest first.
pub async fn latest(store: &Store, chat_jid: &str, limit: usize) -> Result<Vec<Message>> {
    let jid = chat_jid.to_string();
    store
        .read(move |c| store::messages::latest(c, &jid, limit))
        .await
}

/// The message of a chat that an HTTP client stored under an
/// `Idempotency-Key` (see [`idempotency_key`]).
pub async fn by_key(store: &Store, chat_jid: &str, key: &str) -> Result<Option<Message>> {
    let (jid, key) = (chat_jid.to_string(), key.to_string());
    store
        .read(move |c| store::messages::by_external_id(c, &jid, &key))
        .await
}

/// An `Idempotency-Key` header's value as the message's platform id in
/// its chat (`http:` and the key): 1-200 visible ASCII characters.
pub fn idempotency_key(raw: &[u8]) -> Result<String> {
    let ok = (1..=200).contains(&raw.len()) && raw.iter().all(u8::is_ascii_graphic);
    if !ok {
        return Err(Error::Invalid(
            "Idempotency-Key: 1-200 visible ASCII characters".into(),
        ));
    }
    Ok(format!("http:{}", String::from_utf8_lossy(raw)))
}

/// The longest message text accepted unless the host is told otherwise:
/// the default of `channels.max_text_bytes`, which the channels carry
/// (`Channels::max_text`) and every check of a message's text takes.
pub const MAX_TEXT: usize = crate::config::ChannelSettings::MAX_TEXT_BYTES;
/// Longest sender id or name.
const MAX_SENDER: usize = 200;

/// Refuses a text longer than `max_text` bytes, naming its size, the
/// limit and the setting (what an HTTP client and the logs are told).
pub fn check_length(text: &str, max_text: usize) -> Result<()> {
    if text.len() > max_text {
        return Err(Error::Invalid(format!(
            "text: {} bytes, over the limit of {max_text} bytes (channels.max_text_bytes)",
            text.len()
        )));
    }
    Ok(())
}

/// The checks an [`Inbound`] passes before it is stored (a channel runs
/// them; `store::messages::insert_inbound` takes what passed).
pub trait CheckInbound {
    /// Every check but the text's length: a sender, a name the log takes,
    /// a text that says something. What a platform runs before it hands a
    /// message in: the sequencer refuses one over the limit and tells its
    /// chat why.
    fn check_fields(&self) -> Result<()>;

    /// Every check, with texts of at most `max_text` bytes.
    fn check_within(&self, max_text: usize) -> Result<()>;

    /// Every check with the default limit, [`MAX_TEXT`].
    fn check(&self) -> Result<()> {
        self.check_within(MAX_TEXT)
    }
}

impl CheckInbound for Inbound {
    fn check_fields(&self) -> Result<()> {
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
        Ok(())
    }

    fn check_within(&self, max_text: usize) -> Result<()> {
        self.check_fields()?;
        check_length(&self.text, max_text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from(text: &str) -> Inbound {
        Inbound {
            sender: "ann".into(),
            sender_name: Some("Ann".into()),
            text: text.into(),
            ..Default::default()
        }
    }

    #[test]
    fn the_text_limit_is_the_one_given_and_named_when_refused() {
        let at = from(&"é".repeat(512)); // 1024 bytes, 512 characters
        assert!(at.check_within(1024).is_ok());
        let over = from(&format!("{}x", "é".repeat(512)));
        let e = over.check_within(1024).unwrap_err().to_string();
        assert!(
            e.contains("1025 bytes")
                && e.contains("limit of 1024 bytes")
                && e.contains("channels.max_text_bytes"),
            "{e}"
        );
        assert!(!e.contains('é'), "the text itself is not repeated: {e}");
        // The fields alone pass whatever the length; the default is 32 KiB.
        let long = from(&"x".repeat(MAX_TEXT + 1));
        assert!(long.check_fields().is_ok());
        assert!(long.check().is_err() && from(&"x".repeat(MAX_TEXT)).check().is_ok());
        // The other checks hold whatever the limit.
        assert!(from(" \n").check_within(usize::MAX).is_err());
        let mut nameless = from("hi");
        nameless.sender = " ".into();
        assert!(nameless.check_fields().is_err());
    }
}
