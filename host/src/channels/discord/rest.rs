//! Discord's REST API, through reqwest: the few calls g2 makes (create a
//! message, typing, who the bot is) and what each answer means.
//!
//! Not twilight-http: the outbox already waits out what a channel says to
//! wait (`SendError::RetryAfter`), for every platform alike, and a send
//! must answer at once so that a part is never sent twice; twilight-http
//! retries 429s inside its own request future and brings a second HTTP
//! client (with h2). Discord's documented rules are kept here instead: a
//! 429's `retry_after` (body) or `Retry-After` (header), the bucket
//! headers (`X-RateLimit-Remaining`, `X-RateLimit-Reset-After`), and no
//! retry of a 401 or 403 (too many earn the address a ban).

use std::time::Duration;

use serde_json::{Value, json};

use super::Secret;
use crate::channels::{SendError, rest};
use crate::config::DiscordSettings;
use crate::{Error, Result};

/// How long one REST request may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);
/// The wait when a 429 names none.
const DEFAULT_RETRY: Duration = Duration::from_secs(1);

/// Discord's JSON error codes that mean the bot lost the channel.
mod code {
    pub const UNKNOWN_CHANNEL: i64 = 10_003;
    pub const MISSING_ACCESS: i64 = 50_001;
    pub const MISSING_PERMISSIONS: i64 = 50_013;
}

pub use crate::channels::rest::ApiError;

/// Discord's reading of an error answer (`{code, message, retry_after}`):
/// a 429's wait is the longer of its body's `retry_after` and its
/// `Retry-After` header.
fn api_error(a: rest::Answer) -> ApiError {
    let retry_body = a.json["retry_after"]
        .as_f64()
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(Duration::from_secs_f64);
    ApiError {
        retry_after: retry_body.max(a.seconds("retry-after")),
        ..ApiError::read(a.status, &a.json)
    }
}

/// Why a request failed.
pub type Failure = rest::Failure<ApiError>;

/// A message Discord took.
#[derive(Debug)]
pub struct Sent {
    pub id: String,
    /// The channel's bucket is spent: no send before this long.
    pub bucket_spent_for: Option<Duration>,
}

/// The bot as Discord describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Me {
    pub id: String,
    pub username: String,
}

/// A REST client for the settings' API, with the bot token.
pub struct Rest {
    http: rest::Client,
    api_url: String,
    token: Secret,
}

impl Rest {
    pub fn new(settings: &DiscordSettings, token: Secret) -> Result<Rest> {
        check(settings)?;
        let agent = concat!(
            "DiscordBot (https://example.invalid/g2, ",
            env!("CARGO_PKG_VERSION"),
            ")"
        );
        // Discord's scheme for a bot's token is `Bot`, not `Bearer`.
        let http = rest::Client::new("Discord", REQUEST_TIMEOUT, "Bot", Some(agent))?;
        Ok(Rest {
            http,
            api_url: settings.api_url.trim_end_matches('/').to_string(),
            token,
        })
    }

    /// Who the bot is (checks the token).
    pub async fn me(&self) -> std::result::Result<Me, Failure> {
        let (v, _) = self
            .request(self.http.get(&format!("{}/users/@me", self.api_url)))
            .await?;
        Ok(Me {
            id: v["id"].as_str().unwrap_or_default().into(),
            username: v["username"].as_str().unwrap_or_default().into(),
        })
    }

    /// The application's flags (whether the Message Content intent is on).
    pub async fn application_flags(&self) -> std::result::Result<u64, Failure> {
        let (v, _) = self
            .request(self.http.get(&format!("{}/applications/@me", self.api_url)))
            .await?;
        Ok(v["flags"].as_u64().unwrap_or(0))
    }

    /// Posts one message; its id, and whether the bucket is spent.
    pub async fn create_message(
        &self,
        channel: u64,
        content: &str,
        reply_to: Option<u64>,
    ) -> std::result::Result<Sent, Failure> {
        // The agent's text pings nobody (no @everyone, no roles, no one).
        let mut body = json!({ "content": content, "allowed_mentions": { "parse": [] } });
        if let Some(id) = reply_to {
            body["message_reference"] =
                json!({ "message_id": id.to_string(), "fail_if_not_exists": false });
        }
        let url = format!("{}/channels/{channel}/messages", self.api_url);
        let (v, spent) = self.request(self.http.post(&url).json(&body)).await?;
        let id = v["id"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| Failure::Unanswered("Discord's answer names no message id".into()))?;
        Ok(Sent {
            id,
            bucket_spent_for: spent,
        })
    }

