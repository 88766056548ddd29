//! The live stream under load and hostile text, against a real `g2 serve`:
//! concurrent posters and many listeners (every message once, in `seq`
//! order, `Last-Event-ID` resuming), control characters refused in names
//! and printed inert by the real `g2 chat`. The groups need a trigger, so
//! no agent starts.

use std::io::{Read, Write};
use std::process::Stdio;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::steps::quiet_family;
use crate::support::*;

const POSTERS: usize = 8;
const PER_POSTER: usize = 1000;
const LISTENERS: usize = 50;

/// Opens a chat's stream (live, or after `last` with `Last-Event-ID`).
async fn open(base: &str, folder: &str, last: Option<i64>) -> reqwest::Response {
    let mut req = http_client().get(format!("{base}/api/groups/{folder}/stream"));
    if let Some(l) = last {
        req = req.header("last-event-id", l.to_string());
    }
    let resp = req.send().await.unwrap();
    assert_eq!(resp.status(), 200);
    resp
}

/// Reads `want` messages from an open stream; when the server closes it
/// (a listener that fell behind), reconnects with `Last-Event-ID` as a
/// browser would. Returns the seqs in arrival order and the reconnects.
async fn listen(base: String, first: reqwest::Response, want: usize) -> (Vec<i64>, usize) {
    let (mut seqs, mut reconnects, mut resp) = (Vec::with_capacity(want), 0, first);
    loop {
        let mut messages = std::pin::pin!(g2_host::chat::message_stream(resp));
        while let Some(m) = messages.next().await {
            seqs.push(m.seq);
            if seqs.len() == want {
                return (seqs, reconnects);
            }
        }
        reconnects += 1;
        assert!(reconnects < 100, "the stream keeps closing");
        resp = open(&base, "family", seqs.last().copied()).await;
    }
}

