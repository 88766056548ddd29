//! `/api/groups`: list, register, unregister; a group's status (session
//! pointer, cursor, failing, container, disk) and its agent-request log;
//! `/api/queue`.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Api, ApiError, ApiResult, Json, Path, require_group};
use crate::Error;
use crate::groups::{self, NewGroup};
use crate::store;
use g2_core::validate::GroupFolder;

pub(super) fn routes() -> Router<Api> {
    Router::new()
        .route("/groups", get(list_groups).post(add_group))
        .route("/groups/{folder}", get(show_group).delete(remove_group))
        .route("/groups/{folder}/status", get(group_status))
        .route("/groups/{folder}/ipc-log", get(ipc_log))
        .route("/queue", get(queue_status))
}

async fn list_groups(State(api): State<Api>) -> ApiResult<Vec<groups::Group>> {
    Ok(Json(groups::list(&api.store).await?))
}

/// `GET /api/groups/{folder}`: the group, and the `seq` of its chat's
/// latest message (0: none), so a client can open the stream with
/// `?after=` and miss nothing (`g2 chat`).
async fn show_group(State(api): State<Api>, Path(folder): Path<GroupFolder>) -> ApiResult<Value> {
    let g = require_group(&api, &folder).await?;
    let last = crate::messages::latest(&api.store, &g.jid, 1).await?;
    let last_seq = last.first().map_or(0, |m| m.seq);
    Ok(Json(json!({ "group": g, "last_seq": last_seq })))
}

/// `POST /api/groups`. The request bodies are public so that their parsing
/// and checks can be exercised on their own (`fuzz/`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewGroupBody {
    pub folder: String,
    pub name: String,
    pub jid: Option<String>,
    pub trigger: Option<String>,
    pub requires_trigger: Option<bool>,
    #[serde(default)]
    pub is_main: bool,
}

impl From<NewGroupBody> for NewGroup {
    fn from(b: NewGroupBody) -> Self {
        NewGroup {
            folder: b.folder,
            name: b.name,
            jid: b.jid,
            trigger_pattern: b.trigger,
            requires_trigger: b.requires_trigger,
            is_main: b.is_main,
        }
    }
}

async fn add_group(
    State(api): State<Api>,
    Json(b): Json<NewGroupBody>,
) -> Result<(StatusCode, Json<groups::Group>), ApiError> {
    let g = groups::register(&api.store, &api.home, b.into(), &api.assistant_name).await?;
    Ok((StatusCode::CREATED, Json(g)))
}

/// `DELETE /api/groups/{folder}`: once its warm agent has finished
/// ([`super::hold`]); its folder and memory are kept.
async fn remove_group(
    State(api): State<Api>,
    Path(folder): Path<GroupFolder>,
) -> ApiResult<groups::Group> {
    let _held = super::hold(&api, &folder).await;
    Ok(Json(groups::remove(&api.store, &folder).await?))
}

/// The group's session pointer, its routing cursor, whether it is failing,
/// and its container if one runs.
async fn group_status(State(api): State<Api>, Path(folder): Path<GroupFolder>) -> ApiResult<Value> {
    let g = require_group(&api, &folder).await?;
    let pointer = api.sessions.get(&folder).await?;
    let f = folder.clone();
    let (cursor, failing) = api
        .store
        .read(move |c| {
            Ok((
                crate::routing::rules::cursor(c, &f)?,
                crate::messages::failing(c, &f)?,
            ))
        })
        .await?;
    let container = match &api.queue {
        Some(q) => q
            .status()
            .await
            .and_then(|s| s.running.into_iter().find(|r| r.group == folder)),
        None => None,
    };
    let disk = disk_usage(&api, &g).await?;
    Ok(Json(
        json!({ "group": g, "session": pointer, "cursor": cursor, "failing": failing, "container": container, "disk": disk }),
    ))
}

/// A group's disk use from its latest count; a group never counted since
/// the host started is counted now, for at most [`FIRST_COUNT_WAIT`]
/// (`null` after that: not counted yet).
async fn disk_usage(
    api: &Api,
    g: &groups::Group,
) -> Result<Option<crate::container::disk::Usage>, ApiError> {
    use crate::container::disk;
    let count = match api.disk.latest(&g.folder) {
        Some(c) => Some(c),
        None => tokio::time::timeout(FIRST_COUNT_WAIT, api.disk.fresh(&g.folder))
            .await
            .ok()
            .transpose()?,
    };
    let quotas = disk::Quotas::of(&api.home, &api.container, g);
    Ok(count.and_then(|c| disk::usage(&c, &quotas).ok()))
}

/// How long a status waits for a group's first count.
const FIRST_COUNT_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

async fn queue_status(State(api): State<Api>) -> ApiResult<Value> {
    match &api.queue {
        Some(q) => Ok(Json(
            serde_json::to_value(q.status().await).unwrap_or_default(),
        )),
        None => Err(Error::NotFound("queue (not running)".into()).into()),
    }
}

/// The agent requests of a group and what the host decided.
async fn ipc_log(
    State(api): State<Api>,
    Path(folder): Path<String>,
) -> ApiResult<Vec<store::requests::LogEntry>> {
    g2_core::validate::any_folder(&folder)?;
    Ok(Json(crate::requests::log(&api.store, &folder, 200).await?))
}
