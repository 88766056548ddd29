//! Channel latency, each platform against the local server of the
//! integration tests, with warm containers (real `g2 serve`, real Docker,
//! real Claude Code in the agent image, the offline model):
//!
//! - Telegram: an update handed to g2 by `getUpdates` → the reply's
//!   `sendMessage` arriving at the Bot API;
//! - WhatsApp: a signed webhook POST sent to g2 → the reply's `messages`
//!   call arriving at the Graph API;
//! - Discord: a MESSAGE_CREATE dispatched on the gateway → the reply's
//!   create-message call arriving at the REST API;
//! - Slack: an `events_api` envelope sent on g2's Socket Mode connection →
//!   the reply's `chat.postMessage` arriving at the Web API;
//! - HTTP, the reference: `POST …/messages` → the reply on the SSE stream.
//!
//! The five are interleaved in one run. The model's own time (the
//! gateway's `duration_ms` of the group's agent requests in each message's
//! window) is subtracted from each.
//!
//! `cargo bench -p g2-host --bench channels` (`G2_BENCH_MESSAGES`, default
//! 200 per channel). Needs the agent image (`g2 image build`).

// Tests and benches fail loudly: an unwrap is the assertion.
#![allow(clippy::unwrap_used)]

mod common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use futures_util::StreamExt;
use serde_json::json;

use common::bot_api::{BotApi, TOKEN};
use common::discord_api::{self, DiscordApi};
use common::graph_api::{self, GraphApi};
use common::slack_api::{self, SlackApi};
use common::{Samples, Serve, command, g2_binary, init_home};

/// A private chat with the bot: every message is for it.
const CHAT: i64 = 4242;
/// A WhatsApp chat with one person: every message is for the assistant.
const WA_ID: &str = "16315551181";
/// A Discord channel; each message mentions the bot.
const DC_CHANNEL: u64 = 1_300_000_000_000_000_001;
/// A direct message with the Slack bot: every message is for it.
const SL_DM: &str = "D0BENCH";

/// One measured message: its window on the wall clock and its duration.
struct Window {
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    total: Duration,
}

