//! The channel conformance suite: what every channel must do, run
//! through the `Channel` trait by a real `g2 serve` (real Docker, the
//! real Claude Code, the offline model) for each platform. A new platform
//! adds a [`Platform`] variant (how a person speaks there, how the
//! assistant's messages are seen there) and runs [`suite`].
//!
//! - store before route: every message is in the log, in the order it
//!   came, before its answer;
//! - ordering: answers come back in the order the questions were asked,
//!   each question answered once;
//! - ownership: a chat's answers go out only through the channel that
//!   owns it;
//! - no echo: the assistant's own messages, seen again on the platform,
//!   wake nothing;
//! - exactly once across a restart: a host killed mid-turn answers after
//!   it starts again, once;
//! - one text limit (`channels.max_text_bytes`): a message over it is not
//!   stored, and its chat is told why (over HTTP, the 400 says it); one
//!   under it is stored and answered.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::bot_api::{BOT_ID, BotApi};
use crate::channel_support::{kill, register, serve_env, stored_texts, wait_in_flight};
use crate::discord_api::DiscordApi;
use crate::graph_api::{self, GraphApi};
use crate::slack_api::SlackApi;
use crate::support::*;

enum Platform {
    Http,
    Telegram(BotApi),
    WhatsApp(GraphApi),
    Discord(DiscordApi),
    Slack(SlackApi),
}

/// The Discord channel under test.
const DC_CHANNEL: u64 = 1_200_000_000_000_000_001;

/// The Slack channel under test.
const SL_CHANNEL: &str = "C0CONF1";

/// The WhatsApp group under test.
const WA_GROUP: &str = "GCONF1";

/// The chat of the group under test on the platform.
const TG_CHAT: i64 = -100_400;

impl Platform {
    fn register(&self, home: &TestHome) {
        let jid = match self {
            Platform::Http => None,
            Platform::Telegram(_) => Some(format!("tg:{TG_CHAT}")),
            Platform::WhatsApp(_) => Some(format!("wa:g:{WA_GROUP}")),
            Platform::Discord(_) => Some(format!("dc:{DC_CHANNEL}")),
            Platform::Slack(_) => Some(format!("sl:{}:{SL_CHANNEL}", crate::slack_api::TEAM)),
        };
        match jid {
            Some(jid) => register(home, "one", &jid, "One"),
            None => {
                home.ok(&["groups", "add", "one", "--name", "One"]);
            }
        }
        // Another group on the HTTP channel, for ownership.
        home.ok(&["groups", "add", "web", "--name", "Web"]);
    }

    fn serve(&self, home: &TestHome) -> Serve {
        self.serve_with(home, &[])
    }

