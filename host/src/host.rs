//! The host's wiring. [`Host::start`] is the list of what `g2 serve` runs,
//! in one order, each part started by its own module: the store and the
//! model gateway, the lock on the home (before any container is reaped or
//! socket bound), the agents on the Docker engine, the group queue and the
//! channels, the HTTP API (served from here on, so `/health` answers
//! during the rest), the cluster's leases, what the other hosts store, the
//! agents' request server, this host's gateway sockets, the queue, the
//! scheduler, memory's jobs, redelivery, the chats' inbound loops and, last,
//! the start-up recovery of recall's index (in the background);
//! [`Host::stop`] takes it down in one order, within [`STOP_WITHIN`] when
//! nothing is in flight. `g2 run` and `g2 gateway` build their pieces with
//! the same functions, not copies.
//!
//! Files: `parts.rs` (the parts the three commands share), `channels.rs`
//! (the chat platforms, the channels and their loops), `server.rs` (the
//! HTTP server), `image.rs` (the agent image's build).
//!
//! API boundary: the CLI (host/src/cli/) calls in and prints; nothing here
//! writes to the terminal except through a [`Report`].

mod channels;
mod image;
mod parts;
mod server;

use std::fmt::{self, Write as _};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::task::JoinHandle;

use g2_core::validate::GroupFolder;

use crate::agent::Agents;
use crate::background::Background;
use crate::channels::Channels;
use crate::config::Settings;
use crate::gateway::Gateway;
use crate::home::Home;
use crate::lock::HostLock;
use crate::requests::Links;
use crate::routing::queue::{self, QueueHandle};
use crate::store::Store;
use crate::tasks::scheduler;
use crate::{Error, Result};

use channels::{Platforms, catch_up, follow_others};
pub use image::{ImageBuild, build_image};
pub use parts::{
    agent_runtime, agents, gateway, group_sockets, open_store, reconcile_archives, request_server,
    run_agents, sessions, stop_gateway,
};

/// The log target of `g2 serve`'s own lines: the binary's, as `G2_LOG`
/// filters (`g2=info`) know it.
const LOG: &str = "g2";
/// How long a stopping host waits for the replies it still sends.
const OUTBOX_GRACE: Duration = Duration::from_secs(10);

/// Where the wiring says what it does on the way: notes for people (the
/// CLI's stderr) and results (its stdout; today only an image built on
/// the way).
pub trait Report: Sync {
    fn note(&self, line: &str);
    fn result(&self, line: &str);
}

/// A running `g2 serve`: everything [`Host::start`] built, until
/// [`Host::stop`].
pub struct Host {
    api: SocketAddr,
    provider: String,
    /// The HTTP server (API and viewer).
    server: Background,
    schedule: Background,
    /// The start-up recovery of recall's index (`memory::recall::indexing`).
    indexing: Background,
    /// Memory's recovery, processor and embedding jobs.
    memory: crate::memory::jobs::Jobs,
    /// The enabled chat platforms' inbound loops (Telegram's polling,
    /// Discord's gateway, Slack's Socket Mode connection).
    inbound: Vec<Background>,
    /// What sends the replies the queue stores on its way down.
    channels: Channels,
    queue: QueueHandle,
    requests: Background,
    worker: JoinHandle<()>,
    /// Counts the groups' files (stopped once no container runs).
    disk: crate::container::disk::Ledger,
    gateway: Gateway,
    /// Serve the group sockets (this host's groups').
    agents: Arc<Agents>,
    /// What the other hosts store (PostgreSQL's notices).
    follow: Option<Background>,
    /// `media.retention_days`' hourly sweep, when set.
    media_retention: Option<Background>,
    /// This host's leases and heartbeat.
    cluster: crate::cluster::Membership,
    /// Held until the host has stopped: one host per home.
    _lock: HostLock,
}

