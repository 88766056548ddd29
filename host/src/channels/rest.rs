//! One request to a platform's REST API (WhatsApp's Graph API, Discord's
//! REST API, Slack's Web API), for every channel alike: a request and the
//! token in; the status, headers and JSON out, or a [`Failure`] that says
//! how far the request got. What an answer means (retry, wait, give up)
//! is each platform's own table; what a failure means for the outbox
//! before that table is here ([`Failure::send_error`]).
//!
//! The token goes only into the `Authorization` header, marked sensitive,
//! and is cut from every error's text and every answer's JSON (a server
//! may echo it), so no error or log line carries it. Telegram is not
//! here: `teloxide-core` makes its requests, with its own client.

use std::fmt;
use std::time::Duration;

use reqwest::RequestBuilder;
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use serde_json::Value;

use super::{Secret, SendError};
use crate::{Error, Result};

/// Why a request failed: `E` is the platform's reading of an error answer
/// (the client itself gives the whole [`Answer`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Failure<E> {
    /// The platform answered with an error.
    Api(E),
    /// The request never left (no connection): safe to send again.
    NotSent(String),
    /// It may have arrived; its answer did not (a timeout, a cut answer).
    Unanswered(String),
}

impl<E> Failure<E> {
    /// The same failure with the platform's reading of the answer.
    pub fn map_api<F>(self, f: impl FnOnce(E) -> F) -> Failure<F> {
        match self {
            Failure::Api(e) => Failure::Api(f(e)),
            Failure::NotSent(e) => Failure::NotSent(e),
            Failure::Unanswered(e) => Failure::Unanswered(e),
        }
    }

    /// What the failure means for a part being sent: not sent, sent again
    /// after a backoff; unanswered, never sent again (it may be there);
    /// an error answer, whatever the platform's `table` says.
    pub fn send_error(self, table: impl FnOnce(E) -> SendError) -> SendError {
        match self {
            Failure::Api(e) => table(e),
            Failure::NotSent(e) => SendError::Transient(e),
            Failure::Unanswered(e) => SendError::Uncertain(e),
        }
    }
}

impl<E: fmt::Display> fmt::Display for Failure<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Api(e) => e.fmt(f),
            Failure::NotSent(e) | Failure::Unanswered(e) => f.write_str(e),
        }
    }
}

/// A platform's answer, the token cut from its JSON.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    /// The body as JSON; `Null` when it is none (a 204) or not JSON.
    pub json: Value,
}

impl Answer {
    /// Whether the status is a success (2xx).
    pub fn success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// A header that holds seconds (`Retry-After`, a rate-limit bucket's
    /// reset), when it is a finite, non-negative number.
    pub fn seconds(&self, name: &str) -> Option<Duration> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|v| v.is_finite() && *v >= 0.0)
            .map(Duration::from_secs_f64)
    }
}

/// An error answer in words, for the platforms whose errors carry a code
/// and a message (WhatsApp, Discord): never with the token (cut from the
/// answer before it is read).
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: u16,
    pub code: Option<i64>,
    /// At most 300 characters of the platform's message.
    pub message: String,
    /// The wait the platform asked for (a rate limit's).
    pub retry_after: Option<Duration>,
}

impl ApiError {
    /// The answer's status with the `code` and `message` of `error`, the
    /// object where the platform puts them; no wait.
    pub fn read(status: u16, error: &Value) -> ApiError {
        ApiError {
            status,
            code: error["code"].as_i64(),
            message: error["message"].as_str().map_or_else(
                || "no error message".to_string(),
                |m| m.chars().take(300).collect(),
            ),
            retry_after: None,
        }
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.code {
            Some(c) => write!(f, "HTTP {} (code {c}): {}", self.status, self.message),
            None => write!(f, "HTTP {}: {}", self.status, self.message),
        }
    }
}

/// An HTTP client for one platform's API: its timeout, its scheme in the
/// `Authorization` header (`Bearer`, Discord's `Bot`).
pub struct Client {
    http: reqwest::Client,
    scheme: &'static str,
}

impl Client {
    /// `platform` names it in a configuration error; `user_agent`, when a
    /// platform asks for its own.
    pub fn new(
        platform: &str,
        timeout: Duration,
        scheme: &'static str,
        user_agent: Option<&str>,
    ) -> Result<Client> {
        // reqwest is built without a bundled crypto provider (as the
        // gateway's client): ring's, once per process.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut builder = reqwest::Client::builder().timeout(timeout);
        if let Some(agent) = user_agent {
            builder = builder.user_agent(agent);
        }
        let http = builder
            .build()
            .map_err(|e| Error::Config(format!("the {platform} client: {e}")))?;
        Ok(Client { http, scheme })
    }

    pub fn get(&self, url: &str) -> RequestBuilder {
        self.http.get(url)
    }

    pub fn post(&self, url: &str) -> RequestBuilder {
        self.http.post(url)
    }

    /// Sends `req` with the token: a success answer, or why not (an answer
    /// with an error status is [`Failure::Api`]).
    pub async fn send(
        &self,
        req: RequestBuilder,
        token: &Secret,
    ) -> std::result::Result<Answer, Failure<Answer>> {
        let mut auth = HeaderValue::from_str(&format!("{} {}", self.scheme, token.expose()))
            .map_err(|_| {
                Failure::NotSent("the token holds a character no HTTP header can carry".into())
            })?;
        auth.set_sensitive(true);
        let clean = |e: reqwest::Error| token.redact(&e.without_url().to_string());
        let resp = req.header(AUTHORIZATION, auth).send().await.map_err(|e| {
            if e.is_connect() || e.is_builder() {
                Failure::NotSent(clean(e))
            } else {
                Failure::Unanswered(clean(e))
            }
        })?;
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = resp
            .bytes()
            .await
            .map_err(|e| Failure::Unanswered(clean(e)))?;
        let mut json: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        redact(&mut json, token);
        let answer = Answer {
            status,
            headers,
            json,
        };
        if answer.success() {
            Ok(answer)
        } else {
            Err(Failure::Api(answer))
        }
    }
}

/// Cuts the token from every string of an answer (keys included).
fn redact(v: &mut Value, token: &Secret) {
    match v {
        Value::String(s) if s.contains(token.expose()) => *s = token.redact(s),
        Value::Array(items) => items.iter_mut().for_each(|i| redact(i, token)),
        Value::Object(map) => {
            let keys: Vec<String> = map
                .keys()
                .filter(|k| k.contains(token.expose()))
                .cloned()
                .collect();
            for k in keys {
                if let Some(value) = map.remove(&k) {
                    map.insert(token.redact(&k), value);
                }
            }
            map.values_mut().for_each(|i| redact(i, token));
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests;
