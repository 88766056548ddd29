//! A local Discord: the gateway (a WebSocket speaking API v10's JSON
//! protocol) and the REST calls g2 makes, with Discord's documented
//! shapes.
//!
//! - Gateway: Hello (op 10) with a heartbeat interval; Identify (op 2)
//!   checked for the token (close 4004) and the Message Content intent
//!   (close 4014); READY with a session id and a `resume_gateway_url`;
//!   heartbeats (op 1) ACKed (op 11); Resume (op 6) replays every dispatch
//!   after the client's sequence, then RESUMED; an unknown session gets
//!   Invalid Session (op 9). Each dispatch carries the next sequence `s`.
//!   A message the bot posts comes back as a MESSAGE_CREATE authored by
//!   the bot, as on Discord.
//! - REST (`/api/v10`, `Authorization: Bot <token>`): `GET /users/@me`,
//!   `GET /applications/@me` (its flags), `POST /channels/{id}/messages`
//!   (content of at most 2,000 characters, `message_reference`), `POST
//!   /channels/{id}/typing` (204). Errors are `{"code", "message"}`; a 429
//!   carries `retry_after` and the `Retry-After` and `X-RateLimit-*`
//!   headers (Scope, Bucket, Limit, Remaining, Reset-After).
//! - CDN (its own address, as `cdn.discordapp.com` is another host):
//!   attachments' bytes at the `url` a MESSAGE_CREATE names,
//!   `/attachments/{channel}/{attachment}/{filename}?ex=…&is=…&hm=…`.
//!   Discord signs those URLs (`ex`, the expiry, and `is`, the issue time,
//!   in hex seconds; `hm`, the signature) and asks for no token: a URL
//!   not signed, signed wrongly or expired, or naming no attachment, is a
//!   404 "This content is no longer available.". Every download is
//!   counted, and every one that carried an `Authorization` header (the
//!   bot token must never go there).

#![allow(dead_code)]

use std::collections::HashMap;

use axum::extract::{Path, Query};
use futures_util::{SinkExt, StreamExt};
use tokio::sync::mpsc;
use tokio_websockets::{CloseCode, Message as Frame, ServerBuilder};

// The local servers' shared start, lock, waits and vocabulary.
use super::local_api::{self, prelude::*};

pub const TOKEN: &str = "MTAxdGVzdC1kaXNjb3JkLWJvdC10b2tlbg.G2test.local-discord-token";
pub const BOT_ID: u64 = 900_000_000_000_000_001;
pub const GUILD: u64 = 700_000_000_000_000_001;
/// Message Content intent (1 << 15).
const MESSAGE_CONTENT: u64 = 1 << 15;
/// The application flag GATEWAY_MESSAGE_CONTENT.
const APP_MESSAGE_CONTENT: u64 = 1 << 19;

/// One message the bot posted.
#[derive(Debug, Clone)]
pub struct Sent {
    pub id: u64,
    pub channel: u64,
    pub text: String,
    pub reply_to: Option<String>,
    pub at: Instant,
}

/// What the next `messages` POST answers with.
#[derive(Debug, Clone, Copy)]
pub enum Failure {
    /// 429 for this many seconds.
    RateLimited(f64),
    /// 403, code 50001 (the bot lost access to the channel).
    MissingAccess,
}

/// What the current gateway connection is told to do.
enum Out {
    Frame(String),
    Close(u16),
}

#[derive(Default)]
struct Inner {
    next_id: u64,
    sent: Vec<Sent>,
    failures: VecDeque<Failure>,
    limited: usize,
    typing: Vec<u64>,
    /// The session: its id and every dispatch sent in it (seq, JSON).
    session: Option<(String, Vec<(u64, String)>)>,
    conn: Option<mpsc::UnboundedSender<Out>>,
    identifies: usize,
    resumes: Vec<(String, u64)>,
    content_intent_off: bool,
    /// The CDN's files by path: the signature its URL carries, the bytes
    /// and their content type.
    files: HashMap<String, (String, Vec<u8>, String)>,
    /// Paths the CDN was asked for, in order.
    cdn_gets: Vec<String>,
    /// CDN requests that carried an `Authorization` header.
    cdn_authorized: usize,
}

#[derive(Clone)]
pub struct DiscordApi {
    /// The REST API's base (`…/api/v10`).
    pub api_url: String,
    /// The gateway's address.
    pub gateway_url: String,
    /// The CDN's base (`http://…`, no path).
    pub cdn_url: String,
    inner: Arc<Mutex<Inner>>,
}

fn error(status: StatusCode, code: u64, message: &str) -> Response {
    (
        status,
        axum::Json(json!({ "code": code, "message": message })),
    )
        .into_response()
}

