//! `/api/groups/{folder}/memory/…`: what a group's memory captured
//! (sessions, timelines, summaries, a live feed), recall over it, and its
//! observations: listed, remembered (`memory::remember`) and forgotten
//! (`memory::forget`). A folder is a registered group's or `global`
//! (every group's memory, read-only to their agents, not to people).

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{delete, get};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Api, ApiError, ApiResult, Json, Path, Query, require_group};
use crate::Error;
use crate::memory::forget::{self, Forgotten};
use crate::memory::shown;
use g2_core::validate::{GroupFolder, MemoryFolder};

pub(super) fn routes() -> Router<Api> {
    Router::new()
        .route("/groups/{folder}/memory/sessions", get(memory_sessions))
        .route(
            "/groups/{folder}/memory/sessions/{id}",
            get(memory_session).delete(forget_session),
        )
        .route(
            "/groups/{folder}/memory/sessions/{id}/summary",
            get(memory_summary),
        )
        .route("/groups/{folder}/memory/search", get(memory_search))
        .route("/groups/{folder}/memory/stream", get(memory_stream))
        .route(
            "/groups/{folder}/memory/observations",
            get(observations).post(remember),
        )
        .route(
            "/groups/{folder}/memory/observations/{id}",
            delete(forget_observation),
        )
}

/// How often the memory feed looks for new records.
const MEMORY_FEED_EVERY: std::time::Duration = std::time::Duration::from_millis(500);

/// Server-sent events of what the group's memory stores from now on
/// (`event: memory`, data = a [`shown::FeedItem`]): prompts, tool
/// calls, observations and summaries, oldest first, each once.
async fn memory_stream(
    State(api): State<Api>,
    Path(folder): Path<GroupFolder>,
) -> Result<
    axum::response::sse::Sse<
        impl futures_util::Stream<Item = Result<axum::response::sse::Event, std::convert::Infallible>>,
    >,
    ApiError,
> {
    use axum::response::sse::{Event, KeepAlive, Sse};
    require_group(&api, &folder).await?;
    let start = shown::feed_now(&api.store, &folder).await?;
    let state = (
        api.store.clone(),
        folder,
        start,
        std::collections::VecDeque::new(),
    );
    let events =
        futures_util::stream::unfold(state, |(store, group, mut at, mut queue)| async move {
            loop {
                if let Some(item) = queue.pop_front() {
                    let ev = Event::default()
                        .event("memory")
                        .json_data(&item)
                        .unwrap_or_else(|_| Event::default().comment("unreadable record"));
                    return Some((Ok(ev), (store, group, at, queue)));
                }
                tokio::time::sleep(MEMORY_FEED_EVERY).await;
                match shown::feed_after(&store, &group, at, 100).await {
                    Ok((items, next)) => {
                        at = next;
                        queue.extend(items);
                    }
                    Err(e) => tracing::warn!(error = %e, "memory feed: reading failed"),
                }
            }
        });
    Ok(Sse::new(events).keep_alive(KeepAlive::default()))
}

/// `GET /api/groups/{folder}/memory/sessions`: what was captured of the
/// group's agent sessions, newest first.
async fn memory_sessions(
    State(api): State<Api>,
    Path(folder): Path<GroupFolder>,
) -> ApiResult<Vec<shown::SessionRow>> {
    require_group(&api, &folder).await?;
    Ok(Json(shown::sessions(&api.store, &folder).await?))
}

/// `GET /api/groups/{folder}/memory/sessions/{id}`: one session's timeline;
/// a session of another group is not found.
async fn memory_session(
    State(api): State<Api>,
    Path((folder, id)): Path<(GroupFolder, String)>,
) -> ApiResult<shown::Timeline> {
    require_group(&api, &folder).await?;
    let t = shown::timeline(&api.store, &folder, &id)
        .await?
        .ok_or_else(|| Error::NotFound(format!("captured session {id:?}")))?;
    Ok(Json(t))
}

