//! `[channels.*]`: the chat platforms and what each needs.

use serde::{Deserialize, Serialize};

/// Chat platforms (`[channels.*]`); the HTTP API is always on.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ChannelSettings {
    /// The longest message text g2 takes, in bytes of UTF-8, the same on
    /// every channel: a longer one is refused, never cut (the HTTP API
    /// answers 400; a platform's chat is told why). From
    /// [`ChannelSettings::MIN_TEXT_BYTES`] to [`ChannelSettings::MAX_TEXT_BYTES`].
    pub max_text_bytes: usize,
    pub telegram: TelegramSettings,
    pub whatsapp: WhatsAppSettings,
    pub discord: DiscordSettings,
    pub slack: SlackSettings,
}

impl ChannelSettings {
    /// The most (and the default) `max_text_bytes` may be: half the HTTP
    /// API's 64 KiB body, so a text at the limit fits a request with its
    /// newlines and quotes escaped (`\n`, `\"`: two bytes each), and the
    /// HTTP channel refuses by this limit, as the others do.
    pub const MAX_TEXT_BYTES: usize = 32 * 1024;
    /// The least `max_text_bytes` may be.
    pub const MIN_TEXT_BYTES: usize = 1024;
}

impl Default for ChannelSettings {
    fn default() -> Self {
        ChannelSettings {
            max_text_bytes: Self::MAX_TEXT_BYTES,
            telegram: TelegramSettings::default(),
            whatsapp: WhatsAppSettings::default(),
            discord: DiscordSettings::default(),
            slack: SlackSettings::default(),
        }
    }
}

/// `[channels.discord]`: a bot through Discord's gateway (events) and REST
/// API (sends). Its token is not a setting: it is read from
/// `DISCORD_BOT_TOKEN` (the environment or `{home}/.env`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct DiscordSettings {
    pub enabled: bool,
    /// The REST API, with its version (a local one in tests).
    pub api_url: String,
    /// The gateway's WebSocket address (a local one in tests); Discord
    /// names the address to resume at in each session's READY.
    pub gateway_url: String,
}

impl Default for DiscordSettings {
    fn default() -> Self {
        DiscordSettings {
            enabled: false,
            api_url: "https://discord.com/api/v10".into(),
            gateway_url: "wss://gateway.discord.gg".into(),
        }
    }
}

/// `[channels.slack]`: a Slack app through Socket Mode and the Web API.
/// Its tokens are not settings: they are read from `SLACK_BOT_TOKEN`
/// (`xoxb-`) and `SLACK_APP_TOKEN` (`xapp-`), the environment or
/// `{home}/.env`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct SlackSettings {
    pub enabled: bool,
    /// The Web API (a local one in tests).
    pub api_url: String,
}

impl Default for SlackSettings {
    fn default() -> Self {
        SlackSettings {
            enabled: false,
            api_url: "https://slack.com/api".into(),
        }
    }
}

/// `[channels.whatsapp]`: the WhatsApp Business Cloud API. Its access
/// token, app secret and verify token are not settings: they are read
/// from `WHATSAPP_ACCESS_TOKEN`, `WHATSAPP_APP_SECRET` and
/// `WHATSAPP_VERIFY_TOKEN` (the environment or `{home}/.env`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct WhatsAppSettings {
    pub enabled: bool,
    /// The Graph API (a local one in tests).
    pub graph_url: String,
    /// The Graph API version requests name.
    pub api_version: String,
    /// The business number's id (Meta's app dashboard, "API Setup"):
    /// digits, taken quoted or not (an environment variable's digits are
    /// read as a number).
    #[serde(deserialize_with = "text_or_number")]
    pub phone_number_id: String,
}

fn text_or_number<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Id {
        Text(String),
        Number(u64),
    }
    Ok(match Id::deserialize(d)? {
        Id::Text(s) => s,
        Id::Number(n) => n.to_string(),
    })
}

impl Default for WhatsAppSettings {
    fn default() -> Self {
        WhatsAppSettings {
            enabled: false,
            graph_url: "https://graph.facebook.com".into(),
            api_version: "v23.0".into(),
            phone_number_id: String::new(),
        }
    }
}

/// `[channels.telegram]`. The bot token is not a setting: it is read from
/// `TELEGRAM_BOT_TOKEN` (the environment or `{home}/.env`), so it is never
/// in `g2.toml`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct TelegramSettings {
    pub enabled: bool,
    /// The Bot API server (a self-hosted one, or a local one in tests).
    pub api_url: String,
    /// How long one `getUpdates` waits for news (long polling).
    pub poll_timeout_secs: u64,
    /// What a chat that is not registered gets.
    pub unregistered: Unregistered,
}

impl Default for TelegramSettings {
    fn default() -> Self {
        TelegramSettings {
            enabled: false,
            api_url: "https://api.telegram.org".into(),
            poll_timeout_secs: 30,
            unregistered: Unregistered::Ignore,
        }
    }
}

/// What a chat that is not registered as a group gets.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Unregistered {
    /// Nothing: its messages are dropped unread.
    Ignore,
    /// One reply, the first time it addresses the bot, saying how to
    /// register it (with its chat id).
    Notice,
}
