//! The Slack channel end to end: `g2 serve` with real Docker, the real
//! Claude Code and the offline model, against the local Slack of
//! [`crate::slack_api`] (Web API and Socket Mode): mentions, context and
//! threads, strangers, acknowledgements while an agent works, renewed and
//! dropped connections, envelopes delivered again, long replies, rate
//! limits, a removed bot, the doctor, missing tokens, and files (a voice
//! clip transcribed, a photo kept, downloads refused). The host killed
//! between receiving and replying is the conformance suite's
//! (`channels::the_slack_channel_conforms`).

use std::time::{Duration, Instant};

use crate::channel_support::{
    LongReply, assert_check, count, doctor_check, failing_reason, long_ask, serve_env,
    serve_refused, stored, wait_in_flight,
};
use crate::slack_api::{APP_TOKEN, BOT_TOKEN, BOT_USER, Failure, SlackApi, TEAM};
use crate::support::*;

/// `g2 serve`'s environment for the channel at `api`.
pub fn env(api: &SlackApi) -> Vec<(&'static str, String)> {
    vec![
        ("G2_CHANNELS__SLACK__ENABLED", "true".into()),
        ("G2_CHANNELS__SLACK__API_URL", api.url.clone()),
        ("SLACK_BOT_TOKEN", BOT_TOKEN.into()),
        ("SLACK_APP_TOKEN", APP_TOKEN.into()),
    ]
}

