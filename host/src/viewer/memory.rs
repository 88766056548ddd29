//! A group's memory (`/groups/{folder}/memory`): the block its next
//! session starts with, exactly as the agent will see it; with `?q=`, what
//! recall finds and what a prompt asking it would be given; a live feed of
//! what is stored (the script); the observations with their provenance and
//! forget buttons; the session summaries.

use axum::extract::State;
use axum::response::Response;

use super::markdown::escape;
use super::search::{SearchQuery, memory_hits};
use super::{Registered, failed, page, time};
use crate::api::Api;

pub(super) async fn memory_page(
    State(api): State<Api>,
    axum::extract::Query(q): axum::extract::Query<SearchQuery>,
    Registered(group): Registered,
) -> Response {
    let folder = group.folder.clone();
    let question = q.q.trim().to_string();
    let read = crate::memory::shown::page(
        &api.store,
        &folder,
        api.memory.inject_tokens,
        api.memory.prompt_inject_tokens,
        &question,
    )
    .await
    .map(|p| (p.next, p.observations, p.summaries, p.answer));
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
