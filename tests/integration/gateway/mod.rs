//! The model gateway, end to end: the real `g2 gateway` process, real HTTP
//! over loopback TCP and Unix sockets, the real Claude Code CLI on the
//! offline model, and the `anthropic` provider against an upstream server
//! that replays recorded Anthropic answers (`tests/fixtures/anthropic/`).
//!
//! Here: Claude Code on the offline model and the listener's bounds;
//! `anthropic.rs`: the provider against the replaying upstream;
//! `limits.rs`: identities, limits and refusals.

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

mod anthropic;
mod limits;

pub(crate) use anthropic::Upstream;

fn recorded(name: &str) -> String {
    std::fs::read_to_string(project_root().join("tests/fixtures/anthropic").join(name)).unwrap()
}

/// A running `g2 gateway`; killed when dropped.
pub(crate) struct GatewayProcess {
    child: Child,
    pub(crate) url: String,
    sockets: HashMap<String, PathBuf>,
    log: PathBuf,
    _logdir: tempfile::TempDir,
}

impl GatewayProcess {
    pub(crate) fn start(home: &TestHome, env: &[(&str, &str)]) -> Self {
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
        kind.check_closed(&got, r#""type":"error""#, "HTTP/1.1 404");
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