fn authorized(headers: &HeaderMap) -> bool {
    headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == format!("Bot {TOKEN}"))
}

pub fn user(id: u64, name: &str, bot: bool) -> Value {
    json!({ "id": id.to_string(), "username": name, "discriminator": "0", "global_name": null,
            "avatar": null, "bot": bot, "public_flags": 0 })
}

/// The bot as READY describes it (a current user: with `mfa_enabled`,
/// `verified` and `flags`).
fn current_user() -> Value {
    let mut u = user(BOT_ID, "g2bot", true);
    u["mfa_enabled"] = json!(false);
    u["verified"] = json!(true);
    u["flags"] = json!(0);
    u
}

/// A MESSAGE_CREATE's `d`, with every field Discord sends in a server.
pub fn message_d(id: u64, channel: u64, author: Value, content: &str, mentions: Value) -> Value {
    json!({
        "id": id.to_string(), "channel_id": channel.to_string(), "guild_id": GUILD.to_string(),
        "author": author, "content": content, "timestamp": "2026-11-26T10:00:00.000000+00:00",
        "edited_timestamp": null, "tts": false, "mention_everyone": false, "mentions": mentions,
        "mention_roles": [], "attachments": [], "embeds": [], "pinned": false, "type": 0,
        "flags": 0, "components": [],
    })
}

async fn me(headers: HeaderMap) -> Response {
    if !authorized(&headers) {
        return error(StatusCode::UNAUTHORIZED, 0, "401: Unauthorized");
    }
    axum::Json(user(BOT_ID, "g2bot", true)).into_response()
}

async fn application(State(api): State<DiscordApi>, headers: HeaderMap) -> Response {
    if !authorized(&headers) {
        return error(StatusCode::UNAUTHORIZED, 0, "401: Unauthorized");
    }
    let off = api.inner.lock().unwrap().content_intent_off;
    let flags = if off { 0 } else { APP_MESSAGE_CONTENT };
    axum::Json(json!({ "id": "800000000000000001", "name": "g2", "flags": flags })).into_response()
}

async fn typing(
    State(api): State<DiscordApi>,
    Path(channel): Path<u64>,
    headers: HeaderMap,
) -> Response {
    if !authorized(&headers) {
        return error(StatusCode::UNAUTHORIZED, 0, "401: Unauthorized");
    }
    api.inner.lock().unwrap().typing.push(channel);
    StatusCode::NO_CONTENT.into_response()
}

async fn create(
    State(api): State<DiscordApi>,
    Path(channel): Path<u64>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    if !authorized(&headers) {
        return error(StatusCode::UNAUTHORIZED, 0, "401: Unauthorized");
    }
    let Ok(v) = serde_json::from_slice::<Value>(&body) else {
        return error(
            StatusCode::BAD_REQUEST,
            50_109,
            "The request body contains invalid JSON.",
        );
    };
    let content = v["content"].as_str().unwrap_or_default().to_string();
    if content.trim().is_empty() {
        return error(
            StatusCode::BAD_REQUEST,
            50_006,
            "Cannot send an empty message",
        );
    }
    if content.chars().count() > 2000 {
        return error(StatusCode::BAD_REQUEST, 50_035, "Invalid Form Body");
    }
    let mut inner = api.inner.lock().unwrap();
    match inner.failures.pop_front() {
        Some(Failure::RateLimited(secs)) => {
            inner.limited += 1;
            let mut h = HeaderMap::new();
            for (k, val) in [
                ("retry-after", format!("{}", secs.ceil() as u64)),
                ("x-ratelimit-limit", "5".into()),
                ("x-ratelimit-remaining", "0".into()),
                ("x-ratelimit-reset-after", format!("{secs:.3}")),
                ("x-ratelimit-bucket", "abcd1234".into()),
                ("x-ratelimit-scope", "user".into()),
                ("x-ratelimit-global", "false".into()),
            ] {
                h.insert(k, val.parse().unwrap());
            }
            let body = json!({ "message": "You are being rate limited.", "retry_after": secs, "global": false });
            return (StatusCode::TOO_MANY_REQUESTS, h, axum::Json(body)).into_response();
        }
        Some(Failure::MissingAccess) => {
            return error(StatusCode::FORBIDDEN, 50_001, "Missing Access");
        }
        None => {}
    }
    inner.next_id += 1;
    let id = 950_000_000_000_000_000 + inner.next_id;
    let reply_to = v["message_reference"]["message_id"]
        .as_str()
        .map(str::to_string);
    inner.sent.push(Sent {
        id,
        channel,
        text: content.clone(),
        reply_to,
        at: Instant::now(),
    });
    let d = message_d(
        id,
        channel,
        user(BOT_ID, "g2bot", true),
        &content,
        json!([]),
    );
    drop(inner);
    // Discord shows the bot its own message too.
    api.dispatch("MESSAGE_CREATE", d.clone());
    let mut h = HeaderMap::new();
    for (k, val) in [
        ("x-ratelimit-limit", "5"),
        ("x-ratelimit-remaining", "4"),
        ("x-ratelimit-reset-after", "5.000"),
        ("x-ratelimit-bucket", "abcd1234"),
    ] {
        h.insert(k, val.parse().unwrap());
    }
    (StatusCode::OK, h, axum::Json(d)).into_response()
}

