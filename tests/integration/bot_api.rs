//! A local Telegram Bot API server: the methods g2 uses (`getMe`,
//! `getUpdates`, `sendMessage`, `sendChatAction`, `getFile` and the file
//! download `GET /file/bot<token>/<file_path>`) with the request and
//! answer shapes and the errors of Telegram's documentation
//! (<https://core.telegram.org/bots/api>): `{"ok":false,"error_code":…,
//! "description":…}`, with `parameters.retry_after` on 429. Updates are
//! confirmed by a later `getUpdates` with a higher offset, as Telegram
//! does; `sendMessage` with `parse_mode: "HTML"` checks the markup by the
//! documented rules (supported tags, balanced, the four entities) and
//! answers "can't parse entities" otherwise. A `getUpdates` that comes
//! while another waits ends that one with 409 Conflict ("terminated by
//! other getUpdates request"), as when two bots poll one token.
//!
//! Tests push updates in ([`BotApi::message`]), script failures
//! ([`BotApi::fail_next_send`]), hold a `sendMessage` after taking it
//! (the host is killed while it waits for the answer), and read what was
//! sent ([`BotApi::sent`]).

#![allow(dead_code)]

use axum::Json;
use axum::http::Uri;
use tokio::sync::Notify;

// The local servers' shared start, lock, waits and vocabulary.
use super::local_api::{self, prelude::*};

pub const TOKEN: &str = "123456789:AAtest-token-for-the-local-bot-api-x";
pub const BOT_ID: i64 = 777_000;
pub const BOT_USERNAME: &str = "g2bot";

/// One `sendMessage` the server took.
#[derive(Debug, Clone)]
pub struct Sent {
    pub message_id: i64,
    pub chat_id: i64,
    pub text: String,
    pub parse_mode: Option<String>,
    pub thread: Option<i64>,
    pub reply_to: Option<i64>,
    pub at: Instant,
}

/// A failure the next `sendMessage` answers with.
#[derive(Debug, Clone)]
pub enum Failure {
    /// 429 with `retry_after`.
    TooMany(u64),
    /// 400 "can't parse entities" for the next one sent with a parse mode.
    BadFormatting,
    /// Taken (it counts as sent) and never answered.
    Hold,
}

#[derive(Default)]
struct Inner {
    updates: Vec<Value>,
    next_update: i64,
    next_message: i64,
    sent: Vec<Sent>,
    actions: Vec<(i64, String)>,
    /// Each getUpdates answer: when, and which update ids.
    fetched: Vec<(Instant, Vec<i64>)>,
    failures: VecDeque<Failure>,
    kicked: Vec<i64>,
    rejected: usize,
    /// The getUpdates request waiting now (a number per request); a new
    /// one ends it with 409, as Telegram does when two bots poll.
    polling: Option<u64>,
    polls: u64,
    conflicts: usize,
    /// Files by `file_id`: their `file_path` and bytes.
    files: std::collections::HashMap<String, (String, Vec<u8>)>,
    /// `getFile` requests, by `file_id`.
    file_asks: Vec<String>,
}

#[derive(Clone)]
pub struct BotApi {
    pub url: String,
    inner: Arc<Mutex<Inner>>,
    news: Arc<Notify>,
}

fn error(code: u16, description: &str, parameters: Option<Value>) -> Response {
    let mut body = json!({ "ok": false, "error_code": code, "description": description });
    if let Some(p) = parameters {
        body["parameters"] = p;
    }
    (StatusCode::from_u16(code).unwrap(), Json(body)).into_response()
}

fn ok(result: Value) -> Response {
    Json(json!({ "ok": true, "result": result })).into_response()
}

fn chat(id: i64) -> Value {
    if id > 0 {
        json!({ "id": id, "type": "private", "first_name": format!("user{id}") })
    } else {
        json!({ "id": id, "type": "supergroup", "title": format!("chat{id}"), "is_forum": true })
    }
}

