//! A local Slack: the Web API methods g2 calls — `auth.test`,
//! `apps.connections.open` and `chat.postMessage` — with Slack's shapes
//! (`Authorization: Bearer`, JSON bodies, every answer `{"ok": …}`, errors
//! as `{"ok": false, "error": "…"}` with HTTP 200, a rate limit as HTTP 429
//! with `Retry-After`), and Socket Mode: each URL `apps.connections.open`
//! answers is one WebSocket, which says `hello` and then carries
//! `events_api` envelopes that must be acknowledged with their
//! `envelope_id`. Like Slack, it delivers again (with `retry_attempt`) what
//! was not acknowledged when a new connection opens, and it timestamps
//! each envelope's sending and acknowledgement.
//!
//! Files are served as Slack serves them: a message's file objects carry
//! `url_private` and `url_private_download` (`/files-pri/<team>-<id>/…`),
//! whose bytes come only with the bot token (`Authorization: Bearer`, an
//! app with `files:read`); without it Slack answers its sign-in page as
//! HTML with HTTP 200, and an unknown file is a 404.

#![allow(dead_code)]

use std::collections::{HashMap, HashSet};

use futures_util::{SinkExt, StreamExt};
use tokio::sync::mpsc;
use tokio_websockets::{Message as Frame, ServerBuilder};

// The local servers' shared start, lock, waits and vocabulary.
use super::local_api::{self, prelude::*};

pub const BOT_TOKEN: &str = "xoxb-1-test-bot-token-for-the-local-slack";
pub const APP_TOKEN: &str = "xapp-1-A0TEST-test-app-token-for-the-local-slack";
pub const TEAM: &str = "T0TEST";
/// The bot user: mentions are `<@UB0T>`.
pub const BOT_USER: &str = "UB0T";
pub const BOT_ID: &str = "B0G2";
/// The longest text `chat.postMessage` takes here (Slack recommends at
/// most 4,000 characters; this server holds g2 to it).
pub const MAX_TEXT: usize = 4000;

/// One message `chat.postMessage` took.
#[derive(Debug, Clone)]
pub struct Sent {
    pub channel: String,
    pub text: String,
    pub thread_ts: Option<String>,
    pub mrkdwn: bool,
    pub ts: String,
    pub at: Instant,
}

/// A failure the next `chat.postMessage` answers with.
#[derive(Debug, Clone, Copy)]
pub enum Failure {
    /// HTTP 429, `ratelimited`, `Retry-After` seconds.
    RateLimited(u64),
    /// `not_in_channel` (the bot was removed).
    NotInChannel,
}

/// One envelope: when it was sent (each delivery) and acknowledged.
#[derive(Debug, Clone)]
pub struct Envelope {
    pub id: String,
    pub body: Value,
    pub sent: Vec<Instant>,
    pub acked: Option<Instant>,
}

