//! The parts `g2 serve`, `g2 run` and `g2 gateway` build alike: the
//! store, the model gateway and its group sockets, the session manager,
//! the agents on the Docker engine, the request server, and the archives
//! a crash left unsettled.

use std::sync::Arc;
use std::time::Duration;

use g2_core::validate::GroupFolder;

use crate::agent::Agents;
use crate::channels::Channels;
use crate::config::Settings;
use crate::container::docker::DockerRuntime;
use crate::container::image;
use crate::gateway::{Choice, Gateway, Hooks, Listening};
use crate::home::Home;
use crate::requests::{Links, RequestServer};
use crate::sessions::SessionManager;
use crate::store::{self, Store};
use crate::{Error, Result};

use super::{Report, build_image, context};

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

/// Hosts sharing a home (`cluster.runtime_dir`) hear of each other's
/// messages only through PostgreSQL (docs/cluster.md): on SQLite one host
/// serves the home.
pub(super) fn check_shared_home(settings: &Settings, store: &Store) -> Result<()> {
    if settings.cluster.runtime_dir.is_some() && store.dialect() == store::Dialect::Sqlite {
        return Err(Error::Startup(
            "cluster.runtime_dir is for several hosts on one home, which share a PostgreSQL store (store.url); on SQLite one host serves the home".into(),
        ));
    }
    Ok(())
}

/// The model gateway with the provider the settings and environment
/// select, and what memory serves through it: each group socket's hook
/// routes (`memory::context`), the prompts' memory put into the group's
/// model requests (`memory::attach`) and the offline model's answer to the
/// host's extraction requests (`memory::extract::model`). Must be called inside a
/// Tokio runtime.
pub fn gateway(home: &Home, settings: &Settings, store: &Store) -> Result<(Gateway, Choice)> {
    let (routes_store, memory) = (store.clone(), settings.memory.clone());
    let attachments = crate::memory::attach::Attachments::new();
    let made = attachments.clone();
    let hooks = Hooks {
        group_routes: Some(Arc::new(move |folder: &GroupFolder| {
            crate::memory::context::routes(
                routes_store.clone(),
                folder.clone(),
                memory.clone(),
                made.clone(),
            )
        })),
        offline: Some(crate::memory::extract::model::answer_offline),
        attach: Some(Arc::new(move |folder: GroupFolder, body| {
            let attachments = attachments.clone();
            Box::pin(async move { attachments.fill(&folder, body).await })
        })),
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
