//! The model gateway: the only way an agent reaches a model.
//!
//! The host serves the Anthropic Messages API (`POST /v1/messages`, streaming
//! and not, and `POST /v1/messages/count_tokens`) on one Unix socket per
//! group, `data/ipc/{folder}/model.sock`, and on a loopback TCP address for
//! local use. A request is accounted to the listener it arrived on: the
//! socket *is* the group's identity, nothing in the request can change it.
//! Requests from TCP are accounted to [`usage::LOCAL_CALLER`].
//!
//! Per request: read the body (bounded), check it is JSON with a model,
//! take a concurrency slot and check the daily budget of the caller, hand it
//! to the [`Provider`], and relay the answer chunk by chunk while a
//! [`meter::Meter`] reads its token usage. When the answer ends (or the
//! caller goes away) one usage row is written and the caller's day total
//! updated. Refusals are Anthropic-shaped errors and are recorded too.
//!
//! Invariants: credentials live only in the `anthropic` provider; callers'
//! credential headers are dropped before a provider sees the request; no log
//! line carries headers or bodies.

pub mod anthropic;
pub mod credentials;
pub mod meter;
pub mod offline;
pub mod provider;
pub mod usage;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use bytes::Bytes;
use futures_util::Stream;
use serde::Deserialize;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot};

use crate::background::Background;
use crate::config::{GatewaySettings, ProviderKind};
use crate::error::IoContext;
use crate::home::Home;
use crate::store::{self, Store};
use crate::{Error, Result};
use g2_core::validate::GroupFolder;
use usage::{Outcome, Record, Tokens};

pub use credentials::Credential;
pub use provider::{ModelRequest, Provider, Reply};

/// Which provider the settings and environment select, and why.
#[derive(Debug, Clone)]
pub struct Choice {
    pub kind: ProviderKind,
    pub credential: Option<Credential>,
    /// One line for `g2 doctor` and the startup log.
    pub reason: String,
}

/// Picks the provider: the configured one, else `anthropic` when a
/// credential is found, else `offline`. Asking for `anthropic` without a
/// credential is an error.
pub fn choose(settings: &GatewaySettings, home: &Path) -> Result<Choice> {
    let credential = Credential::find(home);
    let from = |c: &Credential| match c.source {
        credentials::Source::Environment => format!("{} from the environment", c.variable()),
        credentials::Source::DotEnv => {
            format!("{} from {}", c.variable(), home.join(".env").display())
        }
    };
    let (kind, reason) = match (settings.provider, &credential) {
        (Some(ProviderKind::Offline), _) => (
            ProviderKind::Offline,
            "offline (gateway.provider)".to_string(),
        ),
        (Some(ProviderKind::Anthropic), Some(c)) => (
            ProviderKind::Anthropic,
            format!(
                "anthropic at {} ({}; gateway.provider)",
                settings.upstream_url,
                from(c)
            ),
        ),
        (Some(ProviderKind::Anthropic), None) => {
            return Err(Error::Config(format!(
                "gateway.provider is anthropic but neither ANTHROPIC_API_KEY nor ANTHROPIC_AUTH_TOKEN is set \
                 in the environment or in {}",
                home.join(".env").display()
            )));
        }
        (None, Some(c)) => (
            ProviderKind::Anthropic,
            format!("anthropic at {} ({})", settings.upstream_url, from(c)),
        ),
        (None, None) => (
            ProviderKind::Offline,
            "offline (no ANTHROPIC_API_KEY configured)".to_string(),
        ),
    };
    Ok(Choice {
        kind,
        credential,
        reason,
    })
}

enum ToRecorder {
    Row(Record),
    Flush(oneshot::Sender<()>),
}

