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

use std::net::SocketAddr;

use axum::Router;
use axum::extract::{DefaultBodyLimit, FromRequest, FromRequestParts, Request, State};
use axum::http::{StatusCode, header, request::Parts};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::gateway::usage;
use crate::groups::{self, NewGroup};
use crate::home::Home;
use crate::routing::messages;
use crate::sessions::SessionManager;
use crate::store::{self, Store};
use crate::{Error, archives, search};
use g2_core::validate::{GroupFolder, MemoryFolder};

/// Largest request body accepted.
pub const MAX_BODY: usize = 64 * 1024;

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
}

/// An error as the API reports it.
pub struct ApiError(Error);

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        ApiError(e)
    }
}

impl From<g2_core::validate::ValidationError> for ApiError {
    fn from(e: g2_core::validate::ValidationError) -> Self {
        ApiError(Error::Validation(e))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, kind) = match &self.0 {
            Error::Validation(_) | Error::Invalid(_) => (StatusCode::BAD_REQUEST, "invalid"),
            Error::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
            Error::Forbidden(_) => (StatusCode::FORBIDDEN, "forbidden"),
            Error::Conflict(_) | Error::StaleGeneration { .. } => {
                (StatusCode::CONFLICT, "conflict")
            }
            _ => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        };
        if status == StatusCode::INTERNAL_SERVER_ERROR {
            tracing::error!(error = %self.0, "API request failed");
        }
        error_response(status, kind, self.0.to_string())
    }
}

fn error_response(status: StatusCode, kind: &str, message: String) -> Response {
    (
        status,
        axum::Json(json!({ "error": { "kind": kind, "message": message } })),
    )
        .into_response()
}

/// A request refused before its handler ran: what an extractor rejected,
/// a method the route does not take.
pub struct Rejection {
    status: StatusCode,
    kind: &'static str,
    message: String,
}

impl Rejection {
    /// From one of axum's extractor rejections (its status and text).
    fn of(status: StatusCode, text: String, error: &(dyn std::error::Error + 'static)) -> Self {
        if crate::http::is_body_timeout(error) {
            let message = "the request body was not complete in time (api.body_timeout_ms)".into();
            return Rejection {
                status: StatusCode::REQUEST_TIMEOUT,
                kind: "timeout",
                message,
            };
        }
        let (status, kind) = match status {
            StatusCode::PAYLOAD_TOO_LARGE => (status, "too_large"),
            StatusCode::UNSUPPORTED_MEDIA_TYPE => (status, "unsupported_media_type"),
            s if s.is_server_error() => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
            // Syntax (400) and data (422) errors alike: bad input.
            _ => (StatusCode::BAD_REQUEST, "invalid"),
        };
        Rejection {
            status,
            kind,
            message: text,
        }
    }
}

impl IntoResponse for Rejection {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            tracing::error!(error = %self.message, "API request refused");
        }
        error_response(self.status, self.kind, self.message)
    }
}

/// A JSON body in, or a JSON answer out (axum's `Json`, rejections in the
/// API's shape).
pub struct Json<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Json<T> {
    type Rejection = Rejection;

    async fn from_request(req: Request, state: &S) -> Result<Self, Rejection> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(Json(v)),
            Err(e) => Err(Rejection::of(e.status(), e.body_text(), &e)),
        }
    }
}

impl<T: serde::Serialize> IntoResponse for Json<T> {
    fn into_response(self) -> Response {
        axum::Json(self.0).into_response()
    }
}

/// The query string (axum's `Query`, rejections in the API's shape).
pub struct Query<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Query<T> {
    type Rejection = Rejection;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Rejection> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(v)) => Ok(Query(v)),
            Err(e) => Err(Rejection::of(e.status(), e.body_text(), &e)),
        }
    }
}

/// Path parameters (axum's `Path`, rejections in the API's shape).
pub struct Path<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for Path<T> {
    type Rejection = Rejection;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Rejection> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(v)) => Ok(Path(v)),
            Err(e) => Err(Rejection::of(e.status(), e.body_text(), &e)),
        }
    }
}

async fn method_not_allowed(req: Request) -> Rejection {
    Rejection {
        status: StatusCode::METHOD_NOT_ALLOWED,
        kind: "method_not_allowed",
        message: format!("{} does not take {}", req.uri().path(), req.method()),
    }
}

type ApiResult<T> = Result<Json<T>, ApiError>;

