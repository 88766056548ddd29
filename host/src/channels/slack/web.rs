//! The Web API: `auth.test`, `apps.connections.open` and
//! `chat.postMessage` as JSON POSTs with a token (`Authorization:
//! Bearer`). Every answer is checked for `ok` (Slack answers most errors
//! with HTTP 200); an error is returned by name, never with the token.
//! The same client fetches files (`files`: a GET of a file's private URL
//! with the bot token).

use std::fmt;
use std::time::Duration;

use serde_json::{Value, json};

use super::{APP_TOKEN, BOT_TOKEN, Secret};
use crate::Result;
use crate::channels::rest;
use crate::config::SlackSettings;

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

/// A Web API error: Slack answered `ok: false` (most errors come with
/// HTTP 200) or an error status; the error's name, never with the token.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct ApiError {
    pub status: u16,
    pub error: String,
    /// A rate limit's `Retry-After`.
    pub retry_after: Option<Duration>,
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HTTP {}: {}", self.status, self.error)
    }
}

/// Why a request failed.
pub(super) type Failure = rest::Failure<ApiError>;

/// Slack's reading of an answer that is not `ok`.
fn refusal(a: rest::Answer) -> Failure {
    let error = match a.json["error"].as_str() {
        Some(e) => e.chars().take(100).collect(),
        None if a.status == 429 => "ratelimited".into(),
        None if a.success() => {
            return Failure::Unanswered(
                "the Web API answered with something that is not its JSON".into(),
            );
        }
        None => "no error named".into(),
    };
    Failure::Api(ApiError {
        status: a.status,
        error,
        retry_after: a.seconds("retry-after"),
    })
}

/// A Web API client for the settings' server.
pub struct WebApi {
    http: rest::Client,
    url: String,
}

impl WebApi {
    pub fn new(settings: &SlackSettings) -> Result<WebApi> {
        super::check(settings)?;
        // Installs ring's crypto provider, which the WebSocket's TLS uses too.
        let http = rest::Client::new("Slack", REQUEST_TIMEOUT, "Bearer", None)?;
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
        let req = self
            .http
            .post(&format!("{}/{method}", self.url))
            .header("content-type", "application/json; charset=utf-8")
            .body(body.to_string());
        match self.http.send(req, token).await {
            Ok(a) if a.json["ok"] == true => Ok(a.json),
            Ok(a) | Err(rest::Failure::Api(a)) => Err(refusal(a)),
            Err(rest::Failure::NotSent(e)) => Err(Failure::NotSent(e)),
            Err(rest::Failure::Unanswered(e)) => Err(Failure::Unanswered(e)),
        }
    }

    /// A GET of `url` on the Web API's client (a file's download; the
    /// caller adds the token, and the timeout a file needs).
    pub(super) fn get(&self, url: &str) -> reqwest::RequestBuilder {
        self.http.get(url)
    }

    /// The Web API's URL (`channels.slack.api_url`).
    pub(super) fn url(&self) -> &str {
        &self.url
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
        Failure::Api(e) if TOKEN_ERRORS.contains(&e.error.as_str()) => {
            format!("Slack refused the token ({}); check {variable}", e.error)
        }
        f => f.to_string(),
    }
}