    /// Shows "g2 is typing…" in the channel (for 10 s).
    pub async fn typing(&self, channel: u64) -> std::result::Result<(), Failure> {
        let url = format!("{}/channels/{channel}/typing", self.api_url);
        self.request(self.http.post(&url)).await.map(|_| ())
    }

    /// One request with the token: the answer's JSON (Null for 204) and
    /// how long the bucket is spent for, or why not.
    async fn request(
        &self,
        req: reqwest::RequestBuilder,
    ) -> std::result::Result<(Value, Option<Duration>), Failure> {
        let answer = self
            .http
            .send(req, &self.token)
            .await
            .map_err(|f| f.map_api(api_error))?;
        let spent = match answer.seconds("x-ratelimit-remaining") {
            Some(left) if left.is_zero() => answer.seconds("x-ratelimit-reset-after"),
            _ => None,
        };
        Ok((answer.json, spent))
    }
}

/// Checks the settings a running channel needs.
pub fn check(settings: &DiscordSettings) -> Result<()> {
    for (name, value, schemes) in [
        ("api_url", &settings.api_url, ["http", "https"]),
        ("gateway_url", &settings.gateway_url, ["ws", "wss"]),
    ] {
        let url = url::Url::parse(value)
            .map_err(|e| Error::Config(format!("channels.discord.{name}: {e}")))?;
        if !schemes.contains(&url.scheme()) {
            return Err(Error::Config(format!(
                "channels.discord.{name}: use {} or {}",
                schemes[0], schemes[1]
            )));
        }
    }
    Ok(())
}

/// What a REST failure means for the part being sent.
pub fn send_error(f: Failure) -> SendError {
    f.send_error(|e| {
        let why = e.to_string();
        match (e.status, e.code) {
            // Not processed: sent again after the wait Discord names.
            (429, _) => SendError::RetryAfter(e.retry_after.unwrap_or(DEFAULT_RETRY)),
            (
                403 | 404,
                Some(code::UNKNOWN_CHANNEL | code::MISSING_ACCESS | code::MISSING_PERMISSIONS),
            ) => SendError::Gone(why),
            // The token: no chat is to blame; sent again once a host
            // with a good token runs.
            (401, _) => SendError::Transient(why),
            (s, _) if s >= 500 => SendError::Transient(why),
            _ => SendError::Rejected(why),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(status: u16, code: Option<i64>, retry: Option<f64>) -> Failure {
        Failure::Api(ApiError {
            status,
            code,
            message: "m".into(),
            retry_after: retry.map(Duration::from_secs_f64),
        })
    }

    #[test]
    fn rest_errors_decide_what_happens_to_a_part() {
        assert_eq!(
            send_error(api(429, None, Some(2.5))),
            SendError::RetryAfter(Duration::from_millis(2500))
        );
        assert_eq!(
            send_error(api(429, None, None)),
            SendError::RetryAfter(DEFAULT_RETRY)
        );
        for (status, c) in [
            (404, code::UNKNOWN_CHANNEL),
            (403, code::MISSING_ACCESS),
            (403, code::MISSING_PERMISSIONS),
        ] {
            assert!(matches!(
                send_error(api(status, Some(c), None)),
                SendError::Gone(_)
            ));
        }
        assert!(matches!(
            send_error(api(401, Some(0), None)),
            SendError::Transient(_)
        ));
        assert!(matches!(
            send_error(api(502, None, None)),
            SendError::Transient(_)
        ));
        assert!(matches!(
            send_error(api(400, Some(50_035), None)),
            SendError::Rejected(_)
        ));
        assert!(matches!(
            send_error(Failure::Unanswered("timeout".into())),
            SendError::Uncertain(_)
        ));
        let token = Secret("MTEx.secret".into());
        assert_eq!(format!("{token:?}"), "Secret(redacted)");
        assert_eq!(
            token.redact("Bot MTEx.secret refused"),
            "Bot [redacted] refused"
        );
    }

    #[test]
    fn settings_name_http_and_websocket_addresses() {
        let good = DiscordSettings::default();
        assert!(check(&good).is_ok());
        for bad in [
            DiscordSettings {
                api_url: "ftp://x".into(),
                ..good.clone()
            },
            DiscordSettings {
                gateway_url: "https://gateway.discord.gg".into(),
                ..good.clone()
            },
            DiscordSettings {
                api_url: "not a url".into(),
                ..good.clone()
            },
        ] {
            assert!(check(&bad).is_err(), "{bad:?}");
        }
    }
}
