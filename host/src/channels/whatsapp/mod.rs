//! WhatsApp: one-to-one chats and groups through the official WhatsApp
//! Business Cloud API (Meta's Graph API), with `reqwest` as the client:
//! no maintained crate lets the API's address be set (for a local server
//! in tests) or knows groups (docs/channels.md, "WhatsApp").
//!
//! - **Chats.** A person is the jid `wa:<wa_id>` (their number's digits),
//!   a group `wa:g:<group_id>` ([`Jid`]). In a one-to-one chat every
//!   message addresses the assistant; in a group, a mention of the
//!   business number (`@15550783881`) or a reply to one of its messages.
//! - **Inbound** (`webhook`): Meta POSTs each message to the webhook route
//!   of `g2 serve`. A POST is taken only with a valid `X-Hub-Signature-256`
//!   (HMAC-SHA256 of the body with the app secret); its messages are
//!   stored before the 200, so Meta delivers again whatever a killed host
//!   did not store, and a message delivered twice is stored once (its
//!   `wamid` is unique in its chat). Status webhooks (sent, delivered,
//!   read, failed) are recorded against the outbox's parts.
//! - **Files** ([`media`]): a voice note, audio, image, document or
//!   sticker is fetched from the Graph API with the access token and kept
//!   ([`crate::media::Media::keep`], a voice note transcribed) before its
//!   message is stored; what was not kept is named in the message and
//!   the chat is told.
//! - **Outbound**: a message is split by [`format::split`] (4,096
//!   characters), each part sent in WhatsApp's formatting
//!   ([`format::text`]) to the `messages` endpoint; the first part in a
//!   group quotes the message that woke the agent. `send_error` says what
//!   each Graph API error means for the part.
//!
//! The access token, app secret and verify token are read from
//! [`ACCESS_TOKEN`], [`APP_SECRET`] and [`VERIFY_TOKEN`] (the environment
//! or `{home}/.env`), kept here, and never logged.

pub mod format;
pub mod media;
pub mod webhook;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

pub use super::Secret;
use super::platform::{About, Platform, Sent};
use super::{SendError, rest};
use crate::config::WhatsAppSettings;
use crate::gateway::credentials::SecretVariable;
use crate::messages::Message;
use crate::store::Store;
use crate::{Error, Result};

/// The Cloud API's access token (sends).
pub const ACCESS_TOKEN: &str = "WHATSAPP_ACCESS_TOKEN";
/// The Meta app's secret (signs the webhook's POSTs).
pub const APP_SECRET: &str = "WHATSAPP_APP_SECRET";
/// What Meta's webhook verification must carry.
pub const VERIFY_TOKEN: &str = "WHATSAPP_VERIFY_TOKEN";
inventory::submit! { SecretVariable(ACCESS_TOKEN) }
inventory::submit! { SecretVariable(APP_SECRET) }
inventory::submit! { SecretVariable(VERIFY_TOKEN) }
pub use crate::jid::{WHATSAPP_PREFIX as PREFIX, WhatsAppJid as Jid};
/// The channel's name, stored with its chats.
const NAME: &str = "whatsapp";
/// How long one Graph API request may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(17);
/// The wait after a throttling error: the Graph API sends no
/// `Retry-After`, and its pair limit is about one message per 6 s.
const THROTTLED_WAIT: Duration = Duration::from_secs(6);

/// The channel's three credentials.
#[derive(Debug, Clone)]
pub struct Credentials {
    /// Sends (`Authorization: Bearer`).
    pub access_token: Secret,
    /// Signs the webhook's POSTs.
    pub app_secret: Secret,
    /// What Meta's verification GET must carry.
    pub verify_token: Secret,
}

impl Credentials {
    /// All three from the environment or `{home}/.env`, or the names of
    /// those missing.
    pub fn find(home: &Path) -> std::result::Result<Credentials, Vec<&'static str>> {
        let get = |name| Secret::find(home, name);
        match (get(ACCESS_TOKEN), get(APP_SECRET), get(VERIFY_TOKEN)) {
            (Some(access_token), Some(app_secret), Some(verify_token)) => Ok(Credentials {
                access_token,
                app_secret,
                verify_token,
            }),
            (a, s, v) => Err([
                (a.is_none(), ACCESS_TOKEN),
                (s.is_none(), APP_SECRET),
                (v.is_none(), VERIFY_TOKEN),
            ]
            .into_iter()
            .filter_map(|(missing, name)| missing.then_some(name))
            .collect()),
        }
    }
}

/// The business number as the Graph API describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// As WhatsApp shows it (`+1 555-078-3881`).
    pub display_phone_number: String,
    pub verified_name: String,
}

pub use super::rest::ApiError;

/// Why a request failed.
type Failure = rest::Failure<ApiError>;

/// A Graph API client for the settings' number, with the access token.
pub struct Graph {
    http: rest::Client,
    settings: WhatsAppSettings,
    token: Secret,
}