enum Cmd {
    Frame(String),
    /// A `disconnect` envelope, then the socket stays open (as Slack's
    /// does for a few seconds).
    Disconnect(&'static str),
    /// The TCP connection dropped, no close frame.
    Drop,
}

#[derive(Default)]
struct Inner {
    sent: Vec<Sent>,
    failures: VecDeque<Failure>,
    rejected: usize,
    opens: usize,
    connections: usize,
    tickets: HashSet<String>,
    envelopes: Vec<Envelope>,
    /// The socket events go to (the newest).
    current: Option<(usize, mpsc::UnboundedSender<Cmd>)>,
    /// Files by id: their content type and bytes.
    files: HashMap<String, (String, Vec<u8>)>,
    /// The file ids downloads asked for, in order (whatever the answer).
    downloads: Vec<String>,
    /// The app lacks `files:read`: downloads get the sign-in page.
    no_files_read: bool,
}

#[derive(Clone)]
pub struct SlackApi {
    pub url: String,
    ws: String,
    inner: Arc<Mutex<Inner>>,
}

fn answer(status: StatusCode, v: Value) -> Response {
    (status, axum::Json(v)).into_response()
}

fn err(e: &str) -> Response {
    answer(StatusCode::OK, json!({ "ok": false, "error": e }))
}

fn bearer(headers: &HeaderMap) -> &str {
    headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default()
}

async fn auth_test(headers: HeaderMap) -> Response {
    match bearer(&headers) {
        BOT_TOKEN => answer(
            StatusCode::OK,
            json!({ "ok": true, "url": "https://g2-test.slack.com/", "team": "G2 Test",
                "user": "g2bot", "team_id": TEAM, "user_id": BOT_USER, "bot_id": BOT_ID,
                "is_enterprise_install": false }),
        ),
        "" => err("not_authed"),
        _ => err("invalid_auth"),
    }
}

async fn open(State(api): State<SlackApi>, headers: HeaderMap) -> Response {
    match bearer(&headers) {
        APP_TOKEN => {}
        BOT_TOKEN => return err("not_allowed_token_type"),
        "" => return err("not_authed"),
        _ => return err("invalid_auth"),
    }
    let mut inner = api.lock();
    inner.opens += 1;
    let ticket = format!("ticket-{}-{}", inner.opens, uuid::Uuid::new_v4().simple());
    inner.tickets.insert(ticket.clone());
    answer(
        StatusCode::OK,
        json!({ "ok": true, "url": format!("{}/link/?ticket={ticket}&app_id=A0TEST", api.ws) }),
    )
}

async fn post_message(
    State(api): State<SlackApi>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    match bearer(&headers) {
        BOT_TOKEN => {}
        "" => return err("not_authed"),
        _ => return err("invalid_auth"),
    }
    let json_body = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    let Some(b) = serde_json::from_slice::<Value>(&body)
        .ok()
        .filter(|_| json_body)
    else {
        return err("invalid_arguments");
    };
    let (Some(channel), Some(text)) = (b["channel"].as_str(), b["text"].as_str()) else {
        return err("no_text");
    };
    if text.chars().count() > MAX_TEXT {
        return err("msg_too_long");
    }
    let failure = api.lock().failures.pop_front();
    match failure {
        Some(Failure::RateLimited(secs)) => {
            api.lock().rejected += 1;
            let mut r = answer(
                StatusCode::TOO_MANY_REQUESTS,
                json!({ "ok": false, "error": "ratelimited" }),
            );
            r.headers_mut()
                .insert("retry-after", secs.to_string().parse().unwrap());
            return r;
        }
        Some(Failure::NotInChannel) => {
            api.lock().rejected += 1;
            return err("not_in_channel");
        }
        None => {}
    }
    let mut inner = api.lock();
    // Numbered by the messages taken so far.
    let ts = format!("1800000000.{:06}", inner.sent.len() + 1);
    inner.sent.push(Sent {
        channel: channel.to_string(),
        text: text.to_string(),
        thread_ts: b["thread_ts"].as_str().map(str::to_string),
        mrkdwn: b["mrkdwn"] != false,
        ts: ts.clone(),
        at: Instant::now(),
    });
    answer(
        StatusCode::OK,
        json!({ "ok": true, "channel": channel, "ts": ts,
            "message": { "type": "message", "text": text, "user": BOT_USER, "bot_id": BOT_ID, "ts": ts } }),
    )
}

/// What Slack answers a file download it does not authorise: its
/// sign-in page, with HTTP 200.
const SIGN_IN_PAGE: &str = "<!DOCTYPE html><html lang=\"en-US\"><head><title>Slack</title></head>\
    <body><h1>Sign in to G2 Test</h1><form action=\"/signin\" method=\"post\"></form></body></html>";

/// A file's bytes: `GET /files-pri/<team>-<id>/download/<name>` (or
/// without `download/`), with the bot token.
async fn file(
    State(api): State<SlackApi>,
    axum::extract::Path(rest): axum::extract::Path<String>,
    headers: HeaderMap,
) -> Response {
    let id = rest
        .split('/')
        .next()
        .and_then(|k| k.strip_prefix(&format!("{TEAM}-")))
        .unwrap_or_default()
        .to_string();
    let mut inner = api.lock();
    inner.downloads.push(id.clone());
    if bearer(&headers) != BOT_TOKEN || inner.no_files_read {
        return (
            StatusCode::OK,
            [("content-type", "text/html; charset=utf-8")],
            SIGN_IN_PAGE,
        )
            .into_response();
    }
    match inner.files.get(&id) {
        Some((mime, bytes)) => (
            StatusCode::OK,
            [("content-type", mime.clone())],
            bytes.clone(),
        )
            .into_response(),
        None => (
            StatusCode::NOT_FOUND,
            [("content-type", "text/html; charset=utf-8")],
            "<html><body>Not found</body></html>",
        )
            .into_response(),
    }
}

/// One Socket Mode connection, until it ends.
async fn socket(api: SlackApi, tcp: tokio::net::TcpStream) {
    let Ok((request, mut ws)) = ServerBuilder::new().accept(tcp).await else {
        return;
    };
    let ticket = request
        .uri()
        .query()
        .and_then(|q| q.split('&').find_map(|p| p.strip_prefix("ticket=")))
        .unwrap_or_default()
        .to_string();
    // Each URL opens one connection.
    if !api.lock().tickets.remove(&ticket) {
        let _ = ws.close().await;
        return;
    }
    let (tx, mut rx) = mpsc::unbounded_channel();
    let (me, again) = {
        let mut inner = api.lock();
        inner.connections += 1;
        let me = inner.connections;
        inner.current = Some((me, tx));
        // What was not acknowledged is delivered again.
        let mut again = Vec::new();
        for e in inner.envelopes.iter_mut().filter(|e| e.acked.is_none()) {
            let mut body = e.body.clone();
            body["retry_attempt"] = json!(e.sent.len());
            if !e.sent.is_empty() {
                body["retry_reason"] = json!("timeout");
            }
            e.sent.push(Instant::now());
            again.push(body.to_string());
        }
        (me, again)
    };
    let hello = json!({ "type": "hello", "num_connections": 1,
        "connection_info": { "app_id": "A0TEST" },
        "debug_info": { "host": "applink-test", "approximate_connection_time": 18060 } });
    if ws.send(Frame::text(hello.to_string())).await.is_err() {
        return;
    }
    for body in again {
        if ws.send(Frame::text(body)).await.is_err() {
            return;
        }
    }
    loop {
        tokio::select! {
            cmd = rx.recv() => match cmd {
                Some(Cmd::Frame(t)) => {
                    if ws.send(Frame::text(t)).await.is_err() {
                        break;
                    }
                }
                Some(Cmd::Disconnect(reason)) => {
                    let d = json!({ "type": "disconnect", "reason": reason,
                        "debug_info": { "host": "applink-test" } });
                    if ws.send(Frame::text(d.to_string())).await.is_err() {
                        break;
                    }
                }
                Some(Cmd::Drop) | None => break,
            },
            frame = ws.next() => match frame {
                Some(Ok(f)) => {
                    if let Some(id) = f.as_text().and_then(|t| serde_json::from_str::<Value>(t).ok())
                        .and_then(|v| v["envelope_id"].as_str().map(str::to_string))
                    {
                        let mut inner = api.lock();
                        if let Some(e) = inner.envelopes.iter_mut().find(|e| e.id == id) {
                            e.acked.get_or_insert(Instant::now());
                        }
                    }
                }
                _ => break,
            },
        }
    }
    let mut inner = api.lock();
    if inner.current.as_ref().is_some_and(|(n, _)| *n == me) {
        inner.current = None;
    }
}

impl SlackApi {
    /// Starts the Web API and the Socket Mode server on free local ports.
    pub async fn start() -> SlackApi {
        let (ws_listener, ws_addr) = local_api::listen().await;
        let api = SlackApi {
            url: String::new(),
            ws: format!("ws://{ws_addr}"),
            inner: Arc::new(Mutex::new(Inner::default())),
        };
        let app = Router::new()
            .route("/auth.test", post(auth_test))
            .route("/apps.connections.open", post(open))
            .route("/chat.postMessage", post(post_message))
            .route("/files-pri/{*rest}", get(file))
            .with_state(api.clone());
        let url = local_api::serve_app(app).await;
        let ws_api = api.clone();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = ws_listener.accept().await {
                tokio::spawn(socket(ws_api.clone(), tcp));
            }
        });
        SlackApi { url, ..api }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        local_api::lock(&self.inner)
    }

    /// Sends an `events_api` envelope with `event` (now when a socket is
    /// open, else when one opens); answers its envelope id.
    pub fn event(&self, event: Value) -> String {
        let id = uuid::Uuid::new_v4().to_string();
        let body = json!({ "type": "events_api", "envelope_id": id,
            "accepts_response_payload": false, "retry_attempt": 0, "retry_reason": "",
            "payload": { "token": "unused", "team_id": TEAM, "api_app_id": "A0TEST",
                "type": "event_callback", "event_id": format!("Ev{}", &id[..8]),
                "event_time": 1_800_000_000, "authorizations": [{ "team_id": TEAM, "user_id": BOT_USER, "is_bot": true }],
                "event": event } });
        let mut inner = self.lock();
        let mut e = Envelope {
            id: id.clone(),
            body: body.clone(),
            sent: Vec::new(),
            acked: None,
        };
        if let Some((_, tx)) = &inner.current
            && tx.send(Cmd::Frame(body.to_string())).is_ok()
        {
            e.sent.push(Instant::now());
        }
        inner.envelopes.push(e);
        id
    }

    /// A person's message in a channel, as Slack sends it to an app that
    /// subscribes to both: a `message` event and, when it mentions the
    /// bot, an `app_mention` with the same `ts`. Answers the `ts`.
    pub fn say(&self, channel: &str, user: &str, text: &str, thread_ts: Option<&str>) -> String {
        let ts = ts();
        let mut m = json!({ "type": "message", "user": user, "text": text, "ts": ts,
            "channel": channel, "event_ts": ts, "team": TEAM,
            "channel_type": if channel.starts_with('D') { "im" } else { "channel" } });
        if let Some(t) = thread_ts {
            m["thread_ts"] = json!(t);
        }
        self.event(m.clone());
        if text.contains(&format!("<@{BOT_USER}>")) {
            m["type"] = json!("app_mention");
            m.as_object_mut().unwrap().remove("channel_type");
            self.event(m);
        }
        ts
    }

    /// A mention of the bot: `<@bot>` and the text.
    pub fn mention(&self, channel: &str, user: &str, text: &str) -> String {
        self.say(channel, user, &format!("<@{BOT_USER}>\n{text}"), None)
    }

    /// A file the bot may fetch (`bytes`, served as `mimetype`): its file
    /// object, to put in a message's `files` ([`SlackApi::share`]). A
    /// `voice` one is a clip recorded in Slack (`subtype: slack_audio`).
    pub fn add_file(&self, name: &str, mimetype: &str, bytes: Vec<u8>, voice: bool) -> Value {
        let mut inner = self.lock();
        let id = format!("F0{:06}", inner.files.len() + 1);
        let size = bytes.len() as u64;
        inner
            .files
            .insert(id.clone(), (mimetype.to_string(), bytes));
        drop(inner);
        self.file_object(&id, name, mimetype, size, voice)
    }

    /// The object Slack describes a file with (this server holds its
    /// bytes only when [`SlackApi::add_file`] made it): `size` as
    /// announced.
    pub fn file_object(
        &self,
        id: &str,
        name: &str,
        mimetype: &str,
        size: u64,
        voice: bool,
    ) -> Value {
        let filetype = name.rsplit_once('.').map_or("binary", |(_, e)| e);
        let private = format!("{}/files-pri/{TEAM}-{id}", self.url);
        let mut f = json!({ "id": id, "created": 1_800_000_000, "timestamp": 1_800_000_000,
            "name": name, "title": name, "mimetype": mimetype, "filetype": filetype,
            "pretty_type": filetype.to_uppercase(), "user": "U0ANY", "user_team": TEAM,
            "editable": false, "size": size, "mode": "hosted", "is_external": false,
            "external_type": "", "is_public": false, "public_url_shared": false,
            "display_as_bot": false, "username": "",
            "url_private": format!("{private}/{name}"),
            "url_private_download": format!("{private}/download/{name}"),
            "permalink": format!("https://g2-test.slack.com/files/U0ANY/{id}/{name}"),
            "has_rich_preview": false, "file_access": "visible" });
        if voice {
            f["subtype"] = json!("slack_audio");
            f["media_display_type"] = json!("audio");
            f["duration_ms"] = json!(4000);
        }
        f
    }

    /// A person's message with files (`file_share`), sent as
    /// [`SlackApi::say`] sends a message: with an `app_mention` (the same
    /// files) when it mentions the bot. Answers the `ts`.
    pub fn share(&self, channel: &str, user: &str, text: &str, files: Vec<Value>) -> String {
        let ts = ts();
        let mut m = json!({ "type": "message", "subtype": "file_share", "user": user,
            "text": text, "files": files, "upload": false, "display_as_bot": false,
            "ts": ts, "channel": channel, "event_ts": ts,
            "channel_type": if channel.starts_with('D') { "im" } else { "channel" } });
        self.event(m.clone());
        if text.contains(&format!("<@{BOT_USER}>")) {
            m["type"] = json!("app_mention");
            let o = m.as_object_mut().unwrap();
            o.remove("channel_type");
            o.remove("subtype");
            self.event(m);
        }
        ts
    }

    /// The file ids downloads asked for, in order.
    pub fn downloads(&self) -> Vec<String> {
        self.lock().downloads.clone()
    }

    /// The app loses `files:read`: downloads get the sign-in page.
    pub fn without_files_read(&self) {
        self.lock().no_files_read = true;
    }

    /// The bot's own message, as Slack shows it to the app again.
    pub fn echo(&self, channel: &str, text: &str) {
        let ts = ts();
        self.event(
            json!({ "type": "message", "subtype": "bot_message", "bot_id": BOT_ID,
            "user": BOT_USER, "text": text, "ts": ts, "channel": channel, "event_ts": ts,
            "channel_type": "channel" }),
        );
    }

    /// Sends an envelope again (as Slack does when it saw no
    /// acknowledgement in time), with the next `retry_attempt`.
    pub fn repeat(&self, id: &str) {
        let mut inner = self.lock();
        let Some(e) = inner.envelopes.iter().position(|e| e.id == id) else {
            return;
        };
        let mut body = inner.envelopes[e].body.clone();
        body["retry_attempt"] = json!(inner.envelopes[e].sent.len());
        body["retry_reason"] = json!("timeout");
        if let Some((_, tx)) = &inner.current
            && tx.send(Cmd::Frame(body.to_string())).is_ok()
        {
            inner.envelopes[e].sent.push(Instant::now());
        }
    }

    /// A `disconnect` envelope on the open socket.
    pub fn disconnect(&self, reason: &'static str) {
        if let Some((_, tx)) = &self.lock().current {
            let _ = tx.send(Cmd::Disconnect(reason));
        }
    }

    /// Drops the open socket's TCP connection.
    pub fn drop_socket(&self) {
        if let Some((_, tx)) = self.lock().current.take() {
            let _ = tx.send(Cmd::Drop);
        }
    }

    pub fn fail_next_send(&self, f: Failure) {
        self.lock().failures.push_back(f);
    }

    pub fn sent(&self) -> Vec<Sent> {
        self.lock().sent.clone()
    }

    /// What a channel was sent.
    pub fn sent_to(&self, channel: &str) -> Vec<Sent> {
        self.sent()
            .into_iter()
            .filter(|s| s.channel == channel)
            .collect()
    }

    pub fn rejected(&self) -> usize {
        self.lock().rejected
    }

    /// `apps.connections.open` calls, and sockets connected.
    pub fn opens(&self) -> (usize, usize) {
        let inner = self.lock();
        (inner.opens, inner.connections)
    }

    /// Whether a socket is open.
    pub fn connected(&self) -> bool {
        self.lock().current.is_some()
    }

    pub fn envelopes(&self) -> Vec<Envelope> {
        self.lock().envelopes.clone()
    }

    /// Waits until a socket is open (at most `secs`).
    pub async fn wait_connected(&self, connections: usize, secs: u64) {
        let ok = || self.connected() && self.opens().1 >= connections;
        let what = || format!("g2 never connected: {:?}", self.opens());
        local_api::wait_until(secs, ok, what).await;
    }

    /// Waits until `channel` was sent `n` messages (at most `secs`).
    pub async fn wait_sent(&self, channel: &str, n: usize, secs: u64) -> Vec<Sent> {
        local_api::wait_sent(channel, n, secs, || self.sent_to(channel)).await
    }
}

/// A new message `ts`, unique in the test process.
pub fn ts() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    format!(
        "1700000000.{:06}",
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    )
}
