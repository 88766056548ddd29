//! The WhatsApp channel end to end: `g2 serve` with real Docker, the real
//! Claude Code and the offline model, against the local Graph API of
//! [`crate::graph_api`], which also plays Meta's side of the webhook:
//! chats with one person and groups, strangers, signatures, verification,
//! duplicates, long replies, throttling, statuses, a removed number, the
//! doctor, a host killed between receiving and replying, and files (voice
//! notes, photos, documents) fetched from the Graph API and kept.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::channel_support::{
    LongReply, assert_check, count, doctor_check, failing_reason, kill, long_ask, register,
    serve_env, serve_refused, stored,
};
use crate::graph_api::{
    self, ACCESS_TOKEN, APP_SECRET, Failure, GraphApi, NUMBER, PHONE_NUMBER_ID, VERIFY_TOKEN,
    deliver, deliver_signed, media, notification, text, wamid,
};
use crate::support::*;

/// `g2 serve`'s environment for the channel at `api`.
pub fn env(api: &GraphApi) -> Vec<(&'static str, String)> {
    vec![
        ("G2_CHANNELS__WHATSAPP__ENABLED", "true".into()),
        ("G2_CHANNELS__WHATSAPP__GRAPH_URL", api.url.clone()),
        (
            "G2_CHANNELS__WHATSAPP__API_VERSION",
            graph_api::VERSION.into(),
        ),
        (
            "G2_CHANNELS__WHATSAPP__PHONE_NUMBER_ID",
            PHONE_NUMBER_ID.into(),
        ),
        ("WHATSAPP_ACCESS_TOKEN", ACCESS_TOKEN.into()),
        ("WHATSAPP_APP_SECRET", APP_SECRET.into()),
        ("WHATSAPP_VERIFY_TOKEN", VERIFY_TOKEN.into()),
    ]
}

