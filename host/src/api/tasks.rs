//! `/api/groups/{folder}/tasks`, `/api/tasks/{id}` and its actions: the
//! scheduled tasks as `crate::tasks` lists and changes them (any group's:
//! the API is the host's owner).

use axum::Router;
use axum::extract::State;
use axum::routing::{get, post};
use serde_json::{Value, json};

use super::{Api, ApiResult, Json, Path, require_group};
use crate::Error;
use crate::tasks::{self, StatusAction, Task};
use g2_core::validate::GroupFolder;

pub(super) fn routes() -> Router<Api> {
    Router::new()
        .route("/groups/{folder}/tasks", get(list_tasks))
        .route("/tasks/{id}", get(task_detail))
        .route("/tasks/{id}/{action}", post(task_action))
}

async fn list_tasks(
    State(api): State<Api>,
    Path(folder): Path<GroupFolder>,
) -> ApiResult<Vec<Task>> {
    require_group(&api, &folder).await?;
    Ok(Json(tasks::list(&api.store, Some(folder)).await?))
}

/// One task with its last runs.
async fn task_detail(State(api): State<Api>, Path(id): Path<String>) -> ApiResult<Value> {
    let (task, runs) = tasks::detail(&api.store, &id).await?;
    Ok(Json(json!({ "task": task, "runs": runs })))
}

/// `pause`, `resume` or `cancel`.
async fn task_action(
    State(api): State<Api>,
    Path((id, action)): Path<(String, String)>,
) -> ApiResult<Task> {
    let action = match action.as_str() {
        "pause" => StatusAction::Pause,
        "resume" => StatusAction::Resume,
        "cancel" => StatusAction::Cancel,
        other => {
            return Err(Error::NotFound(format!("task action {other:?}")).into());
        }
    };
    Ok(Json(
        api.store
            .write(move |tx| tasks::set_status(tx, &id, None, action, chrono::Utc::now()))
            .await?,
    ))
}
