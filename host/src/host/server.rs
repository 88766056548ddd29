//! The HTTP server of `g2 serve`: the API, the viewer's pages beside it
//! and WhatsApp's webhook, on one listener.

use std::net::SocketAddr;
use std::sync::Arc;

use crate::Result;
use crate::agent::Agents;
use crate::api::Api;
use crate::background::Background;
use crate::channels::Channels;
use crate::channels::whatsapp::webhook::{self, Webhook};
use crate::config::Settings;
use crate::requests::RequestServer;
use crate::routing::queue::QueueHandle;
use crate::store::Store;

use super::{context, message};

/// The API's address: `listen`, else `api.listen`; a non-loopback address
/// needs a token.
pub(super) fn address(settings: &Settings, listen: Option<&str>) -> Result<SocketAddr> {
    let addr: SocketAddr = listen
        .unwrap_or(&settings.api.listen)
        .parse()
        .map_err(|e| context("api listen address: use IP:PORT", &e))?;
    crate::api::auth::check_bind(&addr, settings.api.token.as_deref())?;
    Ok(addr)
}

/// `addr` bound, and the address it is bound to (its port chosen when
/// `addr`'s is 0).
pub(super) async fn bind(addr: SocketAddr) -> Result<(tokio::net::TcpListener, SocketAddr)> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| context(format_args!("binding {addr}"), &e))?;
    let bound = listener.local_addr().map_err(|e| message(&e))?;
    Ok((listener, bound))
}

/// What the API serves from: the agents' home, settings, sessions and
/// disk counts, the store, the channels and the queue; it says `provider`
/// serves the groups and that it listens on `port`.
pub(super) fn api(
    agents: &Agents,
    store: &Store,
    channels: &Channels,
    queue: &QueueHandle,
    provider: &str,
    port: u16,
) -> Api {
    let settings = agents.settings();
    Api {
        home: agents.home().clone(),
        store: store.clone(),
        sessions: agents.sessions().clone(),
        assistant_name: settings.assistant_name.clone(),
        provider: provider.to_string(),
        token: settings.api.token.clone(),
        channels: channels.clone(),
        queue: Some(queue.clone()),
        container: settings.container.clone(),
        disk: agents.disk().clone(),
        memory: settings.memory.clone(),
        gateway: settings.gateway.clone(),
        port,
        lease_secs: settings.cluster.lease_secs,
        settings: Arc::new(settings.clone()),
        backoff: Default::default(),
    }
}

/// Serves the API and the viewer (and WhatsApp's webhook) on `listener`
/// until stopped.
pub(super) fn serve(
    api: Api,
    mcp: RequestServer,
    webhook: Option<Webhook>,
    listener: tokio::net::TcpListener,
    limits: crate::http::Limits,
) -> Background {
    let router = router(api, mcp, webhook);
    Background::spawn(|stopped| async move {
        crate::http::serve(listener, router, limits, async move {
            let _ = stopped.await;
        })
        .await;
    })
}

/// What the HTTP server serves: the API, and the viewer's pages and `/mcp`
/// beside it under the same access rules (`/mcp` then checks its own
/// tokens). Joined here, above them, so that the viewer and `/mcp` depend
/// on the API (its state and auth) and the API on nothing of them.
fn router(api: Api, mcp: RequestServer, webhook: Option<Webhook>) -> axum::Router {
    let pages = crate::viewer::routes(&api).merge(crate::mcp::routes(
        mcp,
        api.store.clone(),
        api.backoff.clone(),
    ));
    let router = api.router(pages);
    // Outside the API's token and loopback checks: Meta reaches it through
    // the user's proxy, and each POST carries its own signature.
    match webhook {
        Some(w) => webhook::routes(w).merge(router),
        None => router,
    }
}
