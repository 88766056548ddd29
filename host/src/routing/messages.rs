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
    let ok = (1..=200).contains(&raw.len()) && raw.iter().all(|b| b.is_ascii_graphic());
    if !ok {
        return Err(Error::Invalid(
            "Idempotency-Key: 1-200 visible ASCII characters".into(),
        ));
    }
    Ok(format!("http:{}", String::from_utf8_lossy(raw)))
}

/// Longest message text accepted.
pub const MAX_TEXT: usize = 32 * 1024;
/// Longest sender id or name.
const MAX_SENDER: usize = 200;

/// The checks an [`Inbound`] passes before it is stored (a channel runs
/// them; `store::messages::insert_inbound` takes what passed).
pub trait CheckInbound {
    fn check(&self) -> Result<()>;
}

impl CheckInbound for Inbound {
    fn check(&self) -> Result<()> {
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
