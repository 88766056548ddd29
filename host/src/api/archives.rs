//! `/api/groups/{folder}/archives`, `/api/archives/{id}` and
//! `/api/search`: the markdown archives of cleared sessions, one with its
//! text (read beneath the group's folder, `archives::read_markdown`), and
//! full-text search over them (`search::search`).

use axum::Router;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::get;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Api, ApiError, ApiResult, Json, Path, Query};
use crate::{Error, archives, search};

pub(super) fn routes() -> Router<Api> {
    Router::new()
        .route("/groups/{folder}/archives", get(list_archives))
        .route("/archives/{id}", get(read_archive))
        .route("/search", get(search_archives))
}

async fn list_archives(
    State(api): State<Api>,
    Path(folder): Path<String>,
) -> ApiResult<Vec<archives::ArchiveRecord>> {
    g2_core::validate::any_folder(&folder)?;
    Ok(Json(archives::list(&api.store, &folder).await?))
}

async fn read_archive(State(api): State<Api>, Path(id): Path<i64>) -> ApiResult<Value> {
    let rec = archives::find(&api.store, id).await?;
    // Read beneath the group's folder: a link planted there is not followed.
    let (home, r) = (api.home.clone(), rec.clone());
    let markdown = tokio::task::spawn_blocking(move || archives::read_markdown(&home, &r))
        .await
        .map_err(Error::from)??;
    Ok(Json(json!({ "archive": rec, "markdown": markdown })))
}

#[derive(Deserialize)]
struct SearchQuery {
    q: String,
    group: Option<String>,
    limit: Option<usize>,
}

async fn search_archives(
    State(api): State<Api>,
    Query(q): Query<SearchQuery>,
) -> Result<(HeaderMap, Json<Vec<search::Hit>>), ApiError> {
    let limit = q.limit.unwrap_or(10).clamp(1, search::MAX_LIMIT);
    let headers = super::extract::query_headers(&q.q);
    if let Some(g) = &q.group {
        g2_core::validate::any_folder(g)?;
    }
    let lane = q.group.clone();
    let lane = lane.as_deref().unwrap_or(crate::lanes::ALL_GROUPS);
    let hits = crate::lanes::read(&api.store, lane, move |c| {
        search::search(c, &q.q, q.group.as_deref(), limit)
    })
    .await?;
    Ok((headers, Json(hits)))
}