    /// `g2 serve` with the platform on and `more` settings.
    fn serve_with(&self, home: &TestHome, more: &[(&'static str, &str)]) -> Serve {
        match self {
            Platform::Http => serve(home, more),
            Platform::Telegram(api) => serve_env(home, &crate::telegram::env(api), more),
            Platform::WhatsApp(api) => serve_env(home, &crate::whatsapp::env(api), more),
            Platform::Discord(api) => serve_env(home, &crate::discord::env(api), more),
            // Events wait in the local Slack until the socket opens.
            Platform::Slack(api) => serve_env(home, &crate::slack::env(api), more),
        }
    }

    /// A person addresses the assistant in the group's chat.
    async fn say(&self, s: &Serve, who: &str, text: &str) {
        match self {
            Platform::Http => {
                post(&s.url, "one", who, &format!("@G2\n{text}")).await;
            }
            Platform::Telegram(api) => {
                api.message(
                    TG_CHAT,
                    9000 + who.len() as i64,
                    who,
                    &format!("@g2bot\n{text}"),
                    json!({}),
                );
            }
            Platform::Discord(api) => {
                api.wait_connected(60).await;
                api.say(DC_CHANNEL, 9000 + who.len() as u64, who, text, true);
            }
            Platform::WhatsApp(_) => {
                let m = graph_api::text(
                    &graph_api::wamid(),
                    &format!("1555000{:04}", who.len()),
                    who,
                    &format!("@{}\n{text}", graph_api::NUMBER),
                    Some(WA_GROUP),
                );
                graph_api::deliver(&s.url, &graph_api::notification(json!([m]), json!([]))).await;
            }
            Platform::Slack(api) => {
                api.mention(SL_CHANNEL, &format!("U0{}", who.to_uppercase()), text);
            }
        }
    }

    /// The platform shows the assistant's own message again.
    async fn echo(&self, s: &Serve, text: &str) {
        match self {
            // The log's own messages are what its readers see; the router
            // never takes the assistant's.
            Platform::Http => {
                let _ = s;
                let _ = text;
            }
            Platform::Telegram(api) => {
                api.push(
                    "message",
                    TG_CHAT,
                    json!({ "id": BOT_ID, "is_bot": true, "first_name": "G2", "username": "g2bot" }),
                    text,
                    json!({}),
                );
            }
            // The number's own message, as a notification would show it.
            Platform::WhatsApp(_) => {
                let m = graph_api::text(
                    &graph_api::wamid(),
                    graph_api::NUMBER,
                    "G2",
                    text,
                    Some(WA_GROUP),
                );
                graph_api::deliver(&s.url, &graph_api::notification(json!([m]), json!([]))).await;
            }
            Platform::Discord(api) => api.bot_says(DC_CHANNEL, text),
            Platform::Slack(api) => api.echo(SL_CHANNEL, text),
        }
    }

    /// What people in the group's chat were sent, in order.
    async fn replies(&self, s: &Serve) -> Vec<String> {
        match self {
            Platform::Http => bot_messages(&s.url, "one")
                .await
                .iter()
                .map(|m| m["text"].as_str().unwrap_or_default().to_string())
                .collect(),
            Platform::Telegram(api) => api.sent_to(TG_CHAT).into_iter().map(|m| m.text).collect(),
            Platform::WhatsApp(api) => api.sent_to(WA_GROUP).into_iter().map(|m| m.text).collect(),
            Platform::Discord(api) => api
                .sent_to(DC_CHANNEL)
                .into_iter()
                .map(|m| m.text)
                .collect(),
            Platform::Slack(api) => api
                .sent_to(SL_CHANNEL)
                .into_iter()
                .map(|m| m.text)
                .collect(),
        }
    }

    /// Everything any platform chat was sent (ownership).
    fn platform_sent(&self) -> Vec<String> {
        match self {
            Platform::Http => Vec::new(),
            Platform::Telegram(api) => api.sent().into_iter().map(|m| m.text).collect(),
            Platform::WhatsApp(api) => api.sent().into_iter().map(|m| m.text).collect(),
            Platform::Discord(api) => api.sent().into_iter().map(|m| m.text).collect(),
            Platform::Slack(api) => api.sent().into_iter().map(|m| m.text).collect(),
        }
    }

    async fn wait_for(&self, s: &Serve, what: &str, secs: u64) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let r = self.replies(s).await;
            if r.iter().any(|t| t.contains(what)) {
                return r;
            }
            assert!(Instant::now() < deadline, "no reply with {what:?}: {r:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

async fn suite(p: Platform) {
    if !image_ready() {
        return;
    }
    let home = TestHome::new();
    p.register(&home);
    let mut s = p.serve(&home);

    // Store before route, and ordering.
    for i in 1..=3 {
        p.say(&s, "ann", &format!("question-{i}")).await;
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    p.wait_for(&s, "question-3", 180).await;
    let replies = p.replies(&s).await;
    let all = replies.join("\n");
    let at: Vec<usize> = (1..=3)
        .map(|i| {
            let q = format!("question-{i}");
            assert_eq!(all.matches(&q).count(), 1, "{q} answered once: {replies:?}");
            all.find(&q).unwrap()
        })
        .collect();
    assert!(
        at[0] < at[1] && at[1] < at[2],
        "answered in order: {replies:?}"
    );
    let log = get_json(&format!("{}/api/groups/one/messages?limit=100", s.url)).await;
    let log = log.as_array().unwrap();
    let asked: Vec<&str> = log
        .iter()
        .filter(|m| m["from_bot"] == false)
        .map(|m| m["text"].as_str().unwrap())
        .collect();
    assert_eq!(asked.len(), 3, "{log:?}");
    assert!(
        asked
            .iter()
            .enumerate()
            .all(|(i, t)| t.ends_with(&format!("question-{}", i + 1)))
    );
    let first_answer = log.iter().position(|m| m["from_bot"] == true).unwrap();
    assert!(first_answer > 0, "stored before it was answered");

    // Ownership: the HTTP group's answer stays in the log.
    post(&s.url, "web", "bob", "@G2 web-question").await;
    let deadline = Instant::now() + Duration::from_secs(120);
    while bot_messages(&s.url, "web").await.is_empty() {
        assert!(Instant::now() < deadline, "web never answered");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!p.platform_sent().iter().any(|t| t.contains("web-question")));

    // No echo.
    let before = p.replies(&s).await.len();
    p.echo(&s, "@g2bot question-echo").await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(
        p.replies(&s).await.len(),
        before,
        "nothing answered the echo"
    );

    // Exactly once across a restart: killed mid-turn.
    p.say(&s, "ann", "g2:bash sleep 5; echo slow-answer").await;
    wait_in_flight(&home, "one", 120).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    kill(&mut s);
    let s = p.serve(&home);
    p.wait_for(&s, "slow-answer", 180).await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let replies = p.replies(&s).await;
    assert_eq!(
        replies.iter().filter(|t| t.contains("slow-answer")).count(),
        1,
        "{replies:?}"
    );
    assert_eq!(
        replies.iter().filter(|t| t.contains("question-")).count(),
        before,
        "nothing answered twice: {replies:?}"
    );
}

/// The text limit, set low (1 KiB) so every platform can carry a text
/// over it: refused whole on every channel, the platform's chat told, the
/// HTTP client answered 400 with the same number.
async fn text_limit(p: Platform) {
    if !image_ready() {
        return;
    }
    let home = TestHome::new();
    p.register(&home);
    let s = p.serve_with(&home, &[("G2_CHANNELS__MAX_TEXT_BYTES", "1024")]);
    // Within every platform's own limit (Discord's 2,000 characters).
    let long = format!("long-marker {}", "x".repeat(1500));

    if let Platform::Http = p {
        let r = http_client()
            .post(format!("{}/api/groups/one/messages", s.url))
            .json(&json!({ "sender": "ann", "text": format!("@G2 {long}") }))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400);
        let body: serde_json::Value = r.json().await.unwrap();
        let why = body["error"]["message"].as_str().unwrap_or_default();
        assert!(
            why.contains("over the limit of 1024 bytes (channels.max_text_bytes)"),
            "{body}"
        );
    } else {
        p.say(&s, "ann", &long).await;
        let told = p.wait_for(&s, "was not passed on", 60).await;
        let notice = told.iter().find(|t| t.contains("not passed on")).unwrap();
        assert!(
            notice.contains("g2 takes messages up to 1 KiB") && notice.contains("it is 2 KiB"),
            "{notice}"
        );
        assert!(!notice.contains("long-marker"), "the text is not repeated");
    }

    // Under the limit: stored and answered as before.
    p.say(&s, "ann", "short-question").await;
    p.wait_for(&s, "short-question", 180).await;
    let texts = stored_texts(&s.url, "one").await;
    assert!(
        !texts.iter().any(|t| t.contains("long-marker")),
        "nothing of the long text stored, not even cut: {texts:?}"
    );
    let notices = texts.iter().filter(|t| t.contains("not passed on")).count();
    let expected = usize::from(!matches!(p, Platform::Http));
    assert_eq!(notices, expected, "{texts:?}");
    let log = std::fs::read_to_string(home.path().join("serve.log")).unwrap();
    assert!(!log.contains("long-marker"), "the log holds no text");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_http_channel_refuses_a_text_over_the_limit_with_a_400() {
    text_limit(Platform::Http).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telegram_answers_a_text_over_the_limit_in_its_chat() {
    text_limit(Platform::Telegram(BotApi::start().await)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whatsapp_answers_a_text_over_the_limit_in_its_chat() {
    text_limit(Platform::WhatsApp(GraphApi::start().await)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discord_answers_a_text_over_the_limit_in_its_chat() {
    text_limit(Platform::Discord(DiscordApi::start().await)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slack_answers_a_text_over_the_limit_in_its_chat() {
    text_limit(Platform::Slack(SlackApi::start().await)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_http_channel_conforms() {
    suite(Platform::Http).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_telegram_channel_conforms() {
    suite(Platform::Telegram(BotApi::start().await)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_whatsapp_channel_conforms() {
    suite(Platform::WhatsApp(GraphApi::start().await)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_discord_channel_conforms() {
    suite(Platform::Discord(DiscordApi::start().await)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_slack_channel_conforms() {
    suite(Platform::Slack(SlackApi::start().await)).await;
}
