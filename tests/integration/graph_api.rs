//! A local WhatsApp Cloud API (Meta's Graph API): the calls g2 makes —
//! `GET /{version}/{phone-number-id}` (the number, for `g2 doctor`) and
//! `POST /{version}/{phone-number-id}/messages` — with the documented
//! shapes: `Authorization: Bearer`, the `messages` body (`messaging_product`,
//! `recipient_type`, `to`, `type: text`, `text.body` of at most 4,096
//! characters, `context.message_id`), the answer `{messaging_product,
//! contacts, messages: [{id}]}`, and errors as `{"error": {message, type,
//! code, fbtrace_id}}` (190 for a bad token with HTTP 401, 130429 for
//! throughput with HTTP 400, 131041 for a group the number is not in).
//!
//! It serves media the documented way: `GET /{version}/{media-id}` with
//! the token answers `{messaging_product, url, mime_type, sha256,
//! file_size, id}` (an unknown id: HTTP 400, code 100, "Unsupported get
//! request. Object with ID … does not exist"), and `GET` of that `url`
//! (`/whatsapp_business/attachments/?mid=…&ext=…&hash=…`, as Meta's
//! lookaside URLs) answers the bytes, only with the same `Authorization:
//! Bearer` header (401 otherwise). [`GraphApi::add_media`] adds a file.
//!
//! It also plays Meta's side of the webhook: [`GraphApi::deliver`] signs a
//! notification with the app secret (`X-Hub-Signature-256`) and POSTs it
//! to `g2 serve`, as Meta does for each message and status.

#![allow(dead_code)]

use axum::extract::{Path, Query};
use hmac::{Hmac, Mac};
use sha2::Sha256;

// The local servers' shared start, lock, waits and vocabulary.
use super::local_api::{self, prelude::*};

pub const ACCESS_TOKEN: &str = "EAAtest-access-token-for-the-local-graph-api";
pub const APP_SECRET: &str = "test-app-secret-of-the-meta-app";
pub const VERIFY_TOKEN: &str = "test-verify-token";
pub const PHONE_NUMBER_ID: &str = "106540352242922";
pub const VERSION: &str = "v23.0";
/// The business number (the webhook's `display_phone_number`).
pub const NUMBER: &str = "15550783881";

/// One message the server took.
#[derive(Debug, Clone)]
pub struct Sent {
    pub id: String,
    pub to: String,
    pub recipient_type: String,
    pub text: String,
    pub quote: Option<String>,
    pub at: Instant,
}

/// A failure the next `messages` call answers with.
#[derive(Debug, Clone, Copy)]
pub enum Failure {
    /// HTTP 400, code 130429 (throughput reached).
    Throttled,
    /// HTTP 400, code 131041 (the group does not exist or the number is
    /// not in it).
    NotInGroup,
    /// Taken (it counts as sent) and never answered.
    Hold,
}

/// A media file the server holds.
#[derive(Clone)]
struct MediaFile {
    bytes: Vec<u8>,
    mime: String,
    /// The `file_size` it is described with (its length unless told).
    announced: u64,
}

#[derive(Default)]
struct Inner {
    sent: Vec<Sent>,
    failures: VecDeque<Failure>,
    rejected: usize,
    /// The server's own address (media URLs name it).
    url: String,
    media: std::collections::HashMap<String, MediaFile>,
    /// Media ids asked about (`GET /{version}/{media-id}`), in order.
    media_asks: Vec<String>,
    /// Media ids downloaded (their URL fetched with the token), in order.
    downloads: Vec<String>,
}

#[derive(Clone)]
pub struct GraphApi {
    pub url: String,
    inner: Arc<Mutex<Inner>>,
}

fn error(status: StatusCode, code: i64, message: &str) -> Response {
    (
        status,
        axum::Json(json!({ "error": {
            "message": message, "type": "OAuthException", "code": code,
            "error_data": { "messaging_product": "whatsapp", "details": message },
            "fbtrace_id": "AbCdEfGh" } })),
    )
        .into_response()
}

fn authorized(headers: &HeaderMap) -> bool {
    headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == format!("Bearer {ACCESS_TOKEN}"))
}

