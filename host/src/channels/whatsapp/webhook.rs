//! The webhook Meta calls (`g2 serve`'s [`PATH`], outside `/api` and its
//! token: a POST proves itself with its signature).
//!
//! - `GET` is Meta's verification: `hub.mode=subscribe` with our verify
//!   token is answered with `hub.challenge`; anything else 403.
//! - `POST` is taken only with a valid `X-Hub-Signature-256`
//!   (`sha256=` and the hex HMAC-SHA256 of the raw body with the app
//!   secret), else 401 and nothing is read. Messages for registered chats
//!   are stored (through [`Channels::take_in`]) before the answer: 200
//!   once stored, 500 when the store failed, so that Meta delivers again.
//!   A message Meta delivers twice is stored once (its `wamid`). Status
//!   updates are recorded against the part they name; a `failed` one that
//!   says the chat is gone marks its group failing.
//! - A message's file ([`super::media`]) is fetched and kept (a voice
//!   note transcribed) before the notification's messages are stored, so
//!   the chat keeps its order and a host killed meanwhile leaves Meta
//!   something to deliver again; the answer waits for it (a download, at
//!   most `media.transcribe_timeout_secs` of transcription). Notes about
//!   files not kept go to the chat once the messages are stored. Should
//!   Meta deliver the notification again meanwhile, that POST waits for
//!   the first, finds its messages stored, and fetches nothing again.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;

use g2_core::validate::GroupFolder;

use super::media::WaFile;
use super::{Jid, PREFIX, WhatsApp, code};
use crate::channels::Channels;
use crate::messages::{CheckInbound, Inbound, Intake};
use crate::store;

/// Where Meta is told to call (the callback URL's path).
pub const PATH: &str = "/webhooks/whatsapp";
/// The signature header.
const SIGNATURE: &str = "x-hub-signature-256";
/// The largest notification taken (Meta's are a few KB).
const MAX_BODY: usize = 1 << 20;

/// What the webhook needs.
#[derive(Clone)]
pub struct Webhook {
    pub whatsapp: Arc<WhatsApp>,
    pub channels: Channels,
}

/// The webhook's routes.
pub fn routes(webhook: Webhook) -> Router {
    Router::new()
        .route(PATH, get(verify).post(receive))
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(webhook)
}

/// Meta's verification GET.
async fn verify(State(w): State<Webhook>, Query(q): Query<HashMap<String, String>>) -> Response {
    let ours = w.whatsapp.credentials().verify_token.expose();
    let token_ok = q
        .get("hub.verify_token")
        .is_some_and(|t| crate::http::same_secret(t, ours));
    match (
        q.get("hub.mode").map(String::as_str),
        q.get("hub.challenge"),
    ) {
        (Some("subscribe"), Some(challenge)) if token_ok && challenge.len() <= 256 => {
            (StatusCode::OK, challenge.clone()).into_response()
        }
        _ => {
            tracing::warn!(
                "whatsapp: a webhook verification without the right verify token was refused"
            );
            (StatusCode::FORBIDDEN, "verification refused").into_response()
        }
    }
}

/// A notification from Meta.
async fn receive(State(w): State<Webhook>, headers: HeaderMap, body: Bytes) -> Response {
    let secret = w.whatsapp.credentials().app_secret.expose();
    if !signed(
        headers
            .get(SIGNATURE)
            .map(axum::http::HeaderValue::as_bytes),
        &body,
        secret,
    ) {
        tracing::warn!("whatsapp: a webhook POST without a valid signature was refused");
        return (StatusCode::UNAUTHORIZED, "invalid signature").into_response();
    }
    let Ok(v) = serde_json::from_slice::<Value>(&body) else {
        return (StatusCode::BAD_REQUEST, "not JSON").into_response();
    };
    match take(&w, &v).await {
        Ok(()) => StatusCode::OK.into_response(),
        Err(e) => {
            // Not stored: Meta delivers it again.
            tracing::error!(error = %e, "whatsapp: storing a notification");
            (StatusCode::INTERNAL_SERVER_ERROR, "not stored").into_response()
        }
    }
}

/// Whether `header` is `sha256=<hex HMAC-SHA256 of body with secret>`.
pub fn signed(header: Option<&[u8]>, body: &[u8], secret: &str) -> bool {
    let Some(hex) = header.and_then(|h| h.strip_prefix(b"sha256=")) else {
        return false;
    };
    let Some(expected) = unhex(hex) else {
        return false;
    };
    let Ok(mut mac) = <Hmac<Sha256> as Mac>::new_from_slice(secret.as_bytes()) else {
        return false;
    };
    mac.update(body);
    mac.verify_slice(&expected).is_ok()
}

