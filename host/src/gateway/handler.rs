//! The HTTP side of the gateway: its routes ([`Gateway::router`]) and the
//! handler every model request goes through: read the body (bounded),
//! check it is JSON with a model (pinning `gateway.model` for `anthropic`),
//! take a concurrency slot and check the caller's daily budget, then hand
//! it to the provider and relay the answer through [`Metered`]. A refusal
//! is an Anthropic-shaped error, recorded like any request.

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use bytes::Bytes;
use serde::Deserialize;

use g2_core::trace::Stage;
use g2_core::validate::GroupFolder;

use super::metered::Metered;
use super::usage::{self, Outcome, Record, Tokens};
use super::{Gateway, ModelRequest, Reply, anthropic, meter};

impl Gateway {
    /// The HTTP routes, with every request accounted to `caller`.
    pub fn router(&self, caller: &str) -> Router {
        self.routes(Handler {
            gw: self.clone(),
            caller: Arc::from(caller),
            group: None,
        })
    }

    /// The routes of `group`'s socket: accounted to the group, and what
    /// the host attaches to its requests put in ([`super::Hooks::attach`]).
    pub(super) fn group_router(&self, group: &GroupFolder) -> Router {
        self.routes(Handler {
            gw: self.clone(),
            caller: Arc::from(group.as_str()),
            group: Some(group.clone()),
        })
    }

    fn routes(&self, state: Handler) -> Router {
        Router::new()
            .route("/v1/messages", post(messages))
            .route("/v1/messages/count_tokens", post(count_tokens))
            .method_not_allowed_fallback(method_not_allowed)
            .fallback(not_found)
            .with_state(state)
    }
}

#[derive(Clone)]
struct Handler {
    gw: Gateway,
    caller: Arc<str>,
    group: Option<GroupFolder>,
}

#[derive(Deserialize)]
struct Head {
    model: String,
    #[serde(default)]
    stream: bool,
}

async fn messages(State(h): State<Handler>, req: Request) -> Response {
    handle(h, req, false).await
}

async fn count_tokens(State(h): State<Handler>, req: Request) -> Response {
    handle(h, req, true).await
}

async fn not_found(req: Request) -> Response {
    relay_now(Reply::error(
        StatusCode::NOT_FOUND,
        "not_found_error",
        format!(
            "g2 gateway serves POST /v1/messages and /v1/messages/count_tokens, not {} {}",
            req.method(),
            req.uri().path()
        ),
    ))
}

async fn method_not_allowed(req: Request) -> Response {
    relay_now(
        Reply::error(
            StatusCode::METHOD_NOT_ALLOWED,
            "invalid_request_error",
            format!("{} takes POST, not {}", req.uri().path(), req.method()),
        )
        .with_header("allow", "POST"),
    )
}

/// Why a request body was not read.
enum BodyError {
    TooLarge,
    TimedOut,
    Broken,
}

/// Reads a request body of at most `max` bytes into one allocation of its
/// declared length (grown as it arrives only without one): a large body
/// costs one block of its size, handed on without a copy and freed as a
/// whole when the request is done.
async fn read_body(
    headers: &axum::http::HeaderMap,
    body: Body,
    max: usize,
) -> Result<Bytes, BodyError> {
    use axum::body::HttpBody;
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > max) {
        return Err(BodyError::TooLarge);
    }
    let mut buf = Vec::with_capacity(declared.unwrap_or(0));
    let mut body = std::pin::pin!(body);
    while let Some(frame) = std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
        let frame = frame.map_err(|e| {
            if crate::http::is_body_timeout(&e) {
                BodyError::TimedOut
            } else {
                BodyError::Broken
            }
        })?;
        if let Ok(data) = frame.into_data() {
            if buf.len() + data.len() > max {
                return Err(BodyError::TooLarge);
            }
            buf.extend_from_slice(&data);
        }
    }
    Ok(Bytes::from(buf))
}