fn bot_user() -> Value {
    json!({ "id": BOT_ID, "is_bot": true, "first_name": "G2", "username": BOT_USERNAME })
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// Checks Telegram HTML: supported tags, properly nested and closed, and
/// `&` only in `&lt;`, `&gt;`, `&amp;`, `&quot;` or a numeric entity.
pub fn check_html(text: &str) -> Result<(), String> {
    const TAGS: &[&str] = &[
        "b",
        "strong",
        "i",
        "em",
        "u",
        "ins",
        "s",
        "strike",
        "del",
        "span",
        "tg-spoiler",
        "a",
        "code",
        "pre",
        "blockquote",
        "tg-emoji",
    ];
    let mut open: Vec<String> = Vec::new();
    let mut rest = text;
    let mut at = 0;
    while let Some(i) = rest.find(['<', '&']) {
        let pos = at + i;
        let tail = &rest[i..];
        if tail.starts_with('&') {
            let end = tail.find(';').ok_or(format!(
                "Can't find end of the entity starting at byte offset {pos}"
            ))?;
            let name = &tail[1..end];
            let numeric = name
                .strip_prefix('#')
                .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
            if !(numeric || ["lt", "gt", "amp", "quot"].contains(&name)) {
                return Err(format!("Unsupported entity at byte offset {pos}"));
            }
            rest = &tail[end + 1..];
            at = pos + end + 1;
            continue;
        }
        let end = tail
            .find('>')
            .ok_or(format!("Can't find end of the tag at byte offset {pos}"))?;
        let inside = &tail[1..end];
        if let Some(name) = inside.strip_prefix('/') {
            match open.pop() {
                Some(o) if o == name.trim() => {}
                _ => {
                    return Err(format!(
                        "Unmatched end tag at byte offset {pos}, expected \"</{}>\", found \"</{name}>\"",
                        open.last().cloned().unwrap_or_default()
                    ));
                }
            }
        } else {
            let name = inside.split_whitespace().next().unwrap_or_default();
            if !TAGS.contains(&name) {
                return Err(format!(
                    "Unsupported start tag \"{name}\" at byte offset {pos}"
                ));
            }
            open.push(name.to_string());
        }
        rest = &tail[end + 1..];
        at = pos + end + 1;
    }
    match open.last() {
        Some(t) => Err(format!(
            "Can't find end tag corresponding to start tag \"{t}\""
        )),
        None => Ok(()),
    }
}

/// `@word` mentions as Telegram's entities (offsets in UTF-16 units).
fn mentions(text: &str) -> Vec<Value> {
    let mut out = Vec::new();
    for (i, c) in text.char_indices() {
        let before = &text[..i];
        if c == '@' && (i == 0 || before.ends_with(char::is_whitespace)) {
            let word: String = text[i + 1..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !word.is_empty() {
                let offset = before.encode_utf16().count();
                out.push(json!({ "type": "mention", "offset": offset, "length": word.len() + 1 }));
            }
        }
    }
    out
}

impl BotApi {
    /// Starts the server on a free local port.
    pub async fn start() -> BotApi {
        let inner = Arc::new(Mutex::new(Inner {
            next_update: 1000,
            next_message: 5000,
            ..Default::default()
        }));
        let api = BotApi {
            url: String::new(),
            inner,
            news: Arc::new(Notify::new()),
        };
        // Any path: the client may write `//bot…/method` after a bare host.
        let app = Router::new()
            .fallback(axum::routing::any(handle))
            .with_state(api.clone());
        let url = local_api::serve_app(app).await;
        BotApi { url, ..api }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        local_api::lock(&self.inner)
    }

    /// Queues an update with a message from `user` (`name`) in `chat`;
    /// `extra` is merged into the message. Returns its `message_id`.
    pub fn message(&self, chat_id: i64, user: i64, name: &str, text: &str, extra: Value) -> i64 {
        let from = json!({ "id": user, "is_bot": false, "first_name": name });
        self.push("message", chat_id, from, text, extra)
    }

    /// Queues an update of `kind` (`message`, `edited_message`) from any
    /// sender.
    pub fn push(&self, kind: &str, chat_id: i64, from: Value, text: &str, extra: Value) -> i64 {
        let mut inner = self.lock();
        let id = match extra.get("message_id").and_then(Value::as_i64) {
            Some(id) => id,
            None => {
                inner.next_message += 1;
                inner.next_message
            }
        };
        let mut m = json!({
            "message_id": id, "date": now(), "chat": chat(chat_id), "from": from,
        });
        if !text.is_empty() {
            m["text"] = json!(text);
            let ents = mentions(text);
            if !ents.is_empty() {
                m["entities"] = json!(ents);
            }
        }
        if let (Some(m), Some(e)) = (m.as_object_mut(), extra.as_object()) {
            m.extend(e.clone());
        }
        inner.next_update += 1;
        let mut update = json!({ "update_id": inner.next_update });
        update[kind] = m;
        inner.updates.push(update);
        drop(inner);
        self.news.notify_waiters();
        id
    }

    /// A file the bot may fetch: its `file_id`, to put in a message.
    pub fn add_file(&self, bytes: Vec<u8>, ext: &str) -> String {
        let mut inner = self.lock();
        let id = format!("FILE{}", inner.files.len() + 1);
        let path = format!("documents/file_{}.{ext}", inner.files.len() + 1);
        inner.files.insert(id.clone(), (path, bytes));
        id
    }

    /// The `file_id`s `getFile` was asked for.
    pub fn file_asks(&self) -> Vec<String> {
        self.lock().file_asks.clone()
    }

    /// The next `sendMessage` answers with this.
    pub fn fail_next_send(&self, f: Failure) {
        self.lock().failures.push_back(f);
    }

    /// Every `sendMessage` to this chat answers 403 from now on.
    pub fn kick(&self, chat_id: i64) {
        self.lock().kicked.push(chat_id);
    }

    /// What was sent, in the order it was taken.
    pub fn sent(&self) -> Vec<Sent> {
        self.lock().sent.clone()
    }

    /// What was sent to one chat.
    pub fn sent_to(&self, chat_id: i64) -> Vec<Sent> {
        self.sent()
            .into_iter()
            .filter(|s| s.chat_id == chat_id)
            .collect()
    }

    /// `sendChatAction`s: chat and action.
    pub fn actions(&self) -> Vec<(i64, String)> {
        self.lock().actions.clone()
    }

    /// How many sendMessage calls were refused (any error).
    /// How many getUpdates requests another one ended (two pollers).
    pub fn conflicts(&self) -> usize {
        self.lock().conflicts
    }

    pub fn rejected(&self) -> usize {
        self.lock().rejected
    }

    /// When each update id was handed out by getUpdates (the last time).
    pub fn fetched_at(&self, update_id: i64) -> Option<Instant> {
        self.lock()
            .fetched
            .iter()
            .rev()
            .find(|(_, ids)| ids.contains(&update_id))
            .map(|(t, _)| *t)
    }

    /// How many times each update id was handed out.
    pub fn times_fetched(&self, update_id: i64) -> usize {
        self.lock()
            .fetched
            .iter()
            .filter(|(_, ids)| ids.contains(&update_id))
            .count()
    }

    /// The newest update id queued.
    pub fn last_update_id(&self) -> i64 {
        self.lock().next_update
    }

    /// Waits until `n` messages were sent to the chat; what they are.
    pub async fn wait_sent(&self, chat_id: i64, n: usize, secs: u64) -> Vec<Sent> {
        local_api::wait_sent(chat_id, n, secs, || self.sent_to(chat_id)).await
    }
}

async fn handle(State(api): State<BotApi>, uri: Uri, body: Option<Json<Value>>) -> Response {
    // The client percent-encodes the token's colon.
    let path = uri.path().replace("%3A", ":").replace("%3a", ":");
    // Files: `/file/bot<token>/<file_path>`, the bytes (404 when unknown).
    if let Some(rest) = path.trim_start_matches('/').strip_prefix("file/") {
        let Some(file_path) = rest.strip_prefix(&format!("bot{TOKEN}/")) else {
            return error(401, "Unauthorized", None);
        };
        // The client sends the file path as one segment (`/` as `%2F`).
        let file_path = file_path.replace("%2F", "/").replace("%2f", "/");
        let found = api
            .lock()
            .files
            .values()
            .find(|(p, _)| *p == file_path)
            .map(|(_, b)| b.clone());
        return match found {
            Some(bytes) => bytes.into_response(),
            None => error(404, "Not Found", None),
        };
    }
    let mut parts = path.split('/').filter(|p| !p.is_empty());
    let (bot, method) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    if parts.next().is_some() || !bot.starts_with("bot") {
        return error(404, "Not Found", None);
    }
    if bot != format!("bot{TOKEN}") {
        return error(401, "Unauthorized", None);
    }
    // "All methods in the Bot API are case-insensitive."
    let method = method.to_ascii_lowercase();
    let body = body.map(|Json(v)| v).unwrap_or(Value::Null);
    match method.as_str() {
        "getme" => {
            // getMe's User has the bot-only fields.
            let mut me = bot_user();
            for (k, v) in [
                ("can_join_groups", true),
                ("can_read_all_group_messages", false),
                ("supports_inline_queries", false),
                ("can_connect_to_business", false),
                ("has_main_web_app", false),
            ] {
                me[k] = json!(v);
            }
            ok(me)
        }
        "getupdates" => get_updates(&api, &body).await,
        "getfile" => {
            let id = body["file_id"].as_str().unwrap_or_default().to_string();
            let mut inner = api.lock();
            inner.file_asks.push(id.clone());
            match inner.files.get(&id) {
                Some((path, bytes)) => ok(json!({
                    "file_id": id, "file_unique_id": format!("u{id}"),
                    "file_size": bytes.len(), "file_path": path,
                })),
                None => error(400, "Bad Request: invalid file_id", None),
            }
        }
        "sendmessage" => send_message(&api, &body).await,
        "sendchataction" => {
            let chat = body["chat_id"].as_i64().unwrap_or_default();
            let action = body["action"].as_str().unwrap_or_default().to_string();
            api.lock().actions.push((chat, action));
            ok(json!(true))
        }
        _ => error(404, "Not Found", None),
    }
}

async fn get_updates(api: &BotApi, body: &Value) -> Response {
    let offset = body["offset"].as_i64().unwrap_or(0);
    let timeout = body["timeout"].as_u64().unwrap_or(0).min(60);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(timeout);
    let me = {
        let mut inner = api.lock();
        inner.polls += 1;
        let me = inner.polls;
        inner.polling = Some(me);
        me
    };
    // An earlier request still waiting is ended (it looks at `polling`).
    api.news.notify_waiters();
    let done = |inner: &mut Inner| {
        if inner.polling == Some(me) {
            inner.polling = None;
        }
    };
    loop {
        let news = api.news.notified();
        {
            let mut inner = api.lock();
            if inner.polling != Some(me) {
                inner.conflicts += 1;
                return error(
                    409,
                    "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running",
                    None,
                );
            }
            // Telegram forgets updates below the offset: they are confirmed.
            inner
                .updates
                .retain(|u| u["update_id"].as_i64().unwrap_or(0) >= offset);
            if !inner.updates.is_empty() {
                let batch: Vec<Value> = inner.updates.iter().take(100).cloned().collect();
                let ids = batch
                    .iter()
                    .map(|u| u["update_id"].as_i64().unwrap())
                    .collect();
                inner.fetched.push((Instant::now(), ids));
                done(&mut inner);
                return ok(json!(batch));
            }
        }
        if tokio::time::timeout_at(deadline, news).await.is_err() {
            done(&mut api.lock());
            return ok(json!([]));
        }
    }
}

async fn send_message(api: &BotApi, body: &Value) -> Response {
    let chat_id = body["chat_id"].as_i64().unwrap_or_default();
    let text = body["text"].as_str().unwrap_or_default().to_string();
    let parse_mode = body["parse_mode"].as_str().map(str::to_string);
    let failure = {
        let mut inner = api.lock();
        let take = match inner.failures.front() {
            Some(Failure::BadFormatting) => parse_mode.is_some(),
            Some(_) => true,
            None => false,
        };
        if take {
            inner.failures.pop_front()
        } else {
            None
        }
    };
    let refuse = |code, why: &str, p| {
        api.lock().rejected += 1;
        error(code, why, p)
    };
    match failure {
        Some(Failure::TooMany(secs)) => {
            return refuse(
                429,
                &format!("Too Many Requests: retry after {secs}"),
                Some(json!({ "retry_after": secs })),
            );
        }
        Some(Failure::BadFormatting) => {
            return refuse(
                400,
                "Bad Request: can't parse entities: Unsupported start tag \"x\" at byte offset 0",
                None,
            );
        }
        _ => {}
    }
    if api.lock().kicked.contains(&chat_id) {
        return refuse(403, "Forbidden: bot was kicked from the group chat", None);
    }
    if text.trim().is_empty() {
        return refuse(400, "Bad Request: message text is empty", None);
    }
    if parse_mode.as_deref() == Some("HTML")
        && let Err(why) = check_html(&text)
    {
        return refuse(
            400,
            &format!("Bad Request: can't parse entities: {why}"),
            None,
        );
    }
    // Telegram counts the text after entities are parsed.
    let visible = if parse_mode.is_some() {
        strip_markup(&text)
    } else {
        text.clone()
    };
    if visible.encode_utf16().count() > 4096 {
        return refuse(400, "Bad Request: message is too long", None);
    }
    let reply_to = body["reply_parameters"]["message_id"].as_i64();
    let thread = body["message_thread_id"].as_i64();
    let message_id = {
        let mut inner = api.lock();
        inner.next_message += 1;
        let id = inner.next_message;
        inner.sent.push(Sent {
            message_id: id,
            chat_id,
            text: visible.clone(),
            parse_mode: parse_mode.clone(),
            thread,
            reply_to,
            at: Instant::now(),
        });
        id
    };
    if matches!(failure, Some(Failure::Hold)) {
        // Taken, and the answer never comes: the host is killed meanwhile.
        tokio::time::sleep(Duration::from_secs(3600)).await;
    }
    let mut m = json!({
        "message_id": message_id, "date": now(), "chat": chat(chat_id), "from": bot_user(), "text": visible,
    });
    if let Some(t) = thread {
        m["message_thread_id"] = json!(t);
    }
    ok(m)
}

/// The text a person sees of Telegram HTML.
fn strip_markup(html: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&amp;", "&")
}
