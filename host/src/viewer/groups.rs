//! The groups page (`/`): every group with its container's state, its
//! session, its latest message, its failure if failing, its tokens today
//! against its budget and the host that owns it (its live lease,
//! docs/cluster.md); and a form to register one.

use axum::extract::State;
use axum::response::Response;

use super::markdown::escape;
use super::{failed, page, time};
use crate::api::Api;
use crate::store;

/// What the groups page shows of one group beside its row.
struct GroupLine {
    group: crate::groups::Group,
    session: Option<String>,
    last: Option<crate::messages::Message>,
    failing: Option<crate::messages::Failing>,
    tokens_today: u64,
    /// The host holding the group's live lease.
    host: Option<String>,
}

pub(super) async fn groups_page(State(api): State<Api>) -> Response {
    let today = crate::gateway::usage::today();
    let read = api
        .store
        .read(move |c| {
            let mut out = Vec::new();
            let now = store::leases::now_ms(c)?;
            for group in store::groups::list(c)? {
                let f = group.folder.clone();
                out.push(GroupLine {
                    session: store::sessions::pointer(c, &f)?.session_id,
                    last: store::messages::latest(c, &group.jid, 1)?.pop(),
                    failing: crate::messages::failing(c, f.as_str())?,
                    tokens_today: store::usage::tokens_on(c, f.as_str(), &today, None)?,
                    host: store::leases::get(c, f.as_str())?
                        .filter(|l| l.expires_ms > now)
                        .map(|l| l.host_id),
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
                            &g2_core::quote::one_line(&m.text),
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
<span class=\"muted\">{f} · <span class=\"platform\">{platform}</span>{main}</span><br><span class=\"status\">{state}</span>{host} · {session} · \
{tokens}{budget} tokens today{failing}{last}<div><a href=\"/groups/{f}/sessions\">sessions</a> · \
<a href=\"/groups/{f}/archives\">archives</a> · <a href=\"/groups/{f}/memory\">memory</a></div></li>",
                name = escape(&g.name),
                platform = crate::jid::platform(&g.jid),
                main = if g.is_main { " · main" } else { "" },
                session = match &line.session {
                    Some(s) => format!("session <code>{}</code>", escape(s.get(..8).unwrap_or(s))),
                    None => "no active session".into(),
                },
                tokens = line.tokens_today,
                host = line
                    .host
                    .as_deref()
                    .map(|h| format!(" on <span class=\"host\">{}</span>", escape(h)))
                    .unwrap_or_default(),
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
