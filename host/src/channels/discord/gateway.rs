//! Discord's events in: one gateway shard, and what each message means
//! (`classify`).
//!
//! twilight-gateway keeps the session: it identifies, heartbeats, treats a
//! missed heartbeat ACK as a dead connection, and after a drop resumes at
//! READY's `resume_gateway_url` with the session id and the last sequence,
//! so Discord replays what was sent meanwhile; close codes that forbid a
//! reconnect (a bad token, an intent not enabled) end it. Messages are
//! taken one at a time, in order, by a worker beside the shard (which
//! keeps being polled for its heartbeats); a message's attachments are
//! fetched ([`super::files`]) and kept (`Media::keep`) before it is
//! stored, and what was not kept is told to the channel after.
//!
//! Invariants: the session (id, sequence, resume address) lives in
//! `router_state` under [`SESSION_KEY`] and is written only in the
//! transaction that stores a message, so a restarted host resumes from
//! what it stored and a replayed message is stored once (its id is unique
//! in its chat); the bot's own messages and other bots' are never stored;
//! a channel no group is registered for has nothing stored.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use twilight_gateway::{
    CloseFrame, ConfigBuilder, Event, EventTypeFlags, Intents, Session, Shard, ShardId, StreamExt,
};
use twilight_model::channel::Message as DcMessage;
use twilight_model::channel::message::MessageType;

use g2_core::validate::GroupFolder;

use super::{Discord, Jid};
use crate::background::StopSignal;
use crate::channels::{Channels, clean_name};
use crate::groups::Group;
use crate::media::{Kept, Media};
use crate::messages::{CheckInbound, Inbound, Intake, Mark};
use crate::store;

/// The `router_state` key of the session to resume.
pub const SESSION_KEY: &str = "discord:session";
/// Servers' messages, direct messages, and their text (a privileged
/// intent, switched on in the Developer Portal).
pub const INTENTS: Intents = Intents::GUILD_MESSAGES
    .union(Intents::DIRECT_MESSAGES)
    .union(Intents::MESSAGE_CONTENT);
/// The longest wait between attempts when the REST API keeps failing.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// A session as stored: enough to resume it after a restart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Saved {
    pub id: String,
    pub seq: u64,
    pub resume_url: String,
}