struct Inner {
    provider: Arc<dyn Provider>,
    settings: GatewaySettings,
    store: Store,
    slots: Mutex<HashMap<String, Arc<Semaphore>>>,
    /// Tokens used today per caller: (day, tokens). Loaded from the store the
    /// first time a caller is seen on a day, then kept current in memory.
    spent: Mutex<HashMap<String, (String, u64)>>,
    recorder: mpsc::UnboundedSender<ToRecorder>,
    /// What each group's socket serves beside the model's routes.
    group_routes: Option<GroupRoutes>,
}

/// The routes a group's socket serves beside the model's, built for each
/// group (the host wires in memory's hook routes, `memory::context`).
pub type GroupRoutes = Arc<dyn Fn(&GroupFolder) -> Router + Send + Sync>;

/// What other parts of the host serve through the gateway, given when the
/// host is wired (`host::gateway`): the gateway itself knows none of them.
#[derive(Clone, Default)]
pub struct Hooks {
    /// The routes each group's socket serves beside the model's.
    pub group_routes: Option<GroupRoutes>,
    /// What the offline provider asks before its own rules.
    pub offline: Option<offline::Delegate>,
}

/// The gateway; cheap to clone, shared by all its listeners.
#[derive(Clone)]
pub struct Gateway {
    inner: Arc<Inner>,
}

/// A running listener; stops when [`Listening::stop`] is called or the
/// handle is dropped.
pub struct Listening {
    /// `http://127.0.0.1:PORT` or the socket path.
    pub address: String,
    pub local_addr: Option<SocketAddr>,
    server: Option<Background>,
    /// A group socket: its home and folder, to remove it at the end.
    socket: Option<(Home, GroupFolder)>,
}

impl Listening {
    pub async fn stop(mut self) {
        if let Some(server) = self.server.take() {
            server.stop().await;
        }
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        // Dropping the server handle asks it to stop. The socket goes too,
        // if a socket is still what is there (removed beneath the group's
        // IPC handle, like everything the host does in it).
        if let Some((home, folder)) = &self.socket
            && let Ok(tree) = home.ipc_tree(folder)
            && let Ok(Some(g2_core::confined::Kind::Socket)) = tree.kind(g2_core::ipc::MODEL_SOCKET)
        {
            let _ = tree.remove(g2_core::ipc::MODEL_SOCKET);
        }
    }
}

impl Gateway {
    /// Builds the gateway with the provider [`choose`] selects, serving
    /// what `hooks` give. Must be called inside a Tokio runtime (it starts
    /// the usage writer).
    pub fn new(
        settings: &GatewaySettings,
        home: &Home,
        store: Store,
        hooks: Hooks,
    ) -> Result<(Gateway, Choice)> {
        let choice = choose(settings, home.root())?;
        let provider: Arc<dyn Provider> = match (choice.kind, &choice.credential) {
            (ProviderKind::Anthropic, Some(c)) => Arc::new(anthropic::Anthropic::new(
                &settings.upstream_url,
                c.clone(),
            )?),
            _ => {
                let offline = offline::Offline::new(settings.model.clone());
                Arc::new(match hooks.offline {
                    Some(delegate) => offline.with_delegate(delegate),
                    None => offline,
                })
            }
        };
        let gateway = Gateway::build(settings, store, provider, hooks.group_routes);
        Ok((gateway, choice))
    }

    /// A gateway over any provider (its group sockets serve the model's
    /// routes only).
    pub fn with_provider(
        settings: &GatewaySettings,
        store: Store,
        provider: Arc<dyn Provider>,
    ) -> Gateway {
        Gateway::build(settings, store, provider, None)
    }

    fn build(
        settings: &GatewaySettings,
        store: Store,
        provider: Arc<dyn Provider>,
        group_routes: Option<GroupRoutes>,
    ) -> Gateway {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(record_loop(store.clone(), rx));
        Gateway {
            inner: Arc::new(Inner {
                provider,
                settings: settings.clone(),
                store,
                slots: Mutex::new(HashMap::new()),
                spent: Mutex::new(HashMap::new()),
                recorder: tx,
                group_routes,
            }),
        }
    }

