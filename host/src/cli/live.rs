//! Commands that change a live group (clear, resume, remove, forget) and
//! the running host. While `g2 serve` runs, such a change goes through it
//! (its HTTP API), which holds the group first: the group's warm agent
//! finishes its turn, the change is made, and only then may the group run
//! again. A change made behind the host's back would archive a session its
//! agent still writes to, and leave the host's caches stale. With no host
//! running, the command takes the home's lock itself for the change — so
//! no host starts meanwhile — and first settles what a killed clear left
//! (`host::reconcile_archives`). Any other holder of the lock (`g2 run`)
//! is refused with its name.

use anyhow::{Context, Result, anyhow};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::Ctx;
use crate::lock::HostLock;
use crate::store::Store;

/// Where a change goes.
pub(super) enum Route {
    /// No host runs agents: made here, under the home's lock (or beside
    /// a `g2 gateway`, which runs none).
    Here(Option<HostLock>),
    /// Through the running `g2 serve`.
    Host(HostApi),
}

/// Finds the way for `command` (the lock's name for this process).
pub(super) async fn route(ctx: &Ctx, store: &Store, command: &str) -> Result<Route> {
    match HostLock::acquire(&ctx.home, command) {
        Ok(lock) => {
            crate::host::reconcile_archives(&ctx.home, store).await?;
            Ok(Route::Here(Some(lock)))
        }
        Err(crate::Error::Conflict(why)) => match HostLock::holder(&ctx.home) {
            Some(h) if h.command == "gateway" => Ok(Route::Here(None)),
            Some(h) if h.command == "serve" && h.api.is_some() => Ok(Route::Host(HostApi {
                base: h.api.unwrap_or_default(),
                token: ctx.settings.api.token.clone(),
                client: reqwest::Client::new(),
            })),
            _ => Err(anyhow!("{why}; nothing was changed")),
        },
        Err(e) => Err(e.into()),
    }
}

/// The running `g2 serve`'s API when one holds the home: a read may ask
/// it rather than load here what it holds loaded (`g2 memory search`: the
/// embedding model).
pub(super) fn running_host(ctx: &Ctx) -> Option<HostApi> {
    let h = HostLock::holder(&ctx.home).filter(|h| h.command == "serve")?;
    Some(HostApi {
        base: h.api?,
        token: ctx.settings.api.token.clone(),
        client: reqwest::Client::new(),
    })
}

/// The running host's API, with the home's token when it has one.
pub(super) struct HostApi {
    base: String,
    token: Option<String>,
    client: reqwest::Client,
}

impl HostApi {
    /// `method path` with a JSON body (or none); the answer, or the API's
    /// own error message.
    pub(super) async fn call<T: DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<T> {
        let url = format!("{}{path}", self.base);
        let mut req = self.client.request(method, &url);
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req
            .send()
            .await
            .with_context(|| format!("asking the running g2 serve at {}", self.base))?;
        let status = resp.status();
        let bytes = resp
            .bytes()
            .await
            .with_context(|| format!("reading the running host's answer to {path}"))?;
        // 204 and the like: no body.
        let v: Value = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)
                .with_context(|| format!("the running host's answer to {path}"))?
        };
        if !status.is_success() {
            let why = v["error"]["message"].as_str().unwrap_or("no reason given");
            return Err(anyhow!("the running host refused: {why}"));
        }
        serde_json::from_value(v).with_context(|| format!("the running host's answer to {path}"))
    }
}

/// `s` as one path segment of a URL, percent-encoded where it must be.
pub(super) fn segment(s: &str) -> String {
    let mut u = url::Url::parse("http://host/").expect("a fixed URL parses");
    if let Ok(mut p) = u.path_segments_mut() {
        p.clear().push(s);
    }
    u.path().trim_start_matches('/').to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_segment_stays_one() {
        assert_eq!(super::segment("sess-a"), "sess-a");
        assert_eq!(super::segment("a/b?c#d e%"), "a%2Fb%3Fc%23d%20e%25");
    }
}