/// Checks that an address may be served: loopback, or any with a token.
pub fn check_bind(addr: &SocketAddr, token: Option<&str>) -> crate::Result<()> {
    if addr.ip().is_loopback() || token.is_some_and(|t| t.len() >= 16) {
        Ok(())
    } else {
        Err(Error::Config(format!(
            "api.listen {addr} is not a loopback address: set api.token (16+ characters) to serve it"
        )))
    }
}

impl Api {
    pub fn router(self) -> Router {
        let api = Router::new()
            .route("/groups", get(list_groups).post(add_group))
            .route("/groups/{folder}", delete(remove_group))
            .route("/groups/{folder}/session", get(show_session))
            .route("/groups/{folder}/session/clear", post(clear_session))
            .route("/groups/{folder}/session/resume", post(resume_session))
            .route("/groups/{folder}/sessions", get(session_history))
            .route("/groups/{folder}/memory/sessions", get(memory_sessions))
            .route("/groups/{folder}/memory/sessions/{id}", get(memory_session))
            .route(
                "/groups/{folder}/memory/sessions/{id}/summary",
                get(memory_summary),
            )
            .route("/groups/{folder}/memory/search", get(memory_search))
            .route("/groups/{folder}/memory/stream", get(memory_stream))
            .route(
                "/groups/{folder}/memory/observations",
                get(observations).post(remember),
            )
            .route(
                "/groups/{folder}/memory/observations/{id}",
                delete(forget_observation),
            )
            .route("/groups/{folder}/archives", get(list_archives))
            .route(
                "/groups/{folder}/messages",
                get(list_messages).post(post_message),
            )
            .route("/groups/{folder}/stream", get(stream_messages))
            .route("/groups/{folder}/status", get(group_status))
            .route("/groups/{folder}/tasks", get(list_tasks))
            .route("/groups/{folder}/ipc-log", get(ipc_log))
            .route("/tasks/{id}", get(task_detail))
            .route("/tasks/{id}/{action}", post(task_action))
            .route("/queue", get(queue_status))
            .route("/openapi.yaml", get(openapi))
            .route("/archives/{id}", get(read_archive))
            .route("/search", get(search_archives))
            .route("/usage", get(usage_report))
            .method_not_allowed_fallback(method_not_allowed)
            .route_layer(middleware::from_fn_with_state(self.clone(), require_token));
        Router::new()
            .route("/health", get(health))
            .method_not_allowed_fallback(method_not_allowed)
            .nest("/api", api)
            .merge(crate::viewer::routes(&self))
            .fallback(|| async { ApiError(Error::NotFound("route".into())) })
            .layer(DefaultBodyLimit::max(MAX_BODY))
            .layer(middleware::from_fn_with_state(self.clone(), loopback_only))
            .with_state(self)
    }
}

/// Without a token, every route (pages, `/health` and unknown routes
/// included) answers only loopback names, and changes only from the
/// host's own pages: see `http::loopback` (DNS rebinding).
async fn loopback_only(State(api): State<Api>, req: Request, next: Next) -> Response {
    let checks = crate::http::Loopback { port: api.port };
    if api.token.is_none()
        && let Some(why) = checks.refusal(req.method(), req.uri(), req.headers())
    {
        tracing::warn!(method = %req.method(), path = %req.uri().path(), "refused: {why}");
        return error_response(StatusCode::FORBIDDEN, "forbidden", why);
    }
    next.run(req).await
}

async fn require_token(State(api): State<Api>, req: Request, next: Next) -> Response {
    use crate::viewer::auth;
    if let Some(token) = &api.token {
        let bearer = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        let ok = if let Some(given) = bearer {
            auth::same_secret(given, token)
        } else if let Some(s) = auth::session(req.headers(), token) {
            // The viewer's session: a request that changes something must
            // also carry the session's CSRF token, which another site's
            // page cannot read.
            auth::allows(req.headers(), req.method(), &s, token)
        } else {
            false
        };
        if !ok {
            return error_response(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "a bearer token (or the viewer's session cookie and CSRF token) is required".into(),
            );
        }
    }
    next.run(req).await
}

async fn health(State(api): State<Api>) -> Json<Value> {
    let db = api.store.read(store::answers).await.is_ok();
    Json(
        json!({ "status": if db { "ok" } else { "degraded" }, "database": db, "provider": api.provider, "version": env!("CARGO_PKG_VERSION") }),
    )
}

async fn list_groups(State(api): State<Api>) -> ApiResult<Vec<groups::Group>> {
    Ok(Json(api.store.read(store::groups::list).await?))
}

