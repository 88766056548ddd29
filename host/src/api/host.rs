//! `GET /api/host`: the running host as it was started — its process, the
//! model provider it chose, and its settings with every secret left out —
//! so a command beside it (`g2 doctor`) reports what the host runs with,
//! not what its own environment would give.

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use serde_json::{Value, json};

use super::{Api, ApiResult, Json};

pub(super) fn routes() -> Router<Api> {
    Router::new().route("/host", get(host))
}

async fn host(State(api): State<Api>) -> ApiResult<Value> {
    Ok(Json(json!({
        "pid": std::process::id(),
        "version": env!("CARGO_PKG_VERSION"),
        "provider": api.provider,
        "settings": shown(&api.settings),
        "mcp": { "token_lookups": crate::store::mcp::lookups() },
    })))
}

/// The settings without their secrets: the API token (whether one is set
/// is kept) and a password in the store's URL.
pub fn shown(settings: &crate::config::Settings) -> Value {
    let mut s = settings.clone();
    if s.api.token.is_some() {
        s.api.token = Some("(set)".into());
    }
    if crate::store::Backend::password(&s.store.url).is_some() {
        s.store.url = "(a URL holding a password; not shown)".into();
    }
    serde_json::to_value(&s).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_secret_is_shown() {
        let mut s = crate::config::Settings::default();
        s.api.token = Some("tok-0123456789abcdef".into());
        s.store.url = "postgres://g2:hunter2@db:5432/g2".into();
        let v = shown(&s).to_string();
        assert!(
            !v.contains("tok-0123456789abcdef") && !v.contains("hunter2"),
            "{v}"
        );
        assert!(v.contains("not shown") && v.contains("(set)"), "{v}");
    }
}
