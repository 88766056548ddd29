//! A group's chat (`/groups/{folder}`): its latest messages, then live
//! over the API's SSE stream (the script), with a box to send one.

use axum::extract::State;
use axum::response::Response;

use super::markdown::escape;
use super::{Registered, failed, page, time};
use crate::api::Api;

/// Messages a chat page opens with.
const CHAT_HISTORY: usize = 200;

pub(super) async fn chat_page(State(api): State<Api>, Registered(group): Registered) -> Response {
    let folder = group.folder.clone();
    let jid = group.jid.clone();
    let messages = match crate::messages::latest(&api.store, &jid, CHAT_HISTORY).await {
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
        body.push_str(&message_item(m, folder.as_str()));
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
/// Context the routing rules passed over is marked as never shown to the
/// agent (docs/channels.md, "Backlogs").
fn message_item(m: &crate::messages::Message, folder: &str) -> String {
    let who = m.sender_name.as_deref().unwrap_or(&m.sender);
    format!(
        "<li class=\"message{bot}{passed}\" data-seq=\"{seq}\"><span class=\"who\">{who}</span> {t}{note}\
<div class=\"text\">{text}</div>{files}</li>",
        files = files(m, folder),
        bot = if m.from_bot { " bot" } else { "" },
        passed = if m.passed_over { " passed" } else { "" },
        note = if m.passed_over { PASSED_NOTE } else { "" },
        seq = m.seq,
        who = escape(who),
        t = time(&m.timestamp),
        text = escape(&m.text),
    )
}

/// A message's files (the script builds the same shape): a picture
/// shown, a sound or video with a player (its transcript is the
/// message's text), anything else a link; one not kept, its note.
fn files(m: &crate::messages::Message, folder: &str) -> String {
    use g2_core::media::Kind;
    let mut out = String::new();
    for a in &m.attachments {
        let name = escape(&a.name);
        let Some(path) = a.path.as_deref().and_then(|p| p.strip_prefix("media/")) else {
            let note = escape(a.note.as_deref().unwrap_or("not kept"));
            out.push_str(&format!("<div class=\"file missing\">{name}: {note}</div>"));
            continue;
        };
        let src = format!("/groups/{}/media/{}", escape(folder), escape(path));
        out.push_str(&match a.kind {
            Kind::Image => format!("<div class=\"file\"><img src=\"{src}\" alt=\"{name}\" loading=\"lazy\"></div>"),
            Kind::Voice | Kind::Audio => format!("<div class=\"file\"><audio controls preload=\"none\" src=\"{src}\" title=\"{name}\"></audio></div>"),
            Kind::Video => format!("<div class=\"file\"><video controls preload=\"none\" src=\"{src}\" title=\"{name}\"></video></div>"),
            Kind::File => format!("<div class=\"file\"><a href=\"{src}\" download>{name}</a></div>"),
        });
    }
    out
}

/// What a passed-over message is marked with.
const PASSED_NOTE: &str = " <span class=\"note\" title=\"It did not call the agent, and the context \
before the message that did was over a prompt's budget.\">not shown to the agent</span>";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passed_over_context_is_marked_as_not_shown() {
        let mut m = crate::messages::Message {
            seq: 7,
            id: "x".into(),
            chat_jid: "local:fam".into(),
            sender: "ann".into(),
            sender_name: None,
            text: "<b>old</b> news".into(),
            timestamp: "2026-01-01T00:00:00.000Z".into(),
            from_bot: false,
            addressed: false,
            reply_to: None,
            passed_over: false,
            attachments: Vec::new(),
        };
        let shown = message_item(&m, "fam");
        assert!(
            !shown.contains("passed") && !shown.contains("not shown"),
            "{shown}"
        );
        m.passed_over = true;
        let passed = message_item(&m, "fam");
        assert!(
            passed.starts_with("<li class=\"message passed\" data-seq=\"7\">")
                && passed.contains(">not shown to the agent</span>")
                && passed.contains("&lt;b&gt;old&lt;/b&gt; news"),
            "{passed}"
        );
    }
}
