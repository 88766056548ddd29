//! `/api/groups/{folder}/messages` and `/stream`: a group's chat. A
//! message in is stored first (`Channels::receive`), then answered with
//! 202; the stream is the chat's live log in `seq` order
//! (`Log::follow`, the message log's).

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Api, ApiError, ApiResult, Json, Path, Query, require_group};
use crate::Error;
use crate::messages::{self, CheckInbound};
use g2_core::validate::GroupFolder;

/// `max_file`: the largest file kept (`media.max_bytes`); a message's
/// body may hold a few of them, and one over the limit is still read (to
/// be counted and named in the message), so the body's own limit is four
/// times that.
pub(super) fn routes(max_file: u64) -> Router<Api> {
    let body =
        usize::try_from(max_file.saturating_mul(4).saturating_add(1 << 20)).unwrap_or(usize::MAX);
    Router::new()
        .route(
            "/groups/{folder}/messages",
            get(list_messages)
                .post(post_message)
                .layer(axum::extract::DefaultBodyLimit::max(body)),
        )
        .route("/groups/{folder}/stream", get(stream_messages))
}

#[derive(Deserialize)]
struct AfterQuery {
    after: Option<i64>,
    limit: Option<usize>,
}

async fn list_messages(
    State(api): State<Api>,
    Path(folder): Path<GroupFolder>,
    Query(q): Query<AfterQuery>,
) -> ApiResult<Vec<messages::Message>> {
    let g = require_group(&api, &folder).await?;
    let (after, limit) = (q.after.unwrap_or(0), q.limit.unwrap_or(100).clamp(1, 1000));
    Ok(Json(
        messages::after(&api.store, &g.jid, after, limit).await?,
    ))
}

/// The `Idempotency-Key` header: a client's name for one message, so a
/// retry after a lost answer stores nothing new.
const IDEMPOTENCY_KEY: &str = "idempotency-key";

/// A message into a group's chat: stored first, then answered with 202.
/// JSON (`sender`, `sender_name`, `text`), or `multipart/form-data` with
/// those fields and `file` parts ([`media`](crate::media): kept in the
/// group's folder, sound transcribed into the text; the answer names each
/// file and any note about one not kept). With an `Idempotency-Key`, a
/// message already stored under that key in the chat is answered as it
/// was the first time (the same `id` and `seq`, `"replayed": true`) and
/// nothing is stored; the same key with another sender or text is a
/// conflict.
async fn post_message(
    State(api): State<Api>,
    Path(folder): Path<GroupFolder>,
    headers: axum::http::HeaderMap,
    req: axum::extract::Request,
) -> axum::response::Response {
    use axum::extract::FromRequest;
    use axum::response::IntoResponse;
    let multipart = headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| {
            t.trim_start()
                .to_ascii_lowercase()
                .starts_with("multipart/form-data")
        });
    let answer = if multipart {
        post_form(&api, &folder, &headers, req).await
    } else {
        match Json::<messages::Inbound>::from_request(req, &api).await {
            Ok(Json(m)) => match idempotency(&headers) {
                Ok(key) => store_message(&api, &folder, key, m, Vec::new()).await,
                Err(e) => Err(e),
            },
            Err(rejected) => return rejected.into_response(),
        }
    };
    answer.into_response()
}

/// The `Idempotency-Key`, if one was sent.
fn idempotency(headers: &axum::http::HeaderMap) -> Result<Option<String>, ApiError> {
    Ok(match headers.get(IDEMPOTENCY_KEY) {
        Some(v) => Some(messages::idempotency_key(v.as_bytes())?),
        None => None,
    })
}

