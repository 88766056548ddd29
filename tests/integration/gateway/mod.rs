//! The model gateway, end to end: the real `g2 gateway` process, real HTTP
//! over loopback TCP and Unix sockets, the real Claude Code CLI on the
//! offline model, and the `anthropic` provider against an upstream server
//! that replays recorded Anthropic answers (`tests/fixtures/anthropic/`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use bytes::Bytes;
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::support::*;

fn recorded(name: &str) -> String {
    std::fs::read_to_string(project_root().join("tests/fixtures/anthropic").join(name)).unwrap()
}

/// A running `g2 gateway`; killed when dropped.
struct GatewayProcess {
    child: Child,
    url: String,
    sockets: HashMap<String, PathBuf>,
    log: PathBuf,
    _logdir: tempfile::TempDir,
}

impl GatewayProcess {
    fn start(home: &TestHome, env: &[(&str, &str)]) -> Self {
        let logdir = tempfile::tempdir().unwrap();
        let log = logdir.path().join("stderr.log");
        let mut child = home
            .command(&["gateway", "--listen", "127.0.0.1:0"], env)
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("starting g2 gateway");
        let lines = lines_until(&mut child, "try");
        if !lines.last().is_some_and(|l| l.starts_with("try")) {
            let _ = child.wait();
            panic!(
                "g2 gateway ended early: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        let (mut url, mut sockets) = (None, HashMap::new());
        for line in &lines {
            let words: Vec<&str> = line.split_whitespace().collect();
            match words.as_slice() {
                ["listening", u] => url = Some(u.to_string()),
                ["group", folder, path] => {
                    sockets.insert(folder.to_string(), PathBuf::from(path));
                }
                _ => {}
            }
        }
        GatewayProcess {
            child,
            url: url.expect("listening line"),
            sockets,
            log,
            _logdir: logdir,
        }
    }

    /// Stops it the way an operator would (SIGTERM) and returns its log.
    fn stop(mut self) -> String {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.child.try_wait().unwrap().is_none() {
            assert!(
                Instant::now() < deadline,
                "g2 gateway did not stop on SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        std::fs::read_to_string(&self.log).unwrap()
    }
}

impl Drop for GatewayProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn usage(home: &TestHome) -> Vec<Value> {
    home.json(&["usage"]).as_array().unwrap().clone()
}

/// Runs the real Claude Code CLI in `dir` against the gateway; returns its
/// JSON result.
fn claude(claude_bin: &Path, dir: &Path, url: &str, prompt: &str, args: &[&str]) -> Value {
    let mut cmd = Command::new(claude_bin);
    // The prompt goes first: `--allowedTools` takes every word after it.
    cmd.current_dir(dir)
        .args(["-p", prompt])
        .args(args)
        .args(["--output-format", "json"])
        .env("HOME", dir.join("home"))
        .env("ANTHROPIC_BASE_URL", url)
        // A placeholder: the gateway never forwards it.
        .env("ANTHROPIC_API_KEY", "placeholder-not-a-key")
        .env_remove("ANTHROPIC_AUTH_TOKEN")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("running claude");
    let deadline = Instant::now() + Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("claude {args:?} took more than 120 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "claude {args:?} failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("claude output is not JSON ({e}): {stdout}"))
}

fn transcript_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[test]
fn claude_code_runs_end_to_end_on_the_offline_model() {
    let home = TestHome::new();
    let Some(claude_bin) =
        g2_host::doctor::find_claude(&home.home(), &g2_host::config::Settings::default())
    else {
        require("Claude Code (tools/claude-code)", false);
        return;
    };
    let gw = GatewayProcess::start(&home, &[("G2_PROVIDER", "offline")]);
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    std::fs::create_dir_all(dir.join(".claude")).unwrap();
    let hook_out = dir.join("precompact.json");
    std::fs::write(
        dir.join(".claude/settings.json"),
        json!({ "hooks": { "PreCompact": [{ "hooks": [
            { "type": "command", "command": format!("cat > '{}'", hook_out.display()) } ] }] } })
        .to_string(),
    )
    .unwrap();
    std::fs::write(dir.join("CLAUDE.md"), "# Test group\n\nBe brief.\n").unwrap();
    let claude = |prompt: &str, args: &[&str]| claude(&claude_bin, dir, &gw.url, prompt, args);

    // A plain turn comes back quoted.
    let first = claude("hello from the gateway test", &[]);
    assert_eq!(
        first["result"],
        "Offline model (g2) received: \"hello from the gateway test\""
    );
    let sid = first["session_id"].as_str().unwrap().to_string();

    // --resume keeps the session.
    let second = claude("what did I say?", &["--resume", &sid]);
    assert_eq!(second["session_id"], sid.as_str());
    assert_eq!(
        second["result"],
        "Offline model (g2) received: \"what did I say?\""
    );

    // g2:bash runs the real Bash tool; the answer carries its output.
    let bash = claude(
        "g2:bash echo hi",
        &["--resume", &sid, "--allowedTools", "Bash"],
    );
    assert_eq!(bash["result"], "g2:bash echo hi: hi");

    // g2:remember appends to CLAUDE.md through Read and Write.
    let remember = claude(
        "g2:remember The user prefers green tea.",
        &["--resume", &sid, "--allowedTools", "Read,Write"],
    );
    assert!(
        remember["result"]
            .as_str()
            .unwrap()
            .starts_with("g2:remember: added to"),
        "{remember}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("CLAUDE.md")).unwrap(),
        "# Test group\n\nBe brief.\nThe user prefers green tea.\n"
    );

    // /compact fires PreCompact and leaves a compact_boundary.
    let compact = claude("/compact", &["--resume", &sid]);
    assert_eq!(compact["session_id"], sid.as_str());
    let hook: Value =
        serde_json::from_str(&std::fs::read_to_string(&hook_out).expect("PreCompact hook ran"))
            .unwrap();
    assert_eq!(hook["hook_event_name"], "PreCompact");
    assert_eq!(hook["trigger"], "manual");
    assert_eq!(hook["session_id"], sid.as_str());
    let transcript = PathBuf::from(hook["transcript_path"].as_str().unwrap());
    let lines = transcript_lines(&transcript);
    assert!(
        lines
            .iter()
            .any(|l| l["type"] == "system" && l["subtype"] == "compact_boundary")
    );
    let summary = lines
        .iter()
        .find(|l| l["isCompactSummary"] == true)
        .expect("a compaction summary line");
    assert!(lines.iter().any(|l| {
        l["type"] == "assistant"
            && l["message"]["content"]
                .as_array()
                .is_some_and(|c| c.iter().any(|b| b["name"] == "Bash"))
    }));
    let summary_text = summary["message"]["content"].to_string();
    assert!(
        summary_text.contains("hello from the gateway test"),
        "{summary_text}"
    );
    assert!(summary_text.contains("Bash"), "{summary_text}");

    // Every transcript Claude Code wrote archives cleanly.
    let projects = dir.join("home/.claude/projects");
    let mut archived = 0;
    for entry in walk(&projects) {
        if entry.extension().is_none_or(|e| e != "jsonl") {
            continue;
        }
        let parsed = g2_core::transcript::parse_file(&entry).unwrap();
        assert_eq!(parsed.stats.malformed, 0, "{}", entry.display());
        let out = home.json(&["archive", entry.to_str().unwrap(), "--group", "main"]);
        let md = std::fs::read_to_string(home.path().join(out["path"].as_str().unwrap())).unwrap();
        assert!(
            !md.contains("\"type\":"),
            "JSON leaked into {}",
            out["path"]
        );
        if entry == transcript {
            for want in [
                "hello from the gateway test",
                "what did I say?",
                "**Summary**",
                "Conversation compacted",
            ] {
                assert!(md.contains(want), "archive lacks {want:?}:\n{md}");
            }
            assert!(!md.contains("<system-reminder>"), "{md}");
        }
        archived += 1;
    }
    assert!(archived >= 1);

    // All of it went through the gateway and was accounted to the TCP caller.
    let rows = usage(&home);
    let local: u64 = rows
        .iter()
        .filter(|r| r["group"] == "@local")
        .map(|r| r["requests"].as_u64().unwrap())
        .sum();
    assert!(local >= 8, "{rows:?}");
    assert!(
        rows.iter()
            .all(|r| r["provider"] == "offline" && r["errors"] == 0),
        "{rows:?}"
    );
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// An upstream that answers like the Anthropic API from recorded bodies,
/// chosen by the request's model, and remembers what it received.
/// A request upstream received: path and query, headers, JSON body.
pub(crate) type Seen = (String, HashMap<String, String>, Value);

#[derive(Clone, Default)]
pub(crate) struct Upstream {
    pub(crate) seen: Arc<Mutex<Vec<Seen>>>,
    release: Arc<Notify>,
    finished: Arc<AtomicBool>,
}

impl Upstream {
    pub(crate) async fn start(&self) -> String {
        let app = Router::new()
            .route("/v1/messages", post(replay))
            .route("/v1/messages/count_tokens", post(replay_count))
            .with_state(self.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        format!("http://{addr}")
    }

    fn record(&self, req: &Request, body: &Bytes) -> Value {
        let headers = req
            .headers()
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_string()))
            .collect();
        let pq = req
            .uri()
            .path_and_query()
            .map(ToString::to_string)
            .unwrap_or_default();
        let body: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
        self.seen.lock().unwrap().push((pq, headers, body.clone()));
        body
    }
}

fn sse_events(text: &str) -> Vec<Bytes> {
    text.split_inclusive("\n\n")
        .map(|e| Bytes::from(e.to_string()))
        .collect()
}

fn body_from(rx: tokio::sync::mpsc::Receiver<Bytes>) -> Body {
    Body::from_stream(futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<_, std::convert::Infallible>(b), rx))
    }))
}