/// `POST /api/groups`. The request bodies are public so that their parsing
/// and checks can be exercised on their own (`fuzz/`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewGroupBody {
    pub folder: String,
    pub name: String,
    pub jid: Option<String>,
    pub trigger: Option<String>,
    pub requires_trigger: Option<bool>,
    #[serde(default)]
    pub is_main: bool,
}

impl From<NewGroupBody> for NewGroup {
    fn from(b: NewGroupBody) -> Self {
        NewGroup {
            folder: b.folder,
            name: b.name,
            jid: b.jid,
            trigger_pattern: b.trigger,
            requires_trigger: b.requires_trigger,
            is_main: b.is_main,
        }
    }
}

async fn add_group(
    State(api): State<Api>,
    Json(b): Json<NewGroupBody>,
) -> Result<(StatusCode, Json<groups::Group>), ApiError> {
    let g = groups::register(&api.store, &api.home, b.into(), &api.assistant_name).await?;
    Ok((StatusCode::CREATED, Json(g)))
}

async fn remove_group(
    State(api): State<Api>,
    Path(folder): Path<GroupFolder>,
) -> ApiResult<groups::Group> {
    Ok(Json(
        api.store
            .write(move |tx| store::groups::remove(tx, &folder))
            .await?,
    ))
}

async fn require_group(api: &Api, folder: &GroupFolder) -> Result<groups::Group, ApiError> {
    Ok(groups::require(&api.store, folder).await?)
}

/// A message into a group's chat: stored first, then answered with 202.
async fn post_message(
    State(api): State<Api>,
    Path(folder): Path<GroupFolder>,
    Json(m): Json<messages::Inbound>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let stored = api.channels.receive(&folder, m).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({ "id": stored.id, "seq": stored.seq })),
    ))
}

/// Server-sent events of a chat's messages (`event: message`, `id:` its
/// `seq`, data = the message JSON): first those after `Last-Event-ID` (a
/// reconnecting client) or else `?after=<seq>`, then new ones as they are
/// stored, in `seq` order, each once (see `Channels::follow`). A listener
/// that falls too far behind is closed; it reconnects with `Last-Event-ID`.
async fn stream_messages(
    State(api): State<Api>,
    Path(folder): Path<GroupFolder>,
    Query(q): Query<AfterQuery>,
    headers: axum::http::HeaderMap,
) -> Result<
    axum::response::sse::Sse<
        impl futures_util::Stream<Item = Result<axum::response::sse::Event, std::convert::Infallible>>,
    >,
    ApiError,
> {
    use axum::response::sse::{Event, KeepAlive, Sse};
    let g = require_group(&api, &folder).await?;
    let resume = match headers.get("last-event-id") {
        Some(v) => Some(
            v.to_str()
                .ok()
                .and_then(|v| v.trim().parse::<i64>().ok())
                .ok_or_else(|| Error::Invalid("Last-Event-ID: a message seq".into()))?,
        ),
        None => None,
    };
    let live = api.channels.follow(g.jid, resume.or(q.after));
    let events = futures_util::StreamExt::map(live, |l| {
        Ok(Event::default()
            .event("message")
            .id(l.message.seq.to_string())
            .data(&l.json))
    });
    Ok(Sse::new(events).keep_alive(KeepAlive::default()))
}

/// The group's session pointer, its routing cursor, whether it is failing,
/// and its container if one runs.
async fn group_status(State(api): State<Api>, Path(folder): Path<GroupFolder>) -> ApiResult<Value> {
    let g = require_group(&api, &folder).await?;
    let pointer = api.sessions.get(&folder).await?;
    let f = folder.clone();
    let (cursor, failing) = api
        .store
        .read(move |c| {
            Ok((
                crate::routing::rules::cursor(c, &f)?,
                crate::routing::rules::failing(c, &f)?,
            ))
        })
        .await?;
    let container = match &api.queue {
        Some(q) => q
            .status()
            .await
            .and_then(|s| s.running.into_iter().find(|r| r.group == folder)),
        None => None,
    };
    let disk = disk_usage(&api, &g).await?;
    Ok(Json(
        json!({ "group": g, "session": pointer, "cursor": cursor, "failing": failing, "container": container, "disk": disk }),
    ))
}