/// `g2 serve` with the channel, once its socket is open.
pub async fn serve_with(home: &TestHome, api: &SlackApi, more: &[(&'static str, &str)]) -> Serve {
    let connections = api.opens().1;
    let s = serve_env(home, &env(api), more);
    api.wait_connected(connections + 1, 60).await;
    s
}

const CLUB: &str = "C0CLUB";
const STRANGER: &str = "C0STRANGER";

fn register(home: &TestHome, folder: &str, channel: &str) {
    crate::channel_support::register(home, folder, &format!("sl:{TEAM}:{channel}"), folder);
}

/// How long each envelope took to be acknowledged; panics on one that
/// never was.
fn ack_delays(api: &SlackApi) -> Vec<Duration> {
    api.envelopes()
        .iter()
        .map(|e| {
            let acked = e.acked.unwrap_or_else(|| panic!("not acknowledged: {e:?}"));
            acked - e.sent[0]
        })
        .collect()
}

async fn wait_acked(api: &SlackApi, secs: u64) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while api.envelopes().iter().any(|e| e.acked.is_none()) {
        assert!(
            Instant::now() < deadline,
            "unacknowledged: {:?}",
            api.envelopes()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The local Slack, a home with `club` registered, and `g2 serve` with its
/// socket open; None when the agent image is missing (a skip, or a
/// failure under CI).
async fn started() -> Option<(SlackApi, TestHome, Serve)> {
    if !image_ready() {
        return None;
    }
    let api = SlackApi::start().await;
    let home = TestHome::new();
    register(&home, "club", CLUB);
    let s = serve_with(&home, &api, &[]).await;
    Some((api, home, s))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mentions_are_answered_once_in_their_channel_and_strangers_get_nothing() {
    let Some((api, home, s)) = started().await else {
        return;
    };

    // Context, then a mention (sent as `message` and `app_mention`).
    api.say(
        CLUB,
        "U0BOB",
        "we need milk & <https://shop.example|bread>",
        None,
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(api.sent_to(CLUB).is_empty(), "no mention, no answer");
    api.mention(CLUB, "U0CY", "what do we need?");
    let sent = api.wait_sent(CLUB, 1, 120).await;
    assert!(
        sent[0].text.contains("we need milk &amp; bread"),
        "{sent:?}"
    );
    assert!(sent[0].mrkdwn && sent[0].thread_ts.is_none(), "{sent:?}");

    // A mention in a thread is answered in the thread.
    let parent = api.say(CLUB, "U0BOB", "a thread", None);
    api.say(
        CLUB,
        "U0CY",
        &format!("<@{BOT_USER}>\nin-thread question"),
        Some(&parent),
    );
    let sent = api.wait_sent(CLUB, 2, 120).await;
    assert!(sent[1].text.contains("in-thread question"), "{sent:?}");
    assert_eq!(sent[1].thread_ts.as_deref(), Some(parent.as_str()));

    // A channel that is not registered: acknowledged, nothing stored or sent.
    api.mention(STRANGER, "U0DEE", "hi?");
    wait_acked(&api, 10).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(api.sent_to(STRANGER).is_empty());
    let strangers = count(
        &home,
        "SELECT COUNT(*) FROM messages WHERE chat_jid LIKE '%C0STRANGER'",
    )
    .await;
    assert_eq!(strangers, 0);

    // Each message stored once though Slack sent the mentions twice.
    let log = stored(&s.url, "club").await;
    let asked: Vec<&str> = log
        .iter()
        .filter(|m| m["from_bot"] == false)
        .map(|m| m["text"].as_str().unwrap())
        .collect();
    assert_eq!(asked.len(), 4, "{asked:?}");
    assert!(asked[1].starts_with("@g2bot"), "{asked:?}");
    assert_eq!(log[0]["sender"], "U0BOB");
    assert_eq!(api.sent_to(CLUB).len(), 2, "answered once each");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envelopes_are_acknowledged_at_once_and_reconnects_lose_and_repeat_nothing() {
    let Some((api, home, s)) = started().await else {
        return;
    };

    // A turn that takes a while; messages keep coming meanwhile.
    api.mention(CLUB, "U0ANN", "g2:bash sleep 8; echo slow-answer");
    wait_in_flight(&home, "club", 60).await;
    api.say(CLUB, "U0BOB", "context while it works", None);
    api.mention(CLUB, "U0BOB", "second-question");
    wait_acked(&api, 5).await;
    assert!(
        api.sent_to(CLUB).is_empty(),
        "acknowledged while the agent still works"
    );
    let delays = ack_delays(&api);
    assert!(
        delays.iter().all(|d| *d < Duration::from_secs(3)),
        "{delays:?}"
    );

    // Slack delivers an envelope again: stored and answered once.
    let last = api.envelopes().last().unwrap().id.clone();
    api.repeat(&last);

    // Renewed connections: a new one opens each time.
    for (i, reason) in ["refresh_requested", "warning"].into_iter().enumerate() {
        let (opens, _) = api.opens();
        api.disconnect(reason);
        api.wait_connected(2 + i, 30).await;
        assert!(api.opens().0 > opens);
    }
    // A dropped socket, with a mention sent while none is open.
    api.drop_socket();
    api.mention(CLUB, "U0CY", "third-question");
    api.wait_connected(4, 60).await;

    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let all: String = api.sent_to(CLUB).iter().map(|m| m.text.clone()).collect();
        if ["slow-answer", "second-question", "third-question"]
            .iter()
            .all(|w| all.contains(w))
        {
            break;
        }
        assert!(Instant::now() < deadline, "not all answered: {all}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(4)).await;
    wait_acked(&api, 5).await;
    let sent = api.sent_to(CLUB);
    for w in ["slow-answer", "second-question", "third-question"] {
        let n = sent.iter().filter(|m| m.text.contains(w)).count();
        assert_eq!(n, 1, "{w} answered once: {sent:?}");
    }
    let log = stored(&s.url, "club").await;
    let people = log.iter().filter(|m| m["from_bot"] == false).count();
    assert_eq!(people, 4, "each message stored once: {log:?}");
    assert!(
        log.iter()
            .any(|m| m["text"].as_str().unwrap().contains("second-question"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_replies_rate_limits_and_a_removed_bot() {
    let Some((api, _home, s)) = started().await else {
        return;
    };

    // Three results of ~1,900 characters, in paragraphs: over 5,000.
    api.fail_next_send(Failure::RateLimited(3));
    let asked_at = Instant::now();
    api.mention(CLUB, "U0ANN", &long_ask(26));
    let sent = api.wait_sent(CLUB, 2, 180).await;
    let reply = LongReply {
        parts: 2,
        paragraphs: 26,
        over: 5000,
        fits: |t| t.chars().count() <= 4000,
        waited: Duration::from_secs(3),
    };
    let parts: Vec<_> = sent.iter().map(|m| (m.text.clone(), m.at)).collect();
    reply
        .check(&parts, asked_at, || api.sent_to(CLUB).len())
        .await;
    assert_eq!(api.rejected(), 1, "one rate limit answer");

    // The bot removed from the channel: the group is marked failing.
    api.fail_next_send(Failure::NotInChannel);
    api.mention(CLUB, "U0CY", "still there?");
    let e = failing_reason(&s.url, "club", 120).await;
    assert!(e.contains("not_in_channel"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_checks_both_tokens_with_slack() {
    let api = SlackApi::start().await;
    let url = api.url.clone();
    let checks = tokio::task::spawn_blocking(move || {
        let (home, home2) = (TestHome::new(), TestHome::new());
        let env = [
            ("G2_CHANNELS__SLACK__ENABLED", "true"),
            ("G2_CHANNELS__SLACK__API_URL", url.as_str()),
            ("SLACK_BOT_TOKEN", BOT_TOKEN),
            ("SLACK_APP_TOKEN", APP_TOKEN),
        ];
        let check = |home: &TestHome, env: &[(&str, &str)]| doctor_check(home, env, "slack");
        let mut bad_bot = env;
        bad_bot[2] = ("SLACK_BOT_TOKEN", "xoxb-wrong-wrong-wrong");
        let mut bad_app = env;
        bad_app[3] = ("SLACK_APP_TOKEN", "xapp-wrong-wrong-wrong");
        let mut swapped = env;
        swapped[3] = ("SLACK_APP_TOKEN", BOT_TOKEN);
        [
            check(&home, &env),
            check(&home, &bad_bot),
            check(&home, &bad_app),
            check(&home, &env[..3]),
            check(&home, &swapped),
            check(&home2, &[]),
        ]
    })
    .await
    .unwrap();
    let [good, bad_bot, bad_app, missing, swapped, off] = checks;
    assert_check(&good, true, &["@g2bot", TEAM], &[]);
    for (bad, variable) in [(&bad_bot, "SLACK_BOT_TOKEN"), (&bad_app, "SLACK_APP_TOKEN")] {
        assert_check(bad, false, &["invalid_auth", variable], &["wrong-wrong"]);
    }
    assert_check(&missing, false, &["SLACK_APP_TOKEN is not set"], &[]);
    assert_check(&swapped, false, &["xapp-"], &[BOT_TOKEN]);
    assert_check(&off, true, &["not enabled"], &[]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_refuses_to_start_the_channel_without_both_tokens() {
    let api = SlackApi::start().await;
    let err = serve_refused(env(&api), "SLACK_APP_TOKEN").await;
    assert!(
        err.contains("SLACK_APP_TOKEN") && !err.contains(BOT_TOKEN),
        "{err}"
    );
    assert_eq!(api.opens(), (0, 0));
}

/// A clip recorded in Slack, a photo and other files, fetched Slack's way
/// (the file's `url_private_download` with the bot token): the clip
/// arrives as its transcript, the photo is kept where the agent's turn
/// lists it, each fetched once though the mention came as `message` and
/// `app_mention`; a file announced over the limit (never asked for), one
/// Slack no longer has (404) and one Slack answers with its sign-in page
/// (the app lost `files:read`) are each named in the stored message, the
/// channel told why, and no note or log line holds the token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn voice_clips_photos_and_files_are_fetched_kept_and_named() {
    use crate::media::{PNG, SAID, heard, voice_note};
    const FAMILY: &str = "C0FAMILY";
    let Some(voice) = voice_note(SAID) else {
        return;
    };
    if !image_ready() {
        return;
    }
    let api = SlackApi::start().await;
    let home = TestHome::new();
    register(&home, "family", FAMILY);
    let s = serve_with(&home, &api, &[]).await;
    let clip = api.add_file("audio_message.ogg", "audio/ogg", voice, true);
    api.share(FAMILY, "U0ANN", "", vec![clip.clone()]);
    let photo = api.add_file("photo.png", "image/png", PNG.to_vec(), false);
    api.share(
        FAMILY,
        "U0BOB",
        &format!("<@{BOT_USER}> g2:attachments"),
        vec![photo.clone()],
    );
    let sent = api.wait_sent(FAMILY, 1, 240).await;
    let listed = &sent[0].text;
    assert_eq!(
        listed.matches("/workspace/group/media/").count(),
        2,
        "{listed}"
    );
    let id = |f: &serde_json::Value| f["id"].as_str().unwrap().to_string();
    assert_eq!(
        api.downloads(),
        [id(&clip), id(&photo)],
        "each file fetched once"
    );
    let log = stored(&s.url, "family").await;
    let clip_msg = &log[0];
    let text = clip_msg["text"].as_str().unwrap();
    assert!(text.starts_with("[voice 0:0"), "{text}");
    assert!(heard(text) >= 4, "{text}");
    assert_eq!(clip_msg["attachments"][0]["kind"], "voice");
    assert_eq!(log[1]["text"], "@g2bot g2:attachments");
    for m in &log[..2] {
        let path = m["attachments"][0]["path"].as_str().unwrap();
        assert!(
            home.path().join("groups/family").join(path).is_file(),
            "{path}"
        );
    }

    // Over the limit (never asked for) and gone, in one message; then a
    // download Slack answers with its sign-in page.
    let film = api.file_object("F0HUGE", "film.mp4", "video/mp4", 30_000_000, false);
    let gone = api.file_object("F0GONE", "plan.pdf", "application/pdf", 1000, false);
    api.share(FAMILY, "U0ANN", "the film and the plan", vec![film, gone]);
    api.wait_sent(FAMILY, 2, 120).await;
    api.without_files_read();
    let list = api.add_file("list.txt", "text/plain", b"milk\nbread\n".to_vec(), false);
    api.share(FAMILY, "U0BOB", "", vec![list]);
    let sent = api.wait_sent(FAMILY, 3, 120).await;
    let notes: Vec<&str> = sent[1..].iter().map(|m| m.text.as_str()).collect();
    assert!(
        notes[0].starts_with("Not everything you sent reached me: ")
            && notes[0].contains("film.mp4: not kept: 28.6 MB is over the 20 MB limit")
            && notes[0].contains("plan.pdf: not received: Slack has no such file (HTTP 404)"),
        "{notes:?}"
    );
    assert!(
        notes[1].contains("list.txt: not received: Slack answered with its sign-in page")
            && notes[1].contains("files:read"),
        "{notes:?}"
    );
    let downloads = api.downloads();
    assert!(!downloads.contains(&"F0HUGE".to_string()), "{downloads:?}");
    assert!(downloads.contains(&"F0GONE".to_string()), "{downloads:?}");
    let log = stored(&s.url, "family").await;
    let people: Vec<&serde_json::Value> = log.iter().filter(|m| m["from_bot"] == false).collect();
    assert_eq!(people.len(), 4, "{log:?}");
    let text = people[2]["text"].as_str().unwrap();
    assert!(
        text.starts_with("the film and the plan\n[video: film.mp4 — not kept")
            && text.contains("[file: plan.pdf — not received: Slack has no such file"),
        "{text}"
    );
    let text = people[3]["text"].as_str().unwrap();
    assert!(
        text.starts_with("[file: list.txt — not received: Slack answered with its sign-in page"),
        "{text}"
    );
    let serve_log = std::fs::read_to_string(home.path().join("serve.log")).unwrap();
    for text in notes.iter().copied().chain([serve_log.as_str()]) {
        assert!(!text.contains(BOT_TOKEN), "the token leaked");
    }
}