    pub fn provider_name(&self) -> &'static str {
        self.inner.provider.name()
    }

    /// The HTTP routes, with every request accounted to `caller`.
    pub fn router(&self, caller: &str) -> Router {
        let state = Handler {
            gw: self.clone(),
            caller: Arc::from(caller),
        };
        Router::new()
            .route("/v1/messages", post(messages))
            .route("/v1/messages/count_tokens", post(count_tokens))
            .method_not_allowed_fallback(method_not_allowed)
            .fallback(not_found)
            .with_state(state)
    }

    /// Serves on a loopback TCP address (`127.0.0.1:0` picks a port).
    /// Non-loopback addresses are refused: the listener has no
    /// authentication of its own.
    pub async fn listen_tcp(&self, addr: &str) -> Result<Listening> {
        let sock: SocketAddr = addr.parse().map_err(|_| {
            Error::Config(format!(
                "gateway listen address {addr:?}: use IP:PORT, e.g. 127.0.0.1:4180"
            ))
        })?;
        if !sock.ip().is_loopback() {
            return Err(Error::Config(format!(
                "gateway listen address {addr}: only loopback addresses are allowed"
            )));
        }
        let listener = tokio::net::TcpListener::bind(sock)
            .await
            .ctx(|| format!("binding {sock}"))?;
        let local = listener.local_addr().ctx(|| "local address".into())?;
        // It spends the host's credential for whoever asks: only requests
        // to a loopback name with its port (`http::loopback`: DNS rebinding).
        let checks = crate::http::Loopback { port: local.port() };
        let router = self
            .router(usage::LOCAL_CALLER)
            .layer(axum::middleware::from_fn(
                move |req: Request, next: axum::middleware::Next| async move {
                    match checks.refusal(req.method(), req.uri(), req.headers()) {
                        Some(why) => {
                            relay_now(Reply::error(StatusCode::FORBIDDEN, "permission_error", why))
                        }
                        None => next.run(req).await,
                    }
                },
            ));
        // Events are small writes that must leave at once; Nagle's algorithm
        // would hold them for the peer's delayed ACK (40 ms).
        let listener = {
            use axum::serve::ListenerExt;
            listener.tap_io(|tcp| {
                let _ = tcp.set_nodelay(true);
            })
        };
        Ok(Listening {
            address: format!("http://{local}"),
            local_addr: Some(local),
            server: Some(self.spawn_server(listener, router)),
            socket: None,
        })
    }

    /// Serves a group on its socket `data/ipc/{folder}/model.sock`. The
    /// socket is world-connectable (the container's user is not the host's);
    /// the folder it sits in is mounted into that group's container only.
    pub async fn listen_group(&self, home: &Home, folder: &GroupFolder) -> Result<Listening> {
        let tree = home.ipc_tree(folder)?;
        let path = home.ipc_dir(folder)?.join(g2_core::ipc::MODEL_SOCKET);
        // sun_path holds 108 bytes including the terminating NUL.
        if path.as_os_str().len() > 107 {
            return Err(Error::Config(format!(
                "socket path {} is longer than 107 bytes; use a shorter home directory",
                path.display()
            )));
        }
        // The IPC folder is the agent's: bind and chmod in a folder only the
        // host uses, then rename the socket into place (a rename never
        // follows a link; it replaces a stale socket or anything planted).
        let private = home.run_dir();
        std::fs::create_dir_all(&private).ctx(|| format!("creating {}", private.display()))?;
        let tmp_name = format!(
            "{folder}.{}.sock",
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        );
        let tmp = private.join(&tmp_name);
        let listener =
            tokio::net::UnixListener::bind(&tmp).ctx(|| format!("binding {}", tmp.display()))?;
        let placed = (|| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o666))
                .ctx(|| format!("permissions of {}", tmp.display()))?;
            let name = g2_core::ipc::MODEL_SOCKET;
            if let Some(kind) = tree.kind(name).ok().flatten()
                && kind != g2_core::confined::Kind::Socket
            {
                home.planted(
                    folder,
                    &format!("{name}: a {kind:?} in the socket's place; replaced"),
                );
                if kind == g2_core::confined::Kind::Dir {
                    home.confined(folder, name, tree.displace(name))?;
                }
            }
            let run = g2_core::confined::Dir::open(&private)
                .ctx(|| format!("opening {}", private.display()))?;
            home.confined(folder, name, run.rename_to(&tmp_name, &tree, name))
        })();
        if let Err(e) = placed {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        // The socket is the group's identity: its hooks ask here for the
        // group's own memory (the routes the host wired in).
        let mut router = self.router(folder);
        if let Some(routes) = &self.inner.group_routes {
            router = router.merge(routes(folder));
        }
        Ok(Listening {
            address: path.display().to_string(),
            local_addr: None,
            server: Some(self.spawn_server(listener, router)),
            socket: Some((home.clone(), folder.clone())),
        })
    }

    /// Serves `router` on `listener` until stopped, within the
    /// `gateway.*` timeouts and connection bound.
    fn spawn_server<L: axum::serve::Listener>(&self, listener: L, router: Router) -> Background {
        let limits = crate::http::Limits::from(&self.inner.settings);
        Background::spawn(|stopped| {
            crate::http::serve(listener, router, limits, async {
                let _ = stopped.await;
            })
        })
    }

    /// Waits until every usage row recorded so far is in the database.
    pub async fn flush(&self) {
        let (tx, rx) = oneshot::channel();
        if self.inner.recorder.send(ToRecorder::Flush(tx)).is_ok() {
            let _ = rx.await;
        }
    }

    fn slot(&self, caller: &str) -> std::result::Result<OwnedSemaphorePermit, u32> {
        let max = self
            .inner
            .settings
            .limits_for(caller)
            .max_concurrent
            .unwrap_or(1)
            .max(1);
        let sem = {
            let mut slots = self
                .inner
                .slots
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            slots
                .entry(caller.to_string())
                .or_insert_with(|| Arc::new(Semaphore::new(max as usize)))
                .clone()
        };
        sem.try_acquire_owned().map_err(|_| max)
    }

    /// Tokens the caller used today, loading the day's sum on first use.
    async fn spent_today(&self, caller: &str) -> Result<u64> {
        let today = usage::today();
        if let Some((day, n)) = self
            .inner
            .spent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(caller)
            && *day == today
        {
            return Ok(*n);
        }
        let (c, d) = (caller.to_string(), today.clone());
        let n = self
            .inner
            .store
            .read(move |conn| store::usage::tokens_on(conn, &c, &d, None))
            .await?;
        let mut spent = self
            .inner
            .spent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let entry = spent
            .entry(caller.to_string())
            .or_insert((today.clone(), n));
        if entry.0 != today {
            *entry = (today, n);
        }
        Ok(entry.1)
    }

    fn add_spent(&self, caller: &str, day: &str, tokens: u64) {
        let mut spent = self
            .inner
            .spent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match spent.get_mut(caller) {
            Some((d, n)) if d == day => *n += tokens,
            // Not loaded yet (or a new day): the next check loads from the store.
            _ => {}
        }
    }

    fn record(&self, r: Record) {
        self.add_spent(&r.caller, &r.day, r.tokens.billable());
        tracing::info!(
            caller = %r.caller, model = %r.model, status = r.status, outcome = r.outcome.as_str(),
            input_tokens = r.tokens.input, output_tokens = r.tokens.output, duration_ms = r.duration_ms,
            "model request"
        );
        let _ = self.inner.recorder.send(ToRecorder::Row(r));
    }
}

