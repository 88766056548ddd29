//! Telegram: group chats, private chats and forum topics through the Bot
//! API, with `teloxide-core` as the typed client.
//!
//! - **Chats.** A chat is the jid `tg:<chat_id>`; a forum topic is
//!   `tg:<chat_id>:<topic_id>` ([`Jid`]). A topic registered as a group of
//!   its own is its own agent, memory and session; a topic that is not
//!   shares its chat's group, and the reply goes back into the topic it
//!   was asked in (the message's thread is stored with it).
//! - **Inbound** (`inbound`): one long-polling loop calls `getUpdates`
//!   and hands each batch to [`Channels::take_in`] with the next offset as
//!   its `Mark`, so the updates and the offset commit together: a host
//!   killed before the commit fetches the same updates again, one killed
//!   after it never sees them again, and a message stored twice is stored
//!   once anyway (its Telegram message id is unique in its chat).
//! - **Outbound**: a message is split by [`format::split`], each part sent
//!   as HTML ([`format::html`]) and, when Telegram rejects the formatting
//!   ("can't parse entities"), again as plain text. The first part quotes
//!   the message that woke the agent (not in private chats, where every
//!   message does). [`crate::channels::outbox`] does the ordering, the
//!   waiting and the exactly-once bookkeeping; this module says what each
//!   Bot API error means (`send_error`).
//!
//! The token is read from [`TOKEN_VARIABLE`] (the environment or
//! `{home}/.env`), kept in the client, and never logged: teloxide removes
//! it from the URLs of its network errors, and the redactor of archives
//! and memory knows it.

mod files;
pub mod format;
mod inbound;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use teloxide_core::payloads::{SendChatActionSetters, SendMessageSetters};
use teloxide_core::requests::{Request, Requester};
use teloxide_core::types::{ChatAction, ChatId, MessageId, ParseMode, ReplyParameters, ThreadId};
use teloxide_core::{ApiError, Bot, RequestError};

use super::platform::{About, Platform, Sent};
use super::{Channels, Secret, SendError};
use crate::background::Background;
use crate::config::TelegramSettings;
use crate::gateway::credentials::SecretVariable;
use crate::messages::Message;
use crate::store::Store;
use crate::{Error, Result};

/// Where the bot token is read from (the environment, then `{home}/.env`).
pub const TOKEN_VARIABLE: &str = "TELEGRAM_BOT_TOKEN";
inventory::submit! { SecretVariable(TOKEN_VARIABLE) }
pub use crate::jid::{TELEGRAM_PREFIX as PREFIX, TelegramJid as Jid};
/// The channel's name, stored with its chats.
const NAME: &str = "telegram";

/// The bot token from the environment or `{home}/.env`.
pub fn token(home: &Path) -> Option<Secret> {
    Secret::find(home, TOKEN_VARIABLE)
}

/// The bot as `getMe` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub id: u64,
    /// Without the `@`.
    pub username: String,
}

/// How long a request other than a long poll may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(17);

/// A Bot API client for the settings' server whose requests give up after
/// `timeout` (a long poll's client needs more than its poll).
pub fn client(settings: &TelegramSettings, token: &Secret, timeout: Duration) -> Result<Bot> {
    let url = url::Url::parse(&settings.api_url)
        .map_err(|e| Error::Config(format!("channels.telegram.api_url: {e}")))?;
    let http = teloxide_core::net::default_reqwest_settings()
        .timeout(timeout)
        .build()
        .map_err(|e| Error::Config(format!("the Telegram client: {e}")))?;
    Ok(Bot::with_client(token.expose(), http).set_api_url(url))
}

/// A Bot API error in words, without anything the server echoed back
/// (an answer that is not the API's JSON is not shown) and never the
/// token.
pub fn describe(e: &RequestError, token: &str) -> String {
    let text = match e {
        RequestError::InvalidJson { .. } => {
            "the Bot API answered with something that is not its JSON".to_string()
        }
        e => e.to_string(),
    };
    if token.is_empty() {
        text
    } else {
        text.replace(token, "[redacted]")
    }
}

/// Asks the Bot API who the bot is (`getMe`): checks the token.
pub async fn identify(bot: &Bot) -> std::result::Result<Identity, String> {
    let me = bot.get_me().send().await.map_err(|e| match e {
        RequestError::Api(ApiError::InvalidToken) => {
            format!("the Bot API refused the token ({e}); check {TOKEN_VARIABLE}")
        }
        e => describe(&e, bot.token()),
    })?;
    Ok(Identity {
        id: me.user.id.0,
        username: me.user.username.clone().unwrap_or_default(),
    })
}

/// The Telegram channel.
pub struct Telegram {
    /// Sends, with [`REQUEST_TIMEOUT`].
    bot: Bot,
    /// Long polls, with a timeout longer than the poll.
    poller: Bot,
    store: Store,
}

impl Telegram {
    pub fn new(settings: &TelegramSettings, token: &Secret, store: Store) -> Result<Arc<Telegram>> {
        let poll = Duration::from_secs(settings.poll_timeout_secs) + REQUEST_TIMEOUT;
        Ok(Arc::new(Telegram {
            bot: client(settings, token, REQUEST_TIMEOUT)?,
            poller: client(settings, token, poll)?,
            store,
        }))
    }

    /// Starts the long-polling loop that takes updates in through
    /// `channels` (which must carry this channel).
    pub fn start(self: &Arc<Self>, channels: Channels, settings: TelegramSettings) -> Background {
        let tg = self.clone();
        Background::spawn(move |stop| inbound::poll(tg, channels, settings, stop))
    }

