//! `GET /api/memory/search?q=&group=&limit=`: recall over every group's
//! memory, or one's, as a person asks it (`g2 memory search`, which asks a
//! running host here rather than load the embedding model itself; the
//! viewer's search does the same in-process). Hits of several groups merge
//! by score (`memory::recall::recall_groups`).

use axum::Router;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::get;
use serde::Deserialize;

use super::{Api, ApiError, Json, Query, require_group};
use crate::Error;
use crate::memory::recall::RecallHit;
use g2_core::validate::GroupFolder;

pub(super) fn routes() -> Router<Api> {
    Router::new().route("/memory/search", get(search_all))
}

/// The query string.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AllRecallQuery {
    pub q: String,
    /// Only this group's memory (and `global`'s, as its recall has it).
    pub group: Option<String>,
    pub limit: Option<usize>,
}

async fn search_all(
    State(api): State<Api>,
    Query(q): Query<AllRecallQuery>,
) -> Result<(HeaderMap, Json<Vec<RecallHit>>), ApiError> {
    let headers = super::extract::query_headers(&q.q);
    let limit = q.limit.unwrap_or(10);
    let groups = match &q.group {
        Some(g) => {
            let g = GroupFolder::new(g.as_str()).map_err(|e| Error::Invalid(e.to_string()))?;
            require_group(&api, &g).await?;
            vec![g]
        }
        None => crate::groups::list(&api.store)
            .await?
            .into_iter()
            .map(|g| g.folder)
            .collect(),
    };
    // The group's lane, or the lane of the queries that name none.
    let lane = q.group.as_deref().unwrap_or(crate::lanes::ALL_GROUPS);
    let question = q.q.clone();
    let hits = crate::lanes::read(&api.store, lane, move |c| {
        crate::memory::recall::recall_groups(c, &groups, &question, limit)
    })
    .await?;
    Ok((headers, Json(hits)))
}