/// Why a call the host makes for itself ([`Gateway::complete`]) got no
/// answer.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// A daily budget is used up: nothing helps before 00:00 UTC.
    #[error("{0}")]
    OverBudget(String),
    /// The provider answered with an error, or the answer was unreadable.
    #[error("{0}")]
    Failed(String),
}

/// Largest answer [`Gateway::complete`] reads.
const MAX_ANSWER: usize = 16 << 20;

impl Gateway {
    /// One non-streaming `POST /v1/messages` the host makes for itself
    /// (memory extraction), accounted to `caller` under `purpose` exactly
    /// like an agent's request: the caller's daily budget
    /// (`gateway.daily_tokens`) is checked first, then `cap`, the tokens
    /// this purpose may use per day (`memory.daily_tokens`), with the
    /// request's own estimated size; a usage row is written whatever the
    /// end. It takes none of the caller's concurrency
    /// slots, so it never holds up the agent's own requests.
    pub async fn complete(
        &self,
        caller: &GroupFolder,
        purpose: usage::Purpose,
        cap: Option<(u64, &str)>,
        body: serde_json::Value,
    ) -> std::result::Result<serde_json::Value, CallError> {
        use futures_util::StreamExt;
        let started = Instant::now();
        let settings = &self.inner.settings;
        let requested = body["model"].as_str().unwrap_or_default().to_string();
        let model = match &settings.model {
            Some(m) if self.provider_name() == "anthropic" => m.clone(),
            _ => requested,
        };
        let mut body = body;
        body["model"] = serde_json::Value::String(model.clone());
        body["stream"] = serde_json::Value::Bool(false);
        let mut rec = Record {
            caller: caller.to_string(),
            purpose,
            provider: self.provider_name().to_string(),
            model: model.clone(),
            tokens: Tokens::default(),
            duration_ms: 0,
            status: StatusCode::TOO_MANY_REQUESTS.as_u16(),
            outcome: Outcome::Refused,
            streamed: false,
            started_at: crate::now_rfc3339(),
            day: usage::today(),
        };
        let over = |why: String, mut rec: Record| {
            rec.duration_ms = started.elapsed().as_millis() as u64;
            self.record(rec);
            Err(CallError::OverBudget(why))
        };
        let read_err = |e: Error| CallError::Failed(format!("reading usage: {e}"));
        if let Some(budget) = settings.limits_for(caller).daily_tokens {
            let spent = self.spent_today(caller).await.map_err(read_err)?;
            if spent >= budget {
                let why = format!(
                    "{caller} used {spent} of its {budget} tokens for today (gateway.daily_tokens); \
                     the budget resets at 00:00 UTC"
                );
                return over(why, rec);
            }
        }
        if let Some((cap, setting)) = cap {
            let (c, d) = (caller.to_string(), rec.day.clone());
            let spent = self
                .inner
                .store
                .read(move |conn| store::usage::tokens_on(conn, &c, &d, Some(purpose)))
                .await
                .map_err(read_err)?;
            // The request's own size counts before it is sent (4 bytes a
            // token), so a cap is not overrun by the call that crosses it.
            let asking = offline::estimate_tokens(body.to_string().len());
            if spent + asking > cap {
                let why = format!(
                    "{caller} used {spent} of its {cap} {} tokens for today ({setting}) \
                     and the next request needs about {asking}; it resumes after 00:00 UTC",
                    purpose.as_str()
                );
                return over(why, rec);
            }
        }
        let mreq = ModelRequest {
            path_and_query: "/v1/messages".into(),
            headers: anthropic::forwardable(&axum::http::HeaderMap::new()),
            body: Bytes::from(body.to_string()),
            model,
            stream: false,
        };
        let reply = self.inner.provider.messages(mreq).await;
        rec.status = reply.status.as_u16();
        let mut meter = meter::Meter::new(false);
        let mut answer = Vec::new();
        let mut broken = None;
        let mut stream = reply.body;
        while let Some(chunk) = stream.next().await {
            match chunk {
                Ok(c) if answer.len() + c.len() <= MAX_ANSWER => {
                    meter.feed(&c);
                    answer.extend_from_slice(&c);
                }
                Ok(_) => {
                    broken = Some(format!("the answer is larger than {MAX_ANSWER} bytes"));
                    break;
                }
                Err(e) => {
                    broken = Some(format!("the answer broke off: {e}"));
                    break;
                }
            }
        }
        meter.finish();
        rec.tokens = meter.tokens;
        rec.duration_ms = started.elapsed().as_millis() as u64;
        rec.outcome = if reply.status.is_success() && broken.is_none() {
            Outcome::Ok
        } else {
            Outcome::Error
        };
        self.record(rec);
        if let Some(why) = broken {
            return Err(CallError::Failed(why));
        }
        let value: serde_json::Value = serde_json::from_slice(&answer).map_err(|e| {
            CallError::Failed(format!("the answer ({}) is not JSON: {e}", reply.status))
        })?;
        if !reply.status.is_success() {
            let msg = value["error"]["message"].as_str().unwrap_or("no message");
            return Err(CallError::Failed(format!(
                "the model answered {}: {msg}",
                reply.status
            )));
        }
        Ok(value)
    }
}

