//! No secret survives in another encoding: a home whose host holds an API
//! token and a model key, with real Docker, the real Claude Code and the
//! offline model. People paste both in every shape (base64 at each
//! alignment, URL-safe base64, percent-encoded, hex, spaced out, split over
//! two lines), with assignments (`SECRET_KEY=`, `export X_TOKEN="…"`, a
//! YAML block) and private spans in escaped spellings; the agent runs a
//! tool that prints them, remembers one, schedules a task with one, and
//! the session is cleared under a name holding the token. Afterwards no
//! file of the home holds any of them in any shape, but Claude Code's own
//! transcripts (docs/memory.md).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::Value;

use crate::privacy::{files_under, is_transcript, wait_last_summary};
use crate::support::*;

// The leak oracle, shared with the redactor's unit tests.
#[path = "../leak_oracle.rs"]
mod leak_oracle;
use leak_oracle::leaks;

/// Values that must be gone wherever they were assigned or marked private.
const NEEDLES: &[&str] = &[
    "ASSIGNED-7731-SK",
    "ASSIGNED-7732-TK",
    "ASSIGNED-7733-YB",
    "PRIV-8841-WS",
    "PRIV-8842-JS",
    "PRIV-8843-JJ",
    "PRIV-8844-HT",
    "PRIV-8845-NL",
];

/// Made up for this run: nothing real, and never in the repository.
fn credentials() -> (String, String) {
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut bytes = Vec::new();
    for _ in 0..4 {
        bytes.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
    }
    let mut pick = bytes
        .iter()
        .map(|b| alphabet[usize::from(*b) % alphabet.len()] as char);
    let mut take = |n: usize| -> String { pick.by_ref().take(n).collect() };
    let key = format!("sk-ant-api03-{}-{}AA", take(40), take(8));
    let token = format!("g2t-{}", take(20));
    (key, token)
}

fn pct(s: &str) -> String {
    s.bytes().map(|b| format!("%{b:02X}")).collect()
}

fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

fn spaced(s: &str) -> String {
    s.chars().map(|c| format!("{c} ")).collect()
}

/// The message carrying every shape.
fn shapes_message(key: &str, token: &str) -> String {
    let half = key.len() / 2;
    [
        format!("offset 0: {}", STANDARD.encode(key)),
        format!("offset 1: {}", STANDARD.encode(format!("x{key}\n"))),
        format!("offset 2: {}", STANDARD.encode(format!("xy{token}!"))),
        format!(
            "url-safe: {}",
            URL_SAFE_NO_PAD.encode(format!("Authorization: Bearer {token}"))
        ),
        format!("percent: {}", pct(token)),
        format!(
            "partly percent: {}%2D{}",
            &key[..6],
            key[7..].replace('-', "%2d")
        ),
        format!("hex: {}", hex(token)),
        format!("HEX: {}", hex(key).to_uppercase()),
        format!("spaced: {}", spaced(token)),
        format!("split: {}\n{}", &key[..half], &key[half..]),
        format!("broken: {} {}", &key[..7], &key[7..]),
        "SECRET_KEY=ASSIGNED-7731-SK".into(),
        "export DEPLOY_TOKEN=\"ASSIGNED-7732-TK\"".into(),
        "db:\n  password: |\n    ASSIGNED-7733-YB\n  host: x".into(),
        "< private >PRIV-8841-WS</ private >".into(),
        r"\u003cprivate\u003ePRIV-8842-JS\u003c/private\u003e".into(),
        r"\\u003cPRIVATE\\u003ePRIV-8843-JJ\\u003c/private\\u003e".into(),
        "&lt;private&gt;PRIV-8844-HT&lt;/private&gt;".into(),
        "<\nprivate>PRIV-8845-NL</private>".into(),
        "pier 7 is where the boat is".into(),
    ]
    .join("\n")
}

/// Every regular file of the home (links not followed) but Claude Code's
/// transcripts, the one raw copy g2 never writes (docs/memory.md), that
/// holds a credential in some shape, or a needle: the file and what.
fn leaking_files(home: &Path, creds: &[(&str, &str)]) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    for p in files_under(home).into_iter().filter(|p| !is_transcript(p)) {
        let bytes = std::fs::read(&p).unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes);
        for (name, secret) in creds {
            if leaks(&text, secret) {
                out.push((p.clone(), name.to_string()));
            }
        }
        for n in NEEDLES {
            if text.contains(n) {
                out.push((p.clone(), n.to_string()));
            }
        }
    }
    out
}

/// The API, with the home's token.
struct Client {
    http: reqwest::Client,
    url: String,
    token: String,
}

