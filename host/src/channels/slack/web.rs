//! The Web API: `auth.test`, `apps.connections.open` and
//! `chat.postMessage` as JSON POSTs with a token (`Authorization:
//! Bearer`). Every answer is checked for `ok` (Slack answers most errors
//! with HTTP 200); an error is returned by name, never with the token.

use std::fmt;
use std::time::Duration;

use serde_json::{Value, json};

use super::{APP_TOKEN, BOT_TOKEN, Secret};
use crate::config::SlackSettings;
use crate::{Error, Result};

/// How long one Web API request may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(17);

/// Errors that blame the token, not the chat.
pub(super) const TOKEN_ERRORS: &[&str] = &[
    "invalid_auth",
    "not_authed",
    "account_inactive",
    "token_revoked",
    "token_expired",
    "no_permission",
    "missing_scope",
    "not_allowed_token_type",
    "team_access_not_granted",
];

/// The bot as `auth.test` describes it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Identity {
    pub team_id: String,
    /// The bot user's id (`U…`): mentions name it.
    pub user_id: String,
    /// The bot's name.
    pub user: String,
    pub bot_id: String,
}

/// Why a request failed.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Failure {
    /// Slack answered with `ok: false` (or an HTTP error).
    Api {
        status: u16,
        error: String,
        retry_after: Option<Duration>,
    },
    /// The request never left (no connection).
    NotSent(String),
    /// It may have arrived; its answer did not.
    Unanswered(String),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Api { status, error, .. } => write!(f, "HTTP {status}: {error}"),
            Failure::NotSent(e) | Failure::Unanswered(e) => f.write_str(e),
        }
    }
}

/// A Web API client for the settings' server.
pub struct WebApi {
    http: reqwest::Client,
    url: String,
}

impl WebApi {
    pub fn new(settings: &SlackSettings) -> Result<WebApi> {
        super::check(settings)?;
        // reqwest and the WebSocket's TLS are built without a bundled
        // crypto provider: ring's, once per process.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .build()
            .map_err(|e| Error::Config(format!("the Slack client: {e}")))?;
        Ok(WebApi {
            http,
            url: settings.api_url.trim_end_matches('/').to_string(),
        })
    }

    /// Calls a method with a token and a JSON body; the answer when `ok`.
    pub(super) async fn call(
        &self,
        method: &str,
        token: &Secret,
        body: &Value,
    ) -> std::result::Result<Value, Failure> {
        let token = token.expose();
        let clean = |e: reqwest::Error| e.without_url().to_string().replace(token, "[redacted]");
        let resp = self
            .http
            .post(format!("{}/{method}", self.url))
            .bearer_auth(token)
            .header("content-type", "application/json; charset=utf-8")
            .body(body.to_string())
            .send()
            .await
            .map_err(|e| {
                if e.is_connect() || e.is_builder() {
                    Failure::NotSent(clean(e))
                } else {
                    Failure::Unanswered(clean(e))
                }
            })?;
        let status = resp.status().as_u16();
        let retry_after = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| Failure::Unanswered(clean(e)))?;
        let v: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        if v["ok"] == true && (200..300).contains(&status) {
            return Ok(v);
        }
        let error = match v["error"].as_str() {
            Some(e) => e
                .chars()
                .take(100)
                .collect::<String>()
                .replace(token, "[redacted]"),
            None if status == 429 => "ratelimited".into(),
            None if (200..300).contains(&status) => {
                return Err(Failure::Unanswered(
                    "the Web API answered with something that is not its JSON".into(),
                ));
            }
            None => "no error named".into(),
        };
        Err(Failure::Api {
            status,
            error,
            retry_after,
        })
    }

    /// `auth.test` with the bot token: who the bot is.
    pub async fn identify(&self, token: &Secret) -> std::result::Result<Identity, String> {
        let v = self
            .call("auth.test", token, &json!({}))
            .await
            .map_err(|f| refused(f, BOT_TOKEN))?;
        let s = |k: &str| v[k].as_str().unwrap_or_default().to_string();
        Ok(Identity {
            team_id: s("team_id"),
            user_id: s("user_id"),
            user: s("user"),
            bot_id: s("bot_id"),
        })
    }

    /// `apps.connections.open` with the app token: a Socket Mode URL.
    pub async fn open(&self, token: &Secret) -> std::result::Result<String, String> {
        let v = self
            .call("apps.connections.open", token, &json!({}))
            .await
            .map_err(|f| refused(f, APP_TOKEN))?;
        v["url"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| "apps.connections.open answered no url".into())
    }
}

/// A failure of a call made with the token from `variable`, in words.
pub(super) fn refused(f: Failure, variable: &str) -> String {
    match f {
        Failure::Api { error, .. } if TOKEN_ERRORS.contains(&error.as_str()) => {
            format!("Slack refused the token ({error}); check {variable}")
        }
        f => f.to_string(),
    }
}
