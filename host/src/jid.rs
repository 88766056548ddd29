//! Chat ids ("jids") as groups are registered with and messages are
//! stored under: `local:<name>` for the HTTP API and the terminal,
//! `tg:<chat_id>` or `tg:<chat_id>:<topic_id>` for Telegram, `wa:<wa_id>`
//! (a person) or `wa:g:<group_id>` (a group) for WhatsApp,
//! `dc:<channel_id>` for Discord, `sl:<team_id>:<channel_id>` for Slack.
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

/// The jid prefix of WhatsApp chats.
pub const WHATSAPP_PREFIX: &str = "wa:";

/// A WhatsApp chat as a jid: one person by their WhatsApp id (a phone
/// number's digits), or a group the business number is in.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum WhatsAppJid {
    /// `wa:<wa_id>`: 5 to 20 digits, no leading zero.
    Person(String),
    /// `wa:g:<group_id>`: the Cloud API's group id (letters, digits and
    /// `-_.=`, at most 128).
    Group(String),
}

impl WhatsAppJid {
    /// `wa:<wa_id>` or `wa:g:<group_id>`; None for anything else.
    pub fn parse(jid: &str) -> Option<WhatsAppJid> {
        let rest = jid.strip_prefix(WHATSAPP_PREFIX)?;
        if let Some(group) = rest.strip_prefix("g:") {
            let ok = !group.is_empty()
                && group.len() <= 128
                && group
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.=".contains(&b));
            return ok.then(|| WhatsAppJid::Group(group.to_string()));
        }
        let ok = (5..=20).contains(&rest.len())
            && rest.bytes().all(|b| b.is_ascii_digit())
            && !rest.starts_with('0');
        ok.then(|| WhatsAppJid::Person(rest.to_string()))
    }

    /// What the Cloud API calls the chat (`to`, `recipient_type`).
    pub fn recipient(&self) -> (&str, &'static str) {
        match self {
            WhatsAppJid::Person(id) => (id, "individual"),
            WhatsAppJid::Group(id) => (id, "group"),
        }
    }
}

impl fmt::Display for WhatsAppJid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WhatsAppJid::Person(id) => write!(f, "{WHATSAPP_PREFIX}{id}"),
            WhatsAppJid::Group(id) => write!(f, "{WHATSAPP_PREFIX}g:{id}"),
        }
    }
}

/// The jid prefix of Discord channels.
pub const DISCORD_PREFIX: &str = "dc:";

/// A Discord channel (a server's text channel, a thread, or a direct
/// message) by its snowflake id: `dc:<channel_id>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DiscordJid(pub u64);

impl DiscordJid {
    /// `dc:<channel_id>` (a non-zero id as Discord prints it); None for
    /// anything else.
    pub fn parse(jid: &str) -> Option<DiscordJid> {
        let id: u64 = jid.strip_prefix(DISCORD_PREFIX)?.parse().ok()?;
        let back = DiscordJid(id);
        (id != 0 && back.to_string() == jid).then_some(back)
    }
}

impl fmt::Display for DiscordJid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{DISCORD_PREFIX}{}", self.0)
    }
}

/// The jid prefix of Slack channels.
pub const SLACK_PREFIX: &str = "sl:";

/// A Slack conversation (a public or private channel, or a direct
/// message) of one workspace, as a jid.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SlackJid {
    /// The workspace: `T` and upper-case letters and digits.
    pub team: String,
    /// The conversation: `C` (public), `G` (private) or `D` (direct
    /// message) and upper-case letters and digits.
    pub channel: String,
}

impl SlackJid {
    /// `sl:<team_id>:<channel_id>`; None for anything else.
    pub fn parse(jid: &str) -> Option<SlackJid> {
        let (team, channel) = jid.strip_prefix(SLACK_PREFIX)?.split_once(':')?;
        let id = |s: &str, first: &[u8]| {
            (2..=32).contains(&s.len())
                && first.contains(&s.as_bytes()[0])
                && s.bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
        };
        (id(team, b"T") && id(channel, b"CGD")).then(|| SlackJid {
            team: team.to_string(),
            channel: channel.to_string(),
        })
    }
}

impl fmt::Display for SlackJid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{SLACK_PREFIX}{}:{}", self.team, self.channel)
    }
}

/// The chat app a jid's chat lives in, as people name it (the viewer
/// shows it beside each group); the HTTP API's and terminal's chats are
/// `web`.
pub fn platform(jid: &str) -> &'static str {
    if jid.starts_with(TELEGRAM_PREFIX) {
        "Telegram"
    } else if jid.starts_with(WHATSAPP_PREFIX) {
        "WhatsApp"
    } else if jid.starts_with(DISCORD_PREFIX) {
        "Discord"
    } else if jid.starts_with(SLACK_PREFIX) {
        "Slack"
    } else {
        "web"
    }
}

/// Whether a jid names a chat on a chat platform (not the HTTP API's log).
pub fn on_a_platform(jid: &str) -> bool {
    [
        TELEGRAM_PREFIX,
        WHATSAPP_PREFIX,
        DISCORD_PREFIX,
        SLACK_PREFIX,
    ]
    .iter()
    .any(|p| jid.starts_with(p))
}