/// A `multipart/form-data` message: its files kept first, then the
/// message with their transcripts stored.
async fn post_form(
    api: &Api,
    folder: &GroupFolder,
    headers: &axum::http::HeaderMap,
    req: axum::extract::Request,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    use axum::extract::FromRequest;
    let key = idempotency(headers)?;
    let g = require_group(api, folder).await?;
    if let Some(k) = &key
        && let Some(first) = messages::by_key(&api.store, &g.jid, k).await?
    {
        // A retry: its files were kept the first time.
        return Ok(replayed(&first));
    }
    let form = axum::extract::Multipart::from_request(req, api)
        .await
        .map_err(|e| Error::Invalid(format!("a multipart body: {}", e.body_text())))?;
    let max = api
        .channels
        .media()
        .map_or(0, crate::media::Media::max_bytes);
    let (m, files) = super::upload::read(form, max).await?;
    // Checked before the files cost a transcription (files alone are a
    // message: their lines become its text).
    let text = if m.text.trim().is_empty() && !files.is_empty() {
        "-".to_string()
    } else {
        m.text.clone()
    };
    messages::Inbound { text, ..m.clone() }.check_within(api.channels.max_text())?;
    let (m, notes) = match api.channels.media() {
        Some(media) => {
            let id = uuid::Uuid::new_v4().simple().to_string();
            let kept = media.keep(&g, &id[..12], &m.text, files).await;
            let m = messages::Inbound {
                text: kept.text,
                attachments: kept.attachments,
                ..m
            };
            (m, kept.notes)
        }
        None => (
            m,
            vec!["files are not kept here (no host is serving)".to_string()],
        ),
    };
    store_message(api, folder, key, m, notes).await
}

/// The 202 of a message stored before under the same key.
fn replayed(first: &messages::Message) -> (StatusCode, Json<Value>) {
    (
        StatusCode::ACCEPTED,
        Json(json!({ "id": first.id, "seq": first.seq, "replayed": true })),
    )
}

/// Stores a message (JSON's or a form's) and answers 202 with its id and
/// `seq`, its files and the notes about them.
async fn store_message(
    api: &Api,
    folder: &GroupFolder,
    key: Option<String>,
    mut m: messages::Inbound,
    notes: Vec<String>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    m.external_id = key.clone();
    let stored = match api.channels.receive(folder, m.clone()).await {
        Err(Error::Conflict(_)) if key.is_some() => {
            let g = require_group(api, folder).await?;
            let first = messages::by_key(&api.store, &g.jid, key.as_deref().unwrap_or(""))
                .await?
                .ok_or_else(|| Error::Conflict("this message was stored before".into()))?;
            if first.sender != m.sender.trim() || first.text != m.text {
                return Err(Error::Conflict(
                    "Idempotency-Key: this key was used for another message in this chat".into(),
                )
                .into());
            }
            return Ok(replayed(&first));
        }
        other => other?,
    };
    let mut answer = json!({ "id": stored.id, "seq": stored.seq });
    if !stored.attachments.is_empty() {
        answer["attachments"] = json!(stored.attachments);
        answer["notes"] = json!(notes);
    }
    Ok((StatusCode::ACCEPTED, Json(answer)))
}

/// Server-sent events of a chat's messages (`event: message`, `id:` its
/// `seq`, data = the message JSON): first those after `Last-Event-ID` (a
/// reconnecting client) or else `?after=<seq>`, then new ones as they are
/// stored, in `seq` order, each once (see `Log::follow`). A listener
/// that falls too far behind is closed; it reconnects with `Last-Event-ID`.
async fn stream_messages(
    State(api): State<Api>,
    Path(folder): Path<GroupFolder>,
    Query(q): Query<AfterQuery>,
    headers: axum::http::HeaderMap,
) -> Result<
    axum::response::sse::Sse<
        impl futures_util::Stream<Item = Result<axum::response::sse::Event, std::convert::Infallible>>,
    >,
    ApiError,
> {
    use axum::response::sse::{Event, KeepAlive, Sse};
    let g = require_group(&api, &folder).await?;
    let resume = match headers.get("last-event-id") {
        Some(v) => Some(
            v.to_str()
                .ok()
                .and_then(|v| v.trim().parse::<i64>().ok())
                .ok_or_else(|| Error::Invalid("Last-Event-ID: a message seq".into()))?,
        ),
        None => None,
    };
    let live = api.channels.log().follow(g.jid, resume.or(q.after));
    let events = futures_util::StreamExt::map(live, |l| {
        Ok(Event::default()
            .event("message")
            .id(l.message.seq.to_string())
            .data(&l.json))
    });
    Ok(Sse::new(events).keep_alive(KeepAlive::default()))
}