    /// Sends a text to a chat as it is, outside the message log (the
    /// notice to an unregistered chat).
    async fn notify(&self, chat: i64, text: &str) -> std::result::Result<(), SendError> {
        let jid = Jid { chat, topic: None };
        self.post(jid, None, text, None, None)
            .await
            .map(|_| ())
            .map_err(send_error)
    }

    async fn post(
        &self,
        jid: Jid,
        html: Option<String>,
        plain: &str,
        thread: Option<i32>,
        quote: Option<i32>,
    ) -> std::result::Result<teloxide_core::types::Message, RequestError> {
        let mut req = match html {
            Some(h) => self
                .bot
                .send_message(ChatId(jid.chat), h)
                .parse_mode(ParseMode::Html),
            None => self.bot.send_message(ChatId(jid.chat), plain),
        };
        if let Some(t) = thread {
            req = req.message_thread_id(ThreadId(MessageId(t)));
        }
        if let Some(q) = quote {
            req = req
                .reply_parameters(ReplyParameters::new(MessageId(q)).allow_sending_without_reply());
        }
        req.send().await
    }
}

impl Platform for Telegram {
    type Jid = Jid;
    const ABOUT: About<Jid> = About::new(NAME, PREFIX, "Telegram chat", Jid::parse, format::split);

    /// Quotes what it answers (by its Telegram id) and stays in its topic.
    async fn send_to(&self, m: &Message, part: usize, jid: Jid, text: &str) -> Sent {
        let answered = super::answered(&self.store, m).await?;
        let thread = jid.topic.or_else(|| {
            answered
                .as_ref()
                .and_then(|r| r.thread.as_deref()?.parse().ok())
        });
        let quote = answered
            .as_ref()
            .filter(|_| part == 0 && !jid.is_private())
            .and_then(|r| r.external_id.as_deref()?.parse().ok());
        let sent = match self
            .post(jid, Some(format::html(text)), text, thread, quote)
            .await
        {
            Err(RequestError::Api(ApiError::CantParseEntities(why))) => {
                tracing::warn!(chat = %m.chat_jid, error = %why, "Telegram rejected the formatting; sending the part as plain text");
                self.post(jid, None, text, thread, quote).await
            }
            other => other,
        };
        sent.map(|msg| msg.id.0.to_string()).map_err(send_error)
    }

    async fn typing_in(&self, jid: Jid) {
        let mut req = self
            .bot
            .send_chat_action(ChatId(jid.chat), ChatAction::Typing);
        if let Some(t) = jid.topic {
            req = req.message_thread_id(ThreadId(MessageId(t)));
        }
        if let Err(e) = req.send().await {
            tracing::debug!(chat = %jid, error = %e, "typing indicator");
        }
    }
}

/// What a Bot API error means for the part that was being sent.
fn send_error(e: RequestError) -> SendError {
    match e {
        RequestError::RetryAfter(s) => SendError::RetryAfter(s.duration()),
        RequestError::MigrateToChatId(id) => SendError::Gone(format!(
            "the group became a supergroup: register it again as {PREFIX}{}",
            id.0
        )),
        RequestError::Api(api) => {
            let why = api.to_string();
            match api {
                ApiError::BotBlocked
                | ApiError::BotKicked
                | ApiError::BotKickedFromSupergroup
                | ApiError::BotKickedFromChannel
                | ApiError::UserDeactivated
                | ApiError::CantInitiateConversation
                | ApiError::CantTalkWithBots
                | ApiError::ChatNotFound
                | ApiError::GroupDeactivated
                | ApiError::NotEnoughRightsToPostMessages => SendError::Gone(why),
                // The token was revoked: no chat is to blame; sent again
                // once a host with a good token runs.
                ApiError::InvalidToken => SendError::Transient(why),
                ApiError::Unknown(d) if d.starts_with("Forbidden") => SendError::Gone(d),
                // Telegram's own trouble: the message was not taken.
                ApiError::Unknown(d)
                    if d.starts_with("Internal Server Error")
                        || d.starts_with("Bad Gateway")
                        || d.starts_with("Too Many Requests") =>
                {
                    SendError::Transient(d)
                }
                _ => SendError::Rejected(why),
            }
        }
        // The request never left: safe to send again.
        RequestError::Network(e) if e.is_connect() || e.is_builder() => {
            SendError::Transient(e.to_string())
        }
        // It may have arrived; its answer did not.
        RequestError::Network(e) => SendError::Uncertain(e.to_string()),
        RequestError::InvalidJson { .. } => {
            SendError::Uncertain("the Bot API answered with something that is not its JSON".into())
        }
        RequestError::Io(e) => SendError::Transient(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bot_api_errors_decide_what_happens_to_a_part() {
        use teloxide_core::types::Seconds;
        assert_eq!(
            send_error(RequestError::RetryAfter(Seconds::from_seconds(3))),
            SendError::RetryAfter(Duration::from_secs(3))
        );
        assert!(matches!(
            send_error(RequestError::Api(ApiError::BotKickedFromSupergroup)),
            SendError::Gone(_)
        ));
        assert!(matches!(
            send_error(RequestError::Api(ApiError::Unknown(
                "Forbidden: bot was kicked from the group chat".into()
            ))),
            SendError::Gone(_)
        ));
        assert!(matches!(
            send_error(RequestError::Api(ApiError::MessageIsTooLong)),
            SendError::Rejected(_)
        ));
        assert!(matches!(
            send_error(RequestError::MigrateToChatId(ChatId(-1005))),
            SendError::Gone(w) if w.contains("tg:-1005")
        ));
        assert!(format!("{:?}", Secret("123:secret".into())).contains("redacted"));
    }
}
