//! The web viewer: g2 in a browser, served by `g2 serve` on the API's own
//! listener at `/` — pages rendered here as HTML, one embedded stylesheet
//! and one embedded script (`assets/`), nothing fetched from elsewhere.
//!
//! Pages (each a stable URL): the groups (`/`), a group's chat
//! (`/groups/{folder}`, live over the API's SSE stream, with a box to send
//! a message), its sessions (`/groups/{folder}/sessions`: clear and resume
//! through the API, each bookmark linked to its archive), its archives
//! (`/groups/{folder}/archives`), one archive as a document
//! (`/archives/{id}`, `markdown`), its memory (`/groups/{folder}/memory`:
//! the block the next session starts with, exactly as the agent will see
//! it, a live feed of what is stored, the observations with their
//! provenance and forget buttons, the summaries), and search over
//! archives and memory (`/search?q=`), the scheduled tasks (`/tasks`,
//! `/tasks/{id}` with its run log; pause, resume, cancel), model usage
//! (`/usage`: a chart drawn here as SVG, budgets and refusals) and the
//! tokens of `/mcp` (`/mcp-tokens`: revoke). Actions are forms the script sends to the API as JSON
//! (`data-api`), after a confirmation (`data-confirm`).
//!
//! Layout: one file per page (`groups`, `chat`, `sessions`, `archives`,
//! `memory`, `search`, `tasks`, `usage`, `mcp_tokens`, `login`); this module holds the
//! routes, the page frame (`page`, `error_page`, `failed`, `time`),
//! the security headers and the embedded assets. API boundary: [`routes`],
//! which `host/server.rs` hands to `Api::router` to be served beside the API.
//! The viewer depends on the API (its state, [`Api`], and its access
//! module, `api::auth`); the API knows nothing of the viewer.
//!
//! Invariants:
//! - Everything a person or the agent wrote reaches the page escaped
//!   ([`markdown::escape`], or `textContent` in the script): no text of a
//!   group can become markup or script of the page.
//! - Every response carries a Content-Security-Policy without inline
//!   script or style, so even markup that slipped through could not run.
//! - Access is the API's: loopback names only without `api.token`; with
//!   one, the viewer asks for it once (`/login`) and starts a signed session
//!   kept in an HttpOnly, SameSite=Strict cookie, and every state-changing
//!   API request made with that cookie must carry the session's CSRF token
//!   (`x-g2-csrf`), which only that session's pages show (`api::auth`).

mod archives;
mod chat;
mod groups;
mod login;
pub mod markdown;
mod mcp_tokens;
mod media;
mod memory;
mod search;
mod sessions;
mod tasks;
mod usage;

use axum::Router;
use axum::extract::{FromRequestParts, Path, Request};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::Error;
use crate::api::{Api, auth};
use g2_core::validate::GroupFolder;
use markdown::escape;

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
    media-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";
const APP_JS: &str = include_str!("assets/app.js");
const APP_CSS: &str = include_str!("assets/app.css");

/// The viewer's routes, served beside the API's (`Api::router`).
pub fn routes(api: &Api) -> Router<Api> {
    let pages = Router::new()
        .route("/", get(groups::groups_page))
        .route("/groups/{folder}", get(chat::chat_page))
        .route("/groups/{folder}/archives", get(archives::archives_page))
        .route("/groups/{folder}/sessions", get(sessions::sessions_page))
        .route("/groups/{folder}/memory", get(memory::memory_page))
        .route(
            "/groups/{folder}/media/{date}/{name}",
            get(media::media_file),
        )
        .route("/search", get(search::search_page))
        .route("/tasks", get(tasks::tasks_page))
        .route("/tasks/{id}", get(tasks::task_page))
        .route("/usage", get(usage::usage_page))
        .route("/mcp-tokens", get(mcp_tokens::tokens_page))
        .route("/archives/{id}", get(archives::archive_page))
        .route_layer(middleware::from_fn_with_state(
            api.clone(),
            login::require_login,
        ));
    Router::new()
        .route("/login", get(login::login_page).post(login::login))
        .route("/logout", axum::routing::post(login::logout))
        .route("/assets/app.js", get(app_js))
        .route("/assets/app.css", get(app_css))
        .merge(pages)
        .layer(middleware::from_fn(security_headers))
}