/// Writes usage rows in order; a failed write is logged, not retried (the
/// answer was already delivered).
async fn record_loop(store: Store, mut rx: mpsc::UnboundedReceiver<ToRecorder>) {
    while let Some(msg) = rx.recv().await {
        match msg {
            ToRecorder::Row(r) => {
                if let Err(e) = store.write(move |tx| store::usage::insert(tx, &r)).await {
                    tracing::error!(error = %e, "recording model usage failed");
                }
            }
            ToRecorder::Flush(done) => {
                let _ = done.send(());
            }
        }
    }
}

#[derive(Clone)]
struct Handler {
    gw: Gateway,
    caller: Arc<str>,
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
) -> std::result::Result<Bytes, BodyError> {
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

fn relay_now(reply: Reply) -> Response {
    let mut resp = Body::from_stream(reply.body).into_response();
    *resp.status_mut() = reply.status;
    *resp.headers_mut() = reply.headers;
    resp
}

/// Relays a provider's body and records usage when it ends or is dropped.
struct Metered {
    inner: provider::ByteStream,
    meter: meter::Meter,
    ok: bool,
    rec: Option<Record>,
    gw: Gateway,
    started: Instant,
    /// Held until the answer is complete: the concurrency slot.
    _permit: Option<OwnedSemaphorePermit>,
    count_only: bool,
}

impl Metered {
    fn finish(&mut self, outcome: Outcome) {
        let Some(mut rec) = self.rec.take() else {
            return;
        };
        self.meter.finish();
        rec.tokens = if self.count_only {
            Tokens::default()
        } else {
            self.meter.tokens
        };
        rec.outcome = if outcome == Outcome::Ok && (!self.ok || self.meter.stream_error) {
            Outcome::Error
        } else {
            outcome
        };
        rec.duration_ms = self.started.elapsed().as_millis() as u64;
        self.gw.record(rec);
    }
}

impl Stream for Metered {
    type Item = std::result::Result<Bytes, std::io::Error>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        match this.inner.as_mut().poll_next(cx) {
            Poll::Ready(Some(Ok(chunk))) => {
                this.meter.feed(&chunk);
                Poll::Ready(Some(Ok(chunk)))
            }
            Poll::Ready(Some(Err(e))) => {
                tracing::warn!(error = %e, "provider stream broke off");
                this.ok = false;
                this.finish(Outcome::Error);
                Poll::Ready(Some(Err(e)))
            }
            Poll::Ready(None) => {
                this.finish(Outcome::Ok);
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Drop for Metered {
    fn drop(&mut self) {
        // Dropped before the end: the caller went away.
        self.finish(Outcome::Cancelled);
    }
}