/// Seconds since the epoch.
fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// The CDN: an attachment's bytes for its signed URL, 404 otherwise.
async fn cdn(
    State(api): State<DiscordApi>,
    Path((channel, attachment, filename)): Path<(u64, u64, String)>,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let path = format!("/attachments/{channel}/{attachment}/{filename}");
    let mut inner = api.inner.lock().unwrap();
    inner.cdn_gets.push(path.clone());
    if headers.contains_key("authorization") {
        inner.cdn_authorized += 1;
    }
    let gone = || {
        (
            StatusCode::NOT_FOUND,
            [("content-type", "text/plain")],
            "This content is no longer available.",
        )
            .into_response()
    };
    let Some((hm, bytes, ty)) = inner.files.get(&path) else {
        return gone();
    };
    let live = q
        .get("ex")
        .and_then(|ex| u64::from_str_radix(ex, 16).ok())
        .is_some_and(|ex| ex > unix_now());
    if !live || q.get("hm") != Some(hm) || !q.contains_key("is") {
        return gone();
    }
    (
        StatusCode::OK,
        [("content-type", ty.clone())],
        bytes.clone(),
    )
        .into_response()
}

impl DiscordApi {
    pub async fn start() -> DiscordApi {
        let (rest, rest_addr) = local_api::listen().await;
        let (gateway, gateway_addr) = local_api::listen().await;
        let (cdn_listener, cdn_addr) = local_api::listen().await;
        let api = DiscordApi {
            api_url: format!("http://{rest_addr}/api/v10"),
            gateway_url: format!("ws://{gateway_addr}"),
            cdn_url: format!("http://{cdn_addr}"),
            inner: Arc::new(Mutex::new(Inner::default())),
        };
        let files = Router::new()
            .route("/attachments/{channel}/{attachment}/{filename}", get(cdn))
            .with_state(api.clone());
        local_api::serve(cdn_listener, files);
        let app = Router::new()
            .route("/api/v10/users/@me", get(me))
            .route("/api/v10/applications/@me", get(application))
            .route("/api/v10/channels/{channel}/messages", post(create))
            .route("/api/v10/channels/{channel}/typing", post(typing))
            .with_state(api.clone());
        local_api::serve(rest, app);
        let gw = api.clone();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = gateway.accept().await {
                let gw = gw.clone();
                tokio::spawn(async move { gw.connection(tcp).await });
            }
        });
        api
    }

    /// One gateway connection, until either side closes it.
    async fn connection(&self, tcp: tokio::net::TcpStream) {
        let Ok((_req, mut ws)) = ServerBuilder::new().accept(tcp).await else {
            return;
        };
        let (tx, mut rx) = mpsc::unbounded_channel();
        let hello = json!({ "op": 10, "d": { "heartbeat_interval": 41250 }, "s": null, "t": null });
        if ws.send(Frame::text(hello.to_string())).await.is_err() {
            return;
        }
        loop {
            tokio::select! {
                out = rx.recv() => match out {
                    Some(Out::Frame(f)) => {
                        if ws.send(Frame::text(f)).await.is_err() { return; }
                    }
                    Some(Out::Close(code)) => {
                        let code = CloseCode::try_from(code).unwrap_or(CloseCode::NORMAL_CLOSURE);
                        let _ = ws.send(Frame::close(Some(code), "closing")).await;
                        return;
                    }
                    None => return,
                },
                frame = ws.next() => {
                    let Some(Ok(frame)) = frame else { self.detach(&tx); return };
                    let Some(text) = frame.as_text() else {
                        if frame.is_close() { self.detach(&tx); return; }
                        continue;
                    };
                    let Ok(v) = serde_json::from_str::<Value>(text) else {
                        let _ = ws.send(Frame::close(CloseCode::try_from(4002).ok(), "decode error")).await;
                        return;
                    };
                    self.op(&v, &tx);
                }
            }
        }
    }

    fn detach(&self, tx: &mpsc::UnboundedSender<Out>) {
        let mut inner = self.inner.lock().unwrap();
        if inner.conn.as_ref().is_some_and(|c| c.same_channel(tx)) {
            inner.conn = None;
        }
    }

    /// What the client's frame asks.
    fn op(&self, v: &Value, tx: &mpsc::UnboundedSender<Out>) {
        let token_ok = |t: &Value| {
            t.as_str()
                .is_some_and(|t| t.strip_prefix("Bot ").unwrap_or(t) == TOKEN)
        };
        match v["op"].as_u64() {
            Some(1) => {
                let _ = tx.send(Out::Frame(json!({ "op": 11, "d": null }).to_string()));
            }
            Some(2) => {
                let d = &v["d"];
                if !token_ok(&d["token"]) {
                    let _ = tx.send(Out::Close(4004));
                    return;
                }
                if d["intents"].as_u64().unwrap_or(0) & MESSAGE_CONTENT == 0 {
                    let _ = tx.send(Out::Close(4014));
                    return;
                }
                let mut inner = self.inner.lock().unwrap();
                inner.identifies += 1;
                let id = format!("session-{}", inner.identifies);
                inner.session = Some((id.clone(), Vec::new()));
                inner.conn = Some(tx.clone());
                drop(inner);
                self.dispatch(
                    "READY",
                    json!({
                        "v": 10, "user": current_user(), "guilds": [{ "id": GUILD.to_string(), "unavailable": true }],
                        "session_id": id, "resume_gateway_url": self.gateway_url,
                        "application": { "id": "800000000000000001", "flags": APP_MESSAGE_CONTENT },
                    }),
                );
            }
            Some(6) => {
                let d = &v["d"];
                let seq = d["seq"].as_u64().unwrap_or(0);
                let asked = d["session_id"].as_str().unwrap_or_default().to_string();
                let mut inner = self.inner.lock().unwrap();
                inner.resumes.push((asked.clone(), seq));
                let known = inner.session.as_ref().is_some_and(|(id, _)| *id == asked);
                if !token_ok(&d["token"]) || !known {
                    let _ = tx.send(Out::Frame(json!({ "op": 9, "d": false }).to_string()));
                    return;
                }
                inner.conn = Some(tx.clone());
                let (_, events) = inner.session.as_ref().unwrap();
                for (_, e) in events.iter().filter(|(s, _)| *s > seq) {
                    let _ = tx.send(Out::Frame(e.clone()));
                }
                drop(inner);
                self.dispatch("RESUMED", json!({}));
            }
            _ => {}
        }
    }

    /// Sends a dispatch in the session (kept for a resume; sent now if a
    /// connection is up).
    pub fn dispatch(&self, t: &str, d: Value) {
        let mut inner = self.inner.lock().unwrap();
        let conn = inner.conn.clone();
        let Some((_, events)) = inner.session.as_mut() else {
            return;
        };
        let s = events.last().map_or(1, |(s, _)| s + 1);
        let frame = json!({ "op": 0, "s": s, "t": t, "d": d }).to_string();
        events.push((s, frame.clone()));
        if let Some(c) = conn {
            let _ = c.send(Out::Frame(frame));
        }
    }

    /// A person posts in a channel; `mention_bot` mentions the bot.
    pub fn say(&self, channel: u64, author: u64, name: &str, text: &str, mention_bot: bool) -> u64 {
        self.post(channel, author, name, text, mention_bot, vec![], 0)
    }

    /// A person posts in a channel with `attachments` (objects from
    /// [`DiscordApi::attachment`] and the like) and message `flags`.
    #[allow(clippy::too_many_arguments)]
    pub fn post(
        &self,
        channel: u64,
        author: u64,
        name: &str,
        text: &str,
        mention_bot: bool,
        attachments: Vec<Value>,
        flags: u64,
    ) -> u64 {
        let id = self.next_snowflake();
        let (content, mentions) = if mention_bot {
            (
                format!("<@{BOT_ID}> {text}"),
                json!([user(BOT_ID, "g2bot", true)]),
            )
        } else {
            (text.to_string(), json!([]))
        };
        let mut d = message_d(id, channel, user(author, name, false), &content, mentions);
        d["attachments"] = Value::Array(attachments);
        d["flags"] = json!(flags);
        self.dispatch("MESSAGE_CREATE", d);
        id
    }

    fn next_snowflake(&self) -> u64 {
        let mut inner = self.inner.lock().unwrap();
        inner.next_id += 1;
        960_000_000_000_000_000 + inner.next_id
    }

    /// A file on the CDN, and the attachment object that names it (its
    /// `url` signed, valid for a day, as Discord's are).
    pub fn attachment(
        &self,
        channel: u64,
        filename: &str,
        content_type: &str,
        bytes: &[u8],
    ) -> Value {
        let id = self.next_snowflake();
        let path = format!("/attachments/{channel}/{id}/{filename}");
        let issued = unix_now();
        let (ex, is) = (format!("{:x}", issued + 86_400), format!("{issued:x}"));
        let hm = {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            (&path, &ex, &is, "local-cdn-key").hash(&mut h);
            format!("{:016x}", h.finish())
        };
        self.inner.lock().unwrap().files.insert(
            path.clone(),
            (hm.clone(), bytes.to_vec(), content_type.to_string()),
        );
        let url = format!("{}{path}?ex={ex}&is={is}&hm={hm}&", self.cdn_url);
        json!({
            "id": id.to_string(), "filename": filename, "size": bytes.len(),
            "url": url, "proxy_url": url,
            "content_type": content_type,
        })
    }

    /// A voice message's attachment (`voice-message.ogg`, with its length
    /// and waveform); post it with the flag IS_VOICE_MESSAGE (1 << 13).
    pub fn voice_attachment(&self, channel: u64, ogg: &[u8], secs: f64) -> Value {
        let mut a = self.attachment(channel, "voice-message.ogg", "audio/ogg", ogg);
        a["duration_secs"] = json!(secs);
        a["waveform"] = json!("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA");
        a
    }

    /// An attachment object whose URL the CDN knows nothing of (a 404).
    pub fn missing_attachment(
        &self,
        channel: u64,
        filename: &str,
        content_type: &str,
        size: u64,
    ) -> Value {
        let id = self.next_snowflake();
        let url = format!(
            "{}/attachments/{channel}/{id}/{filename}?ex=ffffffff&is=0&hm=0000&",
            self.cdn_url
        );
        json!({
            "id": id.to_string(), "filename": filename, "size": size,
            "url": url, "proxy_url": url, "content_type": content_type,
        })
    }

    /// The paths the CDN was asked for.
    pub fn cdn_gets(&self) -> Vec<String> {
        self.inner.lock().unwrap().cdn_gets.clone()
    }

    /// How many CDN requests carried an `Authorization` header.
    pub fn cdn_authorized(&self) -> usize {
        self.inner.lock().unwrap().cdn_authorized
    }

    /// The bot's own message seen again (as Discord shows it).
    pub fn bot_says(&self, channel: u64, text: &str) {
        let id = self.next_snowflake();
        let d = message_d(id, channel, user(BOT_ID, "g2bot", true), text, json!([]));
        self.dispatch("MESSAGE_CREATE", d);
    }

    /// Drops the gateway connection (Discord's close 4000, or the network
    /// gone); the session lives on for a resume.
    pub fn drop_connection(&self, code: u16) {
        if let Some(c) = self.inner.lock().unwrap().conn.take() {
            let _ = c.send(Out::Close(code));
        }
    }

    /// Whether a gateway connection is up (identified or resumed).
    pub fn connected(&self) -> bool {
        self.inner.lock().unwrap().conn.is_some()
    }

    pub fn fail_next_send(&self, f: Failure) {
        self.inner.lock().unwrap().failures.push_back(f);
    }

    pub fn content_intent_off(&self) {
        self.inner.lock().unwrap().content_intent_off = true;
    }

    pub fn sent(&self) -> Vec<Sent> {
        self.inner.lock().unwrap().sent.clone()
    }

    pub fn sent_to(&self, channel: u64) -> Vec<Sent> {
        self.sent()
            .into_iter()
            .filter(|s| s.channel == channel)
            .collect()
    }

    pub fn limited(&self) -> usize {
        self.inner.lock().unwrap().limited
    }

    pub fn identifies(&self) -> usize {
        self.inner.lock().unwrap().identifies
    }

    pub fn resumes(&self) -> Vec<(String, u64)> {
        self.inner.lock().unwrap().resumes.clone()
    }

    pub fn typed_in(&self, channel: u64) -> usize {
        self.inner
            .lock()
            .unwrap()
            .typing
            .iter()
            .filter(|c| **c == channel)
            .count()
    }

    pub async fn wait_sent(&self, channel: u64, n: usize, secs: u64) -> Vec<Sent> {
        local_api::wait_sent(channel, n, secs, || self.sent_to(channel)).await
    }

    pub async fn wait_connected(&self, secs: u64) {
        let what = || "g2 never connected to the gateway".to_string();
        local_api::wait_until(secs, || self.connected(), what).await;
    }
}