/// `GET /api/groups/{folder}/memory/sessions/{id}/summary`.
async fn memory_summary(
    State(api): State<Api>,
    Path((folder, id)): Path<(GroupFolder, String)>,
) -> ApiResult<shown::SummaryRow> {
    require_group(&api, &folder).await?;
    let s = shown::summary(&api.store, &folder, &id)
        .await?
        .ok_or_else(|| Error::NotFound(format!("summary of session {id:?}")))?;
    Ok(Json(s))
}

/// `GET /api/groups/{folder}/memory/search?q=…`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecallQuery {
    pub q: String,
    pub limit: Option<usize>,
    pub kind: Option<String>,
    pub since: Option<String>,
}

/// Recall over the group's own memory: ranked hits with provenance.
async fn memory_search(
    State(api): State<Api>,
    Path(folder): Path<GroupFolder>,
    Query(q): Query<RecallQuery>,
) -> Result<
    (
        axum::http::HeaderMap,
        Json<Vec<crate::memory::recall::RecallHit>>,
    ),
    ApiError,
> {
    require_group(&api, &folder).await?;
    let filters = crate::memory::recall::Filters {
        kind: q.kind,
        since: q.since,
        asked: None,
    };
    let limit = q.limit.unwrap_or(10);
    let headers = super::extract::query_headers(&q.q);
    let lane = folder.to_string();
    let hits = crate::lanes::read(&api.store, &lane, move |c| {
        crate::memory::recall::recall_with(c, &folder, &q.q, limit, &filters)
    })
    .await?;
    Ok((headers, Json(hits)))
}

/// `GET /api/groups/{folder}/memory/observations[?all=true]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObservationsQuery {
    #[serde(default)]
    pub all: bool,
}

/// A registered group's memory, or `global`'s (every group's, read-only
/// to their agents).
async fn memory_owner(api: &Api, folder: String) -> Result<MemoryFolder, ApiError> {
    let owner = MemoryFolder::new(folder).map_err(|e| Error::Invalid(e.to_string()))?;
    if !owner.is_global() {
        let g = GroupFolder::new(owner.as_str()).map_err(|e| Error::Invalid(e.to_string()))?;
        require_group(api, &g).await?;
    }
    Ok(owner)
}

async fn observations(
    State(api): State<Api>,
    Path(folder): Path<String>,
    Query(q): Query<ObservationsQuery>,
) -> ApiResult<Vec<shown::ObservationRow>> {
    let owner = memory_owner(&api, folder).await?;
    Ok(Json(shown::observations(&api.store, &owner, q.all).await?))
}

/// `POST /api/groups/{folder}/memory/observations` `{"text": …}`:
/// remembered (an observation of importance 9); `global` for every group.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RememberBody {
    pub text: String,
}

async fn remember(
    State(api): State<Api>,
    Path(folder): Path<String>,
    Json(body): Json<RememberBody>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let owner = memory_owner(&api, folder).await?;
    let id =
        crate::memory::remember::remember(&api.store, api.sessions.redactor(), owner, &body.text)
            .await?;
    Ok((StatusCode::CREATED, Json(json!({ "id": id }))))
}

/// `DELETE /api/groups/{folder}/memory/sessions/{id}`: what was captured
/// of the group's session `id` is deleted, once the group's warm agent
/// has finished ([`super::hold`]); another group's session is not found.
async fn forget_session(
    State(api): State<Api>,
    Path((folder, id)): Path<(GroupFolder, String)>,
) -> Result<StatusCode, ApiError> {
    require_group(&api, &folder).await?;
    let _held = super::hold(&api, &folder).await;
    if forget::forget_group_session(&api.store, &folder, &id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(Error::NotFound(format!("captured session {id:?} of group {folder}")).into())
    }
}

/// `DELETE /api/groups/{folder}/memory/observations/{id}`: forgotten (a
/// tombstone stays); another group's observation is not found.
async fn forget_observation(
    State(api): State<Api>,
    Path((folder, id)): Path<(String, i64)>,
) -> Result<StatusCode, ApiError> {
    let owner = memory_owner(&api, folder).await?;
    match forget::forget(&api.store, id, Some(owner)).await? {
        Forgotten::Done => Ok(StatusCode::NO_CONTENT),
        Forgotten::Missing | Forgotten::Elsewhere(_) => {
            Err(Error::NotFound(format!("observation {id}")).into())
        }
    }
}