fn main() {
    let n: usize = common::env_or("G2_BENCH_MESSAGES", 200);
    let home = tempfile::tempdir().unwrap();
    init_home(home.path());
    for (folder, jid) in [
        ("tg", format!("tg:{CHAT}")),
        ("wa", format!("wa:{WA_ID}")),
        ("dc", format!("dc:{DC_CHANNEL}")),
        ("sl", format!("sl:{}:{SL_DM}", slack_api::TEAM)),
    ] {
        let ok = command(g2_binary())
            .arg("--home")
            .arg(home.path())
            .args(["groups", "add", folder, "--jid", &jid, "--name", folder])
            .stdout(Stdio::null())
            .status()
            .unwrap()
            .success();
        assert!(ok, "g2 groups add failed");
    }
    let rt = common::runtime();
    let api = rt.block_on(BotApi::start());
    let graph = rt.block_on(GraphApi::start());
    let discord = rt.block_on(DiscordApi::start());
    let slack = rt.block_on(SlackApi::start());
    let serve = Serve::start(
        home.path(),
        &[
            ("G2_CHANNELS__TELEGRAM__ENABLED", "true"),
            ("G2_CHANNELS__TELEGRAM__API_URL", &api.url),
            ("TELEGRAM_BOT_TOKEN", TOKEN),
            ("G2_CHANNELS__WHATSAPP__ENABLED", "true"),
            ("G2_CHANNELS__WHATSAPP__GRAPH_URL", &graph.url),
            ("G2_CHANNELS__WHATSAPP__API_VERSION", graph_api::VERSION),
            (
                "G2_CHANNELS__WHATSAPP__PHONE_NUMBER_ID",
                graph_api::PHONE_NUMBER_ID,
            ),
            ("WHATSAPP_ACCESS_TOKEN", graph_api::ACCESS_TOKEN),
            ("WHATSAPP_APP_SECRET", graph_api::APP_SECRET),
            ("WHATSAPP_VERIFY_TOKEN", graph_api::VERIFY_TOKEN),
            ("G2_CHANNELS__DISCORD__ENABLED", "true"),
            ("G2_CHANNELS__DISCORD__API_URL", &discord.api_url),
            ("G2_CHANNELS__DISCORD__GATEWAY_URL", &discord.gateway_url),
            ("DISCORD_BOT_TOKEN", discord_api::TOKEN),
            ("G2_CHANNELS__SLACK__ENABLED", "true"),
            ("G2_CHANNELS__SLACK__API_URL", &slack.url),
            ("SLACK_BOT_TOKEN", slack_api::BOT_TOKEN),
            ("SLACK_APP_TOKEN", slack_api::APP_TOKEN),
        ],
    );
    let base = serve.url.clone();
    let (tg, wa, dc, sl, http) = rt.block_on(async move {
        let (client, resp) = common::main_stream(&base).await;
        let (tx, mut replies) = tokio::sync::mpsc::unbounded_channel::<(Instant, String)>();
        tokio::spawn(async move {
            let mut messages = std::pin::pin!(g2_host::chat::message_stream(resp));
            while let Some(m) = messages.next().await {
                if m.from_bot {
                    let _ = tx.send((Instant::now(), m.text));
                }
            }
        });
        let post = |text: String| {
            let (client, base) = (client.clone(), base.clone());
            async move { common::post_main(&client, &base, &text).await }
        };
        // Both containers started, then warm.
        post("warm up".into()).await;
        api.message(CHAT, CHAT, "Bench", "warm up", json!({}));
        tokio::time::timeout(Duration::from_secs(180), replies.recv())
            .await
            .expect("no HTTP reply")
            .unwrap();
        api.wait_sent(CHAT, 1, 180).await;
        let say = |text: &str| {
            let m = graph_api::text(&graph_api::wamid(), WA_ID, "Bench", text, None);
            graph_api::notification(serde_json::json!([m]), serde_json::json!([]))
        };
        graph_api::deliver(&base, &say("warm up")).await;
        graph.wait_sent(WA_ID, 1, 180).await;
        discord.wait_connected(60).await;
        discord.say(DC_CHANNEL, 5, "bench", "warm up", true);
        discord.wait_sent(DC_CHANNEL, 1, 180).await;
        slack.wait_connected(1, 60).await;
        slack.say(SL_DM, "U0BENCH", "warm up", None);
        slack.wait_sent(SL_DM, 1, 180).await;
        let (mut tg, mut wa, mut dc, mut sl, mut http) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for i in 0..n {
            // Telegram: handed out by getUpdates -> sendMessage taken.
            let text = format!("tg ping {i}");
            let before = api.sent_to(CHAT).len();
            api.message(CHAT, CHAT, "Bench", &text, json!({}));
            let update = api.last_update_id();
            let sent = api.wait_sent(CHAT, before + 1, 60).await;
            let reply = sent.last().unwrap();
            assert!(reply.text.contains(&text), "{}", reply.text);
            let fetched = api.fetched_at(update).expect("fetched");
            let total = reply.at - fetched;
            let to = Utc::now() - chrono::Duration::from_std(Instant::now() - reply.at).unwrap();
            tg.push(Window {
                from: to - chrono::Duration::from_std(total).unwrap(),
                to,
                total,
            });
            // WhatsApp: the webhook POST sent -> the reply's call taken.
            let text = format!("wa ping {i}");
            let before = graph.sent_to(WA_ID).len();
            let note = say(&text);
            let from = Utc::now();
            let t0 = Instant::now();
            graph_api::deliver(&base, &note).await;
            let sent = graph.wait_sent(WA_ID, before + 1, 60).await;
            let reply = sent.last().unwrap();
            assert!(reply.text.contains(&text), "{}", reply.text);
            let total = reply.at - t0;
            wa.push(Window {
                from,
                to: from + chrono::Duration::from_std(total).unwrap(),
                total,
            });
            // Discord: dispatched on the gateway -> create message taken.
            let text = format!("dc ping {i}");
            let before = discord.sent_to(DC_CHANNEL).len();
            let from = Utc::now();
            let t0 = Instant::now();
            discord.say(DC_CHANNEL, 5, "bench", &text, true);
            let sent = discord.wait_sent(DC_CHANNEL, before + 1, 60).await;
            let reply = sent.last().unwrap();
            assert!(reply.text.contains(&text), "{}", reply.text);
            let total = reply.at - t0;
            dc.push(Window {
                from,
                to: from + chrono::Duration::from_std(total).unwrap(),
                total,
            });
            // Slack: the envelope sent on the socket -> chat.postMessage taken.
            let text = format!("sl ping {i}");
            let before = slack.sent_to(SL_DM).len();
            slack.say(SL_DM, "U0BENCH", &text, None);
            let envelope = slack.envelopes().last().unwrap().sent[0];
            let sent = slack.wait_sent(SL_DM, before + 1, 60).await;
            let reply = sent.last().unwrap();
            assert!(reply.text.contains(&text), "{}", reply.text);
            let total = reply.at - envelope;
            let to = Utc::now() - chrono::Duration::from_std(Instant::now() - reply.at).unwrap();
            sl.push(Window {
                from: to - chrono::Duration::from_std(total).unwrap(),
                to,
                total,
            });
            // HTTP: accepted -> on the stream.
            let text = format!("http ping {i}");
            let from = Utc::now();
            let t0 = Instant::now();
            post(text.clone()).await;
            let (at, reply) = tokio::time::timeout(Duration::from_secs(60), replies.recv())
                .await
                .expect("no reply")
                .unwrap();
            assert!(reply.contains(&text), "{reply}");
            http.push(Window {
                from,
                to: from + chrono::Duration::from_std(at - t0).unwrap(),
                total: at - t0,
            });
        }
        (tg, wa, dc, sl, http)
    });
    drop(serve);
    let conn = rusqlite::Connection::open(home.path().join("data/g2.db")).unwrap();
    let usage = |caller: &str| -> Vec<(DateTime<Utc>, i64)> {
        let mut stmt = conn
            .prepare(
                "SELECT started_at, duration_ms FROM model_usage
                 WHERE caller = ?1 AND purpose = 'agent' ORDER BY id",
            )
            .unwrap();
        stmt.query_map([caller], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))
        })
        .unwrap()
        .map(|r| {
            let (s, d) = r.unwrap();
            (
                DateTime::parse_from_rfc3339(&s)
                    .unwrap()
                    .with_timezone(&Utc),
                d,
            )
        })
        .collect()
    };
    println!("channels: {n} messages each way per channel to warm containers (offline model)");
    for (name, windows, caller) in [
        (
            "telegram  update fetched -> sendMessage at the Bot API",
            tg,
            "tg",
        ),
        (
            "whatsapp  webhook POST sent -> messages at the Graph API",
            wa,
            "wa",
        ),
        (
            "discord   MESSAGE_CREATE sent -> create message at REST",
            dc,
            "dc",
        ),
        (
            "slack     envelope sent -> chat.postMessage at the Web API",
            sl,
            "sl",
        ),
        (
            "http      accepted -> reply on the SSE stream          ",
            http,
            "main",
        ),
    ] {
        let rows = usage(caller);
        // The clocks are read a moment apart: a millisecond of slack.
        let slack = chrono::Duration::milliseconds(2);
        let (mut total, mut model, mut net) = (Vec::new(), Vec::new(), Vec::new());
        for w in &windows {
            let m: i64 = rows
                .iter()
                .filter(|(s, _)| *s >= w.from - slack && *s <= w.to + slack)
                .map(|(_, d)| *d)
                .sum();
            let m = Duration::from_millis(m as u64);
            total.push(w.total);
            model.push(m);
            net.push(w.total.saturating_sub(m));
        }
        let (t, m, x) = (Samples::of(total), Samples::of(model), Samples::of(net));
        println!(
            "  {name}  total {}  model {}  minus model {}",
            t.p50_p99(),
            m.p50_p99(),
            x.p50_p99(),
        );
    }
}
