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
use crate::messages;
use g2_core::validate::GroupFolder;

pub(super) fn routes() -> Router<Api> {
    Router::new()
        .route(
            "/groups/{folder}/messages",
            get(list_messages).post(post_message),
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
/// With an `Idempotency-Key`, a message already stored under that key in
/// the chat is answered as it was the first time (the same `id` and `seq`,
/// `"replayed": true`) and nothing is stored; the same key with another
/// sender or text is a conflict.
async fn post_message(
    State(api): State<Api>,
    Path(folder): Path<GroupFolder>,
    headers: axum::http::HeaderMap,
    Json(mut m): Json<messages::Inbound>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let key = match headers.get(IDEMPOTENCY_KEY) {
        Some(v) => Some(messages::idempotency_key(v.as_bytes())?),
        None => None,
    };
    m.external_id = key.clone();
    let stored = match api.channels.receive(&folder, m.clone()).await {
        Err(Error::Conflict(_)) if key.is_some() => {
            let g = require_group(&api, &folder).await?;
            let first = messages::by_key(&api.store, &g.jid, key.as_deref().unwrap_or(""))
                .await?
                .ok_or_else(|| Error::Conflict("this message was stored before".into()))?;
            if first.sender != m.sender.trim() || first.text != m.text {
                return Err(Error::Conflict(
                    "Idempotency-Key: this key was used for another message in this chat".into(),
                )
                .into());
            }
            return Ok((
                StatusCode::ACCEPTED,
                Json(json!({ "id": first.id, "seq": first.seq, "replayed": true })),
            ));
        }
        other => other?,
    };
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({ "id": stored.id, "seq": stored.seq })),
    ))
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
