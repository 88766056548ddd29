//! `/api/mcp/tokens`: the tokens of `/mcp` (docs/mcp.md), listed and
//! revoked. A token is never shown here, nor its hash (`TokenRow` does not
//! serialize it); issuing one stays with `g2 mcp tokens create`, which shows
//! it once.
//!
//! `crate::mcp` is a layer above the API, so these two calls go to the
//! store directly (an unknown id is `not_found`, a token revoked already a
//! `conflict`).

use axum::Router;
use axum::extract::State;
use axum::routing::{delete, get};
use serde::Deserialize;

use super::{Api, ApiResult, Json, Path, Query};
use crate::store::mcp::{self, TokenRow};

pub(super) fn routes() -> Router<Api> {
    Router::new()
        .route("/mcp/tokens", get(list_tokens))
        .route("/mcp/tokens/{id}", delete(revoke_token))
}

#[derive(Deserialize)]
struct TokensQuery {
    group: Option<String>,
}

/// Every token (of `?group=` when given), oldest first.
async fn list_tokens(
    State(api): State<Api>,
    Query(q): Query<TokensQuery>,
) -> ApiResult<Vec<TokenRow>> {
    if let Some(g) = &q.group {
        g2_core::validate::any_folder(g)?;
    }
    Ok(Json(
        api.store
            .read(move |c| mcp::tokens(c, q.group.as_deref()))
            .await?,
    ))
}

/// Revokes token `id` (its next call is refused): the token as it is now.
async fn revoke_token(State(api): State<Api>, Path(id): Path<i64>) -> ApiResult<TokenRow> {
    let row = api.store.write(move |tx| mcp::revoke(tx, id)).await?;
    Ok(Json(row))
}
