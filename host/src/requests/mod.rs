//! The host side of the agents' requests (`data/ipc/{group}/tasks/` and
//! `messages/`): the API boundary is [`RequestServer`] (made with
//! [`RequestServer::new`], run with [`RequestServer::watch_all`] or
//! [`RequestServer::watch`], one request at a time with
//! [`RequestServer::handle`]), [`Links`] (what requests reach beyond the
//! store), [`log`] (what was decided, for the API) and [`parse_request`]
//! (a request file's bytes, for the fuzzer).
//!
//! - `watch`: inotify, rescans, claiming by rename, reading and parsing,
//!   answering in `responses/`, keeping failures in `errors/`;
//! - `authorize`: who may do what, as data, and the one function deciding;
//! - `actions/`: carrying out each action family and the text the agent
//!   reads back.
//!
//! **Identity is the folder.** The group a request acts for is the IPC
//! folder it was found in, never anything in the request.
//!
//! Every request is recorded in `ipc_log` (`crate::store::requests`) with
//! its outcome (`ok`, `refused`, `failed`); refusals are also logged as
//! warnings.

use tokio::sync::mpsc;

use g2_core::wire::{TaskRequest, TaskResponse};

use crate::Error;
use crate::channels::Channels;
use crate::home::Home;
use crate::sessions::SessionManager;
use crate::store::Store;
use g2_core::validate::GroupFolder;

mod actions;
pub mod authorize;
mod watch;

pub use watch::parse_request;

/// The newest `limit` requests found in `folder` (a registered group's or
/// not) and what the host decided, newest first.
pub async fn log(
    store: &Store,
    folder: &str,
    limit: usize,
) -> crate::Result<Vec<crate::store::requests::LogEntry>> {
    let folder = folder.to_string();
    store
        .read(move |c| crate::store::requests::list(c, &folder, limit))
        .await
}

/// Callback with a group's folder.
pub type FolderHook = std::sync::Arc<dyn Fn(&GroupFolder) + Send + Sync>;

/// What the requests reach beyond the store.
#[derive(Clone)]
pub struct Links {
    /// Where `send_message` and its channels go.
    pub channels: Channels,
    /// Name the assistant's messages carry.
    pub assistant_name: String,
    /// A group's session was cleared or resumed: its container should close
    /// after the current turn, so the next message starts accordingly.
    pub session_changed: Option<FolderHook>,
    /// Scheduled tasks changed: the scheduler should look again.
    pub tasks_changed: Option<std::sync::Arc<tokio::sync::Notify>>,
    /// Something may be waiting in a group's `events/` (what its hooks
    /// captured): whoever takes events in should look, now rather than
    /// when the container exits.
    pub events_arrived: Option<FolderHook>,
}

/// Serves the agents' requests (see the module doc).
#[derive(Clone)]
pub struct RequestServer {
    home: Home,
    store: Store,
    sessions: SessionManager,
    links: Links,
    /// [`RequestServer::watch_all`] runs: per-run watches are not needed (and
    /// two drains of one folder at once could reorder its requests).
    watching_all: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// When hosts share the store: only this host's groups are served.
    leases: Option<crate::cluster::Leases>,
}

impl RequestServer {
    /// Must be called inside a Tokio runtime: it also becomes the home's
    /// recorder of planted links, which go to `ipc_log` (action `link`,
    /// outcome `refused`) from a task of their own, since they are found
    /// deep in blocking file code.
    pub fn new(home: Home, store: Store, sessions: SessionManager, links: Links) -> Self {
        let server = RequestServer {
            home,
            store,
            sessions,
            links,
            watching_all: Default::default(),
            leases: None,
        };
        let (planted, mut found) = mpsc::unbounded_channel::<(String, String)>();
        server
            .home
            .on_planted(std::sync::Arc::new(move |folder: &str, what: &str| {
                let _ = planted.send((folder.to_string(), what.to_string()));
            }));
        let recorder = server.clone();
        tokio::spawn(async move {
            while let Some((folder, what)) = found.recv().await {
                recorder.log(&folder, None, "link", "refused", &what).await;
            }
        });
        server
    }

    /// Carries out one request for `folder` (the folder it came from) and
    /// records the outcome in `ipc_log`. `named`: a group the request's
    /// payload names in a field the action does not have (a forged target).
    pub async fn handle(
        &self,
        folder: &GroupFolder,
        req: TaskRequest,
        named: Option<&str>,
    ) -> TaskResponse {
        let action = req.action.name();
        let result = match authorize::forged(&req.action, folder, named) {
            Err(e) => Err(e),
            Ok(()) => self.act(folder, req.action).await,
        };
        let (ok, text, outcome) = match result {
            Ok(text) => (true, text, "ok"),
            Err(Error::Forbidden(why)) => {
                tracing::warn!(group = %folder, action, reason = %why, "agent request refused");
                (false, format!("not allowed: {why}"), "refused")
            }
            Err(e) => {
                tracing::info!(group = %folder, action, error = %e, "agent request failed");
                (false, e.to_string(), "failed")
            }
        };
        let detail = if ok { String::new() } else { text.clone() };
        self.log(folder, Some(&req.request_id), action, outcome, &detail)
            .await;
        TaskResponse {
            request_id: req.request_id,
            ok,
            text,
        }
    }

    async fn log(
        &self,
        folder: &str,
        request_id: Option<&str>,
        action: &str,
        outcome: &str,
        detail: &str,
    ) {
        // The id and an error's text are the agent's words, echoed.
        let clean = |s: &str| self.sessions.redactor().clean(s).into_owned();
        let (f, r, a, o, d) = (
            folder.to_string(),
            request_id.map(clean),
            action.to_string(),
            outcome.to_string(),
            clean(detail),
        );
        let res = self
            .store
            .write(move |tx| crate::store::requests::log(tx, &f, r.as_deref(), &a, &o, &d))
            .await;
        if let Err(e) = res {
            tracing::warn!(error = %e, "could not record an agent request");
        }
    }

    /// This server with every write it makes refused once `folder`'s lease
    /// is no longer this host's at the fence's generation (the store, the
    /// sessions and `send_message`'s channels all write through one guarded
    /// store): what a group's agent asked is carried out only while this
    /// host owns the group.
    fn fenced(&self, folder: &GroupFolder, fence: crate::cluster::Fence) -> Self {
        let f = folder.clone();
        let store = self
            .store
            .guarded(std::sync::Arc::new(move |tx| fence.check(tx, &f)));
        let mut links = self.links.clone();
        links.channels = links.channels.with_store(store.clone());
        RequestServer {
            sessions: self.sessions.with_store(store.clone()),
            store,
            links,
            ..self.clone()
        }
    }

    fn session_changed(&self, folder: &GroupFolder) {
        if let Some(f) = &self.links.session_changed {
            f(folder);
        }
    }

    fn tasks_changed(&self) {
        if let Some(n) = &self.links.tasks_changed {
            n.notify_one();
        }
    }
}