/// A group's disk use from its latest count; a group never counted since
/// the host started is counted now, for at most [`FIRST_COUNT_WAIT`]
/// (`null` after that: not counted yet).
async fn disk_usage(
    api: &Api,
    g: &groups::Group,
) -> Result<Option<crate::container::disk::Usage>, ApiError> {
    use crate::container::disk;
    let count = match api.disk.latest(&g.folder) {
        Some(c) => Some(c),
        None => tokio::time::timeout(FIRST_COUNT_WAIT, api.disk.fresh(&g.folder))
            .await
            .ok()
            .transpose()?,
    };
    let quotas = disk::Quotas::of(&api.home, &api.container, g);
    Ok(count.and_then(|c| disk::usage(&c, &quotas).ok()))
}

/// How long a status waits for a group's first count.
const FIRST_COUNT_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

async fn queue_status(State(api): State<Api>) -> ApiResult<Value> {
    match &api.queue {
        Some(q) => Ok(Json(
            serde_json::to_value(q.status().await).unwrap_or_default(),
        )),
        None => Err(ApiError(Error::NotFound("queue (not running)".into()))),
    }
}

async fn list_tasks(
    State(api): State<Api>,
    Path(folder): Path<GroupFolder>,
) -> ApiResult<Vec<crate::tasks::Task>> {
    require_group(&api, &folder).await?;
    Ok(Json(
        api.store
            .read(move |c| store::tasks::list(c, Some(&folder)))
            .await?,
    ))
}

async fn task_detail(State(api): State<Api>, Path(id): Path<String>) -> ApiResult<Value> {
    let (task, runs) = api
        .store
        .read(move |c| {
            Ok((
                store::tasks::get(c, &id)?
                    .ok_or_else(|| Error::NotFound(format!("task {id:?}")))?,
                store::tasks::runs(c, &id, 50)?,
            ))
        })
        .await?;
    Ok(Json(json!({ "task": task, "runs": runs })))
}

/// `pause`, `resume` or `cancel`.
async fn task_action(
    State(api): State<Api>,
    Path((id, action)): Path<(String, String)>,
) -> ApiResult<crate::tasks::Task> {
    use crate::tasks::StatusAction;
    let action = match action.as_str() {
        "pause" => StatusAction::Pause,
        "resume" => StatusAction::Resume,
        "cancel" => StatusAction::Cancel,
        other => return Err(ApiError(Error::NotFound(format!("task action {other:?}")))),
    };
    Ok(Json(
        api.store
            .write(move |tx| crate::tasks::set_status(tx, &id, None, action, chrono::Utc::now()))
            .await?,
    ))
}

/// The agent requests of a group and what the host decided.
async fn ipc_log(
    State(api): State<Api>,
    Path(folder): Path<String>,
) -> ApiResult<Vec<store::requests::LogEntry>> {
    g2_core::validate::any_folder(&folder)?;
    Ok(Json(
        api.store
            .read(move |c| store::requests::list(c, &folder, 200))
            .await?,
    ))
}

async fn openapi() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/yaml")],
        include_str!("../openapi.yaml"),
    )
}

#[derive(Deserialize)]
struct AfterQuery {
    after: Option<i64>,
    limit: Option<usize>,
}

async fn list_messages(
    State(api): State<Api>,
    Path(folder): Path<GroupFolder>,
    Query(q): Query<AfterQuery>,
) -> ApiResult<Vec<messages::Message>> {
    let g = require_group(&api, &folder).await?;
    let (after, limit) = (q.after.unwrap_or(0), q.limit.unwrap_or(100).clamp(1, 1000));
    Ok(Json(
        api.store
            .read(move |c| store::messages::after(c, &g.jid, after, limit))
            .await?,
    ))
}

async fn show_session(
    State(api): State<Api>,
    Path(folder): Path<GroupFolder>,
) -> ApiResult<crate::sessions::Pointer> {
    require_group(&api, &folder).await?;
    Ok(Json(api.sessions.get(&folder).await?))
}

async fn session_history(
    State(api): State<Api>,
    Path(folder): Path<GroupFolder>,
) -> ApiResult<Vec<crate::sessions::HistoryEntry>> {
    require_group(&api, &folder).await?;
    Ok(Json(api.sessions.history(&folder).await?))
}

/// How often the memory feed looks for new records.
const MEMORY_FEED_EVERY: std::time::Duration = std::time::Duration::from_millis(500);

/// Server-sent events of what the group's memory stores from now on
/// (`event: memory`, data = a `store::memory::FeedItem`): prompts, tool
/// calls, observations and summaries, oldest first, each once.
async fn memory_stream(
    State(api): State<Api>,
    Path(folder): Path<GroupFolder>,
) -> Result<
    axum::response::sse::Sse<
        impl futures_util::Stream<Item = Result<axum::response::sse::Event, std::convert::Infallible>>,
    >,
    ApiError,