fn unhex(hex: &[u8]) -> Option<Vec<u8>> {
    if hex.len() != 64 {
        return None;
    }
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    hex.chunks(2)
        .map(|p| Some((digit(p[0])? << 4) | digit(p[1])?))
        .collect()
}

/// Stores a notification's messages and records its statuses.
async fn take(w: &Webhook, v: &Value) -> crate::Result<()> {
    let wa = &w.whatsapp;
    let registered: Vec<crate::groups::Group> = wa
        .store
        .read(store::groups::list)
        .await?
        .into_iter()
        .filter(|g| g.jid.starts_with(PREFIX))
        .collect();
    let groups: HashMap<String, GroupFolder> = registered
        .iter()
        .map(|g| (g.jid.clone(), g.folder.clone()))
        .collect();
    let mut read = read(v, &wa.settings().phone_number_id, &groups);
    for (chat, addressed) in &read.strangers {
        tracing::info!(chat = %chat, addressed, "whatsapp: a message from a chat that is not registered; dropped");
    }
    // Held through storing, so a redelivery finds the messages stored.
    let _fetching = match (w.channels.media(), read.files.is_empty()) {
        (Some(_), false) => Some(wa.files.lock().await),
        _ => None,
    };
    let notes = keep_files(w, &registered, &mut read).await?;
    if !read.items.is_empty() {
        for a in w.channels.take_in(read.items, None).await? {
            if let Err(e) = a {
                tracing::warn!(error = %e, "whatsapp: a message could not be stored; dropped");
            }
        }
    }
    for (chat, notes) in notes {
        let text = format!("Not everything you sent reached me: {}", notes.join("; "));
        if let Err(e) = wa.notify(&chat, &text).await {
            tracing::warn!(chat = %chat, error = %e, "whatsapp: the note about a file was not sent");
        }
    }
    for s in read.statuses {
        let gone = s.status == "failed"
            && s.code.is_some_and(|c| {
                matches!(
                    c,
                    code::GROUP_UNKNOWN | code::GROUP_SUSPENDED | code::UNDELIVERABLE
                )
            });
        let detail = s.detail.clone();
        let found = wa
            .store
            .write(move |tx| {
                let found = store::deliveries::receipt(tx, &s.id, &s.status, detail.as_deref())?;
                if let (true, Some((_, jid))) = (gone, &found)
                    && let Some(g) = store::groups::by_jid(tx, jid)?
                {
                    let why = format!("whatsapp: {}", detail.as_deref().unwrap_or("failed"));
                    crate::messages::mark_failing(tx, &g.folder, &why)?;
                }
                Ok(found)
            })
            .await?;
        if found.is_none() {
            tracing::debug!("whatsapp: a status for a message not sent from this log");
        }
    }
    Ok(())
}

/// Fetches and keeps the files of the messages `read` holds (when the
/// host keeps media), in order, each message's text and attachments
/// becoming what [`crate::media::Media::keep`] made of them; a message
/// already stored (a redelivery) is left for the log to drop. Returns the
/// notes for each chat about files not kept.
async fn keep_files(
    w: &Webhook,
    registered: &[crate::groups::Group],
    read: &mut Read,
) -> crate::Result<Vec<(Jid, Vec<String>)>> {
    let mut notes = Vec::new();
    let Some(media) = w.channels.media() else {
        return Ok(notes);
    };
    let wa = &w.whatsapp;
    for p in &read.files {
        let Some(Intake::New { folder, m }) = read.items.get_mut(p.item) else {
            continue;
        };
        let Some(g) = registered.iter().find(|g| g.folder == *folder) else {
            continue;
        };
        let (jid, id) = (g.jid.clone(), m.external_id.clone().unwrap_or_default());
        let stored = wa
            .store
            .read(move |c| store::messages::by_external_id(c, &jid, &id))
            .await?;
        if stored.is_some() {
            continue;
        }
        let incoming = super::media::fetch(&wa.graph, &p.file, media.max_bytes()).await;
        let kept = media
            .keep(g, &p.file.id, &p.file.caption, vec![incoming])
            .await;
        m.text = kept.text;
        m.attachments = kept.attachments;
        if !kept.notes.is_empty() {
            notes.push((p.chat.clone(), kept.notes));
        }
    }
    Ok(notes)
}

/// A file a read message carries.
#[derive(Debug, Clone, PartialEq)]
pub struct Pending {
    /// The index of its message in [`Read::items`].
    pub item: usize,
    /// The chat it came in (told about a file not kept).
    pub chat: Jid,
    pub file: WaFile,
}

/// A status update of a message the business number sent.
#[derive(Debug, Clone, PartialEq)]
pub struct Status {
    /// The sent message's `wamid`.
    pub id: String,
    /// `sent`, `delivered`, `read` or `failed`.
    pub status: String,
    pub code: Option<i64>,
    pub detail: Option<String>,
}