/// `GET /{version}/{id}`: the business number, or a media file's
/// description.
async fn number(
    State(api): State<GraphApi>,
    Path((version, id)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    if !authorized(&headers) {
        return error(
            StatusCode::UNAUTHORIZED,
            190,
            "Invalid OAuth access token - Cannot parse access token",
        );
    }
    if version != VERSION {
        return error(StatusCode::BAD_REQUEST, 100, "Unsupported get request.");
    }
    if id == PHONE_NUMBER_ID {
        return axum::Json(json!({ "display_phone_number": "+1 555-078-3881",
            "verified_name": "G2 Test", "id": id }))
        .into_response();
    }
    let (file, url) = {
        let mut inner = api.lock();
        inner.media_asks.push(id.clone());
        (inner.media.get(&id).cloned(), inner.url.clone())
    };
    let Some(f) = file else {
        return unknown_object(&id);
    };
    let sha256 = format!("{:x}", <Sha256 as sha2::Digest>::digest(&f.bytes));
    axum::Json(json!({
        "messaging_product": "whatsapp",
        "url": format!("{url}/whatsapp_business/attachments/?mid={id}&ext=1760000300&hash=ATtest"),
        "mime_type": f.mime, "sha256": sha256, "file_size": f.announced, "id": id,
    }))
    .into_response()
}

/// Graph's answer for an object that does not exist (or is not ours).
fn unknown_object(id: &str) -> Response {
    let message = format!(
        "Unsupported get request. Object with ID '{id}' does not exist, cannot be loaded \
         due to missing permissions, or does not support this operation. Please read the \
         Graph API documentation at https://developers.facebook.com/docs/graph-api"
    );
    (
        StatusCode::BAD_REQUEST,
        axum::Json(json!({ "error": {
            "message": message, "type": "OAuthException", "code": 100,
            "error_subcode": 33, "fbtrace_id": "AbCdEfGh" } })),
    )
        .into_response()
}

/// A media URL: the bytes, only with the access token.
async fn attachment(
    State(api): State<GraphApi>,
    Query(q): Query<std::collections::HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    if !authorized(&headers) {
        return (StatusCode::UNAUTHORIZED, "Unauthorized").into_response();
    }
    let Some(id) = q.get("mid").filter(|_| q.contains_key("hash")) else {
        return (StatusCode::NOT_FOUND, "Not Found").into_response();
    };
    let file = {
        let mut inner = api.lock();
        inner.downloads.push(id.clone());
        inner.media.get(id).cloned()
    };
    match file {
        Some(f) => ([(axum::http::header::CONTENT_TYPE, f.mime)], f.bytes).into_response(),
        None => (StatusCode::NOT_FOUND, "Not Found").into_response(),
    }
}

async fn messages(
    State(api): State<GraphApi>,
    Path((version, id)): Path<(String, String)>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    if !authorized(&headers) {
        return error(StatusCode::UNAUTHORIZED, 190, "Invalid OAuth access token");
    }
    if version != VERSION || id != PHONE_NUMBER_ID {
        return error(StatusCode::BAD_REQUEST, 100, "Unsupported post request.");
    }
    let Ok(b) = serde_json::from_slice::<Value>(&body) else {
        return error(StatusCode::BAD_REQUEST, 100, "Invalid parameter");
    };
    let (Some(to), Some(text)) = (b["to"].as_str(), b["text"]["body"].as_str()) else {
        return error(StatusCode::BAD_REQUEST, 100, "Invalid parameter");
    };
    if b["messaging_product"] != "whatsapp" || b["type"] != "text" {
        return error(StatusCode::BAD_REQUEST, 100, "Invalid parameter");
    }
    if text.chars().count() > 4096 {
        return error(
            StatusCode::BAD_REQUEST,
            100,
            "Param text['body'] must be at most 4096 characters long.",
        );
    }
    let failure = api.lock().failures.pop_front();
    match failure {
        Some(Failure::Throttled) => {
            api.lock().rejected += 1;
            return error(StatusCode::BAD_REQUEST, 130_429, "(#130429) Rate limit hit");
        }
        Some(Failure::NotInGroup) => {
            api.lock().rejected += 1;
            return error(
                StatusCode::BAD_REQUEST,
                131_041,
                "Group does not exist or you are not a member",
            );
        }
        _ => {}
    }
    let id = {
        let mut inner = api.lock();
        // Numbered by the messages taken so far.
        let id = format!("wamid.OUT{}", inner.sent.len() + 1);
        inner.sent.push(Sent {
            id: id.clone(),
            to: to.to_string(),
            recipient_type: b["recipient_type"]
                .as_str()
                .unwrap_or("individual")
                .to_string(),
            text: text.to_string(),
            quote: b["context"]["message_id"].as_str().map(str::to_string),
            at: Instant::now(),
        });
        id
    };
    if matches!(failure, Some(Failure::Hold)) {
        tokio::time::sleep(Duration::from_secs(3600)).await;
    }
    axum::Json(json!({ "messaging_product": "whatsapp",
        "contacts": [{ "input": to, "wa_id": to }], "messages": [{ "id": id }] }))
    .into_response()
}

impl GraphApi {
    /// Starts the server on a free local port.
    pub async fn start() -> GraphApi {
        let api = GraphApi {
            url: String::new(),
            inner: Arc::new(Mutex::new(Inner::default())),
        };
        let app = Router::new()
            .route("/{version}/{id}", get(number))
            .route("/{version}/{id}/messages", post(messages))
            .route("/whatsapp_business/attachments/", get(attachment))
            .with_state(api.clone());
        let url = local_api::serve_app(app).await;
        api.lock().url = url.clone();
        GraphApi { url, ..api }
    }

    /// Holds a media file (`mime` its type); its media id.
    pub fn add_media(&self, bytes: Vec<u8>, mime: &str) -> String {
        let size = bytes.len() as u64;
        self.add_media_announced(bytes, mime, size)
    }

    /// Holds a media file described as `file_size` bytes, whatever its
    /// length; its media id.
    pub fn add_media_announced(&self, bytes: Vec<u8>, mime: &str, file_size: u64) -> String {
        let mut inner = self.lock();
        let id = format!("{}", 1_000_000_000_000_001u64 + inner.media.len() as u64);
        inner.media.insert(
            id.clone(),
            MediaFile {
                bytes,
                mime: mime.to_string(),
                announced: file_size,
            },
        );
        id
    }

    /// The media ids asked about, in order.
    pub fn media_asks(&self) -> Vec<String> {
        self.lock().media_asks.clone()
    }

    /// The media ids whose bytes were downloaded, in order.
    pub fn downloads(&self) -> Vec<String> {
        self.lock().downloads.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        local_api::lock(&self.inner)
    }

    pub fn fail_next_send(&self, f: Failure) {
        self.lock().failures.push_back(f);
    }

    pub fn sent(&self) -> Vec<Sent> {
        self.lock().sent.clone()
    }

    /// What a chat (a wa_id or a group id) was sent.
    pub fn sent_to(&self, to: &str) -> Vec<Sent> {
        self.sent().into_iter().filter(|s| s.to == to).collect()
    }

    pub fn rejected(&self) -> usize {
        self.lock().rejected
    }

    /// Waits until `to` was sent `n` messages (at most `secs`).
    pub async fn wait_sent(&self, to: &str, n: usize, secs: u64) -> Vec<Sent> {
        local_api::wait_sent(to, n, secs, || self.sent_to(to)).await
    }
}

/// Meta's webhook notification with `messages` and `statuses`.
pub fn notification(messages: Value, statuses: Value) -> Value {
    json!({ "object": "whatsapp_business_account", "entry": [{ "id": "102290129340398", "changes": [{
        "field": "messages",
        "value": {
            "messaging_product": "whatsapp",
            "metadata": { "display_phone_number": NUMBER, "phone_number_id": PHONE_NUMBER_ID },
            "contacts": messages.as_array().into_iter().flatten().map(|m| json!({
                "profile": { "name": m["_name"].as_str().unwrap_or("Someone") }, "wa_id": m["from"] })).collect::<Vec<_>>(),
            "messages": messages.as_array().into_iter().flatten().map(|m| {
                let mut m = m.clone();
                m.as_object_mut().unwrap().remove("_name");
                m
            }).collect::<Vec<_>>(),
            "statuses": statuses,
        } }] }] })
}

/// A new message id (`wamid.IN<n>`), unique in the test process.
pub fn wamid() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    format!(
        "wamid.IN{}",
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    )
}

