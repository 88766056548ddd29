//! A group's sessions (`/groups/{folder}/sessions`): the active one with a
//! form to clear it, the earlier ones with a form to resume each and a
//! link to its archive. The forms post to the API.

use axum::extract::State;
use axum::response::Response;

use super::markdown::escape;
use super::{Registered, failed, page, time};
use crate::Error;
use crate::api::Api;

pub(super) async fn sessions_page(
    State(api): State<Api>,
    Registered(group): Registered,
) -> Response {
    let folder = group.folder.clone();
    let read = async {
        let pointer = api.sessions.get(&folder).await?;
        let history = api.sessions.history(&folder).await?;
        let archives = crate::archives::list(&api.store, folder.as_str()).await?;
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
