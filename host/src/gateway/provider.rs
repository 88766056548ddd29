//! The provider boundary: what the gateway hands a provider and what it gets
//! back. Providers answer everything, errors included, as a [`Reply`] in the
//! Anthropic wire format, so the gateway can meter and relay any answer the
//! same way.

use std::pin::Pin;

use futures_util::future::BoxFuture;

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use bytes::Bytes;
use futures_util::Stream;
use serde_json::json;

/// A response body, relayed chunk by chunk as the provider produces it.
pub type ByteStream = Pin<Box<dyn Stream<Item = Result<Bytes, std::io::Error>> + Send>>;

/// A request, checked by the gateway (valid JSON, size, limits).
#[derive(Debug, Clone)]
pub struct ModelRequest {
    /// Path and query as received, e.g. `/v1/messages?beta=true`.
    pub path_and_query: String,
    /// The caller's headers, credentials and hop-by-hop headers removed.
    pub headers: HeaderMap,
    /// The JSON body (with the model replaced when the gateway pins one).
    pub body: Bytes,
    /// The model the request is for.
    pub model: String,
    pub stream: bool,
}

pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: ByteStream,
}

impl Reply {
    /// A complete body sent in one piece.
    pub fn full(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Self {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        let body: Bytes = body.into();
        Reply {
            status,
            headers,
            body: Box::pin(futures_util::stream::iter([Ok(body)])),
        }
    }

    /// An error in the Anthropic shape:
    /// `{"type":"error","error":{"type":kind,"message":message}}`.
    pub fn error(status: StatusCode, kind: &str, message: impl Into<String>) -> Self {
        let body = json!({ "type": "error", "error": { "type": kind, "message": message.into() } });
        Reply::full(status, "application/json", body.to_string())
    }

    pub fn with_header(mut self, name: &'static str, value: &str) -> Self {
        if let Ok(v) = HeaderValue::from_str(value) {
            self.headers.insert(name, v);
        }
        self
    }
}

/// A model provider. Implementations must stream: return as soon as the
/// status is known and yield body bytes as they arrive.
pub trait Provider: Send + Sync + 'static {
    /// `anthropic` or `offline`; recorded with each request.
    fn name(&self) -> &'static str;
    /// `POST /v1/messages`.
    fn messages(&self, req: ModelRequest) -> BoxFuture<'_, Reply>;
    /// `POST /v1/messages/count_tokens`.
    fn count_tokens(&self, req: ModelRequest) -> BoxFuture<'_, Reply>;
}