async fn replay(State(u): State<Upstream>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    let req = Request::from_parts(parts, Body::empty());
    let body = u.record(&req, &bytes);
    let sse = |text: String| {
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        tokio::spawn(async move {
            for e in sse_events(&text) {
                if tx.send(e).await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        });
        (
            [
                ("content-type", "text/event-stream"),
                ("request-id", "req_replay"),
            ],
            body_from(rx),
        )
            .into_response()
    };
    let json_reply = |status: u16, text: String| {
        (
            StatusCode::from_u16(status).unwrap(),
            [("content-type", "application/json")],
            text,
        )
            .into_response()
    };
    match body["model"].as_str().unwrap_or("") {
        "replay-stream" => sse(recorded("stream.sse")),
        "replay-stream-error" => sse(recorded("stream_error.sse")),
        "replay-message" => json_reply(200, recorded("message.json")),
        "replay-overloaded" => json_reply(529, recorded("overloaded.json")),
        "replay-invalid" => json_reply(400, recorded("invalid_request.json")),
        "replay-proxy" => {
            // A misbehaving proxy that echoes the credential it got.
            let key = req.headers().get("x-api-key").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
            (StatusCode::BAD_GATEWAY, [("content-type", "text/html")], format!("<html>bad gateway; your key {key}</html>"))
                .into_response()
        }
        "replay-hold" => {
            // First event now; the rest only once the test says so.
            let (tx, rx) = tokio::sync::mpsc::channel(16);
            let (release, finished) = (u.release.clone(), u.finished.clone());
            tokio::spawn(async move {
                let mut events = sse_events(&recorded("stream.sse")).into_iter();
                let _ = tx.send(events.next().unwrap()).await;
                let _ = tokio::time::timeout(Duration::from_secs(20), release.notified()).await;
                for e in events {
                    let _ = tx.send(e).await;
                }
                finished.store(true, Ordering::SeqCst);
            });
            ([("content-type", "text/event-stream")], body_from(rx)).into_response()
        }
        other => json_reply(
            404,
            json!({ "type": "error", "error": { "type": "not_found_error", "message": format!("model: {other}") } })
                .to_string(),
        ),
    }
}

async fn replay_count(State(u): State<Upstream>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    u.record(&Request::from_parts(parts, Body::empty()), &bytes);
    (
        [("content-type", "application/json")],
        "{\"input_tokens\":42}",
    )
        .into_response()
}

async fn post_json(
    client: &reqwest::Client,
    url: &str,
    body: Value,
) -> (u16, HashMap<String, String>, String) {
    let resp = client
        .post(url)
        .header("x-api-key", "caller-placeholder")
        .header("anthropic-version", "2023-06-01")
        .header("anthropic-beta", "test-beta-2026")
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let headers = resp
        .headers()
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_string()))
        .collect();
    (status, headers, resp.text().await.unwrap())
}