impl Host {
    /// Builds and starts the host on `listen` (default: `api.listen`).
    pub async fn start(
        home: &Home,
        settings: &Settings,
        listen: Option<&str>,
        report: &dyn Report,
    ) -> Result<Host> {
        home.ensure_layout()?;
        let addr = server::address(settings, listen)?;
        let store = open_store(home, settings).await?;
        parts::check_shared_home(settings, &store)?;
        let (gateway, choice) = gateway(home, settings, &store)?;
        // Before any container is reaped or socket bound: one host per home.
        let mut lock = HostLock::acquire(home, "serve")?;
        let runtime = agent_runtime(home, settings, report).await?;
        let (queue, inbox) = queue::channel();
        let tasks_changed = Arc::new(Notify::new());
        let platforms = Platforms::enabled(home, settings, &store)?;
        let sessions = sessions(home, settings, &store);
        let agents = Arc::new(agents(
            home,
            settings,
            &store,
            sessions.clone(),
            runtime,
            &gateway,
        ));
        let media = crate::media::Media::new(
            home,
            &settings.media,
            &settings.container,
            Some(agents.disk().clone()),
        );
        let channels = platforms.channels(&store, settings, &sessions, &queue, media);
        for name in agents.reap().await? {
            tracing::warn!(target: LOG, container = %name, "removed a container left by an earlier host");
        }
        agents.count_all().await?;
        let links = links(settings, &channels, &queue, &tasks_changed, &agents);
        // Served at once, before the slower start-up work below: `/health`
        // answers while the host starts and recovers. What a request asks
        // of the queue waits in its channel until the queue runs.
        let (listener, bound) = server::bind(addr).await?;
        let api = server::api(
            &agents,
            &store,
            &channels,
            &queue,
            choice.kind.as_str(),
            bound.port(),
        );
        // The request server: `/mcp` acts through it at once (for the group
        // a token names, with the agents' own actions and checks); its
        // watch of the agents' requests starts below, once the cluster
        // says which groups are this host's.
        let requests = request_server(home, &store, sessions, links);
        let server = server::serve(
            api,
            requests.clone(),
            platforms.webhook(&channels),
            listener,
            crate::http::Limits::from(&settings.api),
        );
        lock.set_api(&format!("http://{bound}"))?;
        let cluster = cluster(&store, settings, bound, &queue, &agents).await?;
        // What the other hosts store: a message posted there for a group
        // of this host wakes it here, and every message reaches the live
        // streams here too.
        let follow = follow_others(&store, &queue, &channels);
        // The requests of this host's groups, including what an earlier
        // holder left unanswered.
        let requests = requests.with_leases(cluster.leases().clone()).watch_all()?;
        // The gateway sockets of this host's groups (another's group gets
        // its socket when it becomes this host's and its container starts).
        for f in cluster.leases().held_groups() {
            agents.ensure_socket(&f).await?;
        }
        let worker = queue::Queue::spawn(
            inbox,
            &queue,
            agents.clone(),
            store.clone(),
            // The queue's way to the chats.
            Arc::new(channels.clone()),
            Some(tasks_changed.clone()),
            Some(cluster.leases().clone()),
        );
        let schedule = scheduler::start(
            store.clone(),
            queue.task_sender(),
            tasks_changed,
            Some(cluster.leases().clone()),
        )
        .await?;
        let memory = crate::memory::jobs::start(
            &store,
            home.root(),
            &settings.memory,
            &gateway,
            cluster.leases().host_id(),
        )
        .await?;
        let groups = catch_up(&store, &channels, &queue).await?;
        // Updates are taken in once the router and the queue are up.
        let inbound = platforms.start(&channels, settings, cluster.leases());
        // Archives recorded before passages existed become recallable, in
        // the background (an archive per transaction, progress in the log),
        // once the rest has started: its writes do not slow the start.
        let indexing = crate::memory::recall::indexing::start(store.clone());
        let media_retention = settings
            .media
            .retention_days
            .map(|days| crate::media::retention::start(home.clone(), store.clone(), days));
        tracing::info!(target: LOG, addr = %bound, groups, "serving");
        Ok(Host {
            api: bound,
            provider: choice.reason,
            server,
            schedule,
            indexing,
            memory,
            inbound,
            channels,
            queue,
            requests,
            worker,
            disk: agents.disk().clone(),
            gateway,
            agents: agents.clone(),
            follow,
            media_retention,
            cluster,
            _lock: lock,
        })
    }

    /// The address the HTTP API is bound to.
    pub fn api_address(&self) -> SocketAddr {
        self.api
    }

    /// Which model provider serves the groups, and why (one line).
    pub fn provider(&self) -> &str {
        &self.provider
    }

    /// How many group gateway sockets are served.
    pub async fn group_sockets(&self) -> usize {
        self.agents.sockets_served().await
    }