async fn security_headers(req: Request, next: Next) -> Response {
    let mut resp = next.run(req).await;
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    resp
}

async fn app_js() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        APP_JS,
    )
        .into_response()
}

async fn app_css() -> Response {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], APP_CSS).into_response()
}

/// A whole page around `body`; `csrf` goes where the script finds it.
fn page(api: &Api, title: &str, body: &str) -> Response {
    let csrf = auth::page_csrf();
    // Signed in: a way out (a form post with the session's CSRF token).
    let sign_out = if api.token.is_some() && !csrf.is_empty() {
        format!(
            " <form method=\"post\" action=\"/logout\" class=\"inline\"><input type=\"hidden\" name=\"csrf\" value=\"{csrf}\"><button type=\"submit\">Sign out</button></form>"
        )
    } else {
        String::new()
    };
    let html = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<meta name=\"g2-csrf\" content=\"{csrf}\">\
<title>{title} · g2</title>\
<link rel=\"stylesheet\" href=\"/assets/app.css\">\
<script src=\"/assets/app.js\" defer></script></head>\
<body><header><nav><a href=\"/\" class=\"brand\">g2</a> <a href=\"/\">Groups</a> <a href=\"/search\">Search</a> <a href=\"/tasks\">Tasks</a> <a href=\"/usage\">Usage</a> <a href=\"/mcp-tokens\">MCP tokens</a>{sign_out}</nav></header>\
<main>{body}</main></body></html>",
        title = escape(title),
    );
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], html).into_response()
}

/// An error as a page, in words.
fn error_page(api: &Api, status: StatusCode, what: &str) -> Response {
    let mut r = page(
        api,
        "Error",
        &format!(
            "<h1>Something went wrong</h1><p class=\"error\">{}</p>",
            escape(what)
        ),
    );
    *r.status_mut() = status;
    r
}

fn failed(api: &Api, e: Error) -> Response {
    match e {
        Error::NotFound(what) => {
            error_page(api, StatusCode::NOT_FOUND, &format!("{what} was not found"))
        }
        Error::Validation(_) | Error::Invalid(_) => {
            error_page(api, StatusCode::BAD_REQUEST, &e.to_string())
        }
        Error::Busy(_) => error_page(api, StatusCode::TOO_MANY_REQUESTS, &e.to_string()),
        e => {
            tracing::error!(error = %e, "viewer page failed");
            error_page(
                api,
                StatusCode::INTERNAL_SERVER_ERROR,
                "the host could not read this page; its log says why",
            )
        }
    }
}

/// A time the browser shows in its own timezone (the text is UTC until
/// the script rewrites it).
fn time(at: &str) -> String {
    let at = escape(at);
    format!("<time datetime=\"{at}\">{at}</time>")
}

/// The registered group a page's path (`{folder}`) names: extracted before
/// the page runs, the error page instead of it otherwise.
struct Registered(crate::groups::Group);

impl FromRequestParts<Api> for Registered {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, api: &Api) -> Result<Self, Response> {
        // By name: a page's path may hold more than the folder.
        let Path(mut params) =
            Path::<std::collections::HashMap<String, String>>::from_request_parts(parts, api)
                .await
                .map_err(IntoResponse::into_response)?;
        let folder = params.remove("folder").unwrap_or_default();
        let folder = GroupFolder::new(folder).map_err(|e| failed(api, Error::Validation(e)))?;
        crate::groups::require(&api.store, &folder)
            .await
            .map(Registered)
            .map_err(|e| failed(api, e))
    }
}
