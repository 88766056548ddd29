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
//!
//! Files: `handler.rs` serves the routes (body, limits, hand-over),
//! `metered.rs` relays an answer while `meter.rs` reads its usage,
//! `accounting.rs` keeps the per-caller slots and day totals and writes
//! the usage rows, `complete.rs` is the host's own call
//! ([`Gateway::complete`]), `choice.rs` picks the provider ([`choose`]);
//! this file builds the gateway and its listeners.

mod accounting;
pub mod anthropic;
mod choice;
mod complete;
pub mod credentials;
mod handler;
pub mod meter;
mod metered;
pub mod offline;
pub mod provider;
pub mod usage;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::Request;
use axum::http::StatusCode;
use tokio::sync::{Semaphore, mpsc};

use crate::background::Background;
use crate::config::{GatewaySettings, ProviderKind};
use crate::error::IoContext;
use crate::home::Home;
use crate::store::Store;
use crate::{Error, Result};
use g2_core::validate::GroupFolder;

pub use choice::{Choice, choose};
pub use complete::CallError;
pub use credentials::Credential;
pub use provider::{ModelRequest, Provider, Reply};

struct Inner {
    provider: Arc<dyn Provider>,
    settings: GatewaySettings,
    store: Store,
    slots: Mutex<HashMap<String, Arc<Semaphore>>>,
    /// Tokens used today per caller: (day, tokens). Loaded from the store the
    /// first time a caller is seen on a day, then kept current in memory.
    spent: Mutex<HashMap<String, (String, u64)>>,
    recorder: mpsc::UnboundedSender<accounting::ToRecorder>,
    /// What each group's socket serves beside the model's routes.
    group_routes: Option<GroupRoutes>,
    /// What is put into each model request from a group's socket.
    attach: Option<Attach>,
}

/// The routes a group's socket serves beside the model's, built for each
/// group (the host wires in memory's hook routes, `memory::context`).
pub type GroupRoutes = Arc<dyn Fn(&GroupFolder) -> Router + Send + Sync>;

/// Puts what a group's model request stands in for into it (the host wires
/// in the prompts' memory, `memory::attach`): the request body in, the
/// body to hand the provider out.
pub type Attach = Arc<
    dyn Fn(
            GroupFolder,
            bytes::Bytes,
        ) -> futures_util::future::BoxFuture<'static, (bytes::Bytes, Attached)>
        + Send
        + Sync,
>;

/// What [`Attach`] did to a request, for the turn's trace.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Attached {
    /// Placeholders found.
    pub found: usize,
    /// Of them, given their content (the others say there is none).
    pub given: usize,
    /// One's content was not ready by its deadline (none, for good).
    pub late: bool,
}

/// What other parts of the host serve through the gateway, given when the
/// host is wired (`host::gateway`): the gateway itself knows none of them.
#[derive(Clone, Default)]
pub struct Hooks {
    /// The routes each group's socket serves beside the model's.
    pub group_routes: Option<GroupRoutes>,
    /// What the offline provider asks before its own rules.
    pub offline: Option<offline::Delegate>,
    /// What is put into each model request from a group's socket.
    pub attach: Option<Attach>,
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
    /// A group socket: its home and folder, to remove it at the end, and
    /// its (device, inode): another host's socket put in its place since
    /// (the group moved) is not this one's to remove.
    socket: Option<(Home, GroupFolder, (u64, u64))>,
}

impl Listening {
    /// Whether the group's socket file is still this listener's.
    pub fn is_current(&self) -> bool {
        self.socket.as_ref().is_some_and(|(home, folder, id)| {
            home.ipc_tree(folder)
                .ok()
                .and_then(|t| t.identity(g2_core::ipc::MODEL_SOCKET).ok().flatten())
                == Some((g2_core::confined::Kind::Socket, *id))
        })
    }

    /// The group whose socket this is.
    pub fn group(&self) -> Option<&GroupFolder> {
        self.socket.as_ref().map(|(_, f, _)| f)
    }

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
        if self.is_current()
            && let Some((home, folder, _)) = &self.socket
            && let Ok(tree) = home.ipc_tree(folder)
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
        let gateway = Gateway::build(settings, store, provider, hooks);
        Ok((gateway, choice))
    }

    /// A gateway over any provider (its group sockets serve the model's
    /// routes only).
    pub fn with_provider(
        settings: &GatewaySettings,
        store: Store,
        provider: Arc<dyn Provider>,
    ) -> Gateway {
        Gateway::build(settings, store, provider, Hooks::default())
    }

    fn build(
        settings: &GatewaySettings,
        store: Store,
        provider: Arc<dyn Provider>,
        hooks: Hooks,
    ) -> Gateway {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(accounting::record_loop(store.clone(), rx));
        Gateway {
            inner: Arc::new(Inner {
                provider,
                settings: settings.clone(),
                store,
                slots: Mutex::new(HashMap::new()),
                spent: Mutex::new(HashMap::new()),
                recorder: tx,
                group_routes: hooks.group_routes,
                attach: hooks.attach,
            }),
        }
    }

    pub fn provider_name(&self) -> &'static str {
        self.inner.provider.name()
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
                        Some(why) => handler::relay_now(Reply::error(
                            StatusCode::FORBIDDEN,
                            "permission_error",
                            why,
                        )),
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
        let id = {
            use std::os::unix::fs::MetadataExt;
            let m = std::fs::symlink_metadata(&tmp).ctx(|| format!("reading {}", tmp.display()))?;
            (m.dev(), m.ino())
        };
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
        // The socket is the group's identity: its runner and hooks ask here for the
        // group's own memory (the routes the host wired in).
        let mut router = self.group_router(folder);
        if let Some(routes) = &self.inner.group_routes {
            router = router.merge(routes(folder));
        }
        Ok(Listening {
            address: path.display().to_string(),
            local_addr: None,
            server: Some(self.spawn_server(listener, router)),
            socket: Some((home.clone(), folder.clone(), id)),
        })
    }

    /// Serves `router` on `listener` until stopped, within the
    /// `gateway.*` timeouts and connection bound.
    fn spawn_server<L>(&self, listener: L, router: Router) -> Background
    where
        L: axum::serve::Listener,
        L::Addr: Clone + Send + Sync + 'static,
    {
        let limits = crate::http::Limits::from(&self.inner.settings);
        Background::spawn(|stopped| {
            crate::http::serve(listener, router, limits, async {
                let _ = stopped.await;
            })
        })
    }
}