/// A text message from `from` (`name`), in `group` when given.
pub fn text(id: &str, from: &str, name: &str, body: &str, group: Option<&str>) -> Value {
    let mut m = json!({ "from": from, "id": id, "timestamp": "1760000000", "type": "text",
        "text": { "body": body }, "_name": name });
    if let Some(g) = group {
        m["group_id"] = json!(g);
    }
    m
}

/// A media message (`kind` `audio`, `image`, `document`, `sticker`, …,
/// its object `media`: `id`, `mime_type`, `caption`, `filename`, `voice`)
/// from `from` (`name`), in `group` when given.
pub fn media(
    id: &str,
    from: &str,
    name: &str,
    kind: &str,
    media: Value,
    group: Option<&str>,
) -> Value {
    let mut m = json!({ "from": from, "id": id, "timestamp": "1760000000", "type": kind,
        "_name": name });
    m[kind] = media;
    if let Some(g) = group {
        m["group_id"] = json!(g);
    }
    m
}

/// `sha256=<hex>` of `body` with the app secret.
pub fn signature(body: &[u8], secret: &str) -> String {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(body);
    format!("sha256={:x}", mac.finalize().into_bytes())
}

/// POSTs a notification to `g2 serve`'s webhook as Meta does (signed with
/// `secret`, or unsigned); answers the status.
pub async fn deliver_signed(serve_url: &str, body: &Value, secret: Option<&str>) -> u16 {
    let bytes = serde_json::to_vec(body).unwrap();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut req = reqwest::Client::new()
        .post(format!("{serve_url}/webhooks/whatsapp"))
        .header("content-type", "application/json");
    if let Some(s) = secret {
        req = req.header("x-hub-signature-256", signature(&bytes, s));
    }
    req.body(bytes).send().await.unwrap().status().as_u16()
}

/// Delivers a notification, signed right; it must be taken.
pub async fn deliver(serve_url: &str, body: &Value) {
    let status = deliver_signed(serve_url, body, Some(APP_SECRET)).await;
    assert_eq!(status, 200, "the webhook refused a signed notification");
}
