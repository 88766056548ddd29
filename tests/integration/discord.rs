//! The Discord channel end to end: `g2 serve` with real Docker, the real
//! Claude Code and the offline model, against the local Discord of
//! [`crate::discord_api`] (gateway, REST and CDN): mentions and context,
//! strangers, a dropped gateway resumed, long replies, a 429, a lost
//! channel, the doctor, a host killed between receiving and replying, and
//! attachments (a voice message transcribed, photos kept, a file over the
//! limit and a download that fails named).

use std::time::{Duration, Instant};

use crate::channel_support::{
    LongReply, assert_check, doctor_check, failing_reason, kill, long_ask, serve_env,
    serve_refused, stored,
};
use crate::discord_api::{DiscordApi, Failure, TOKEN};
use crate::support::*;

/// The registered channel, and one that is not.
const CHANNEL: u64 = 1_100_000_000_000_000_001;
const STRANGER: u64 = 1_100_000_000_000_000_099;
const ANN: u64 = 500_000_000_000_000_001;
const BOB: u64 = 500_000_000_000_000_002;

/// `g2 serve`'s environment for the channel at `api`.
pub fn env(api: &DiscordApi) -> Vec<(&'static str, String)> {
    vec![
        ("G2_CHANNELS__DISCORD__ENABLED", "true".into()),
        ("G2_CHANNELS__DISCORD__API_URL", api.api_url.clone()),
        ("G2_CHANNELS__DISCORD__GATEWAY_URL", api.gateway_url.clone()),
        ("DISCORD_BOT_TOKEN", TOKEN.into()),
    ]
}

/// `g2 serve` with the channel on, once its gateway is connected.
pub async fn serve_with(home: &TestHome, api: &DiscordApi) -> Serve {
    let s = serve_env(home, &env(api), &[]);
    api.wait_connected(60).await;
    s
}

fn register(home: &TestHome) {
    crate::channel_support::register(home, "club", &format!("dc:{CHANNEL}"), "Club");
}

