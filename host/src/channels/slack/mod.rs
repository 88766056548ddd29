//! Slack: channels, private channels and direct messages of one
//! workspace, through Socket Mode (no public address) and the Web API,
//! hand-written on `tokio-websockets` and `reqwest` (docs/channels.md,
//! "Slack").
//!
//! - **Chats.** A conversation is the jid `sl:<team_id>:<channel_id>`
//!   ([`Jid`]). A mention of the bot (`app_mention`, or `<@BOT>` in a
//!   message) addresses the assistant, as does every direct message;
//!   other messages of a registered channel are stored as context.
//! - **Inbound** (`socket`): `apps.connections.open` with the app token
//!   gives a WebSocket URL; each envelope's messages are stored (through
//!   [`Channels::take_in`]) and then acknowledged, within milliseconds and
//!   never after the agent. Slack delivers again what was not
//!   acknowledged, and a message handed in twice (or as both `message` and
//!   `app_mention`) is stored once: its `ts` is unique in its chat. A
//!   `disconnect` envelope, a closed or a silent socket opens a new one.
//! - **Files** (`files`): a message's files are fetched with the bot token
//!   (scope `files:read`) and kept ([`crate::media::Media::keep`], a clip
//!   recorded in Slack transcribed) before the message is stored; what was
//!   not kept is said in the message and in a note to the channel.
//! - **Outbound**: a message is split by [`format::split`], each part
//!   posted in mrkdwn ([`format::text`]) with `chat.postMessage`, in the
//!   thread of the mention it answers when that was in a thread.
//!   `send_error` says what each Web API error means for the part.
//!
//! The bot token (`xoxb-`) and the app token (`xapp-`) are read from
//! [`BOT_TOKEN`] and [`APP_TOKEN`] (the environment or `{home}/.env`),
//! kept here, and never logged.

pub mod events;
mod files;
pub mod format;
mod socket;
mod web;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::platform::{About, Platform, Sent};
use super::{Channels, SendError};
use crate::background::Background;
use crate::config::SlackSettings;
use crate::gateway::credentials::SecretVariable;
use crate::messages::Message;
use crate::store::Store;
use crate::{Error, Result};

/// Slack's bot token (`xoxb-`: the Web API).
pub const BOT_TOKEN: &str = "SLACK_BOT_TOKEN";
/// Slack's app-level token (`xapp-`: opens Socket Mode connections).
pub const APP_TOKEN: &str = "SLACK_APP_TOKEN";
inventory::submit! { SecretVariable(BOT_TOKEN) }
inventory::submit! { SecretVariable(APP_TOKEN) }
pub use crate::jid::{SLACK_PREFIX as PREFIX, SlackJid as Jid};
use web::{Failure, TOKEN_ERRORS};
pub use web::{Identity, REQUEST_TIMEOUT, WebApi};
/// The channel's name, stored with its chats.
const NAME: &str = "slack";
/// The wait after a rate limit that named none.
const RATE_LIMITED_WAIT: Duration = Duration::from_secs(5);

pub use super::Secret;

/// The channel's two tokens.
#[derive(Debug, Clone)]
pub struct Credentials {
    /// The bot's (`xoxb-`): the Web API.
    pub bot_token: Secret,
    /// The app's (`xapp-`, with `connections:write`): Socket Mode.
    pub app_token: Secret,
}

impl Credentials {
    /// Both tokens from the environment or `{home}/.env`, or what is
    /// wrong with them, in words (never their values).
    pub fn find(home: &Path) -> std::result::Result<Credentials, String> {
        let get = |name| Secret::find(home, name);
        let (bot, app) = match (get(BOT_TOKEN), get(APP_TOKEN)) {
            (Some(b), Some(a)) => (b, a),
            (b, a) => {
                let missing: Vec<&str> = [(b.is_none(), BOT_TOKEN), (a.is_none(), APP_TOKEN)]
                    .into_iter()
                    .filter_map(|(m, n)| m.then_some(n))
                    .collect();
                let verb = if missing.len() == 1 { "is" } else { "are" };
                return Err(format!("{} {verb} not set", missing.join(" and ")));
            }
        };
        for (token, name, prefix, what) in [
            (&bot, BOT_TOKEN, "xoxb-", "the bot token"),
            (&app, APP_TOKEN, "xapp-", "the app-level token"),
        ] {
            if !token.expose().starts_with(prefix) {
                return Err(format!(
                    "{name} must be {what} ({prefix}…, from the app's settings in api.slack.com)"
                ));
            }
        }
        Ok(Credentials {
            bot_token: bot,
            app_token: app,
        })
    }
}

/// The Slack channel.
pub struct Slack {
    api: WebApi,
    credentials: Credentials,
    store: Store,
}

impl Slack {
    pub fn new(
        settings: &SlackSettings,
        credentials: Credentials,
        store: Store,
    ) -> Result<Arc<Slack>> {
        Ok(Arc::new(Slack {
            api: WebApi::new(settings)?,
            credentials,
            store,
        }))
    }

