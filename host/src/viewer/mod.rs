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
//! `/tasks/{id}` with its run log; pause, resume, cancel) and model usage
//! (`/usage`: a chart drawn here as SVG, budgets and refusals). Actions are forms the script sends to the API as JSON
//! (`data-api`), after a confirmation (`data-confirm`).
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

pub mod markdown;

use axum::Router;
use axum::extract::{Form, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use serde::Deserialize;

use crate::api::{Api, auth};
use crate::store;
use crate::{Error, archives};
use g2_core::validate::GroupFolder;
use markdown::escape;

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
    connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";
const APP_JS: &str = include_str!("assets/app.js");
const APP_CSS: &str = include_str!("assets/app.css");
/// Messages a chat page opens with.
const CHAT_HISTORY: usize = 200;

/// The viewer's routes, served beside the API's (`Api::router`).
pub fn routes(api: &Api) -> Router<Api> {
    let pages = Router::new()
        .route("/", get(groups_page))
        .route("/groups/{folder}", get(chat_page))
        .route("/groups/{folder}/archives", get(archives_page))
        .route("/groups/{folder}/sessions", get(sessions_page))
        .route("/groups/{folder}/memory", get(memory_page))
        .route("/search", get(search_page))
        .route("/tasks", get(tasks_page))
        .route("/tasks/{id}", get(task_page))
        .route("/usage", get(usage_page))
        .route("/archives/{id}", get(archive_page))
        .route_layer(middleware::from_fn_with_state(api.clone(), require_login));
    Router::new()
        .route("/login", get(login_page).post(login))
        .route("/logout", axum::routing::post(logout))
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

/// With `api.token` set, pages need a session (else the sign-in page) and
/// carry its CSRF token.
async fn require_login(State(api): State<Api>, req: Request, next: Next) -> Response {
    let Some(token) = &api.token else {
        return next.run(req).await;
    };
    match auth::session(req.headers(), token) {
        Some(s) => auth::for_session(s.csrf(token), next.run(req)).await,
        None => Redirect::to("/login").into_response(),
    }
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
<body><header><nav><a href=\"/\" class=\"brand\">g2</a> <a href=\"/\">Groups</a> <a href=\"/search\">Search</a> <a href=\"/tasks\">Tasks</a> <a href=\"/usage\">Usage</a>{sign_out}</nav></header>\
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

async fn login_page(State(api): State<Api>) -> Response {
    page(
        &api,
        "Sign in",
        "<h1>Sign in</h1><p>This host asks for its API token (<code>api.token</code>).</p>\
<form method=\"post\" action=\"/login\" class=\"stack\">\
<label>Token <input type=\"password\" name=\"token\" autocomplete=\"current-password\" required></label>\
<button type=\"submit\">Sign in</button></form>",
    )
}

#[derive(Deserialize)]
struct Login {
    token: String,
}

async fn login(State(api): State<Api>, Form(l): Form<Login>) -> Response {
    let Some(token) = &api.token else {
        return Redirect::to("/").into_response();
    };
    if !auth::same_secret(l.token.trim(), token) {
        return error_page(
            &api,
            StatusCode::UNAUTHORIZED,
            "that is not this host's token",
        );
    }
    // A new session, with a new CSRF token, at every sign-in.
    let cookie = auth::Session::begin().set_cookie(token);
    let mut r = Redirect::to("/").into_response();
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    r
}

#[derive(Deserialize)]
struct Logout {
    csrf: String,
}

/// Signs out (the session's CSRF token in the form): the cookie goes.
async fn logout(
    State(api): State<Api>,
    headers: axum::http::HeaderMap,
    Form(l): Form<Logout>,
) -> Response {
    let Some(token) = &api.token else {
        return Redirect::to("/").into_response();
    };
    let ours =
        auth::session(&headers, token).is_some_and(|s| auth::same_secret(&l.csrf, &s.csrf(token)));
    if !ours {
        return error_page(
            &api,
            StatusCode::FORBIDDEN,
            "sign out from this host's own page",
        );
    }
    let mut r = Redirect::to("/login").into_response();
    let gone = format!(
        "{}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0",
        auth::SESSION_COOKIE
    );
    if let Ok(v) = HeaderValue::from_str(&gone) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    r
}

/// What the groups page shows of one group beside its row.
struct GroupLine {
    group: crate::groups::Group,
    session: Option<String>,
    last: Option<crate::routing::messages::Message>,
    failing: Option<crate::routing::rules::Failing>,
    tokens_today: u64,
}

async fn groups_page(State(api): State<Api>) -> Response {
    let today = crate::gateway::usage::today();
    let read = api
        .store
        .read(move |c| {
            let mut out = Vec::new();
            for group in store::groups::list(c)? {
                let f = group.folder.clone();
                out.push(GroupLine {
                    session: store::sessions::pointer(c, &f)?.session_id,
                    last: store::messages::latest(c, &group.jid, 1)?.pop(),
                    failing: crate::routing::rules::failing(c, f.as_str())?,
                    tokens_today: store::usage::tokens_on(c, f.as_str(), &today, None)?,
                    group,
                });
            }
            Ok(out)
        })
        .await;
    let list = match read {
        Ok(l) => l,
        Err(e) => return failed(&api, e),
    };
    let status = match &api.queue {
        Some(q) => q.status().await,
        None => None,
    };
    let mut body = String::from("<h1>Groups</h1>");
    if list.is_empty() {
        body.push_str("<p class=\"empty\">No groups yet — register one below.</p>");
    } else {
        body.push_str("<ul class=\"cards\" id=\"groups\">");
        for line in &list {
            let g = &line.group;
            let state = match &status {
                Some(s) => {
                    if let Some(r) = s.running.iter().find(|r| r.group == g.folder) {
                        if r.outstanding > 0 {
                            "working".to_string()
                        } else {
                            "idle".to_string()
                        }
                    } else if let Some(pos) = s.waiting.iter().position(|w| *w == g.folder) {
                        format!("waiting for a slot ({} in line)", pos + 1)
                    } else {
                        "no container".to_string()
                    }
                }
                None => "no container".to_string(),
            };
            let f = escape(g.folder.as_str());
            let failing = line
                .failing
                .as_ref()
                .map(|x| {
                    format!(
                        "<div class=\"error\">failing since {}: {}</div>",
                        time(&x.since),
                        escape(&x.error)
                    )
                })
                .unwrap_or_default();
            let last = line
                .last
                .as_ref()
                .map(|m| {
                    format!(
                        "<div class=\"snippet\">{}: {} {}</div>",
                        escape(m.sender_name.as_deref().unwrap_or(&m.sender)),
                        escape(&g2_core::archive::truncate(
                            &crate::memory::context::one_line(&m.text),
                            120
                        )),
                        time(&m.timestamp)
                    )
                })
                .unwrap_or_default();
            let budget = api
                .gateway
                .limits_for(g.folder.as_str())
                .daily_tokens
                .map(|b| format!(" of {b}"))
                .unwrap_or_default();
            body.push_str(&format!(
                "<li class=\"card\"><a href=\"/groups/{f}\"><strong>{name}</strong></a> \
<span class=\"muted\">{f}{main}</span><br><span class=\"status\">{state}</span> · {session} · \
{tokens}{budget} tokens today{failing}{last}<div><a href=\"/groups/{f}/sessions\">sessions</a> · \
<a href=\"/groups/{f}/archives\">archives</a> · <a href=\"/groups/{f}/memory\">memory</a></div></li>",
                name = escape(&g.name),
                main = if g.is_main { " · main" } else { "" },
                session = match &line.session {
                    Some(s) => format!("session <code>{}</code>", escape(s.get(..8).unwrap_or(s))),
                    None => "no active session".into(),
                },
                tokens = line.tokens_today,
            ));
        }
        body.push_str("</ul>");
    }
    body.push_str(
        "<h2>Register a group</h2><form class=\"send\" id=\"register\" data-api=\"/api/groups\">\
<label>Folder <input name=\"folder\" required pattern=\"[A-Za-z0-9][A-Za-z0-9_-]{0,63}\" maxlength=\"64\"></label>\
<label class=\"grow\">Name <input name=\"name\" required maxlength=\"200\"></label>\
<button type=\"submit\">Register</button><p class=\"error\" role=\"alert\"></p></form>",
    );
    page(&api, "Groups", &body)
}

/// The registered group a page's path names, or the error page.
async fn registered(api: &Api, folder: String) -> Result<crate::groups::Group, Response> {
    let folder = GroupFolder::new(folder).map_err(|e| failed(api, Error::Validation(e)))?;
    crate::groups::require(&api.store, &folder)
        .await
        .map_err(|e| failed(api, e))
}

async fn chat_page(
    State(api): State<Api>,
    axum::extract::Path(folder): axum::extract::Path<String>,
) -> Response {
    let group = match registered(&api, folder).await {
        Ok(g) => g,
        Err(page) => return page,
    };
    let folder = group.folder.clone();
    let jid = group.jid.clone();
    let messages = match api
        .store
        .read(move |c| store::messages::latest(c, &jid, CHAT_HISTORY))
        .await
    {
        Ok(m) => m,
        Err(e) => return failed(&api, e),
    };
    let f = escape(folder.as_str());
    let last = messages.last().map_or(0, |m| m.seq);
    let mut body = format!(
        "<h1>{name}</h1><p class=\"muted\">{f} · <a href=\"/groups/{f}/sessions\">sessions</a> · \
<a href=\"/groups/{f}/archives\">archives</a> · <a href=\"/groups/{f}/memory\">memory</a> · \
<span id=\"live\">connecting…</span> <span id=\"agent-status\" class=\"status\" aria-live=\"polite\"></span></p>\
<ol id=\"messages\" class=\"messages\" data-folder=\"{f}\" data-after=\"{last}\">",
        name = escape(&group.name),
    );
    if messages.is_empty() {
        body.push_str(
            "<li class=\"empty\" id=\"no-messages\">No messages yet — say something below.</li>",
        );
    }
    for m in &messages {
        body.push_str(&message_item(m));
    }
    body.push_str(
        "</ol><form id=\"send\" class=\"send\">\
<label>Name <input name=\"sender\" value=\"Web\" required maxlength=\"200\"></label>\
<label class=\"grow\">Message <textarea name=\"text\" required rows=\"2\"></textarea></label>\
<button type=\"submit\">Send</button><p id=\"send-error\" class=\"error\" role=\"alert\"></p></form>",
    );
    page(&api, &group.name, &body)
}

/// One chat message as a list item (the script builds the same shape).
fn message_item(m: &crate::routing::messages::Message) -> String {
    let who = m.sender_name.as_deref().unwrap_or(&m.sender);
    format!(
        "<li class=\"message{bot}\" data-seq=\"{seq}\"><span class=\"who\">{who}</span> {t}\
<div class=\"text\">{text}</div></li>",
        bot = if m.from_bot { " bot" } else { "" },
        seq = m.seq,
        who = escape(who),
        t = time(&m.timestamp),
        text = escape(&m.text),
    )
}

async fn archives_page(
    State(api): State<Api>,
    axum::extract::Path(folder): axum::extract::Path<String>,
) -> Response {
    if let Err(e) = g2_core::validate::any_folder(&folder) {
        return failed(&api, Error::Validation(e));
    }
    let f = folder.clone();
    let list = match api.store.read(move |c| store::archives::list(c, &f)).await {
        Ok(l) => l,
        Err(e) => return failed(&api, e),
    };
    let f = escape(&folder);
    let mut body =
        format!("<h1>Archives</h1><p class=\"muted\"><a href=\"/groups/{f}\">{f}</a></p>");
    if list.is_empty() {
        body.push_str("<p class=\"empty\">No archives yet — clear a session to create one.</p>");
    } else {
        body.push_str("<ul class=\"list\">");
        for a in &list {
            body.push_str(&format!(
                "<li><a href=\"/archives/{id}\">{name}</a> <span class=\"muted\">{t} · {trigger}</span></li>",
                id = a.id,
                name = escape(&a.name),
                t = time(&a.created_at),
                trigger = escape(a.trigger.as_str()),
            ));
        }
        body.push_str("</ul>");
    }
    page(&api, "Archives", &body)
}

async fn archive_page(
    State(api): State<Api>,
    axum::extract::Path(id): axum::extract::Path<i64>,
) -> Response {
    let rec = match api.store.read(move |c| store::archives::get(c, id)).await {
        Ok(Some(r)) => r,
        Ok(None) => return failed(&api, Error::NotFound(format!("archive {id}"))),
        Err(e) => return failed(&api, e),
    };
    let (home, r) = (api.home.clone(), rec.clone());
    let rendered = tokio::task::spawn_blocking(move || {
        archives::read_markdown(&home, &r).and_then(|md| match md {
            Some(md) => Ok(markdown::render(&md)),
            None => Err(Error::NotFound(format!("the file of archive {}", r.id))),
        })
    })
    .await;
    let (html, headings) = match rendered {
        Ok(Ok(x)) => x,
        Ok(Err(e)) => return failed(&api, e),
        Err(e) => return failed(&api, Error::from(e)),
    };
    let f = escape(rec.group.as_str());
    let mut body = format!(
        "<p class=\"muted\"><a href=\"/groups/{f}/archives\">{f} archives</a> · {t}{session}</p>",
        t = time(&rec.created_at),
        session = rec
            .session_id
            .as_deref()
            .map(|s| format!(" · session <code>{}</code>", escape(s)))
            .unwrap_or_default(),
    );
    // A table of contents for a long document.
    if headings.len() > 3 {
        body.push_str("<nav class=\"toc\" aria-label=\"Contents\"><ol>");
        for h in &headings {
            body.push_str(&format!(
                "<li class=\"l{}\"><a href=\"#{}\">{}</a></li>",
                h.level,
                h.id,
                escape(&h.text)
            ));
        }
        body.push_str("</ol></nav>");
    }
    body.push_str("<article class=\"archive\">");
    body.push_str(&html);
    body.push_str("</article>");
    page(&api, &rec.name, &body)
}

async fn sessions_page(
    State(api): State<Api>,
    axum::extract::Path(folder): axum::extract::Path<String>,
) -> Response {
    let group = match registered(&api, folder).await {
        Ok(g) => g,
        Err(page) => return page,
    };
    let folder = group.folder.clone();
    let read = async {
        let pointer = api.sessions.get(&folder).await?;
        let history = api.sessions.history(&folder).await?;
        let f = folder.clone();
        let archives = api
            .store
            .read(move |c| store::archives::list(c, f.as_str()))
            .await?;
        Ok::<_, Error>((pointer, history, archives))
    };
    let (pointer, history, archives) = match read.await {
        Ok(x) => x,
        Err(e) => return failed(&api, e),
    };
    // A session's newest archive (the list is newest first).
    let archive_of = |sid: &str| {
        archives
            .iter()
            .find(|a| a.session_id.as_deref() == Some(sid))
            .map(|a| a.id)
    };
    let f = escape(folder.as_str());
    let mut body = format!(
        "<h1>Sessions</h1><p class=\"muted\"><a href=\"/groups/{f}\">{name}</a> · \
<a href=\"/groups/{f}/archives\">archives</a></p><h2>Active</h2>",
        name = escape(&group.name)
    );
    match &pointer.session_id {
        Some(sid) => {
            body.push_str(&format!(
                "<p>Session <code>{sid}</code>{since}</p>\
<form class=\"send\" id=\"clear\" data-api=\"/api/groups/{f}/session/clear\" \
data-confirm=\"Archive and clear the active session?\">\
<label class=\"grow\">Name for its archive <input name=\"name\" required maxlength=\"200\"></label>\
<button type=\"submit\">Clear…</button><p class=\"error\" role=\"alert\"></p></form>",
                sid = escape(sid),
                since = pointer
                    .created_at
                    .as_deref()
                    .map(|t| format!(", since {}", time(t)))
                    .unwrap_or_default(),
            ));
        }
        None => {
            body.push_str(
                "<p class=\"empty\">No active session — the next message starts one.</p>",
            );
        }
    }
    body.push_str("<h2>Earlier sessions</h2>");
    if history.is_empty() {
        body.push_str(
            "<p class=\"empty\">None yet — a cleared session is kept here to resume.</p>",
        );
    } else {
        body.push_str("<ul class=\"list\">");
        for h in &history {
            let archive = archive_of(&h.session_id)
                .map(|id| format!(" · <a href=\"/archives/{id}\">archive</a>"))
                .unwrap_or_default();
            body.push_str(&format!(
                "<li><strong>{name}</strong> <span class=\"muted\">{started} → {archived}</span>{archive}\
<form class=\"inline\" data-api=\"/api/groups/{f}/session/resume\" data-confirm=\"Resume “{name}”? The active session is bookmarked first.\">\
<input type=\"hidden\" name=\"history_id\" value=\"{id}\" data-number>\
<button type=\"submit\">Resume</button><span class=\"error\" role=\"alert\"></span></form></li>",
                name = escape(&h.name),
                started = time(&h.created_at),
                archived = time(&h.archived_at),
                id = h.id,
            ));
        }
        body.push_str("</ul>");
    }
    page(&api, "Sessions", &body)
}

#[derive(Deserialize)]
struct SearchQuery {
    #[serde(default)]
    q: String,
    group: Option<String>,
}

/// A snippet whose matches are marked `[` `]`, as HTML with `<mark>`.
fn marked(snippet: &str) -> String {
    let mut out = String::new();
    let mut open = false;
    for part in snippet.split_inclusive(['[', ']']) {
        let (text, mark) = match part.chars().last() {
            Some(c @ ('[' | ']')) => (&part[..part.len() - 1], Some(c)),
            _ => (part, None),
        };
        out.push_str(&escape(text));
        match mark {
            Some('[') if !open => {
                out.push_str("<mark>");
                open = true;
            }
            Some(']') if open => {
                out.push_str("</mark>");
                open = false;
            }
            Some(c) => out.push(c),
            None => {}
        }
    }
    if open {
        out.push_str("</mark>");
    }
    out
}

async fn search_page(
    State(api): State<Api>,
    axum::extract::Query(q): axum::extract::Query<SearchQuery>,
) -> Response {
    let question = q.q.trim().to_string();
    let mut body = format!(
        "<h1>Search</h1><form method=\"get\" action=\"/search\" class=\"send\" role=\"search\">\
<label class=\"grow\">Archives and memory <input type=\"search\" name=\"q\" value=\"{}\" autofocus></label>\
<button type=\"submit\">Search</button></form>",
        escape(&question)
    );
    if question.is_empty() {
        body.push_str(
            "<p class=\"empty\">Ask in your own words, e.g. “where is the boat moored?”.</p>",
        );
        return page(&api, "Search", &body);
    }
    let group = q.group.clone();
    let found = api
        .store
        .read(move |c| {
            let archives = match crate::search::search(c, &question, group.as_deref(), 10) {
                Ok(h) => h,
                Err(Error::Invalid(_)) => Vec::new(),
                Err(e) => return Err(e),
            };
            let groups: Vec<GroupFolder> = match &group {
                Some(g) => GroupFolder::new(g.as_str()).into_iter().collect(),
                None => store::groups::list(c)?
                    .into_iter()
                    .map(|g| g.folder)
                    .collect(),
            };
            let mut memory = Vec::new();
            for g in &groups {
                memory.extend(crate::memory::recall::recall(c, g, &question, 10)?);
            }
            memory.sort_by(|a, b| b.score.total_cmp(&a.score));
            let mut seen = std::collections::HashSet::new();
            memory.retain(|h| seen.insert((h.kind.clone(), h.id)));
            memory.truncate(10);
            Ok((archives, memory))
        })
        .await;
    let (archives, memory) = match found {
        Ok(x) => x,
        Err(e) => return failed(&api, e),
    };
    body.push_str("<h2>Archives</h2>");
    if archives.is_empty() {
        body.push_str("<p class=\"empty\">No archive holds these words.</p>");
    } else {
        body.push_str("<ul class=\"list results\" id=\"archive-hits\">");
        for h in &archives {
            body.push_str(&format!(
                "<li><a href=\"/archives/{id}\">{name}</a> <span class=\"muted\">{g} · {t}</span>\
<div class=\"snippet\">{snip}</div></li>",
                id = h.archive_id,
                name = escape(&h.name),
                g = escape(&h.group),
                t = time(&h.created_at),
                snip = marked(&h.snippet),
            ));
        }
        body.push_str("</ul>");
    }
    body.push_str("<h2>Memory</h2>");
    body.push_str(&memory_hits(&memory));
    page(&api, "Search", &body)
}

/// Recalled memories as a list (`#memory-hits`), each linked to where it
/// reads whole, with its day; one found by meaning alone (none of the
/// question's words) is tagged so.
fn memory_hits(hits: &[crate::memory::recall::RecallHit]) -> String {
    if hits.is_empty() {
        return "<p class=\"empty\">Nothing in memory answers that.</p>".into();
    }
    let mut out = String::from("<ul class=\"list results\" id=\"memory-hits\">");
    for h in hits {
        let kind = h.observation_kind.as_deref().unwrap_or(&h.kind);
        // Each hit links to where it can be read whole.
        let title = match (h.kind.as_str(), h.archive_id) {
            ("passage", Some(id)) => {
                format!("<a href=\"/archives/{id}\">{}</a>", escape(&h.title))
            }
            ("observation", _) if h.group != "global" => format!(
                "<a href=\"/groups/{}/memory#o{}\">{}</a>",
                escape(&h.group),
                h.id,
                escape(&h.title)
            ),
            _ => escape(&h.title),
        };
        let meaning = if h.matched_words == 0 {
            " <span class=\"tag meaning\">by meaning</span>"
        } else {
            ""
        };
        out.push_str(&format!(
            "<li><span class=\"tag\">{kind}</span>{meaning} {title} <span class=\"muted\">{g} · {t}</span>\
<div class=\"snippet\">{snip}</div></li>",
            kind = escape(kind),
            g = escape(&h.group),
            t = time(&h.at),
            snip = marked(&h.snippet),
        ));
    }
    out.push_str("</ul>");
    out
}

async fn memory_page(
    State(api): State<Api>,
    axum::extract::Path(folder): axum::extract::Path<String>,
    axum::extract::Query(q): axum::extract::Query<SearchQuery>,
) -> Response {
    let group = match registered(&api, folder).await {
        Ok(g) => g,
        Err(page) => return page,
    };
    let folder = group.folder.clone();
    let (f, tokens) = (folder.clone(), api.memory.inject_tokens);
    let prompt_tokens = api.memory.prompt_inject_tokens;
    let question = q.q.trim().to_string();
    let asked = question.clone();
    let read = api
        .store
        .read(move |c| {
            let next = crate::memory::context::session_start(c, &f, tokens)?;
            let observations = store::observations::list(c, &(&f).into(), false)?;
            let summaries = store::observations::latest_summaries(c, &f, 10)?;
            // A question: what recall finds, and what a prompt asking it
            // would be given.
            let answer = if asked.is_empty() {
                None
            } else {
                Some((
                    crate::memory::recall::recall(c, &f, &asked, 10)?,
                    crate::memory::context::for_prompt(c, &f, &asked, prompt_tokens)?,
                ))
            };
            Ok((next, observations, summaries, answer))
        })
        .await;
    let (next, observations, summaries, answer) = match read {
        Ok(x) => x,
        Err(e) => return failed(&api, e),
    };
    let f = escape(folder.as_str());
    let mut body = format!(
        "<h1>Memory</h1><p class=\"muted\"><a href=\"/groups/{f}\">{name}</a> · \
<a href=\"/groups/{f}/sessions\">sessions</a> · <a href=\"/groups/{f}/archives\">archives</a></p>\
<form method=\"get\" class=\"send\" role=\"search\" id=\"ask-memory\">\
<label class=\"grow\">Ask this group's memory <input type=\"search\" name=\"q\" value=\"{q}\"></label>\
<button type=\"submit\">Ask</button></form>",
        name = escape(&group.name),
        q = escape(&question),
    );
    if let Some((hits, block)) = &answer {
        body.push_str(&memory_hits(hits));
        body.push_str("<h2>A prompt asking this would be given</h2>");
        if block.is_empty() {
            body.push_str(
                "<p class=\"empty\" id=\"prompt-context\">Nothing: no memory passes the gate.</p>",
            );
        } else {
            body.push_str(&format!(
                "<pre class=\"context\" id=\"prompt-context\">{}</pre>",
                escape(block)
            ));
        }
    }
    body.push_str("<h2>The next session starts with</h2>");
    if next.is_empty() {
        body.push_str("<p class=\"empty\">Nothing yet — memory builds up as the group talks.</p>");
    } else {
        body.push_str(&format!(
            "<pre class=\"context\" id=\"next-context\">{}</pre>",
            escape(&next)
        ));
    }
    body.push_str(&format!(
        "<h2>Live</h2><p><label>Show <select id=\"feed-kind\">\
<option value=\"\">everything</option><option value=\"prompt\">prompts</option>\
<option value=\"tool\">tool calls</option><option value=\"observation\">observations</option>\
<option value=\"summary\">summaries</option></select></label> \
<label>Session <input id=\"feed-session\" size=\"12\" placeholder=\"any\"></label> \
<span id=\"feed-live\" class=\"muted\">connecting…</span></p>\
<ol id=\"feed\" class=\"list feed\" data-folder=\"{f}\"><li class=\"empty\" id=\"feed-empty\">\
What the group's memory stores from now on appears here.</li></ol><h2>Observations</h2>"
    ));
    if observations.is_empty() {
        body.push_str("<p class=\"empty\">No observations yet — they are extracted from each answered prompt.</p>");
    } else {
        body.push_str("<ul class=\"list\" id=\"observations\">");
        for o in &observations {
            let mut from = Vec::new();
            if let Some(sid) = &o.session_id {
                let prompt = o
                    .prompt_number
                    .map(|n| format!(", prompt {n}"))
                    .unwrap_or_default();
                from.push(format!("session <code>{}</code>{prompt}", escape(sid)));
            }
            if o.archive_path.is_some() {
                from.push(format!("<a href=\"/groups/{f}/archives\">archived</a>"));
            }
            if o.origin == "remembered" {
                from.push("asked to remember".into());
            }
            body.push_str(&format!(
                "<li id=\"o{id}\"><span class=\"tag\">{kind}</span> {title} \
<span class=\"muted\">importance {imp}{who} · {t}{from}</span>\
<form class=\"inline\" data-api=\"/api/groups/{f}/memory/observations/{id}\" data-method=\"DELETE\" \
data-confirm=\"Forget this observation? It leaves recall and injection.\">\
<button type=\"submit\">Forget</button><span class=\"error\" role=\"alert\"></span></form></li>",
                id = o.id,
                kind = escape(&o.kind),
                title = escape(&o.title),
                imp = o.importance,
                who = if o.concerns.is_empty() {
                    String::new()
                } else {
                    format!(" · about {}", escape(&o.concerns.join(", ")))
                },
                t = time(&o.created_at),
                from = if from.is_empty() { String::new() } else { format!(" · {}", from.join(" · ")) },
            ));
        }
        body.push_str("</ul>");
    }
    body.push_str("<h2>Session summaries</h2>");
    if summaries.is_empty() {
        body.push_str("<p class=\"empty\">No summaries yet — a session is summarised when it compacts or ends.</p>");
    } else {
        body.push_str("<ul class=\"list\">");
        for m in &summaries {
            body.push_str(&format!(
                "<li><strong>{title}</strong> <span class=\"muted\">{t} · session <code>{sid}</code></span>",
                title = escape(&m.title),
                t = time(&m.created_at),
                sid = escape(&m.session_id),
            ));
            for (k, v) in [
                ("Asked", &m.request),
                ("Learned", &m.learned),
                ("Done", &m.completed),
                ("Next", &m.next_steps),
            ] {
                if !v.trim().is_empty() {
                    body.push_str(&format!(
                        "<div><span class=\"muted\">{k}:</span> {}</div>",
                        escape(v)
                    ));
                }
            }
            body.push_str("</li>");
        }
        body.push_str("</ul>");
    }
    page(&api, "Memory", &body)
}

/// The actions a task in `status` can take, as forms the script sends.
fn task_actions(id: &str, status: &str) -> String {
    let id_enc = escape(id);
    let mut out = String::new();
    let mut form = |action: &str, label: &str, confirm: &str| {
        out.push_str(&format!(
            "<form class=\"inline\" data-api=\"/api/tasks/{id_enc}/{action}\" data-confirm=\"{confirm}\">\
<button type=\"submit\">{label}</button><span class=\"error\" role=\"alert\"></span></form>"
        ));
    };
    match status {
        "active" => {
            form("pause", "Pause", "Pause this task?");
            form("cancel", "Cancel", "Cancel this task for good?");
        }
        "paused" => {
            form("resume", "Resume", "Resume this task?");
            form("cancel", "Cancel", "Cancel this task for good?");
        }
        _ => {}
    }
    out
}

async fn tasks_page(State(api): State<Api>) -> Response {
    let tasks = match api.store.read(|c| store::tasks::list(c, None)).await {
        Ok(t) => t,
        Err(e) => return failed(&api, e),
    };
    let mut body = String::from("<h1>Scheduled tasks</h1>");
    if tasks.is_empty() {
        body.push_str(
            "<p class=\"empty\">No tasks yet — ask an agent to schedule one \
(“remind us every Monday at 9 to water the plants”).</p>",
        );
    } else {
        body.push_str("<ul class=\"list\" id=\"tasks\">");
        for t in &tasks {
            let id = escape(&t.id);
            body.push_str(&format!(
                "<li><a href=\"/tasks/{id}\">{prompt}</a> <span class=\"muted\">{g} · {kind} {value} · {status}</span>\
<div class=\"muted\">next {next} · last {last}</div>{result}{actions}</li>",
                prompt = escape(&crate::memory::context::one_line(&t.prompt)),
                g = escape(t.group_folder.as_str()),
                kind = escape(&t.schedule_type),
                value = escape(&t.schedule_value),
                status = escape(&t.status),
                next = t.next_run.as_deref().map(time).unwrap_or_else(|| "—".into()),
                last = t.last_run.as_deref().map(time).unwrap_or_else(|| "never".into()),
                result = t
                    .last_result
                    .as_deref()
                    .map(|r| format!("<div class=\"snippet\">{}</div>", escape(r)))
                    .unwrap_or_default(),
                actions = task_actions(&t.id, &t.status),
            ));
        }
        body.push_str("</ul>");
    }
    page(&api, "Tasks", &body)
}

async fn task_page(
    State(api): State<Api>,
    axum::extract::Path(id): axum::extract::Path<String>,
) -> Response {
    let key = id.clone();
    let read = api
        .store
        .read(move |c| {
            Ok((
                store::tasks::get(c, &key)?,
                store::tasks::runs(c, &key, 50)?,
            ))
        })
        .await;
    let (task, runs) = match read {
        Ok((Some(t), runs)) => (t, runs),
        Ok((None, _)) => return failed(&api, Error::NotFound(format!("task {id:?}"))),
        Err(e) => return failed(&api, e),
    };
    let mut body = format!(
        "<h1>Task</h1><p class=\"muted\"><a href=\"/tasks\">tasks</a> · <a href=\"/groups/{g}\">{g}</a> · \
{kind} {value} ({tz}) · {status}</p><pre class=\"context\">{prompt}</pre><p>next {next}</p>{actions}<h2>Runs</h2>",
        g = escape(task.group_folder.as_str()),
        kind = escape(&task.schedule_type),
        value = escape(&task.schedule_value),
        tz = escape(&task.timezone),
        status = escape(&task.status),
        prompt = escape(&task.prompt),
        next = task
            .next_run
            .as_deref()
            .map(time)
            .unwrap_or_else(|| "—".into()),
        actions = task_actions(&task.id, &task.status),
    );
    if runs.is_empty() {
        body.push_str("<p class=\"empty\">Not run yet.</p>");
    } else {
        body.push_str("<ul class=\"list\" id=\"runs\">");
        for r in &runs {
            body.push_str(&format!(
                "<li>{t} <span class=\"muted\">{status} · {ms} ms</span><div class=\"snippet\">{text}</div></li>",
                t = time(&r.run_at),
                status = escape(&r.status),
                ms = r.duration_ms,
                text = escape(r.result.as_deref().or(r.error.as_deref()).unwrap_or("")),
            ));
        }
        body.push_str("</ul>");
    }
    page(&api, "Task", &body)
}

/// Colours of the usage chart's groups, in turn.
const PALETTE: [&str; 6] = [
    "#2457c5", "#c55a24", "#2a9d5b", "#8e44ad", "#c5a024", "#5f6b7a",
];

/// Tokens per day and group as stacked bars, drawn as SVG.
fn usage_chart(
    lines: &[crate::gateway::usage::Line],
    days: &[String],
    groups: &[String],
) -> String {
    const W: f64 = 720.0;
    const H: f64 = 180.0;
    let total = |day: &str, g: &str| -> u64 {
        lines
            .iter()
            .filter(|l| l.day == day && l.group == g)
            .map(|l| {
                l.input_tokens + l.output_tokens + l.cache_read_tokens + l.cache_creation_tokens
            })
            .sum()
    };
    let max = days
        .iter()
        .map(|d| groups.iter().map(|g| total(d, g)).sum::<u64>())
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let step = W / days.len().max(1) as f64;
    let mut svg = format!(
        "<svg class=\"chart\" viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"Tokens per day and group\">",
        w = W + 30.0,
        h = H + 20.0
    );
    for (i, d) in days.iter().enumerate() {
        let mut y = H;
        for (k, g) in groups.iter().enumerate() {
            let n = total(d, g);
            if n == 0 {
                continue;
            }
            let h = n as f64 / max * (H - 10.0);
            y -= h;
            svg.push_str(&format!(
                "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{h:.1}\" fill=\"{c}\"><title>{title}</title></rect>",
                x = i as f64 * step + 2.0,
                w = (step - 4.0).max(1.0),
                c = PALETTE[k % PALETTE.len()],
                title = escape(&format!("{d} · {g}: {n} tokens")),
            ));
        }
        if days.len() <= 14 || i % 5 == 4 {
            svg.push_str(&format!(
                "<text x=\"{x:.1}\" y=\"{ty}\" font-size=\"10\" fill=\"currentColor\">{label}</text>",
                x = i as f64 * step + 2.0,
                ty = H + 14.0,
                label = escape(d.get(5..).unwrap_or(d)),
            ));
        }
    }
    svg.push_str("</svg>");
    svg
}

async fn usage_page(State(api): State<Api>) -> Response {
    let since = crate::gateway::usage::since(30);
    let lines = match api
        .store
        .read(move |c| store::usage::report(c, None, Some(&since)))
        .await
    {
        Ok(l) => l,
        Err(e) => return failed(&api, e),
    };
    let mut body =
        String::from("<h1>Model usage</h1><p class=\"muted\">The last 30 days, UTC.</p>");
    if lines.is_empty() {
        body.push_str(
            "<p class=\"empty\">No model requests yet — they are counted as the agents answer.</p>",
        );
        return page(&api, "Usage", &body);
    }
    // Every day of the range, used or not, so a bar's width means a day.
    let today = chrono::Utc::now().date_naive();
    let days: Vec<String> = (0..30)
        .rev()
        .filter_map(|back| today.checked_sub_days(chrono::Days::new(back)))
        .map(|d| d.format("%Y-%m-%d").to_string())
        .collect();
    let mut groups: Vec<String> = lines.iter().map(|l| l.group.clone()).collect();
    groups.sort();
    groups.dedup();
    body.push_str(&usage_chart(&lines, &days, &groups));
    body.push_str("<p class=\"legend\">");
    for (k, g) in groups.iter().enumerate() {
        body.push_str(&format!(
            "<span class=\"swatch s{}\"></span> {} ",
            k % PALETTE.len(),
            escape(g)
        ));
    }
    body.push_str("</p><table class=\"usage\"><thead><tr><th>day</th><th>group</th><th>for</th><th>model</th>\
<th>requests</th><th>input</th><th>output</th><th>errors</th><th>refused</th><th>daily budget</th></tr></thead><tbody>");
    for l in &lines {
        let budget = if l.group.starts_with('@') {
            None
        } else {
            api.gateway.limits_for(&l.group).daily_tokens
        };
        body.push_str(&format!(
            "<tr><td>{day}</td><td>{g}</td><td>{p}</td><td>{m}</td><td>{r}</td><td>{i}</td><td>{o}</td>\
<td>{e}</td><td>{x}</td><td>{b}</td></tr>",
            day = escape(&l.day),
            g = escape(&l.group),
            p = l.purpose.as_str(),
            m = escape(&l.model),
            r = l.requests,
            i = l.input_tokens + l.cache_read_tokens + l.cache_creation_tokens,
            o = l.output_tokens,
            e = l.errors,
            x = l.refused,
            b = budget.map(|b| b.to_string()).unwrap_or_else(|| "none".into()),
        ));
    }
    body.push_str("</tbody></table>");
    page(&api, "Usage", &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippets_mark_matches_and_escape_the_rest() {
        assert_eq!(
            marked("the [boat] <b>is</b> [moored"),
            "the <mark>boat</mark> &lt;b&gt;is&lt;/b&gt; <mark>moored</mark>"
        );
        assert_eq!(marked("a ] b"), "a ] b");
    }
}