/// The local Discord, a home with the channel registered, and `g2 serve`
/// connected to it; None when the agent image is missing (a skip, or a
/// failure under CI).
async fn started() -> Option<(DiscordApi, TestHome, Serve)> {
    if !image_ready() {
        return None;
    }
    let api = DiscordApi::start().await;
    let home = TestHome::new();
    register(&home);
    let s = serve_with(&home, &api).await;
    Some((api, home, s))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mentions_are_answered_once_and_strangers_get_nothing() {
    let Some((api, home, s)) = started().await else {
        return;
    };

    // Context first: stored, not answered.
    api.say(CHANNEL, BOB, "bob", "we need milk", false);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(api.sent_to(CHANNEL).is_empty(), "no mention, no answer");
    // A mention: answered once, as a reply to it, with the context.
    let asked = api.say(CHANNEL, ANN, "ann", "what do we need?", true);
    let sent = api.wait_sent(CHANNEL, 1, 120).await;
    assert_eq!(sent[0].reply_to, Some(asked.to_string()));
    assert!(sent[0].text.contains("we need milk"), "{sent:?}");
    let log = stored(&s.url, "club").await;
    assert_eq!(log[0]["sender_name"], "bob", "{log:?}");
    assert_eq!(log[1]["text"], "@g2 what do we need?", "{log:?}");
    assert!(api.typed_in(CHANNEL) >= 1, "typing shown while it worked");

    // A channel that is not registered: nothing sent, nothing stored.
    api.say(STRANGER, ANN, "ann", "hello?", true);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(api.sent_to(STRANGER).is_empty());
    let n: i64 = home
        .store()
        .read(|c| {
            c.query_row(
                "SELECT COUNT(*) FROM messages WHERE chat_jid = ?1",
                [format!("dc:{STRANGER}")],
                |r| r.get(0),
            )
        })
        .await
        .unwrap();
    assert_eq!(n, 0);
    // The bot's own message came back through the gateway: no echo.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(api.sent_to(CHANNEL).len(), 1, "answered once");
    assert_eq!(api.identifies(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_gateway_resumes_without_losing_or_repeating_a_message() {
    let Some((api, _home, s)) = started().await else {
        return;
    };
    api.say(CHANNEL, ANN, "ann", "first-question", true);
    api.wait_sent(CHANNEL, 1, 120).await;

    // Discord drops the connection (4000: resumable); two messages are
    // sent while it is down.
    api.drop_connection(4000);
    api.say(CHANNEL, ANN, "ann", "second-question", true);
    api.say(CHANNEL, BOB, "bob", "third-question", true);
    let sent = api.wait_sent(CHANNEL, 3, 180).await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let resumes = api.resumes();
    assert!(
        resumes
            .iter()
            .any(|(id, seq)| id == "session-1" && *seq > 0),
        "{resumes:?}"
    );
    assert_eq!(api.identifies(), 1, "resumed, not identified again");
    let all: Vec<String> = api.sent_to(CHANNEL).into_iter().map(|m| m.text).collect();
    assert_eq!(all.len(), 3, "{all:?}");
    for q in ["first-question", "second-question", "third-question"] {
        assert_eq!(
            all.iter().filter(|t| t.contains(q)).count(),
            1,
            "{q} answered once: {all:?}"
        );
        let log = stored(&s.url, "club").await;
        assert_eq!(
            log.iter()
                .filter(|m| m["from_bot"] == false && m["text"].as_str().unwrap().contains(q))
                .count(),
            1,
            "{q} stored once"
        );
    }
    drop(sent);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_replies_a_429_and_a_lost_channel() {
    let Some((api, _home, s)) = started().await else {
        return;
    };

    // Over 4,000 characters in paragraphs: three messages, in order.
    api.fail_next_send(Failure::RateLimited(2.0));
    let asked_at = Instant::now();
    // The mention on a line of its own: each command starts a line.
    api.say(CHANNEL, ANN, "ann", &format!("\n{}", long_ask(20)), true);
    let sent = api.wait_sent(CHANNEL, 3, 180).await;
    let reply = LongReply {
        parts: 3,
        paragraphs: 20,
        over: 4000,
        fits: |t| t.chars().count() <= 2000,
        waited: Duration::from_secs(2),
    };
    let parts: Vec<_> = sent.iter().map(|m| (m.text.clone(), m.at)).collect();
    reply
        .check(&parts, asked_at, || api.sent_to(CHANNEL).len())
        .await;
    assert!(
        sent[1..].iter().all(|m| m.reply_to.is_none()),
        "only the first part replies"
    );
    assert_eq!(api.limited(), 1, "one 429");

    // The bot loses the channel: the group is marked failing.
    api.fail_next_send(Failure::MissingAccess);
    api.say(CHANNEL, ANN, "ann", "still there?", true);
    let e = failing_reason(&s.url, "club", 120).await;
    assert!(e.contains("50001"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_checks_the_token_and_the_message_content_intent() {
    let api = DiscordApi::start().await;
    let off_api = DiscordApi::start().await;
    off_api.content_intent_off();
    let (url, off_url) = (api.api_url.clone(), off_api.api_url.clone());
    let (good, bad, missing, no_intent, off) = tokio::task::spawn_blocking(move || {
        let (home, home2) = (TestHome::new(), TestHome::new());
        let env = [
            ("G2_CHANNELS__DISCORD__ENABLED", "true"),
            ("G2_CHANNELS__DISCORD__API_URL", url.as_str()),
            ("DISCORD_BOT_TOKEN", TOKEN),
        ];
        let check = |home: &TestHome, env: &[(&str, &str)]| doctor_check(home, env, "discord");
        let good = check(&home, &env);
        let mut wrong = env;
        wrong[2] = ("DISCORD_BOT_TOKEN", "wrong-discord-token-value");
        let bad = check(&home, &wrong);
        let missing = check(&home, &env[..2]);
        let mut intent = env;
        intent[1] = ("G2_CHANNELS__DISCORD__API_URL", off_url.as_str());
        let no_intent = check(&home, &intent);
        let off = check(&home2, &[]);
        (good, bad, missing, no_intent, off)
    })
    .await
    .unwrap();
    assert_check(&good, true, &["g2bot"], &[]);
    assert_check(
        &bad,
        false,
        &["refused the bot token"],
        &["wrong-discord-token"],
    );
    assert_check(&missing, false, &["DISCORD_BOT_TOKEN"], &[]);
    assert_check(&no_intent, false, &["Message Content"], &[]);
    assert_check(&off, true, &["not enabled"], &[]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_refuses_to_start_the_channel_without_its_token() {
    let api = DiscordApi::start().await;
    let err = serve_refused(env(&api), "DISCORD_BOT_TOKEN").await;
    assert!(err.contains("DISCORD_BOT_TOKEN"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_killed_between_receiving_and_replying_resumes_and_answers_once() {
    let Some((api, home, mut s)) = started().await else {
        return;
    };
    api.say(
        CHANNEL,
        ANN,
        "ann",
        "g2:bash sleep 4; echo slow-answer",
        true,
    );
    // Stored (with the session's sequence); the host dies while the agent
    // works, and a message comes while it is down.
    let deadline = Instant::now() + Duration::from_secs(30);
    while stored(&s.url, "club").await.is_empty() {
        assert!(Instant::now() < deadline, "never stored");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    kill(&mut s);
    assert!(api.sent_to(CHANNEL).is_empty());
    api.say(CHANNEL, BOB, "bob", "while-it-was-down", true);
    let s = serve_with(&home, &api).await;
    let sent = api.wait_sent(CHANNEL, 2, 180).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let all: Vec<String> = api.sent_to(CHANNEL).into_iter().map(|m| m.text).collect();
    assert_eq!(all.len(), 2, "{all:?}");
    assert_eq!(
        all.iter().filter(|t| t.contains("slow-answer")).count(),
        1,
        "{all:?}"
    );
    assert_eq!(
        all.iter()
            .filter(|t| t.contains("while-it-was-down"))
            .count(),
        1,
        "{all:?}"
    );
    // The new host resumed the stored session: Discord replayed the message.
    assert_eq!(api.identifies(), 1, "{:?}", api.resumes());
    assert!(api.resumes().iter().any(|(id, _)| id == "session-1"));
    let log = stored(&s.url, "club").await;
    assert_eq!(
        log.iter().filter(|m| m["from_bot"] == false).count(),
        2,
        "{log:?}"
    );
    drop(sent);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn voice_messages_and_attachments_are_fetched_kept_and_named() {
    use crate::media::{PNG, SAID, heard, voice_note};
    let Some(voice) = voice_note(SAID) else {
        return;
    };
    let Some((api, home, s)) = started().await else {
        return;
    };
    // A voice message (flag IS_VOICE_MESSAGE), then a photo that asks the
    // agent what it sees.
    let v = api.voice_attachment(CHANNEL, &voice, 4.2);
    api.post(CHANNEL, ANN, "ann", "", false, vec![v], 1 << 13);
    let p = api.attachment(CHANNEL, "cat.png", "image/png", PNG);
    api.post(CHANNEL, BOB, "bob", "g2:attachments", true, vec![p], 0);
    let sent = api.wait_sent(CHANNEL, 1, 240).await;
    let listed = &sent[0].text;
    assert_eq!(
        listed.matches("/workspace/group/media/").count(),
        2,
        "{listed}"
    );
    let log = stored(&s.url, "club").await;
    let text = log[0]["text"].as_str().unwrap();
    assert!(text.starts_with("[voice 0:0"), "{text}");
    assert!(heard(text) >= 4, "{text}");
    assert_eq!(log[0]["attachments"][0]["kind"], "voice");
    assert_eq!(log[1]["text"], "@g2 g2:attachments", "{log:?}");
    for m in &log[..2] {
        let path = m["attachments"][0]["path"].as_str().unwrap();
        assert!(
            home.path().join("groups/club").join(path).is_file(),
            "{path}"
        );
    }
    let photo = log[1]["attachments"][0]["path"].as_str().unwrap();
    assert_eq!(
        std::fs::read(home.path().join("groups/club").join(photo)).unwrap(),
        PNG
    );

    // Over the limit (never asked for), and a message of two files whose
    // first is gone from the CDN: each stored, named, and the channel told.
    let mut film = api.attachment(CHANNEL, "film.mp4", "video/mp4", b"not a film");
    film["size"] = serde_json::json!(30_000_000);
    let film_path =
        film["url"].as_str().unwrap().split('?').next().unwrap()[api.cdn_url.len()..].to_string();
    let big = api.post(CHANNEL, ANN, "ann", "the film", false, vec![film], 0);
    let gone = api.missing_attachment(CHANNEL, "plan.pdf", "application/pdf", 1000);
    let map = api.attachment(CHANNEL, "map.png", "image/png", PNG);
    let two = api.post(CHANNEL, ANN, "ann", "", false, vec![gone, map], 0);
    let sent = api.wait_sent(CHANNEL, 3, 120).await;
    let notes: Vec<&str> = sent[1..].iter().map(|m| m.text.as_str()).collect();
    assert!(
        notes[0].starts_with("Not everything you sent reached me: ")
            && notes[0].contains("film.mp4: not kept: 28.6 MB is over the 20 MB limit"),
        "{notes:?}"
    );
    assert!(
        notes[1]
            .contains("plan.pdf: not received: Discord's CDN answered the download with HTTP 404")
            && !notes[1].contains("map.png"),
        "{notes:?}"
    );
    assert_eq!(sent[1].reply_to, Some(big.to_string()));
    assert_eq!(sent[2].reply_to, Some(two.to_string()));
    assert!(!notes.iter().any(|n| n.contains(TOKEN)), "{notes:?}");
    assert!(!api.cdn_gets().contains(&film_path), "{:?}", api.cdn_gets());
    assert_eq!(api.cdn_authorized(), 0, "the bot token went to the CDN");
    let log = stored(&s.url, "club").await;
    let people: Vec<&serde_json::Value> = log.iter().filter(|m| m["from_bot"] == false).collect();
    assert_eq!(people.len(), 4, "{log:?}");
    assert!(
        people[2]["text"]
            .as_str()
            .unwrap()
            .starts_with("the film\n[video: film.mp4 — not kept"),
        "{:?}",
        people[2]
    );
    assert!(
        people[3]["text"]
            .as_str()
            .unwrap()
            .starts_with("[file: plan.pdf — not received"),
        "{:?}",
        people[3]
    );
    let files = people[3]["attachments"].as_array().unwrap();
    assert_eq!(files.len(), 2, "{:?}", people[3]);
    assert!(files[0].get("path").is_none(), "{files:?}");
    let kept = files[1]["path"].as_str().unwrap();
    assert!(
        home.path().join("groups/club").join(kept).is_file(),
        "{kept}"
    );
}