async fn handle(h: Handler, req: Request, count_only: bool) -> Response {
    let started = Instant::now();
    if !count_only {
        crate::trace::stamp(Stage::ModelRequest, &h.caller, None);
    }
    let started_at = crate::now_rfc3339();
    let gw = &h.gw;
    let settings = &gw.inner.settings;
    let (parts, body) = req.into_parts();
    let path_and_query = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| parts.uri.path().into());
    let body = match read_body(&parts.headers, body, settings.max_request_bytes).await {
        Ok(b) => b,
        Err(BodyError::TooLarge) => {
            return relay_now(Reply::error(
                StatusCode::PAYLOAD_TOO_LARGE,
                "request_too_large",
                format!(
                    "request body is larger than {} bytes (gateway.max_request_bytes)",
                    settings.max_request_bytes
                ),
            ));
        }
        Err(BodyError::TimedOut) => {
            return relay_now(Reply::error(
                StatusCode::REQUEST_TIMEOUT,
                "invalid_request_error",
                format!(
                    "the request body was not complete within {} ms (gateway.body_timeout_ms)",
                    settings.body_timeout_ms
                ),
            ));
        }
        Err(BodyError::Broken) => {
            return relay_now(Reply::error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "the request body could not be read",
            ));
        }
    };
    let body = match (&gw.inner.attach, &h.group) {
        (Some(attach), Some(group)) => {
            let (body, attached) = attach(group.clone(), body).await;
            if attached.found > 0 && !count_only {
                let d = crate::trace::Detail {
                    late: Some(attached.late),
                    ..Default::default()
                };
                crate::trace::record(Stage::MemoryAttached, Some(group.as_str()), None, d);
            }
            body
        }
        _ => body,
    };
    let head: Head = match serde_json::from_slice(&body) {
        Ok(h) => h,
        Err(e) => {
            return relay_now(Reply::error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                format!("request body must be a JSON object with a string `model`: {e}"),
            ));
        }
    };
    let (model, body) = match &settings.model {
        Some(m) if *m != head.model && gw.provider_name() == "anthropic" => {
            match pin_model(&body, m) {
                Some(b) => (m.clone(), b),
                None => (m.clone(), body),
            }
        }
        Some(m) => (m.clone(), body),
        None => (head.model.clone(), body),
    };
    let stream = head.stream && !count_only;
    let mut rec = Record {
        caller: h.caller.to_string(),
        purpose: usage::Purpose::Agent,
        provider: gw.provider_name().to_string(),
        model: model.clone(),
        tokens: Tokens::default(),
        duration_ms: 0,
        status: 0,
        outcome: Outcome::Refused,
        streamed: stream,
        started_at,
        day: usage::today(),
    };

    // Limits first: a refused request never reaches a provider.
    let permit = if count_only {
        None
    } else {
        match gw.slot(&h.caller) {
            Ok(p) => Some(p),
            Err(max) => {
                let reply = Reply::error(
                    StatusCode::TOO_MANY_REQUESTS,
                    "rate_limit_error",
                    format!("g2: {} already has {max} model requests in flight (gateway.max_concurrent)", h.caller),
                )
                .with_header("retry-after", "1");
                return refuse(gw, rec, reply, started);
            }
        }
    };
    if !count_only && let Some(budget) = settings.limits_for(&h.caller).daily_tokens {
        let spent = match gw.spent_today(&h.caller).await {
            Ok(n) => n,
            Err(e) => {
                tracing::error!(error = %e, "reading usage failed");
                0
            }
        };
        if spent >= budget {
            let reply = Reply::error(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limit_error",
                format!(
                    "g2: {} used {spent} of its {budget} tokens for today (gateway.daily_tokens); the budget resets at 00:00 UTC",
                    h.caller
                ),
            )
            // Retrying cannot help until tomorrow.
            .with_header("x-should-retry", "false");
            return refuse(gw, rec, reply, started);
        }
    }

    let mreq = ModelRequest {
        path_and_query,
        headers: anthropic::forwardable(&parts.headers),
        body,
        model,
        stream,
    };
    let provider = gw.inner.provider.clone();
    let reply = if count_only {
        provider.count_tokens(mreq).await
    } else {
        provider.messages(mreq).await
    };
    rec.status = reply.status.as_u16();
    let sse = reply
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let metered = Metered {
        inner: reply.body,
        meter: meter::Meter::new(sse),
        ok: reply.status.is_success(),
        rec: Some(rec),
        gw: gw.clone(),
        started,
        _permit: permit,
        count_only,
    };
    let mut resp = Response::new(Body::from_stream(metered));
    *resp.status_mut() = reply.status;
    *resp.headers_mut() = reply.headers;
    resp
}

/// Replaces the request's model (`gateway.model` pins one for everybody).
fn pin_model(body: &Bytes, model: &str) -> Option<Bytes> {
    let mut v: serde_json::Value = serde_json::from_slice(body).ok()?;
    v.as_object_mut()?
        .insert("model".into(), serde_json::Value::String(model.into()));
    serde_json::to_vec(&v).ok().map(Bytes::from)
}

fn refuse(gw: &Gateway, mut rec: Record, reply: Reply, started: Instant) -> Response {
    rec.status = reply.status.as_u16();
    rec.outcome = Outcome::Refused;
    rec.duration_ms = started.elapsed().as_millis() as u64;
    gw.record(rec);
    relay_now(reply)
}

pub(super) fn relay_now(reply: Reply) -> Response {
    let mut resp = Body::from_stream(reply.body).into_response();
    *resp.status_mut() = reply.status;
    *resp.headers_mut() = reply.headers;
    resp
}