> {
    use axum::response::sse::{Event, KeepAlive, Sse};
    require_group(&api, &folder).await?;
    let f = folder.clone();
    let start = api
        .store
        .read(move |c| store::memory::feed_now(c, &f))
        .await?;
    let state = (
        api.store.clone(),
        folder,
        start,
        std::collections::VecDeque::new(),
    );
    let events =
        futures_util::stream::unfold(state, |(store, group, mut at, mut queue)| async move {
            loop {
                if let Some(item) = queue.pop_front() {
                    let ev = Event::default()
                        .event("memory")
                        .json_data(&item)
                        .unwrap_or_else(|_| Event::default().comment("unreadable record"));
                    return Some((Ok(ev), (store, group, at, queue)));
                }
                tokio::time::sleep(MEMORY_FEED_EVERY).await;
                let g = group.clone();
                match store
                    .read(move |c| store::memory::feed_after(c, &g, at, 100))
                    .await
                {
                    Ok((items, next)) => {
                        at = next;
                        queue.extend(items);
                    }
                    Err(e) => tracing::warn!(error = %e, "memory feed: reading failed"),
                }
            }
        });
    Ok(Sse::new(events).keep_alive(KeepAlive::default()))
}

/// `GET /api/groups/{folder}/memory/sessions`: what was captured of the
/// group's agent sessions, newest first.
async fn memory_sessions(
    State(api): State<Api>,
    Path(folder): Path<GroupFolder>,
) -> ApiResult<Vec<store::memory::SessionRow>> {
    require_group(&api, &folder).await?;
    Ok(Json(
        api.store
            .read(move |c| store::memory::sessions(c, &folder))
            .await?,
    ))
}

/// `GET /api/groups/{folder}/memory/sessions/{id}`: one session's timeline;
/// a session of another group is not found.
async fn memory_session(
    State(api): State<Api>,
    Path((folder, id)): Path<(GroupFolder, String)>,
) -> ApiResult<store::memory::Timeline> {
    require_group(&api, &folder).await?;
    let sid = id.clone();
    let t = api
        .store
        .read(move |c| store::memory::timeline(c, &folder, &sid))
        .await?
        .ok_or_else(|| Error::NotFound(format!("captured session {id:?}")))?;
    Ok(Json(t))
}

/// `GET /api/groups/{folder}/memory/sessions/{id}/summary`.
async fn memory_summary(
    State(api): State<Api>,
    Path((folder, id)): Path<(GroupFolder, String)>,
) -> ApiResult<store::observations::SummaryRow> {
    require_group(&api, &folder).await?;
    let sid = id.clone();
    let s = api
        .store
        .read(move |c| store::observations::summary(c, &folder, &sid))
        .await?
        .ok_or_else(|| Error::NotFound(format!("summary of session {id:?}")))?;
    Ok(Json(s))
}

/// `GET /api/groups/{folder}/memory/search?q=…`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecallQuery {
    pub q: String,
    pub limit: Option<usize>,
    pub kind: Option<String>,
    pub since: Option<String>,
}

/// Recall over the group's own memory: ranked hits with provenance.
async fn memory_search(
    State(api): State<Api>,
    Path(folder): Path<GroupFolder>,
    Query(q): Query<RecallQuery>,
) -> ApiResult<Vec<crate::memory::recall::RecallHit>> {
    require_group(&api, &folder).await?;
    let filters = crate::memory::recall::Filters {
        kind: q.kind,
        since: q.since,
    };
    let limit = q.limit.unwrap_or(10);
    Ok(Json(
        api.store
            .read(move |c| crate::memory::recall::recall_with(c, &folder, &q.q, limit, &filters))
            .await?,
    ))
}

/// `GET /api/groups/{folder}/memory/observations[?all=true]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObservationsQuery {
    #[serde(default)]
    pub all: bool,
}

/// A registered group's memory, or `global`'s (every group's, read-only
/// to their agents).
async fn memory_owner(api: &Api, folder: String) -> Result<MemoryFolder, ApiError> {
    let owner = MemoryFolder::new(folder).map_err(|e| Error::Invalid(e.to_string()))?;
    if !owner.is_global() {
        let g = GroupFolder::new(owner.as_str()).map_err(|e| Error::Invalid(e.to_string()))?;
        require_group(api, &g).await?;
    }
    Ok(owner)
}

