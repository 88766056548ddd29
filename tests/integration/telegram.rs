//! The Telegram channel end to end: `g2 serve` with real Docker, the real
//! Claude Code and the offline model, against the local Bot API server of
//! [`crate::bot_api`]: mentions and context, unregistered chats, long
//! replies, rejected formatting, rate limits, a removed bot, and a host
//! killed after fetching updates and after sending a reply.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::bot_api::{BOT_ID, BotApi, Failure, TOKEN};
pub use crate::channel_support::register;
use crate::channel_support::{
    LongReply, assert_check, doctor_check, kill, long_ask, serve_env, stored,
};
use crate::support::*;

/// `g2 serve`'s environment for the channel at `api`.
pub fn env(api: &BotApi) -> Vec<(&'static str, String)> {
    vec![
        ("G2_CHANNELS__TELEGRAM__ENABLED", "true".into()),
        ("G2_CHANNELS__TELEGRAM__API_URL", api.url.clone()),
        ("G2_CHANNELS__TELEGRAM__POLL_TIMEOUT_SECS", "5".into()),
        ("TELEGRAM_BOT_TOKEN", TOKEN.into()),
    ]
}

pub fn serve_with(home: &TestHome, api: &BotApi, more: &[(&'static str, &str)]) -> Serve {
    serve_env(home, &env(api), more)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mention_is_answered_in_its_chat_as_a_reply_with_the_context() {
    if !image_ready() {
        return;
    }
    let api = BotApi::start().await;
    let home = TestHome::new();
    register(&home, "family", "tg:-100200", "Family");
    let s = serve_with(&home, &api, &[]);

    api.message(-100200, 42, "Ann", "we need milk", json!({}));
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(api.sent_to(-100200).is_empty(), "no mention, no answer");
    let asked = api.message(-100200, 43, "Bob", "@g2bot hello", json!({}));
    let sent = api.wait_sent(-100200, 1, 120).await;
    assert_eq!(sent.len(), 1, "{sent:?}");
    let reply = &sent[0];
    assert!(
        reply.text.contains("Offline model (g2) received"),
        "{reply:?}"
    );
    assert!(
        reply.text.contains("we need milk") && reply.text.contains("@g2bot hello"),
        "the unmentioned message went along as context: {reply:?}"
    );
    assert_eq!(reply.reply_to, Some(asked), "a reply to the mention");
    assert_eq!(reply.parse_mode.as_deref(), Some("HTML"));
    assert!(
        api.actions().contains(&(-100200, "typing".to_string())),
        "a typing indicator while the agent worked"
    );
    // Stored with who said it, and the reply marked sent.
    let log = stored(&s.url, "family").await;
    let people: Vec<_> = log.iter().filter(|m| m["from_bot"] == false).collect();
    assert_eq!(people.len(), 2);
    assert_eq!(people[0]["sender"], "42");
    assert_eq!(people[0]["sender_name"], "Ann");
    assert_eq!(people[1]["addressed"], true);

    // A reply to one of the bot's messages calls it too.
    api.message(
        -100200,
        42,
        "Ann",
        "and bread?",
        json!({ "reply_to_message": { "message_id": reply.message_id, "date": 1, "chat": { "id": -100200, "type": "supergroup", "title": "Family" }, "from": { "id": BOT_ID, "is_bot": true, "first_name": "G2" }, "text": "x" } }),
    );
    let sent = api.wait_sent(-100200, 2, 120).await;
    assert!(sent[1].text.contains("and bread?"), "{:?}", sent[1]);

    // Another bot, and the bot itself, are never routed.
    api.push(
        "message",
        -100200,
        json!({ "id": 555, "is_bot": true, "first_name": "Other" }),
        "@g2bot ping",
        json!({}),
    );
    api.push(
        "message",
        -100200,
        json!({ "id": BOT_ID, "is_bot": true, "first_name": "G2" }),
        "@g2bot echo",
        json!({}),
    );
    // An unregistered chat gets nothing, and nothing of it is stored.
    api.message(-100999, 44, "Eve", "@g2bot anyone?", json!({}));
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(api.sent_to(-100200).len(), 2);
    assert!(api.sent_to(-100999).is_empty());
    assert_eq!(
        stored(&s.url, "family").await.len(),
        5,
        "two bots' messages not stored"
    );
    let strangers: i64 = home
        .store()
        .read(|c| {
            c.query_row(
                "SELECT COUNT(*) FROM messages WHERE chat_jid LIKE 'tg:-100999%'",
                (),
                |r| r.get(0),
            )
        })
        .await
        .unwrap();
    assert_eq!(strangers, 0);
    // The token is in no container and in no log line.
    for c in containers_of(&home) {
        let out = std::process::Command::new("docker")
            .args(["inspect", &c])
            .output()
            .unwrap();
        assert!(!String::from_utf8_lossy(&out.stdout).contains(TOKEN), "{c}");
    }
    let log = std::fs::read_to_string(home.path().join("serve.log")).unwrap();
    assert!(log.contains("polling for updates") && !log.contains(TOKEN));

    // A waiting message edited to mention the bot calls it, with the new text.
    let plain = api.message(-100200, 42, "Ann", "is there cheese", json!({}));
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(api.sent_to(-100200).len(), 2);
    let from = json!({ "id": 42, "is_bot": false, "first_name": "Ann" });
    api.push(
        "edited_message",
        -100200,
        from,
        "@g2bot is there cheese?",
        json!({ "message_id": plain, "edit_date": 1 }),
    );
    let sent = api.wait_sent(-100200, 3, 120).await;
    assert!(
        sent[2].text.contains("@g2bot is there cheese?"),
        "{:?}",
        sent[2]
    );
    assert_eq!(sent[2].reply_to, Some(plain));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_checks_the_token_with_get_me() {
    let api = BotApi::start().await;
    let home = TestHome::new();
    let url = api.url.clone();
    let home2 = TestHome::new();
    let (good, bad, off) = tokio::task::spawn_blocking(move || {
        let env = [
            ("G2_CHANNELS__TELEGRAM__ENABLED", "true"),
            ("G2_CHANNELS__TELEGRAM__API_URL", url.as_str()),
            ("TELEGRAM_BOT_TOKEN", TOKEN),
        ];
        let check = |home: &TestHome, env: &[(&str, &str)]| doctor_check(home, env, "telegram");
        let good = check(&home, &env);
        let mut wrong = env;
        wrong[2] = (
            "TELEGRAM_BOT_TOKEN",
            "42:AAwrong-token-wrong-token-wrong-tok",
        );
        let bad = check(&home, &wrong);
        let off = check(&home2, &[]);
        (good, bad, off)
    })
    .await
    .unwrap();
    assert_check(&good, true, &["@g2bot"], &[]);
    assert_check(&bad, false, &["refused the token"], &["AAwrong"]);
    assert_check(&off, true, &["not enabled"], &[]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_replies_rejected_formatting_rate_limits_and_a_removed_bot() {
    if !image_ready() {
        return;
    }
    let api = BotApi::start().await;
    let home = TestHome::new();
    // A private chat: every message addresses the bot.
    register(&home, "ann", "tg:4242", "Ann");
    register(&home, "club", "tg:-100300", "Club");
    let s = serve_with(
        &home,
        &api,
        &[("G2_CHANNELS__TELEGRAM__UNREGISTERED", "notice")],
    );

    // Three results of ~1,900 characters, in paragraphs: over 5,000.
    api.fail_next_send(Failure::TooMany(1));
    let asked_at = Instant::now();
    api.message(4242, 4242, "Ann", &long_ask(26), json!({}));
    let sent = api.wait_sent(4242, 2, 180).await;
    let reply = LongReply {
        parts: 2,
        paragraphs: 26,
        over: 5000,
        fits: |t| t.encode_utf16().count() <= 4096,
        waited: Duration::from_secs(1),
    };
    let parts: Vec<_> = sent.iter().map(|m| (m.text.clone(), m.at)).collect();
    reply
        .check(&parts, asked_at, || api.sent_to(4242).len())
        .await;
    assert!(sent[0].message_id < sent[1].message_id);
    assert_eq!(api.rejected(), 1, "one 429");
    assert_eq!(sent[0].reply_to, None, "no quote in a private chat");

    // Formatting Telegram refuses is sent again as plain text, not lost.
    api.fail_next_send(Failure::BadFormatting);
    api.message(4242, 4242, "Ann", "make this *bold*", json!({}));
    let sent = api.wait_sent(4242, 3, 120).await;
    assert_eq!(sent[2].parse_mode, None, "{:?}", sent[2]);
    assert!(sent[2].text.contains("make this *bold*"), "{:?}", sent[2]);
    assert_eq!(api.rejected(), 2);

    // The bot removed from a chat: 403, and the group is marked failing.
    api.kick(-100300);
    api.message(-100300, 7, "Cy", "@g2bot still there?", json!({}));
    let e = crate::channel_support::failing_reason(&s.url, "club", 120).await;
    assert!(e.contains("kicked"), "{e}");
    // An unregistered chat that calls the bot is told once how to register.
    api.message(-100777, 8, "Dee", "@g2bot hi", json!({}));
    api.message(-100777, 8, "Dee", "@g2bot hello?", json!({}));
    let notice = api.wait_sent(-100777, 1, 30).await;
    assert!(notice[0].text.contains("tg:-100777"), "{:?}", notice[0]);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(api.sent_to(-100777).len(), 1, "once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_killed_after_sending_does_not_send_again() {
    if !image_ready() {
        return;
    }
    let api = BotApi::start().await;
    let home = TestHome::new();
    register(&home, "ann", "tg:4243", "Ann");
    let mut s = serve_with(&home, &api, &[]);
    // Telegram takes the reply; the host dies before it hears back.
    api.fail_next_send(Failure::Hold);
    api.message(4243, 4243, "Ann", "first question", json!({}));
    api.wait_sent(4243, 1, 120).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    kill(&mut s);

    let s = serve_with(&home, &api, &[]);
    tokio::time::sleep(Duration::from_secs(6)).await;
    let sent = api.sent_to(4243);
    assert_eq!(sent.len(), 1, "not sent again: {sent:?}");
    let log = stored(&s.url, "ann").await;
    assert_eq!(
        log.iter().filter(|m| m["from_bot"] == true).count(),
        1,
        "answered once: {log:?}"
    );
    let state: String = home
        .store()
        .read(|c| c.query_row("SELECT state FROM deliveries", (), |r| r.get(0)))
        .await
        .unwrap();
    assert_eq!(state, "uncertain");
    // The chat goes on.
    api.message(4243, 4243, "Ann", "second question", json!({}));
    let sent = api.wait_sent(4243, 2, 120).await;
    assert!(sent[1].text.contains("second question"), "{:?}", sent[1]);
    let update = api.last_update_id();
    assert_eq!(api.times_fetched(update), 1, "no update fetched twice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_killed_after_fetching_answers_each_update_once() {
    if !image_ready() {
        return;
    }
    let api = BotApi::start().await;
    let home = TestHome::new();
    register(&home, "ann", "tg:4244", "Ann");
    // Held after fetching (a fail point of the test build), so the kill
    // comes before the updates are stored, whatever the machine's load.
    let mut s = serve_with(
        &home,
        &api,
        &[("FAILPOINTS", "telegram-fetched=sleep(600000)")],
    );
    api.message(
        4244,
        4244,
        "Ann",
        "g2:bash sleep 3; echo fetched-once",
        json!({}),
    );
    let first = api.last_update_id();
    api.message(4244, 4244, "Ann", "g2:bash echo second-line", json!({}));
    // Killed once the updates were handed out: not stored, never answered.
    let deadline = Instant::now() + Duration::from_secs(30);
    while api.fetched_at(first).is_none() {
        assert!(Instant::now() < deadline, "never fetched");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    kill(&mut s);
    assert!(api.sent_to(4244).is_empty());

    let s = serve_with(&home, &api, &[]);
    let sent = api.wait_sent(4244, 1, 180).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let sent_now = api.sent_to(4244);
    assert_eq!(sent_now.len(), sent.len(), "{sent_now:?}");
    let all: String = sent_now.iter().map(|m| m.text.as_str()).collect();
    assert_eq!(
        all.matches("fetched-once").count(),
        2,
        "the command and its output, once: {all}"
    );
    assert_eq!(all.matches("second-line").count(), 2, "{all}");
    let people: Vec<_> = stored(&s.url, "ann")
        .await
        .into_iter()
        .filter(|m| m["from_bot"] == false)
        .collect();
    assert_eq!(people.len(), 2, "each update stored once: {people:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_long_poll_outlasts_the_request_timeout() {
    if !image_ready() {
        return;
    }
    let api = BotApi::start().await;
    let home = TestHome::new();
    // Longer than a request's 17 s: the poll's own client must wait.
    let _s = serve_with(
        &home,
        &api,
        &[
            ("G2_CHANNELS__TELEGRAM__POLL_TIMEOUT_SECS", "20"),
            ("G2_CHANNELS__TELEGRAM__UNREGISTERED", "notice"),
        ],
    );
    tokio::time::sleep(Duration::from_secs(23)).await;
    let asked = Instant::now();
    api.message(-100888, 9, "Flo", "@g2bot hello?", json!({}));
    let notice = api.wait_sent(-100888, 1, 10).await;
    assert!(
        notice[0].at - asked < Duration::from_secs(2),
        "taken at once by the waiting poll"
    );
    let log = std::fs::read_to_string(home.path().join("serve.log")).unwrap();
    assert!(!log.contains("getUpdates failed"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forum_topics_are_groups_of_their_own_or_share_the_chats() {
    if !image_ready() {
        return;
    }
    let api = BotApi::start().await;
    let home = TestHome::new();
    register(&home, "fam", "tg:-100500", "Fam");
    register(&home, "trips", "tg:-100500:7", "Trips");
    let s = serve_with(&home, &api, &[]);
    let topic = |t: i64| json!({ "message_thread_id": t, "is_topic_message": true });

    // Topic 7 is its own group: send_message and the reply go into it.
    let asked = api.message(
        -100500,
        42,
        "Ann",
        "@g2bot\ng2:send progress-in-topic",
        topic(7),
    );
    let sent = api.wait_sent(-100500, 2, 120).await;
    assert!(sent[0].text.contains("progress-in-topic"), "{sent:?}");
    assert!(sent.iter().all(|m| m.thread == Some(7)), "{sent:?}");
    assert_eq!(sent[1].reply_to, Some(asked));
    // Topic 9 has none: the chat's group answers, back in topic 9.
    let asked = api.message(-100500, 42, "Ann", "@g2bot hi from nine", topic(9));
    let sent = api.wait_sent(-100500, 3, 120).await;
    assert_eq!(
        (sent[2].thread, sent[2].reply_to),
        (Some(9), Some(asked)),
        "{:?}",
        sent[2]
    );
    assert!(sent[2].text.contains("hi from nine"));
    let trips = stored(&s.url, "trips").await;
    let fam = stored(&s.url, "fam").await;
    assert_eq!(trips.iter().filter(|m| m["from_bot"] == false).count(), 1);
    assert_eq!(fam.iter().filter(|m| m["from_bot"] == false).count(), 1);
}

/// A voice note, a photo (its largest size) and documents, fetched the
/// Bot API's way (`getFile`, then the file's URL): the voice note arrives
/// as its transcript, the photo is kept where the agent's turn lists it,
/// and a file over the limit (never asked for) and one whose download
/// fails are each named in the stored message, the chat told why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn voice_notes_photos_and_documents_are_fetched_kept_and_named() {
    use crate::media::{PNG, SAID, voice_note};
    let Some(voice) = voice_note(SAID) else {
        return;
    };
    if !image_ready() {
        return;
    }
    let api = BotApi::start().await;
    let home = TestHome::new();
    register(&home, "family", "tg:-100200", "Family");
    let s = serve_with(&home, &api, &[]);
    let v = api.add_file(voice.clone(), "oga");
    let voice_json = json!({
        "file_id": v, "file_unique_id": "uv", "duration": 4, "mime_type": "audio/ogg", "file_size": voice.len() });
    let voice_id = api.message(-100200, 42, "Ann", "", json!({ "voice": voice_json }));
    let p = api.add_file(PNG.to_vec(), "jpg");
    api.message(-100200, 43, "Bob", "", json!({
        "photo": [
            { "file_id": "small", "file_unique_id": "us", "width": 90, "height": 90, "file_size": 10 },
            { "file_id": p, "file_unique_id": "up", "width": 800, "height": 600, "file_size": PNG.len() },
        ],
        "caption": "@g2bot g2:attachments",
        "caption_entities": [{ "type": "mention", "offset": 0, "length": 6 }],
    }));
    let sent = api.wait_sent(-100200, 1, 240).await;
    let listed = &sent[0].text;
    assert!(
        listed.matches("/workspace/group/media/").count() == 2,
        "{listed}"
    );
    assert_eq!(
        api.file_asks(),
        [v.clone(), p.clone()],
        "the largest photo size only"
    );
    // Over the limit (never asked for), and a download that fails.
    api.message(-100200, 42, "Ann", "", json!({ "document": {
        "file_id": "huge", "file_unique_id": "uh", "file_name": "film.mp4", "mime_type": "video/mp4", "file_size": 30_000_000 },
        "caption": "the film" }));
    api.message(-100200, 42, "Ann", "", json!({ "document": {
        "file_id": "gone", "file_unique_id": "ug", "file_name": "plan.pdf", "mime_type": "application/pdf", "file_size": 1000 } }));
    let sent = api.wait_sent(-100200, 3, 120).await;
    let notes: Vec<&str> = sent[1..].iter().map(|m| m.text.as_str()).collect();
    assert!(
        notes[0].contains("film.mp4: not kept: 28.6 MB is over the 20 MB limit"),
        "{notes:?}"
    );
    assert!(
        notes[1].contains("plan.pdf: not received: Telegram's getFile failed"),
        "{notes:?}"
    );
    assert!(!notes.iter().any(|n| n.contains(TOKEN)), "{notes:?}");
    assert!(!api.file_asks().contains(&"huge".to_string()));
    let people = crate::media::assert_stored_as_sent(&home, &s.url, "family").await;
    // A caption added to the voice note later does not replace its transcript.
    let asks = api.file_asks().len();
    api.push(
        "edited_message",
        -100200,
        json!({ "id": 42, "is_bot": false, "first_name": "Ann" }),
        "",
        json!({ "message_id": voice_id, "edit_date": 1, "voice": voice_json, "caption": "@g2bot hello" }),
    );
    let edit = api.last_update_id();
    let waited = Instant::now();
    while api.times_fetched(edit) == 0
        || api
            .fetched_at(edit)
            .is_some_and(|t| t.elapsed() < Duration::from_secs(2))
    {
        assert!(
            waited.elapsed() < Duration::from_secs(60),
            "the edit was never fetched"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let again = crate::media::assert_stored_as_sent(&home, &s.url, "family").await;
    assert_eq!(again[0]["text"], people[0]["text"]);
    assert_eq!(api.file_asks().len(), asks, "an edit fetches nothing");
}
