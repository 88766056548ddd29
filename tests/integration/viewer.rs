//! The web viewer in a real headless Chromium, driven through WebDriver
//! (Debian's `chromium` and `chromium-driver`, from `scripts/setup.sh`),
//! against `g2 serve` with real Docker and Claude Code on the offline
//! model. Each test saves a screenshot of its last page under
//! `$CARGO_TARGET_TMPDIR/viewer/`.

use std::process::{Command, Stdio};

use fantoccini::Locator;
use serde_json::{Value, json};

use crate::browser::Browser;
use crate::support::*;

mod mcp_tokens;

pub fn browser_present() -> bool {
    let runs = |exe: &str| {
        Command::new(exe)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    require(
        "chromium and chromedriver",
        runs("chromium") && runs("chromedriver"),
    )
}

/// `g2 serve` with `env` on a fresh home, where each (sender, text) of
/// `asked` was asked in `main` and answered; `None` without the agent
/// image or the browser (in CI that fails).
async fn served(env: &[(&str, &str)], asked: &[(&str, &str)]) -> Option<(TestHome, Serve)> {
    if !image_ready() || !browser_present() {
        return None;
    }
    let home = TestHome::new();
    let s = serve(&home, env);
    for (sender, text) in asked {
        ask(&s.url, "main", sender, text).await;
    }
    Some((home, s))
}

/// Opens the page at `path` of the host at `base`.
async fn open(b: &Browser, base: &str, path: &str) {
    b.client.goto(&format!("{base}{path}")).await.unwrap();
}

/// Clicks the element `css` selects.
async fn click(b: &Browser, css: &str) {
    let e = b.client.find(Locator::Css(css)).await.unwrap();
    e.click().await.unwrap();
}

/// Types `text` into the field `css` selects.
async fn type_into(b: &Browser, css: &str, text: &str) {
    let e = b.client.find(Locator::Css(css)).await.unwrap();
    e.send_keys(text).await.unwrap();
}

/// The chat page has its stream open.
const LIVE: &str = "document.getElementById('live').textContent === 'live'";
/// An archive is shown.
const ARCHIVE: &str = "document.querySelector('article.archive') !== null";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_sent_from_the_chat_page_is_answered_without_a_reload() {
    let Some((_home, s)) = served(&[], &[]).await else {
        return;
    };
    let b = Browser::start().await;
    open(&b, &s.url, "/").await;
    assert_eq!(b.client.title().await.unwrap(), "Groups · g2");
    click(&b, "a[href='/groups/main']").await;
    b.until("the chat page is live", LIVE).await;
    // Marks this page load: a reload would lose it.
    b.eval("window.g2Marker = 42").await;
    type_into(&b, "#send textarea[name=text]", "hello").await;
    click(&b, "#send button[type=submit]").await;
    b.until(
        "the quoted reply",
        "Array.from(document.querySelectorAll('.message.bot .text')).some(e => e.textContent.includes('hello'))",
    )
    .await;
    assert_eq!(b.eval("window.g2Marker").await, json!(42), "no reload");
    // The sent message is there once, from the page's sender.
    let mine = b
        .eval("Array.from(document.querySelectorAll('.message:not(.bot) .text')).filter(e => e.textContent === 'hello').length")
        .await;
    assert_eq!(mine, json!(1));
    b.screenshot("chat_reply").await;
}

const HOSTILE: &str =
    "<img src=x onerror=\"document.title='pwned'\"><script>document.title='pwned'</script>";

/// No script of a group's ran, no image was shown, nothing was fetched
/// for the markup's `x`.
async fn no_harm(b: &Browser, page: &str) {
    let title = b.client.title().await.unwrap();
    assert!(!title.contains("pwned"), "{page}: {title}");
    let imgs = b.eval("document.querySelectorAll('img').length").await;
    assert_eq!(imgs, json!(0), "{page}");
    let scripts = b
        .eval("Array.from(document.scripts).filter(s => !s.src.endsWith('/assets/app.js')).length")
        .await;
    assert_eq!(scripts, json!(0), "{page}");
    let fetched = b
        .eval("performance.getEntriesByType('resource').filter(r => /\\/x$/.test(r.name)).length")
        .await;
    assert_eq!(fetched, json!(0), "{page}: a request left for x");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_markup_in_chat_and_archives_is_shown_as_text() {
    let Some((_home, s)) = served(&[], &[("Mallory", HOSTILE)]).await else {
        return;
    };
    // The conversation is archived with the markup in it.
    let r = http_client()
        .post(format!("{}/api/groups/main/session/clear", s.url))
        .json(&json!({ "name": "Hostile" }))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());

    let b = Browser::start().await;
    open(&b, &s.url, "/groups/main").await;
    b.until("the chat page is live", LIVE).await;
    b.until(
        "the markup shown as text",
        "Array.from(document.querySelectorAll('.message .text')).some(e => e.textContent.includes('<script>document.title'))",
    )
    .await;
    no_harm(&b, "chat").await;

    open(&b, &s.url, "/groups/main/archives").await;
    let link = b.client.find(Locator::LinkText("Hostile")).await.unwrap();
    link.click().await.unwrap();
    b.until("the archive page", ARCHIVE).await;
    let heading = b
        .eval("document.querySelector('article h1').textContent")
        .await;
    assert_eq!(heading, json!("Hostile"));
    let shown = b
        .eval("document.querySelector('article').textContent.includes('<script>document.title')")
        .await;
    assert_eq!(shown, json!(true));
    no_harm(&b, "archive").await;
    // The policy that would stop script that slipped through.
    let csp = http_client()
        .get(format!("{}/groups/main/archives", s.url))
        .send()
        .await
        .unwrap()
        .headers()
        .get("content-security-policy")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    assert!(
        csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"),
        "{csp}"
    );
    b.screenshot("hostile_archive").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_cleared_from_its_page_reads_as_a_document_and_is_found() {
    let Some((_home, s)) = served(
        &[],
        &[("Ann", "the lighthouse keeper feeds the gulls at dawn")],
    )
    .await
    else {
        return;
    };

    let b = Browser::start().await;
    open(&b, &s.url, "/groups/main/sessions").await;
    type_into(&b, "#clear input[name=name]", "Lighthouse").await;
    // The page asks before it clears.
    b.confirm_click(
        "#clear button[type=submit]",
        "the bookmark with its archive",
        "Array.from(document.querySelectorAll('.list li')).some(li => li.textContent.includes('Lighthouse') && li.querySelector('a[href^=\"/archives/\"]'))",
    )
    .await;
    click(&b, ".list li a[href^='/archives/']").await;
    b.until("the archive page", ARCHIVE).await;
    // Rendered as a document: a heading and paragraphs, the names in bold.
    assert_eq!(
        b.eval("document.querySelector('article h1').textContent")
            .await,
        json!("Lighthouse")
    );
    let paragraphs = b
        .eval("document.querySelectorAll('article p').length")
        .await;
    assert!(paragraphs.as_u64() >= Some(2), "{paragraphs}");
    assert_eq!(
        b.eval("Array.from(document.querySelectorAll('article strong')).some(e => e.textContent === 'Ann')")
            .await,
        json!(true)
    );
    // Found from the search page, in people's words.
    open(&b, &s.url, "/search").await;
    type_into(&b, "input[name=q]", "who feeds the gulls?").await;
    click(&b, "form[role=search] button").await;
    b.until(
        "the archive among the hits",
        "document.getElementById('archive-hits') !== null",
    )
    .await;
    assert_eq!(
        b.eval("document.querySelector('#archive-hits li a').textContent")
            .await,
        json!("Lighthouse")
    );
    assert_eq!(
        b.eval("document.querySelector('#archive-hits mark') !== null")
            .await,
        json!(true)
    );
    // Snippets read as text: the archive's markdown marks are not shown.
    let snippets = b
        .eval(
            "Array.from(document.querySelectorAll('.snippet')).map(e => e.textContent).join(' | ')",
        )
        .await;
    assert!(
        snippets
            .as_str()
            .is_some_and(|t| !t.is_empty() && !t.contains("**")),
        "{snippets}"
    );
    b.screenshot("search_after_clear").await;
}

/// Types `token` into the sign-in page's form and sends it.
async fn sign_in(b: &Browser, token: &str) {
    type_into(b, "input[name=token]", token).await;
    click(b, "form button[type=submit]").await;
}

/// Signs in with `token` and waits for the groups page.
async fn signed_in(b: &Browser, token: &str) {
    sign_in(b, token).await;
    b.until("the groups page", "document.title === 'Groups · g2'")
        .await;
}

/// The page's CSRF token, as its script reads it.
async fn page_csrf(b: &Browser) -> String {
    b.eval("document.querySelector('meta[name=g2-csrf]').content")
        .await
        .as_str()
        .unwrap()
        .to_string()
}

/// A message posted from the page with `csrf` in its header: the status.
async fn post_from_page(b: &Browser, csrf: &str) -> Value {
    page_post(b, &csrf_headers(&format!("'{csrf}'")), "session check").await
}

/// A message `text` posted from the page's script with `headers` (a JS
/// object): the status, or the error.
async fn page_post(b: &Browser, headers: &str, text: &str) -> Value {
    let script = format!(
        "const done = arguments[0]; fetch('/api/groups/main/messages', {{method: 'POST', headers: {headers}, \
         body: JSON.stringify({{sender: 'Web', text: '{text}'}})}}).then(r => done(r.status), e => done(String(e)));"
    );
    b.client.execute_async(&script, vec![]).await.unwrap()
}

/// JSON headers with the CSRF token `csrf` (a JS expression).
fn csrf_headers(csrf: &str) -> String {
    format!("{{'content-type': 'application/json', 'x-g2-csrf': {csrf}}}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_sign_in_is_a_session_with_its_own_csrf_token() {
    let token = "tok-session-0123456789";
    let Some((_home, s)) = served(&[("G2_API__TOKEN", token)], &[]).await else {
        return;
    };
    // Before sign-in no page shows a CSRF token.
    let login = get_text(&format!("{}/login", s.url)).await;
    assert!(
        login.contains("<meta name=\"g2-csrf\" content=\"\">"),
        "{login}"
    );
    let b = Browser::start().await;
    open(&b, &s.url, "/login").await;
    assert_eq!(page_csrf(&b).await, "");
    signed_in(&b, token).await;
    let first = page_csrf(&b).await;
    assert_eq!(first.len(), 64, "{first}");
    assert!(!first.contains(token));
    // The cookie is the session, never the token.
    let cookies = b.client.get_all_cookies().await.unwrap();
    let session = cookies.iter().find(|c| c.name() == "g2_session").unwrap();
    assert!(!session.value().contains(token));
    assert_eq!(session.http_only(), Some(true));
    assert_eq!(post_from_page(&b, &first).await, json!(202));
    // Signing out ends the session: its token opens nothing any more.
    click(&b, "form[action='/logout'] button").await;
    b.until("the sign-in page", "document.title === 'Sign in · g2'")
        .await;
    assert_eq!(post_from_page(&b, &first).await, json!(401));
    // A new sign-in is a new session with a new token; the old one is
    // refused with the new cookie.
    signed_in(&b, token).await;
    let second = page_csrf(&b).await;
    assert_ne!(second, first, "rotated at sign-in");
    assert_eq!(post_from_page(&b, &first).await, json!(401));
    assert_eq!(post_from_page(&b, &second).await, json!(202));
    // Every page of the session carries the same one.
    open(&b, &s.url, "/groups/main/sessions").await;
    assert_eq!(page_csrf(&b).await, second);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_token_the_viewer_asks_once_and_refuses_cross_site_posts() {
    let token = "tok-viewer-0123456789";
    let Some((home, s)) = served(&[("G2_API__TOKEN", token)], &[]).await else {
        return;
    };
    let b = Browser::start().await;
    // Refused without it: the pages send to the sign-in, the API says no.
    open(&b, &s.url, "/groups/main").await;
    assert_eq!(b.client.title().await.unwrap(), "Sign in · g2");
    let r = http_client()
        .get(format!("{}/api/groups", s.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    // A wrong token is refused; the right one is asked for once.
    sign_in(&b, "tok-wrong-0123456789").await;
    b.until(
        "the refusal, in words on the sign-in page",
        "document.querySelector('form[data-login] [role=alert]').textContent.includes('not this host')",
    )
    .await;
    open(&b, &s.url, "/login").await;
    signed_in(&b, token).await;
    open(&b, &s.url, "/groups/main").await;
    assert_eq!(b.client.title().await.unwrap(), "Main · g2");
    // The cookie is out of the page's reach.
    assert_eq!(b.eval("document.cookie").await, json!(""));
    // From the page: a post without the CSRF token is refused, with it taken.
    let bare = "{'content-type': 'application/json'}";
    assert_eq!(page_post(&b, bare, "csrf check").await, json!(401));
    let csrf = csrf_headers("document.querySelector('meta[name=g2-csrf]').content");
    assert_eq!(page_post(&b, &csrf, "csrf check").await, json!(202));
    // A cross-site form post carries no cookie (SameSite=Strict) and no
    // CSRF token: refused.
    let other = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let other_url = format!("http://localhost:{}", other.local_addr().unwrap().port());
    let form = format!(
        "<!doctype html><form id=f method=post enctype=text/plain action=\"{}/api/groups/main/messages\">\
         <input name='{{\"sender\":\"x\",\"text\":\"forged\",\"pad\":\"' value='\"}}'></form>\
         <script>document.getElementById('f').submit()</script>",
        s.url
    );
    tokio::spawn(async move {
        let app = axum::Router::new().route(
            "/",
            axum::routing::get(move || {
                let form = form.clone();
                async move { axum::response::Html(form) }
            }),
        );
        axum::serve(other, app).await.unwrap();
    });
    b.client.goto(&other_url).await.unwrap();
    b.until(
        "the forged post's answer",
        "document.body && document.body.innerText.includes('unauthorized')",
    )
    .await;
    let forged = home
        .store()
        .read_blocking(|c| {
            c.query_row(
                "SELECT count(*) FROM messages WHERE content LIKE '%forged%'",
                (),
                |r| r.get::<i64>(0),
            )
        })
        .unwrap();
    assert_eq!(forged, 0);
    b.screenshot("cross_site_refused").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_memory_page_shows_new_observations_live_and_forgets_them() {
    let Some((_home, s)) = served(&[("G2_MEMORY__PROCESS_INTERVAL_SECS", "1")], &[]).await else {
        return;
    };
    let b = Browser::start().await;
    open(&b, &s.url, "/groups/main/memory").await;
    b.until(
        "the feed is live",
        "document.getElementById('feed-live').textContent === 'live'",
    )
    .await;
    ask(
        &s.url,
        "main",
        "Ann",
        "remember that the boat is moored at pier 7",
    )
    .await;
    // Stored while the page is open: the prompt, then what was learned.
    b.until(
        "the observation in the live feed",
        "Array.from(document.querySelectorAll('#feed li[data-kind=observation]')).some(li => li.textContent.includes('the boat is moored at pier 7'))",
    )
    .await;
    assert_eq!(
        b.eval("document.querySelector('#feed li[data-kind=prompt]') !== null")
            .await,
        json!(true)
    );
    // Filtered by kind.
    b.eval("(() => { const k = document.getElementById('feed-kind'); k.value = 'observation'; k.dispatchEvent(new Event('change')); return true; })()")
        .await;
    assert_eq!(
        b.eval("Array.from(document.querySelectorAll('#feed li[data-kind=prompt]')).every(li => li.hidden)").await,
        json!(true)
    );
    // And by session: another session's records hide.
    b.eval("(() => { const s = document.getElementById('feed-session'); s.value = 'not-this-one'; s.dispatchEvent(new Event('input')); return true; })()")
        .await;
    assert_eq!(
        b.eval(
            "Array.from(document.querySelectorAll('#feed li[data-kind]')).every(li => li.hidden)"
        )
        .await,
        json!(true)
    );
    // After a reload: the block the next session starts with, as the agent
    // sees it, and the observation with a forget button.
    b.client.refresh().await.unwrap();
    let next = b
        .eval("document.getElementById('next-context').textContent")
        .await;
    let next = next.as_str().unwrap_or_default().to_string();
    assert!(
        next.starts_with("<g2-memory>") && next.contains("pier 7"),
        "{next}"
    );
    b.confirm_click(
        "#observations form[data-method=DELETE] button",
        "the observation gone",
        "document.getElementById('observations') === null",
    )
    .await;
    let list = get_json(&format!("{}/api/groups/main/memory/observations", s.url)).await;
    assert_eq!(list, Value::Array(vec![]), "{list}");
    b.screenshot("memory_forgotten").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_tasks_and_usage_pages_show_and_act() {
    let Some((home, s)) = served(
        &[],
        &[("Ann", "g2:schedule interval 3600000 water the plants")],
    )
    .await
    else {
        return;
    };

    let b = Browser::start().await;
    // Register a group from the page.
    open(&b, &s.url, "/").await;
    type_into(&b, "#register input[name=folder]", "family").await;
    type_into(&b, "#register input[name=name]", "Family").await;
    click(&b, "#register button").await;
    b.until(
        "the new group",
        "document.querySelector(\"a[href='/groups/family']\") !== null",
    )
    .await;
    // Main's card: its session and today's tokens.
    let card = b
        .eval("Array.from(document.querySelectorAll('#groups li')).find(li => li.querySelector(\"a[href='/groups/main']\")).textContent")
        .await;
    let card = card.as_str().unwrap_or_default().to_string();
    assert!(
        card.contains("session") && card.contains("tokens today"),
        "{card}"
    );
    assert!(!card.contains(" 0 tokens today"), "{card}");

    // The task, paused from its page.
    open(&b, &s.url, "/tasks").await;
    let listed = b.eval("document.getElementById('tasks').textContent").await;
    assert!(
        listed
            .as_str()
            .unwrap_or_default()
            .contains("water the plants"),
        "{listed}"
    );
    b.confirm_click(
        "#tasks form[data-api$='/pause'] button",
        "the task paused",
        "document.getElementById('tasks').textContent.includes('paused')",
    )
    .await;
    let tasks = get_json(&format!("{}/api/groups/main/tasks", s.url)).await;
    assert_eq!(tasks[0]["status"], "paused", "{tasks}");

    // Usage: the offline model's requests are marked as such, with no
    // token figures; a real provider's are drawn by the server and listed.
    open(&b, &s.url, "/usage").await;
    assert_eq!(
        b.eval("document.querySelectorAll('svg.chart rect').length")
            .await,
        json!(0)
    );
    let table = b
        .eval("document.querySelector('table.usage tbody').textContent")
        .await;
    assert!(
        table.as_str().is_some_and(|t| t.contains("main")
            && t.contains("offline model")
            && !t.contains("claude")),
        "{table}"
    );
    assert_eq!(
        b.eval("document.getElementById('offline-note') !== null")
            .await,
        json!(true)
    );
    crate::steps::spend(&home, "family", "claude-test");
    open(&b, &s.url, "/usage").await;
    assert_eq!(
        b.eval("document.querySelectorAll('svg.chart rect').length > 0")
            .await,
        json!(true)
    );
    assert_eq!(
        b.eval("document.querySelector('table.usage tbody').textContent.includes('claude-test')")
            .await,
        json!(true)
    );
    b.screenshot("usage").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_and_the_memory_page_find_by_meaning() {
    let model = project_root().join(g2_host::memory::embed::DEFAULT_MODEL);
    if !require("the embedding model (tools/models)", model.is_dir()) {
        return;
    }
    let Some((home, s)) = served(&[], &[]).await else {
        return;
    };
    let store = home.store();
    crate::meaning::archive(
        &store,
        "main",
        0,
        "2026-03-01",
        &[
            ("the boat is moored at pier 7", "noted, pier 7"),
            ("I baked sourdough bread", "how did it turn out?"),
        ],
    );
    // The running host's jobs embed it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while crate::meaning::count(&store, "SELECT count(*) FROM embedding_jobs") > 0 {
        assert!(std::time::Instant::now() < deadline, "not embedded in 60 s");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let b = Browser::start().await;
    let q = "where%20is%20the%20yacht%20kept%3F";
    open(&b, &s.url, &format!("/search?q={q}")).await;
    b.until(
        "the memory hits",
        "document.getElementById('memory-hits') !== null",
    )
    .await;
    let first = b
        .eval("document.querySelector('#memory-hits li').textContent")
        .await;
    assert!(
        first
            .as_str()
            .is_some_and(|t| t.contains("pier 7") && t.contains("by meaning")),
        "{first}"
    );
    // The relevance cut: what memory would not hand the agent is not listed.
    let listed = b
        .eval("document.getElementById('memory-hits').textContent")
        .await;
    assert!(
        listed.as_str().is_some_and(|t| !t.contains("sourdough")),
        "{listed}"
    );
    b.screenshot("search_by_meaning").await;
    open(&b, &s.url, &format!("/groups/main/memory?q={q}")).await;
    b.until(
        "the memory page's answer",
        "document.getElementById('prompt-context') !== null",
    )
    .await;
    let first = b
        .eval("document.querySelector('#memory-hits li').textContent")
        .await;
    assert!(
        first.as_str().is_some_and(|t| t.contains("pier 7")),
        "{first}"
    );
    let block = b
        .eval("document.getElementById('prompt-context').textContent")
        .await;
    assert!(
        block.as_str().is_some_and(|t| t.starts_with("<g2-memory>")
            && t.contains("the user: \"the boat is moored at pier 7\"")
            && !t.contains("sourdough")),
        "{block}"
    );
    b.screenshot("memory_page_by_meaning").await;
}

/// A photo and a voice note in the chat: the picture is shown (loaded from
/// g2's own origin under the page's policy), the sound has a player beside
/// its transcript, for a message on the page and one that arrives live;
/// the file is served with the type its bytes show and `nosniff`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn photos_are_shown_and_voice_notes_played_in_the_chat() {
    use crate::media::{PNG, SAID, post_form, voice_note};
    let Some(voice) = voice_note(SAID) else {
        return;
    };
    let Some((_home, s)) = served(&[], &[]).await else {
        return;
    };
    let (st, first) = post_form(
        &s.url,
        "main",
        &[("sender", "ann"), ("text", "look")],
        &[("cat.png", "image/png", PNG)],
    )
    .await;
    assert_eq!(st, 202, "{first}");
    let b = Browser::start().await;
    open(&b, &s.url, "/groups/main").await;
    b.until("the chat page is live", LIVE).await;
    b.until(
        "the photo is shown",
        "Array.from(document.querySelectorAll('.message .file img')).some(i => i.complete && i.naturalWidth === 1)",
    )
    .await;
    // One that arrives while the page is open is built the same way.
    let (st, second) = post_form(
        &s.url,
        "main",
        &[("sender", "ann")],
        &[("note.ogg", "audio/ogg", &voice)],
    )
    .await;
    assert_eq!(st, 202, "{second}");
    b.until(
        "the voice note has a player and its transcript",
        "Array.from(document.querySelectorAll('.message')).some(li => li.querySelector('.file audio[controls]') && /boat/i.test(li.querySelector('.text').textContent))",
    )
    .await;
    let path = first["attachments"][0]["path"]
        .as_str()
        .unwrap()
        .trim_start_matches("media/")
        .to_string();
    let headers = b
        .eval(&format!(
            "(async () => {{ const r = await fetch('/groups/main/media/{path}'); return [r.status, r.headers.get('content-type'), r.headers.get('x-content-type-options')]; }})()"
        ))
        .await;
    assert_eq!(headers, json!([200, "image/png", "nosniff"]));
    b.screenshot("chat_media").await;
}
