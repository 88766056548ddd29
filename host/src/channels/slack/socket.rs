//! Socket Mode: the connection that brings Slack's events in.
//!
//! `apps.connections.open` (app token) answers a one-use WebSocket URL;
//! Slack says `hello`, then sends envelopes, each of which must be
//! acknowledged (`{"envelope_id": …}`) within 3 s or it is delivered
//! again. An `events_api` envelope's message is stored first, then
//! acknowledged: a host killed in between is sent it again, and it is
//! stored once (its `ts`). Acknowledging never waits on an agent: storing
//! takes milliseconds and the turn runs elsewhere. Every other envelope is
//! acknowledged and left.
//!
//! A message with files waits for them (fetched, kept, a clip transcribed:
//! seconds) before it is stored and acknowledged. Meanwhile the socket is
//! still read (pings answered, `disconnect` heard) and later envelopes
//! wait their turn, so messages keep their order; what Slack delivers
//! again meanwhile (or as `app_mention` too) finds the message stored and
//! fetches nothing. A connection that ends while a message is being taken
//! finishes taking it (unless the host stops).
//!
//! A `disconnect` envelope (Slack refreshes connections every few hours),
//! a close, an error, or a socket silent for [`SILENT`] (pings go out every
//! [`PING_EVERY`]) ends the connection and a new one is opened; failures
//! back off up to [`MAX_BACKOFF`].

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_websockets::{ClientBuilder, Message as Frame};

use super::events::{self, Decision, classify};
use super::{Identity, PREFIX, Slack, files};
use crate::background::StopSignal;
use crate::channels::Channels;
use crate::groups::Group;
use crate::messages::{Inbound, Intake, Taken};
use crate::store;

/// How often a ping goes out on a quiet socket.
const PING_EVERY: Duration = Duration::from_secs(10);
/// A socket with nothing heard for this long is taken as dead.
const SILENT: Duration = Duration::from_secs(30);
/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a closing handshake may take (closing waits for Slack's
/// close frame).
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);
/// The longest wait between attempts when Slack keeps failing.
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// A connection that lived this long was healthy: the backoff restarts.
const HEALTHY: Duration = Duration::from_secs(60);

/// Why a connection ended.
enum End {
    /// The host stops.
    Stop,
    /// Slack asked for a new connection, or closed this one.
    Renew(String),
    /// Something failed: try again after the backoff.
    Failed(String),
}

