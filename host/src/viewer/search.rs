//! Search (`/search?q=`): full-text over the archives and recall over
//! every group's memory (or one group's with `group=`); and the list of
//! recalled memories the memory page shows too.

use axum::extract::State;
use axum::response::Response;
use serde::Deserialize;

use super::markdown::{escape, plain};
use super::{failed, page, time};
use crate::Error;
use crate::api::Api;
use crate::memory::context::Injection;
use crate::memory::recall::RecallHit;
use g2_core::validate::GroupFolder;

#[derive(Deserialize)]
pub(super) struct SearchQuery {
    #[serde(default)]
    pub(super) q: String,
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

pub(super) async fn search_page(
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
    // What is read of a long question, and said so.
    let capped = crate::search::question::cap(&question);
    if let Some(note) = capped.note() {
        body.push_str(&format!(
            "<p class=\"muted\" id=\"query-cut\">Note: {}.</p>",
            escape(&note)
        ));
    }
    let question = capped.text.to_string();
    let group = q.group.clone();
    // Every group's memory unless one is named.
    let groups: Vec<GroupFolder> = match &group {
        Some(g) => GroupFolder::new(g.as_str()).into_iter().collect(),
        None => match crate::groups::list(&api.store).await {
            Ok(all) => all.into_iter().map(|g| g.folder).collect(),
            Err(e) => return failed(&api, e),
        },
    };
    let lane = group.clone();
    let lane = lane.as_deref().unwrap_or(crate::lanes::ALL_GROUPS);
    let found = crate::lanes::read(&api.store, lane, move |c| {
        let archives = match crate::search::search(c, &question, group.as_deref(), 10) {
            Ok(h) => h,
            Err(Error::Invalid(_)) => Vec::new(),
            Err(e) => return Err(e),
        };
        let memory = crate::memory::recall::recall_groups(c, &groups, &question, 10)?;
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
                snip = marked(&plain(&h.snippet)),
            ));
        }
        body.push_str("</ul>");
    }
    body.push_str("<h2>Memory</h2>");
    let (memory, weaker) = relevant(memory);
    body.push_str(&memory_hits(&memory));
    if weaker > 0 {
        body.push_str(&format!(
            "<p class=\"muted\" id=\"weaker\">{weaker} weaker match{} not shown.</p>",
            if weaker == 1 { "" } else { "es" }
        ));
    }
    page(&api, "Search", &body)
}

/// What the search page lists of a recall: the agent's own bar
/// ([`Injection::SHIPPED`]) — nothing unless the best hit reaches its
/// gate, then each hit at or above its floor — and how many fell below.
/// Scores are on one absolute scale, so the bar holds for every question.
fn relevant(hits: Vec<RecallHit>) -> (Vec<RecallHit>, usize) {
    let total = hits.len();
    let kept = Injection::SHIPPED.bar(hits);
    let weaker = total - kept.len();
    (kept, weaker)
}

/// The day (or days) a hit was said on, as recall dated it in its group's
/// timezone: shown as is (the page's script leaves it, unlike a `<time>`
/// it puts in the browser's timezone), the time itself in its title.
fn said_on(h: &RecallHit) -> String {
    format!(
        "<span class=\"day\" title=\"{}\">{}</span>",
        escape(&h.at),
        escape(&h.day)
    )
}

/// Recalled memories as a list (`#memory-hits`), each linked to where it
/// reads whole, with the day it was said; one found by meaning alone (none of the
/// question's words) is tagged so.
pub(super) fn memory_hits(hits: &[RecallHit]) -> String {
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
            "<li><span class=\"tag\">{kind}</span>{meaning} {title} <span class=\"muted\">{g} · {d}</span>\
<div class=\"snippet\">{snip}</div></li>",
            kind = escape(kind),
            g = escape(&h.group),
            d = said_on(h),
            snip = marked(&plain(&h.snippet)),
        ));
    }
    out.push_str("</ul>");
    out
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

    #[test]
    fn hits_show_the_day_they_were_said() {
        let hit = RecallHit {
            kind: "passage".into(),
            group: "main".into(),
            title: "T".into(),
            at: "2026-05-07T22:00:00.000Z".into(),
            at_end: Some("2026-05-09T08:00:00.000Z".into()),
            day: "2026-05-07…05-09".into(),
            matched_words: 1,
            ..Default::default()
        };
        let list = memory_hits(&[hit]);
        assert!(
            list.contains(
                "<span class=\"day\" title=\"2026-05-07T22:00:00.000Z\">2026-05-07…05-09</span>"
            ),
            "{list}"
        );
        assert!(!list.contains("<time"), "{list}");
    }
}