    /// Stops the host within [`STOP_WITHIN`] when nothing is in flight.
    /// The HTTP API stops accepting first (what it still answers is cut at
    /// the deadline); the background jobs are asked to stop all at once
    /// and a pass under way is abandoned after a second (the store is
    /// transactional: the next start takes up what is left); the queue
    /// lets each container finish its turn and the outbox sends the
    /// replies left (up to 10 s; both only when something is in
    /// flight); then the cluster is left, the request server and the
    /// gateway stop (its last usage rows written), and the lock is released.
    pub async fn stop(self) {
        let began = tokio::time::Instant::now();
        let deadline = began + STOP_WITHIN;
        let api = tokio::spawn(self.server.stop());
        tracing::info!(target: LOG, "shutting down: closing containers");
        let mut jobs = self.inbound;
        jobs.extend(self.follow);
        jobs.extend(self.media_retention);
        jobs.extend([self.schedule, self.indexing]);
        jobs.extend(self.memory.into_backgrounds());
        within(
            began + JOBS_WITHIN,
            "the background jobs",
            futures_util::future::join_all(jobs.into_iter().map(Background::stop)),
        )
        .await;
        self.queue.shutdown().await;
        // No container of this host runs: its groups go to the others now.
        within(
            after(deadline),
            "leaving the cluster (its leases expire on their own)",
            self.cluster.stop(),
        )
        .await;
        self.disk.stop();
        // The last replies go out before the host does (a platform's slow
        // answer is not waited for long: what is left goes at next start).
        if !self.channels.flush(OUTBOX_GRACE).await {
            tracing::warn!(target: LOG, "replies still being sent at shutdown; the next start finishes them");
        }
        within(after(deadline), "the request server", self.requests.stop()).await;
        self.worker.abort();
        let (gateway, agents) = (self.gateway, self.agents);
        within(after(deadline), "the gateway", async move {
            stop_gateway(gateway, agents.take_sockets().await).await;
        })
        .await;
        within(after(deadline), "the API's open connections", api).await;
        tracing::info!(target: LOG, took = ?began.elapsed(), "stopped");
    }
}

/// How long [`Host::stop`] takes at most when nothing is in flight (no
/// container mid-turn, no reply being sent).
pub const STOP_WITHIN: Duration = Duration::from_millis(1600);
/// How long the background jobs have to end their pass, within
/// [`STOP_WITHIN`].
const JOBS_WITHIN: Duration = Duration::from_millis(1000);

/// `deadline`, or a moment from now when what was in flight (turns,
/// replies) took the stop past it.
fn after(deadline: tokio::time::Instant) -> tokio::time::Instant {
    deadline.max(tokio::time::Instant::now() + Duration::from_millis(50))
}

/// Waits for a step of the stop until `deadline`; past it the step is
/// abandoned (the process exits without it) and the log says so.
async fn within(deadline: tokio::time::Instant, what: &str, step: impl Future) {
    if tokio::time::timeout_at(deadline, step).await.is_err() {
        tracing::warn!(target: LOG, "stopping: {what} abandoned at the deadline");
    }
}

/// What the agents' requests reach beyond the request server: the
/// channels; the queue, which closes a group's container when its session
/// changed; the scheduler, told when tasks changed; and the agents, which
/// take in events as they arrive ([`crate::agent::intake`]).
fn links(
    settings: &Settings,
    channels: &Channels,
    queue: &QueueHandle,
    tasks_changed: &Arc<Notify>,
    agents: &Arc<Agents>,
) -> Links {
    let closer = queue.clone();
    Links {
        channels: channels.clone(),
        assistant_name: settings.assistant_name.clone(),
        session_changed: Some(Arc::new(move |f: &GroupFolder| closer.close(f))),
        tasks_changed: Some(tasks_changed.clone()),
        events_arrived: Some(crate::agent::intake(agents.clone())),
    }
}

/// This host's groups (all of them, alone on the store), through leases
/// and the heartbeat: a group taken from another host has what waits
/// routed, one lost has its container closed and its socket let go.
async fn cluster(
    store: &Store,
    settings: &Settings,
    api: SocketAddr,
    queue: &QueueHandle,
    agents: &Arc<Agents>,
) -> Result<crate::cluster::Membership> {
    let (wake, close, unserve) = (queue.clone(), queue.clone(), agents.clone());
    crate::cluster::start(
        store.clone(),
        &settings.cluster,
        &format!("http://{api}"),
        Arc::new(move |f: &GroupFolder| wake.wake(f)),
        Arc::new(move |f: &GroupFolder| {
            close.close(f);
            let (agents, f) = (unserve.clone(), f.clone());
            tokio::spawn(async move { agents.release_socket(&f).await });
        }),
    )
    .await
}

/// An error and its causes as one line (`a: b: c`), the way the CLI prints
/// errors.
fn message(e: &(dyn std::error::Error + 'static)) -> Error {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let _ = write!(text, ": {c}");
        cause = c.source();
    }
    Error::Startup(text)
}

/// What was being done, before the error and its causes.
fn context(what: impl fmt::Display, e: &(dyn std::error::Error + 'static)) -> Error {
    Error::Startup(format!("{what}: {}", message(e)))
}