/// What one notification holds for us.
#[derive(Debug, Default, PartialEq)]
pub struct Read {
    pub items: Vec<Intake>,
    /// The files of those items, to fetch before they are stored.
    pub files: Vec<Pending>,
    pub statuses: Vec<Status>,
    /// Chats that are not registered (and whether the message addressed
    /// the assistant).
    pub strangers: Vec<(String, bool)>,
}

/// Reads a notification: the messages to our number for registered
/// chats, in order, and the statuses. Anything else (another number of
/// the same app, a field we do not take, a message with no text) is left.
pub fn read(v: &Value, phone_number_id: &str, groups: &HashMap<String, GroupFolder>) -> Read {
    let mut out = Read::default();
    if v["object"] != "whatsapp_business_account" {
        return out;
    }
    let changes = v["entry"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|e| e["changes"].as_array().into_iter().flatten());
    for change in changes {
        let value = &change["value"];
        if change["field"] != "messages"
            || value["metadata"]["phone_number_id"].as_str() != Some(phone_number_id)
        {
            continue;
        }
        let ours: String = value["metadata"]["display_phone_number"]
            .as_str()
            .unwrap_or_default()
            .chars()
            .filter(char::is_ascii_digit)
            .collect();
        let names: HashMap<&str, &str> = value["contacts"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| Some((c["wa_id"].as_str()?, c["profile"]["name"].as_str()?)))
            .collect();
        for m in value["messages"].as_array().into_iter().flatten() {
            let Some(from) = m["from"].as_str() else {
                continue;
            };
            let jid = match m["group_id"].as_str() {
                Some(g) => Jid::parse(&format!("{PREFIX}g:{g}")),
                None => Jid::parse(&format!("{PREFIX}{from}")),
            };
            let (Some(jid), Some(id)) = (jid, m["id"].as_str()) else {
                continue;
            };
            if !ours.is_empty() && from == ours {
                // The number's own message, seen again.
                continue;
            }
            let Some(text) = text_of(m) else { continue };
            let addressed = match jid {
                Jid::Person(_) => true,
                Jid::Group(_) => {
                    (!ours.is_empty() && text.contains(&format!("@{ours}")))
                        || (!ours.is_empty()
                            && m["context"]["from"].as_str() == Some(ours.as_str()))
                }
            };
            let Some(folder) = groups.get(&jid.to_string()) else {
                out.strangers.push((jid.to_string(), addressed));
                continue;
            };
            let mut inbound = Inbound {
                sender: from.to_string(),
                sender_name: names
                    .get(from)
                    .map(|n| n.trim().to_string())
                    .filter(|n| !n.is_empty()),
                text,
                external_id: Some(id.to_string()),
                thread: None,
                addressed,
                attachments: Vec::new(),
            };
            // A name the log refuses must not cost the message (a text
            // over the limit is the sequencer's to refuse, and to answer).
            if inbound.check_fields().is_err() {
                inbound.sender_name = None;
            }
            if let Some(file) = super::media::file_of(m) {
                out.files.push(Pending {
                    item: out.items.len(),
                    chat: jid.clone(),
                    file,
                });
            }
            out.items.push(Intake::New {
                folder: folder.clone(),
                m: inbound,
            });
        }
        for s in value["statuses"].as_array().into_iter().flatten() {
            let (Some(id), Some(status)) = (s["id"].as_str(), s["status"].as_str()) else {
                continue;
            };
            let error = &s["errors"][0];
            out.statuses.push(Status {
                id: id.to_string(),
                status: status.chars().take(32).collect(),
                code: error["code"].as_i64(),
                detail: error["code"].as_i64().map(|c| {
                    let title = error["title"].as_str().or(error["message"].as_str());
                    let title: String = title.unwrap_or_default().chars().take(200).collect();
                    format!("code {c}: {title}")
                }),
            });
        }
    }
    out
}

