//! `g2 chat`'s calls to a running `g2 serve`: the group, its chat's
//! stream, posting a line. A host that does not answer (stopped,
//! restarting, still starting) is told apart from one that refuses, and
//! every refusal says what to do.

use reqwest::{Method, RequestBuilder, Response, StatusCode};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::groups::Group;

/// `GET /api/groups/{folder}`.
#[derive(Deserialize)]
pub struct GroupInfo {
    pub group: Group,
    /// The chat's latest message when the chat started (0: none).
    pub last_seq: i64,
}

/// Why a call failed.
#[derive(Debug)]
pub enum Failure {
    /// No answer, or the host is stopping or starting: try again later.
    Down,
    /// The host answered no; what to tell the user.
    Refused(String),
}

pub struct Link {
    client: reqwest::Client,
    /// `http://127.0.0.1:4170`.
    url: String,
    folder: String,
    token: Option<String>,
}

impl Link {
    pub fn new(url: &str, folder: &str, token: Option<String>) -> Link {
        Link {
            client: reqwest::Client::new(),
            url: url.trim_end_matches('/').to_string(),
            folder: folder.to_string(),
            token,
        }
    }

    /// What to say when the host does not answer at all.
    pub fn not_running(&self) -> String {
        format!(
            "g2 serve is not running at {} (start it with scripts/run.sh or g2 serve)",
            self.url
        )
    }

    fn request(&self, method: Method, tail: &str) -> RequestBuilder {
        let r = self.client.request(
            method,
            format!("{}/api/groups/{}{tail}", self.url, self.folder),
        );
        match &self.token {
            Some(t) => r.bearer_auth(t),
            None => r,
        }
    }

    /// A response that is a success, or why not.
    async fn checked(&self, sent: reqwest::Result<Response>) -> Result<Response, Failure> {
        let resp = sent.map_err(|_| Failure::Down)?;
        let status = resp.status();
        if status.is_success() {
            return Ok(resp);
        }
        if status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS {
            return Err(Failure::Down);
        }
        let body: Value = resp.json().await.unwrap_or(Value::Null);
        Err(Failure::Refused(self.refusal(status, &body)))
    }

    fn refusal(&self, status: StatusCode, body: &Value) -> String {
        match status {
            StatusCode::NOT_FOUND => {
                format!("no group {:?} (g2 groups list shows them)", self.folder)
            }
            StatusCode::UNAUTHORIZED => match self.token {
                None => "the host wants an API token: set api.token in g2.toml (or G2_API__TOKEN) to the host's".into(),
                Some(_) => "the host refused the API token: api.token (or G2_API__TOKEN) is not the host's".into(),
            },
            _ => body["error"]["message"]
                .as_str()
                .map_or_else(|| format!("the host answered {status}"), str::to_string),
        }
    }

    /// The group and its chat's latest `seq`.
    pub async fn group(&self) -> Result<GroupInfo, Failure> {
        let resp = self
            .checked(self.request(Method::GET, "").send().await)
            .await?;
        resp.json().await.map_err(|_| Failure::Down)
    }

    /// The chat's messages after `seq` `last`, then live ones.
    pub async fn stream(&self, last: i64) -> Result<Response, Failure> {
        let r = self
            .request(Method::GET, "/stream")
            .header("last-event-id", last.to_string());
        self.checked(r.send().await).await
    }

    /// Posts a line; `key` names it, so a retry after a lost answer
    /// stores it once.
    pub async fn post(&self, sender: &str, text: &str, key: &str) -> Result<(), Failure> {
        let r = self
            .request(Method::POST, "/messages")
            .header("idempotency-key", key)
            .json(&json!({ "sender": sender, "text": text }));
        self.checked(r.send().await).await.map(drop)
    }
}