fn request(model: &str, stream: bool) -> Value {
    json!({ "model": model, "max_tokens": 64, "stream": stream,
            "messages": [{ "role": "user", "content": "Hello" }] })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_provider_relays_answers_and_never_leaks_the_key() {
    let upstream = Upstream::default();
    let base = upstream.start().await;
    let home = TestHome::new();
    let key = format!("sk-ant-test-{}", uuid::Uuid::new_v4().simple());
    let gw = GatewayProcess::start(
        &home,
        &[
            ("ANTHROPIC_API_KEY", &key),
            ("G2_GATEWAY__UPSTREAM_URL", &base),
            ("G2_LOG", "trace"),
        ],
    );
    let client = http_client();
    let url = format!("{}/v1/messages?beta=true", gw.url);
    let mut bodies = Vec::new();

    let (status, headers, body) = post_json(&client, &url, request("replay-stream", true)).await;
    assert_eq!(status, 200);
    assert!(headers["content-type"].starts_with("text/event-stream"));
    assert_eq!(headers["request-id"], "req_replay");
    assert_eq!(
        body,
        recorded("stream.sse"),
        "the stream must be relayed byte for byte"
    );
    bodies.push(body);

    let (status, _, body) = post_json(&client, &url, request("replay-message", false)).await;
    assert_eq!(status, 200);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap(),
        serde_json::from_str::<Value>(&recorded("message.json")).unwrap()
    );
    bodies.push(body);

    for (model, want_status, fixture) in [
        ("replay-overloaded", 529, "overloaded.json"),
        ("replay-invalid", 400, "invalid_request.json"),
    ] {
        let (status, _, body) = post_json(&client, &url, request(model, true)).await;
        assert_eq!(status, want_status, "{model}");
        assert_eq!(body.trim(), recorded(fixture).trim(), "{model}");
        bodies.push(body);
    }

    // A non-Anthropic error body is wrapped in Anthropic's shape and scrubbed.
    let (status, _, body) = post_json(&client, &url, request("replay-proxy", true)).await;
    assert_eq!(status, 502);
    let err: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(err["type"], "error");
    assert_eq!(err["error"]["type"], "api_error");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("[redacted]"),
        "{body}"
    );
    bodies.push(body);

    let (status, _, body) = post_json(&client, &url, request("replay-stream-error", true)).await;
    assert_eq!(status, 200);
    assert!(body.contains("event: error"));
    bodies.push(body);

    let (status, _, body) = post_json(
        &client,
        &format!("{}/v1/messages/count_tokens", gw.url),
        request("replay-message", false),
    )
    .await;
    assert_eq!((status, body.as_str()), (200, "{\"input_tokens\":42}"));

    // Upstream got the host's key, the caller's headers and query, never the
    // caller's placeholder credential.
    {
        let seen = upstream.seen.lock().unwrap();
        assert_eq!(seen.len(), 7);
        for (pq, headers, _) in seen.iter() {
            assert_eq!(headers.get("x-api-key"), Some(&key));
            assert_eq!(
                headers.get("anthropic-beta").map(String::as_str),
                Some("test-beta-2026")
            );
            assert!(
                !headers.values().any(|v| v.contains("caller-placeholder")),
                "{headers:?}"
            );
            assert!(
                pq == "/v1/messages?beta=true" || pq == "/v1/messages/count_tokens",
                "{pq}"
            );
        }
    }

    let log = gw.stop();
    assert!(
        log.contains("model request"),
        "the trace log is empty?\n{log}"
    );
    for (what, text) in bodies
        .iter()
        .map(|b| ("a response", b.as_str()))
        .chain([("the log", log.as_str())])
    {
        assert!(!text.contains(&key), "the key appeared in {what}");
    }
    for f in ["data/g2.db", "data/g2.db-wal"] {
        if let Ok(bytes) = std::fs::read(home.path().join(f)) {
            assert!(
                memchr::memmem::find(&bytes, key.as_bytes()).is_none(),
                "the key is stored in {f}"
            );
        }
    }

    // Usage is read from what upstream reported.
    let rows = usage(&home);
    let row = |model: &str| {
        rows.iter()
            .find(|r| r["model"] == model)
            .unwrap_or_else(|| panic!("{model}: {rows:?}"))
    };
    assert_eq!(row("replay-stream")["input_tokens"], 472);
    assert_eq!(row("replay-stream")["cache_read_tokens"], 2048);
    assert_eq!(row("replay-stream")["output_tokens"], 15);
    assert_eq!(row("replay-message")["output_tokens"], 503);
    assert_eq!(row("replay-overloaded")["errors"], 1);
    assert_eq!(row("replay-stream-error")["errors"], 1);
    assert!(
        rows.iter()
            .all(|r| r["group"] == "@local" && r["provider"] == "anthropic")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_events_are_relayed_before_upstream_finishes() {
    let upstream = Upstream::default();
    let base = upstream.start().await;
    let home = TestHome::new();
    let gw = GatewayProcess::start(
        &home,
        &[
            ("ANTHROPIC_API_KEY", "sk-ant-test"),
            ("G2_GATEWAY__UPSTREAM_URL", &base),
        ],
    );
    let resp = http_client()
        .post(format!("{}/v1/messages", gw.url))
        .json(&request("replay-hold", true))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let mut stream = resp.bytes_stream();
    let first = tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .expect("the first event must arrive while upstream is still holding the rest")
        .unwrap()
        .unwrap();
    assert!(String::from_utf8_lossy(&first).starts_with("event: message_start"));
    assert!(
        !upstream.finished.load(Ordering::SeqCst),
        "upstream had already finished"
    );
    upstream.release.notify_one();
    let mut all = first.to_vec();
    while let Some(chunk) = stream.next().await {
        all.extend_from_slice(&chunk.unwrap());
    }
    assert!(upstream.finished.load(Ordering::SeqCst));
    assert_eq!(String::from_utf8(all).unwrap(), recorded("stream.sse"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_socket_is_its_groups_identity() {
    let home = TestHome::new();
    home.ok(&["groups", "add", "alpha", "--name", "Alpha"]);
    home.ok(&["groups", "add", "beta", "--name", "Beta"]);
    let gw = GatewayProcess::start(&home, &[("G2_PROVIDER", "offline")]);
    let a = gw.sockets["alpha"].clone();
    let a = &a;
    assert_eq!(a, &home.path().join("data/ipc/alpha/model.sock"));
    assert_eq!(
        gw.sockets["beta"],
        home.path().join("data/ipc/beta/model.sock")
    );
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(a).unwrap().permissions().mode() & 0o777,
            0o666
        );
    }
    for _ in 0..3 {
        let (status, _, body) = post_json(
            &socket_client(a),
            "http://g2/v1/messages",
            request("m-alpha", false),
        )
        .await;
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("received: \\\"Hello\\\""), "{body}");
    }
    // Nothing in a request can claim another group.
    let mut claim = request("m-alpha", false);
    claim["metadata"] = json!({ "user_id": "beta" });
    let resp = socket_client(a)
        .post("http://g2/v1/messages")
        .header("x-g2-group", "beta")
        .json(&claim)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let (status, _, _) = post_json(
        &http_client(),
        &format!("{}/v1/messages", gw.url),
        request("m-tcp", true),
    )
    .await;
    assert_eq!(status, 200);
    let (status, _, body) = post_json(
        &socket_client(a),
        "http://g2/v1/messages/count_tokens",
        request("m-alpha", false),
    )
    .await;
    assert_eq!(status, 200);
    assert!(
        serde_json::from_str::<Value>(&body).unwrap()["input_tokens"]
            .as_u64()
            .unwrap()
            > 0
    );

    // Killed hard, the host leaves its socket files behind; the next start
    // replaces them. (Usage rows are written just after each answer; wait
    // for them so the kill does not race the writer.)
    let alpha_rows = |home: &TestHome| {
        usage(home)
            .iter()
            .filter(|r| r["group"] == "alpha")
            .map(|r| r["requests"].as_u64().unwrap())
            .sum::<u64>()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while alpha_rows(&home) < 5 {
        assert!(Instant::now() < deadline, "usage rows were not written");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(gw);
    assert!(a.exists());
    let gw = GatewayProcess::start(&home, &[("G2_PROVIDER", "offline")]);
    let (status, _, _) = post_json(
        &socket_client(a),
        "http://g2/v1/messages",
        request("m-alpha", false),
    )
    .await;
    assert_eq!(status, 200);
    gw.stop();

    let rows = usage(&home);
    let by_group = |g: &str| {
        rows.iter()
            .filter(|r| r["group"] == g)
            .map(|r| r["requests"].as_u64().unwrap())
            .sum::<u64>()
    };
    assert_eq!(by_group("alpha"), 6, "{rows:?}");
    assert_eq!(by_group("beta"), 0, "{rows:?}");
    assert_eq!(by_group("@local"), 1, "{rows:?}");
    let only_alpha = home.json(&["usage", "--group", "alpha"]);
    assert!(
        only_alpha
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["group"] == "alpha")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_refuse_with_anthropic_errors() {
    let upstream = Upstream::default();
    let base = upstream.start().await;
    let home = TestHome::new();
    std::fs::write(
        home.path().join("g2.toml"),
        "[gateway]\nmax_concurrent = 1\ndaily_tokens = 1000\n",
    )
    .unwrap();
    let gw = GatewayProcess::start(
        &home,
        &[
            ("ANTHROPIC_API_KEY", "sk-ant-test"),
            ("G2_GATEWAY__UPSTREAM_URL", &base),
        ],
    );
    let client = http_client();
    let url = format!("{}/v1/messages", gw.url);

    // One request in flight takes the only slot.
    let held = client
        .post(&url)
        .json(&request("replay-hold", true))
        .send()
        .await
        .unwrap();
    assert_eq!(held.status(), 200);
    let (status, headers, body) = post_json(&client, &url, request("replay-stream", true)).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(headers.get("retry-after").map(String::as_str), Some("1"));
    let err: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(err["error"]["type"], "rate_limit_error");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("max_concurrent"),
        "{body}"
    );

    // The held answer completes: 472 + 2048 + 15 tokens, over the budget.
    upstream.release.notify_one();
    let text = held.text().await.unwrap();
    assert!(text.ends_with("data: {\"type\":\"message_stop\"}\n\n"));

    let (status, headers, body) = post_json(&client, &url, request("replay-stream", true)).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(
        headers.get("x-should-retry").map(String::as_str),
        Some("false")
    );
    let err: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(err["error"]["type"], "rate_limit_error");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("2535 of its 1000 tokens"),
        "{body}"
    );
    gw.stop();

    let rows = usage(&home);
    let refused: u64 = rows.iter().map(|r| r["refused"].as_u64().unwrap()).sum();
    assert_eq!(refused, 2, "{rows:?}");
    assert_eq!(
        upstream.seen.lock().unwrap().len(),
        1,
        "refused requests must not reach upstream"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_clear_anthropic_errors() {
    let home = TestHome::new();
    let gw = GatewayProcess::start(
        &home,
        &[
            ("G2_PROVIDER", "offline"),
            ("G2_GATEWAY__MAX_REQUEST_BYTES", "4096"),
        ],
    );
    let client = http_client();
    let url = format!("{}/v1/messages", gw.url);
    let error_of = |body: &str| -> (String, String) {
        let v: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
        assert_eq!(v["type"], "error");
        (
            v["error"]["type"].as_str().unwrap().into(),
            v["error"]["message"].as_str().unwrap().into(),
        )
    };
    let cases: Vec<(Bytes, u16, &str)> = vec![
        (
            Bytes::from_static(b"{not json"),
            400,
            "invalid_request_error",
        ),
        (
            Bytes::from_static(b"{\"max_tokens\":5}"),
            400,
            "invalid_request_error",
        ),
        (
            Bytes::from_static(b"{\"model\":\"m\",\"messages\":\"nope\"}"),
            400,
            "invalid_request_error",
        ),
        (
            Bytes::from(format!(
                "{{\"model\":\"m\",\"pad\":\"{}\"}}",
                "x".repeat(8000)
            )),
            413,
            "request_too_large",
        ),
    ];
    for (body, want, kind) in cases {
        let resp = client.post(&url).body(body.clone()).send().await.unwrap();
        assert_eq!(
            resp.status().as_u16(),
            want,
            "{:?}",
            &body[..body.len().min(40)]
        );
        let (k, msg) = error_of(&resp.text().await.unwrap());
        assert_eq!(k, kind, "{msg}");
        assert!(!msg.is_empty());
    }
    let resp = client
        .get(format!("{}/v1/models", gw.url))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
    assert_eq!(error_of(&resp.text().await.unwrap()).0, "not_found_error");
    for path in ["/v1/messages", "/v1/messages/count_tokens"] {
        let resp = client
            .get(format!("{}{path}", gw.url))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 405, "{path}");
        assert_eq!(resp.headers()["allow"], "POST");
        assert_eq!(
            error_of(&resp.text().await.unwrap()).0,
            "invalid_request_error"
        );
    }
    // Still serving.
    let (status, _, _) = post_json(&client, &url, request("m", false)).await;
    assert_eq!(status, 200);

    // Refused configurations.
    let out = home.fails(&["gateway", "--listen", "0.0.0.0:0"]);
    assert!(out.contains("only loopback"), "{out}");
    let out = home.g2_with(
        &["gateway", "--listen", "127.0.0.1:0"],
        &[("G2_PROVIDER", "anthropic")],
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("ANTHROPIC_API_KEY"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_connections_are_closed_within_the_connection_bound() {
    raise_fd_limit();
    let home = TestHome::new();
    let max = 20;
    let gw = GatewayProcess::start(
        &home,
        &[
            ("G2_PROVIDER", "offline"),
            ("G2_GATEWAY__HEADER_TIMEOUT_MS", "1000"),
            ("G2_GATEWAY__BODY_TIMEOUT_MS", "1000"),
            ("G2_GATEWAY__IDLE_TIMEOUT_SECS", "1"),
            ("G2_GATEWAY__MAX_CONNECTIONS", &max.to_string()),
        ],
    );
    let pid = gw.child.id();
    let before = open_fds(pid);
    let addr = gw.url.strip_prefix("http://").unwrap().to_string();
    let socket = gw.sockets["main"].clone();
    // Three times the bound on each listener: loopback TCP and the main group's socket.
    let mut closing = Vec::new();
    let mut tcp = Vec::new();
    let mut unix = Vec::new();
    for i in 0..3 * max {
        let kind = Stall::nth(i);
        let mut t = tokio::net::TcpStream::connect(&addr).await.unwrap();
        kind.start(&mut t, &addr, "/v1/messages", "/v1/models")
            .await;
        tcp.push((kind, t));
        let mut u = tokio::net::UnixStream::connect(&socket).await.unwrap();
        kind.start(&mut u, &addr, "/v1/messages", "/v1/models")
            .await;
        unix.push((kind, u));
    }
    // The rest wait in the listen backlogs, holding no descriptor of the gateway.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let during = open_fds(pid);
    assert!(
        during <= before + 2 * max + 4,
        "{during} descriptors open, {before} before, bound {max} per listener"
    );
    for (kind, t) in tcp {
        closing.push(tokio::spawn(
            async move { (kind, until_closed(t, 60).await) },
        ));
    }
    for (kind, u) in unix {
        closing.push(tokio::spawn(
            async move { (kind, until_closed(u, 60).await) },
        ));
    }
    for c in closing {
        let (kind, got) = c.await.unwrap();
        match kind {
            Stall::Head => assert!(got.is_empty() || got.starts_with("HTTP/1.1 408"), "{got}"),
            Stall::Body => {
                assert!(got.starts_with("HTTP/1.1 408"), "{got}");
                assert!(got.contains(r#""type":"error""#), "{got}");
            }
            Stall::Idle => assert!(got.starts_with("HTTP/1.1 404"), "{got}"),
        }
    }
    // A real request is answered on each listener.
    let (status, _, _) = post_json(
        &http_client(),
        &format!("{}/v1/messages", gw.url),
        request("m", false),
    )
    .await;
    assert_eq!(status, 200);
    let (status, _, _) = post_json(
        &socket_client(&socket),
        "http://g2/v1/messages",
        request("m", false),
    )
    .await;
    assert_eq!(status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tcp_listener_answers_only_loopback_names() {
    let home = TestHome::new();
    let gw = GatewayProcess::start(&home, &[("G2_PROVIDER", "offline")]);
    let port = gw.url.rsplit(':').next().unwrap().to_string();
    let body =
        json!({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]});
    let send = |host: String, origin: Option<&'static str>| {
        let (url, body) = (format!("{}/v1/messages", gw.url), body.clone());
        async move {
            let mut r = http_client().post(url).header("host", host).json(&body);
            if let Some(o) = origin {
                r = r.header("origin", o);
            }
            let resp = r.send().await.unwrap();
            (resp.status().as_u16(), resp.json::<Value>().await.unwrap())
        }
    };
    // A page whose name was rebound to 127.0.0.1 would spend the host's
    // credential: refused in Anthropic's error shape.
    let (status, body) = send(format!("attacker.example:{port}"), None).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "permission_error", "{body}");
    let (status, body) = send(format!("127.0.0.1:{port}"), Some("http://attacker.example")).await;
    assert_eq!(status, 403, "{body}");
    let (status, body) = send(format!("127.0.0.1:{port}"), None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["type"], "message", "{body}");
    // The group sockets are not behind a name: unchanged.
    let socket = gw.sockets["main"].clone();
    let r = socket_client(&socket)
        .post("http://g2/v1/messages")
        .json(&json!({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}
