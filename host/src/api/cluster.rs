//! `GET /api/cluster`: the hosts sharing the store and each group's owner
//! (`cluster::status`, docs/cluster.md).

use axum::Router;
use axum::extract::State;
use axum::routing::get;

use super::{Api, ApiResult, Json};
use crate::cluster::status;

pub(super) fn routes() -> Router<Api> {
    Router::new().route("/cluster", get(cluster_status))
}

async fn cluster_status(State(api): State<Api>) -> ApiResult<status::Status> {
    Ok(Json(status::read(&api.store, api.lease_secs).await?))
}