impl Client {
    async fn get(&self, path: &str) -> Value {
        let r = self
            .http
            .get(format!("{}/api{path}", self.url))
            .bearer_auth(&self.token)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "GET {path}");
        r.json().await.unwrap()
    }

    async fn bot_count(&self) -> usize {
        let all = self.get("/groups/main/messages?limit=1000").await;
        all.as_array()
            .unwrap()
            .iter()
            .filter(|m| m["from_bot"] == true)
            .count()
    }

    /// Posts `text` as Ann and waits for the assistant's next reply.
    async fn ask(&self, text: &str) -> String {
        let before = self.bot_count().await;
        let token = Some(self.token.as_str());
        shared::post_message(&self.http, &self.url, token, "main", ("Ann", text)).await;
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            let all = self.get("/groups/main/messages?limit=1000").await;
            let bots: Vec<&Value> = all
                .as_array()
                .unwrap()
                .iter()
                .filter(|m| m["from_bot"] == true)
                .collect();
            if bots.len() > before {
                return bots[bots.len() - 1]["text"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
            }
            assert!(Instant::now() < deadline, "no reply to {text:?}");
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }

    /// Polls `path` until `ok` says yes (at most 90 s).
    async fn until(&self, path: &str, ok: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let v = self.get(path).await;
            if ok(&v) {
                return v;
            }
            assert!(Instant::now() < deadline, "{path}: {v}");
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_in_any_encoding_leave_no_trace_in_the_home() {
    if !image_ready() {
        return;
    }
    let (key, token) = credentials();
    let home = TestHome::new();
    let s = serve(
        &home,
        &[
            ("G2_API__TOKEN", &token),
            ("ANTHROPIC_API_KEY", &key),
            ("G2_PROVIDER", "offline"),
            ("G2_MEMORY__PROCESS_INTERVAL_SECS", "1"),
        ],
    );
    let api = Client {
        http: http_client(),
        url: s.url.clone(),
        token: token.clone(),
    };

    // Every shape, in a message the agent reads (and the offline model
    // repeats).
    let first = api.ask(&shapes_message(&key, &token)).await;
    assert!(first.contains("received"), "{first}");
    // A tool prints them: its input and output are captured.
    let b64_token = STANDARD.encode(format!("a{token}"));
    let half = key.len() / 2;
    let second = api
        .ask(&format!(
            "g2:bash printf '%s\\n' '{b64_token}' '{}' '{}' '{}' 'SECRET_KEY=ASSIGNED-7731-SK'",
            &key[..half],
            &key[half..],
            pct(&token)
        ))
        .await;
    // The tool printed them (four lines and the assignment); the log
    // keeps the reply without them once it is published (the stream's
    // listeners had it as written, so the log is cleaned just after).
    let last_reply = |v: &Value| {
        v.as_array()
            .into_iter()
            .flatten()
            .rev()
            .find(|m| m["from_bot"] == true)
            .map(|m| m["text"].as_str().unwrap_or_default().to_string())
            .unwrap_or_default()
    };
    let second = if second.contains("[redacted:") {
        second
    } else {
        let log = api
            .until("/groups/main/messages?limit=1000", |v| {
                last_reply(v).contains("[redacted:")
            })
            .await;
        last_reply(&log)
    };
    assert!(
        second.matches("[redacted:credential]").count() >= 4
            && second.contains("SECRET_KEY=[redacted:assignment]")
            && !second.contains(&b64_token),
        "the tool printed it: {second}"
    );
    // Remembered, and a task's prompt: both stored.
    let third = api
        .ask(&format!(
            "g2:memory-remember the deploy token is {} and spaced {}",
            hex(&token),
            spaced(&token)
        ))
        .await;
    assert!(third.contains("Remembered"), "{third}");
    let fourth = api
        .ask(&format!(
            "g2:schedule once 2099-01-01T09:00:00 deploy with {} then report",
            STANDARD.encode(&token)
        ))
        .await;
    assert!(fourth.contains("Scheduled task"), "{fourth}");
    api.until("/groups/main/memory/observations", |v| {
        v.as_array().is_some_and(|a| !a.is_empty())
    })
    .await;
    // Cleared under a name that holds the token.
    let cleared = api.ask(&format!("g2:clear Trip {token} notes")).await;
    assert!(cleared.contains("bookmarked"), "{cleared}");
    let history = api.get("/groups/main/sessions").await;
    let names: Vec<&str> = history
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|h| h["name"].as_str())
        .collect();
    assert_eq!(names, ["Trip [redacted:credential] notes"], "{history}");
    let memory = format!("{}/api/groups/main/memory", s.url);
    wait_last_summary(&memory, Some(&token)).await;

    // The log still says what was said, without the secrets.
    let log = api.get("/groups/main/messages?limit=1000").await;
    let texts: Vec<&str> = log
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["text"].as_str())
        .collect();
    assert!(texts.iter().any(|t| t.contains("pier 7")), "{texts:?}");
    assert!(
        texts
            .iter()
            .any(|t| t.contains("[redacted:credential]") && t.contains("offset 1:")),
        "{texts:?}"
    );
    // No file of the home holds any of it (the WAL is truncated after a
    // cleaning: give it a moment), but the transcripts.
    let creds = [
        ("the model key", key.as_str()),
        ("the API token", token.as_str()),
    ];
    let deadline = Instant::now() + Duration::from_secs(20);
    let left = loop {
        let left = leaking_files(home.path(), &creds);
        if left.is_empty() || Instant::now() > deadline {
            break left;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert_eq!(left, Vec::<(PathBuf, String)>::new());
    // The transcripts do hold them: the scan can see what it looks for.
    let raw: String = files_under(&home.path().join("data/sessions/main"))
        .iter()
        .filter(|p| is_transcript(p))
        .map(|p| std::fs::read_to_string(p).unwrap_or_default())
        .collect();
    assert!(leaks(&raw, &key) && leaks(&raw, &token));
    assert!(NEEDLES.iter().all(|n| raw.contains(n)), "the transcripts");
    // The archive says what was said, without them.
    let archives = home.archives("main");
    let md = std::fs::read_to_string(&archives[0]).unwrap();
    assert!(md.contains("pier 7") && md.contains("Trip"), "{md}");
}