pub fn serve_with(home: &TestHome, api: &GraphApi, more: &[(&'static str, &str)]) -> Serve {
    serve_env(home, &env(api), more)
}

const ANN: &str = "16315551181";
const GROUP: &str = "G1club";

/// One text message's notification.
fn one(from: &str, name: &str, body: &str, group: Option<&str>) -> (String, Value) {
    let id = wamid();
    let n = notification(json!([text(&id, from, name, body, group)]), json!([]));
    (id, n)
}

/// Registers Ann's chat and, with `club`, the group.
fn register_chats(home: &TestHome, club: bool) {
    register(home, "ann", &format!("wa:{ANN}"), "Ann");
    if club {
        register(home, "club", &format!("wa:g:{GROUP}"), "Club");
    }
}

/// The local Graph API, a home with Ann's chat and the club registered,
/// and `g2 serve`; None when the agent image is missing (a skip, or a
/// failure under CI).
async fn started() -> Option<(GraphApi, TestHome, Serve)> {
    if !image_ready() {
        return None;
    }
    let api = GraphApi::start().await;
    let home = TestHome::new();
    register_chats(&home, true);
    let s = serve_with(&home, &api, &[]);
    Some((api, home, s))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chats_and_mentions_are_answered_once_and_strangers_get_nothing() {
    let Some((api, home, s)) = started().await else {
        return;
    };

    // One person: every message addresses the assistant; no quote.
    deliver(&s.url, &one(ANN, "Ann", "hello from ann", None).1).await;
    let sent = api.wait_sent(ANN, 1, 120).await;
    assert!(sent[0].text.contains("hello from ann"), "{sent:?}");
    assert_eq!(sent[0].recipient_type, "individual");
    assert_eq!(sent[0].quote, None);

    // A group: only a mention of the number, answered quoting it.
    deliver(
        &s.url,
        &one("16315550002", "Bob", "we need milk", Some(GROUP)).1,
    )
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(api.sent_to(GROUP).is_empty(), "no mention, no answer");
    let (asked, n) = one(
        "16315550003",
        "Cy",
        &format!("@{NUMBER} what do we need?"),
        Some(GROUP),
    );
    deliver(&s.url, &n).await;
    let sent = api.wait_sent(GROUP, 1, 120).await;
    assert_eq!(sent[0].recipient_type, "group");
    assert_eq!(sent[0].quote.as_deref(), Some(asked.as_str()));
    assert!(
        sent[0].text.contains("we need milk"),
        "the context: {:?}",
        sent[0]
    );
    let log = stored(&s.url, "club").await;
    assert_eq!(log[0]["sender_name"], "Bob", "{log:?}");

    // A chat that is not registered: nothing sent, nothing stored.
    deliver(&s.url, &one("19995550000", "Dee", "hi?", None).1).await;
    deliver(
        &s.url,
        &one(
            "19995550000",
            "Dee",
            &format!("@{NUMBER} hi"),
            Some("Gstranger"),
        )
        .1,
    )
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(api.sent_to("19995550000").is_empty() && api.sent_to("Gstranger").is_empty());
    assert_eq!(
        count(
            &home,
            "SELECT COUNT(*) FROM messages WHERE chat_jid IN ('wa:19995550000', 'wa:g:Gstranger')"
        )
        .await,
        0
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(api.sent_to(ANN).len(), 1, "answered once");
    assert_eq!(api.sent_to(GROUP).len(), 1, "answered once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_webhook_checks_signatures_verification_and_duplicates() {
    let api = GraphApi::start().await;
    let home = TestHome::new();
    // A group whose messages are stored but, with no mention, not answered.
    register(&home, "club", &format!("wa:g:{GROUP}"), "Club");
    let s = serve_with(&home, &api, &[]);
    let (_, n) = one("16315550002", "Bob", "first", Some(GROUP));
    assert_eq!(deliver_signed(&s.url, &n, None).await, 401, "unsigned");
    assert_eq!(
        deliver_signed(&s.url, &n, Some("not-the-secret")).await,
        401,
        "wrong secret"
    );
    assert!(stored(&s.url, "club").await.is_empty(), "nothing stored");
    // Signed: stored before the 200; delivered again: stored once.
    deliver(&s.url, &n).await;
    assert_eq!(stored(&s.url, "club").await.len(), 1);
    deliver(&s.url, &n).await;
    let log = stored(&s.url, "club").await;
    assert_eq!(log.len(), 1, "{log:?}");
    assert_eq!(log[0]["text"], "first");
    // Signed but not JSON: refused, nothing lost or stored.
    let c = http_client();
    let body = b"{not json".to_vec();
    let r = c
        .post(format!("{}/webhooks/whatsapp", s.url))
        .header(
            "x-hub-signature-256",
            graph_api::signature(&body, APP_SECRET),
        )
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    // Meta's verification GET: the challenge only with our verify token.
    let verify = |token: &str, mode: &str| {
        format!(
            "{}/webhooks/whatsapp?hub.mode={mode}&hub.verify_token={token}&hub.challenge=1158201444",
            s.url
        )
    };
    let r = c
        .get(verify(VERIFY_TOKEN, "subscribe"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.text().await.unwrap(), "1158201444");
    for url in [
        verify("wrong", "subscribe"),
        verify(VERIFY_TOKEN, "unsubscribe"),
    ] {
        assert_eq!(c.get(url).send().await.unwrap().status(), 403);
    }
    // The webhook is not under the API's token or its routes.
    assert_eq!(
        c.post(format!("{}/api/webhooks/whatsapp", s.url))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_replies_throttling_statuses_and_a_removed_number() {
    let Some((api, home, s)) = started().await else {
        return;
    };

    // Three results of ~1,900 characters, in paragraphs: over 5,000.
    api.fail_next_send(Failure::Throttled);
    let asked_at = Instant::now();
    deliver(&s.url, &one(ANN, "Ann", &long_ask(26), None).1).await;
    let sent = api.wait_sent(ANN, 2, 180).await;
    let reply = LongReply {
        parts: 2,
        paragraphs: 26,
        over: 5000,
        fits: |t| t.chars().count() <= 4096,
        waited: Duration::from_secs(5),
    };
    let parts: Vec<_> = sent.iter().map(|m| (m.text.clone(), m.at)).collect();
    reply
        .check(&parts, asked_at, || api.sent_to(ANN).len())
        .await;
    assert_eq!(api.rejected(), 1, "one throttling answer");

    // Statuses are recorded against the parts they name.
    let status = |id: &str, st: &str| json!({ "id": id, "status": st, "timestamp": "1760000100", "recipient_id": ANN });
    deliver(
        &s.url,
        &notification(
            json!([]),
            json!([
                status(&sent[0].id, "delivered"),
                status(&sent[1].id, "read")
            ]),
        ),
    )
    .await;
    let receipts: Vec<String> = home
        .store()
        .read(|c| {
            c.query_all(
                "SELECT COALESCE(receipt, '-') FROM deliveries ORDER BY part",
                (),
                |r| r.get(0),
            )
        })
        .await
        .unwrap();
    assert_eq!(receipts, vec!["delivered", "read"]);

    // The number removed from a group: the group is marked failing.
    api.fail_next_send(Failure::NotInGroup);
    deliver(
        &s.url,
        &one(
            "16315550003",
            "Cy",
            &format!("@{NUMBER} still there?"),
            Some(GROUP),
        )
        .1,
    )
    .await;
    let e = failing_reason(&s.url, "club", 120).await;
    assert!(e.contains("131041"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_checks_the_credentials_with_the_graph_api() {
    let api = GraphApi::start().await;
    let url = api.url.clone();
    let (good, bad, missing, off) = tokio::task::spawn_blocking(move || {
        let (home, home2) = (TestHome::new(), TestHome::new());
        let env = [
            ("G2_CHANNELS__WHATSAPP__ENABLED", "true"),
            ("G2_CHANNELS__WHATSAPP__GRAPH_URL", url.as_str()),
            ("G2_CHANNELS__WHATSAPP__PHONE_NUMBER_ID", PHONE_NUMBER_ID),
            ("WHATSAPP_ACCESS_TOKEN", ACCESS_TOKEN),
            ("WHATSAPP_APP_SECRET", APP_SECRET),
            ("WHATSAPP_VERIFY_TOKEN", VERIFY_TOKEN),
        ];
        let check = |home: &TestHome, env: &[(&str, &str)]| doctor_check(home, env, "whatsapp");
        let good = check(&home, &env);
        let mut wrong = env;
        wrong[3] = ("WHATSAPP_ACCESS_TOKEN", "EAAwrong-token-wrong-token");
        let bad = check(&home, &wrong);
        let missing = check(&home, &env[..4]);
        let off = check(&home2, &[]);
        (good, bad, missing, off)
    })
    .await
    .unwrap();
    assert_check(&good, true, &["+1 555-078-3881"], &[]);
    assert_check(&bad, false, &["refused the access token"], &["EAAwrong"]);
    let secrets = ["WHATSAPP_APP_SECRET", "WHATSAPP_VERIFY_TOKEN"];
    assert_check(&missing, false, &secrets, &["WHATSAPP_ACCESS_TOKEN"]);
    assert_check(&off, true, &["not enabled"], &[]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_refuses_to_start_the_channel_without_its_secrets() {
    let api = GraphApi::start().await;
    let err = serve_refused(env(&api), "WHATSAPP_VERIFY_TOKEN").await;
    assert!(
        err.contains("WHATSAPP_VERIFY_TOKEN") && !err.contains(APP_SECRET),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_killed_between_receiving_and_replying_answers_once() {
    if !image_ready() {
        return;
    }
    let api = GraphApi::start().await;
    let home = TestHome::new();
    register_chats(&home, false);
    let mut s = serve_with(&home, &api, &[]);
    // Stored before the 200; the host dies while the agent works.
    deliver(
        &s.url,
        &one(ANN, "Ann", "g2:bash sleep 4; echo slow-answer", None).1,
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    kill(&mut s);
    assert!(api.sent_to(ANN).is_empty());
    let s = serve_with(&home, &api, &[]);
    let sent = api.wait_sent(ANN, 1, 180).await;
    assert!(sent[0].text.contains("slow-answer"), "{sent:?}");
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(api.sent_to(ANN).len(), 1, "answered once");

    // The Graph API takes a reply and the host dies before hearing back:
    // never sent again.
    api.fail_next_send(Failure::Hold);
    deliver(&s.url, &one(ANN, "Ann", "second question", None).1).await;
    api.wait_sent(ANN, 2, 120).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut s = s;
    kill(&mut s);
    let s = serve_with(&home, &api, &[]);
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(api.sent_to(ANN).len(), 2, "not sent again");
    let answers = stored(&s.url, "ann").await;
    assert_eq!(
        answers.iter().filter(|m| m["from_bot"] == true).count(),
        2,
        "{answers:?}"
    );
}

/// A voice note, a photo and documents, fetched the Cloud API's way (the
/// media id's description, then its URL with the token): the voice note
/// arrives as its transcript, the photo is kept where the agent's turn
/// lists it, and a file announced over the limit (never downloaded) and
/// one the Graph API does not know are each named in the stored message,
/// the chat told why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn voice_notes_photos_and_documents_are_fetched_kept_and_named() {
    use crate::media::{PNG, SAID, voice_note};
    let Some(voice) = voice_note(SAID) else {
        return;
    };
    let Some((api, home, s)) = started().await else {
        return;
    };
    let one_file = |from: &str, name: &str, kind: &str, m: Value| {
        notification(
            json!([media(&wamid(), from, name, kind, m, Some(GROUP))]),
            json!([]),
        )
    };
    // A voice note (not addressed), then a photo that asks for the files.
    let ogg = "audio/ogg; codecs=opus";
    let v = api.add_media(voice.clone(), ogg);
    let n = one_file(
        "16315550002",
        "Bob",
        "audio",
        json!({ "id": v, "mime_type": ogg, "sha256": "x", "voice": true }),
    );
    deliver(&s.url, &n).await;
    let p = api.add_media(PNG.to_vec(), "image/jpeg");
    let photo = one_file(
        "16315550003",
        "Cy",
        "image",
        json!({ "id": p, "mime_type": "image/jpeg", "sha256": "x",
            "caption": format!("@{NUMBER} g2:attachments") }),
    );
    deliver(&s.url, &photo).await;
    let sent = api.wait_sent(GROUP, 1, 240).await;
    let listed = &sent[0].text;
    assert_eq!(
        listed.matches("/workspace/group/media/").count(),
        2,
        "{listed}"
    );
    assert_eq!(api.downloads(), [v.clone(), p.clone()]);
    let log = stored(&s.url, "club").await;
    assert_eq!(log[1]["text"], format!("@{NUMBER} g2:attachments"));
    // Delivered again: stored once, its file not fetched again.
    deliver(&s.url, &photo).await;
    assert_eq!(api.downloads().len(), 2);
    assert_eq!(stored(&s.url, "club").await.len(), log.len());
    // The media URL serves only with the token.
    let c = http_client();
    let described: Value = c
        .get(format!("{}/{}/{p}", api.url, graph_api::VERSION))
        .bearer_auth(ACCESS_TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let url = described["url"].as_str().unwrap();
    assert_eq!(c.get(url).send().await.unwrap().status(), 401);

    // Announced over the limit (never downloaded), and an unknown id.
    let huge = api.add_media_announced(b"not this".to_vec(), "video/mp4", 30_000_000);
    let n = one_file(
        "16315550002",
        "Bob",
        "document",
        json!({ "id": huge, "mime_type": "video/mp4", "filename": "film.mp4",
            "caption": "the film" }),
    );
    deliver(&s.url, &n).await;
    let n = one_file(
        "16315550002",
        "Bob",
        "document",
        json!({ "id": "4040404040404040", "mime_type": "application/pdf",
            "filename": "plan.pdf" }),
    );
    deliver(&s.url, &n).await;
    let sent = api.wait_sent(GROUP, 3, 120).await;
    let notes: Vec<&str> = sent[1..].iter().map(|m| m.text.as_str()).collect();
    assert!(
        notes[0].starts_with("Not everything you sent reached me: ")
            && notes[0].contains("film.mp4: not kept: 28.6 MB is over the 20 MB limit"),
        "{notes:?}"
    );
    assert!(
        notes[1].contains("plan.pdf: not received: the Graph API did not give the file")
            && notes[1].contains("code 100"),
        "{notes:?}"
    );
    assert!(!notes.iter().any(|n| n.contains(ACCESS_TOKEN)), "{notes:?}");
    assert!(api.media_asks().contains(&huge));
    assert!(!api.downloads().contains(&huge));
    crate::media::assert_stored_as_sent(&home, &s.url, "club").await;
    let log = std::fs::read_to_string(home.path().join("serve.log")).unwrap();
    assert!(!log.contains(ACCESS_TOKEN));
}