impl Graph {
    pub fn new(settings: &WhatsAppSettings, token: Secret) -> Result<Graph> {
        check(settings)?;
        let http = rest::Client::new("WhatsApp", REQUEST_TIMEOUT, "Bearer", None)?;
        Ok(Graph {
            http,
            settings: settings.clone(),
            token,
        })
    }

    fn url(&self, path: &str) -> String {
        format!(
            "{}/{}/{}{path}",
            self.settings.graph_url.trim_end_matches('/'),
            self.settings.api_version,
            self.settings.phone_number_id
        )
    }

    /// Asks the Graph API about the business number: checks the access
    /// token and the phone number id.
    pub async fn identify(&self) -> std::result::Result<Identity, String> {
        let url = self.url("?fields=display_phone_number,verified_name");
        let v = self
            .request(self.http.get(&url))
            .await
            .map_err(|f| match f {
                Failure::Api(e) if e.status == 401 || e.code == Some(code::TOKEN) => {
                    format!("the Graph API refused the access token ({e}); check {ACCESS_TOKEN}")
                }
                f => f.to_string(),
            })?;
        Ok(Identity {
            display_phone_number: v["display_phone_number"]
                .as_str()
                .unwrap_or_default()
                .into(),
            verified_name: v["verified_name"].as_str().unwrap_or_default().into(),
        })
    }

    /// One request with the access token; the answer's JSON, or why not.
    async fn request(&self, req: reqwest::RequestBuilder) -> std::result::Result<Value, Failure> {
        let answer = self
            .http
            .send(req, &self.token)
            .await
            .map_err(|f| f.map_api(|a| ApiError::read(a.status, &a.json["error"])))?;
        if answer.json.is_null() {
            return Err(Failure::Unanswered(
                "the Graph API answered with something that is not its JSON".into(),
            ));
        }
        Ok(answer.json)
    }

    /// Sends one text; answers the message's `wamid`.
    async fn post(
        &self,
        jid: &Jid,
        text: &str,
        quote: Option<&str>,
    ) -> std::result::Result<String, Failure> {
        let (to, kind) = jid.recipient();
        let mut body = json!({
            "messaging_product": "whatsapp",
            "recipient_type": kind,
            "to": to,
            "type": "text",
            "text": { "preview_url": false, "body": text },
        });
        if let Some(q) = quote {
            body["context"] = json!({ "message_id": q });
        }
        let v = self
            .request(self.http.post(&self.url("/messages")).json(&body))
            .await?;
        v["messages"][0]["id"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| Failure::Unanswered("the Graph API's answer names no message id".into()))
    }
}

/// The WhatsApp channel.
pub struct WhatsApp {
    graph: Graph,
    credentials: Credentials,
    store: Store,
    /// Held by a notification whose files are being fetched, through
    /// storing its messages: Meta's redelivery of a notification it got
    /// no timely answer for waits, then finds its messages stored and
    /// fetches nothing again.
    files: tokio::sync::Mutex<()>,
}

impl WhatsApp {
    pub fn new(
        settings: &WhatsAppSettings,
        credentials: Credentials,
        store: Store,
    ) -> Result<Arc<WhatsApp>> {
        Ok(Arc::new(WhatsApp {
            graph: Graph::new(settings, credentials.access_token.clone())?,
            credentials,
            store,
            files: tokio::sync::Mutex::new(()),
        }))
    }

    /// Sends a notice to a chat (not stored: it answers nothing the
    /// agent saw).
    pub async fn notify(&self, jid: &Jid, text: &str) -> std::result::Result<(), SendError> {
        let text: String = text.chars().take(4096).collect();
        self.graph
            .post(jid, &text, None)
            .await
            .map(|_| ())
            .map_err(send_error)
    }

    /// The channel's credentials (the webhook checks with them).
    pub fn credentials(&self) -> &Credentials {
        &self.credentials
    }

    /// The settings it runs with.
    pub fn settings(&self) -> &WhatsAppSettings {
        &self.graph.settings
    }
}

/// Checks the settings a running channel needs.
pub fn check(settings: &WhatsAppSettings) -> Result<()> {
    let url = url::Url::parse(&settings.graph_url)
        .map_err(|e| Error::Config(format!("channels.whatsapp.graph_url: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(Error::Config(
            "channels.whatsapp.graph_url: use http or https".into(),
        ));
    }
    let digits = |s: &str| !s.is_empty() && s.len() <= 32 && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(&settings.phone_number_id) {
        return Err(Error::Config(
            "channels.whatsapp.phone_number_id: the business number's id from Meta's app dashboard (digits)".into(),
        ));
    }
    let version_ok = settings.api_version.starts_with('v')
        && settings.api_version[1..]
            .split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    if !version_ok {
        return Err(Error::Config(format!(
            "channels.whatsapp.api_version {:?}: a Graph API version such as v23.0",
            settings.api_version
        )));
    }
    Ok(())
}

impl Platform for WhatsApp {
    type Jid = Jid;
    const ABOUT: About<Jid> = About::new(NAME, PREFIX, "WhatsApp chat", Jid::parse, format::split);