/// The loop: `auth.test` (until it answers), then one connection after
/// another for as long as the host runs.
pub(super) async fn run(slack: Arc<Slack>, channels: Channels, mut stop: StopSignal) {
    let mut backoff = Duration::from_secs(1);
    let me = loop {
        match slack.api.identify(&slack.credentials.bot_token).await {
            Ok(me) => break me,
            Err(e) => {
                tracing::error!(error = %e, retry_in = ?backoff, "slack: auth.test failed; no events until it answers");
                if pause(&mut stop, backoff).await {
                    return;
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    };
    tracing::info!(bot = %me.user, team = %me.team_id, "slack: opening Socket Mode");
    backoff = Duration::from_secs(1);
    loop {
        let url = tokio::select! {
            u = slack.api.open(&slack.credentials.app_token) => u,
            _ = &mut stop => return,
        };
        let started = Instant::now();
        let end = match url {
            Ok(url) => connection(&slack, &channels, &me, &url, &mut stop).await,
            Err(e) => End::Failed(format!("apps.connections.open: {e}")),
        };
        match end {
            End::Stop => return,
            End::Renew(why) => {
                tracing::info!(why = %why, "slack: opening a new Socket Mode connection");
                backoff = Duration::from_secs(1);
            }
            End::Failed(why) => {
                if started.elapsed() >= HEALTHY {
                    backoff = Duration::from_secs(1);
                }
                tracing::warn!(error = %why, retry_in = ?backoff, "slack: Socket Mode connection lost");
                if pause(&mut stop, backoff).await {
                    return;
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

/// Waits `d`; whether the host stops meanwhile.
async fn pause(stop: &mut StopSignal, d: Duration) -> bool {
    tokio::select! {
        () = tokio::time::sleep(d) => false,
        _ = stop => true,
    }
}

/// One WebSocket connection, until it ends.
async fn connection(
    slack: &Slack,
    channels: &Channels,
    me: &Identity,
    url: &str,
    stop: &mut StopSignal,
) -> End {
    let builder = match ClientBuilder::new().uri(url) {
        Ok(b) => b,
        Err(e) => return End::Failed(format!("the Socket Mode URL: {e}")),
    };
    // The URL carries a one-use ticket: never shown.
    let mut ws = match tokio::time::timeout(CONNECT_TIMEOUT, builder.connect()).await {
        Ok(Ok((ws, _))) => ws,
        Ok(Err(e)) => return End::Failed(format!("connecting: {e}")),
        Err(_) => return End::Failed("connecting took too long".into()),
    };
    let mut heard = Instant::now();
    let mut ping = tokio::time::interval(PING_EVERY);
    ping.tick().await;
    // The `events_api` envelopes waiting to be taken, in order, and the
    // one being taken (its envelope id, and whether it may be
    // acknowledged).
    let mut waiting: VecDeque<Value> = VecDeque::new();
    let mut work: Option<BoxFuture<'_, (String, bool)>> = None;
    let end = loop {
        if work.is_none()
            && let Some(v) = waiting.pop_front()
        {
            work = Some(Box::pin(async move {
                let ok = take(slack, channels, me, &v).await;
                (
                    v["envelope_id"].as_str().unwrap_or_default().to_string(),
                    ok,
                )
            }));
        }
        let frame = tokio::select! {
            (id, ok) = async {
                match work.as_mut() {
                    Some(w) => w.await,
                    None => std::future::pending().await,
                }
            } => {
                work = None;
                // Not stored: not acknowledged, so Slack delivers it again.
                if ok && let Err(e) = ws.send(ack(&id)).await {
                    break End::Failed(format!("acknowledging: {e}"));
                }
                continue;
            }
            f = ws.next() => f,
            _ = ping.tick() => {
                if heard.elapsed() >= SILENT {
                    break End::Failed(format!("nothing heard for {SILENT:?}"));
                }
                if let Err(e) = ws.send(Frame::ping("g2")).await {
                    break End::Failed(format!("sending a ping: {e}"));
                }
                continue;
            }
            _ = &mut *stop => {
                let _ = tokio::time::timeout(CLOSE_TIMEOUT, ws.close()).await;
                return End::Stop;
            }
        };
        let frame = match frame {
            None => break End::Renew("Slack closed the connection".into()),
            Some(Err(e)) => break End::Failed(e.to_string()),
            Some(Ok(f)) => f,
        };
        heard = Instant::now();
        if frame.is_close() {
            break End::Renew("Slack closed the connection".into());
        }
        let Some(text) = frame.as_text() else {
            continue;
        };
        let Ok(v) = serde_json::from_str::<Value>(text) else {
            tracing::warn!("slack: a Socket Mode frame that is not JSON; ignored");
            continue;
        };
        match v["type"].as_str().unwrap_or_default() {
            "hello" => {
                tracing::debug!(connections = %v["num_connections"], "slack: connected");
                continue;
            }
            // Dropped at once, not closed: a closing handshake reads (and
            // would lose) what Slack still sends; what it sent and did not
            // see acknowledged it delivers again.
            "disconnect" => {
                break End::Renew(format!(
                    "disconnect: {}",
                    v["reason"].as_str().unwrap_or("?")
                ));
            }
            _ => {}
        }
        let Some(id) = v["envelope_id"].as_str() else {
            continue;
        };
        if v["type"] == "events_api" {
            waiting.push_back(v);
            continue;
        }
        if let Err(e) = ws.send(ack(id)).await {
            break End::Failed(format!("acknowledging: {e}"));
        }
    };
    // The message being taken is stored (its files are not fetched
    // again when Slack delivers it again); the rest is delivered again.
    if let Some(w) = work {
        tokio::select! {
            (id, ok) = w => {
                if ok {
                    let _ = ws.send(ack(&id)).await;
                }
            }
            _ = &mut *stop => return End::Stop,
        }
    }
    end
}

/// The acknowledgement of an envelope.
fn ack(id: &str) -> Frame {
    Frame::text(json!({ "envelope_id": id }).to_string())
}

/// Stores an envelope's message when its channel is registered; whether
/// it may be acknowledged (false: the store failed).
async fn take(slack: &Slack, channels: &Channels, me: &Identity, v: &Value) -> bool {
    let payload = &v["payload"];
    let jid = format!(
        "{PREFIX}{}:{}",
        payload["team_id"].as_str().unwrap_or_default(),
        payload["event"]["channel"].as_str().unwrap_or_default()
    );
    let group = {
        let jid = jid.clone();
        slack
            .store
            .read(move |c| store::groups::by_jid(c, &jid))
            .await
    };
    let group = match group {
        Ok(g) => g,
        Err(e) => {
            tracing::error!(error = %e, "slack: reading the groups");
            return false;
        }
    };
    let groups: HashMap<_, _> = group
        .iter()
        .map(|g| (g.jid.clone(), g.folder.clone()))
        .collect();
    match classify(payload, me, &groups) {
        Decision::Take(mut item) => {
            let mut notes = Vec::new();
            let mut thread = None;
            if let (Intake::New { m, .. }, Some(g)) = (&mut item, &group) {
                match keep_files(slack, channels, me, g, payload, m).await {
                    Ok(n) => notes = n,
                    Err(e) => {
                        tracing::error!(chat = %jid, error = %e, "slack: reading the message log");
                        return false;
                    }
                }
                thread = m.thread.clone();
            }
            match channels.take_in(vec![item], None).await {
                Ok(taken) => {
                    for t in taken {
                        match t {
                            Err(e) => {
                                tracing::warn!(chat = %jid, error = %e, "slack: a message could not be stored; dropped");
                            }
                            Ok(Taken::Duplicate) => notes.clear(),
                            Ok(_) => {}
                        }
                    }
                    if !notes.is_empty() {
                        note(slack, payload, thread.as_deref(), &notes).await;
                    }
                    true
                }
                Err(e) => {
                    tracing::error!(chat = %jid, error = %e, "slack: storing a message");
                    false
                }
            }
        }
        Decision::Unregistered { jid, addressed } => {
            tracing::debug!(chat = %jid, addressed, "slack: a message from a channel that is not registered; dropped");
            true
        }
        Decision::Skip(why) => {
            tracing::debug!(why, retry = %v["retry_attempt"], "slack: event skipped");
            true
        }
    }
}

/// Fetches and keeps the files of a message about to be stored in
/// `group`, and puts what they became into it: the notes for the sender.
/// Nothing when no media are kept (the placeholders stay), or when the
/// message is stored already (delivered again, or as both `message` and
/// `app_mention`): its files were fetched then.
async fn keep_files(
    slack: &Slack,
    channels: &Channels,
    me: &Identity,
    group: &Group,
    payload: &Value,
    m: &mut Inbound,
) -> crate::Result<Vec<String>> {
    let Some(media) = channels.media() else {
        return Ok(Vec::new());
    };
    let found = files::files_of(&payload["event"]);
    let Some(ts) = m.external_id.clone().filter(|_| !found.is_empty()) else {
        return Ok(Vec::new());
    };
    let stored = {
        let (jid, ts) = (group.jid.clone(), ts.clone());
        slack
            .store
            .read(move |c| store::messages::by_external_id(c, &jid, &ts))
            .await?
    };
    if stored.is_some() {
        return Ok(Vec::new());
    }
    let mut incoming = Vec::with_capacity(found.len());
    for f in &found {
        incoming.push(
            files::fetch(
                &slack.api,
                &slack.credentials.bot_token,
                f,
                media.max_bytes(),
            )
            .await,
        );
    }
    let kept = media
        .keep(group, &ts, &events::caption(payload, me), incoming)
        .await;
    m.text = kept.text;
    m.attachments = kept.attachments;
    Ok(kept.notes)
}

/// Tells the channel (in the message's thread, if it was in one) what of
/// a message's files did not reach g2.
async fn note(slack: &Slack, payload: &Value, thread: Option<&str>, notes: &[String]) {
    let channel = payload["event"]["channel"].as_str().unwrap_or_default();
    let text = format!(
        "Not everything you sent reached me: {}",
        super::format::escape(&notes.join("; "))
    );
    if let Err(e) = slack.post(channel, &text, thread).await {
        tracing::warn!(channel, error = %e, "slack: the note about a file was not sent");
    }
}

#[cfg(test)]
mod tests {
    /// Slack's `wss://` URLs need a TLS connector: rustls with ring (as
    /// the Web API client installs it) and the platform's roots.
    #[test]
    fn the_tls_connector_builds_with_the_ring_provider() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        assert!(tokio_websockets::Connector::new().is_ok());
    }
}
