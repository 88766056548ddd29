//! Voice notes and photos through the HTTP API, with real Docker, the real
//! Claude Code, the offline model and `g2 serve`: speech synthesised on
//! this machine (espeak-ng) and encoded as a voice note (OGG/Opus, as the
//! chat apps send it) arrives as a transcript in the message, is archived
//! and recalled; a photo is kept in the group's folder and the agent's turn
//! lists it where the envelope says; a file over the limit and a "photo"
//! that is not one are named in the message with why, and the sender told;
//! another group's agent cannot see the files.

use std::process::Command;

use serde_json::Value;

use crate::support::*;

/// The sentence spoken, and the content words the transcript must hold.
pub const SAID: &str = "The blue boat is kept at the north harbour near the old lighthouse.";
const WORDS: [&str; 5] = ["blue", "boat", "kept", "north", "lighthouse"];

/// A voice note of `text`: espeak-ng's WAV encoded by opusenc, as bytes.
/// `None` outside CI when either tool is missing (a CI run fails).
pub fn voice_note(text: &str) -> Option<Vec<u8>> {
    let have = |tool: &str| {
        Command::new(tool)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !require(
        "espeak-ng and opusenc (Debian espeak-ng, opus-tools)",
        have("espeak-ng") && have("opusenc"),
    ) {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let (wav, ogg) = (dir.path().join("said.wav"), dir.path().join("said.ogg"));
    let ok = Command::new("espeak-ng")
        .arg("-w")
        .arg(&wav)
        .arg(text)
        .status()
        .unwrap();
    assert!(ok.success(), "espeak-ng failed");
    let ok = Command::new("opusenc")
        .args(["--quiet"])
        .arg(&wav)
        .arg(&ogg)
        .status()
        .unwrap();
    assert!(ok.success(), "opusenc failed");
    Some(std::fs::read(ogg).unwrap())
}

/// A small real PNG (1×1).
pub const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0xf0,
    0x1f, 0x00, 0x05, 0x00, 0x01, 0xff, 0x89, 0x99, 0x3d, 0x1d, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

/// Posts a multipart message: text fields, then `(file name, content
/// type, bytes)` parts; the status and the JSON answer.
pub async fn post_form(
    base: &str,
    folder: &str,
    fields: &[(&str, &str)],
    files: &[(&str, &str, &[u8])],
) -> (u16, Value) {
    let boundary = "g2-test-boundary-7d1f";
    let mut body = Vec::new();
    for (k, v) in fields {
        body.extend_from_slice(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{k}\"\r\n\r\n{v}\r\n")
                .as_bytes(),
        );
    }
    for (name, ty, bytes) in files {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\nContent-Type: {ty}\r\n\r\n"
            )
            .as_bytes(),
        );
        body.extend_from_slice(bytes);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    let r = http_client()
        .post(format!("{base}/api/groups/{folder}/messages"))
        .header(
            "content-type",
            format!("multipart/form-data; boundary={boundary}"),
        )
        .body(body)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// How many of [`WORDS`] a text holds.
pub fn heard(text: &str) -> usize {
    let t = text.to_lowercase();
    WORDS.iter().filter(|w| t.contains(*w)).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voice_note_and_a_photo_reach_the_agent_memory_and_archive() {
    let Some(voice) = voice_note(SAID) else {
        return;
    };
    if !image_ready() {
        return;
    }
    let home = home_with_family();
    home.ok(&["groups", "add", "other", "--name", "Other", "--no-trigger"]);
    let s = serve(&home, &[]);
    let (status, answer) = post_form(
        &s.url,
        "family",
        &[("sender", "ann"), ("text", "g2:attachments")],
        &[
            ("note.ogg", "audio/ogg; codecs=opus", &voice),
            ("cat.png", "image/png", PNG),
        ],
    )
    .await;
    assert_eq!(status, 202, "{answer}");
    let files = answer["attachments"]
        .as_array()
        .expect("the answer names the files");
    assert_eq!(files.len(), 2, "{answer}");
    assert_eq!(answer["notes"], serde_json::json!([]), "{answer}");
    assert_eq!(
        (files[0]["kind"].as_str(), files[0]["type"].as_str()),
        (Some("audio"), Some("audio/ogg"))
    );
    assert!(
        files[0]["seconds"]
            .as_u64()
            .is_some_and(|s| (2..=10).contains(&s)),
        "{answer}"
    );
    assert_eq!(files[1]["type"], "image/png");
    // Kept in the group's own folder, where the paths say.
    let paths: Vec<String> = files
        .iter()
        .map(|f| f["path"].as_str().unwrap().to_string())
        .collect();
    for p in &paths {
        assert!(p.starts_with("media/") && !p.contains(".."), "{p}");
        assert!(
            home.path().join("groups/family").join(p).is_file(),
            "{p} is not in the group's folder"
        );
    }
    assert_eq!(
        std::fs::read(home.path().join("groups/family").join(&paths[1])).unwrap(),
        PNG
    );
    // The transcript is the message's text, marked as such.
    let log = get_json(&format!("{}/api/groups/family/messages", s.url)).await;
    let text = log[0]["text"].as_str().unwrap().to_string();
    assert!(text.starts_with("g2:attachments\n[audio 0:0"), "{text}");
    assert!(
        heard(&text) >= 4,
        "the transcript misses the sentence's words: {text}"
    );
    // The agent's turn lists both files at the paths the envelope names.
    let reply = wait_bot(&s.url, "family", 1, 240).await;
    for p in &paths {
        assert!(
            reply[0].contains(&format!("/workspace/group/{p}")),
            "{reply:?}"
        );
    }
    assert!(
        reply[0].contains(&format!(" {} ", PNG.len())),
        "the listing shows the photo's size: {reply:?}"
    );
    // Another group's agent finds none of them.
    post(&s.url, "other", "bob", "g2:bash find / -xdev -path /proc -prune -o -name '*-note.ogg' -print 2>/dev/null | wc -l; ls /workspace/group/media 2>&1 | head -1").await;
    let other = wait_bot(&s.url, "other", 1, 240).await;
    assert!(
        other[0].contains(": 0\n") || other[0].contains(": 0 "),
        "{other:?}"
    );
    assert!(other[0].contains("No such file"), "{other:?}");
    // Archived on a clear, with a link to the file, and recalled by what was said.
    let r = http_client()
        .post(format!("{}/api/groups/family/session/clear", s.url))
        .json(&serde_json::json!({ "name": "voice" }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let conv = home.path().join("groups/family/conversations");
    let archive = std::fs::read_dir(&conv)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "md"))
        .expect("an archive");
    let md = std::fs::read_to_string(&archive).unwrap();
    assert!(
        md.contains(&format!("(../{})", paths[0])),
        "no link to the voice note: {md}"
    );
    assert!(heard(&md) >= 4, "{md}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let hits = home.json(&[
            "memory",
            "search",
            "where is the boat kept",
            "--group",
            "family",
        ]);
        let found = hits
            .as_array()
            .unwrap()
            .iter()
            .any(|h| heard(h["snippet"].as_str().unwrap_or("")) >= 2);
        if found {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "memory never recalled the voice note: {hits:#}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_over_the_limit_or_not_what_it_claims_is_named_and_the_sender_told() {
    let Some(voice) = voice_note(SAID) else {
        return;
    };
    if !image_ready() {
        return;
    }
    let home = home_with_family();
    let s = serve(
        &home,
        &[
            ("G2_MEDIA__MAX_BYTES", "65536"),
            ("G2_MEDIA__TRANSCRIBE", "false"),
        ],
    );
    let big = vec![7u8; 100_000];
    let (status, answer) = post_form(
        &s.url,
        "family",
        &[("sender", "ann"), ("text", "two files")],
        &[
            ("big.bin", "application/octet-stream", &big),
            ("photo.png", "image/png", b"this is no picture"),
        ],
    )
    .await;
    assert_eq!(status, 202, "{answer}");
    let notes: Vec<String> = serde_json::from_value(answer["notes"].clone()).unwrap();
    assert_eq!(notes.len(), 2, "{answer}");
    assert!(
        notes[0].starts_with("big.bin: not kept:") && notes[0].contains("over the 64 KB limit"),
        "{notes:?}"
    );
    assert!(
        notes[1].contains("sent as image/png but its bytes are text/plain"),
        "{notes:?}"
    );
    let files = answer["attachments"].as_array().unwrap();
    assert!(files.iter().all(|f| f.get("path").is_none()), "{answer}");
    assert!(
        !home.path().join("groups/family/media").exists()
            || std::fs::read_dir(home.path().join("groups/family/media"))
                .unwrap()
                .count()
                == 0
    );
    // The message is stored, saying what came and why it was not kept.
    let log = get_json(&format!("{}/api/groups/family/messages", s.url)).await;
    let text = log[0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("two files\n[file: big.bin — not kept:"),
        "{text}"
    );
    assert!(
        text.contains("[image: photo.png — not kept: it was sent as image/png"),
        "{text}"
    );
    assert_eq!(log[0]["attachments"].as_array().unwrap().len(), 2);
    // And the agent hears of it like any message.
    let reply = wait_bot(&s.url, "family", 1, 240).await;
    assert!(reply[0].contains("two files"), "{reply:?}");
    // With transcription off, a voice note is kept and its text names it.
    let (status, answer) = post_form(
        &s.url,
        "family",
        &[("sender", "ann")],
        &[("note.ogg", "audio/ogg", &voice)],
    )
    .await;
    assert_eq!(status, 202, "{answer}");
    let path = answer["attachments"][0]["path"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(home.path().join("groups/family").join(&path).is_file());
    let log = get_json(&format!("{}/api/groups/family/messages", s.url)).await;
    let last = log
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["from_bot"] == false)
        .unwrap();
    assert_eq!(last["text"], format!("[audio: {path}]"));
}

/// A chat app's media test, as stored: the people's messages are a voice
/// note heard (its file in the group's folder), a photo kept, a film
/// announced over the limit and a document whose download failed, each of
/// the last two named in its text with why. The people's messages.
pub async fn assert_stored_as_sent(home: &TestHome, base: &str, folder: &str) -> Vec<Value> {
    let log = crate::channel_support::stored(base, folder).await;
    let people: Vec<Value> = log.into_iter().filter(|m| m["from_bot"] == false).collect();
    assert_eq!(people.len(), 4, "{people:#?}");
    let text = |i: usize| people[i]["text"].as_str().unwrap_or_default().to_string();
    assert!(
        text(0).starts_with("[voice 0:0") && heard(&text(0)) >= 4,
        "{}",
        text(0)
    );
    assert_eq!(people[0]["attachments"][0]["kind"], "voice");
    for m in &people[..2] {
        let path = m["attachments"][0]["path"].as_str().unwrap_or_default();
        assert!(
            path.starts_with("media/")
                && home.path().join("groups").join(folder).join(path).is_file(),
            "{m}"
        );
    }
    assert!(
        text(2).starts_with("the film\n[video: film.mp4 — not kept"),
        "{}",
        text(2)
    );
    assert!(
        text(3).contains("[file: plan.pdf — not received"),
        "{}",
        text(3)
    );
    people
}
