//! The tokens of `/mcp` (`/mcp-tokens`): every group's, with its state,
//! and a revoke button on the live ones (a form the script sends to
//! `DELETE /api/mcp/tokens/{id}`). Listed through `mcp::tokens`; a token
//! itself is never shown, only the characters kept to tell it apart.

use axum::extract::State;
use axum::response::Response;

use super::markdown::escape;
use super::{failed, page, time};
use crate::api::Api;
use crate::mcp::tokens;

pub(super) async fn tokens_page(State(api): State<Api>) -> Response {
    let rows = match tokens::list(&api.store, None).await {
        Ok(r) => r,
        Err(e) => return failed(&api, e),
    };
    let mut body = String::from(
        "<h1>MCP tokens</h1><p class=\"muted\">Each lets one MCP client of yours (Claude \
Desktop, Claude Code, Cursor…) reach one group's memory at <code>/mcp</code>. A token is \
shown once, when it is made; g2 keeps only its hash and its first characters.</p>",
    );
    if rows.is_empty() {
        body.push_str(
            "<p class=\"empty\" id=\"no-tokens\">No tokens yet — make one for a group with \
<code>g2 mcp tokens create &lt;folder&gt;</code> (<code>--write</code> lets it remember and \
forget too).</p>",
        );
        return page(&api, "MCP tokens", &body);
    }
    let now = crate::now_rfc3339();
    body.push_str(
        "<table class=\"tokens\" id=\"tokens\"><thead><tr><th>group</th><th>name</th><th>token</th>\
<th>scope</th><th>created</th><th>expires</th><th>state</th><th>last used</th><th></th></tr></thead><tbody>",
    );
    for t in &rows {
        let state = tokens::state(t, &now);
        let shown = match t.revoked_at.as_deref() {
            Some(at) => format!("revoked {}", time(at)),
            None => state.to_string(),
        };
        let action = if state == "live" {
            format!(
                "<form class=\"inline\" data-api=\"/api/mcp/tokens/{id}\" data-method=\"DELETE\" \
data-confirm=\"Revoke this token? Its client is refused from its next call.\">\
<button type=\"submit\">Revoke</button><span class=\"error\" role=\"alert\"></span></form>",
                id = t.id
            )
        } else {
            String::new()
        };
        body.push_str(&format!(
            "<tr id=\"token-{id}\" data-state=\"{state}\"><td><a href=\"/groups/{g}\">{g}</a></td>\
<td class=\"name\">{name}</td><td><code>{prefix}…</code></td><td>{scope}</td><td>{created}</td>\
<td>{expires}</td><td class=\"state\">{shown}</td><td>{used}</td><td>{action}</td></tr>",
            id = t.id,
            g = escape(&t.group),
            name = escape(&t.name),
            prefix = escape(&t.prefix),
            scope = escape(&t.scope),
            created = time(&t.created_at),
            expires = t
                .expires_at
                .as_deref()
                .map(time)
                .unwrap_or_else(|| "never".into()),
            used = t
                .last_used_at
                .as_deref()
                .map(time)
                .unwrap_or_else(|| "never".into()),
        ));
    }
    body.push_str("</tbody></table>");
    page(&api, "MCP tokens", &body)
}
