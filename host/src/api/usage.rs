//! `/api/usage`: model usage per day, group, purpose and model, as the
//! gateway recorded it (`gateway::usage`).

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use serde::Deserialize;

use super::{Api, ApiResult, Json, Query};
use crate::gateway::usage;

pub(super) fn routes() -> Router<Api> {
    Router::new().route("/usage", get(usage_report))
}

#[derive(Deserialize)]
struct UsageQuery {
    group: Option<String>,
    days: Option<u32>,
}

async fn usage_report(
    State(api): State<Api>,
    Query(q): Query<UsageQuery>,
) -> ApiResult<Vec<usage::Line>> {
    let since = usage::since(q.days.unwrap_or(30).clamp(1, 3660));
    Ok(Json(
        usage::report(&api.store, q.group.as_deref(), &since).await?,
    ))
}
