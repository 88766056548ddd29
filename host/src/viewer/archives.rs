//! A group's archives (`/groups/{folder}/archives`) and one archive as a
//! document (`/archives/{id}`: its markdown rendered safe by
//! [`markdown`](super::markdown), with a table of contents when long).

use axum::extract::State;
use axum::response::Response;

use super::markdown::{self, escape};
use super::{failed, page, time};
use crate::api::Api;
use crate::{Error, archives};

pub(super) async fn archives_page(
    State(api): State<Api>,
    axum::extract::Path(folder): axum::extract::Path<String>,
) -> Response {
    if let Err(e) = g2_core::validate::any_folder(&folder) {
        return failed(&api, Error::Validation(e));
    }
    let list = match archives::list(&api.store, &folder).await {
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

pub(super) async fn archive_page(
    State(api): State<Api>,
    axum::extract::Path(id): axum::extract::Path<i64>,
) -> Response {
    let rec = match archives::find(&api.store, id).await {
        Ok(r) => r,
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
