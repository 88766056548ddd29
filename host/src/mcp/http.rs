//! `/mcp` on the host's HTTP server: MCP's Streamable HTTP transport
//! (rmcp's, stateless: every POST stands alone, answered as JSON), behind
//! the server's loopback rule (`api::auth::loopback_only`, outside) and
//! [`require_token`] here.
//!
//! **Stateless** on purpose: no session lives in the host, so every
//! request is checked on its own — a token revoked between two calls
//! stops the second — and any host of a cluster answers any request.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use super::tokens::{self, Refusal};
use super::tools::MemoryTools;
use crate::api::auth::Refused;
use crate::api::backoff::{Attempt, Backoff, Client};
use crate::api::error_response;
use crate::requests::RequestServer;
use crate::store::Store;

/// What `/mcp` checks callers with.
#[derive(Clone)]
struct Gate {
    store: Store,
    backoff: Backoff,
}

/// The `/mcp` route, for the API's router (any state: it keeps its own).
/// `backoff` is the API's, so a guesser is slowed on both alike.
pub fn routes<S: Clone + Send + Sync + 'static>(
    requests: RequestServer,
    store: Store,
    backoff: Backoff,
) -> Router<S> {
    let tools = MemoryTools::new(requests, store.clone());
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        // The server's own rule on names and origins applies (outside
        // and in `require_token`), with or without an API token.
        .disable_allowed_hosts()
        .with_max_request_body_bytes(crate::api::MAX_BODY);
    let service = StreamableHttpService::new(
        move || Ok(tools.clone()),
        Arc::new(NeverSessionManager::default()),
        config,
    );
    let inner = Router::new()
        .fallback_service(service)
        .layer(middleware::from_fn_with_state(
            Gate { store, backoff },
            require_token,
        ));
    Router::new().nest_service("/mcp", inner)
}

/// An `Origin` other than the server's own (a web page elsewhere, or one
/// rebound to this address) is refused, whatever the token; a request
/// without one is no browser's. Then the bearer token must be a live MCP
/// token, checked within the client's back-off (an unknown token counts as
/// a guess; a revoked or expired one is refused without counting); its
/// [`tokens::Caller`] goes on the request for the tools.
async fn require_token(State(gate): State<Gate>, mut req: Request, next: Next) -> Response {
    if let Some(origin) = req.headers().get(header::ORIGIN) {
        let host = req
            .uri()
            .authority()
            .map(|a| a.as_str().to_string())
            .or_else(|| {
                req.headers()
                    .get(header::HOST)
                    .and_then(|h| h.to_str().ok())
                    .map(str::to_string)
            })
            .unwrap_or_default();
        let own = [format!("http://{host}"), format!("https://{host}")];
        if !origin.to_str().is_ok_and(|o| own.iter().any(|x| x == o)) {
            tracing::warn!(origin = ?origin, "refused an MCP request from another origin");
            return error_response(
                StatusCode::FORBIDDEN,
                "forbidden",
                format!(
                    "/mcp answers MCP clients, not web pages of another origin ({:?})",
                    String::from_utf8_lossy(origin.as_bytes())
                ),
            );
        }
    }
    let bearer = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_string);
    let Some(given) = bearer else {
        return unauthorized(
            "an MCP token is required: Authorization: Bearer g2mcp_… (g2 mcp tokens create)".into(),
        );
    };
    let client = Client::of(req.extensions());
    // A waiting address is answered before any lookup.
    if let Some(wait) = gate.backoff.waiting(client.0) {
        return Refused::Wait(wait).into_response();
    }
    let checked = match tokens::check(&gate.store, &given).await {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(error = %e, "could not check an MCP token");
            return error_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                "could not check the token".into(),
            );
        }
    };
    match &checked {
        // A token g2 issued, revoked or expired since: refused, but not
        // counted as a guess (nor ending a count), so a client left with
        // an old token does not slow every other client of its address.
        Err(why @ (Refusal::Revoked | Refusal::Expired(_))) => {
            tracing::info!(client = %client.0, reason = %why, "refused an MCP token");
            return unauthorized(why.to_string());
        }
        _ => match gate.backoff.attempt(client.0, || checked.is_ok()) {
            Attempt::Right => {}
            Attempt::Wait(wait) => return Refused::Wait(wait).into_response(),
            Attempt::Wrong => {
                tracing::warn!(client = %client.0, "refused an unknown MCP token");
                return unauthorized(Refusal::Unknown.to_string());
            }
        },
    }
    if let Ok(caller) = checked {
        req.extensions_mut().insert(caller);
    }
    next.run(req).await
}

/// 401 in the API's error shape, with the challenge HTTP asks for.
fn unauthorized(message: String) -> Response {
    let mut r = error_response(StatusCode::UNAUTHORIZED, "unauthorized", message);
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"g2\""),
    );
    r
}
