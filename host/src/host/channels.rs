//! The chats' part of `g2 serve`: the platforms the settings enable (each
//! with its credentials), the [`Channels`] that store, publish and send for
//! all of them, their inbound loops, what the other hosts store, and the
//! catch-up at start.

use std::sync::Arc;

use crate::background::Background;
use crate::channels::Channels;
use crate::channels::discord::Discord;
use crate::channels::slack::Slack;
use crate::channels::telegram::Telegram;
use crate::channels::whatsapp::WhatsApp;
use crate::channels::whatsapp::webhook::Webhook;
use crate::cluster::Leases;
use crate::cluster::singleton::{self, Start};
use crate::config::Settings;
use crate::home::Home;
use crate::routing::queue::QueueHandle;
use crate::sessions::SessionManager;
use crate::store::{self, Store};
use crate::{Error, Result};

/// The chat platforms `[channels.*]` enables, built (their credentials
/// found) before anything starts.
pub(super) struct Platforms {
    telegram: Option<Arc<Telegram>>,
    whatsapp: Option<Arc<WhatsApp>>,
    discord: Option<Arc<Discord>>,
    slack: Option<Arc<Slack>>,
}

impl Platforms {
    /// Each enabled platform; one whose credentials are missing stops the
    /// start with an error saying which.
    pub(super) fn enabled(home: &Home, settings: &Settings, store: &Store) -> Result<Self> {
        Ok(Platforms {
            telegram: telegram(home, settings, store)?,
            whatsapp: whatsapp(home, settings, store)?,
            discord: discord(home, settings, store)?,
            slack: slack(home, settings, store)?,
        })
    }

    /// The channels: the HTTP channel and these platforms. Storing rings
    /// the queue; the log is cleaned with what archives and memory are.
    pub(super) fn channels(
        &self,
        store: &Store,
        settings: &Settings,
        sessions: &SessionManager,
        queue: &QueueHandle,
        media: crate::media::Media,
    ) -> Channels {
        let mut channels = Channels::new(store.clone())
            .with_redactor(sessions.redactor().clone())
            .with_text_limit(settings.channels.max_text_bytes, &settings.assistant_name)
            .with_router(queue.wake_sender())
            .with_media(media);
        if let Some(tg) = &self.telegram {
            channels = channels.with(tg.clone());
        }
        if let Some(wa) = &self.whatsapp {
            channels = channels.with(wa.clone());
        }
        if let Some(dc) = &self.discord {
            channels = channels.with(dc.clone());
        }
        if let Some(sl) = &self.slack {
            channels = channels.with(sl.clone());
        }
        channels
    }

    /// WhatsApp's webhook, when enabled: what it stores waits for the
    /// router.
    pub(super) fn webhook(&self, channels: &Channels) -> Option<Webhook> {
        self.whatsapp.clone().map(|wa| Webhook {
            whatsapp: wa,
            channels: channels.clone(),
        })
    }

    /// The inbound loops (Telegram's polling, Discord's gateway, Slack's
    /// Socket Mode), each on the one host of the cluster holding its
    /// lease. Started once the router and the queue are up.
    pub(super) fn start(
        self,
        channels: &Channels,
        settings: &Settings,
        leases: &Leases,
    ) -> Vec<Background> {
        let hold = |name: &'static str, start: Start| singleton::hold(leases.clone(), name, start);
        [
            self.telegram.map(|tg| {
                let (ch, s) = (channels.clone(), settings.channels.telegram.clone());
                hold(
                    "telegram",
                    Box::new(move || tg.start(ch.clone(), s.clone())),
                )
            }),
            self.discord.map(|dc| {
                let ch = channels.clone();
                hold("discord", Box::new(move || dc.start(ch.clone())))
            }),
            self.slack.map(|sl| {
                let ch = channels.clone();
                hold("slack", Box::new(move || sl.start(ch.clone())))
            }),
        ]
        .into_iter()
        .flatten()
        .collect()
    }
}

/// Routes again what was stored but not delivered or answered before a
/// crash; returns how many groups are registered.
pub(super) async fn catch_up(
    store: &Store,
    channels: &Channels,
    queue: &QueueHandle,
) -> Result<usize> {
    channels.redeliver().await?;
    let groups = store.read(store::groups::list).await?;
    for g in &groups {
        queue.wake(&g.folder);
    }
    Ok(groups.len())
}

/// Follows what the other hosts store (`cluster::notify`): a message for a
/// group wakes this host's queue (which acts only on its own groups), and
/// every message is published to the live streams here.
pub(super) fn follow_others(
    store: &Store,
    queue: &QueueHandle,
    channels: &Channels,
) -> Option<Background> {
    let (s1, s2, q1, q2, log) = (
        store.clone(),
        store.clone(),
        queue.clone(),
        queue.clone(),
        channels.log().clone(),
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
                let log = log.clone();
                tokio::spawn(async move {
                    let _ = log.publish().await;
                });
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

/// The Discord channel, when `[channels.discord]` is enabled: its token
/// must be set.
fn discord(home: &Home, settings: &Settings, store: &Store) -> Result<Option<Arc<Discord>>> {
    use crate::channels::discord;
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
fn telegram(home: &Home, settings: &Settings, store: &Store) -> Result<Option<Arc<Telegram>>> {
    use crate::channels::telegram;
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
fn whatsapp(home: &Home, settings: &Settings, store: &Store) -> Result<Option<Arc<WhatsApp>>> {
    use crate::channels::whatsapp::Credentials;
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
fn slack(home: &Home, settings: &Settings, store: &Store) -> Result<Option<Arc<Slack>>> {
    use crate::channels::slack::Credentials;
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