/// Checks a jid at registration: one that claims a platform's prefix must
/// follow its grammar.
pub fn check(jid: &str) -> Result<()> {
    if jid.starts_with(WHATSAPP_PREFIX) && WhatsAppJid::parse(jid).is_none() {
        return Err(Error::Invalid(format!(
            "jid {jid:?}: a WhatsApp chat is wa:<wa_id> (the person's number in digits, \
             e.g. wa:15551234567), a group wa:g:<group_id>"
        )));
    }
    if jid.starts_with(DISCORD_PREFIX) && DiscordJid::parse(jid).is_none() {
        return Err(Error::Invalid(format!(
            "jid {jid:?}: a Discord channel or thread is dc:<channel_id> (its id in digits, \
             from \"Copy Channel ID\" in Discord's developer mode, e.g. dc:1234567890123456789)"
        )));
    }
    if jid.starts_with(TELEGRAM_PREFIX) && TelegramJid::parse(jid).is_none() {
        return Err(Error::Invalid(format!(
            "jid {jid:?}: a Telegram chat is tg:<chat_id> (e.g. tg:-1001234567890), \
             a forum topic tg:<chat_id>:<topic_id>"
        )));
    }
    if jid.starts_with(SLACK_PREFIX) && SlackJid::parse(jid).is_none() {
        return Err(Error::Invalid(format!(
            "jid {jid:?}: a Slack channel is sl:<team_id>:<channel_id> (e.g. sl:T0123ABCD:C0456EFGH; \
             the ids are in the channel's details, and the workspace's in its URL)"
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

    #[test]
    fn whatsapp_jids_name_a_person_or_a_group() {
        assert_eq!(
            WhatsAppJid::parse("wa:15551234567"),
            Some(WhatsAppJid::Person("15551234567".into()))
        );
        assert_eq!(
            WhatsAppJid::parse("wa:g:Aq3-x_9.Z="),
            Some(WhatsAppJid::Group("Aq3-x_9.Z=".into()))
        );
        for good in ["wa:15551234567", "wa:g:120363"] {
            assert_eq!(WhatsAppJid::parse(good).unwrap().to_string(), good);
        }
        assert_eq!(
            WhatsAppJid::parse("wa:g:abc").unwrap().recipient(),
            ("abc", "group")
        );
        for bad in [
            "wa:",
            "wa:1234",
            "wa:+15551234567",
            "wa:0155512345",
            "wa:g:",
            "wa:g:a b",
            "wa:g:../x",
            "wa:123456789012345678901",
            "wa: 15551234567",
            "tg:1",
        ] {
            assert_eq!(WhatsAppJid::parse(bad), None, "{bad}");
        }
        assert!(check("wa:15551234567").is_ok() && check("wa:g:x").is_ok());
        assert!(check("wa:x").is_err() && check("wa:g:/").is_err());
        assert!(on_a_platform("wa:1") && on_a_platform("tg:1") && !on_a_platform("local:x"));
        assert_eq!(
            ["wa:g:x", "tg:-1", "local:x"].map(platform),
            ["WhatsApp", "Telegram", "web"]
        );
    }

    #[test]
    fn discord_jids_name_a_channel_by_its_snowflake() {
        assert_eq!(
            DiscordJid::parse("dc:1234567890123456789"),
            Some(DiscordJid(1234567890123456789))
        );
        assert_eq!(DiscordJid(42).to_string(), "dc:42");
        for bad in [
            "dc:",
            "dc:0",
            "dc:007",
            "dc:-5",
            "dc:+5",
            "dc:1 ",
            "dc:a",
            "dc:18446744073709551616",
            "dc:1:2",
            "tg:1",
        ] {
            assert_eq!(DiscordJid::parse(bad), None, "{bad}");
        }
        assert!(check("dc:1").is_ok() && check("dc:x").is_err());
        assert!(on_a_platform("dc:1") && platform("dc:1") == "Discord");
    }

    #[test]
    fn slack_jids_name_a_team_and_a_channel() {
        assert_eq!(
            SlackJid::parse("sl:T0123ABCD:C0456EFGH"),
            Some(SlackJid {
                team: "T0123ABCD".into(),
                channel: "C0456EFGH".into()
            })
        );
        for good in ["sl:T1:C2", "sl:TABC:GPRIV1", "sl:T9Z:D0DM"] {
            assert_eq!(SlackJid::parse(good).unwrap().to_string(), good);
            assert!(check(good).is_ok());
        }
        let long = format!("sl:T1:C{}", "A".repeat(32));
        for bad in [
            "sl:",
            "sl:T1",
            "sl:T1:",
            "sl::C1",
            "sl:T:C1",
            "sl:t1:C1",
            "sl:T1:c1",
            "sl:T1:U1",
            "sl:C1:T1",
            "sl:T1:C1:x",
            "sl:T1:C-1",
            "sl: T1:C1",
            "sl:T1:C1 ",
            long.as_str(),
        ] {
            assert_eq!(SlackJid::parse(bad), None, "{bad}");
            assert!(check(bad).is_err(), "{bad}");
        }
        assert!(on_a_platform("sl:T1:C1"));
        assert_eq!(platform("sl:T1:C1"), "Slack");
    }
}
