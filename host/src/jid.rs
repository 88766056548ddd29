//! Chat ids ("jids") as groups are registered with and messages are
//! stored under: `local:<name>` for the HTTP API and the terminal,
//! `tg:<chat_id>` or `tg:<chat_id>:<topic_id>` for Telegram.
//!
//! Each platform's grammar lives here, below both the groups that are
//! registered with a jid ([`check`]) and the channels that parse and print
//! them, so neither has to import the other.

use std::fmt;

use crate::{Error, Result};

/// The jid prefix of Telegram chats.
pub const TELEGRAM_PREFIX: &str = "tg:";

/// A Telegram chat, or one forum topic of it, as a jid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TelegramJid {
    pub chat: i64,
    pub topic: Option<i32>,
}

impl TelegramJid {
    /// `tg:<chat_id>` or `tg:<chat_id>:<topic_id>`; None for anything
    /// else.
    pub fn parse(jid: &str) -> Option<TelegramJid> {
        let rest = jid.strip_prefix(TELEGRAM_PREFIX)?;
        let (chat, topic) = match rest.split_once(':') {
            Some((c, t)) => (c, Some(t)),
            None => (rest, None),
        };
        let chat: i64 = chat.parse().ok().filter(|c| *c != 0)?;
        let topic = match topic {
            Some(t) => Some(t.parse::<i32>().ok().filter(|t| *t > 0)?),
            None => None,
        };
        // No sign, spaces or leading zeros the number would not print back.
        let jid_back = TelegramJid { chat, topic };
        (jid_back.to_string() == jid).then_some(jid_back)
    }

    /// A private chat with one person (positive ids; groups are negative).
    pub fn is_private(&self) -> bool {
        self.chat > 0
    }
}

impl fmt::Display for TelegramJid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.topic {
            Some(t) => write!(f, "{TELEGRAM_PREFIX}{}:{t}", self.chat),
            None => write!(f, "{TELEGRAM_PREFIX}{}", self.chat),
        }
    }
}

/// Checks a jid at registration: one that claims a platform's prefix must
/// follow its grammar.
pub fn check(jid: &str) -> Result<()> {
    if jid.starts_with(TELEGRAM_PREFIX) && TelegramJid::parse(jid).is_none() {
        return Err(Error::Invalid(format!(
            "jid {jid:?}: a Telegram chat is tg:<chat_id> (e.g. tg:-1001234567890), \
             a forum topic tg:<chat_id>:<topic_id>"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jids_name_a_chat_or_a_topic_and_nothing_else() {
        assert_eq!(
            TelegramJid::parse("tg:-1001234567890"),
            Some(TelegramJid {
                chat: -1001234567890,
                topic: None
            })
        );
        assert_eq!(
            TelegramJid::parse("tg:-100123:7"),
            Some(TelegramJid {
                chat: -100123,
                topic: Some(7)
            })
        );
        assert!(TelegramJid::parse("tg:42").unwrap().is_private());
        for bad in [
            "tg:", "tg:abc", "tg:0", "tg:+5", "tg:-00", "tg:1:0", "tg:1:-3", "tg:1:2:3", "tg: 1",
            "local:x", "tg:007",
        ] {
            assert_eq!(TelegramJid::parse(bad), None, "{bad}");
        }
        assert!(check("tg:-1").is_ok() && check("local:x").is_ok());
        assert!(check("tg:x").is_err());
    }
}
