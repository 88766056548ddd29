//! The `anthropic` provider: forwards to the Anthropic Messages API (or any
//! server speaking it, at `gateway.upstream_url`) with the host's
//! credential, and streams the answer back as it arrives.
//!
//! Invariants: the caller's own credential headers are never forwarded (the
//! gateway strips them); the host's credential is added here and nowhere
//! else; error bodies from upstream are scrubbed of the credential before
//! they are relayed.

use std::time::Duration;

use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use futures_util::TryStreamExt;

use super::credentials::Credential;
use futures_util::future::BoxFuture;

use super::provider::{ModelRequest, Provider, Reply};

/// Largest upstream error body relayed (error bodies are read whole).
const MAX_ERROR_BODY: usize = 1 << 20;

pub struct Anthropic {
    client: reqwest::Client,
    base: String,
    credential: Credential,
}

impl Anthropic {
    pub fn new(base: &str, credential: Credential) -> crate::Result<Self> {
        // reqwest is built without a bundled crypto provider; install ring's
        // once per process (a second install is refused, which is fine).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            // Between two chunks of a stream, not for the whole answer.
            .read_timeout(Duration::from_secs(600))
            .tcp_nodelay(true)
            .build()
            .map_err(|e| crate::Error::Config(format!("gateway HTTP client: {e}")))?;
        Ok(Anthropic {
            client,
            base: base.trim_end_matches('/').to_string(),
            credential,
        })
    }

    async fn forward(&self, req: ModelRequest) -> Reply {
        let url = format!("{}{}", self.base, req.path_and_query);
        let mut headers = req.headers;
        self.credential.apply(&mut headers);
        let sent = self
            .client
            .post(&url)
            .headers(headers)
            .body(req.body)
            .send()
            .await;
        let resp = match sent {
            Ok(r) => r,
            Err(e) => {
                let msg = self.credential.scrub(&format!(
                    "g2 gateway: upstream {} unreachable: {e}",
                    self.base
                ));
                tracing::warn!(error = %msg, "upstream request failed");
                return Reply::error(StatusCode::BAD_GATEWAY, "api_error", msg);
            }
        };
        let status = resp.status();
        let headers = relay_headers(resp.headers());
        if status.is_success() {
            let body = resp.bytes_stream().map_err(std::io::Error::other);
            return Reply {
                status,
                headers,
                body: Box::pin(body),
            };
        }
        // Errors are small; read them whole so the credential can be scrubbed
        // and a non-Anthropic body (a proxy's HTML page) wrapped.
        let body = read_limited(resp).await;
        let text = self.credential.scrub(&String::from_utf8_lossy(&body));
        let is_anthropic = serde_json::from_str::<serde_json::Value>(&text)
            .map(|v| v["type"] == "error" && v["error"]["type"].is_string())
            .unwrap_or(false);
        let mut reply = if is_anthropic {
            Reply::full(status, "application/json", text)
        } else {
            let kind = match status.as_u16() {
                400 => "invalid_request_error",
                401 => "authentication_error",
                403 => "permission_error",
                404 => "not_found_error",
                413 => "request_too_large",
                429 => "rate_limit_error",
                529 => "overloaded_error",
                _ => "api_error",
            };
            let snippet: String = text.chars().take(500).collect();
            Reply::error(
                status,
                kind,
                format!("upstream answered {status}: {snippet}"),
            )
        };
        for (k, v) in &headers {
            if k != header::CONTENT_TYPE {
                reply.headers.insert(k.clone(), v.clone());
            }
        }
        reply
    }
}

async fn read_limited(mut resp: reqwest::Response) -> Vec<u8> {
    let mut out = Vec::new();
    while let Ok(Some(chunk)) = resp.chunk().await {
        let room = MAX_ERROR_BODY.saturating_sub(out.len());
        out.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if room <= chunk.len() {
            break;
        }
    }
    out
}

/// Upstream headers worth passing on: content type, request id, rate-limit
/// and retry advice. Hop-by-hop and length headers are not (the body is
/// re-chunked).
fn relay_headers(from: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::new();
    for (k, v) in from {
        let n = k.as_str();
        if n == "content-type"
            || n == "request-id"
            || n == "retry-after"
            || n == "x-should-retry"
            || n.starts_with("anthropic-")
        {
            out.append(k.clone(), v.clone());
        }
    }
    out
}

impl Provider for Anthropic {
    fn name(&self) -> &'static str {
        "anthropic"
    }

    fn messages(&self, req: ModelRequest) -> BoxFuture<'_, Reply> {
        Box::pin(self.forward(req))
    }

    fn count_tokens(&self, req: ModelRequest) -> BoxFuture<'_, Reply> {
        Box::pin(self.forward(req))
    }
}

/// Headers of a caller's request that may go upstream: everything except
/// credentials, cookies, hop-by-hop headers, the length (recomputed) and
/// `accept-encoding` (so the answer arrives uncompressed and can be metered).
pub fn forwardable(from: &HeaderMap) -> HeaderMap {
    const DROP: &[&str] = &[
        "host",
        "content-length",
        "connection",
        "keep-alive",
        "transfer-encoding",
        "te",
        "trailer",
        "upgrade",
        "proxy-authorization",
        "proxy-connection",
        "authorization",
        "x-api-key",
        "cookie",
        "accept-encoding",
    ];
    let mut out = HeaderMap::new();
    for (k, v) in from {
        if !DROP.contains(&k.as_str()) {
            out.append(k.clone(), v.clone());
        }
    }
    if !out.contains_key(header::CONTENT_TYPE) {
        out.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
    }
    if !out.contains_key("anthropic-version") {
        out.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static("2023-06-01"),
        );
    }
    out
}