/// What a message means.
#[derive(Debug, PartialEq)]
pub(super) enum Decision {
    Take(Intake),
    /// A message in a channel no group is registered for.
    Unregistered(Jid),
    /// Nothing for us (why, for the debug log).
    Skip(&'static str),
}

/// The gateway's loop, for as long as the host runs.
pub(super) async fn run(dc: Arc<Discord>, channels: Channels, mut stop: StopSignal) {
    // The bot's id, to know its mentions and its own messages.
    let mut backoff = Duration::from_secs(1);
    let me = loop {
        match dc.rest.me().await {
            Ok(me) => match me.id.parse::<u64>() {
                Ok(id) => {
                    tracing::info!(bot = %me.username, id, "discord: connected as the bot");
                    break id;
                }
                Err(_) => tracing::error!("discord: users/@me named no id"),
            },
            Err(e) => tracing::warn!(error = %e, "discord: who the bot is (users/@me)"),
        }
        tokio::select! {
            _ = &mut stop => return,
            () = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    };
    let saved = match dc
        .store
        .read(|c| store::router_state::get(c, SESSION_KEY))
        .await
    {
        Ok(v) => v.and_then(|v| serde_json::from_str::<Saved>(&v).ok()),
        Err(e) => {
            tracing::error!(error = %e, "discord: reading the saved session");
            None
        }
    };
    // The gateway's TLS is rustls with no provider chosen: ring's.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut config = ConfigBuilder::new(dc.token.expose().to_string(), INTENTS)
        .proxy_url(dc.settings.gateway_url.trim_end_matches('/').to_string());
    if let Some(s) = saved {
        tracing::info!(seq = s.seq, "discord: resuming the stored session");
        config = config
            .session(Session::new(s.seq, s.id))
            .resume_url(s.resume_url);
    }
    let mut shard = Shard::with_config(ShardId::ONE, config.build());
    let wanted = EventTypeFlags::READY
        | EventTypeFlags::RESUMED
        | EventTypeFlags::MESSAGE_CREATE
        | EventTypeFlags::MESSAGE_UPDATE;
    let mut last_close: Option<u16> = None;
    // Messages are taken in order by one worker while the shard is still
    // polled (its heartbeats): fetching and transcribing a message's files
    // may take longer than a heartbeat's interval. A message still queued
    // when the host stops was not stored, nor its sequence: the next
    // session's resume replays it.
    let (queue, mut queued) = mpsc::unbounded_channel::<(DcMessage, bool, Option<Mark>)>();
    let worker = async {
        while let Some((msg, edited, mark)) = queued.recv().await {
            take(&dc, &channels, me, &msg, edited, mark).await;
        }
    };
    tokio::pin!(worker);
    loop {
        let event = tokio::select! {
            // Never: the queue lives as long as this loop.
            () = &mut worker => return,
            _ = &mut stop => {
                // A resumable close keeps the session for the next host;
                // the shard sends it when polled (bounded: a dead
                // connection must not hold the shutdown).
                shard.close(CloseFrame::RESUME);
                let closed = async {
                    while let Some(e) = shard.next_event(EventTypeFlags::empty()).await {
                        if matches!(e, Ok(Event::GatewayClose(_))) {
                            break;
                        }
                    }
                };
                let _ = tokio::time::timeout(Duration::from_secs(1), closed).await;
                return;
            }
            e = shard.next_event(wanted) => e,
        };
        let message = match event {
            None => {
                tracing::error!(
                    code = last_close,
                    "discord: the gateway closed for good: {}",
                    fatal_reason(last_close)
                );
                // What came before the close is still taken.
                drop(queue);
                tokio::select! {
                    _ = &mut stop => return,
                    () = &mut worker => {}
                }
                let _ = stop.await;
                return;
            }
            Some(Err(e)) => {
                tracing::warn!(error = %e, "discord: gateway");
                continue;
            }
            Some(Ok(Event::Ready(r))) => {
                tracing::info!(guilds = r.guilds.len(), "discord: session started");
                continue;
            }
            Some(Ok(Event::Resumed)) => {
                tracing::info!("discord: session resumed");
                continue;
            }
            // Always handed out, whatever is wanted.
            Some(Ok(Event::GatewayClose(frame))) => {
                last_close = frame.as_ref().map(|f| f.code);
                tracing::info!(
                    code = last_close,
                    "discord: the gateway closed the connection"
                );
                continue;
            }
            Some(Ok(Event::MessageCreate(m))) => (m.message, false),
            Some(Ok(Event::MessageUpdate(m))) => ((*m).0, true),
            Some(Ok(_)) => continue,
        };
        let (msg, edited) = message;
        let mark = match (shard.session(), shard.resume_url()) {
            (Some(s), Some(url)) => serde_json::to_string(&Saved {
                id: s.id().to_string(),
                seq: s.sequence(),
                resume_url: url.to_string(),
            })
            .ok()
            .map(|value| Mark {
                key: SESSION_KEY.into(),
                value,
            }),
            _ => None,
        };
        if queue.send((msg, edited, mark)).is_err() {
            return;
        }
    }
}

/// What a close code that ends the session means, for the log.
fn fatal_reason(code: Option<u16>) -> &'static str {
    match code {
        Some(4004) => "Discord refused the bot token; check DISCORD_BOT_TOKEN",
        Some(4014) => {
            "the Message Content intent is not enabled: switch it on under Bot, \
             Privileged Gateway Intents, in the Developer Portal"
        }
        Some(4013) => "invalid intents",
        Some(4010 | 4011) => "sharding required (more than 2,500 servers)",
        Some(4012) => "an API version Discord no longer serves",
        _ => "no reconnect allowed",
    }
}

/// Stores one message with the session's mark (tried a few times: the
/// gateway does not deliver it again while the connection lives). Its
/// files are fetched and kept first, once whatever the tries; then the
/// channel is told of any not kept.
async fn take(
    dc: &Discord,
    channels: &Channels,
    me: u64,
    msg: &DcMessage,
    edited: bool,
    mark: Option<Mark>,
) {
    let mut wait = Duration::from_millis(100);
    let mut files: Option<Kept> = None;
    for attempt in 1..=5 {
        let groups: crate::Result<Vec<Group>> =
            dc.store.read(store::groups::list).await.map(|list| {
                list.into_iter()
                    .filter(|g| g.jid.starts_with(super::PREFIX))
                    .collect()
            });
        let result = match groups {
            Ok(groups) => {
                let folders: HashMap<String, GroupFolder> = groups
                    .iter()
                    .map(|g| (g.jid.clone(), g.folder.clone()))
                    .collect();
                match classify(msg, edited, me, &folders) {
                    Decision::Take(Intake::New { folder, mut m }) => {
                        if let Some(media) = channels.media()
                            && !msg.attachments.is_empty()
                            && let Some(g) = groups.iter().find(|g| g.folder == folder)
                        {
                            if files.is_none() {
                                files = Some(keep_files(dc, media, g, msg, me).await);
                            }
                            if let Some(kept) = &files {
                                m.text.clone_from(&kept.text);
                                m.attachments.clone_from(&kept.attachments);
                            }
                        }
                        store_one(channels, Intake::New { folder, m }, &mark).await
                    }
                    // The text kept with the files (a transcript) stays:
                    // an update of such a message (Discord filling in a
                    // link's preview, or a person's edit) is not taken, as
                    // on Slack and Telegram.
                    Decision::Take(Intake::Edit { .. })
                        if channels.media().is_some() && !msg.attachments.is_empty() =>
                    {
                        tracing::debug!(
                            message = msg.id.get(),
                            "discord: an update of a message with files skipped"
                        );
                        Ok(())
                    }
                    Decision::Take(i) => store_one(channels, i, &mark).await,
                    Decision::Unregistered(jid) => {
                        tracing::info!(chat = %jid, "discord: a message from a channel that is not registered; dropped");
                        Ok(())
                    }
                    Decision::Skip(why) => {
                        tracing::debug!(message = msg.id.get(), why, "discord: message skipped");
                        Ok(())
                    }
                }
            }
            Err(e) => Err(e),
        };
        match result {
            Ok(()) => {
                if let Some(kept) = files.filter(|k| !k.notes.is_empty()) {
                    tell_notes(dc, msg, &kept.notes).await;
                }
                return;
            }
            Err(e) => {
                tracing::error!(attempt, error = %e, "discord: storing a message");
                tokio::time::sleep(wait).await;
                wait *= 2;
            }
        }
    }
}

/// Hands one message in with the session's mark.
async fn store_one(channels: &Channels, i: Intake, mark: &Option<Mark>) -> crate::Result<()> {
    channels.take_in(vec![i], mark.clone()).await.map(|a| {
        for e in a.into_iter().filter_map(Result::err) {
            tracing::warn!(error = %e, "discord: a message could not be stored; dropped");
        }
    })
}

/// A message's attachments fetched from the CDN (in order) and kept in
/// `group`'s folder: its text (the content, then what `keep` adds) and
/// attachments, and notes about what was not kept.
async fn keep_files(dc: &Discord, media: &Media, group: &Group, msg: &DcMessage, me: u64) -> Kept {
    let mut incoming = Vec::new();
    for f in super::files::files_of(msg) {
        incoming.push(dc.cdn.fetch(&f, media.max_bytes()).await);
    }
    media
        .keep(
            group,
            &msg.id.get().to_string(),
            &content_of(msg, me),
            incoming,
        )
        .await
}

/// Tells the channel what of a message's files did not reach g2, as a
/// reply to it (pinging nobody); a failure is logged.
async fn tell_notes(dc: &Discord, msg: &DcMessage, notes: &[String]) {
    let text = format!("Not everything you sent reached me: {}", notes.join("; "));
    let text = if text.chars().count() > super::MAX_CHARS {
        let mut t: String = text.chars().take(super::MAX_CHARS - 1).collect();
        t.push('…');
        t
    } else {
        text
    };
    let channel = msg.channel_id.get();
    if let Err(e) = dc
        .rest
        .create_message(channel, &text, Some(msg.id.get()))
        .await
    {
        tracing::warn!(chat = %Jid(channel), error = %e, "discord: the note about a file was not sent");
    }
}

/// What one message (or edit) means: a message for a registered group, a
/// message in a channel that is not registered, or nothing for us.
pub(super) fn classify(
    msg: &DcMessage,
    edited: bool,
    me: u64,
    groups: &HashMap<String, GroupFolder>,
) -> Decision {
    if msg.author.id.get() == me {
        return Decision::Skip("the bot's own message");
    }
    if msg.author.bot || msg.webhook_id.is_some() {
        return Decision::Skip("another bot's message");
    }
    if !matches!(msg.kind, MessageType::Regular | MessageType::Reply) {
        return Decision::Skip("a system message");
    }
    let jid = Jid(msg.channel_id.get());
    let Some(folder) = groups.get(&jid.to_string()).cloned() else {
        return Decision::Unregistered(jid);
    };
    let addressed = msg.guild_id.is_none() || addresses(msg, me);
    let Some(text) = text_of(msg, me) else {
        return Decision::Skip("no text and no attachment");
    };
    if edited {
        return Decision::Take(Intake::Edit {
            folder,
            external_id: msg.id.get().to_string(),
            text,
            addressed,
        });
    }
    let name = msg
        .member
        .as_ref()
        .and_then(|m| m.nick.clone())
        .or_else(|| msg.author.global_name.clone())
        .unwrap_or_else(|| msg.author.name.clone());
    let mut m = Inbound {
        sender: msg.author.id.get().to_string(),
        sender_name: Some(clean_name(&name)).filter(|n| !n.is_empty()),
        text,
        external_id: Some(msg.id.get().to_string()),
        thread: None,
        addressed,
        attachments: Vec::new(),
    };
    // A name the log refuses must not cost the message (a text over the
    // limit is the sequencer's to refuse, and to answer).
    if m.check_fields().is_err() {
        m.sender_name = None;
    }
    Decision::Take(Intake::New { folder, m })
}

/// Whether a server message calls the bot: a mention of it, or a reply to
/// one of its messages.
fn addresses(msg: &DcMessage, me: u64) -> bool {
    msg.mentions.iter().any(|u| u.id.get() == me)
        || msg
            .referenced_message
            .as_ref()
            .is_some_and(|r| r.author.id.get() == me)
        || msg.content.contains(&format!("<@{me}>"))
        || msg.content.contains(&format!("<@!{me}>"))
}

/// The message as the agent reads it without its files: people's
/// mentions by name (the bot's as `@g2`).
fn content_of(msg: &DcMessage, me: u64) -> String {
    let mut text = msg.content.clone();
    for u in &msg.mentions {
        let name = if u.id.get() == me {
            "g2".to_string()
        } else {
            u.member
                .as_ref()
                .and_then(|m| m.nick.clone())
                .unwrap_or_else(|| u.name.clone())
        };
        for form in [format!("<@{}>", u.id), format!("<@!{}>", u.id)] {
            text = text.replace(&form, &format!("@{name}"));
        }
    }
    text
}

/// The message as the agent reads it when its files are not kept: its
/// content, then one line per attachment; None when empty.
fn text_of(msg: &DcMessage, me: u64) -> Option<String> {
    let mut text = content_of(msg, me);
    for a in &msg.attachments {
        let kind = match a.content_type.as_deref() {
            Some(t) if t.starts_with("image/") => "image",
            Some(t) if t.starts_with("video/") => "video",
            Some(t) if t.starts_with("audio/") => "audio",
            _ => "file",
        };
        text.push_str(&format!("\n[{kind}: {}]", a.filename));
    }
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}

#[cfg(test)]
mod tests;
