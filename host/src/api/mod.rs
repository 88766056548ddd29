//! The HTTP API of `g2 serve`: groups, sessions, archives, search, usage,
//! health. JSON in and out, the same shapes as the CLI's `--json`.
//!
//! Invariants: bound to loopback unless a bearer token is configured (then
//! every `/api` route requires it, or the web viewer's cookie with, for a
//! request that changes something, its CSRF token; `/health` stays open);
//! without a token, every route answers only a loopback `Host` with the
//! listening port and takes changes only from its own `Origin`
//! (`http::loopback`: DNS rebinding); request bodies are
//! limited to [`MAX_BODY`]; errors are `{"error":{"kind","message"}}` with a
//! status that says whose fault it is (400 bad input, 404 unknown, 409
//! conflict, 500 ours) — the extractors' rejections (malformed or mistyped
//! JSON, content type, size, query string, path), unknown routes and wrong
//! methods included: handlers take this module's [`Json`], [`Query`] and
//! [`Path`], never axum's.
//!
//! Layout: one file per resource (`groups`, `messages`, `sessions`,
//! `memory`, `tasks`, `archives`, `usage`, `mcp_tokens`), each owning its routes and
//! calling the domain modules (`crate::groups`, `crate::tasks`,
//! `crate::memory::forget`, …), not SQL; `extract.rs` holds the
//! extractors and the error shape; [`auth`] is who may come in (token,
//! loopback names, the viewer's session and CSRF token), shared with the
//! viewer, and [`backoff`] how fast a client may guess the token (429
//! with `Retry-After` while it must wait). API boundary: [`Api`] (the state) and [`Api::router`], which
//! serves the API and whatever pages it is given (the viewer's, joined in
//! `host/server.rs`) behind the same access rules; the API imports nothing of the
//! viewer.

mod archives;
pub mod auth;
pub mod backoff;
mod cluster;
mod extract;
mod groups;
mod host;
mod mcp_tokens;
mod memory;
mod memory_search;
mod messages;
mod sessions;
mod tasks;
mod upload;
mod usage;

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::header;
use axum::middleware;
use axum::response::IntoResponse;
use axum::routing::get;
use serde_json::{Value, json};

use crate::Error;
use crate::home::Home;
use crate::sessions::SessionManager;
use crate::store::{self, Store};
use g2_core::validate::GroupFolder;

pub use extract::{ApiError, Form, Json, Path, Query, Rejection, error_response};
use extract::{ApiResult, method_not_allowed};
pub use groups::NewGroupBody;
pub use memory::{ObservationsQuery, RecallQuery, RememberBody};
pub use sessions::{ClearBody, ResumeBody};

/// Largest request body accepted.
pub const MAX_BODY: usize = 64 * 1024;
// Twice the most `channels.max_text_bytes` allows: a text at the limit
// fits a body with its newlines and quotes escaped (two bytes each), so
// the HTTP channel refuses by the text limit (400), as the others do;
// only a text written mostly in escapes meets the body's first (413).
const _: () = assert!(MAX_BODY >= 2 * crate::config::ChannelSettings::MAX_TEXT_BYTES);

#[derive(Clone)]
pub struct Api {
    pub home: Home,
    pub store: Store,
    pub sessions: SessionManager,
    pub assistant_name: String,
    pub provider: String,
    pub token: Option<String>,
    /// Inbound messages go in here; its live stream feeds the SSE streams.
    pub channels: crate::channels::Channels,
    /// The group queue (`g2 serve`); None when nothing routes messages.
    pub queue: Option<crate::routing::queue::QueueHandle>,
    /// Container settings (the groups' disk quotas).
    pub container: crate::container::ContainerSettings,
    /// The groups' file counts (their status never waits for one).
    pub disk: crate::container::disk::Ledger,
    /// What sessions are given from memory (the viewer shows it).
    pub memory: crate::config::MemorySettings,
    /// The groups' model budgets (the viewer shows them).
    pub gateway: crate::config::GatewaySettings,
    /// The port the API listens on: without a token, only requests to a
    /// loopback name with this port are answered (`http::loopback`).
    pub port: u16,
    /// `cluster.lease_secs` (the cluster's status judges hosts by it).
    pub lease_secs: u64,
    /// Every setting the host started with (`GET /api/host` shows them
    /// without secrets).
    pub settings: std::sync::Arc<crate::config::Settings>,
    /// Wrong credentials per client address (bearer tokens and the
    /// viewer's sign-in alike).
    pub backoff: backoff::Backoff,
}

impl Api {
    /// The HTTP server's router: `/health`, the API under `/api` (each
    /// route behind `auth::require_token`), and `pages` beside them (the
    /// viewer's, joined in `host/server.rs`); then, for all of them and unknown
    /// routes alike, the body limit and `auth::loopback_only` (outermost).
    pub fn router(self, pages: Router<Api>) -> Router {
        let api = Router::new()
            .merge(groups::routes())
            .merge(sessions::routes())
            .merge(memory::routes())
            .merge(memory_search::routes())
            .merge(archives::routes())
            .merge(messages::routes(self.settings.media.max_bytes))
            .merge(tasks::routes())
            .merge(usage::routes())
            .merge(cluster::routes())
            .merge(host::routes())
            .merge(mcp_tokens::routes())
            .route("/openapi.yaml", get(openapi))
            .method_not_allowed_fallback(method_not_allowed)
            .route_layer(middleware::from_fn_with_state(
                self.clone(),
                auth::require_token,
            ));
        Router::new()
            .route("/health", get(health))
            .method_not_allowed_fallback(method_not_allowed)
            .nest("/api", api)
            .merge(pages)
            .fallback(|| async { ApiError::from(Error::NotFound("route".into())) })
            .layer(DefaultBodyLimit::max(MAX_BODY))
            .layer(middleware::from_fn_with_state(
                self.clone(),
                auth::loopback_only,
            ))
            .with_state(self)
    }
}

async fn health(State(api): State<Api>) -> Json<Value> {
    let db = api.store.read(store::answers).await.is_ok();
    Json(
        json!({ "status": if db { "ok" } else { "degraded" }, "database": db, "provider": api.provider, "version": env!("CARGO_PKG_VERSION") }),
    )
}

async fn openapi() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/yaml")],
        include_str!("../../openapi.yaml"),
    )
}

/// The registered group a path names, or `not_found`.
async fn require_group(api: &Api, folder: &GroupFolder) -> Result<crate::groups::Group, ApiError> {
    Ok(crate::groups::require(&api.store, folder).await?)
}

/// Holds the group while a change from outside its agent is made (a
/// clear, a resume, a removal): its warm agent finishes its turn and exits
/// first, and nothing of the group starts until the hold is dropped
/// (`QueueHandle::hold`). None where no queue runs.
async fn hold(api: &Api, folder: &GroupFolder) -> Option<crate::routing::queue::Hold> {
    match &api.queue {
        Some(q) => Some(q.hold(folder).await),
        None => None,
    }
}