async fn observations(
    State(api): State<Api>,
    Path(folder): Path<String>,
    Query(q): Query<ObservationsQuery>,
) -> ApiResult<Vec<store::observations::ObservationRow>> {
    let owner = memory_owner(&api, folder).await?;
    Ok(Json(
        api.store
            .read(move |c| store::observations::list(c, &owner, q.all))
            .await?,
    ))
}

/// `POST /api/groups/{folder}/memory/observations` `{"text": …}`:
/// remembered (an observation of importance 9); `global` for every group.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RememberBody {
    pub text: String,
}

async fn remember(
    State(api): State<Api>,
    Path(folder): Path<String>,
    Json(body): Json<RememberBody>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let owner = memory_owner(&api, folder).await?;
    let id = crate::memory::remember::remember(&api.store, owner, &body.text).await?;
    Ok((StatusCode::CREATED, Json(json!({ "id": id }))))
}

/// `DELETE /api/groups/{folder}/memory/observations/{id}`: forgotten (a
/// tombstone stays); another group's observation is not found.
async fn forget_observation(
    State(api): State<Api>,
    Path((folder, id)): Path<(String, i64)>,
) -> Result<StatusCode, ApiError> {
    let owner = memory_owner(&api, folder).await?;
    let done = api
        .store
        .write(move |tx| store::observations::forget(tx, &owner, id))
        .await?;
    if !done {
        return Err(Error::NotFound(format!("observation {id}")).into());
    }
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /api/groups/{folder}/session/clear`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClearBody {
    pub name: String,
}

async fn clear_session(
    State(api): State<Api>,
    Path(folder): Path<GroupFolder>,
    Json(b): Json<ClearBody>,
) -> ApiResult<crate::sessions::Cleared> {
    let cleared = api.sessions.clear_active(&folder, &b.name).await?;
    // The next message starts fresh.
    if let Some(q) = &api.queue {
        q.close(&folder);
    }
    Ok(Json(cleared))
}

/// `POST /api/groups/{folder}/session/resume`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResumeBody {
    pub history_id: i64,
    pub save_as: Option<String>,
}

async fn resume_session(
    State(api): State<Api>,
    Path(folder): Path<GroupFolder>,
    Json(b): Json<ResumeBody>,
) -> ApiResult<crate::sessions::Resumed> {
    let resumed = api
        .sessions
        .resume_active(&folder, b.history_id, b.save_as.as_deref())
        .await?;
    if let Some(q) = &api.queue {
        q.close(&folder);
    }
    Ok(Json(resumed))
}

async fn list_archives(
    State(api): State<Api>,
    Path(folder): Path<String>,
) -> ApiResult<Vec<archives::ArchiveRecord>> {
    g2_core::validate::any_folder(&folder)?;
    Ok(Json(
        api.store
            .read(move |c| store::archives::list(c, &folder))
            .await?,
    ))
}

async fn read_archive(State(api): State<Api>, Path(id): Path<i64>) -> ApiResult<Value> {
    let rec = api
        .store
        .read(move |c| store::archives::get(c, id))
        .await?
        .ok_or_else(|| Error::NotFound(format!("archive {id}")))?;
    // Read beneath the group's folder: a link planted there is not followed.
    let (home, r) = (api.home.clone(), rec.clone());
    let markdown = tokio::task::spawn_blocking(move || archives::read_markdown(&home, &r))
        .await
        .map_err(Error::from)??;
    Ok(Json(json!({ "archive": rec, "markdown": markdown })))
}

#[derive(Deserialize)]
struct SearchQuery {
    q: String,
    group: Option<String>,
    limit: Option<usize>,
}

async fn search_archives(
    State(api): State<Api>,
    Query(q): Query<SearchQuery>,
) -> ApiResult<Vec<search::Hit>> {
    let limit = q.limit.unwrap_or(10).clamp(1, search::MAX_LIMIT);
    Ok(Json(
        api.store
            .read(move |c| search::search(c, &q.q, q.group.as_deref(), limit))
            .await?,
    ))
}

#[derive(Deserialize)]
struct UsageQuery {
    group: Option<String>,
    days: Option<u32>,
}

async fn usage_report(
    State(api): State<Api>,
    Query(q): Query<UsageQuery>,
) -> ApiResult<Vec<usage::Line>> {
    let since = usage::since(q.days.unwrap_or(30).clamp(1, 3660));
    Ok(Json(
        api.store
            .read(move |c| store::usage::report(c, q.group.as_deref(), Some(&since)))
            .await?,
    ))
}
