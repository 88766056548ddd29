//! The MCP tokens page (`/mcp-tokens`), signed in: tokens made with the
//! CLI listed (a member-chosen name as text), one revoked from its button
//! with the session's CSRF token.

use super::*;

/// A token name that would be an image, and run script, if it were markup.
const HOSTILE_NAME: &str = "<img src=x onerror=\"document.title='pwned'\">";

/// The state of the row of token `id` on the page.
fn row_state(id: i64) -> String {
    format!("document.getElementById('token-{id}').dataset.state")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_tokens_are_listed_and_one_is_revoked_from_its_page() {
    let token = "tok-mcp-tokens-0123456789";
    let Some((home, s)) = served(&[("G2_API__TOKEN", token)], &[]).await else {
        return;
    };
    let b = Browser::start().await;
    open(&b, &s.url, "/mcp-tokens").await;
    signed_in(&b, token).await;
    // Linked from every page; with none yet, how to make one.
    click(&b, "nav a[href='/mcp-tokens']").await;
    b.until(
        "the empty tokens page",
        "document.title === 'MCP tokens · g2' && document.getElementById('no-tokens') !== null",
    )
    .await;
    let empty = b
        .eval("document.getElementById('no-tokens').textContent")
        .await;
    assert!(
        empty
            .as_str()
            .is_some_and(|t| t.contains("g2 mcp tokens create <folder>")),
        "{empty}"
    );

    let laptop = home.json(&["mcp", "tokens", "create", "main", "--name", "laptop"]);
    let hostile = home.json(&[
        "mcp",
        "tokens",
        "create",
        "main",
        "--write",
        "--name",
        HOSTILE_NAME,
    ]);
    let laptop_id = laptop["details"]["id"].as_i64().unwrap();
    let hostile_id = hostile["details"]["id"].as_i64().unwrap();
    b.client.refresh().await.unwrap();
    b.until(
        "both tokens",
        "document.querySelectorAll('#tokens tbody tr').length === 2",
    )
    .await;
    // The names as text, the hostile one with no element made of it.
    let names = b
        .eval("Array.from(document.querySelectorAll('#tokens td.name')).map(td => td.textContent)")
        .await;
    assert_eq!(names, json!(["laptop", HOSTILE_NAME]));
    assert_eq!(
        b.eval("document.querySelectorAll('#tokens td.name *').length")
            .await,
        json!(0)
    );
    no_harm(&b, "mcp tokens").await;
    // What a row shows: its group, the token's first characters, never the
    // token; scope, state and a revoke button while live.
    let row = b
        .eval(&format!(
            "document.getElementById('token-{hostile_id}').textContent"
        ))
        .await;
    let row = row.as_str().unwrap_or_default().to_string();
    let prefix = hostile["details"]["prefix"].as_str().unwrap();
    assert!(
        row.contains("main") && row.contains(&format!("{prefix}…")) && row.contains("write"),
        "{row}"
    );
    let page = b.eval("document.documentElement.outerHTML").await;
    for t in [&laptop, &hostile] {
        let secret = t["token"].as_str().unwrap();
        assert!(!page.as_str().unwrap().contains(secret), "a token shown");
    }
    for id in [laptop_id, hostile_id] {
        assert_eq!(b.eval(&row_state(id)).await, json!("live"));
    }

    // A DELETE from the page without the session's CSRF token is refused.
    let bare = b
        .client
        .execute_async(
            &format!(
                "const done = arguments[0]; fetch('/api/mcp/tokens/{hostile_id}', {{method: 'DELETE'}})\
                 .then(r => done(r.status), e => done(String(e)));"
            ),
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(bare, json!(401));
    // The button revokes the laptop's, after a confirmation.
    b.confirm_click(
        &format!("#token-{laptop_id} form[data-method=DELETE] button"),
        "the laptop's token revoked",
        &format!("{} === 'revoked'", row_state(laptop_id)),
    )
    .await;
    let state = b
        .eval(&format!(
            "document.querySelector('#token-{laptop_id} td.state').textContent"
        ))
        .await;
    assert!(
        state.as_str().is_some_and(|t| t.starts_with("revoked")),
        "{state}"
    );
    assert_eq!(
        b.eval(&format!(
            "document.querySelector('#token-{laptop_id} form') === null"
        ))
        .await,
        json!(true)
    );
    assert_eq!(b.eval(&row_state(hostile_id)).await, json!("live"));
    // Exactly that one, as the CLI reads the store.
    let listed = home.json(&["mcp", "tokens", "list"]);
    let revoked: Vec<i64> = listed
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["revoked_at"].is_string())
        .map(|t| t["id"].as_i64().unwrap())
        .collect();
    assert_eq!(revoked, [laptop_id], "{listed}");
    no_harm(&b, "mcp tokens, after the revocation").await;
    b.screenshot("mcp_tokens").await;
}