    /// In a group, the first part quotes what it answers.
    async fn send_to(&self, m: &Message, part: usize, jid: Jid, text: &str) -> Sent {
        let quote = match (&jid, part) {
            (Jid::Group(_), 0) => super::answered(&self.store, m)
                .await?
                .and_then(|r| r.external_id),
            _ => None,
        };
        self.graph
            .post(&jid, &format::text(text), quote.as_deref())
            .await
            .map_err(send_error)
    }
}

/// Graph API error codes (Meta's WhatsApp Cloud API error codes).
mod code {
    /// The app's call rate.
    pub const APP_RATE: i64 = 4;
    /// The business account's rate.
    pub const ACCOUNT_RATE: i64 = 80007;
    /// The number's throughput.
    pub const THROUGHPUT: i64 = 130_429;
    /// Too many messages to one person.
    pub const PAIR_RATE: i64 = 131_056;
    /// Spam rate limit.
    pub const SPAM_RATE: i64 = 131_048;
    /// A group's rate.
    pub const GROUP_RATE: i64 = 131_208;
    /// The access token expired or was revoked.
    pub const TOKEN: i64 = 190;
    /// The group does not exist or the number is not in it.
    pub const GROUP_UNKNOWN: i64 = 131_041;
    /// The group is suspended.
    pub const GROUP_SUSPENDED: i64 = 131_207;
    /// The person blocked the number, or cannot be reached on WhatsApp.
    pub const UNDELIVERABLE: i64 = 131_026;
    /// Over 24 hours since the person last wrote: free text is refused.
    pub const WINDOW_CLOSED: i64 = 131_047;
}

/// What a Graph API failure means for the part being sent.
fn send_error(f: Failure) -> SendError {
    f.send_error(|e| {
        let why = e.to_string();
        match e.code {
            Some(
                code::APP_RATE
                | code::ACCOUNT_RATE
                | code::THROUGHPUT
                | code::PAIR_RATE
                | code::SPAM_RATE
                | code::GROUP_RATE,
            ) => SendError::RetryAfter(THROTTLED_WAIT),
            _ if e.status == 429 => SendError::RetryAfter(THROTTLED_WAIT),
            // No chat is to blame; sent again once a host with a good
            // token runs.
            Some(code::TOKEN) => SendError::Transient(why),
            _ if e.status == 401 => SendError::Transient(why),
            Some(code::GROUP_UNKNOWN | code::GROUP_SUSPENDED | code::UNDELIVERABLE) => {
                SendError::Gone(why)
            }
            Some(code::WINDOW_CLOSED) => SendError::Rejected(format!(
                "{why} (WhatsApp takes free text only within 24 hours of the person's last message)"
            )),
            // Meta's own trouble: the message was not taken.
            _ if e.status >= 500 => SendError::Transient(why),
            _ => SendError::Rejected(why),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(status: u16, code: Option<i64>) -> Failure {
        Failure::Api(ApiError {
            status,
            code,
            message: "m".into(),
            retry_after: None,
        })
    }

    #[test]
    fn graph_api_errors_decide_what_happens_to_a_part() {
        assert_eq!(
            send_error(api(400, Some(code::THROUGHPUT))),
            SendError::RetryAfter(THROTTLED_WAIT)
        );
        assert_eq!(
            send_error(api(429, None)),
            SendError::RetryAfter(THROTTLED_WAIT)
        );
        assert!(matches!(
            send_error(api(400, Some(code::GROUP_UNKNOWN))),
            SendError::Gone(_)
        ));
        assert!(matches!(
            send_error(api(401, Some(code::TOKEN))),
            SendError::Transient(_)
        ));
        assert!(matches!(
            send_error(api(400, Some(code::WINDOW_CLOSED))),
            SendError::Rejected(w) if w.contains("24 hours")
        ));
        assert!(matches!(
            send_error(api(503, None)),
            SendError::Transient(_)
        ));
        assert!(matches!(
            send_error(api(400, Some(100))),
            SendError::Rejected(_)
        ));
        assert!(matches!(
            send_error(Failure::Unanswered("timeout".into())),
            SendError::Uncertain(_)
        ));
        assert!(format!("{:?}", Secret("s3cret".into())).contains("redacted"));
    }

    #[test]
    fn settings_name_a_number_and_a_version() {
        let good = WhatsAppSettings {
            phone_number_id: "106540352242922".into(),
            ..Default::default()
        };
        assert!(check(&good).is_ok());
        for bad in [
            WhatsAppSettings {
                phone_number_id: String::new(),
                ..good.clone()
            },
            WhatsAppSettings {
                phone_number_id: "12a".into(),
                ..good.clone()
            },
            WhatsAppSettings {
                api_version: "23".into(),
                ..good.clone()
            },
            WhatsAppSettings {
                api_version: "v23.".into(),
                ..good.clone()
            },
            WhatsAppSettings {
                graph_url: "ftp://x".into(),
                ..good.clone()
            },
        ] {
            assert!(check(&bad).is_err(), "{bad:?}");
        }
    }
}