    /// Starts Socket Mode: messages are taken in through `channels`
    /// (which must carry this channel) until the host stops.
    pub fn start(self: &Arc<Self>, channels: Channels) -> Background {
        let slack = self.clone();
        Background::spawn(move |stop| socket::run(slack, channels, stop))
    }

    async fn post(
        &self,
        channel: &str,
        text: &str,
        thread: Option<&str>,
    ) -> std::result::Result<String, Failure> {
        let mut body = json!({ "channel": channel, "text": text, "mrkdwn": true,
            "unfurl_links": false });
        if let Some(t) = thread {
            body["thread_ts"] = json!(t);
        }
        let v = self
            .api
            .call("chat.postMessage", &self.credentials.bot_token, &body)
            .await?;
        v["ts"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| Failure::Unanswered("chat.postMessage answered no ts".into()))
    }
}

/// Checks the settings a running channel needs.
pub fn check(settings: &SlackSettings) -> Result<()> {
    let url = url::Url::parse(&settings.api_url)
        .map_err(|e| Error::Config(format!("channels.slack.api_url: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(Error::Config(
            "channels.slack.api_url: use http or https".into(),
        ));
    }
    Ok(())
}

impl Platform for Slack {
    type Jid = Jid;
    const ABOUT: About<Jid> = About::new(NAME, PREFIX, "Slack channel", Jid::parse, format::split);

    /// Into the thread of the mention it answers, if it was in one.
    async fn send_to(&self, m: &Message, _part: usize, jid: Jid, text: &str) -> Sent {
        let thread = super::answered(&self.store, m)
            .await?
            .and_then(|r| r.thread);
        self.post(&jid.channel, &format::text(text), thread.as_deref())
            .await
            .map_err(send_error)
    }
}

/// What a Web API failure means for the part being sent.
fn send_error(f: Failure) -> SendError {
    f.send_error(|e| {
        let why = e.to_string();
        match e.error.as_str() {
            _ if e.status == 429 || e.error == "ratelimited" || e.error == "rate_limited" => {
                SendError::RetryAfter(e.retry_after.unwrap_or(RATE_LIMITED_WAIT))
            }
            // The bot was removed from the channel, or it is gone.
            "channel_not_found"
            | "not_in_channel"
            | "is_archived"
            | "restricted_action"
            | "restricted_action_read_only_channel"
            | "restricted_action_thread_only_channel"
            | "restricted_action_non_threadable_channel" => {
                SendError::Gone(format!("slack: {}", e.error))
            }
            // No chat is to blame; sent again once a host with a good
            // token runs.
            name if TOKEN_ERRORS.contains(&name) => SendError::Transient(why),
            // Slack's own trouble, after which "some aspect of the
            // operation may have succeeded".
            "fatal_error" | "internal_error" => SendError::Uncertain(why),
            "service_unavailable" | "request_timeout" => SendError::Transient(why),
            _ if e.status >= 500 => SendError::Transient(why),
            _ => SendError::Rejected(why),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(status: u16, error: &str, retry_after: Option<u64>) -> Failure {
        Failure::Api(web::ApiError {
            status,
            error: error.into(),
            retry_after: retry_after.map(Duration::from_secs),
        })
    }

    #[test]
    fn web_api_errors_decide_what_happens_to_a_part() {
        assert_eq!(
            send_error(api(429, "ratelimited", Some(7))),
            SendError::RetryAfter(Duration::from_secs(7))
        );
        assert_eq!(
            send_error(api(200, "ratelimited", None)),
            SendError::RetryAfter(RATE_LIMITED_WAIT)
        );
        for gone in ["channel_not_found", "not_in_channel", "is_archived"] {
            assert!(
                matches!(send_error(api(200, gone, None)), SendError::Gone(w) if w.contains(gone)),
                "{gone}"
            );
        }
        for token in ["invalid_auth", "token_revoked", "account_inactive"] {
            assert!(matches!(
                send_error(api(200, token, None)),
                SendError::Transient(_)
            ));
        }
        assert!(matches!(
            send_error(api(200, "fatal_error", None)),
            SendError::Uncertain(_)
        ));
        assert!(matches!(
            send_error(api(503, "no error named", None)),
            SendError::Transient(_)
        ));
        assert!(matches!(
            send_error(api(200, "msg_too_long", None)),
            SendError::Rejected(_)
        ));
        assert!(matches!(
            send_error(Failure::NotSent("refused".into())),
            SendError::Transient(_)
        ));
        assert!(matches!(
            send_error(Failure::Unanswered("timeout".into())),
            SendError::Uncertain(_)
        ));
        assert!(format!("{:?}", Secret("xoxb-s3cret".into())).contains("redacted"));
        assert!(
            web::refused(api(200, "invalid_auth", None), BOT_TOKEN)
                .contains("check SLACK_BOT_TOKEN")
        );
    }

    #[test]
    fn settings_name_a_web_api() {
        assert!(check(&SlackSettings::default()).is_ok());
        let bad = SlackSettings {
            api_url: "ftp://x".into(),
            ..Default::default()
        };
        assert!(check(&bad).is_err());
    }
}