/// Every message of a chat, through the API, in `seq` order.
async fn stored_seqs(base: &str, folder: &str) -> Vec<i64> {
    let mut all = Vec::new();
    loop {
        let after = all.last().copied().unwrap_or(0);
        let page = get_json(&format!(
            "{base}/api/groups/{folder}/messages?after={after}&limit=1000"
        ))
        .await;
        let page = page.as_array().unwrap();
        if page.is_empty() {
            return all;
        }
        all.extend(page.iter().map(|m| m["seq"].as_i64().unwrap()));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_listener_gets_every_message_once_in_seq_order() {
    let Some((_home, s)) = quiet_family(&[]) else {
        return;
    };
    let total = POSTERS * PER_POSTER;

    // The response headers come once the server has subscribed.
    let mut listeners = Vec::new();
    for _ in 0..LISTENERS {
        let first = open(&s.url, "family", None).await;
        listeners.push(tokio::spawn(listen(s.url.clone(), first, total)));
    }
    // One listener goes away part way and comes back with Last-Event-ID.
    let leaver = {
        let first = open(&s.url, "family", None).await;
        tokio::spawn(listen(s.url.clone(), first, total / 3))
    };

    let mut posters = Vec::new();
    for p in 0..POSTERS {
        let url = format!("{}/api/groups/family/messages", s.url);
        posters.push(tokio::spawn(async move {
            let c = http_client();
            for i in 0..PER_POSTER {
                let r = c
                    .post(&url)
                    .json(&json!({ "sender": format!("p{p}"), "text": format!("{p}/{i}") }))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status(), 202);
            }
        }));
    }
    for p in posters {
        p.await.unwrap();
    }
    let stored = stored_seqs(&s.url, "family").await;
    assert_eq!(stored.len(), total, "every post is stored");

    let mut reconnects = 0;
    for l in listeners {
        let (seqs, r) = l.await.unwrap();
        assert_eq!(
            seqs, stored,
            "a listener missed, repeated or reordered messages"
        );
        reconnects += r;
    }
    eprintln!(
        "{LISTENERS} listeners, {total} messages each, {reconnects} reconnects after falling behind"
    );

    // Back with Last-Event-ID: exactly the ones it missed, then what is new.
    let (before, _) = leaver.await.unwrap();
    let last = *before.last().unwrap();
    let missed: Vec<i64> = stored.iter().copied().filter(|&q| q > last).collect();
    assert!(!missed.is_empty());
    let resumed = open(&s.url, "family", Some(last)).await;
    let newer = post(&s.url, "family", "late", "after the reconnect").await;
    let (again, _) = listen(s.url.clone(), resumed, missed.len() + 1).await;
    assert_eq!(again[..missed.len()], missed[..]);
    assert_eq!(again[missed.len()], newer);
    // Last-Event-ID wins over ?after= (a browser reconnects to the same URL).
    let both = http_client()
        .get(format!("{}/api/groups/family/stream?after=0", s.url))
        .header("last-event-id", stored[total - 2].to_string())
        .send()
        .await
        .unwrap();
    let (tail, _) = listen(s.url.clone(), both, 2).await;
    assert_eq!(tail, [stored[total - 1], newer]);
    let bad = http_client()
        .get(format!("{}/api/groups/family/stream", s.url))
        .header("last-event-id", "x")
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
}

/// Whether printed bytes hold a raw control character (newline and tab
/// aside) or a bidi control.
fn raw_controls(out: &str) -> Vec<char> {
    out.chars()
        .filter(|&c| {
            (c.is_control() && c != '\n' && c != '\t') || g2_host::terminal::is_bidi_control(c)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_names_are_refused_and_stored_text_prints_inert_in_g2_chat() {
    let Some((home, s)) = quiet_family(&[]) else {
        return;
    };
    let c = http_client();
    let messages = format!("{}/api/groups/family/messages", s.url);

    // Control characters in names: 400, nothing stored.
    let evil = "evil\x1b]0;PWNED\x07\x1b[2J";
    for body in [
        json!({ "sender": evil, "text": "hi" }),
        json!({ "sender": "ok", "sender_name": evil, "text": "hi" }),
        json!({ "sender": "nul\u{0}", "text": "hi" }),
        json!({ "sender": "ok", "sender_name": "\u{202E}gnp.exe", "text": "hi" }),
    ] {
        let r = c.post(&messages).json(&body).send().await.unwrap();
        assert_eq!(r.status(), 400, "{body}");
        let e: Value = r.json().await.unwrap();
        assert!(
            e["error"]["message"]
                .as_str()
                .unwrap()
                .contains("control character"),
            "{e}"
        );
    }
    let r = c
        .post(format!("{}/api/groups", s.url))
        .json(&json!({ "folder": "x", "name": "bad\x1b[2Jname" }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let r = c
        .post(format!("{}/api/groups", s.url))
        .json(&json!({ "folder": "x\x1b", "name": "X" }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert!(stored_seqs(&s.url, "family").await.is_empty());

    // The real `g2 chat` on another user's terminal.
    let mut chat = home
        .command(&["chat", "family", "--url", &s.url, "--sender", "ann"], &[])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = chat.stdin.take().unwrap();
    let mut stdout = chat.stdout.take().unwrap();
    let printed = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stdout.read_to_end(&mut bytes);
        bytes
    });
    // Its line is posted after its stream is open: once it is stored, the
    // stream is listening.
    writeln!(stdin, "hello").unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while stored_seqs(&s.url, "family").await.is_empty() {
        assert!(Instant::now() < deadline, "g2 chat did not post");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Message text may hold anything; it is stored as received.
    let hostile = "look\x1b]0;PWNED\x07\x1b[2J\r\0over\u{202E}txt.exe\u{9b}31m";
    let r = c
        .post(&messages)
        .json(&json!({ "sender": "mallory", "text": hostile }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    // An assistant message with the same bytes, through the agent's IPC
    // (`send_message`), the way a reply reaches the chat.
    let ipc = home.path().join("data/ipc/family/messages");
    std::fs::create_dir_all(&ipc).unwrap();
    let req =
        json!({ "requestId": "r1", "type": "send_message", "text": format!("bot {hostile}") });
    std::fs::write(ipc.join(".r1.tmp"), req.to_string()).unwrap();
    std::fs::rename(ipc.join(".r1.tmp"), ipc.join("r1.json")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let all = get_json(&format!("{messages}?limit=10")).await;
        if all
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["from_bot"] == true)
        {
            assert_eq!(all[1]["text"], hostile, "stored as received");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the agent's message was not stored"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // stdin ends: g2 chat waits for the reply due and exits.
    drop(stdin);
    let status = chat.wait().unwrap();
    assert!(status.success());
    let out = String::from_utf8(printed.join().unwrap()).unwrap();
    assert!(
        out.contains(
            r"mallory: look\u{1b}]0;PWNED\u{7}\u{1b}[2J\u{d}\u{0}over\u{202e}txt.exe\u{9b}31m"
        ),
        "{out:?}"
    );
    assert!(out.contains(r"G2: bot look\u{1b}"), "{out:?}");
    assert!(
        !out.as_bytes()
            .iter()
            .any(|b| matches!(b, 0x1b | 0x07 | 0x00 | b'\r')),
        "{out:?}"
    );
    assert_eq!(raw_controls(&out), Vec::<char>::new(), "{out:?}");
}
