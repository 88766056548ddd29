//! A group's chat (`/groups/{folder}`): its latest messages, then live
//! over the API's SSE stream (the script), with a box to send one.

use axum::extract::State;
use axum::response::Response;

use super::markdown::escape;
use super::{failed, page, registered, time};
use crate::api::Api;

/// Messages a chat page opens with.
const CHAT_HISTORY: usize = 200;

pub(super) async fn chat_page(
    State(api): State<Api>,
    axum::extract::Path(folder): axum::extract::Path<String>,
) -> Response {
    let group = match registered(&api, folder).await {
        Ok(g) => g,
        Err(page) => return page,
    };
    let folder = group.folder.clone();
    let jid = group.jid.clone();
    let messages = match crate::routing::messages::latest(&api.store, &jid, CHAT_HISTORY).await {
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