/// A message's text: a text's body, a media message's kind and caption
/// (replaced by the caption and what is made of the file when the host
/// keeps files); None for what carries no words (reactions, unsupported
/// types).
fn text_of(m: &Value) -> Option<String> {
    let kind = m["type"].as_str()?;
    let text = match kind {
        "text" => m["text"]["body"].as_str()?.to_string(),
        "image" | "video" | "document" | "audio" | "sticker" => {
            match m[kind]["caption"].as_str().filter(|c| !c.trim().is_empty()) {
                Some(c) => format!("[{kind}] {c}"),
                None => format!("[{kind}]"),
            }
        }
        "location" => {
            let l = &m["location"];
            format!(
                "[location] {} {}",
                l["latitude"].as_f64()?,
                l["longitude"].as_f64()?
            )
        }
        "button" => m["button"]["text"].as_str()?.to_string(),
        "interactive" => {
            let i = &m["interactive"];
            i["button_reply"]["title"]
                .as_str()
                .or(i["list_reply"]["title"].as_str())?
                .to_string()
        }
        _ => return None,
    };
    (!text.trim().is_empty()).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn note(messages: Value, statuses: Value) -> Value {
        json!({"object": "whatsapp_business_account", "entry": [{"id": "WABA", "changes": [{"field": "messages", "value": {
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "1 555-078-3881", "phone_number_id": "1065"},
            "contacts": [{"profile": {"name": "Ann"}, "wa_id": "16315551181"}],
            "messages": messages, "statuses": statuses}}]}]})
    }

    #[test]
    fn signatures_are_checked_over_the_raw_body() {
        let body = br#"{"object":"whatsapp_business_account"}"#;
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(b"app-secret").unwrap();
        mac.update(body);
        let hex: String = mac
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let good = format!("sha256={hex}");
        assert!(signed(Some(good.as_bytes()), body, "app-secret"));
        assert!(signed(
            Some(good.to_uppercase().replace("SHA256", "sha256").as_bytes()),
            body,
            "app-secret"
        ));
        assert!(!signed(Some(good.as_bytes()), b"{}", "app-secret"));
        assert!(!signed(Some(good.as_bytes()), body, "other"));
        assert!(!signed(None, body, "app-secret"));
        assert!(!signed(Some(hex.as_bytes()), body, "app-secret"));
        assert!(!signed(Some(b"sha256=zz"), body, "app-secret"));
    }

    #[test]
    fn messages_for_registered_chats_are_read_in_order() {
        let groups = HashMap::from([
            (
                "wa:16315551181".to_string(),
                GroupFolder::new("ann").unwrap(),
            ),
            ("wa:g:G1".to_string(), GroupFolder::new("club").unwrap()),
        ]);
        let v = note(
            json!([
                {"from": "16315551181", "id": "wamid.1", "timestamp": "1", "type": "text", "text": {"body": "hi"}},
                {"from": "16315551181", "id": "wamid.2", "timestamp": "2", "type": "text", "text": {"body": "no @ here"}, "group_id": "G1"},
                {"from": "16315551181", "id": "wamid.3", "timestamp": "3", "type": "text", "text": {"body": "@15550783881 help"}, "group_id": "G1"},
                {"from": "16315551181", "id": "wamid.4", "timestamp": "4", "type": "image", "image": {"caption": "look", "mime_type": "image/jpeg", "id": "9001"}},
                {"from": "16315551181", "id": "wamid.5", "timestamp": "5", "type": "reaction", "reaction": {"emoji": "x"}},
                {"from": "19995550000", "id": "wamid.6", "timestamp": "6", "type": "text", "text": {"body": "who?"}},
                {"from": "15550783881", "id": "wamid.7", "timestamp": "7", "type": "text", "text": {"body": "echo"}, "group_id": "G1"}
            ]),
            json!([{"id": "wamid.S", "status": "failed", "timestamp": "9", "recipient_id": "G1",
                    "errors": [{"code": 131041, "title": "Group unknown"}]}]),
        );
        let r = read(&v, "1065", &groups);
        let got: Vec<(String, String, bool)> = r
            .items
            .iter()
            .map(|i| match i {
                Intake::New { folder, m } => (folder.to_string(), m.text.clone(), m.addressed),
                Intake::Edit { .. } => unreachable!(),
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("ann".into(), "hi".into(), true),
                ("club".into(), "no @ here".into(), false),
                ("club".into(), "@15550783881 help".into(), true),
                ("ann".into(), "[image] look".into(), true),
            ]
        );
        match &r.items[0] {
            Intake::New { m, .. } => {
                assert_eq!(m.sender_name.as_deref(), Some("Ann"));
                assert_eq!(m.external_id.as_deref(), Some("wamid.1"));
            }
            Intake::Edit { .. } => unreachable!(),
        }
        // The image's file, to fetch before it is stored.
        assert_eq!(
            r.files
                .iter()
                .map(|p| (p.item, p.chat.to_string(), p.file.id.as_str()))
                .collect::<Vec<_>>(),
            vec![(3, "wa:16315551181".to_string(), "9001")]
        );
        assert_eq!(r.strangers, vec![("wa:19995550000".to_string(), true)]);
        assert_eq!(
            r.statuses,
            vec![Status {
                id: "wamid.S".into(),
                status: "failed".into(),
                code: Some(131041),
                detail: Some("code 131041: Group unknown".into()),
            }]
        );
        // Another number of the same app, or another object: nothing.
        assert_eq!(read(&v, "9999", &groups), Read::default());
        assert_eq!(
            read(&json!({"object": "page"}), "1065", &groups),
            Read::default()
        );
    }
}
