//! `/api/groups/{folder}/session` and `/sessions`: a group's session
//! pointer and history; clear and resume go through the one path of each
//! (`SessionManager::clear_active`, `resume_active`) while the group is
//! held ([`super::hold`]): its warm agent finishes its turn and exits
//! first, so the archive holds the whole session and nothing writes to it
//! after; the next message starts in the new session.

use axum::Router;
use axum::extract::State;
use axum::routing::{get, post};
use serde::Deserialize;

use super::{Api, ApiResult, Json, Path, require_group};
use crate::sessions;
use g2_core::validate::GroupFolder;

pub(super) fn routes() -> Router<Api> {
    Router::new()
        .route("/groups/{folder}/session", get(show_session))
        .route("/groups/{folder}/session/clear", post(clear_session))
        .route("/groups/{folder}/session/resume", post(resume_session))
        .route("/groups/{folder}/sessions", get(session_history))
}

async fn show_session(
    State(api): State<Api>,
    Path(folder): Path<GroupFolder>,
) -> ApiResult<sessions::Pointer> {
    require_group(&api, &folder).await?;
    Ok(Json(api.sessions.get(&folder).await?))
}

async fn session_history(
    State(api): State<Api>,
    Path(folder): Path<GroupFolder>,
) -> ApiResult<Vec<sessions::HistoryEntry>> {
    require_group(&api, &folder).await?;
    Ok(Json(api.sessions.history(&folder).await?))
}

/// `POST /api/groups/{folder}/session/clear`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClearBody {
    pub name: String,
}

async fn clear_session(
    State(api): State<Api>,
    Path(folder): Path<GroupFolder>,
    Json(b): Json<ClearBody>,
) -> ApiResult<sessions::Cleared> {
    require_group(&api, &folder).await?;
    let _held = super::hold(&api, &folder).await;
    Ok(Json(api.sessions.clear_active(&folder, &b.name).await?))
}

/// `POST /api/groups/{folder}/session/resume`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResumeBody {
    pub history_id: i64,
    pub save_as: Option<String>,
}

async fn resume_session(
    State(api): State<Api>,
    Path(folder): Path<GroupFolder>,
    Json(b): Json<ResumeBody>,
) -> ApiResult<sessions::Resumed> {
    require_group(&api, &folder).await?;
    let _held = super::hold(&api, &folder).await;
    Ok(Json(
        api.sessions
            .resume_active(&folder, b.history_id, b.save_as.as_deref())
            .await?,
    ))
}
