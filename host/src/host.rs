//! The host's wiring. [`Host::start`] builds what `g2 serve` runs, in one
//! order: the store, the model gateway, the lock on the home (before any
//! container is reaped or socket bound), the agents on the Docker engine,
//! the group queue and the channels, the HTTP API (served from here on, so
//! `/health` answers during the rest), the start-up recovery of recall's
//! index (in the background), the cluster's leases, the agents' request
//! server, every group's gateway socket, the scheduler, memory's jobs and
//! redelivery; [`Host::stop`] takes it down in one order, within
//! [`STOP_WITHIN`] when nothing is in flight. `g2 run` and `g2 gateway`
//! build their pieces with the functions here, not copies.
//!
//! API boundary: the CLI (host/src/cli/) calls in and prints; nothing here
//! writes to the terminal except through a [`Report`].

use std::fmt::{self, Write as _};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio::task::JoinHandle;

use g2_core::validate::GroupFolder;

use crate::agent::Agents;
use crate::api::Api;
use crate::background::Background;
use crate::channels::Channels;
use crate::config::Settings;
use crate::container::docker::DockerRuntime;
use crate::container::image;
use crate::gateway::{Choice, Gateway, Hooks, Listening};
use crate::home::Home;
use crate::lock::HostLock;
use crate::requests::{Links, RequestServer};
use crate::routing::queue::{self, QueueHandle};
use crate::sessions::SessionManager;
use crate::store::{self, Store};
use crate::tasks::scheduler;
use crate::{Error, Result};

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
    /// The memory capture's recovery jobs.
    recovery: Background,
    /// The memory processor (observations and summaries).
    processor: Background,
    /// The embedding jobs (none when recall is lexical).
    embedder: Option<Background>,
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
        let addr = api_address(settings, listen)?;
        let store = open_store(home, settings).await?;
        // Hosts sharing a home hear of each other's messages only through
        // PostgreSQL (docs/cluster.md).
        if settings.cluster.runtime_dir.is_some() && store.dialect() == store::Dialect::Sqlite {
            return Err(Error::Startup(
                "cluster.runtime_dir is for several hosts on one home, which share a PostgreSQL store (store.url); on SQLite one host serves the home".into(),
            ));
        }
        let (gateway, choice) = gateway(home, settings, &store)?;
        // Before any container is reaped or socket bound: one host per home.
        let mut lock = HostLock::acquire(home, "serve")?;
        let runtime = agent_runtime(home, settings, report).await?;
        let (queue, inbox) = queue::channel();
        let tasks_changed = Arc::new(Notify::new());
        let telegram = telegram(home, settings, &store)?;
        let whatsapp = whatsapp(home, settings, &store)?;
        let discord = discord(home, settings, &store)?;
        let slack = slack(home, settings, &store)?;
        let sessions = sessions(home, settings, &store);
        // The log is cleaned with what archives and memory are.
        let mut channels = Channels::new(store.clone())
            .with_redactor(sessions.redactor().clone())
            .with_text_limit(settings.channels.max_text_bytes, &settings.assistant_name)
            .with_router(queue.wake_sender());
        if let Some(tg) = &telegram {
            channels = channels.with(tg.clone());
        }
        if let Some(wa) = &whatsapp {
            channels = channels.with(wa.clone());
        }
        if let Some(dc) = &discord {
            channels = channels.with(dc.clone());
        }
        if let Some(sl) = &slack {
            channels = channels.with(sl.clone());
        }
        let agents = Arc::new(agents(
            home,
            settings,
            &store,
            sessions.clone(),
            runtime,
            &gateway,
        ));
        for name in agents.reap().await? {
            tracing::warn!(target: LOG, container = %name, "removed a container left by an earlier host");
        }
        for g in store.read(store::groups::list).await? {
            // Every group counted once in the background, for its status
            // and its next start. What an earlier host left in a group
            // (claimed events, unsettled archives) is taken up by whoever
            // takes the group's lease next (`Agents::adopt`, by the queue).
            agents.disk().want(&g.folder);
        }
        let closer = queue.clone();
        let intake = agents.clone();
        // One intake per group at a time; a ring during it asks for one
        // more pass (a burst of files is then listed once, not per file).
        let taking: Arc<std::sync::Mutex<std::collections::HashMap<GroupFolder, bool>>> =
            Arc::default();
        let links = Links {
            channels: channels.clone(),
            assistant_name: settings.assistant_name.clone(),
            session_changed: Some(Arc::new(move |f: &GroupFolder| closer.close(f))),
            tasks_changed: Some(tasks_changed.clone()),
            // What the hooks capture is taken in as it comes, not when the
            // (warm) container exits.
            events_arrived: Some(Arc::new(move |f: &GroupFolder| {
                {
                    let mut t = taking
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    if let Some(again) = t.get_mut(f) {
                        *again = true;
                        return;
                    }
                    t.insert(f.clone(), false);
                }
                let (agents, taking, f) = (intake.clone(), taking.clone(), f.clone());
                tokio::spawn(async move {
                    loop {
                        if let Err(e) = agents.take_events(&f).await {
                            tracing::warn!(group = %f, error = %e, "taking in agent events");
                        }
                        let mut t = taking
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner);
                        if t.get(&f) == Some(&true) {
                            t.insert(f.clone(), false);
                        } else {
                            t.remove(&f);
                            break;
                        }
                    }
                });
            })),
        };
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| context(format_args!("binding {addr}"), &e))?;
        let bound = listener.local_addr().map_err(|e| message(&e))?;
        // Served at once, before the slower start-up work below: `/health`
        // answers while the host starts and recovers. What a request asks
        // of the queue waits in its channel until the queue runs.
        let server = serve_api(
            Api {
                home: home.clone(),
                store: store.clone(),
                sessions: agents.sessions().clone(),
                assistant_name: settings.assistant_name.clone(),
                provider: choice.kind.as_str().to_string(),
                token: settings.api.token.clone(),
                channels: channels.clone(),
                queue: Some(queue.clone()),
                container: settings.container.clone(),
                disk: agents.disk().clone(),
                memory: settings.memory.clone(),
                gateway: settings.gateway.clone(),
                port: bound.port(),
                lease_secs: settings.cluster.lease_secs,
                settings: Arc::new(settings.clone()),
                backoff: Default::default(),
            },
            // WhatsApp's webhook: what it stores waits for the router.
            whatsapp.map(|wa| crate::channels::whatsapp::webhook::Webhook {
                whatsapp: wa,
                channels: channels.clone(),
            }),
            listener,
            crate::http::Limits::from(&settings.api),
        );
        lock.set_api(&format!("http://{bound}"))?;
        // This host's groups (all of them, alone on the store): a group
        // taken from another host has what waits routed, one lost has its
        // container closed.
        let cluster = {
            let (wake, close, unserve) = (queue.clone(), queue.clone(), agents.clone());
            crate::cluster::start(
                store.clone(),
                &settings.cluster,
                &format!("http://{bound}"),
                Arc::new(move |f: &GroupFolder| wake.wake(f)),
                Arc::new(move |f: &GroupFolder| {
                    close.close(f);
                    let (agents, f) = (unserve.clone(), f.clone());
                    tokio::spawn(async move { agents.release_socket(&f).await });
                }),
            )
            .await?
        };
        // What the other hosts store: a message posted there for a group
        // of this host wakes it here, and every message reaches the live
        // streams here too.
        let follow = follow_others(&store, &queue, &channels);
        // The requests of this host's groups, including what an earlier
        // holder left unanswered.
        let requests = request_server(home, &store, sessions, links)
            .with_leases(cluster.leases().clone())
            .watch_all()?;
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
        // A pass at start: what a killed host or a dead container left.
        let recovery = crate::memory::recovery::start(store.clone(), settings.memory.clone());
        // Extraction goes through the gateway's provider, accounted to the
        // group under purpose `memory` (the offline model answers it with
        // its rules).
        let processor = crate::memory::process::start(
            store.clone(),
            settings.memory.clone(),
            Arc::new(crate::memory::extract::model::ModelExtractor::new(
                gateway.clone(),
                settings.memory.clone(),
            )),
            Arc::new(Notify::new()),
            cluster.leases().host_id().to_string(),
        );
        // Recall by meaning: the model is loaded once, the jobs embed in
        // the background (memory::embed).
        let embedder = {
            let (root, m) = (home.root().to_path_buf(), settings.memory.clone());
            tokio::task::spawn_blocking(move || crate::memory::embed::init(&root, &m))
                .await?
                .map(|model| crate::memory::embed::start(store.clone(), model))
        };
        let groups = catch_up(&store, &channels, &queue).await?;
        // Updates are taken in once the router and the queue are up.
        // Each on one host of the cluster at a time (its lease).
        let hold = |name: &'static str, start: crate::cluster::singleton::Start| {
            crate::cluster::singleton::hold(cluster.leases().clone(), name, start)
        };
        let inbound: Vec<Background> = [
            telegram.map(|tg| {
                let (ch, s) = (channels.clone(), settings.channels.telegram.clone());
                hold(
                    "telegram",
                    Box::new(move || tg.start(ch.clone(), s.clone())),
                )
            }),
            discord.map(|dc| {
                let ch = channels.clone();
                hold("discord", Box::new(move || dc.start(ch.clone())))
            }),
            slack.map(|sl| {
                let ch = channels.clone();
                hold("slack", Box::new(move || sl.start(ch.clone())))
            }),
        ]
        .into_iter()
        .flatten()
        .collect();
        // Archives recorded before passages existed become recallable, in
        // the background (an archive per transaction, progress in the log),
        // once the rest has started: its writes do not slow the start.
        let indexing = crate::memory::recall::indexing::start(store.clone());
        tracing::info!(target: LOG, addr = %bound, groups, "serving");
        Ok(Host {
            api: bound,
            provider: choice.reason,
            server,
            schedule,
            indexing,
            recovery,
            processor,
            embedder,
            inbound,
            channels,
            queue,
            requests,
            worker,
            disk: agents.disk().clone(),
            gateway,
            agents: agents.clone(),
            follow,
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
        jobs.extend([self.schedule, self.indexing, self.recovery, self.processor]);
        jobs.extend(self.embedder);
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

/// Serves the API and the viewer (and WhatsApp's webhook) on `listener`
/// until stopped.
fn serve_api(
    api: Api,
    webhook: Option<crate::channels::whatsapp::webhook::Webhook>,
    listener: tokio::net::TcpListener,
    limits: crate::http::Limits,
) -> Background {
    let router = router(api, webhook);
    Background::spawn(|stopped| async move {
        crate::http::serve(listener, router, limits, async move {
            let _ = stopped.await;
        })
        .await;
    })
}

/// The API's address: `listen`, else `api.listen`; a non-loopback address
/// needs a token.
fn api_address(settings: &Settings, listen: Option<&str>) -> Result<SocketAddr> {
    let addr: SocketAddr = listen
        .unwrap_or(&settings.api.listen)
        .parse()
        .map_err(|e| context("api listen address: use IP:PORT", &e))?;
    crate::api::auth::check_bind(&addr, settings.api.token.as_deref())?;
    Ok(addr)
}

/// What the HTTP server serves: the API, and the viewer's pages beside it
/// under the same access rules. Joined here, above both, so that the
/// viewer depends on the API (its state and auth) and the API on nothing
/// of the viewer.
fn router(api: Api, webhook: Option<crate::channels::whatsapp::webhook::Webhook>) -> axum::Router {
    let pages = crate::viewer::routes(&api);
    let router = api.router(pages);
    // Outside the API's token and loopback checks: Meta reaches it through
    // the user's proxy, and each POST carries its own signature.
    match webhook {
        Some(w) => crate::channels::whatsapp::webhook::routes(w).merge(router),
        None => router,
    }
}

/// Routes again what was stored but not delivered or answered before a
/// crash; returns how many groups are registered.
async fn catch_up(store: &Store, channels: &Channels, queue: &QueueHandle) -> Result<usize> {
    channels.redeliver().await?;
    let groups = store.read(store::groups::list).await?;
    for g in &groups {
        queue.wake(&g.folder);
    }
    Ok(groups.len())
}

/// The Discord channel, when `[channels.discord]` is enabled: its token
/// must be set.
fn discord(
    home: &Home,
    settings: &Settings,
    store: &Store,
) -> Result<Option<Arc<crate::channels::discord::Discord>>> {
    use crate::channels::discord::{self, Discord};
    let dc = &settings.channels.discord;
    if !dc.enabled {
        return Ok(None);
    }
    let token = discord::token(home.root()).ok_or_else(|| {
        Error::Startup(format!(
            "channels.discord is enabled but {} is not set (in the environment or {})",
            discord::TOKEN_VARIABLE,
            home.root().join(".env").display()
        ))
    })?;
    Ok(Some(Discord::new(dc, token, store.clone())?))
}

/// The Telegram channel, when `[channels.telegram]` is enabled: its
/// token must be set.
fn telegram(
    home: &Home,
    settings: &Settings,
    store: &Store,
) -> Result<Option<Arc<crate::channels::telegram::Telegram>>> {
    use crate::channels::telegram::{self, Telegram};
    let tg = &settings.channels.telegram;
    if !tg.enabled {
        return Ok(None);
    }
    let token = telegram::token(home.root()).ok_or_else(|| {
        Error::Startup(format!(
            "channels.telegram is enabled but {} is not set (in the environment or {})",
            telegram::TOKEN_VARIABLE,
            home.root().join(".env").display()
        ))
    })?;
    Ok(Some(Telegram::new(tg, &token, store.clone())?))
}

/// The WhatsApp channel, when `[channels.whatsapp]` is enabled: its
/// settings must name the number, and its three credentials be set.
fn whatsapp(
    home: &Home,
    settings: &Settings,
    store: &Store,
) -> Result<Option<Arc<crate::channels::whatsapp::WhatsApp>>> {
    use crate::channels::whatsapp::{Credentials, WhatsApp};
    let wa = &settings.channels.whatsapp;
    if !wa.enabled {
        return Ok(None);
    }
    let credentials = Credentials::find(home.root()).map_err(|missing| {
        Error::Startup(format!(
            "channels.whatsapp is enabled but {} {} not set (in the environment or {})",
            missing.join(", "),
            if missing.len() == 1 { "is" } else { "are" },
            home.root().join(".env").display()
        ))
    })?;
    Ok(Some(WhatsApp::new(wa, credentials, store.clone())?))
}

/// The Slack channel, when `[channels.slack]` is enabled: both its tokens
/// must be set.
fn slack(
    home: &Home,
    settings: &Settings,
    store: &Store,
) -> Result<Option<Arc<crate::channels::slack::Slack>>> {
    use crate::channels::slack::{Credentials, Slack};
    let sl = &settings.channels.slack;
    if !sl.enabled {
        return Ok(None);
    }
    let credentials = Credentials::find(home.root()).map_err(|why| {
        Error::Startup(format!(
            "channels.slack is enabled but {why} (in the environment or {})",
            home.root().join(".env").display()
        ))
    })?;
    Ok(Some(Slack::new(sl, credentials, store.clone())?))
}

/// The store `store.url` names (the home's `data/g2.db` by default), with
/// the settings' busy timeout.
pub async fn open_store(home: &Home, settings: &Settings) -> Result<Store> {
    Store::open_url_async(
        settings.store.url.clone(),
        home.db_path(),
        Duration::from_millis(settings.store.busy_timeout_ms),
    )
    .await
    .map_err(|e| {
        context(
            format_args!("opening {}", home.store_name(&settings.store.url)),
            &e,
        )
    })
}

/// The model gateway with the provider the settings and environment
/// select, and what memory serves through it: each group socket's hook
/// routes (`memory::context`) and the offline model's answer to the host's
/// extraction requests (`memory::extract::model`). Must be called inside a
/// Tokio runtime.
pub fn gateway(home: &Home, settings: &Settings, store: &Store) -> Result<(Gateway, Choice)> {
    let (routes_store, memory) = (store.clone(), settings.memory.clone());
    let hooks = Hooks {
        group_routes: Some(Arc::new(move |folder: &GroupFolder| {
            crate::memory::context::routes(routes_store.clone(), folder.clone(), memory.clone())
        })),
        offline: Some(crate::memory::extract::model::answer_offline),
    };
    Gateway::new(&settings.gateway, home, store.clone(), hooks)
}

/// The groups' session pointers and history.
pub fn sessions(home: &Home, settings: &Settings, store: &Store) -> SessionManager {
    SessionManager::new(
        store.clone(),
        home.clone(),
        settings.archive_options(&crate::gateway::credentials::redactor(
            home.root(),
            settings,
        )),
    )
}

/// The agents, run on the Docker engine through the gateway.
pub fn agents(
    home: &Home,
    settings: &Settings,
    store: &Store,
    sessions: SessionManager,
    runtime: DockerRuntime,
    gateway: &Gateway,
) -> Agents {
    Agents::new(
        home.clone(),
        settings.clone(),
        store.clone(),
        sessions,
        Arc::new(runtime),
        gateway.clone(),
    )
}

/// The server of the agents' requests, acting through `links`.
pub fn request_server(
    home: &Home,
    store: &Store,
    sessions: SessionManager,
    links: Links,
) -> RequestServer {
    RequestServer::new(home.clone(), store.clone(), sessions, links)
}

/// Settles (or removes) what a host killed while archiving left in each
/// group's `conversations/` (`archives::reconcile`). Run by the home's
/// lock holder, before anything archives.
pub async fn reconcile_archives(home: &Home, store: &Store) -> Result<()> {
    let (home, store) = (home.clone(), store.clone());
    tokio::task::spawn_blocking(move || {
        for g in store.read_blocking(store::groups::list)? {
            if let Err(e) = crate::archives::reconcile(&home, &store, &g.folder) {
                tracing::warn!(group = %g.folder, error = %e, "settling archives left by a crash");
            }
        }
        Ok(())
    })
    .await?
}

/// The agents of `g2 run`: each run's requests are watched while it runs,
/// and reach only the message log (no queue or scheduler runs there).
pub fn run_agents(
    home: &Home,
    settings: &Settings,
    store: Store,
    runtime: DockerRuntime,
    gateway: &Gateway,
) -> Agents {
    let sessions = sessions(home, settings, &store);
    let links = Links {
        channels: Channels::new(store.clone())
            .with_redactor(sessions.redactor().clone())
            .with_text_limit(settings.channels.max_text_bytes, &settings.assistant_name),
        assistant_name: settings.assistant_name.clone(),
        session_changed: None,
        tasks_changed: None,
        events_arrived: None,
    };
    let requests = request_server(home, &store, sessions.clone(), links);
    agents(home, settings, &store, sessions, runtime, gateway)
        .with_run_watch(Arc::new(move |folder: &GroupFolder| requests.watch(folder)))
}

/// Serves every registered group's gateway socket; (folder, listener).
pub async fn group_sockets(
    home: &Home,
    gateway: &Gateway,
    store: &Store,
) -> Result<Vec<(GroupFolder, Listening)>> {
    let mut sockets = Vec::new();
    for g in store.read(store::groups::list).await? {
        let l = gateway.listen_group(home, &g.folder).await?;
        sockets.push((g.folder, l));
    }
    Ok(sockets)
}

/// Stops the listeners (all at once), then waits for the last usage rows.
pub async fn stop_gateway(gateway: Gateway, listeners: Vec<Listening>) {
    futures_util::future::join_all(listeners.into_iter().map(Listening::stop)).await;
    gateway.flush().await;
}

/// The Docker engine, with the agent image built if there is none yet.
pub async fn agent_runtime(
    home: &Home,
    settings: &Settings,
    report: &dyn Report,
) -> Result<DockerRuntime> {
    let runtime = DockerRuntime::connect().await.map_err(|e| {
        context(
            "the Docker engine does not answer (scripts/setup.sh starts one)",
            &e,
        )
    })?;
    if image::current_digest(runtime.docker()).await.is_none() {
        report.note("no agent image yet; building it");
        let built = build_image(home, settings, None, false, report).await?;
        report.result(&built.to_string());
    }
    Ok(runtime)
}

/// What [`build_image`] did, and in how long; displays as its one line.
pub struct ImageBuild {
    pub outcome: image::Built,
    pub took: Duration,
}

impl fmt::Display for ImageBuild {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.outcome {
            image::Built::UpToDate(d) => {
                write!(f, "{} is up to date (inputs {})", image::IMAGE, &d[..12])
            }
            image::Built::Built(d) => write!(
                f,
                "built {} in {:.1} s (inputs {})",
                image::IMAGE,
                self.took.as_secs_f64(),
                &d[..12]
            ),
        }
    }
}

/// Builds the agent image from Claude Code and a static g2-agent (`agent`,
/// else built with cargo in this checkout); skipped when an image with the
/// same inputs exists, unless `force`. The engine's output goes to
/// `report` as notes.
pub async fn build_image(
    home: &Home,
    settings: &Settings,
    agent: Option<PathBuf>,
    force: bool,
    report: &dyn Report,
) -> Result<ImageBuild> {
    let claude = crate::doctor::find_claude(home, settings).ok_or_else(|| {
        Error::Invalid(
            "Claude Code not found (run scripts/setup.sh or set claude_code.path)".into(),
        )
    })?;
    let agent = match agent {
        Some(a) => a,
        None => {
            let root = image::project_root().ok_or_else(|| {
                Error::Invalid(
                    "this g2 was not built from a checkout; pass --agent with a static g2-agent binary"
                        .into(),
                )
            })?;
            report.note(&format!(
                "building the static g2-agent (cargo, --target {})…",
                image::AGENT_TARGET
            ));
            tokio::task::spawn_blocking(move || image::build_agent(&root)).await??
        }
    };
    let inputs =
        tokio::task::spawn_blocking(move || image::Inputs::gather(agent, &claude)).await??;
    let docker = bollard::Docker::connect_with_defaults()
        .map_err(|e| message(&e))?
        .negotiate_version()
        .await
        .map_err(|e| context("no Docker engine answers (run scripts/setup.sh)", &e))?;
    let started = Instant::now();
    let outcome = image::build(&docker, inputs, force, |line| {
        report.note(&format!("  {line}"));
    })
    .await?;
    Ok(ImageBuild {
        outcome,
        took: started.elapsed(),
    })
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

/// Follows what the other hosts store (`cluster::notify`): a message for a
/// group wakes this host's queue (which acts only on its own groups), and
/// every message is published to the live streams here.
fn follow_others(store: &Store, queue: &QueueHandle, channels: &Channels) -> Option<Background> {
    let (s1, s2, q1, q2, ch) = (
        store.clone(),
        store.clone(),
        queue.clone(),
        queue.clone(),
        channels.clone(),
    );
    crate::cluster::notify::follow(
        store,
        crate::cluster::notify::Follow {
            inbound: Arc::new(move |chat: &str| {
                let (store, queue, chat) = (s1.clone(), q1.clone(), chat.to_string());
                tokio::spawn(async move {
                    let found = store.read(move |c| store::groups::by_jid(c, &chat)).await;
                    if let Ok(Some(g)) = found {
                        queue.wake(&g.folder);
                    }
                });
            }),
            stored: Arc::new(move || {
                let ch = ch.clone();
                tokio::spawn(async move { ch.stored_elsewhere().await });
            }),
            missed: Arc::new(move || {
                let (store, queue) = (s2.clone(), q2.clone());
                tokio::spawn(async move {
                    for g in store.read(store::groups::list).await.unwrap_or_default() {
                        queue.wake(&g.folder);
                    }
                });
            }),
        },
    )
}
